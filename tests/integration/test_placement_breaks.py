"""The placement checks fail when the pod template breaks (issue 24's acceptance, last point).

The AI grid's flagship (Qwen3.5-397B-A17B: data=2, dataLocal=1, TP 4, expert parallel; one
LeaderWorkerSet group of a leader and a worker over two 4-GPU nodes) is rendered by the collection,
made whole by hand (its worker gets the leader's engine container: resources and engine arguments;
both ask for the RDMA device and attach the secondary network, with the macvlan network the platform
would render), and applied to a grid-h100 control plane where KServe, the LeaderWorkerSet controller,
kube-scheduler and kwok make and run its pods. Whole, ``tests/placement_checks.py`` finds nothing
wrong. Then one thing is broken at a time, before the apply, and the check that owns it must say so:

* a worker container without GPUs,
* a worker without the engine arguments,
* RDMA that nothing uses (the network operator subscribed, no pod asking for the device).

This does not depend on what the render does today: it proves that the checks the examples are held to
(tests/integration/test_placement.py) can fail.
"""

from __future__ import annotations

import copy
import json
import time

import pytest
import yaml
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.plugin_utils import render
from controlplane import artifacts
from controlplane.cluster import ControlPlane

from tests import placement_checks
from tests.serving_helpers import INVENTORIES

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SITE, HOST, MODEL = "example-ai-grid", "grid-central-1", "qwen-397b-a17b"
# a secondary network exists only with a macvlan master (or SR-IOV): platform.rdma_attachment
EXTRA = {"network_operator_macvlan_master": "ens8f0np0"}
NETWORK_OPERATOR = {
    "apiVersion": "operators.coreos.com/v1alpha1",
    "kind": "Subscription",
    "metadata": {"name": "nvidia-network-operator", "namespace": "openshift-operators"},
    "spec": {
        "name": "nvidia-network-operator",
        "channel": "stable",
        "source": "certified-operators",
        "sourceNamespace": "openshift-marketplace",
    },
}


def _main(spec: dict) -> dict:
    return next(c for c in spec["containers"] if c["name"] == "main")


@pytest.fixture(scope="module")
def plane():
    cp = ControlPlane("grid-h100").start()
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="module")
def flagship() -> tuple[dict, dict]:
    return make_flagship()


def make_flagship() -> tuple[dict, dict]:
    """(the site intent, the flagship's LLMInferenceService made whole)."""
    intent = cli.site_intents(str(INVENTORIES / SITE), None, EXTRA)[HOST]
    (svc,) = [
        o
        for o in render.render_component("model_service", intent)
        if o["kind"] == "LLMInferenceService" and o["metadata"]["name"] == MODEL
    ]
    attach = placement_checks.rdma_attachment(intent)
    assert attach["network"], "the macvlan master gives the RDMA device a secondary network"
    main = _main(svc["spec"]["template"])
    for side in ("requests", "limits"):
        main.setdefault("resources", {}).setdefault(side, {})[attach["resource"]] = "1"
    worker = copy.deepcopy(svc["spec"]["template"])
    worker["containers"] = [copy.deepcopy(main)]
    svc["spec"]["worker"] = worker
    svc["metadata"].setdefault("annotations", {})[placement_checks.NETWORKS_ANNOTATION] = (
        f"{attach['network_namespace']}/{attach['network']}"
    )
    return intent, svc


def _deploy(cp: ControlPlane, intent: dict, svc: dict, ns: str) -> dict:
    """Apply svc in namespace ns, wait for its LeaderWorkerSet's pods to run; the intent, retargeted."""
    retargeted = copy.deepcopy(intent)
    retargeted["serving"]["namespace"] = ns
    retargeted["serving"]["models"] = [m for m in intent["serving"]["models"] if m["name"] == MODEL]
    svc = copy.deepcopy(svc)
    svc["metadata"]["namespace"] = ns
    annotations = svc["metadata"].get("annotations") or {}
    if placement_checks.NETWORKS_ANNOTATION in annotations:  # the network of the namespace it now runs in
        attach = placement_checks.rdma_attachment(retargeted)
        annotations[placement_checks.NETWORKS_ANNOTATION] = f"{attach['network_namespace']}/{attach['network']}"
    artifacts.stage(cp.new_api_client(), retargeted)  # the namespace and the flagship's pvc:// weights
    res = cp.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(svc))
    assert res.returncode == 0, res.stderr
    deadline = time.monotonic() + 180
    while True:
        snap = placement_checks.Snapshot.read(cp.new_api_client())
        (pool,) = placement_checks.pools(snap, retargeted)
        running = [p for p in pool.pods if (p.get("status") or {}).get("phase") == "Running"]
        if len(running) == 2:
            return retargeted
        if time.monotonic() > deadline:
            pods = json.dumps([(p["metadata"]["name"], p.get("status", {}).get("phase")) for p in pool.pods])
            raise AssertionError(f"the flagship's two pods did not run in {ns}: {pods}")
        time.sleep(1)


def _problems(cp: ControlPlane, intent: dict, *checks: str) -> list[str]:
    found = placement_checks.check(placement_checks.Snapshot.read(cp.new_api_client()), intent, checks)
    return [p for c in checks for p in found[c]]


def _undeploy(cp: ControlPlane, ns: str) -> None:
    res = cp.kubectl("delete", "namespace", ns, "--wait=true", "--timeout=120s")
    assert res.returncode == 0, res.stderr
    cp.kubectl("delete", "persistentvolumes", "-l", "inference.blueprints/staged-artifact", "--wait=false")


def test_the_whole_flagship_passes(plane, flagship):
    intent, svc = flagship
    ns = "break-none"
    retargeted = _deploy(plane, intent, svc, ns)
    try:
        assert not _problems(plane, retargeted, "binding", "gpus", "ranks", "rdma")
    finally:
        _undeploy(plane, ns)


def test_a_worker_without_gpus_fails(plane, flagship):
    intent, svc = copy.deepcopy(flagship[0]), copy.deepcopy(flagship[1])
    worker = _main(svc["spec"]["worker"])
    for side in ("requests", "limits"):
        for r in placement_checks.GPU_RESOURCES:
            worker["resources"].get(side, {}).pop(r, None)
    ns = "break-worker-gpus"
    retargeted = _deploy(plane, intent, svc, ns)
    try:
        problems = _problems(plane, retargeted, "gpus", "ranks")
        assert any("requests no GPU" in p for p in problems), problems
        assert any("its pods request 4 GPUs" in p for p in problems), problems
    finally:
        _undeploy(plane, ns)


def test_a_worker_without_engine_arguments_fails(plane, flagship):
    intent, svc = copy.deepcopy(flagship[0]), copy.deepcopy(flagship[1])
    worker = _main(svc["spec"]["worker"])
    worker["env"] = [e for e in worker["env"] if e["name"] != "VLLM_ADDITIONAL_ARGS"]
    ns = "break-worker-args"
    retargeted = _deploy(plane, intent, svc, ns)
    try:
        problems = _problems(plane, retargeted, "ranks")
        assert any("runs other engine arguments than its leader" in p and "--max-model-len" in p for p in problems), (
            problems
        )
        assert any("runs without" in p and "--kv-cache-dtype" in p for p in problems), problems
    finally:
        _undeploy(plane, ns)


def test_rdma_that_nothing_uses_fails(plane, flagship):
    intent, svc = copy.deepcopy(flagship[0]), copy.deepcopy(flagship[1])
    resource = placement_checks.rdma_attachment(intent)["resource"]
    for spec in (svc["spec"]["template"], svc["spec"]["worker"]):
        for side in ("requests", "limits"):
            _main(spec)["resources"][side].pop(resource, None)
    del svc["metadata"]["annotations"][placement_checks.NETWORKS_ANNOTATION]
    res = plane.kubectl("apply", "-f", "-", input=json.dumps(NETWORK_OPERATOR))
    assert res.returncode == 0, res.stderr
    ns = "break-rdma"
    retargeted = _deploy(plane, intent, svc, ns)
    try:
        problems = _problems(plane, retargeted, "rdma", "network_operator")
        assert any(f"requests no {resource}" in p for p in problems), problems
        assert any("nvidia-network-operator is installed, but no pod requests" in p for p in problems), problems
    finally:
        _undeploy(plane, ns)
        plane.kubectl("delete", "-f", "-", input=json.dumps(NETWORK_OPERATOR))
