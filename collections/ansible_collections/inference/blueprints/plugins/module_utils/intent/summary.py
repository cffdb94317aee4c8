# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readable lines about a cluster's intent, for the playbook output and the CLI."""

from __future__ import annotations


def _pools(plan: dict) -> str:
    parts = []
    for role, pool in (plan.get("pools") or {}).items():
        if pool:
            parts.append(f"{role} {pool['replicas']} x {pool['gpus_per_replica']} {pool['gpu']}")
    return ", ".join(parts)


def lines(intent: dict) -> list[str]:
    out = [f"{intent['host']}: blueprint {intent['site']['blueprint']}, delivery {intent['site']['delivery']}"]
    for entry in intent["plans"]:
        model, plan = entry["model"], entry["plan"]
        lay = plan["layout"]
        out.append(
            f"{model['name']} ({model['id']}): TP={lay['tp']} PP={lay['pp']} DP={lay['dp']} EP={lay['ep']} "
            f"DCP={lay['dcp']} PCP={lay['pcp']}; disaggregated={plan['disaggregated']}; pools: {_pools(plan)}"
        )
        spec = (plan.get("speculative") or {}).get("method", "off")
        conn = (plan.get("kv_connector") or {}).get("name", "none")
        out.append(f"{model['name']}: speculative {spec}; KV connector {conn}")
        out.extend(f"{model['name']}: {d['what']} = {d['choice']} | {d['why']}" for d in plan["decisions"])
        out.extend(f"{model['name']}: WARNING {w}" for w in plan.get("warnings") or [])
    out.extend(f"{d['model']}: {d['what']} = {d['choice']} | {d['why']}" for d in intent.get("decisions") or [])
    return out


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
