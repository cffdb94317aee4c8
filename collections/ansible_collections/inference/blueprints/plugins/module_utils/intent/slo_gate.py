# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plans that miss their SLOs on the site's hardware: found once when the intent is built, said by the plan
summary, and a stop before anything is applied.

A model whose plan misses an SLO (``plan.latency.meets_slo`` false: too few GPUs for the traffic, or a latency over
its SLO at the planned load) is a converge that would deploy something known not to meet what the site asked. The
intent records each miss (``slo_misses``) with the GPUs that would meet it, found by planning the same model on more
nodes of the same GPU (as the planner's own shortfall warning counts them). A cluster that applies (delivery apply)
or whose tree Argo CD applies (gitops) stops there unless the site sets ``accept_missed_slo: true``; a render writes
files for review and applies nothing, so it is not stopped (the plan summary says the miss). The stop is made
where the stages that apply compute a cluster's intent (plugin_utils/intents.compute: preflight, the serving apply,
the GitOps tree); the site action computes without it unless asked (``stop_on_missed_slo``), so ``plan.yml``
prints the plan with its misses, and verify, drift and teardown of such a site are never stopped by them.
"""

from __future__ import annotations

import math

from ..planner import PlanError
from .schema import SchemaError

# Deliveries whose converge puts the plan on a cluster (a render only writes files for review).
STOPPING_DELIVERIES = ("apply", "gitops")
# How many larger clusters are planned to find the GPUs that meet the SLOs (each at least 4x the nodes when the
# plan says no number of engines it tried carries the traffic).
_ATTEMPTS = 6


class MissedSLO(SchemaError):
    """A converge stopped because plans miss their SLOs (``misses``: {host: [miss]})."""

    def __init__(self, errors, misses: dict, where: str = ""):
        super().__init__(errors, where)
        self.misses = misses


def _needed(p: dict) -> int:
    """GPUs the plan needs for its traffic (the pools as the traffic needs them, not the hardware there is)."""
    if p.get("disaggregated"):
        pools = p["pools"]
        return sum(int((pools.get(r) or {}).get("required_gpus") or 0) for r in ("prefill", "decode"))
    return int((p.get("estimates") or {}).get("gpus_needed") or 0)


def gpus_that_meet(site: dict, model: dict, p: dict, plan_fn) -> dict | None:
    """``{gpus, nodes}`` of the smallest cluster of the model's GPU (same GPUs per node) on which its plan meets the
    SLOs, or None when none up to a few growths of the cluster does (an SLO more GPUs cannot reach, or a decode pool
    on GPUs of its own). ``plan_fn(inputs)`` plans (the site's cached planner)."""
    from . import site as site_mod  # lazy: site imports the intent modules

    inp = site_mod.planner_inputs(site, model)
    if inp.get("decode_gpu"):
        return None
    gpn, nodes = int(inp.get("gpus_per_node") or 1), int(inp.get("nodes") or 1)
    for _attempt in range(_ATTEMPTS):
        need = _needed(p)
        grow = math.ceil(need / gpn) if need > nodes * gpn else nodes * 4
        nodes = max(grow, nodes + 1)
        try:
            p = plan_fn({**inp, "nodes": nodes})
        except PlanError:
            return None
        if (p.get("latency") or {}).get("meets_slo"):
            gpus = _needed(p) or nodes * gpn
            return {"gpus": gpus, "nodes": math.ceil(gpus / gpn), "gpus_per_node": gpn, "gpu": inp.get("gpu")}
    return None


def misses(site: dict, plans: list[dict], plan_fn) -> list[dict]:
    """Every model of the site whose plan misses an SLO: model, path, what is missed, the GPUs planned on and
    the GPUs that would meet it (None when more GPUs of that type would not)."""
    from . import site as site_mod  # lazy: site imports the intent modules

    index = {m["name"]: i for i, m in enumerate(site["models"])}
    out = []
    for entry in plans:
        model, p = entry["model"], entry["plan"]
        lat = p.get("latency") or {}
        if lat.get("meets_slo") is not False:
            continue
        hw = site_mod.model_hardware(site, model)
        out.append(
            {
                "model": model["name"],
                "path": f"models[{index.get(model['name'], 0)}]",
                "missed": list(lat.get("missed") or ["an SLO at the planned load"]),
                "slo": dict(p.get("slo") or {}),
                "gpus": int(hw["gpus_per_node"]) * int(hw["nodes"]),
                "gpu": hw["gpu"],
                "meets_with": gpus_that_meet(site, model, p, plan_fn),
            }
        )
    return out


def describe(miss: dict) -> str:
    """One miss in words: which model, which SLO, on what, and how many GPUs would meet the SLOs."""
    names = (("ttft_p95_ms", "TTFT p95"), ("tpot_p95_ms", "TPOT p95"))
    given = miss["slo"]
    slo = ", ".join(f"{what} {given[k]:g} ms" for k, what in names if isinstance(given.get(k), (int, float)))
    text = f"{miss['path']} ({miss['model']}) misses its SLO ({slo}) on {miss['gpus']} x {miss['gpu']}: " + "; ".join(
        miss["missed"]
    )
    w = miss.get("meets_with")
    if w:
        cluster = w["nodes"] * w["gpus_per_node"]
        return text + (
            f"; {w['nodes']} nodes of {w['gpus_per_node']} x {w['gpu']} ({cluster} GPUs, the plan there uses "
            f"{w['gpus']}) would meet it"
        )
    return text + "; no cluster of this GPU type that the planner tried meets it (more GPUs do not help)"


def summary_lines(intent: dict) -> list[str]:
    """The plan summary's words for the misses: stopped, rendered anyway, or applied because the site accepts it."""
    found = intent.get("slo_misses") or []
    if not found:
        return []
    delivery = intent["site"]["delivery"]
    if intent["site"].get("accept_missed_slo"):
        then = "accept_missed_slo is true: the plan is applied anyway, missing it"
    elif delivery in STOPPING_DELIVERIES:
        then = f"delivery {delivery}: a converge stops before applying anything (accept_missed_slo: true applies it)"
    else:
        then = f"delivery {delivery}: rendered for review anyway (a render applies nothing)"
    return [f"{m['model']}: SLO MISSED: {describe(m)}; {then}" for m in found]


def stop(intents: dict) -> None:
    """Raise MissedSLO when a cluster that applies (or whose GitOps tree is applied) has plans that miss their SLOs
    and its site does not accept it: before anything is written."""
    errors, stopped = [], {}
    for host, intent in sorted(intents.items()):
        found = intent.get("slo_misses") or []
        if not found or intent["site"].get("accept_missed_slo"):
            continue
        if intent["site"]["delivery"] not in STOPPING_DELIVERIES:
            continue
        stopped[host] = found
        for m in found:
            fix = f"hardware.nodes: {m['meets_with']['nodes']}" if m.get("meets_with") else "faster GPUs"
            errors.append(
                (
                    f"host {host}: {m['path']}.slo",
                    f"{describe(m)}; nothing was applied. Valid: more GPUs ({fix}), less traffic "
                    f"({m['path']}.traffic), a looser SLO ({m['path']}.slo), or accept_missed_slo: true to apply "
                    "the plan knowing it misses",
                )
            )
    if errors:
        raise MissedSLO(errors, stopped, "the plan misses its SLOs on the given hardware")


def failure_fields(error) -> dict:
    """Extra fields of a failed task's result for a MissedSLO (blueprints converge exits with its own code)."""
    if isinstance(error, MissedSLO):
        return {"missed_slo": {h: [describe(m) for m in ms] for h, ms in error.misses.items()}}
    return {}
