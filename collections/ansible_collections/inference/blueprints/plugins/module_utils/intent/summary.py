# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readable lines about a cluster's intent, for the playbook output and the CLI."""

from __future__ import annotations

from ..planner import report as plan_report
from ..planner import units
from . import burst, front_door_tls, placement, slo_gate


def pool_text(role: str, pool: dict) -> str:
    """One pool as the printout and the object annotation both say it: planned ``replicas`` x
    ``gpus_per_replica`` ``gpu``, the pods a replica spans when more than one
    (``pods_per_replica``), and whether an autoscaler moves it (``autoscaled``)."""
    gpus, pods = int(pool["gpus_per_replica"]), int(pool.get("pods_per_replica") or 1)
    text = f"{role} {pool['replicas']} x {gpus} {pool['gpu']}"
    if pods > 1:
        text += f" ({pods} pods of {gpus // pods})"
    return text + (", autoscaled" if pool.get("autoscaled") else "")


def _pools(plan: dict, served: dict | None = None) -> str:
    workloads = {w["role"]: w for w in _workloads(served)}
    parts = []
    for role, pool in (plan.get("pools") or {}).items():
        if pool:
            w = workloads.get(role) or {}
            parts.append(
                pool_text(
                    role,
                    {
                        **pool,
                        "pods_per_replica": w.get("pods_per_replica", 1),
                        "autoscaled": w.get("replicas", 0) is None,
                    },
                )
            )
    return ", ".join(parts)


def _workloads(served: dict | None) -> list[dict]:
    return [w for w in ((served or {}).get("prefill"), (served or {}).get("main")) if w]


def lines(intent: dict) -> list[str]:
    out = [f"{intent['host']}: blueprint {intent['site']['blueprint']}, delivery {intent['site']['delivery']}"]
    served = {m["name"]: m for m in (intent.get("serving") or {}).get("models") or []}
    for entry in intent["plans"]:
        model, plan = entry["model"], entry["plan"]
        lay = plan["layout"]
        pools = _pools(plan, served.get(model["name"]))
        out.append(
            f"{model['name']} ({model['id']}): TP={lay['tp']} PP={lay['pp']} DP={lay['dp']} EP={lay['ep']} "
            f"DCP={lay['dcp']} PCP={lay['pcp']}; disaggregated={plan['disaggregated']}; pools: {pools}"
        )
        spec = (plan.get("speculative") or {}).get("method", "off")
        conn = (plan.get("kv_connector") or {}).get("name", "none")
        out.append(f"{model['name']}: speculative {spec}; KV connector {conn}")
        out.extend(
            f"{model['name']}: {d['what']} = {plan_report.decision_choice(d)} | {d['why']}" for d in plan["decisions"]
        )
        out.extend(f"{model['name']}: WARNING {w}" for w in plan.get("warnings") or [])
    out.extend(
        f"{d['model']}: {d['what']} = {plan_report.decision_choice(d)} | {d['why']}"
        for d in intent.get("decisions") or []
    )
    out.extend(placement.lines(intent))
    out.extend(grid_lines(intent))
    out.extend(burst.summary_lines(intent))  # sovereign burst: sizing and warm-up budget
    out.extend(front_door_tls.summary_lines(intent))  # each front door's TLS; a plaintext one warned
    out.extend(slo_gate.summary_lines(intent))  # plans that miss their SLOs: stopped, rendered or accepted
    return out


def grid_lines(intent: dict) -> list[str]:
    """The AI grid's own figures (intent/grid.py report): GPUs per class, cost per tier, the cascade."""
    rep = (intent.get("gateway") or {}).get("report")
    if not rep:
        return []
    out = [f"grid: {rep['gpus']} GPUs, {rep['gpu_hour_cost']:g} {units.COST_PER_HOUR}"]
    out += [
        f"grid class {c['model']}: {c['gpus']} GPUs, {units.with_unit(c['cost_per_1k_requests'], units.COST)} per 1k "
        f"requests | {c['why']}"
        for c in rep["classes"]
    ]
    out.append(
        "grid cost share: "
        + ", ".join(f"{t['tier']} {t['share'] * 100:.1f}% ({len(t['tenants'])} tenants)" for t in rep["tiers"])
        + f" | {rep['tiers_why']}"
    )
    cas = rep.get("cascade")
    if cas and cas.get("saves") is not None:
        out.append(
            f"grid cascade {' > '.join(cas['order'])}: saves {cas['saves'] * 100:.0f}% "
            f"({cas['saves_with_retries'] * 100:.0f}% if every escalation paid for a smaller answer) | {cas['why']}"
        )
    return out


def site_markdown(intents: dict) -> str:
    """Site-level sections of the plan report (after the per-model plans): what no single plan shows."""
    parts = []
    for host, intent in sorted(intents.items()):
        rep = (intent.get("gateway") or {}).get("report")
        if not rep:
            continue
        head = f"| class | GPUs | cost per 1k requests ({units.COST}) | why |"
        parts += [f"## {host}: AI grid", "", head, "|---|---|---|---|"]
        parts += [f"| {c['model']} | {c['gpus']} | {c['cost_per_1k_requests']} | {c['why']} |" for c in rep["classes"]]
        parts += ["", "| tier | tenants | share of the GPU cost |", "|---|---|---|"]
        parts += [f"| {t['tier']} | {', '.join(t['tenants'])} | {t['share'] * 100:.1f}% |" for t in rep["tiers"]]
        parts += ["", f"Shares: {rep['tiers_why']}.", ""]
        cas = rep.get("cascade")
        if cas and cas.get("saves") is not None:
            parts += [
                f"Cascade {' > '.join(cas['order'])}: saves {cas['saves'] * 100:.0f}% against sending every cascade "
                f"request to the last class ({cas['saves_with_retries'] * 100:.0f}% if each escalation first paid "
                f"for a smaller answer). {cas['why']}.",
                "",
            ]
    parts += placement.site_markdown(intents)
    parts += burst.site_markdown(intents)
    return "\n".join(parts)


def fleet_lines(intents: dict) -> list[str]:
    """The plan lines of many clusters, clusters with the same plans listed once together."""
    import json

    groups: dict[str, list[str]] = {}
    for host, intent in intents.items():
        key = json.dumps([p["plan"] for p in intent["plans"]], sort_keys=True)
        groups.setdefault(key, []).append(host)
    out = []
    for hosts in groups.values():
        first = intents[hosts[0]]
        shown = ", ".join(hosts[:5]) + (f" and {len(hosts) - 5} more" if len(hosts) > 5 else "")
        out.append(f"clusters {shown}: the same plan" if len(hosts) > 1 else f"cluster {shown}")
        out.extend("  " + line for line in lines(first)[1:])
    return out


def write_site_report(intents: dict, directory: str) -> list[str]:
    """The plan report of a site's clusters (report.md first in the paths): every model's plan,
    then the site-level sections."""
    entries = [(f"{h}/{p['model']['name']}", p["plan"]) for h, i in sorted(intents.items()) for p in i["plans"]]
    paths = plan_report.write_report(entries, directory)
    extra = site_markdown(intents)
    if extra:
        with open(paths[0], "a", encoding="utf-8") as fh:
            fh.write("\n\n" + extra)
    return paths
