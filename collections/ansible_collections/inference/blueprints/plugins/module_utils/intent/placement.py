# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a cluster's serving pods go: the plan's pods per node, for the plan report and the playbook output.

The pods are the ones the deployment intent plans (``platform.requirements.pods``: every workload's
planned replicas x pods per replica, with its GPUs and RDMA devices per pod), placed on the nodes the
inventory's hardware states by the same packing preflight runs on the cluster's nodes
(``cluster_facts.pack_pods``). It is one placement that fits; kube-scheduler may spread the pods
differently (its default scoring prefers the least allocated node). verify reports where they were
bound (``k8s_endpoints``' placement).

Pure Python over plain data; no Ansible, no Jinja.
"""

from __future__ import annotations

from .. import cluster_facts


def _nodes(intent: dict) -> list[dict]:
    """The GPU nodes of the inventory: the site's hardware, and the pool of each model that has its own GPU type."""
    hardwares = [intent["hardware"]]
    for entry in intent["plans"]:
        own = (entry.get("model") or {}).get("hardware") or {}
        if own.get("gpu") and own["gpu"] not in {h.get("gpu") for h in hardwares} | {
            h.get("decode_gpu") for h in hardwares
        }:
            hardwares.append({"gpu": own["gpu"], "gpus_per_node": own.get("gpus_per_node"), "nodes": own.get("nodes")})
    nodes = []
    for i, hw in enumerate(hardwares):
        for n in cluster_facts.placement_nodes(cluster_facts.facts_from_inventory(hw)):
            name = n["name"].removeprefix("inventory-")
            nodes.append({**n, "name": name if i == 0 else f"{hw['gpu']}-{name}"})
    return nodes


def planned(intent: dict) -> dict:
    """``{nodes: [{name, gpu, gpus, used, rdma, pods}], unplaced: [...], pods: [...]}`` of one cluster's intent."""
    pods = (intent.get("platform") or {}).get("requirements", {}).get("pods") or []
    placed, unplaced = cluster_facts.pack_pods(_nodes(intent), pods)
    nodes = [
        {
            "name": n["name"],
            "gpu": n["catalog_id"] or n["product"],
            "gpus": n["gpus"],
            "used": n["gpus"] - n["free"],
            "rdma": n["rdma"],
            "pods": n["pods"],
        }
        for n in placed
    ]
    return {"nodes": nodes, "unplaced": unplaced, "pods": pods}


def _per_node(nodes: list[dict], model: str, role: str) -> str:
    parts = []
    for n in nodes:
        mine = [p for p in n["pods"] if p["model"] == model and p["role"] == role]
        if mine:
            gpus, rdma = sum(p["gpus"] for p in mine), sum(p["rdma"] for p in mine)
            parts.append(
                f"{n['name']}: {len(mine)} ({gpus} GPU{'s' if gpus > 1 else ''}" + (f", {rdma} RDMA)" if rdma else ")")
            )
    return ", ".join(parts)


def lines(intent: dict) -> list[str]:
    """One line per pool and one for the nodes, for the playbook output."""
    plan = planned(intent)
    out = []
    for p in plan["pods"]:
        where = _per_node(plan["nodes"], p["model"], p["role"])
        out.append(
            f"{p['model']}: placement {p['role']} {p['count']} pod(s) x {p['gpus']} {p['gpu']}"
            + (f" + {p['rdma']} RDMA device" if p["rdma"] else "")
            + f"; planned on {where or 'no node'}"
        )
    for u in plan["unplaced"]:
        out.append(f"{u['model']}: WARNING placement {u['role']}: {u['unplaced']} pod(s) fit no node of the inventory")
    return out


def site_markdown(intents: dict) -> list[str]:
    """The plan report's placement section of every cluster."""
    parts: list[str] = []
    for host, intent in sorted(intents.items()):
        plan = planned(intent)
        if not plan["pods"]:
            continue
        parts += [
            f"## {host}: placement",
            "",
            "The serving pods the plan needs, placed on the inventory's nodes as preflight places them on the "
            "cluster's (each pod's GPUs on one node; RDMA pods on nodes with RDMA NICs). kube-scheduler may "
            "spread them differently; verify reports where they were bound.",
            "",
            "| model | pool | pods | GPUs per pod | RDMA devices per pod "
            "| planned per node: pods (GPUs, RDMA devices) |",
            "|---|---|---|---|---|---|",
        ]
        parts += [
            f"| {p['model']} | {p['role']} | {p['count']} | {p['gpus']} {p['gpu']} | {p['rdma']} | "
            f"{_per_node(plan['nodes'], p['model'], p['role']) or 'none'} |"
            for p in plan["pods"]
        ]
        parts += ["", "| node | GPUs used | RDMA NIC | models |", "|---|---|---|---|"]
        parts += [
            f"| {n['name']} | {n['used']} of {n['gpus']} {n['gpu']} | {'yes' if n['rdma'] else 'no'} | "
            f"{', '.join(sorted({p['model'] for p in n['pods']})) or '-'} |"
            for n in plan["nodes"]
        ]
        for u in plan["unplaced"]:
            parts.append(
                f"\n**{u['unplaced']} of {u['count']} {u['model']} {u['role']} pod(s) fit no node of the inventory**: "
                "the plans of the site's models together need more than its hardware (preflight stops such a site)."
            )
        parts.append("")
    return parts
