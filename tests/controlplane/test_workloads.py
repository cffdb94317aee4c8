"""Pods on the local control plane are real (issue 24, parts 1 and 2).

kube-controller-manager's workload controllers make the pods, kube-scheduler binds them by its own
rules (resources, node affinity, taints), kwok runs them on the profile's nodes (Running/Ready through
its Stages, pod IPs from each node's loopback podCIDR) and the LeaderWorkerSet controller makes the
groups of a LeaderWorkerSet, its pod webhook giving the workers their leader's address. Nothing here
is simulator status: the simulator no longer plays workloads at all.
"""

from __future__ import annotations

import ipaddress
import json
import time

import pytest

from controlplane import kwok_agent

pytestmark = pytest.mark.cluster

IMAGE = "registry.example/app@sha256:" + "3" * 64


def wait_for(pred, timeout=60.0, interval=0.2, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def get_json(cp, *args) -> dict:
    res = cp.kubectl("get", *args, "-o", "json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def apply(cp, *objs: dict) -> None:
    res = cp.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objs))
    assert res.returncode == 0, res.stderr


def namespace(cp, name: str) -> str:
    cp.kubectl("create", "namespace", name)
    return name


def delete_namespace(cp, ns: str) -> None:
    """Gone with its pods (kwok deletes them): the GPUs are free for the next test on the shared plane."""
    res = cp.kubectl("delete", "namespace", ns, "--wait=true", "--timeout=90s")
    assert res.returncode == 0, res.stderr


def pods(cp, ns: str, selector: str) -> list[dict]:
    return get_json(cp, "pods", "-n", ns, "-l", selector)["items"]


def events(cp, ns: str, reason: str) -> list[dict]:
    return [e for e in get_json(cp, "events", "-n", ns)["items"] if e.get("reason") == reason]


def ready(pod: dict) -> bool:
    conds = {c["type"]: c["status"] for c in (pod.get("status") or {}).get("conditions") or []}
    return (pod.get("status") or {}).get("phase") == "Running" and conds.get("Ready") == "True"


def deployment(name: str, ns: str, replicas: int, gpus: int, **spec) -> dict:
    res = {
        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
        "limits": {"nvidia.com/gpu": str(gpus)},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": IMAGE, "resources": res}], **spec},
            },
        },
    }


def test_nodes_are_run_by_kwok(cluster):
    nodes = get_json(cluster, "nodes")["items"]
    leases = {x["metadata"]["name"] for x in get_json(cluster, "leases", "-n", "kube-node-lease")["items"]}
    net = ipaddress.ip_network(cluster.pod_network.cidr)
    cidrs = set()
    for n in nodes:
        name = n["metadata"]["name"]
        assert n["metadata"]["annotations"][kwok_agent.NODE_ANNOTATION[0]] == kwok_agent.NODE_ANNOTATION[1]
        conds = {c["type"]: c for c in n["status"]["conditions"]}
        assert conds["Ready"]["status"] == "True", (name, conds)  # kwok's node-initialize Stage, not our seeding
        assert n["status"]["phase"] == "Running"
        assert name in leases, f"kwok keeps no Lease for {name}"
        cidr = ipaddress.ip_network(n["spec"]["podCIDR"])
        assert cidr.subnet_of(net) and cidr not in cidrs
        cidrs.add(cidr)
    masters = [n for n in nodes if "node-role.kubernetes.io/master" in n["metadata"]["labels"]]
    assert masters and all(
        {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"} in n["spec"]["taints"] for n in masters
    )


def test_the_scheduler_binds_gpu_pods_and_kwok_runs_them(cluster):
    ns = namespace(cluster, "wl-bind")
    h100 = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}
                        ]
                    }
                ]
            }
        }
    }
    apply(cluster, deployment("engine", ns, 2, 5, affinity=h100))
    res = cluster.kubectl("wait", "-n", ns, "deployment/engine", "--for=condition=Available", "--timeout=60s")
    assert res.returncode == 0, res.stderr
    running = wait_for(lambda: [p for p in pods(cluster, ns, "app=engine") if ready(p)], what="pods Ready")
    assert len(running) == 2
    nodes = {n["metadata"]["name"]: n for n in get_json(cluster, "nodes")["items"]}
    scheduled = {e["involvedObject"]["name"]: e for e in events(cluster, ns, "Scheduled")}
    per_node: dict[str, int] = {}
    for p in running:
        node = nodes[p["spec"]["nodeName"]]
        assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
        ev = scheduled[p["metadata"]["name"]]
        assert ev["reportingComponent"] == "default-scheduler", ev
        ip = ipaddress.ip_address(p["status"]["podIP"])
        assert ip.is_loopback and ip in ipaddress.ip_network(node["spec"]["podCIDR"]), (ip, node["spec"]["podCIDR"])
        per_node[node["metadata"]["name"]] = per_node.get(node["metadata"]["name"], 0) + 5
    # two 5-GPU pods on 8-GPU nodes: the scheduler had to use both nodes
    assert len(per_node) == 2, per_node
    delete_namespace(cluster, ns)


def test_a_pod_larger_than_any_node_stays_pending(cluster):
    ns = namespace(cluster, "wl-toobig")
    apply(cluster, deployment("huge", ns, 1, 9))
    wait_for(lambda: events(cluster, ns, "FailedScheduling"), what="FailedScheduling")
    msg = events(cluster, ns, "FailedScheduling")[0]["message"]
    assert "Insufficient nvidia.com/gpu" in msg, msg
    (pod,) = pods(cluster, ns, "app=huge")
    assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
    dep = get_json(cluster, "deployment", "huge", "-n", ns)
    assert not dep["status"].get("availableReplicas")
    delete_namespace(cluster, ns)


def test_held_scheduling_keeps_a_workload_unavailable_until_released(cluster):
    ns = namespace(cluster, "wl-held")
    with cluster.hold_scheduling():
        apply(cluster, deployment("held", ns, 1, 1))
        wait_for(lambda: events(cluster, ns, "FailedScheduling"), what="FailedScheduling while cordoned")
        assert not get_json(cluster, "deployment", "held", "-n", ns)["status"].get("availableReplicas")
    res = cluster.kubectl("wait", "-n", ns, "deployment/held", "--for=condition=Available", "--timeout=60s")
    assert res.returncode == 0, res.stderr
    delete_namespace(cluster, ns)


def test_daemonset_pods_land_on_every_gpu_node(cluster):
    ns = namespace(cluster, "wl-ds")
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "prepull", "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app": "prepull"}},
            "template": {
                "metadata": {"labels": {"app": "prepull"}},
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.present": "true"},
                    "containers": [{"name": "pause", "image": IMAGE}],
                },
            },
        },
    }
    apply(cluster, ds)
    gpu_nodes = {
        n["metadata"]["name"] for n in get_json(cluster, "nodes", "-l", "nvidia.com/gpu.present=true")["items"]
    }
    res = cluster.kubectl(
        "wait",
        "-n",
        ns,
        "daemonset/prepull",
        f"--for=jsonpath={{.status.numberReady}}={len(gpu_nodes)}",
        "--timeout=60s",
    )
    assert res.returncode == 0, res.stderr
    assert {p["spec"]["nodeName"] for p in pods(cluster, ns, "app=prepull")} == gpu_nodes
    delete_namespace(cluster, ns)


def test_leaderworkerset_controller_makes_the_groups(cluster):
    ns = namespace(cluster, "wl-lws")
    res = {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "2", "cpu": "1"}}
    pod = {"spec": {"containers": [{"name": "main", "image": IMAGE, "resources": res}]}}
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "engine", "namespace": ns},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2, "leaderTemplate": pod, "workerTemplate": pod}},
    }
    apply(cluster, lws)
    out = cluster.kubectl("wait", "-n", ns, "leaderworkerset/engine", "--for=condition=Available", "--timeout=90s")
    assert out.returncode == 0, out.stderr
    obj = get_json(cluster, "leaderworkerset", "engine", "-n", ns)
    assert obj["status"]["readyReplicas"] == 2
    members = pods(cluster, ns, "leaderworkerset.sigs.k8s.io/name=engine")
    assert len(members) == 4 and all(ready(p) for p in members)
    # the StatefulSets are the LWS controller's: one of leaders, one of workers per group
    sts = {s["metadata"]["name"] for s in get_json(cluster, "statefulsets", "-n", ns)["items"]}
    assert sts == {"engine", "engine-0", "engine-1"}, sts
    # its pod webhook labels each pod and gives the workers their leader's address
    for p in members:
        labels = p["metadata"]["labels"]
        assert {"leaderworkerset.sigs.k8s.io/group-index", "leaderworkerset.sigs.k8s.io/worker-index"} <= set(labels)
        env = {e["name"]: e.get("value") for e in p["spec"]["containers"][0].get("env") or []}
        group = labels["leaderworkerset.sigs.k8s.io/group-index"]
        assert env.get("LWS_LEADER_ADDRESS", "").startswith(f"engine-{group}.engine.{ns}"), env
    assert all(p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "2" for p in members)
    delete_namespace(cluster, ns)
