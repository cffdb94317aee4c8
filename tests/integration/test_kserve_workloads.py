"""The pod templates the real KServe controller makes of the rendered services (issue 24).

The example sites' LLMInferenceServices go, as the model_service role renders them, into a control
plane running KServe v0.20.0's LLMInferenceService controller with its own presets; the tests read
the Deployments and LeaderWorkerSets KServe creates after its merge with the presets and compare
every pod template with the deployment intent (tests/kserve_checks.py): every rank of an engine,
leader and workers, asks for its GPUs and runs the same engine arguments. Rendering a worker the way
the collection used to (``worker: {}``), or one without GPUs or engine arguments, makes the same
checks fail: that is shown here too.
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
from kubernetes import dynamic

from tests.kserve_checks import _check_workloads, _container, _env
from tests.serving_helpers import INVENTORIES

pytestmark = pytest.mark.cluster

GW_NS, GW_NAME = kserve_controller.INGRESS_GATEWAY.split("/")


@pytest.fixture(scope="module")
def kserve(cluster_factory):
    # the same instance as tests/controlplane/test_kserve_controller.py (one KServe plane per session)
    cp = cluster_factory(DEFAULT_PROFILE, name="kserve", kserve=True)
    gateway = [
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "openshift-default"},
            "spec": {"controllerName": "openshift.io/gateway-controller/v1"},
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {
                "name": GW_NAME,
                "namespace": GW_NS,
                "labels": {"serving.kserve.io/gateway": "kserve-ingress-gateway"},
            },
            "spec": {
                "gatewayClassName": "openshift-default",
                "listeners": [
                    {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}}
                ],
            },
        },
    ]
    res = cp.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in gateway))
    assert res.returncode == 0, res.stderr
    return cp


@pytest.fixture(scope="module")
def grid():
    return cli.site_intents(str(INVENTORIES / "example-ai-grid"), None)["grid-central-1"]


def service(intent: dict, name: str) -> dict:
    objs = render.render_components(intent["stages"]["serving"], intent)
    return next(o for o in objs if o["kind"] == "LLMInferenceService" and o["metadata"]["name"] == name)


def model(intent: dict, name: str) -> dict:
    return next(m for m in intent["serving"]["models"] if m["name"] == name)


def create(cp, ns: str, svc: dict) -> None:
    """The rendered service, as is, in a namespace of its own."""
    svc = copy.deepcopy(svc)
    svc["metadata"]["namespace"] = ns
    cp.kubectl("create", "namespace", ns)
    res = cp.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(svc))
    assert res.returncode == 0, res.stderr


def workloads(cp, ns: str, m: dict, timeout: float = 60.0) -> tuple[list[str], dict]:
    """(problems, pods) of kserve_checks._check_workloads once KServe created every workload of model m."""
    dyn = dynamic.DynamicClient(cp.new_api_client())
    end = time.monotonic() + timeout
    while True:
        problems: list[str] = []
        pods = _check_workloads(dyn, ns, m, problems)
        if all(p["template"] is not None for p in pods.values()) or time.monotonic() > end:
            return problems, pods
        time.sleep(0.3)


def lws_pods(pods: dict, role: str) -> tuple[dict, dict]:
    """(leader pod template, worker pod template) of a role's LeaderWorkerSet, as KServe created it."""
    tmpl = pods[role]["object"]["spec"]["leaderWorkerTemplate"]
    return tmpl["leaderTemplate"], tmpl["workerTemplate"]


def test_every_rank_of_the_grid_flagship_runs_the_leaders_engine(kserve, grid):
    """qwen-397b-a17b (TP=4, DP=2, dataLocal 1 on 4-GPU nodes): KServe's data-parallel preset makes a
    LeaderWorkerSet of a leader and one worker pod; after the merge both ask for the plan's 4 GPUs and run
    the same engine arguments, /dev/shm and memory."""
    ns, name = "ranks-397b", "qwen-397b-a17b"
    m = model(grid, name)
    create(kserve, ns, service(grid, name))
    problems, pods = workloads(kserve, ns, m)
    assert not problems, "\n".join(problems)
    leader, worker = (p["spec"] for p in lws_pods(pods, "serve"))
    lead, work = _container(leader), _container(worker)
    plan = next(e["plan"] for e in grid["plans"] if e["model"]["name"] == name)
    size = pods["serve"]["object"]["spec"]["leaderWorkerTemplate"]["size"]
    gpus = str(plan["pools"]["serve"]["gpus_per_replica"] // size)
    for c in (lead, work):
        assert str(c["resources"]["requests"]["nvidia.com/gpu"]) == gpus
        assert str(c["resources"]["limits"]["nvidia.com/gpu"]) == gpus
    args = _env(lead)["VLLM_ADDITIONAL_ARGS"]
    assert _env(work)["VLLM_ADDITIONAL_ARGS"] == args and "--max-model-len=32768" in args
    # the preset, not us, makes the worker a headless rank of the leader's engine
    assert "--headless" in work["command"][2] and "--headless" not in lead["command"][2]


@pytest.mark.parametrize(
    ("break_it", "expect"),
    [
        # the render before issue 24: the preset's worker as it ships
        (lambda w: w.clear(), ["worker: resources.requests.nvidia.com/gpu=None", "VLLM_ADDITIONAL_ARGS=None"]),
        (lambda w: _container(w).pop("resources"), ["worker: resources.requests.nvidia.com/gpu=None"]),
        (
            lambda w: _container(w).__setitem__(
                "env", [e for e in _container(w)["env"] if e["name"] != "VLLM_ADDITIONAL_ARGS"]
            ),
            ["worker: env VLLM_ADDITIONAL_ARGS=None, the intent says", "the leader runs"],
        ),
    ],
    ids=["empty-worker", "worker-without-gpus", "worker-without-engine-args"],
)
def test_a_worker_without_gpus_or_engine_arguments_is_caught(kserve, grid, request, break_it, expect):
    """The same service with its worker broken after rendering: the checks that pass above fail, on what
    KServe made of it."""
    name = "qwen-397b-a17b"
    svc = service(grid, name)
    break_it(svc["spec"]["worker"])
    ns = f"ranks-{request.node.callspec.id}"
    create(kserve, ns, svc)
    problems, _pods = workloads(kserve, ns, model(grid, name))
    text = "\n".join(problems)
    for e in expect:
        assert e in text, text
