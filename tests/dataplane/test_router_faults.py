"""Faults under the real llm-d router (issue 33 item 4; figures in docs/reliability.md, "Faults of a running
site"): the example RAG site's model behind its rendered scheduler config, over two llm-d-inference-sim engines
slow enough that requests are in flight when the fault comes.

1. an engine is killed (SIGKILL, a crash) with requests in flight: those it held fail; new requests are
   counted until the router stops sending any to it (first while its pod still says Ready, as until a
   kubelet notices, then with the pod gone, as once the ReplicaSet replaced it);
2. the endpoint picker is restarted: requests sent while it is down fail (no routing decision), and the
   seconds until it routes again are measured;
3. a GPU node is lost: its engine stops with requests in flight, its pod says Ready until the node lifecycle
   controller notices, then Ready False (the pod object stays), then its pod is placed again on a spare GPU.

Each prints its figures as a ``FIGURE`` line.
"""

from __future__ import annotations

import asyncio
import time

from .conftest import routed_models
from .harness import DataPlane, DataPlaneError, clean_workdir
from .traffic import ask as _ask
from .traffic import steady as _steady

SITE = "example-rag"
# ~2 s per request (30 tokens at 60 ms): several in flight on each engine when the fault comes
SLOW_ENGINE = ["--time-to-first-token", "50ms", "--inter-token-latency", "60ms", "--max-num-seqs", "16"]
# seconds a lost node's pods still say Ready (on a cluster: kube-controller-manager's node-monitor-grace-period)
NOTICE = 10


def _model():
    return next((m, objs) for _host, m, objs in routed_models(SITE) if not m["disaggregated"])


async def _until_clean(dp, model: dict, avoid: str | None, seconds: float) -> tuple[int, float | None]:
    """(requests failed, seconds until 6 requests in a row succeeded and none went to ``avoid``)."""
    failed, good, t0 = 0, 0, time.monotonic()
    while time.monotonic() - t0 < seconds:
        try:
            async with dp.gateway() as gw:
                status, endpoint = await _ask(gw, model, good)
        except Exception:  # noqa: BLE001 - the channel itself could not be opened: the EPP is down
            status, endpoint = 0, None
        if status == 200 and endpoint != avoid:
            good += 1
            if good == 6:
                return failed, time.monotonic() - t0
        else:
            failed, good = failed + 1, 0
            await asyncio.sleep(0.2)
    return failed, None


async def _killed_in_flight(dp, model: dict, victim) -> int:
    """Send 12 requests, kill ``victim``'s engine (SIGKILL) once it holds some of them (its own gauges: a loaded
    machine can take longer than a request's 2 s to bring the first ones through Envoy and the router); the
    number that failed."""
    async with dp.gateway() as gw:
        flight = [asyncio.ensure_future(_ask(gw, model, i)) for i in range(12)]
        t0, held = time.monotonic(), 0.0
        while not held and time.monotonic() - t0 < 20:
            await asyncio.sleep(0.2)
            try:
                held = await asyncio.to_thread(victim.in_flight)
            except (DataPlaneError, OSError):  # one read of /metrics the busy machine let time out: read again
                continue
        for p in victim.procs:
            p.popen.kill()
        done = await asyncio.gather(*flight)
    assert held, f"{victim.pod}'s engine held none of the 12 requests within 20 s: nothing in flight to fail"
    return sum(1 for status, _ in done if status != 200)


def test_engine_killed_with_requests_in_flight_and_the_picker_restarted(dp_cluster, tmp_path_factory):
    model, objects = _model()
    work = clean_workdir(tmp_path_factory.mktemp("router-faults"))
    with DataPlane(dp_cluster, work, model, objects, {"both": 2}, sim_args=SLOW_ENGINE) as dp:
        victim = dp.endpoints[0]

        async def engine_killed():
            in_flight_failed = await _killed_in_flight(dp, model, victim)
            ready_pod = await _until_clean(dp, model, victim.address, 20)
            dp._core().delete_namespaced_pod(victim.pod, dp.namespace, grace_period_seconds=0)
            dp.endpoints.remove(victim)
            gone_pod = await _until_clean(dp, model, victim.address, 60)
            return in_flight_failed, ready_pod, gone_pod

        in_flight_failed, ready_pod, gone_pod = asyncio.run(engine_killed())
        assert 0 < in_flight_failed < 12, f"{in_flight_failed} of 12: the crash should fail only what it held"
        assert gone_pod[1] is not None, f"the router kept failing requests once the pod was gone: {gone_pod}"
        print(
            f"FIGURE engine-killed: {in_flight_failed} of 12 in-flight requests failed (those on it); "
            f"pod still Ready: {ready_pod[0]} new requests failed, clean after "
            f"{'%.1f s' % ready_pod[1] if ready_pod[1] is not None else 'not within 20 s'}; "
            f"pod gone: {gone_pod[0]} failed, clean after {gone_pod[1]:.1f} s"
        )

        t0 = time.monotonic()
        dp.epp.stop()
        dp.procs.remove(dp.epp)
        down = asyncio.run(_until_clean(dp, model, None, 1.5))
        dp._start_epp()
        back = asyncio.run(_until_clean(dp, model, None, 60))
        assert back[1] is not None, f"the restarted picker does not route: {back}"
        print(
            f"FIGURE picker-restart: {down[0]} requests failed while it was down; routing again "
            f"{time.monotonic() - t0:.1f} s after the stop ({back[0]} more failed while it started)"
        )


def _not_ready(dp, pod: str) -> None:
    """What kube-controller-manager's node lifecycle controller writes on the pods of a node that stopped
    reporting (MarkPodsNotReady): the Ready condition False; the pod object stays."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {"status": {"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now}]}}
    dp._core().patch_namespaced_pod_status(pod, dp.namespace, status)


def test_a_node_lost_with_requests_in_flight(dp_cluster, tmp_path_factory):
    """A GPU node lost: its engine stops answering at once (killed with requests in flight), its pod still says
    Ready until the node lifecycle controller notices (node-monitor-grace-period, 50 s by default in Kubernetes
    1.36; here NOTICE seconds), then Ready False; then the pod is placed again on a spare GPU (a new engine). The
    router must stop sending to the lost engine once its pod is not Ready, and use the new one."""
    model, objects = _model()
    work = clean_workdir(tmp_path_factory.mktemp("router-node-loss"))
    with DataPlane(dp_cluster, work, model, objects, {"both": 2}, sim_args=SLOW_ENGINE) as dp:
        lost = dp.endpoints[0]

        async def node_lost():
            in_flight_failed = await _killed_in_flight(dp, model, lost)
            unnoticed = await _steady(dp, NOTICE)
            t_not_ready = time.monotonic()
            _not_ready(dp, lost.pod)
            noticed = await _steady(dp, NOTICE)
            dp.wait_ready_endpoints(1, 30)  # the picker's own count: the lost pod is out of its pool
            spare = dp.scale_up("both")  # its pod placed again on a spare GPU, Ready
            dp.wait_ready_endpoints(2, 30)
            placed = await _steady(dp, 8, fresh=True)
            return in_flight_failed, unnoticed, t_not_ready, noticed, placed, spare

        in_flight_failed, unnoticed, t_not_ready, noticed, placed, spare = asyncio.run(node_lost())
    before = [r for r in unnoticed if r[1] != 200]
    after = [r for r in noticed if r[1] != 200]
    late = [round(t - t_not_ready, 2) for t, _s, _e in after]
    served_by = {e for _t, s, e in placed if s == 200}
    assert 0 < in_flight_failed < 12, f"{in_flight_failed} of 12: the loss should fail only what the node held"
    assert before, "no request failed while the lost engine's pod still said Ready: the fault was not made"
    # the router watches the pod: a loaded machine delays the event by a second or two, a router that never notices
    # fails requests through the whole window (NOTICE s)
    assert all(x < NOTICE / 2 for x in late), f"requests still failed {late} s after the pod turned not Ready"
    assert all(s == 200 for _t, s, _e in placed) and lost.address not in served_by, (placed, lost.address)
    assert spare.address in served_by, f"the pod placed again took no new conversation: {placed}"
    print(
        f"FIGURE node-lost: {in_flight_failed} of 12 in-flight requests failed (those on the lost node); while its "
        f"pod still said Ready ({NOTICE} s) {len(before)} of {len(unnoticed)} new requests failed; once not Ready "
        f"{len(after)} of {len(noticed)} failed (the last {max(late, default=0):.2f} s after); with the pod placed "
        f"again the picker counts 2 ready endpoints, {len(placed)} of {len(placed)} new conversations answered, "
        f"{sum(1 for _t, _s, e in placed if e == spare.address)} by the new engine, none by the lost one"
    )
