"""Faults of the running system (issue 33 item 4; figures in docs/reliability.md, "Faults of a running site"),
on the session's KServe plane: real kube-apiserver, kube-scheduler and controllers, kwok as the node agent,
the LeaderWorkerSet controller and KServe v0.20.0's LLMInferenceService controller.

The example chat site's serving stage is converged (``serving.yml``, as a user runs it) into a namespace of
its own; its ``qwen-chat`` service (P/D: a prefill Deployment, a decode LeaderWorkerSet, the endpoint picker)
runs until every workload pod has an IP and the service is Ready; then

1. KServe's controller is killed (SIGKILL, a crash) and started again while requests flow through the real llm-d
   router over the pods it made (an llm-d-inference-sim engine at each pod's address): nothing it made is
   recreated (same UIDs), no pod is restarted, the service stays Ready, no request fails, and once it resynced
   nothing moves (no loop); then the API server is down for seconds under the same traffic: the picker keeps
   routing from the pods it has listed, no request fails;
2. the GPU node the service's pods run on is lost: first NotReady (its agent reports it so and stops), and the
   node lifecycle controller marks its pods not Ready and taints it; then its Node is deleted (the machine is
   gone for good): the pod garbage collector deletes its pods, the Deployment and the LeaderWorkerSet make new
   ones and the real scheduler places them on the spare GPUs of the other node.

3. the GPU node is lost while every other node is cordoned (no spare GPUs the scheduler may use): verify.yml,
   run during the fault, fails in its readiness wait naming the pod and the scheduler's reason, not a bare
   timeout; once the nodes are uncordoned the pods are placed and the converge changes nothing.

4. the kube-apiserver crashes as ``serving.yml`` starts and comes back seconds later (kcp kills it on SIGUSR1
   and starts it on SIGUSR2; etcd, the controllers, the scheduler, kwok, LWS and KServe stay up and
   reconnect): the collection's client sends again what met a refused or dropped connection, for up to a
   minute, so the converge rides it out; the service comes up Ready as without the fault.

After each fault and its recovery the converge is run again and changes nothing. Each prints its figure
(seconds to recover) as a ``FIGURE`` line for docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from controlplane import kserve_controller, kwok_agent
from controlplane.cluster import DEFAULT_PROFILE
from dataplane.conftest import routed_models
from dataplane.harness import DataPlane, clean_workdir
from dataplane.traffic import steady

from tests import quiet
from tests.ansible_run import run_playbook
from tests.serving_helpers import INVENTORIES, PLAYBOOKS
from tests.serving_helpers import until as _until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NAME = "qwen-chat"
SELECTOR = f"app.kubernetes.io/name={NAME},app.kubernetes.io/part-of=llminferenceservice"
# engines of ~0.6 s a request (30 tokens): requests are in flight whenever the controller dies
ENGINE = ["--time-to-first-token", "50ms", "--inter-token-latency", "20ms"]
LEAD = 3.0  # seconds of traffic before a fault and after its recovery
API_DOWN = 15.0  # seconds the API server is down under traffic


@pytest.fixture(scope="module")
def kserve(cluster_factory):
    # the session's KServe plane (tests/integration/test_kserve_workloads.py and test_kserve_cert_loop.py)
    cp = cluster_factory(DEFAULT_PROFILE, name="kserve", kserve=True)
    gateway = kserve_controller.ingress_gateway()
    res = cp.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in gateway))
    assert res.returncode == 0, res.stderr
    return cp


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


def _until_served(cp, ns: str, timeout: float, what: str) -> None:
    """Wait until the service is Ready with every pod placed; fail showing the pods and conditions seen."""
    _until(lambda: _running(cp, ns) and _ready(cp, ns), timeout, what, seen=lambda: _seen(cp, ns))


def _seen(cp, ns: str) -> str:
    """What a wait saw: each pod's node and phase, why an unplaced one is unplaced, the service's conditions."""
    pods = []
    for p in _pods(cp, ns):
        why = [c.get("message", "") for c in p["status"].get("conditions", []) if c.get("reason") == "Unschedulable"]
        pods.append(f"{p['metadata']['name']} on {p['spec'].get('nodeName') or '-'} {p['status'].get('phase')} {why}")
    svc = _get(cp, "-n", ns, "get", "llminferenceservice", NAME)
    conds = {c["type"]: c["status"] for c in svc.get("status", {}).get("conditions", [])}
    return f"pods {pods or 'none'}, conditions {conds}"


def _converge(cp, ns: str, tmp_path, env: dict | None = None):
    """The chat site's serving stage into ``ns``, as a user runs it (its own readiness wait left to the test)."""
    return run_playbook(
        PLAYBOOKS / "serving.yml",
        INVENTORIES / "example-chat",
        kubeconfig=cp.kubeconfig,
        extravars={"serving_namespace": ns, "model_service_wait": False, "report_dir": str(tmp_path / "reports")},
        env=env,
    )


def _rerun_changes_nothing(cp, ns: str, tmp_path) -> None:
    """After a fault and its recovery, the converge finds the site as it left it: nothing to change, no failure."""
    again = _converge(cp, ns, tmp_path)
    assert again.rc == 0, again.failure_messages() or again.stdout[-3000:]
    changed = [(r[0], r[1]) for r in again.results if r[3] == "ok" and r[4].get("changed")]
    assert again.changed == 0, f"the rerun after the fault changed: {changed}"


@pytest.fixture
def served(kserve, request, tmp_path):
    ns = f"fault-{request.node.name.split('_')[1]}"[:40]
    try:
        first = _converge(kserve, ns, tmp_path)
        assert first.rc == 0, first.failure_messages() or first.stdout[-3000:]
        # (KServe's first reconcile of a P/D service on a loaded machine: up to minutes, as in tests/integration)
        _until_served(kserve, ns, 300, f"{NAME} Ready with every pod placed")
        yield ns
    finally:
        # waited for: the next test places the same service on the GPUs these pods hold
        kserve.kubectl("delete", "namespace", ns, "--ignore-not-found", "--timeout=100s")


def _uids(snapshot: dict) -> dict[str, str]:
    return {k: o["metadata"]["uid"] for k, o in snapshot.items()}


def _router_over(cp, ns: str, workdir):
    """The real llm-d router over KServe's own pool and pods of the served service: an llm-d-inference-sim
    engine at each pod's address (kwok gave it one of its node's loopback podCIDR), the P/D sidecar in front of
    each decode pod, the endpoint picker started as KServe's scheduler preset starts it with the site's rendered
    scheduler config (tests/dataplane/harness.py, ``adopt``)."""
    model, objects = next(
        (m, objs)
        for _host, m, objs in routed_models("example-chat", {"serving_namespace": ns})
        if m["names"]["service"] == NAME
    )
    return DataPlane(cp, clean_workdir(workdir), model, objects, {}, sim_args=ENGINE, adopt=True)


def _restart_kserve(cp) -> float:
    """SIGKILL KServe's controller (a crash), start it again as the plane does; seconds until it is ready."""
    t0 = time.monotonic()
    cp.kserve.proc.kill()
    cp.kserve.proc.wait()
    cp.kserve.t0 = time.monotonic()
    cp.kserve.launch()
    cp.kserve.ready()
    return time.monotonic() - t0


def _restart_apiserver(cp) -> float:
    """The kube-apiserver down for API_DOWN seconds (kcp kills it), then started again; seconds until it answers."""
    cp.stop_apiserver()
    time.sleep(API_DOWN)
    return cp.start_apiserver()


def _under_traffic(dp, fault) -> tuple[list, float, float]:
    """Three clients send through the router from LEAD seconds before ``fault(dp.cluster)`` until LEAD seconds after
    it returned: (replies, when the fault began, what ``fault`` returned)."""
    stop = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        sent = pool.submit(asyncio.run, steady(dp, 600, workers=3, stop=stop))
        time.sleep(LEAD)
        t_fault = time.monotonic()
        try:
            result = fault(dp.cluster)
            time.sleep(LEAD)
        finally:
            stop.set()
        replies = sent.result()
    during = [r for r in replies if r[0] >= t_fault]
    assert len(during) >= 3 and len(replies) - len(during) >= 3, f"too little traffic to measure: {len(replies)}"
    return replies, t_fault, result


def _failed(replies: list, t_fault: float) -> list:
    """(seconds after the fault began, status) of each request that failed."""
    return [(round(t - t_fault, 2), status) for t, status, _e in replies if status != 200]


def test_control_plane_restarts_under_traffic_through_the_router(kserve, served, tmp_path):
    """KServe's controller crashes and restarts, then the API server does, while requests flow through the real
    router over the pods KServe made: nothing it made is recreated, no pod is replaced, the service stays Ready,
    no request fails, and once the controller resynced nothing moves."""
    cp, ns = kserve, served
    kubectl = [str(cp.binary), "kubectl", f"--kubeconfig={cp.kubeconfig}"]
    before = quiet.snapshot(kubectl, [ns], None)
    pods = {p["metadata"]["uid"] for p in _pods(cp, ns)}
    with _router_over(cp, ns, tmp_path / "router") as dp:
        replies, t_kill, back = _under_traffic(dp, _restart_kserve)
        failed = _failed(replies, t_kill)
        assert not failed, (
            f"requests failed through the router over KServe's restart (s after the kill, status): {failed}"
        )
        assert dp.pool_gauge("llm_d_epp_ready_endpoints") == len(dp.endpoints), "the picker lost endpoints"
        assert _ready(cp, ns), "the service lost Ready over a controller restart"
        after = quiet.snapshot(kubectl, [ns], None)
        recreated = [k for k, uid in _uids(before).items() if _uids(after).get(k) not in (None, uid)]
        assert not recreated, f"recreated by the restarted controller: {recreated}"
        assert {p["metadata"]["uid"] for p in _pods(cp, ns)} == pods, "a pod was replaced"
        noisy = quiet.check(kubectl, [ns], None, 10)
        assert not noisy, "not quiet after the restart:\n" + "\n".join(noisy)
        roles = ", ".join(sorted(ep.role for ep in dp.endpoints))
        print(
            f"FIGURE kserve-restart: controller back in {back:.1f} s; 0 objects recreated, 0 pods replaced; through "
            f"the router over its {len(dp.endpoints)} pods ({roles}): 0 of {len(replies)} requests failed, "
            f"{sum(1 for r in replies if r[0] >= t_kill)} of them sent from the kill to {LEAD:.0f} s after it was back"
        )
        # the API server goes away under the same traffic: the picker routes from the pods it has listed
        replies, t_down, answered = _under_traffic(dp, _restart_apiserver)
        failed = _failed(replies, t_down)
        assert dp.epp.popen.poll() is None, f"the picker exited while the API server was down:\n{dp.epp.tail()}"
        assert not failed, f"requests failed through the router over the API server's restart: {failed}"
        print(
            f"FIGURE apiserver-restart-router: the API server down {API_DOWN:.0f} s, answering {answered:.1f} s after "
            f"its start; 0 of {len(replies)} requests through the router failed"
        )
    _until_served(cp, ns, 120, f"{NAME} Ready with every pod placed after the API server's restart")
    _rerun_changes_nothing(cp, ns, tmp_path)


def _restore(cp, saved: dict) -> None:
    """Create a deleted node again as kwok's profile made it (labels, annotations, capacity)."""
    meta = saved["metadata"]
    node_obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {k: meta[k] for k in ("name", "labels", "annotations") if k in meta},
        "spec": {k: v for k, v in saved["spec"].items() if k not in ("taints", "unschedulable")},
    }
    cp.kubectl("create", "-f", "-", input=json.dumps(node_obj))
    cp.apply(node_obj, status={"capacity": saved["status"]["capacity"], "allocatable": saved["status"]["allocatable"]})


def _node_not_ready(cp, node: str) -> None:
    """What the node's kubelet reports when its container runtime fails: the node NotReady and each of its pods not
    Ready (their containers no longer answer). kwok, which plays the kubelets here, has no stage for it: the test
    writes these statuses and kwok stops managing the node (its annotation is removed). From there the real
    components decide: the node lifecycle controller taints the node, the ReplicaSet, LeaderWorkerSet and KServe
    controllers see the pods unavailable."""
    anno = kwok_agent.NODE_ANNOTATION[0]
    assert cp.kubectl("annotate", "node", node, f"{anno}-").returncode == 0
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    live = _get(cp, "get", "node", node)
    conditions = [c for c in live["status"].get("conditions") or [] if c["type"] != "Ready"] + [
        {
            "type": "Ready",
            "status": "False",
            "reason": "KubeletNotReady",
            "message": "container runtime is down",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
    ]
    res = cp.kubectl(
        "patch",
        "node",
        node,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"conditions": conditions}}),
    )
    assert res.returncode == 0, res.stderr
    for pod in _get(cp, "get", "pods", "-A", "--field-selector", f"spec.nodeName={node}")["items"]:
        down = [
            {"type": t, "status": "False", "reason": "ContainersNotReady", "lastTransitionTime": now}
            for t in ("ContainersReady", "Ready")
        ]
        res = cp.kubectl(
            *("-n", pod["metadata"]["namespace"], "patch", "pod", pod["metadata"]["name"], "--subresource=status"),
            *("--type=strategic", "-p", json.dumps({"status": {"conditions": down}})),
        )
        assert res.returncode == 0, res.stderr


def _pod_ready(p: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get("conditions") or [])


def test_gpu_node_lost_pods_are_placed_again_on_the_spare_gpus(kserve, served, tmp_path):
    cp, ns = kserve, served
    pods = _running(cp, ns)
    node = pods[0]["spec"]["nodeName"]
    on_node = {p["metadata"]["uid"] for p in pods if p["spec"]["nodeName"] == node}
    saved = _get(cp, "get", "node", node)
    t0 = time.monotonic()
    _node_not_ready(cp, node)
    try:
        # kube-controller-manager's node lifecycle controller taints the node (new pods go elsewhere; these
        # tolerate it for 300 s, then are evicted); the workload controllers and KServe see the pods unavailable
        _until(
            lambda: (
                "node.kubernetes.io/not-ready"
                in {t["key"] for t in _get(cp, "get", "node", node)["spec"].get("taints") or []}
            ),
            60,
            f"NotReady node {node} tainted by the node lifecycle controller",
        )
        _until(
            lambda: not _ready(cp, ns),
            120,
            f"{NAME} not Ready once the pods on {node} are not",
            seen=lambda: _seen(cp, ns),
        )
        not_ready = time.monotonic() - t0
        # the machine is gone for good: its Node is deleted
        t1 = time.monotonic()
        res = cp.kubectl("delete", "node", node, "--wait=false")
        assert res.returncode == 0, res.stderr

        def replaced():
            live = _running(cp, ns)
            if not live or {p["metadata"]["uid"] for p in live} & on_node:
                return None
            return live if all(p["spec"]["nodeName"] != node for p in live) else None

        again = _until(replaced, 180, f"the {len(on_node)} pod(s) of lost node {node} placed on another node")
        took = time.monotonic() - t1
        assert _until(lambda: _ready(cp, ns), 60, f"{NAME} Ready again")
        _rerun_changes_nothing(cp, ns, tmp_path)
        print(
            f"FIGURE node-lost: node {node} NotReady: tainted and {NAME} not Ready in {not_ready:.1f} s; once it was "
            f"deleted, its {len(on_node)} pod(s) placed again on {sorted({p['spec']['nodeName'] for p in again})} "
            f"in {took:.1f} s"
        )
    finally:
        if cp.kubectl("get", "node", node).returncode == 0:
            cp.kubectl("delete", "node", node, "--wait=true", "--timeout=60s")
        _restore(cp, saved)


def _verify(cp, ns: str, tmp_path):
    """verify.yml against the served namespace: its readiness wait and placement report, no SLO benchmark (the
    engines here are kwok pods, nothing answers a request)."""
    return run_playbook(
        PLAYBOOKS / "verify.yml",
        INVENTORIES / "example-chat",
        kubeconfig=cp.kubeconfig,
        extravars={
            "serving_namespace": ns,
            "verify_timeout": 150,
            "verify_slo": False,
            "report_dir": str(tmp_path / "reports"),
        },
        env={"INFERENCE_BLUEPRINTS_WAIT_GRACE": "10"},
    )


def test_verify_during_a_node_loss_without_spare_gpus_names_the_pod_and_the_cause(kserve, served, tmp_path):
    cp, ns = kserve, served
    node = _running(cp, ns)[0]["spec"]["nodeName"]
    others = [n["metadata"]["name"] for n in _get(cp, "get", "nodes")["items"] if n["metadata"]["name"] != node]
    saved = _get(cp, "get", "node", node)
    ok = _verify(cp, ns, tmp_path)
    assert ok.rc == 0, ok.failure_messages() or ok.stdout[-3000:]
    for n in others:
        assert cp.kubectl("cordon", n).returncode == 0
    try:
        assert cp.kubectl("delete", "node", node, "--wait=false").returncode == 0
        # the pod garbage collector deletes the lost node's pods (after its quarantine) and their controllers make
        # new ones the scheduler cannot place: that is the fault verify meets
        _until(
            lambda: any(not p["spec"].get("nodeName") for p in _pods(cp, ns)),
            180,
            f"a pod of {NAME} waiting to be placed after {node} was lost",
            seen=lambda: _seen(cp, ns),
        )
        t0 = time.monotonic()
        during = _verify(cp, ns, tmp_path)
        took = time.monotonic() - t0
        said = during.failure_messages()
        assert during.rc != 0, f"verify passed with the pods' node gone and no GPU to place them on: {said}"
        assert "Unschedulable" in said or "unschedulable" in said, f"verify did not say why the pods wait: {said}"
        assert f"{NAME}-" in said, f"verify did not name the waiting pod: {said}"
        # the wait's own clock: the playbook's other tasks and a loaded machine add to the wall clock
        stopped = re.search(r"stopped waiting after ([\d.e+]+) s of 150 s", said)
        assert stopped and float(stopped[1]) < 150 / 2 and took < 2 * 150, (
            f"verify waited its whole timeout ({took:.0f} s) instead of failing on the cause: {said}"
        )
    finally:
        for n in others:
            cp.kubectl("uncordon", n)
        _restore(cp, saved)
    _until_served(cp, ns, 180, f"{NAME} Ready again once the nodes take pods")
    _rerun_changes_nothing(cp, ns, tmp_path)
    print(f"FIGURE verify-during-node-loss: verify failed in {took:.1f} s naming the unplaceable pod and its cause")


def test_api_server_down_when_a_converge_reaches_it_the_converge_rides_it_out(kserve, tmp_path):
    """The kube-apiserver crashes as a converge starts and comes back a few seconds later (a rollout on a single
    API server: Single Node OpenShift): the collection's client sends again what met a refused connection from a
    server that answered this host before, so the converge completes once the server answers, and the site is as
    a converge without the fault leaves it."""
    from concurrent.futures import ThreadPoolExecutor

    cp, ns = kserve, "fault-apiserver"
    trace = tmp_path / "requests.jsonl"
    # the user's host has talked to this cluster before (here: a check-mode run; its discovery is cached): a
    # refused connection now is a server going away, not a wrong address, which fails at once
    checked = run_playbook(
        PLAYBOOKS / "serving.yml",
        INVENTORIES / "example-chat",
        kubeconfig=cp.kubeconfig,
        extravars={"serving_namespace": ns, "model_service_wait": False, "report_dir": str(tmp_path / "reports")},
        check=True,
    )
    assert checked.rc == 0, checked.failure_messages() or checked.stdout[-3000:]
    cp.stop_apiserver()
    try:
        with ThreadPoolExecutor(1) as pool:
            run = pool.submit(_converge, cp, ns, tmp_path, {"INFERENCE_BLUEPRINTS_K8S_TRACE": str(trace)})
            try:
                # the converge's first request meets the server down (the trace records each refused attempt)
                _until(
                    lambda: run.done() or (trace.exists() and '"status": 0' in trace.read_text()),
                    300,
                    "the converge to meet the API server down",
                    poll=0.1,
                )
                time.sleep(3)  # down a while longer: the client keeps sending
                assert not run.done(), "the converge gave up on an API server that was down for seconds: " + (
                    run.result().failure_messages() or run.result().stdout[-3000:]
                )
            finally:
                back = cp.start_apiserver()
            first = run.result()
        refused = sum(1 for line in trace.read_text().splitlines() if json.loads(line).get("status") == 0)
        assert first.rc == 0, f"the converge did not ride out the API server's restart ({back:.1f} s): " + (
            first.failure_messages() or first.stdout[-3000:]
        )
        _until_served(cp, ns, 300, f"{NAME} Ready with every pod placed after the restart")
        _rerun_changes_nothing(cp, ns, tmp_path)
        print(
            f"FIGURE apiserver-restart: the converge met the API server down ({refused} refused attempts), "
            f"the server answered again {back:.1f} s after its start, the converge completed and the service "
            "came up Ready; the re-run changed nothing"
        )
    finally:
        cp.kubectl("delete", "namespace", ns, "--ignore-not-found", "--timeout=100s")
