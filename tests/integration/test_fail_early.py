"""Fail early with the real cause (issue 33 items 1 and 2), on the local control plane's real scheduler, kwok and
KServe controller.

Preflight (cluster_facts with the serving checks of module_utils/serving_preflight.py) stops before anything is
written, in seconds instead of after serving's 900 s wait:
- the rag example without its staged claim names the claim (every pod would have said ``persistentvolumeclaim
  "models-qwen3-6-27b" not found`` while the converge waited 900 s for ProgressDeadlineExceeded);
- a site whose GPUs another namespace's pods hold names the GPUs needed and free and the pods that hold them
  (the converge waited 900 s for ``Deployment does not have minimum availability`` while the pods said
  ``2 Insufficient nvidia.com/gpu``).
A wait whose pods cannot be scheduled (preflight told not to stop: ``preflight_fail_on_unmet: false``) stops well
before its timeout, naming the pod and the scheduler's reason, and shows progress lines while it waits.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.plugin_utils import render
from controlplane import kserve_controller
from controlplane.cluster import DEFAULT_PROFILE
from kubernetes import dynamic

from tests.ansible_run import run_playbook
from tests.kserve_checks import accounts_for
from tests.serving_helpers import INVENTORIES, PLAYBOOKS

pytestmark = [pytest.mark.cluster]

IMAGE = "registry.example/holder@sha256:" + "4" * 64


def _namespaces(cluster) -> set[str]:
    ns = dynamic.DynamicClient(cluster.new_api_client()).resources.get(api_version="v1", kind="Namespace")
    return {n.metadata.name for n in ns.get().items}


def _preflight_failure(run) -> str:
    """The message of the run's first failure, which must be preflight's, with nothing applied before it."""
    assert run.rc != 0, run.stdout[-3000:]
    failed = run.failures()
    assert failed, run.stdout[-3000:]
    _host, task, action, _status, result = failed[0]
    assert action == "inference.blueprints.cluster_facts", (task, action, result.get("msg"))
    assert run.results_of("inference.blueprints.k8s_apply") == [], "objects were applied before preflight failed"
    return str(result.get("msg"))


def test_the_rag_example_without_its_claim_stops_in_preflight_naming_it(cluster, tmp_path):
    ns = "fail-early-rag"  # a namespace of its own: another test may have staged the example's
    started = time.monotonic()
    run = run_playbook(
        PLAYBOOKS / "site.yml",
        INVENTORIES / "example-rag",
        kubeconfig=cluster.kubeconfig,
        extravars={"report_dir": str(tmp_path / "reports"), "serving_namespace": ns},
    )
    seconds = time.monotonic() - started
    msg = _preflight_failure(run)
    assert f"PersistentVolumeClaim {ns}/models-qwen3-6-27b (the weights of qwen-rag" in msg, msg
    assert 'persistentvolumeclaim "models-qwen3-6-27b" not found' in msg and "README" in msg, msg
    assert ns not in _namespaces(cluster)
    assert seconds < 300, f"preflight took {seconds:.0f} s"  # the whole run; it waited 900 s in serving before


@pytest.fixture
def gpus_taken(cluster):
    """Every GPU of the plane held by pods of another namespace (bound to the GPU nodes, Running under kwok)."""
    ns = "fail-early-other-site"
    nodes = json.loads(cluster.kubectl("get", "nodes", "-l", "nvidia.com/gpu.present=true", "-o", "json").stdout)
    cluster.kubectl("create", "namespace", ns)
    pods = []
    for n in nodes["items"]:
        name, gpus = n["metadata"]["name"], n["status"]["allocatable"]["nvidia.com/gpu"]
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"engine-{name}", "namespace": ns},
                "spec": {
                    "nodeName": name,
                    "containers": [
                        {
                            "name": "engine",
                            "image": IMAGE,
                            "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
                        }
                    ],
                },
            }
        )
    res = cluster.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(p) for p in pods))
    assert res.returncode == 0, res.stderr
    end = time.monotonic() + 60
    while True:
        listed = json.loads(cluster.kubectl("get", "pods", "-n", ns, "-o", "json").stdout)["items"]
        if len(listed) == len(pods) and all(p["spec"].get("nodeName") for p in listed):
            break
        assert time.monotonic() < end, "the GPU holders were not scheduled"
        time.sleep(0.5)
    yield ns, [p["metadata"]["name"] for p in pods]
    cluster.kubectl("delete", "namespace", ns, "--wait=true", "--timeout=60s")


def test_gpus_held_by_another_site_stop_preflight_with_the_shortfall(cluster, gpus_taken, tmp_path):
    other, holders = gpus_taken
    ns = "fail-early-chat"
    run = run_playbook(
        PLAYBOOKS / "site.yml",
        INVENTORIES / "example-chat",
        kubeconfig=cluster.kubeconfig,
        extravars={"report_dir": str(tmp_path / "reports"), "serving_namespace": ns},
    )
    msg = _preflight_failure(run)
    pods = "qwen-chat prefill 2 x 1 + RDMA, qwen-chat decode 3 x 2 + RDMA"
    assert f"GPUs free now: the plan's h100 pods ({pods}) need 8 x h100" in msg, msg
    assert "0 of 16 are free now" in msg, msg
    assert any(f"{other}/{pod} holds 8 on" in msg for pod in holders), msg
    assert ns not in _namespaces(cluster)


@pytest.fixture(scope="module")
def kserve(cluster_factory):
    # the session's KServe plane (tests/integration/test_kserve_workloads.py and tests/controlplane's)
    cp = cluster_factory(DEFAULT_PROFILE, name="kserve", kserve=True)
    gateway = kserve_controller.ingress_gateway()
    res = cp.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in gateway))
    assert res.returncode == 0, res.stderr
    return cp


def test_a_wait_on_unschedulable_pods_stops_early_naming_the_pod_and_the_scheduler(kserve, tmp_path):
    """The rag service without its claim, applied the way the serving stage applies it and waited for as it waits
    (k8s_apply with wait_for, through the action plugin): KServe creates the Deployment, kube-scheduler leaves its
    pods Pending (the claim does not exist), and the wait ends after the grace period, not at its timeout."""
    ns, timeout = "fail-early-wait", 240
    intent = cli.site_intents(str(INVENTORIES / "example-rag"), None)["rag-central-1"]
    rendered = render.render_components(intent["stages"]["serving"], intent)
    svc = next(o for o in rendered if o["kind"] == "LLMInferenceService")
    svc["metadata"]["namespace"] = ns
    accounts = accounts_for(rendered, svc, ns)
    play = f"""
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Apply the service and wait for it
      inference.blueprints.k8s_apply:
        objects: {json.dumps([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, *accounts, svc])}
        wait_for:
          - {{apiVersion: serving.kserve.io/v1alpha2, kind: LLMInferenceService, namespace: {ns}, name: qwen-rag,
             condition: Ready}}
        wait_timeout: {timeout}
"""
    try:
        started = time.monotonic()
        run = run_playbook(play, kubeconfig=kserve.kubeconfig, env={"INFERENCE_BLUEPRINTS_WAIT_GRACE": "20"})
        seconds = time.monotonic() - started
    finally:
        kserve.kubectl("delete", "namespace", ns, "--wait=false", "--ignore-not-found")
    assert run.rc != 0, run.stdout[-3000:]
    msg = run.failure_messages()
    assert msg.startswith("stopped waiting after "), msg
    assert f"pod {ns}/qwen-rag-kserve-" in msg and ": Unschedulable: " in msg, msg
    assert 'persistentvolumeclaim "models-qwen3-6-27b" not found' in msg, msg
    assert f"LLMInferenceService {ns}/qwen-rag" in msg, msg
    # the wait's own clock (the playbook's start and KServe's reconcile under a loaded machine add to the wall clock)
    waited = float(re.match(r"stopped waiting after ([\d.e+]+) s of ", msg)[1])
    assert waited < timeout / 2 and seconds < timeout, f"the wait took {waited:g} s of its {timeout} s ({seconds:.0f})"
    # serving progress while it waited: pods ready of those that exist, and the cause
    shown = [line for line in run.stdout.splitlines() if " s: LLMInferenceService " in line and "waiting " in line]
    assert shown, run.stdout[-3000:]
    # (the pods counted are those that exist; OpenShift AI's build has one more Ready pod there than upstream's)
    counted = re.search(
        rf"LLMInferenceService {ns}/qwen-rag \(serving.kserve.io/v1alpha2\): (\d+)/(\d+) pods ready", shown[0]
    )
    assert counted and int(counted[1]) < int(counted[2]) and "Unschedulable" in shown[0], shown
