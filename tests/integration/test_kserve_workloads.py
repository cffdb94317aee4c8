"""The pod templates the real KServe controller makes of the rendered services (issue 24).

The example sites' LLMInferenceServices go, as the model_service role renders them, into a control
plane running KServe v0.20.0's LLMInferenceService controller with its own presets; the tests read
the Deployments and LeaderWorkerSets KServe creates after its merge with the presets and compare
every pod template with the deployment intent (tests/kserve_checks.py): every rank of an engine,
leader and workers, asks for its GPUs and runs the same engine arguments, and every pod whose traffic
crosses nodes asks for an RDMA device and names the secondary network. Rendering a worker the way the
collection used to (``worker: {}``), one without GPUs or engine arguments, or pods without the RDMA
device the site installs the network operator for, makes the same checks fail: that is shown too.
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

from tests.kserve_checks import (
    NETWORKS_ANNOTATION,
    _check_workloads,
    _container,
    _env,
    accounts_for,
    check_rdma,
    check_rdma_installed,
)
from tests.serving_helpers import INVENTORIES

pytestmark = pytest.mark.cluster

GW_NS, GW_NAME = kserve_controller.INGRESS_GATEWAY.split("/")


@pytest.fixture(scope="module")
def kserve(cluster_factory):
    # the same instance as tests/controlplane/test_kserve_controller.py (one KServe plane per session)
    cp = cluster_factory(DEFAULT_PROFILE, name="kserve", kserve=True)
    gateway = kserve_controller.ingress_gateway()
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


CREATED: list[tuple[object, str]] = []  # (plane, namespace) of this test, deleted after it


@pytest.fixture(autouse=True)
def _delete_namespaces():
    """Each test's namespaces go after it: the plane is the session's KServe plane, and KServe's controller keeps
    re-reconciling a data-parallel service with pods (several times a minute, most of a second of CPU each) for
    as long as it exists."""
    yield
    while CREATED:
        cp, ns = CREATED.pop()
        cp.kubectl("delete", "namespace", ns, "--wait=false", "--ignore-not-found")


def create(cp, ns: str, svc: dict, intent: dict | None = None) -> None:
    """The rendered service, as is, in a namespace of its own, after the ServiceAccounts of the site's that it
    names (``intent``: the site it was rendered from; kserve_checks.accounts_for)."""
    svc = copy.deepcopy(svc)
    svc["metadata"]["namespace"] = ns
    objs = accounts_for(render.render_components(intent["stages"]["serving"], intent), svc, ns) if intent else []
    cp.kubectl("create", "namespace", ns)
    CREATED.append((cp, ns))
    res = cp.kubectl("apply", "--server-side", "-f", "-", input="\n---\n".join(json.dumps(o) for o in [*objs, svc]))
    assert res.returncode == 0, res.stderr


def workloads(cp, ns: str, m: dict, timeout: float = 240.0) -> tuple[list[str], dict]:
    """(problems, pods) of kserve_checks._check_workloads once KServe created every workload of model m."""
    dyn = dynamic.DynamicClient(cp.new_api_client())
    end = time.monotonic() + timeout
    while True:
        problems: list[str] = []
        pods = _check_workloads(dyn, ns, m, problems)
        if all(p["template"] is not None for p in pods.values()):
            return problems, pods
        if time.monotonic() > end:
            missing = [f"{p['kind']} {p['name']}" for p in pods.values() if p["template"] is None]
            svc = dyn.resources.get(api_version="serving.kserve.io/v1alpha2", kind="LLMInferenceService")
            status = (svc.get(name=m["name"], namespace=ns).to_dict().get("status") or {}).get("conditions")
            raise AssertionError(f"KServe made no {missing} of {ns}/{m['name']} within {timeout:.0f} s; "
                                 f"its conditions: {status}; {problems}")  # fmt: skip
        time.sleep(0.5)


def lws_pods(pods: dict, role: str) -> tuple[dict, dict]:
    """(leader pod template, worker pod template) of a role's LeaderWorkerSet, as KServe created it."""
    tmpl = pods[role]["object"]["spec"]["leaderWorkerTemplate"]
    return tmpl["leaderTemplate"], tmpl["workerTemplate"]


def test_every_rank_of_the_grid_flagship_runs_the_leaders_engine(kserve, grid):
    """qwen-397b-a17b (data-parallel ranks over more GPUs than a 4-GPU node holds): KServe's data-parallel
    preset makes a LeaderWorkerSet of a leader and worker pods; after the merge both templates ask for the
    plan's GPUs per pod and run the same engine arguments, /dev/shm and memory."""
    ns, name = "ranks-397b", "qwen-397b-a17b"
    m = model(grid, name)
    create(kserve, ns, service(grid, name), grid)
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
    create(kserve, ns, svc, grid)
    problems, _pods = workloads(kserve, ns, model(grid, name))
    text = "\n".join(problems)
    for e in expect:
        assert e in text, text


@pytest.fixture(scope="module")
def chat():
    return cli.site_intents(str(INVENTORIES / "example-chat"), None)["chat-east-1"]


def test_the_chat_sites_pd_pods_ask_for_rdma_and_name_the_network(kserve, chat):
    """example-chat: P/D with NIXL over RDMA. KServe makes a prefill Deployment (single-node prefill preset) and
    a decode LeaderWorkerSet (decode data-parallel preset); every pod template asks for the RDMA device and
    carries the service's Multus annotation, which KServe copies to the pods it creates."""
    ns, name = "rdma-chat", "qwen-chat"
    m = model(chat, name)
    svc = service(chat, name)
    create(kserve, ns, svc, chat)
    problems, pods = workloads(kserve, ns, m)
    devices = check_rdma(chat, m, pods, problems)
    check_rdma_installed(chat, devices, problems)
    assert not problems, "\n".join(problems)
    assert set(pods) == {"prefill", "decode"} and devices == 2
    attach = chat["platform"]["network_operator"]["rdma"]
    for got in pods.values():
        tmpl = got["template"]
        assert (
            tmpl["metadata"]["annotations"][NETWORKS_ANNOTATION] == svc["metadata"]["annotations"][NETWORKS_ANNOTATION]
        )
        assert str(_container(tmpl["spec"])["resources"]["limits"][attach["resource"]]) == "1"
    # NIXL's side channel and UCX over RDMA in both pools; the decode pool's vLLM behind the routing sidecar
    for got in pods.values():
        env = _env(_container(got["template"]["spec"]))
        assert env["UCX_TLS"].startswith("rc") and env["KSERVE_INFER_ROCE"] == "true"


def test_the_grid_flagships_ranks_ask_for_rdma(kserve, grid):
    ns, name = "rdma-397b", "qwen-397b-a17b"
    m = model(grid, name)
    create(kserve, ns, service(grid, name), grid)
    problems, pods = workloads(kserve, ns, m)
    assert check_rdma(grid, m, pods, problems) == 2  # the leader's and the worker's
    assert not problems, "\n".join(problems)
    for tmpl in lws_pods(pods, "serve"):
        assert NETWORKS_ANNOTATION in tmpl["metadata"]["annotations"]


def _strip_rdma(svc: dict) -> None:
    svc["metadata"]["annotations"].pop(NETWORKS_ANNOTATION)
    for pod in (svc["spec"]["template"], svc["spec"]["worker"]):
        res = _container(pod)["resources"]
        for side in ("requests", "limits"):
            res[side] = {k: v for k, v in res[side].items() if not k.startswith("rdma/")}


def test_rdma_that_nothing_uses_is_caught(kserve, grid):
    """The flagship rendered without its RDMA device and network: its ranks still span two nodes, and the site
    still installs the network operator for it. Both show."""
    ns, name = "rdma-unused", "qwen-397b-a17b"
    m = model(grid, name)
    svc = service(grid, name)
    _strip_rdma(svc)
    create(kserve, ns, svc, grid)
    problems, pods = workloads(kserve, ns, m)
    devices = check_rdma(grid, m, pods, problems)
    check_rdma_installed(grid, devices, problems)
    text = "\n".join(problems)
    assert devices == 0
    assert "the serve engine's ranks span 2 pods over RDMA, but the pod asks for no RDMA device" in text, text
    assert "names no secondary network" in text, text
    assert "the network operator is installed" in text and "no pod asks for an RDMA device" in text, text
