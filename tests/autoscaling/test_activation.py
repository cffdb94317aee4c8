"""Scale from zero and back with the real engines end to end (issue 34): the batch example's pool at zero wakes
because a request is held at the picker, its pod is placed and started, the held requests are served, and the
pool returns to zero after its cooldown.

The real llm-d router runs the batch model's rendered scheduler config over its InferencePool with no endpoint
(tests/dataplane/harness.py); requests arrive and it holds them (flow control: saturation 1.0 with no candidate)
and counts them in ``llm_d_epp_flow_control_queue_size``. Prometheus scrapes the router as the rendered
ServiceMonitor says (its interval, its bearer token Secret; prometheus_server.py says what is played), serving
its API where the rendered ScaledObject looks for the Thanos querier. The KEDA operator reads the rendered
ScaledObject, TriggerAuthentication and token Secret, unchanged, queries Prometheus with the Secret's token and
CA, sees the held requests above the activation threshold and scales the target from 0 to 1 through its /scale
subresource. The target is a stand-in Deployment of the name KServe gives the batch workload whose pod asks for
what KServe's would (the rendered GPUs and tolerations): kube-controller-manager makes the pod, kube-scheduler
places it on a GPU node, kwok starts it. What the pod's start ends in on a cluster (the engine loading the weights
and answering) is played by the harness adding the pool's first engine once the pod is Ready; the time that takes
on a cluster is the warm-up budget the plan states (docs/sovereign-burst.md), not measured here.

The site is the batch example with the user's own cooldown (``autoscaling_trigger.cooldown_seconds: 30``,
``serving_autoscaling_initial_cooldown_seconds: 0`` and ``serving_autoscaling_rate_window: 1m``, given as extra
vars; the example ships 900 s, 600 s and 2m, which a test cannot wait for). Figures (FIGURE lines): seconds from
the first held request to KEDA's scale-up, to the pod placed, to the pod Ready and to the first answer; and from
the last answer back to zero replicas.
"""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils.intent import limits
from dataplane.harness import DataPlane
from dataplane.traffic import CHAT_PATH, chat_body

from .chain import model_and_objects, scaled_object, wired
from .kube import get as _get

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SITE, HOST = "example-batch", "batch-west-1"
HELD = 4
GPU = "nvidia.com/gpu"
SLACK = 10  # seconds KEDA may take beyond one scrape and one poll (its query, the scale; a loaded machine)
TRICKLE_RPS, TRICKLE_SECONDS = 2, 15
# the user's own cooldown, on top of the example (its 900 s / 600 s are what a batch site wants, not a test)
COOLDOWN = {
    "autoscaling_trigger": {"cooldown_seconds": 30},  # the blueprint's queue threshold (8) stays
    "serving_autoscaling_initial_cooldown_seconds": 0,
    "serving_autoscaling_rate_window": "1m",  # default 2m: the return to zero takes a minute more
}


async def _hold(dp, n: int) -> list:
    header = dp.model["scheduler"]["objective_header"]
    objectives = dp.model["scheduler"]["objectives"]
    extra = {header: objectives[0]["name"]} if objectives else {}
    gw = dp.gateway()
    await gw.__aenter__()
    futures = [
        asyncio.ensure_future(gw.post(CHAT_PATH, chat_body(dp.model["served_name"], "batch", f"job {i}"), extra))
        for i in range(n)
    ]
    return gw, futures


async def _trickle(gw, dp, rate: float, seconds: float) -> list[int]:
    header = dp.model["scheduler"]["objective_header"]
    objectives = dp.model["scheduler"]["objectives"]
    extra = {header: objectives[0]["name"]} if objectives else {}
    sent = []
    for i in range(int(rate * seconds)):
        body = chat_body(dp.model["served_name"], "batch", f"more {i}", max_tokens=4)
        sent.append(asyncio.ensure_future(gw.post(CHAT_PATH, body, extra)))
        await asyncio.sleep(1 / rate)
    return [r.status for r in await asyncio.wait_for(asyncio.gather(*sent), 120)]


def _pods(cp, ns: str, target: str) -> list[dict]:
    return _get(cp, "-n", ns, "get", "pods", "-l", f"app={target}")["items"]


def _condition(pod: dict, kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions") or [])


async def _wake_and_serve(cp, dp, target: str) -> dict:
    """Hold requests at zero; record when KEDA scales up, when the pod is placed and Ready; then start the engine
    and wait for every held request."""
    ns, t0, marks = dp.namespace, time.monotonic(), {}
    gw, held = await _hold(dp, HELD)
    try:
        while time.monotonic() - t0 < 240 and "ready" not in marks:
            if "scaled" not in marks and _get(cp, "-n", ns, "get", "deployment", target)["spec"].get("replicas"):
                marks["scaled"] = time.monotonic() - t0
            pods = _pods(cp, ns, target) if "scaled" in marks else []
            if "placed" not in marks and any(_condition(p, "PodScheduled") for p in pods):
                marks["placed"] = time.monotonic() - t0
                pod = next(p for p in pods if _condition(p, "PodScheduled"))
                marks["node"] = pod["spec"].get("nodeName")
                marks["gpus_asked"] = pod["spec"]["containers"][0].get("resources", {}).get("requests", {}).get(GPU)
                node = _get(cp, "get", "node", marks["node"])
                marks["node_gpus"] = node["status"].get("allocatable", {}).get(GPU)
            if any(_condition(p, "Ready") for p in pods):
                marks["ready"] = time.monotonic() - t0
            await asyncio.sleep(0.5)
        marks["answered_at_zero"] = [f.result().status for f in held if f.done()]
        if "ready" in marks:
            dp.scale_up("both")  # what the pod's start ends in: the pool's first engine answering
            first = await asyncio.wait_for(next(iter(asyncio.as_completed(held))), 120)
            marks["first_answer"] = time.monotonic() - t0
            marks["first_status"] = first.status
            marks["served"] = [r.status for r in await asyncio.wait_for(asyncio.gather(*held), 120)]
            # then steady work for a while (a rate the request-arrivals trigger sees: a burst that creates
            # the router's counter is not an increase to rate()), and silence
            marks["trickle"] = await _trickle(gw, dp, TRICKLE_RPS, TRICKLE_SECONDS)
            marks["last_answer_at"] = time.monotonic()
    finally:
        for f in held:
            f.cancel()
        await gw.__aexit__(None, None, None)
    return marks


def test_a_request_held_at_zero_wakes_the_pool_and_it_returns_to_zero(autoscaling, tmp_path):
    cp, address = autoscaling["plane"], autoscaling["prometheus_address"]
    model, objects = model_and_objects(SITE, HOST, COOLDOWN)
    so_spec = scaled_object(model, objects)["spec"]
    assert so_spec["minReplicaCount"] == 0, "the batch pool no longer scales to zero"
    assert (so_spec["cooldownPeriod"], so_spec["initialCooldownPeriod"]) == (30, 0), so_spec
    assert "[1m]" in next(t for t in so_spec["triggers"] if t["name"] == "request-arrivals")["metadata"]["query"]
    with (
        DataPlane(cp, tmp_path / "dp", model, objects, {}) as dp,
        wired(cp, dp, address, 0, placed=True) as (scaled, monitor, _),
    ):
        ns = dp.namespace
        target = scaled["spec"]["scaleTargetRef"]["name"]
        marks = asyncio.run(_wake_and_serve(cp, dp, target))
        so = _get(cp, "-n", ns, "get", "scaledobject", scaled["metadata"]["name"])
        back = None
        if marks.get("served"):
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                replicas = _get(cp, "-n", ns, "get", "deployment", target)["spec"].get("replicas")
                if not replicas and not _pods(cp, ns, target):  # the pod gone: its GPU is free again
                    back = time.monotonic() - marks["last_answer_at"]
                    break
                time.sleep(2)
    conditions = {c["type"]: (c["status"], c.get("reason")) for c in (so.get("status") or {}).get("conditions") or []}
    assert "scaled" in marks, f"KEDA did not wake {target} for {HELD} held requests: {marks}, {conditions}"
    assert "placed" in marks, f"the woken pod of {target} was never placed by the scheduler: {marks}"
    assert marks["gpus_asked"] and int(marks["node_gpus"] or 0) >= int(marks["gpus_asked"]), (
        f"the woken pod asks for no GPU or was placed on a node without: {marks}"
    )
    # the decision comes one scrape and one poll at most after the request is held (what the plan's figure
    # of the first token from zero adds: intent/burst.py detection)
    detect = scaled["spec"]["pollingInterval"] + limits.duration_s(monitor["spec"]["endpoints"][0]["interval"])
    assert marks["scaled"] <= detect + SLACK, f"KEDA decided after {marks['scaled']:.1f} s, not ~{detect:.0f}: {marks}"
    assert "ready" in marks, f"the woken pod of {target} never became Ready (kwok): {marks}"
    assert marks["answered_at_zero"] == [], marks
    assert marks["served"] == [200] * HELD, marks
    assert marks["trickle"] == [200] * (TRICKLE_RPS * TRICKLE_SECONDS), marks
    assert conditions.get("Ready", ("",))[0] == "True", conditions
    arrivals = next(t for t in scaled["spec"]["triggers"] if t["name"] == "request-arrivals")
    window = re.search(r"\[(\w+)\]", arrivals["metadata"]["query"]).group(1)
    seconds = {"s": 1, "m": 60}[window[-1]] * int(window[:-1])
    assert back is not None, (
        f"{target} (replicas and pods) did not return to zero within 300 s of the last answer (cooldown "
        f"{so_spec['cooldownPeriod']} s, request-arrivals over a {window} rate window): {marks}"
    )
    # not before the arrivals left the rate window and the cooldown passed: a pool that drops its last
    # replica while requests still come pays a cold start for each
    # (the window empties at most one scrape and one KEDA poll, 15 s each, before its end)
    assert back >= seconds - 30 + so_spec["cooldownPeriod"], (back, window, marks)
    # and not much later: the window, the cooldown, a scrape and a poll, and the pod's deletion
    assert back <= seconds + so_spec["cooldownPeriod"] + 30 + 2 * SLACK, (back, window, marks)
    print(
        f"FIGURE keda-activation: {HELD} requests held at zero endpoints; KEDA scaled {target} 0 -> 1 after "
        f"{marks['scaled']:.1f} s (KEDA polls every {scaled['spec']['pollingInterval']} s, Prometheus scrapes "
        f"the router every {monitor['spec']['endpoints'][0]['interval']}); pod placed on {marks['node']} at "
        f"{marks['placed']:.1f} s, Ready at {marks['ready']:.1f} s; first answer at {marks['first_answer']:.1f} s "
        "(the engine's load time is 0 here: on a cluster add the plan's warm-up budget)"
    )
    print(
        f"FIGURE keda-return-to-zero: {target} back to 0 replicas {back:.0f} s after the last answer of "
        f"{TRICKLE_RPS} req/s for {TRICKLE_SECONDS} s (request-arrivals reads a rate over the last {window}, then "
        f"the cooldown of {so_spec['cooldownPeriod']} s once every trigger read 0); its pod gone, the GPU free"
    )
