"""Faults of the running system (issue 33 item 4; figures in docs/reliability.md, "Faults of a running site"),
on the session's KServe plane: real kube-apiserver, kube-scheduler and controllers, kwok as the node agent,
the LeaderWorkerSet controller and KServe v0.20.0's LLMInferenceService controller.

The example chat site's ``qwen-chat`` service (P/D: a prefill Deployment, a decode LeaderWorkerSet, the
endpoint picker) runs until every workload pod has an IP and the service is Ready; then

1. KServe's controller is killed (SIGKILL, a crash) and started again: nothing it made is recreated (same
   UIDs), no pod is restarted, the service stays Ready, and once it resynced nothing moves (no loop);
2. the GPU node the service's pods run on is lost (its Node deleted, as the node lifecycle does with a
   machine that is gone): the pod garbage collector deletes its pods, the Deployment and the LeaderWorkerSet
   make new ones and the real scheduler places them on the spare GPUs of the other node.

Each prints its figure (seconds to recover) as a ``FIGURE`` line for docs/reliability.md.
"""

from __future__ import annotations

import copy
import json
import time

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.plugin_utils import render
from controlplane import kserve_controller
from controlplane.cluster import DEFAULT_PROFILE

from tests import quiet
from tests.serving_helpers import INVENTORIES

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NAME = "qwen-chat"
SELECTOR = f"app.kubernetes.io/name={NAME},app.kubernetes.io/part-of=llminferenceservice"


@pytest.fixture(scope="module")
def kserve(cluster_factory):
    # the session's KServe plane (tests/integration/test_kserve_workloads.py and test_kserve_cert_loop.py)
    cp = cluster_factory(DEFAULT_PROFILE, name="kserve", kserve=True)
    gateway = kserve_controller.ingress_gateway()
    res = cp.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in gateway))
    assert res.returncode == 0, res.stderr
    return cp


def _service(ns: str) -> dict:
    intent = cli.site_intents(str(INVENTORIES / "example-chat"), None)["chat-east-1"]
    objs = render.render_components(intent["stages"]["serving"], intent)
    svc = copy.deepcopy(next(o for o in objs if o["kind"] == "LLMInferenceService" and o["metadata"]["name"] == NAME))
    svc["metadata"]["namespace"] = ns
    return svc


def _get(cp, *args: str) -> dict:
    res = cp.kubectl(*args, "-o", "json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _pods(cp, ns: str) -> list[dict]:
    return _get(cp, "-n", ns, "get", "pods", "-l", SELECTOR)["items"]


def _ready(cp, ns: str) -> bool:
    svc = _get(cp, "-n", ns, "get", "llminferenceservice", NAME)
    return any(c["type"] == "Ready" and c["status"] == "True" for c in svc.get("status", {}).get("conditions", []))


def _running(cp, ns: str) -> list[dict] | None:
    pods = _pods(cp, ns)
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    ok = live and all(p["status"].get("podIP") and p["spec"].get("nodeName") for p in live)
    return live if ok else None


def _until(cond, timeout: float, what: str, seen=None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"not within {timeout:.0f} s: {what}" + (f"; saw {seen()}" if seen else ""))


def _seen(cp, ns: str) -> str:
    """What a wait saw: each pod's node and phase, why an unplaced one is unplaced, the service's conditions."""
    pods = []
    for p in _pods(cp, ns):
        why = [c.get("message", "") for c in p["status"].get("conditions", []) if c.get("reason") == "Unschedulable"]
        pods.append(f"{p['metadata']['name']} on {p['spec'].get('nodeName') or '-'} {p['status'].get('phase')} {why}")
    svc = _get(cp, "-n", ns, "get", "llminferenceservice", NAME)
    conds = {c["type"]: c["status"] for c in svc.get("status", {}).get("conditions", [])}
    return f"pods {pods or 'none'}, conditions {conds}"


@pytest.fixture
def served(kserve, request):
    ns = f"fault-{request.node.name.split('_')[1]}"[:40]
    kserve.kubectl("create", "namespace", ns)
    try:
        res = kserve.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(_service(ns)))
        assert res.returncode == 0, res.stderr
        # (KServe's first reconcile of a P/D service on a loaded machine: up to minutes, as in tests/integration)
        _until(
            lambda: _running(kserve, ns) and _ready(kserve, ns),
            300,
            f"{NAME} Ready with every pod placed",
            seen=lambda: _seen(kserve, ns),
        )
        yield ns
    finally:
        # waited for: the next test places the same service on the GPUs these pods hold
        kserve.kubectl("delete", "namespace", ns, "--ignore-not-found", "--timeout=100s")


def _uids(snapshot: dict) -> dict[str, str]:
    return {k: o["metadata"]["uid"] for k, o in snapshot.items()}


def test_kserve_controller_crash_recreates_nothing_and_resyncs_quietly(kserve, served):
    cp, ns = kserve, served
    kubectl = [str(cp.binary), "kubectl", f"--kubeconfig={cp.kubeconfig}"]
    before = quiet.snapshot(kubectl, [ns], None)
    pods = {p["metadata"]["uid"] for p in _pods(cp, ns)}
    t0 = time.monotonic()
    cp.kserve.proc.kill()
    cp.kserve.proc.wait()
    cp.kserve.t0 = time.monotonic()
    cp.kserve.launch()
    cp.kserve.ready()
    back = time.monotonic() - t0
    assert _ready(cp, ns), "the service lost Ready over a controller restart"
    after = quiet.snapshot(kubectl, [ns], None)
    recreated = [k for k, uid in _uids(before).items() if _uids(after).get(k) not in (None, uid)]
    assert not recreated, f"recreated by the restarted controller: {recreated}"
    assert {p["metadata"]["uid"] for p in _pods(cp, ns)} == pods, "a pod was replaced"
    noisy = quiet.check(kubectl, [ns], None, 10)
    assert not noisy, "not quiet after the restart:\n" + "\n".join(noisy)
    print(f"FIGURE kserve-restart: controller back in {back:.1f} s; 0 objects recreated, 0 pods replaced")


def test_gpu_node_lost_pods_are_placed_again_on_the_spare_gpus(kserve, served):
    cp, ns = kserve, served
    pods = _running(cp, ns)
    node = pods[0]["spec"]["nodeName"]
    on_node = {p["metadata"]["uid"] for p in pods if p["spec"]["nodeName"] == node}
    saved = _get(cp, "get", "node", node)
    t0 = time.monotonic()
    res = cp.kubectl("delete", "node", node, "--wait=false")
    assert res.returncode == 0, res.stderr
    try:

        def replaced():
            live = _running(cp, ns)
            if not live or {p["metadata"]["uid"] for p in live} & on_node:
                return None
            return live if all(p["spec"]["nodeName"] != node for p in live) else None

        again = _until(replaced, 180, f"the {len(on_node)} pod(s) of lost node {node} placed on another node")
        took = time.monotonic() - t0
        assert _until(lambda: _ready(cp, ns), 60, f"{NAME} Ready again")
        print(
            f"FIGURE node-lost: {len(on_node)} pod(s) of {node} placed again on "
            f"{sorted({p['spec']['nodeName'] for p in again})} in {took:.1f} s"
        )
    finally:
        meta = saved["metadata"]
        node_obj = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {k: meta[k] for k in ("name", "labels", "annotations") if k in meta},
            "spec": {k: v for k, v in saved["spec"].items() if k not in ("taints", "unschedulable")},
        }
        cp.kubectl("create", "-f", "-", input=json.dumps(node_obj))
        cp.apply(
            node_obj, status={"capacity": saved["status"]["capacity"], "allocatable": saved["status"]["allocatable"]}
        )
