"""Scale from zero: the batch example's KEDA activation sees demand while its pool has no endpoint.

The router runs the batch model's rendered scheduler config over an InferencePool with no pod (the
pool KEDA took to zero). Requests arrive; the router (flow control on: saturation is 1.0 with no
candidate, pkg/epp/framework/plugins/flowcontrol/saturationdetector/utilization) holds them and
counts them in ``llm_d_epp_flow_control_queue_size``. Each rendered trigger's query is evaluated
on the router's /metrics as Prometheus would (``sum(...)`` / ``sum(rate(...[w]))``): at least one
must be above its activationThreshold (KEDA activates on any). Then an engine comes up (what the
activation ends in) and the held requests are served.

``test_the_old_triggers_stay_at_zero`` runs the triggers the batch example had before issue 25
(EPP average queue and request rate) against the config it had then: with no pod they never move,
which is why the pool never came back.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from .conftest import routed_models
from .harness import DataPlane
from .promql import evaluate, parse_exposition
from .traffic import CHAT_PATH, chat_body

# every example with a pool that scales to zero: the batch site, and the sovereign burst's cloud cluster
# (its sovereign-queue trigger reads the on-prem cluster's router; here only its own triggers can rise)
SITES = ("example-batch", "example-sovereign-burst")
HELD = 6


def _zero_models():
    """(host, model, objects, ScaledObject) of every model whose ScaledObject starts at 0 replicas."""
    out = []
    for host, m, objs in (x for site in SITES for x in routed_models(site)):
        for o in objs:
            mine = (
                o["kind"] == "ScaledObject" and o["metadata"]["labels"].get("inference.blueprints/model") == m["name"]
            )
            if mine and o["spec"].get("minReplicaCount") == 0:
                out.append((host, m, objs, o))
    return out


ZERO = _zero_models()


def old_triggers(model: dict) -> list[dict]:
    """The batch example's triggers before issue 25 (serving_autoscaling as it rendered them)."""
    pool = model["names"]["pool"]
    return [
        {
            "name": "epp-queue",
            "metadata": {"query": f'sum(llm_d_epp_average_queue_size{{name="{pool}"}})', "activationThreshold": "0"},
        },
        {
            "name": "request-arrivals",
            "metadata": {
                "query": f'sum(rate(llm_d_epp_request_total{{target_model_name="{model["served_name"]}"}}[2m]))',
                "activationThreshold": "0",
            },
        },
    ]


def old_config(config: dict) -> dict:
    """The config before issue 25: no flow control."""
    return {k: v for k, v in config.items() if k not in ("featureGates", "flowControl")}


async def _demand_at_zero(dp, triggers: list[dict], window: float = 3.0) -> dict:
    header = dp.model["scheduler"]["objective_header"]
    objective = dp.model["scheduler"]["objectives"][0]["name"] if dp.model["scheduler"]["objectives"] else None
    model = dp.model["served_name"]
    before = parse_exposition(dp.epp_metrics())
    t0 = time.monotonic()
    async with dp.gateway() as gw:
        held = [
            asyncio.ensure_future(
                gw.post(CHAT_PATH, chat_body(model, "batch", f"job {i}"), {header: objective} if objective else {})
            )
            for i in range(HELD)
        ]
        await asyncio.sleep(window)
        # a loaded machine can take longer than the window to bring every request to the router: wait until it
        # holds them all (flow control) or has answered them all (without it, no pod to send them to)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(f.done() for f in held):
            if sum((await asyncio.to_thread(dp.held_by_flow)).values()) >= HELD:
                break
            await asyncio.sleep(0.2)
        now = parse_exposition(dp.epp_metrics())
        values = {}
        for t in triggers:
            q = t["metadata"]["query"]
            v = evaluate(q, now, before, time.monotonic() - t0) if "rate(" in q else evaluate(q, now)
            values[t["name"]] = {"value": v, "activation": float(t["metadata"].get("activationThreshold", "0"))}
        early = [f.result().status for f in held if f.done()]
        ready_endpoints = dp.pool_gauge("llm_d_epp_ready_endpoints")
        served = None
        if any((x["value"] or 0) > x["activation"] for x in values.values()):
            dp.scale_up("both")  # the activation's outcome: the first engine of the pool
            replies = await asyncio.gather(*held)
            served = [r.status for r in replies]
        else:
            for f in held:
                f.cancel()
            await asyncio.gather(*held, return_exceptions=True)
    return {
        "triggers": values,
        "answered_at_zero": early,
        "ready_endpoints_at_zero": ready_endpoints,
        "served_after_scale_up": served,
    }


@pytest.mark.parametrize("case", ZERO, ids=[f"{h}/{m['name']}" for h, m, _, _ in ZERO])
def test_the_activation_metric_rises_with_no_pod(dp_cluster, tmp_path, case):
    host, model, objects, scaled = case
    with DataPlane(dp_cluster, tmp_path, model, objects, {}) as dp:
        figures = asyncio.run(_demand_at_zero(dp, scaled["spec"]["triggers"]))
    assert figures["ready_endpoints_at_zero"] in (0, None), figures
    active = [n for n, t in figures["triggers"].items() if (t["value"] or 0) > t["activation"]]
    assert active, f"no trigger of {scaled['metadata']['name']} rises above its activation at zero pods: {figures}"
    assert figures["answered_at_zero"] == [], f"requests answered while the pool had no endpoint: {figures}"
    assert figures["served_after_scale_up"] == [200] * HELD, figures


def test_the_old_triggers_stay_at_zero(dp_cluster, tmp_path):
    host, model, objects, scaled = ZERO[0]
    cfg = old_config(model["scheduler"]["config"])
    with DataPlane(dp_cluster, tmp_path, model, objects, {}, config=cfg) as dp:
        figures = asyncio.run(_demand_at_zero(dp, old_triggers(model)))
    active = [n for n, t in figures["triggers"].items() if (t["value"] or 0) > t["activation"]]
    assert not active, figures
    assert figures["answered_at_zero"] and set(figures["answered_at_zero"]) != {200}, figures
