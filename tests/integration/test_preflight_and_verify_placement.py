"""Placement on a real API server (issue 24): preflight stops a plan whose pods do not fit the cluster's nodes
before anything is written, and verify reads where the serving pods were bound.

Preflight: the chat site on its profile (2 nodes of 8 H100), with the planned pods replaced through
``preflight_requirements`` by three pods of 5 H100: 15 of the 16 GPUs and a pod smaller than a node, so
only the placement can tell that the third has no node. The whole site.yml runs; it must stop in
preflight (cluster_facts, reading the profile's Node objects) with the numbers, and write nothing.

Verify: the grid flagship's service and the pods its LeaderWorkerSet runs (leader and worker, from the
intent's pod templates, bound to the profile's GPU nodes by ``spec.nodeName``) go into a namespace;
``k8s_endpoints`` lists them through the collection's client and reports them against the plan, and
``placement_enforce`` fails on a worker left unbound or asking for no GPU.
"""

from __future__ import annotations

import copy
import json

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli, k8s_endpoints
from ansible_collections.inference.blueprints.plugins.plugin_utils import render
from controlplane.cluster import DEFAULT_PROFILE
from kubernetes import dynamic

from tests.ansible_run import run_playbook
from tests.serving_helpers import EXAMPLES, INVENTORIES, PLAYBOOKS

pytestmark = [pytest.mark.cluster]

IMAGE = "registry.example/vllm@sha256:" + "3" * 64


def test_pods_that_fit_no_node_stop_preflight_before_any_write(cluster_factory, tmp_path):
    cluster = cluster_factory(EXAMPLES["example-chat"])
    pods = [{"model": "qwen-chat", "role": "decode", "gpu": "h100", "gpus": 5, "rdma": 0, "count": 3}]
    run = run_playbook(
        PLAYBOOKS / "site.yml",
        INVENTORIES / "example-chat",
        kubeconfig=cluster.kubeconfig,
        extravars={"report_dir": str(tmp_path / "reports"), "preflight_requirements": {"pods": pods}},
    )
    assert run.rc != 0
    failed = run.failures()
    assert failed, run.stdout[-3000:]
    _host, task, action, _status, result = failed[0]
    assert action == "inference.blueprints.cluster_facts", (task, action, result.get("msg"))
    msg = str(result.get("msg"))
    assert "Placement: 1 of 3 qwen-chat decode pod(s) (5 x h100 each, on one node) fit no node" in msg, msg
    assert "3 of 8 free" in msg and "valid: GPU nodes with room for every pod" in msg, msg
    assert run.results_of("inference.blueprints.k8s_apply") == [], "objects were applied before preflight failed"
    ns = dynamic.DynamicClient(cluster.new_api_client()).resources.get(api_version="v1", kind="Namespace")
    assert "llm-chat" not in {n.metadata.name for n in ns.get().items}


@pytest.fixture(scope="module")
def plane(cluster_factory):
    # the plane of tests/integration/test_k8s_endpoints.py: no KServe controller, nothing else writes the pods
    yield cluster_factory(DEFAULT_PROFILE, name="endpoints-no-kserve", kserve=False)
    cluster_factory.release("endpoints-no-kserve")  # its last user: an idle plane costs CPU for the rest of the session


def _gpu_nodes(plane) -> list[str]:
    nodes = json.loads(plane.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    return sorted(n["metadata"]["name"] for n in nodes if "nvidia.com/gpu.product" in n["metadata"].get("labels", {}))


def _pod(name: str, w: dict, spec: dict, annotations: dict, node: str | None) -> dict:
    spec = copy.deepcopy(spec)
    for c in spec["containers"]:
        c["image"] = IMAGE  # the preset's image in a real cluster: KServe merges it in
    if node:
        spec["nodeName"] = node
    else:  # left unbound, as a pod no node fits stays: kube-scheduler runs here and would bind it otherwise
        spec["schedulerName"] = "none-runs-here"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": dict(w["labels"]), "annotations": dict(annotations)},
        "spec": spec,
    }


def test_verify_reports_where_the_flagships_ranks_run(plane):
    ns = "placement-verify"
    intent = cli.site_intents(str(INVENTORIES / "example-ai-grid"), None)["grid-central-1"]
    m = next(x for x in intent["serving"]["models"] if x["name"] == "qwen-397b-a17b")
    svc = next(
        o
        for o in render.render_components(intent["stages"]["serving"], intent)
        if o["kind"] == "LLMInferenceService" and o["metadata"]["name"] == m["name"]
    )
    svc["metadata"]["namespace"] = ns
    plane.kubectl("create", "namespace", ns)
    res = plane.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(svc))
    assert res.returncode == 0, res.stderr
    w = m["main"]
    a, b = _gpu_nodes(plane)[:2]
    leader = _pod("flagship-0", w, w["template"], m["annotations"], a)
    worker = _pod("flagship-0-1", w, w["worker"], m["annotations"], b)
    res = plane.kubectl("apply", "-n", ns, "-f", "-", input="\n---\n".join(json.dumps(p) for p in (leader, worker)))
    assert res.returncode == 0, res.stderr
    params = {
        **{k: None for k in ("kubeconfig", "context", "host", "api_key", "validate_certs", "ca_cert")},
        "kubeconfig": plane.kubeconfig,
        "namespace": ns,
        "api_version": "serving.kserve.io/v1alpha2",
        "kind": "LLMInferenceService",
        "probe_timeout": 1.0,
        "smoke_prompt": None,
        "smoke_timeout": 1.0,
        "endpoint_validate_certs": False,
        "placement": True,
        "placement_enforce": True,
        "models": [m],
    }
    out = k8s_endpoints.run(params, env={})
    assert not out.get("failed"), out
    ((pool,),) = [e["pools"] for e in out["placement"]]
    per_pod = w["gpus_per_replica"] // w["pods_per_replica"]  # one engine here: its leader and worker
    planned = w["planned_replicas"] * w["pods_per_replica"]  # autoscaled: fewer than planned is not a problem
    assert (pool["pods"], pool["bound"], pool["gpus"], pool["rdma"]) == (2, 2, 2 * per_pod, 2)
    assert [n["node"] for n in pool["nodes"]] == [a, b]
    assert out["placement_lines"] == [
        f"qwen-397b-a17b: serve 2 of 2 pod(s) bound ({planned} planned, autoscaled; {per_pod} GPUs + 1 RDMA each): "
        f"{a}: 1 ({per_pod} GPUs, 1 RDMA), {b}: 1 ({per_pod} GPUs, 1 RDMA)"
    ]
    assert "serving pods bound to nodes: 2, placement problems: 0" in out["msg"]

    # the worker the collection used to render: no GPU, and (here) no node either
    plane.kubectl("delete", "pod", "-n", ns, "flagship-0-1", "--grace-period=0", "--force")  # no kubelet to confirm
    broken = copy.deepcopy(w["worker"])
    broken["containers"][0]["resources"] = {}
    res = plane.kubectl(
        "apply", "-n", ns, "-f", "-", input=json.dumps(_pod("flagship-0-1", w, broken, m["annotations"], None))
    )
    assert res.returncode == 0, res.stderr
    out = k8s_endpoints.run(params, env={})
    assert out["failed"] and out["msg"].startswith("the serving pods are not placed as planned: "), out
    assert "qwen-397b-a17b serve: 1 pod(s) bound to no node: flagship-0-1" in out["msg"]
    assert f"pod flagship-0-1 asks for 0 GPUs, the plan {per_pod}" in out["msg"]
    assert not k8s_endpoints.run({**params, "placement_enforce": False}, env={}).get("failed")
