"""Scale from zero with the real engines end to end (issue 34): the batch example's pool at zero wakes because a
request is held at the picker.

The real llm-d router runs the batch model's rendered scheduler config over its InferencePool with no endpoint
(tests/dataplane/harness.py); requests arrive and it holds them (flow control: saturation 1.0 with no candidate)
and counts them in ``llm_d_epp_flow_control_queue_size``. Prometheus scrapes the router as the rendered
ServiceMonitor says (its interval, its bearer token Secret; prometheus_server.py says what is played), serving
its API where the rendered ScaledObject looks for the Thanos querier. The KEDA operator reads the rendered
ScaledObject, TriggerAuthentication and token Secret, unchanged, queries Prometheus with the Secret's token and
CA, sees the held requests above the activation threshold and scales the target from 0 to 1 through its /scale
subresource. The target is a stand-in Deployment of the name KServe gives the batch workload; what the
activation ends in on a cluster (KServe's pod scheduled and Ready, the engine answering) is played by the
harness adding the pool's first engine, and the held requests are served.

The figure printed (FIGURE) is the seconds from the first held request to KEDA's scale-up; KEDA's polling
interval and the ServiceMonitor's scrape interval (15 s each, rendered) set it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time

import pytest
from dataplane.harness import DataPlane
from dataplane.traffic import CHAT_PATH, chat_body

from .conftest import site
from .prometheus_server import Prometheus

pytestmark = [pytest.mark.cluster]

SITE, HOST = "example-batch", "batch-west-1"
HELD = 4


def _kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


def _get(cp, *args: str) -> dict:
    res = cp.kubectl(*args, "-o", "json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _apply(cp, objs: list[dict]) -> None:
    body = "\n".join(json.dumps(o) for o in objs)
    res = cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=body)
    assert res.returncode == 0, res.stderr


def _until(cond, timeout: float, what: str, seen=None, poll: float = 0.5):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(poll)
    raise AssertionError(f"not within {timeout:.0f} s: {what}" + (f"; saw {seen()}" if seen else ""))


def _stand_in(ref: dict, ns: str) -> dict:
    labels = {"app": ref["name"]}
    pod = {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": ref["name"], "namespace": ns},
        "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": pod},
    }


def _model_and_objects():
    cluster = site(SITE)[HOST]
    model = next(m for m in cluster["intent"]["serving"]["models"] if m["scheduler"])
    return model, cluster["objects"]


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


def test_a_request_held_at_zero_wakes_the_pool_through_prometheus_and_keda(autoscaling, tmp_path):
    cp, address = autoscaling["plane"], autoscaling["prometheus_address"]
    model, objects = _model_and_objects()
    scaled = next(
        o
        for o in _kind(objects, "ScaledObject")
        if o["metadata"]["labels"]["inference.blueprints/model"] == model["name"]
    )
    assert scaled["spec"]["minReplicaCount"] == 0, "the batch example's pool no longer scales to zero"
    with DataPlane(cp, tmp_path / "dp", model, objects, {}) as dp:
        ns = dp.namespace
        secrets = [o for o in _kind(objects, "Secret") if o["metadata"]["name"] == "keda-metrics-reader-token"]
        _apply(
            cp, [_stand_in(scaled["spec"]["scaleTargetRef"], ns), *secrets, *_kind(objects, "TriggerAuthentication")]
        )
        token = _until(
            lambda: (_get(cp, "-n", ns, "get", "secret", "keda-metrics-reader-token").get("data") or {}).get("token"),
            60,
            "the token controller to fill the rendered metrics-reader token Secret",
        )
        monitor = next(
            o
            for o in _kind(objects, "ServiceMonitor")
            if o["spec"]["selector"]["matchLabels"].get("app.kubernetes.io/name") == model["names"]["service"]
        )
        prom = Prometheus(cp, address)
        prom.scrape_service_monitor(monitor, f"127.0.0.1:{dp.metrics_port}", base64.b64decode(token).decode())
        prom.launch().ready()
        try:
            _apply(cp, [scaled])
            target = scaled["spec"]["scaleTargetRef"]["name"]

            async def run() -> dict:
                t0 = time.monotonic()
                gw, held = await _hold(dp, HELD)
                try:
                    while time.monotonic() - t0 < 150:
                        if _get(cp, "-n", ns, "get", "deployment", target)["spec"].get("replicas"):
                            break
                        await asyncio.sleep(1)
                    woke = time.monotonic() - t0
                    answered_at_zero = [f.result().status for f in held if f.done()]
                    replicas = _get(cp, "-n", ns, "get", "deployment", target)["spec"].get("replicas")
                    if replicas:
                        dp.scale_up("both")  # what the activation ends in: the pool's first engine
                    replies = await asyncio.wait_for(asyncio.gather(*held), 120) if replicas else []
                finally:
                    for f in held:
                        f.cancel()
                    await gw.__aexit__(None, None, None)
                return {
                    "woke_after": woke,
                    "replicas": replicas,
                    "answered_at_zero": answered_at_zero,
                    "served": [r.status for r in replies],
                }

            figures = asyncio.run(run())
        finally:
            so = _get(cp, "-n", ns, "get", "scaledobject", scaled["metadata"]["name"])
            prom.stop()
    conditions = {c["type"]: (c["status"], c.get("reason")) for c in (so.get("status") or {}).get("conditions") or []}
    assert figures["replicas"] == 1, f"KEDA did not wake {target} for {HELD} held requests: {figures}, {conditions}"
    assert figures["answered_at_zero"] == [], figures
    assert figures["served"] == [200] * HELD, figures
    assert conditions.get("Ready", ("",))[0] == "True", conditions
    print(
        f"FIGURE keda-activation: {HELD} requests held at zero endpoints; KEDA scaled {target} 0 -> 1 after "
        f"{figures['woke_after']:.1f} s (KEDA polls every {scaled['spec']['pollingInterval']} s, Prometheus scrapes "
        f"the router every {monitor['spec']['endpoints'][0]['interval']}); every held request served once the "
        "engine came"
    )
