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
    m, pods = flagship(grid)
    (entry,) = ep.placement([m], [ep.pod_facts(p) for p in pods])
    assert entry["problems"] == []
    (pool,) = entry["pools"]
    assert (pool["role"], pool["planned_pods"], pool["pods"], pool["bound"], pool["ready"]) == ("serve", 2, 2, 2, 2)
    assert (pool["gpus"], pool["rdma"]) == (8, 2)
    assert pool["nodes"] == [
        {"node": "gpu-0", "pods": 1, "gpus": 4, "rdma": 1},
        {"node": "gpu-1", "pods": 1, "gpus": 4, "rdma": 1},
    ]
    assert ep.placement_line(entry) == (
        "qwen-397b-a17b: serve 2 of 2 pod(s) bound (2 planned, autoscaled; 4 GPUs + 1 RDMA each): "
        "gpu-0: 1 (4 GPUs, 1 RDMA), gpu-1: 1 (4 GPUs, 1 RDMA)"
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
    m = next(x for x in grid["serving"]["models"] if x["name"] == "qwen-27b")
    fixed = copy.deepcopy(m)
    fixed["main"]["replicas"] = fixed["main"]["planned_replicas"]  # not autoscaled: the count is the plan's
    pods = pods_of(fixed, {})[:-1]
    (entry,) = ep.placement([fixed], [ep.pod_facts(p) for p in pods])
    assert entry["problems"] == ["qwen-27b serve: 2 pod(s), the plan has 3"]
    # an autoscaled pool runs what its autoscaler says; only none at all is a problem
    (entry,) = ep.placement([m], [ep.pod_facts(p) for p in pods])
    assert entry["problems"] == []
    (entry,) = ep.placement([m], [])
    assert entry["problems"] == ["qwen-27b serve: no pod (the plan has 3 at its traffic; autoscaled)"]
