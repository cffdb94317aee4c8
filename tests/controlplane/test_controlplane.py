"""Acceptance checks of the local control plane (issue 3).

They run against the session ``cluster`` fixture (profile h100-8x2-rdma) and a few extra
instances; none of them skips: a control plane that cannot start fails the run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from controlplane import kserve_rhoai
from controlplane.cluster import BINARY, CRDS, ControlPlane, _alive, process_tree_rss

pytestmark = pytest.mark.cluster

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

LLMISVC_TYPO = """
apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceService
metadata:
  name: typo
  namespace: default
spec:
  modle:
    uri: hf://Qwen/Qwen3-0.6B
"""


def wait_for(pred, timeout=20.0, interval=0.05, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def get_json(cluster, *args, kubeconfig=None):
    res = cluster.kubectl("get", *args, "-o", "json", kubeconfig=kubeconfig)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


# ---------------------------------------------------------------------- CRDs
def test_every_upstream_crd_is_served(cluster):
    bundle = json.loads(CRDS.read_text())
    served = {c["metadata"]["name"]: c for c in get_json(cluster, "crd")["items"]}
    missing = [i["crd"] for i in bundle["index"] if i["crd"] not in served]
    assert not missing, f"CRDs not installed: {missing}"
    for name in (i["crd"] for i in bundle["index"]):
        conds = {c["type"]: c["status"] for c in served[name]["status"].get("conditions", [])}
        assert conds.get("Established") == "True", name
    kinds = {c["spec"]["names"]["kind"] + "." + c["spec"]["group"] for c in served.values()}
    for kind in (
        "Subscription.operators.coreos.com",
        "ClusterServiceVersion.operators.coreos.com",
        "OperatorGroup.operators.coreos.com",
        "ClusterVersion.config.openshift.io",
        "Infrastructure.config.openshift.io",
        "ImageDigestMirrorSet.config.openshift.io",
        "Route.route.openshift.io",
        "MachineConfigPool.machineconfiguration.openshift.io",
        "PinnedImageSet.machineconfiguration.openshift.io",
        "NodeFeatureDiscovery.nfd.openshift.io",
        "ClusterPolicy.nvidia.com",
        "NicClusterPolicy.mellanox.com",
        "SriovNetworkNodePolicy.sriovnetwork.openshift.io",
        "DataScienceCluster.datasciencecluster.opendatahub.io",
        "DSCInitialization.dscinitialization.opendatahub.io",
        "LLMInferenceService.serving.kserve.io",
        "LLMInferenceServiceConfig.serving.kserve.io",
        "Gateway.gateway.networking.k8s.io",
        "HTTPRoute.gateway.networking.k8s.io",
        "InferencePool.inference.networking.k8s.io",
        "InferenceObjective.inference.networking.x-k8s.io",
        "InferenceObjective.llm-d.ai",
        "InferenceModelRewrite.llm-d.ai",
        "VariantAutoscaling.llmd.ai",
        "BackendTrafficPolicy.gateway.envoyproxy.io",
        "AIGatewayRoute.aigateway.envoyproxy.io",
        "LeaderWorkerSet.leaderworkerset.x-k8s.io",
        "ScaledObject.keda.sh",
        "KedaController.keda.sh",
        "Application.argoproj.io",
        "ServiceMonitor.monitoring.coreos.com",
        "PodMonitor.monitoring.coreos.com",
        "PrometheusRule.monitoring.coreos.com",
    ):
        assert kind in kinds, kind


def _module_dir(module: str, version: str) -> Path:
    env = {k: v for k, v in os.environ.items() if k != "GOEXPERIMENT"} | {
        "GOTOOLCHAIN": "local",
        "GOFLAGS": "-mod=mod",
        "GONOSUMDB": "*",
    }
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            ["go", "mod", "download", "-json", f"{module}@{version}"],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    return Path(json.loads(out.stdout)["Dir"])


def test_llminferenceservice_crd_equals_kserve_module(cluster):
    """The served LLMInferenceService schema is that of the plane's KServe, read from its source: the pinned module
    (upstream) or the OpenShift AI snapshot (rhoai, the default)."""
    crd_file = "config/crd/full/llmisvc/serving.kserve.io_llminferenceservices.yaml"
    if cluster.kserve_flavor == "rhoai":
        kserve = {"version": kserve_rhoai.version()}
        upstream = yaml.safe_load((kserve_rhoai.source_dir() / crd_file).read_text())
    else:
        sources = yaml.safe_load((HERE / "crdsources" / "sources.yaml").read_text())["sources"]
        kserve = next(s for s in sources if s["name"] == "kserve")
        upstream = yaml.safe_load((_module_dir(kserve["module"], kserve["version"]) / crd_file).read_text())
    served = get_json(cluster, "crd", "llminferenceservices.serving.kserve.io")
    assert served["spec"]["group"] == upstream["spec"]["group"]
    assert served["spec"]["names"] == upstream["spec"]["names"] | {
        k: v for k, v in served["spec"]["names"].items() if k not in upstream["spec"]["names"]
    }
    assert [v["name"] for v in served["spec"]["versions"]] == [v["name"] for v in upstream["spec"]["versions"]]
    for sv, uv in zip(served["spec"]["versions"], upstream["spec"]["versions"], strict=True):
        assert sv["schema"] == uv["schema"], f"schema of {uv['name']} differs from kserve {kserve['version']}"
        assert sv.get("subresources") == uv.get("subresources")


def test_misspelled_llminferenceservice_field_is_refused_by_the_api_server(cluster, tmp_path):
    f = tmp_path / "typo.yaml"
    f.write_text(LLMISVC_TYPO)
    res = cluster.kubectl("apply", "--dry-run=server", "-f", str(f))
    assert res.returncode != 0
    assert "Error from server" in res.stderr, res.stderr
    assert 'unknown field "spec.modle"' in res.stderr, res.stderr
    ok = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=LLMISVC_TYPO.replace("modle", "model"))
    assert ok.returncode == 0, ok.stderr


# ---------------------------------------------------------------------- simulator
def test_clusterpolicy_created_by_kubectl_becomes_ready(cluster):
    required = ("daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "driver", "gfd", "nodeStatusExporter", "toolkit")
    spec = {k: {} for k in required} | {"operator": {"defaultRuntime": "crio"}}
    cp = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "gpu-cluster-policy"},
        "spec": spec,
    }
    res = cluster.kubectl("create", "-f", "-", input=json.dumps(cp))
    assert res.returncode == 0, res.stderr
    try:
        res = cluster.kubectl(
            "wait", "clusterpolicy/gpu-cluster-policy", "--for=jsonpath={.status.state}=ready", "--timeout=120s"
        )
        assert res.returncode == 0, res.stderr
    finally:
        cluster.kubectl("delete", "clusterpolicy/gpu-cluster-policy", "--wait=false")


def test_never_ready_object_times_out_then_recovers(cluster):
    cluster.set_never_ready("NicClusterPolicy", "nic-cluster-policy")
    try:
        obj = {
            "apiVersion": "mellanox.com/v1alpha1",
            "kind": "NicClusterPolicy",
            "metadata": {"name": "nic-cluster-policy"},
            "spec": {},
        }
        assert cluster.kubectl("create", "-f", "-", input=json.dumps(obj)).returncode == 0
        res = cluster.kubectl(
            "wait", "nicclusterpolicy/nic-cluster-policy", "--for=jsonpath={.status.state}=ready", "--timeout=2s"
        )
        assert res.returncode != 0
        assert "timed out" in res.stderr
    finally:
        cluster.clear_never_ready()
    res = cluster.kubectl(
        "wait", "nicclusterpolicy/nic-cluster-policy", "--for=jsonpath={.status.state}=ready", "--timeout=120s"
    )
    assert res.returncode == 0, res.stderr
    cluster.kubectl("delete", "nicclusterpolicy/nic-cluster-policy", "--wait=false")


def test_subscription_installs_the_catalog_csv(cluster):
    ns = "sim-olm"
    objs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {
            "apiVersion": "operators.coreos.com/v1",
            "kind": "OperatorGroup",
            "metadata": {"name": ns, "namespace": ns},
            "spec": {"targetNamespaces": [ns]},
        },
        {
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "Subscription",
            "metadata": {"name": "nfd", "namespace": ns},
            "spec": {
                "name": "nfd",
                "channel": "stable",
                "source": "redhat-operators",
                "sourceNamespace": "openshift-marketplace",
            },
        },
    ]
    res = cluster.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objs))
    assert res.returncode == 0, res.stderr
    sub = wait_for(
        lambda: (
            (s := get_json(cluster, "subscription", "nfd", "-n", ns)).get("status", {}).get("state") == "AtLatestKnown"
            and s
        ),
        what="Subscription AtLatestKnown",
    )
    assert sub["status"]["installedCSV"] == "nfd.v4.22.0"
    csv = get_json(cluster, "csv", "nfd.v4.22.0", "-n", ns)
    assert csv["status"]["phase"] == "Succeeded"


def test_manual_installplan_waits_for_approval(cluster):
    ns = "sim-olm-manual"
    cluster.kubectl("create", "namespace", ns)
    sub = {
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "Subscription",
        "metadata": {"name": "gpu-operator-certified", "namespace": ns},
        "spec": {
            "name": "gpu-operator-certified",
            "channel": "v26.7",
            "source": "certified-operators",
            "sourceNamespace": "openshift-marketplace",
            "installPlanApproval": "Manual",
        },
    }
    assert cluster.kubectl("apply", "-f", "-", input=json.dumps(sub)).returncode == 0
    ref = wait_for(
        lambda: (
            get_json(cluster, "subscription", "gpu-operator-certified", "-n", ns)
            .get("status", {})
            .get("installPlanRef")
        ),
        what="installPlanRef",
    )
    ip = wait_for(
        lambda: (
            (p := get_json(cluster, "installplan", ref["name"], "-n", ns)).get("status", {}).get("phase")
            == "RequiresApproval"
            and p
        ),
        what="RequiresApproval",
    )
    assert ip["spec"]["clusterServiceVersionNames"] == ["gpu-operator-certified.v26.7.0"]
    assert (
        cluster.kubectl(
            "patch", "installplan", ref["name"], "-n", ns, "--type=merge", "-p", '{"spec":{"approved":true}}'
        ).returncode
        == 0
    )
    wait_for(
        lambda: (
            get_json(cluster, "subscription", "gpu-operator-certified", "-n", ns).get("status", {}).get("installedCSV")
            == "gpu-operator-certified.v26.7.0"
        ),
        what="installedCSV",
    )


def test_llminferenceservice_and_deployment_become_ready(cluster):
    ns = "sim-serving"
    cluster.kubectl("create", "namespace", ns)
    llm = yaml.safe_load(LLMISVC_TYPO.replace("modle", "model").replace("default", ns))
    # OpenShift AI's KServe routes a service only with auth (Red Hat Connectivity Link's AuthPolicy, not on this
    # plane) or with auth turned off, as the collection renders its services (intent/serving.py)
    llm["metadata"]["annotations"] = {"security.opendatahub.io/enable-auth": "false"}
    dep = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "epp", "namespace": ns},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "epp"}},
            "template": {
                "metadata": {"labels": {"app": "epp"}},
                "spec": {"containers": [{"name": "epp", "image": "registry.example/epp@sha256:" + "0" * 64}]},
            },
        },
    }
    assert cluster.kubectl("apply", "-f", "-", input=json.dumps(llm) + "\n---\n" + json.dumps(dep)).returncode == 0
    res = cluster.kubectl("wait", "-n", ns, "llminferenceservice/typo", "--for=condition=Ready", "--timeout=120s")
    assert res.returncode == 0, res.stderr
    status = get_json(cluster, "llminferenceservice", "typo", "-n", ns)["status"]
    if cluster.kserve_enabled:  # KServe's own status: no router, so the workload Service's address
        # (OpenShift AI's install turns on TLS to the workloads: enableLLMInferenceServiceTLS)
        scheme = "https" if cluster.kserve_flavor == "rhoai" else "http"
        assert status["addresses"][0]["url"] == f"{scheme}://typo-kserve-workload-svc.{ns}.svc.cluster.local"
    else:  # the simulator's
        assert status["url"].startswith("http://typo.")
    res = cluster.kubectl("wait", "-n", ns, "deployment/epp", "--for=condition=Available", "--timeout=120s")
    assert res.returncode == 0, res.stderr
    assert get_json(cluster, "deployment", "epp", "-n", ns)["status"]["availableReplicas"] == 2


# ---------------------------------------------------------------------- RBAC, kcm
def test_serviceaccount_without_rights_is_refused(cluster):
    kc = cluster.mint_sa_kubeconfig("rbac-test", "nobody")
    res = cluster.kubectl("get", "pods", "-n", "rbac-test", kubeconfig=kc)
    assert res.returncode != 0
    assert "Forbidden" in res.stderr and "system:serviceaccount:rbac-test:nobody" in res.stderr, res.stderr
    # Granting a Role makes the same request pass: RBAC, not a broken token.
    cluster.kubectl("create", "role", "pod-reader", "-n", "rbac-test", "--verb=get,list", "--resource=pods")
    cluster.kubectl(
        "create",
        "rolebinding",
        "nobody-reads",
        "-n",
        "rbac-test",
        "--role=pod-reader",
        "--serviceaccount=rbac-test:nobody",
    )
    wait_for(
        lambda: cluster.kubectl("get", "pods", "-n", "rbac-test", kubeconfig=kc).returncode == 0, what="RBAC grant"
    )


def test_namespace_deletion_is_real(cluster):
    ns = "kcm-delete"
    assert cluster.kubectl("create", "namespace", ns).returncode == 0
    assert cluster.kubectl("create", "configmap", "x", "-n", ns, "--from-literal=a=b").returncode == 0
    # The serviceaccount and root-CA controllers run: every namespace gets them.
    wait_for(lambda: cluster.kubectl("get", "sa", "default", "-n", ns).returncode == 0, what="default ServiceAccount")
    wait_for(
        lambda: cluster.kubectl("get", "configmap", "kube-root-ca.crt", "-n", ns).returncode == 0,
        what="kube-root-ca.crt",
    )
    assert cluster.kubectl("delete", "namespace", ns, "--timeout=30s").returncode == 0
    wait_for(lambda: cluster.kubectl("get", "namespace", ns).returncode != 0, what="namespace gone")


# ---------------------------------------------------------------------- OpenShift flavour
def test_the_api_server_and_kubectl_report_the_kubernetes_version_they_are_built_from(cluster):
    """kcp is stamped with go.mod's k8s.io/kubernetes version (mk/controlplane.mk), as a release build is: an
    unstamped build says v0.0.0-master+$Format:%H$ and any client that reads /version sees no Kubernetes version."""
    gomod = (HERE / "go.mod").read_text()
    want = next(line.split()[1] for line in gomod.splitlines() if line.strip().startswith("k8s.io/kubernetes v"))
    out = cluster.kubectl("version", "-o", "json")
    assert out.returncode == 0, out.stderr
    versions = json.loads(out.stdout)
    major, minor = want.lstrip("v").split(".")[:2]
    assert versions["serverVersion"]["gitVersion"] == want, versions["serverVersion"]
    assert (versions["serverVersion"]["major"], versions["serverVersion"]["minor"]) == (major, minor)
    assert versions["clientVersion"]["gitVersion"] == want, versions["clientVersion"]


def test_openshift_facts_are_seeded(cluster):
    cv = get_json(cluster, "clusterversion", "version")
    assert cv["status"]["desired"]["version"] == cluster.profile["openshift"]["version"]
    infra = get_json(cluster, "infrastructure", "cluster")
    assert infra["status"]["controlPlaneTopology"] == "HighlyAvailable"
    nodes = get_json(cluster, "nodes", "-l", "nvidia.com/gpu.present=true")["items"]
    assert len(nodes) == 2
    for n in nodes:
        assert n["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
        assert n["metadata"]["labels"]["feature.node.kubernetes.io/pci-15b3.present"] == "true"
        assert n["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        assert n["status"]["allocatable"]["rdma/rdma_shared_device_a"] == "63"
    pools = {p["metadata"]["name"] for p in get_json(cluster, "machineconfigpools")["items"]}
    assert pools == {"master", "worker"}
    names = {n["metadata"]["name"] for n in get_json(cluster, "namespaces")["items"]}
    assert {"openshift-marketplace", "openshift-operators", "openshift-config"} <= names
    cluster.set_openshift_version("4.21.9")
    try:
        assert get_json(cluster, "clusterversion", "version")["status"]["desired"]["version"] == "4.21.9"
    finally:
        cluster.set_openshift_version(cluster.profile["openshift"]["version"])


def test_packagemanifests_are_served_by_the_aggregated_api(cluster):
    pm = get_json(
        cluster,
        "packagemanifests.packages.operators.coreos.com",
        "gpu-operator-certified",
        "-n",
        "openshift-marketplace",
    )
    assert pm["status"]["defaultChannel"] == "v26.7"
    assert {"name": "v26.7", "currentCSV": "gpu-operator-certified.v26.7.0"}.items() <= next(
        c for c in pm["status"]["channels"] if c["name"] == "v26.7"
    ).items()
    listed = get_json(cluster, "packagemanifests", "-n", "openshift-marketplace", "-l", "catalog=redhat-operators")[
        "items"
    ]
    assert "rhods-operator" in {p["metadata"]["name"] for p in listed}
    # RBAC applies to the aggregated API as to any other.
    kc = cluster.mint_sa_kubeconfig("rbac-test", "nobody-pm")
    res = cluster.kubectl("get", "packagemanifests", "-n", "openshift-marketplace", kubeconfig=kc)
    assert res.returncode != 0 and "Forbidden" in res.stderr


def test_sno_profile_and_two_instances_at_once(cluster, cluster_factory):
    sno = cluster_factory("sno-rtx-pro-6000")
    assert sno.server != cluster.server
    infra = get_json(sno, "infrastructure", "cluster")
    assert infra["status"]["controlPlaneTopology"] == "SingleReplica"
    nodes = get_json(sno, "nodes")["items"]
    assert len(nodes) == 1
    labels = nodes[0]["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"
    assert labels["nvidia.com/gpu.memory"] == "97887"
    assert "node-role.kubernetes.io/master" in labels and "node-role.kubernetes.io/worker" in labels
    # The instances are independent.
    assert sno.kubectl("create", "namespace", "only-on-sno").returncode == 0
    assert cluster.kubectl("get", "namespace", "only-on-sno").returncode != 0


def test_missing_binary_fails_loudly(tmp_path):
    from controlplane.cluster import ControlPlaneError

    with pytest.raises(ControlPlaneError, match="make controlplane"):
        ControlPlane(binary=tmp_path / "nope").start()


def test_a_plane_whose_component_died_says_which_when_stopped():
    """kcp stops the whole plane when one of its children exits; the record a failing test then shows
    (tests/conftest.py) names that child, not only the dropped connection the test saw."""
    from controlplane import cluster as cl

    cp = ControlPlane("sno-rtx-pro-6000", kserve=False, simulate=False).start()
    try:
        scheduler = next(p for p in _descendants(cp.pid) if "scheduler" in Path(f"/proc/{p}/cmdline").read_text())
        os.kill(scheduler, signal.SIGKILL)
        cp.proc.wait(timeout=30)
        assert cl.dead_since(len(cl.DEATHS)), "a held instance whose kcp exited is reported before its stop"
    finally:
        seen = len(cl.DEATHS)
        cp.stop()
    assert len(cl.DEATHS) == seen + 1
    assert "kcp exited with 1 (error: scheduler exited" in cl.DEATHS[-1].splitlines()[0], cl.DEATHS[-1]


def test_cluster_up_and_down_leave_no_process(tmp_path):
    """What `make cluster-up` / `make cluster-down` run, on a scratch directory."""
    script = str(HERE / "cluster.py")
    wd = tmp_path / "cluster"
    up = subprocess.run(
        [sys.executable, script, "up", "--profile", "l40s-decode-mix", "--dir", str(wd)],
        capture_output=True,
        text=True,
        check=False,
        timeout=400,
    )
    assert up.returncode == 0, up.stderr + up.stdout
    assert "export KUBECONFIG=" in up.stdout
    state = json.loads((wd / "state.json").read_text())
    pids = [state["manager_pid"], state["kcp_pid"], state["kwok"]["pid"], state["lws"]["pid"]]
    tree = _descendants(state["kcp_pid"])
    assert len(tree) >= 3, "kube-apiserver, kube-controller-manager and kube-scheduler run as children of kcp"
    res = subprocess.run(
        [
            str(BINARY),
            "kubectl",
            f"--kubeconfig={wd / 'kubeconfig'}",
            "get",
            "nodes",
            "-l",
            "nvidia.com/gpu.product=NVIDIA-L40S",
            "-o",
            "name",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0 and len(res.stdout.split()) == 2, res.stderr
    down = subprocess.run(
        [sys.executable, script, "down", "--dir", str(wd)], capture_output=True, text=True, check=False, timeout=60
    )
    assert down.returncode == 0, down.stderr
    for p in pids + tree:
        assert not _alive(p), f"pid {p} still running after cluster-down"


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}").glob("task/*/children"):
            kids = [int(c) for c in task.read_text().split()]
            out += kids
            todo += kids
    return out


def test_rss_is_measurable(cluster):
    assert process_tree_rss(cluster.pid) > 0


def test_simulator_plays_the_other_operators(cluster):
    """Every other simulated kind reaches the status its real controller would report (workloads are
    no longer simulated: test_workloads.py)."""
    ns = "sim-operands"
    cluster.kubectl("create", "namespace", ns)
    digest = "registry.example/vllm@sha256:" + "1" * 64
    objs = [
        {
            "apiVersion": "nfd.openshift.io/v1",
            "kind": "NodeFeatureDiscovery",
            "metadata": {"name": "nfd-instance", "namespace": ns},
            "spec": {},
        },
        {
            "apiVersion": "dscinitialization.opendatahub.io/v1",
            "kind": "DSCInitialization",
            "metadata": {"name": "default-dsci"},
            "spec": {},
        },
        {
            "apiVersion": "datasciencecluster.opendatahub.io/v1",
            "kind": "DataScienceCluster",
            "metadata": {"name": "default-dsc"},
            "spec": {"components": {"kserve": {"managementState": "Managed"}}},
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "sim-operands"},
            "spec": {"controllerName": "example.com/gateway-controller"},
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "inference-gateway", "namespace": ns},
            "spec": {
                "gatewayClassName": "sim-operands",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
            },
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "route", "namespace": ns},
            "spec": {
                "parentRefs": [{"name": "inference-gateway"}],
                "rules": [
                    {"backendRefs": [{"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "pool"}]}
                ],
            },
        },
        {
            "apiVersion": "inference.networking.k8s.io/v1",
            "kind": "InferencePool",
            "metadata": {"name": "pool", "namespace": ns},
            "spec": {
                "selector": {"matchLabels": {"app": "vllm"}},
                "targetPorts": [{"number": 8000}],
                "endpointPickerRef": {"name": "epp", "port": {"number": 9002}},
            },
        },
        {
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "ScaledObject",
            "metadata": {"name": "so", "namespace": ns},
            "spec": {
                "scaleTargetRef": {"name": "epp"},
                "triggers": [
                    {
                        "type": "prometheus",
                        "metadata": {"serverAddress": "http://p:9090", "query": "1", "threshold": "1"},
                    }
                ],
            },
        },
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {"name": "site", "namespace": ns},
            "spec": {
                "project": "default",
                "destination": {"server": "https://kubernetes.default.svc", "namespace": ns},
                "source": {"repoURL": "https://git.example/site.git", "path": "clusters/a", "targetRevision": "main"},
            },
        },
        {
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "PinnedImageSet",
            "metadata": {"name": "vllm-images"},
            "spec": {"pinnedImages": [{"name": digest}]},
        },
    ]
    res = cluster.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objs))
    assert res.returncode == 0, res.stderr
    patch = '{"spec":{"pinnedImageSets":[{"name":"vllm-images"}]}}'
    assert cluster.kubectl("patch", "mcp", "worker", "--type=merge", "-p", patch).returncode == 0
    try:
        for args in (
            ("-n", ns, "nodefeaturediscovery/nfd-instance", "--for=condition=Available"),
            ("dscinitialization/default-dsci", "--for=jsonpath={.status.phase}=Ready"),
            ("datasciencecluster/default-dsc", "--for=condition=Ready"),
            ("-n", ns, "scaledobject/so", "--for=condition=Ready"),
            ("-n", ns, "application/site", "--for=jsonpath={.status.health.status}=Healthy"),
            ("-n", ns, "inferencepool/pool", "--for=jsonpath={.status.parents[0].conditions[0].status}=True"),
            ("-n", ns, "httproute/route", "--for=jsonpath={.status.parents[0].conditions[1].reason}=ResolvedRefs"),
            ("mcp/worker", "--for=jsonpath={.status.poolSynchronizersStatus[0].updatedMachineCount}=2"),
        ):
            res = cluster.kubectl("wait", *args, "--timeout=30s")
            assert res.returncode == 0, f"{args}: {res.stderr}"
        # As a Gateway controller reports: the route's parent names its controller; the pool's
        # endpoint picker Service does not exist yet, so its refs do not resolve ...
        route = get_json(cluster, "httproute", "route", "-n", ns)["status"]["parents"][0]
        assert route["controllerName"] == "example.com/gateway-controller"
        assert route["parentRef"]["name"] == "inference-gateway"
        pool = get_json(cluster, "inferencepool", "pool", "-n", ns)["status"]["parents"][0]
        assert pool["parentRef"] == {
            "group": "gateway.networking.k8s.io",
            "kind": "Gateway",
            "name": "inference-gateway",
            "namespace": ns,
        }
        refs = next(c for c in pool["conditions"] if c["type"] == "ResolvedRefs")
        assert (refs["status"], refs["reason"]) == ("False", "InvalidExtensionRef")
        # ... until it does; a route to a missing Service does not resolve either.
        svc = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "epp", "namespace": ns},
            "spec": {"ports": [{"name": "grpc", "port": 9002}]},
        }
        bad_route = {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "to-nowhere", "namespace": ns},
            "spec": {
                "parentRefs": [{"name": "inference-gateway"}],
                "rules": [{"backendRefs": [{"name": "nowhere", "port": 80}]}],
            },
        }
        res = cluster.kubectl("apply", "-f", "-", input=json.dumps(svc) + "\n---\n" + json.dumps(bad_route))
        assert res.returncode == 0, res.stderr
        for args in (
            ("-n", ns, "inferencepool/pool", "--for=jsonpath={.status.parents[0].conditions[1].status}=True"),
            (
                "-n",
                ns,
                "httproute/to-nowhere",
                "--for=jsonpath={.status.parents[0].conditions[1].reason}=BackendNotFound",
            ),
        ):
            res = cluster.kubectl("wait", *args, "--timeout=30s")
            assert res.returncode == 0, f"{args}: {res.stderr}"
        # A Gateway the controller has not accepted gets no routes: the route has no parent status.
        cluster.set_never_ready("Gateway", "held", ns)
        held = {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "held", "namespace": ns},
            "spec": {
                "gatewayClassName": "sim-operands",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
            },
        }
        via_held = bad_route | {
            "metadata": {"name": "via-held", "namespace": ns},
            "spec": {"parentRefs": [{"name": "held"}], "rules": [{"backendRefs": [{"name": "epp", "port": 9002}]}]},
        }
        res = cluster.kubectl("apply", "-f", "-", input=json.dumps(held) + "\n---\n" + json.dumps(via_held))
        assert res.returncode == 0, res.stderr
        time.sleep(2)
        assert not get_json(cluster, "httproute", "via-held", "-n", ns).get("status", {}).get("parents")
        cluster.clear_never_ready()
        res = cluster.kubectl(
            "wait", "-n", ns, "httproute/via-held", "--for=jsonpath={.status.parents[0].conditions[0].status}=True"
        )
        assert res.returncode == 0, res.stderr
    finally:
        cluster.kubectl("patch", "mcp", "worker", "--type=merge", "-p", '{"spec":{"pinnedImageSets":null}}')
        cluster.kubectl(
            "delete",
            "pinnedimageset/vllm-images",
            "dsc/default-dsc",
            "dsci/default-dsci",
            "gatewayclass/sim-operands",
            "--wait=false",
        )


def test_simulator_resolves_envoy_gateway_backends_and_admits_openshift_routes(cluster):
    """Envoy Gateway's Backend kind resolves once the Backend exists (its Backend API enabled, a documented
    prerequisite of the front doors); an OpenShift Route is admitted by the default router (Argo CD's Route health
    waits for it): the sovereign burst's trees (tests/gitops/test_sovereign_two_clusters.py) need both."""
    ns = "sim-envoy"
    gwapi = "gateway.networking.k8s.io/v1"
    gwc = {"apiVersion": gwapi, "kind": "GatewayClass", "metadata": {"name": ns},
           "spec": {"controllerName": "gateway.envoyproxy.io/gatewayclass-controller"}}  # fmt: skip
    gw = {"apiVersion": gwapi, "kind": "Gateway", "metadata": {"name": "front", "namespace": ns},
          "spec": {"gatewayClassName": ns, "listeners": [{"name": "h", "port": 80, "protocol": "HTTP"}]}}  # fmt: skip
    to_backend = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "to-backend", "namespace": ns},
        "spec": {
            "parentRefs": [{"name": "front"}],
            "rules": [{"backendRefs": [{"group": "gateway.envoyproxy.io", "kind": "Backend", "name": "onprem"}]}],
        },
    }
    backend = {
        "apiVersion": "gateway.envoyproxy.io/v1alpha1",
        "kind": "Backend",
        "metadata": {"name": "onprem", "namespace": ns},
        "spec": {"endpoints": [{"fqdn": {"hostname": "gw.example.com", "port": 80}}]},
    }
    route = {
        "apiVersion": "route.openshift.io/v1",
        "kind": "Route",
        "metadata": {"name": "ingress", "namespace": ns},
        "spec": {"host": "inference.apps.example.com", "to": {"kind": "Service", "name": "front"}},
    }
    assert cluster.kubectl("create", "namespace", ns).returncode == 0
    try:
        body = "\n---\n".join(json.dumps(o) for o in (gwc, gw, to_backend, route))
        res = cluster.kubectl("apply", "-f", "-", input=body)
        assert res.returncode == 0, res.stderr
        reason = "--for=jsonpath={.status.parents[0].conditions[1].reason}="
        res = cluster.kubectl("wait", "-n", ns, "httproute/to-backend", reason + "BackendNotFound", "--timeout=30s")
        assert res.returncode == 0, res.stderr
        assert cluster.kubectl("apply", "-f", "-", input=json.dumps(backend)).returncode == 0
        res = cluster.kubectl("wait", "-n", ns, "httproute/to-backend", reason + "ResolvedRefs", "--timeout=30s")
        assert res.returncode == 0, res.stderr
        admitted = "--for=jsonpath={.status.ingress[0].conditions[0].type}=Admitted"
        res = cluster.kubectl("wait", "-n", ns, "route/ingress", admitted, "--timeout=30s")
        assert res.returncode == 0, res.stderr
    finally:
        cluster.kubectl("delete", "namespace", ns, "--wait=false")
        cluster.kubectl("delete", "gatewayclass", ns, "--wait=false")
