"""Preflight places the plan's pods on the cluster's GPU nodes (cluster_facts.placement_gap, issue 24).

A plan that needs more GPUs, or more GPUs on one node, than the cluster has stops before anything is
applied, with the numbers. The total and the largest pod were checked before; these tests are about
what only a placement shows: pods that each fit a node, in a total the cluster has, that still do not
fit together (the scheduler would leave them Pending), and RDMA pods on nodes without RDMA NICs. The
nodes are read the way preflight reads them (cluster_facts.summarize_node over Node objects with the
labels and capacity GPU feature discovery, NFD and the device plugins set).
"""

from __future__ import annotations

from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils import cluster_facts as cf

from tests.serving_helpers import INVENTORIES


def node(name: str, gpus: int, product: str = "NVIDIA-H100-80GB-HBM3", rdma: bool = True) -> dict:
    labels = {
        "node-role.kubernetes.io/worker": "",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": str(gpus),
    }
    capacity = {"nvidia.com/gpu": str(gpus), "cpu": "224", "memory": "2064Gi"}
    if rdma:
        labels["feature.node.kubernetes.io/pci-15b3.present"] = "true"
        capacity["rdma/rdma_shared_device_a"] = "63"
    return {"metadata": {"name": name, "labels": labels}, "status": {"capacity": capacity, "allocatable": capacity}}


def cluster(*nodes: dict) -> dict:
    return cf.summarize(
        {
            "source": "cluster",
            "openshift": True,
            "openshift_version": "4.22.0",
            "single_node": False,
            "served": {},
            "api_resources": {},
            "nodes": [cf.summarize_node(n) for n in nodes],
            "storage_classes": [],
            "warnings": [],
        }
    )


def pods(*groups) -> dict:
    """Requirements with only the planned pods: (model, role, gpus, count[, rdma])."""
    return {
        "pods": [
            {"model": g[0], "role": g[1], "gpu": "h100", "gpus": g[2], "count": g[3], "rdma": g[4] if len(g) > 4 else 0}
            for g in groups
        ]
    }


def test_pods_that_each_fit_a_node_but_not_together_stop_with_the_numbers():
    # 3 pods of 5 H100 = 15 of the 16 H100 two nodes have, and a pod of 5 fits a node of 8: the count and the
    # largest pod pass, but a node holds one such pod: the third has nowhere to go
    facts = cluster(node("gpu-a", 8), node("gpu-b", 8))
    req = pods(("m", "decode", 5, 3))
    assert cf.evaluate(facts, {"gpus": [{"gpu": "h100", "count": 15, "per_pod": 5}]}) == []
    (line,) = cf.evaluate(facts, {**req, "gpus": [{"gpu": "h100", "count": 15, "per_pod": 5}]})
    assert line.startswith("Placement: 1 of 3 m decode pod(s) (5 x h100 each, on one node) fit no node"), line
    assert "gpu-a 3 of 8 free, gpu-b 3 of 8 free" in line and "the plan's h100 pods: m decode 3 x 5" in line
    assert "valid: GPU nodes with room for every pod" in line


def test_a_sites_models_share_the_nodes():
    # two classes on nodes of 6, 6 and 2 GPUs (14, what they need together): the flagship's pods of 4 take a
    # and b, which leaves 2 GPUs on every node and no room for a pod of 3
    facts = cluster(node("a", 6), node("b", 6), node("c", 2))
    req = pods(("flagship", "serve", 4, 2, 1), ("medium", "serve", 3, 2))
    placed, unplaced = cf.pack_pods(cf.placement_nodes(facts), req["pods"])
    assert unplaced == [{**req["pods"][1], "unplaced": 2}]
    assert {n["name"]: [p["model"] for p in n["pods"]] for n in placed} == {
        "a": ["flagship"],
        "b": ["flagship"],
        "c": [],
    }
    (line,) = cf.placement_gap(facts, req)
    assert "2 of 2 medium serve pod(s) (3 x h100 each" in line, line
    assert "a 2 of 6 free, b 2 of 6 free, c 2 of 2 free" in line
    assert "the plan's h100 pods: flagship serve 2 x 4 + RDMA, medium serve 2 x 3" in line
    # what fits is placed best-fit: small pods fill the node the large ones left room on
    placed, unplaced = cf.pack_pods(
        cf.placement_nodes(facts), pods(("big", "serve", 4, 2), ("one", "serve", 1, 6))["pods"]
    )
    assert not unplaced and sorted(n["free"] for n in placed) == [0, 0, 0]


def test_rdma_pods_need_nodes_with_rdma_nics():
    facts = cluster(node("rdma", 8), node("plain", 8, rdma=False))
    (line,) = cf.placement_gap(facts, pods(("m", "decode", 4, 3, 1)))
    assert line.startswith("Placement: 1 of 3 m decode pod(s) (4 x h100 and an RDMA device each, on one node)"), line
    assert "plain 8 of 8 free, no RDMA NIC" in line
    assert cf.placement_gap(facts, pods(("m", "decode", 4, 3))) == []  # without RDMA they fit
    # nodes without any RDMA NIC for the plan: the RDMA check says so once, placement does not repeat it
    none = cluster(node("plain-a", 8, rdma=False), node("plain-b", 8, rdma=False))
    req = {**pods(("m", "decode", 4, 3, 1)), "rdma": {"nodes": 2, "why": "m moves KV between pods over RDMA"}}
    (line,) = cf.evaluate(none, req)
    assert line.startswith("RDMA: the plan uses RDMA (m moves KV between pods over RDMA) on 2 GPU node(s); 0 of"), line


def test_shortfalls_the_gpu_count_reports_are_not_repeated():
    facts = cluster(node("a", 8))
    req = {**pods(("m", "serve", 4, 3)), "gpus": [{"gpu": "h100", "count": 12, "per_pod": 4, "for": "m serve 3x4"}]}
    (line,) = cf.evaluate(facts, req)
    assert line.startswith("GPUs: 12 x h100 needed"), line


def test_unobserved_gpus_are_not_placed():
    facts = cluster({"metadata": {"name": "fresh", "labels": {}}, "status": {}})
    assert cf.placement_gap(facts, pods(("m", "serve", 8, 4))) == []


def test_every_example_site_places_its_pods_on_its_own_hardware():
    """The requirement the intent passes to preflight (platform.requirements.pods) holds every planned pod, and
    each site's pods fit the hardware its inventory states (the plans are made for it)."""
    for site in sorted(p.name for p in INVENTORIES.iterdir() if (p / "hosts.yml").exists()):
        for host, intent in cli.site_intents(str(INVENTORIES / site), None).items():
            req = intent["platform"]["requirements"]
            gpus = {g["gpu"]: g["count"] for g in req["gpus"]}
            for gpu, count in gpus.items():
                assert sum(p["count"] * p["gpus"] for p in req["pods"] if p["gpu"] == gpu) == count, (site, host)
            facts = cf.facts_from_inventory(intent["hardware"])
            assert cf.placement_gap(facts, req) == [], (site, host)
