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
import time

import pytest
from dataplane.harness import DataPlane
from dataplane.traffic import CHAT_PATH, chat_body

from .chain import model_and_objects, scaled_object, wired
from .kube import get as _get

pytestmark = [pytest.mark.cluster]

SITE, HOST = "example-batch", "batch-west-1"
HELD = 4


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
    model, objects = model_and_objects(SITE, HOST)
    assert scaled_object(model, objects)["spec"]["minReplicaCount"] == 0, "the batch pool no longer scales to zero"
    with DataPlane(cp, tmp_path / "dp", model, objects, {}) as dp, wired(cp, dp, address, 0) as (scaled, monitor, _):
        ns = dp.namespace
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
        so = _get(cp, "-n", ns, "get", "scaledobject", scaled["metadata"]["name"])
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
