# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""KEDA ScaledObjects of one autoscaled model: triggers and thresholds from the plan (issue 34 items 4a, 4b).

How KEDA v2.21's prometheus scaler and the HPA read a trigger (pkg/scalers/prometheus_scaler.go,
pkg/scaling/resolver; kube-controller-manager's replica calculator for External metrics):

* ``metricType: AverageValue`` (KEDA's default): the HPA divides the query's value by the target's
  replicas and compares it with ``threshold``: desired = ceil(value / threshold). Right for a total
  (requests per second over the pool, requests held by the router): the threshold is what ONE replica
  carries.
* ``metricType: Value``: desired = ceil(current replicas x value / threshold). Right for a value that is
  already a per-pod average (``llm_d_epp_average_queue_size``): dividing it by replicas again would
  count a queue of 8 on each of 4 pods as 2 per pod.

The request-rate threshold is the plan's: the planner chose the fewest replicas that meet the SLO at the
planned arrival rate, so each replica meets it at arrival_rate / replicas (rounded up to KEDA's milli
precision so that the plan's load asks for exactly the plan's count, never one more). A disaggregated
model's prefill pool gets a ScaledObject of its own with the same triggers, each AverageValue threshold
scaled by decode/prefill replicas, so both pools follow the load at the ratio the planner chose.
"""

from __future__ import annotations

import math

AVERAGE = "AverageValue"
VALUE = "Value"


def trigger_settings(site: dict) -> dict:
    """The site's queue threshold and cooldown: ``autoscaling_trigger`` (the site's keys over its blueprint's),
    else the serving_autoscaling role's options. The one place that decides them."""
    trig = site.get("autoscaling_trigger") or {}
    opts = site["options"]["serving_autoscaling"]
    queue = trig.get("queue_threshold")
    cooldown = trig.get("cooldown_seconds")
    return {
        "queue_threshold": float(opts["serving_autoscaling_queue_threshold"] if queue is None else queue),
        "cooldown_seconds": int(opts["serving_autoscaling_cooldown_seconds"] if cooldown is None else cooldown),
    }


def milli_up(x: float) -> float:
    """x rounded up to KEDA's milli precision (it parses a threshold into a milli-quantity)."""
    return math.ceil(round(x * 1000, 6)) / 1000


def fmt(x: float) -> str:
    return f"{x:g}" if x < 1e6 else str(int(x))


def _trigger(name: str, query: str, per_replica: float, metric_type: str, why: str) -> dict:
    return {"name": name, "query": query, "per_replica": float(per_replica), "metric_type": metric_type, "why": why}


def main_triggers(site: dict, m: dict, queue_threshold: float, rate_window: str) -> list[dict]:
    """The triggers of the model's main (decode or serve) pool, thresholds per main replica."""
    pool = m["names"]["pool"]
    tiers = ((m["scheduler"] or {}).get("flow_control") or {}).get("scale") or []
    if tiers:
        # AI grid: one trigger per tier on the flow-control queue of that priority, each with the tier's
        # threshold, so a gold queue adds replicas sooner than a bronze one of the same length (intent/grid.py).
        # Pool-wide triggers would scale every tier alike: none here.
        return [
            _trigger(
                f"queue-{t['tier']}",
                f'sum(llm_d_epp_flow_control_queue_size{{inference_pool="{pool}",priority="{t["priority"]}"}})',
                float(t["threshold"]),
                AVERAGE,
                f"requests of tier {t['tier']} queued in the router, a total over the pool: {t['threshold']} per "
                "replica (intent/grid.py)",
            )
            for t in tiers
        ]
    if not m["scheduler"]:
        return []
    out = []
    if m["scheduler"].get("queue_at_zero"):
        # Demand the router sees while the pool has no endpoint: requests held by its flow control (the
        # scheduler config turns it on for a pool that scales to zero). llm_d_epp_average_queue_size averages
        # the pods' queues and llm_d_epp_request_total counts after a request was scheduled (llm-d-router
        # v0.9.0 pkg/epp/handlers/server.go), so neither can wake a pool at zero.
        out.append(
            _trigger(
                "epp-held-requests",
                f'sum(llm_d_epp_flow_control_queue_size{{inference_pool="{pool}"}})',
                queue_threshold,
                AVERAGE,
                f"requests the router holds for the pool, a total: {queue_threshold:g} per replica (the site's "
                "queue threshold); any held request wakes a pool at zero",
            )
        )
    out.append(
        _trigger(
            "epp-queue",
            f'sum(llm_d_epp_average_queue_size{{name="{pool}"}})',
            queue_threshold,
            VALUE,
            f"the router's average queue per pod, already per replica: metricType Value compares it with "
            f"{queue_threshold:g} as it is (AverageValue would divide the average by the replicas once more)",
        )
    )
    auto = m["autoscaling"]
    if not auto.get("arrival_rate_rps"):
        return out
    rate, planned = float(auto["arrival_rate_rps"]), int(m["main"]["planned_replicas"])
    out.append(
        _trigger(
            "request-arrivals",
            f'sum(rate(llm_d_epp_request_total{{target_model_name="{m["served_name"]}"}}[{rate_window}]))',
            rate / planned,
            AVERAGE,
            f"requests per second over the pool, a total: the plan meets the SLO ({_slo_text(m)}) with {planned} "
            f"{m['main']['role']} replica(s) at {rate:g} req/s, so one replica carries {rate / planned:.3f} req/s",
        )
    )
    return out


def _slo_text(m: dict) -> str:
    slo = m.get("slo") or {}
    keys = ("ttft_p95_ms", "tpot_p95_ms")
    parts = [f"{k.split('_', maxsplit=1)[0].upper()} p95 {slo[k]:g} ms" for k in keys if slo.get(k)]
    return ", ".join(parts) or "no latency SLO"


def _target(kind: str, name: str) -> dict:
    api = "leaderworkerset.x-k8s.io/v1" if kind == "LeaderWorkerSet" else "apps/v1"
    return {"apiVersion": api, "kind": kind, "name": name}


def _rendered(triggers: list[dict]) -> list[dict]:
    return [
        {
            "name": t["name"],
            "query": t["query"],
            "threshold": fmt(milli_up(t["per_replica"])),
            "metric_type": t["metric_type"],
            "why": t["why"],
        }
        for t in triggers
    ]


def _prefill_triggers(triggers: list[dict], share: float) -> list[dict]:
    """The main pool's triggers for the prefill pool: AverageValue thresholds x decode/prefill replicas."""
    out = []
    for t in triggers:
        if t["metric_type"] == AVERAGE:
            out.append(
                {
                    **t,
                    "per_replica": t["per_replica"] * share,
                    "why": t["why"] + f"; prefill: x {share:g} (decode/prefill replicas of the plan)",
                }
            )
        else:
            out.append({**t, "why": t["why"] + "; prefill: the same, so both pools grow by the same factor"})
    return out


def scaled_objects(m: dict, triggers: list[dict], cooldown: int) -> list[dict]:
    """The main pool's ScaledObject, and the prefill pool's of a disaggregated model."""
    auto, nm = m["autoscaling"], m["names"]
    common = {"model": m["name"], "scale_to_zero": auto["scale_to_zero"], "cooldown_seconds": cooldown}
    out = [
        {
            **common,
            "name": nm["scaledobject"],
            "role": m["main"]["role"],
            "target": _target(nm["main_workload_kind"], nm["main_workload"]),
            "min_replicas": auto["min_replicas"],
            "max_replicas": auto["max_replicas"],
            "share": 1.0,
            "triggers": _rendered(triggers),
        }
    ]
    p = m.get("prefill")
    if p and auto.get("prefill"):
        share = m["main"]["planned_replicas"] / p["planned_replicas"]
        kind = "LeaderWorkerSet" if p["worker"] is not None else "Deployment"
        out.append(
            {
                **common,
                "name": nm["prefill_scaledobject"],
                "role": "prefill",
                "target": _target(kind, nm["prefill_workload"]),
                "min_replicas": auto["prefill"]["min_replicas"],
                "max_replicas": auto["prefill"]["max_replicas"],
                "share": share,
                "triggers": _rendered(_prefill_triggers(triggers, share)),
            }
        )
    return out


def prefill_bounds(auto: dict, prefill: int, decode: int) -> dict:
    """The prefill pool's replica bounds at the plan's prefill:decode ratio."""
    ratio = prefill / decode
    lo = 0 if auto["scale_to_zero"] else max(1, math.ceil(auto["min_replicas"] * ratio))
    hi = max(prefill, math.ceil(round(auto["max_replicas"] * ratio, 6)))
    return {
        "min_replicas": lo,
        "max_replicas": hi,
        "why": f"prefill follows decode at the plan's {prefill}:{decode}: {lo}..{hi} for decode's "
        f"{auto['min_replicas']}..{auto['max_replicas']}",
    }
