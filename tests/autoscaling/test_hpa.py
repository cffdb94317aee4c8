"""Replicas under the plan's load, decided by the real engines (issue 34): the batch example's pool at its
planned arrival rate.

Requests arrive through the real llm-d router at the plan's rate (the batch example: 40 req/s, open loop)
over engines that keep up (llm-d-inference-sim, fast settings: the request-rate trigger is the one under
test, the queues stay short). Prometheus scrapes the router as the rendered ServiceMonitor says; the KEDA
operator reads the rendered ScaledObject unchanged and its metrics API server serves each trigger to
kube-controller-manager's HPA controller, which sets the stand-in scale target's replicas. The plan says 4
replicas at 40 req/s: the pool must reach 4 and not go above it.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from dataplane.harness import DataPlane
from dataplane.traffic import CHAT_PATH, chat_body

from .chain import model_and_objects, wired
from .kube import get

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SITE, HOST = "example-batch", "batch-west-1"
FAST = ["--time-to-first-token", "5ms", "--inter-token-latency", "1ms", "--max-num-seqs", "64"]
LOAD_SECONDS = 240


async def _load(dp, rate: float, seconds: float, watch) -> dict:
    """Open-loop arrivals at ``rate`` for ``seconds``; ``watch()`` is called every 5 s."""
    model = dp.model["served_name"]
    header = dp.model["scheduler"]["objective_header"]
    objectives = dp.model["scheduler"]["objectives"]
    extra = {header: objectives[0]["name"]} if objectives else {}
    sent, tasks, t0 = 0, [], time.monotonic()
    next_watch = t0
    async with dp.gateway() as gw:
        while (now := time.monotonic()) - t0 < seconds:
            due = int((now - t0) * rate)
            while sent < due:
                tasks.append(
                    asyncio.ensure_future(
                        gw.post(CHAT_PATH, chat_body(model, "batch", f"job {sent}", max_tokens=4), extra)
                    )
                )
                sent += 1
            if now >= next_watch:
                if watch(now - t0):
                    break
                next_watch = now + 5
            await asyncio.sleep(0.01)
        replies = await asyncio.gather(*tasks, return_exceptions=True)
    took = time.monotonic() - t0
    ok = sum(1 for r in replies if not isinstance(r, BaseException) and r.status == 200)
    return {"sent": sent, "ok": ok, "seconds": took, "achieved_rps": sent / took}


def test_at_the_plans_load_the_hpa_keeps_the_plans_replicas(autoscaling, tmp_path):
    cp, address = autoscaling["plane"], autoscaling["prometheus_address"]
    model, objects = model_and_objects(SITE, HOST)
    plan, rate = model["main"]["planned_replicas"], model["autoscaling"]["arrival_rate_rps"]
    with (
        DataPlane(cp, tmp_path / "dp", model, objects, {"both": plan}, sim_args=FAST) as dp,
        wired(cp, dp, address, 1) as (scaled, _monitor, _prom),
    ):
        ns, target = dp.namespace, scaled["spec"]["scaleTargetRef"]["name"]
        hpa_name = f"keda-hpa-{scaled['metadata']['name']}"
        seen: list[tuple[float, int]] = []
        at_plan: list[float] = []

        def watch(t: float) -> bool:
            replicas = get(cp, "-n", ns, "get", "deployment", target)["spec"].get("replicas") or 0
            seen.append((round(t), replicas))
            if replicas == plan:
                at_plan.append(t)
            # held at the plan's count for 45 s (three HPA periods) after reaching it: done
            return bool(at_plan) and t - at_plan[0] >= 45 and replicas == plan

        load = asyncio.run(_load(dp, rate, LOAD_SECONDS, watch))
        hpa = get(cp, "-n", ns, "get", "hpa", hpa_name)
        threshold = next(
            t["metadata"]["threshold"] for t in scaled["spec"]["triggers"] if t["name"] == "request-arrivals"
        )
    metrics = {
        m["external"]["metric"]["name"]: m["external"]["current"]
        for m in (hpa.get("status") or {}).get("currentMetrics") or []
    }
    figures = {"plan": plan, "rate": rate, "load": load, "replicas": seen, "hpa_metrics": metrics}
    assert load["achieved_rps"] >= 0.9 * rate, f"the client could not send the plan's load: {figures}"
    assert at_plan, f"the pool never reached the plan's {plan} replicas at the plan's load: {figures}"
    above = [r for _, r in seen if r > plan]
    assert not above, f"the pool went above the plan's {plan} replicas at the plan's load: {figures}"
    print(
        f"FIGURE hpa-at-plan-load: {load['achieved_rps']:.1f} req/s through the router; {target} 1 -> {plan} "
        f"replicas in {at_plan[0]:.0f} s, never above; replicas over time {seen}; HPA metrics {metrics}; "
        f"{load['ok']}/{load['sent']} requests answered 200; request-arrivals threshold {threshold} per replica"
    )
