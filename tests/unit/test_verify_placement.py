"""verify's placement (k8s_endpoints.placement): the serving pods, per model and pool, against the plan.

The pods are built the way KServe and the LeaderWorkerSet controller make them from the grid's rendered
flagship (the pod templates of tests/kserve_checks, with our labels), then bound, left Pending or broken.
The live read is tested on an API server by tests/integration/test_preflight_and_verify_placement.py.
"""

from __future__ import annotations

import copy

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_endpoints as ep

from tests.serving_helpers import INVENTORIES


@pytest.fixture(scope="module")
def grid() -> dict:
    return cli.site_intents(str(INVENTORIES / "example-ai-grid"), None)["grid-central-1"]


def pods_of(m: dict, annotations: dict) -> list[dict]:
    """The pods of model m's workloads as the cluster runs them: every planned pod, bound to a node of its own."""
    out = []
    for w in (m["prefill"], m["main"]):
        if not w:
            continue
        for i in range(w["planned_replicas"] * w["pods_per_replica"]):
            spec = copy.deepcopy(w["worker"] if i % w["pods_per_replica"] else w["template"])
            out.append(
                {
                    "metadata": {
                        "name": f"{m['name']}-{w['role']}-{i}",
                        "labels": dict(w["labels"]),
                        "annotations": dict(annotations),
                    },
                    "spec": {**spec, "nodeName": f"gpu-{i}"},
                    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
                }
            )
    return out


def flagship(grid: dict) -> tuple[dict, list[dict]]:
    m = next(x for x in grid["serving"]["models"] if x["name"] == "qwen-397b-a17b")
    return m, pods_of(m, m["annotations"])


def test_the_flagships_ranks_are_reported_per_node(grid):
    """The grid's flagship as planned (engines of several pods, a LeaderWorkerSet group each): every pod
    bound to a node of its own is reported there, with the GPUs and the RDMA device the plan gives it."""
    m, pods = flagship(grid)
    w = m["main"]
    n = w["planned_replicas"] * w["pods_per_replica"]
    per_pod = w["gpus_per_replica"] // w["pods_per_replica"]
    assert w["pods_per_replica"] > 1, "the flagship's engine spans pods (a leader and its workers)"
    (entry,) = ep.placement([m], [ep.pod_facts(p) for p in pods])
    assert entry["problems"] == []
    (pool,) = entry["pools"]
    assert (pool["role"], pool["planned_pods"], pool["pods"], pool["bound"], pool["ready"]) == ("serve", n, n, n, n)
    assert (pool["gpus"], pool["rdma"]) == (n * per_pod, n)
    assert pool["nodes"] == [{"node": f"gpu-{i}", "pods": 1, "gpus": per_pod, "rdma": 1} for i in range(n)]
    assert ep.placement_line(entry) == (
        f"qwen-397b-a17b: serve {n} of {n} pod(s) bound ({n} planned, autoscaled; {per_pod} GPUs + 1 RDMA each): "
        + ", ".join(f"gpu-{i}: 1 ({per_pod} GPUs, 1 RDMA)" for i in range(n))
    )


def _worker(pods: list[dict]) -> dict:
    return pods[1]


@pytest.mark.parametrize(
    ("break_it", "problem"),
    [
        (lambda p: p["spec"].pop("nodeName"), "1 pod(s) bound to no node: qwen-397b-a17b-serve-1"),
        (
            lambda p: p["spec"]["containers"][0]["resources"]["requests"].pop("nvidia.com/gpu"),
            "pod qwen-397b-a17b-serve-1 asks for 0 GPUs, the plan 4",
        ),
        (
            lambda p: p["spec"]["containers"][0]["resources"]["requests"].pop("rdma/rdma_shared_device_a"),
            "pod qwen-397b-a17b-serve-1 asks for 0 RDMA device(s), the plan 1",
        ),
        (
            lambda p: p["metadata"]["annotations"].pop("k8s.v1.cni.cncf.io/networks"),
            "pod qwen-397b-a17b-serve-1 names no secondary network",
        ),
    ],
    ids=["pending", "no-gpus", "no-rdma", "no-network"],
)
def test_a_worker_placed_otherwise_than_planned_is_a_problem(grid, break_it, problem):
    m, pods = flagship(grid)
    break_it(_worker(pods))
    (entry,) = ep.placement([m], [ep.pod_facts(p) for p in pods])
    assert any(problem in x for x in entry["problems"]), entry["problems"]


def test_a_pool_short_of_its_pods(grid):
    m, pods = flagship(grid)
    fixed = copy.deepcopy(m)
    fixed["main"]["replicas"] = fixed["main"]["planned_replicas"]  # not autoscaled: the count is the plan's
    n = m["main"]["planned_replicas"] * m["main"]["pods_per_replica"]
    (entry,) = ep.placement([fixed], [ep.pod_facts(p) for p in pods[:-1]])
    assert entry["problems"] == [f"qwen-397b-a17b serve: {n - 1} pod(s), the plan has {n}"]
    # an autoscaled pool runs what its autoscaler says; only none at all is a problem
    (entry,) = ep.placement([m], [ep.pod_facts(p) for p in pods[:-1]])
    assert entry["problems"] == []
    (entry,) = ep.placement([m], [])
    assert entry["problems"] == [f"qwen-397b-a17b serve: no pod (the plan has {n} at its traffic; autoscaled)"]
