"""Platform roles on the local control plane (real kube-apiserver, upstream CRDs, status simulator).

Each scenario gets its own control plane instance (``cluster_factory(profile, name=...)``) because
the platform objects are cluster-wide singletons (ClusterPolicy, NicClusterPolicy, DSC, ...).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ansible_run import run_playbook

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PLATFORM = ROOT / "playbooks" / "platform.yml"
TEARDOWN = ROOT / "playbooks" / "teardown.yml"
CHAT = ROOT / "inventories" / "example-chat"
EDGE = ROOT / "inventories" / "example-edge-fleet"

# Namespaces the platform roles create (operator namespaces and the pre-pull namespace).
OUR_NAMESPACES = {
    "openshift-nfd",
    "nvidia-gpu-operator",
    "nvidia-network-operator",
    "openshift-sriov-network-operator",
    "redhat-ods-operator",
    "cert-manager-operator",
    "openshift-lws-operator",
    "kuadrant-system",
    "openshift-keda",
    "openshift-gitops-operator",
    "inference-blueprints-prewarm",
}

# (apiVersion, kind, name filter or None): every object of these kinds counts, except where a
# filter names the only objects of that kind that are ours.
KINDS = [
    ("v1", "Namespace", None),
    ("operators.coreos.com/v1alpha1", "Subscription", None),
    ("operators.coreos.com/v1", "OperatorGroup", None),
    ("operators.coreos.com/v1alpha1", "ClusterServiceVersion", None),
    ("operators.coreos.com/v1alpha1", "InstallPlan", None),
    ("nvidia.com/v1", "ClusterPolicy", None),
    ("mellanox.com/v1alpha1", "NicClusterPolicy", None),
    ("mellanox.com/v1alpha1", "MacvlanNetwork", None),
    ("nfd.openshift.io/v1", "NodeFeatureDiscovery", None),
    ("nfd.k8s-sigs.io/v1alpha1", "NodeFeatureRule", None),
    ("nfd.openshift.io/v1alpha1", "NodeFeatureRule", None),
    ("sriovnetwork.openshift.io/v1", "SriovOperatorConfig", None),
    ("sriovnetwork.openshift.io/v1", "SriovNetworkNodePolicy", None),
    ("sriovnetwork.openshift.io/v1", "SriovNetwork", None),
    ("dscinitialization.opendatahub.io/v1", "DSCInitialization", None),
    ("datasciencecluster.opendatahub.io/v1", "DataScienceCluster", None),
    ("gateway.networking.k8s.io/v1", "GatewayClass", {"openshift-default"}),
    ("gateway.networking.k8s.io/v1", "Gateway", {"openshift-ai-inference"}),
    ("keda.sh/v1alpha1", "KedaController", None),
    ("machineconfiguration.openshift.io/v1", "PinnedImageSet", None),
    ("v1", "ConfigMap", {"cluster-monitoring-config", "time-slicing-config"}),
    ("apps/v1", "DaemonSet", {"inference-blueprints"}),
]


def snapshot(cp) -> set[tuple[str, str, str]]:
    out = set()
    for api_version, kind, names in KINDS:
        try:
            res = cp.dynamic.resources.get(api_version=api_version, kind=kind)
        except Exception:  # noqa: BLE001 - kind not served on this control plane
            continue
        for item in res.get().to_dict().get("items") or []:
            meta = item["metadata"]
            if names is not None and meta["name"] not in names:
                continue
            if kind == "Namespace" and meta["name"] not in OUR_NAMESPACES:
                continue
            # OLM objects count only in our namespaces (the cluster has global-operators of its own).
            if kind.startswith(("Subscription", "OperatorGroup", "ClusterServiceVersion", "InstallPlan")) and (
                meta.get("namespace") not in OUR_NAMESPACES
            ):
                continue
            if kind == "Namespace" and (item.get("status") or {}).get("phase") == "Terminating":
                out.add((kind, "", meta["name"] + " (Terminating)"))
                continue
            out.add((kind, meta.get("namespace") or "", meta["name"]))
    return out


# Every readiness wait runs against the simulator (it plays Gateway and KedaController too).
SIM_GAPS: dict = {}


def _vars(**extra):
    return {**SIM_GAPS, **extra}


def _ok(run):
    assert run.rc == 0, run.failure_messages() or run.stdout[-4000:]
    return run


def _get(cp, api_version, kind, name, namespace=None):
    res = cp.dynamic.resources.get(api_version=api_version, kind=kind)
    try:
        return res.get(name=name, namespace=namespace).to_dict()
    except Exception:  # noqa: BLE001 - NotFound
        return None


@pytest.fixture(scope="module")
def h100(cluster_factory):
    return cluster_factory("h100-8x2-rdma", name="platform-h100")


@pytest.fixture(scope="module")
def sno(cluster_factory):
    return cluster_factory("sno-rtx-pro-6000", name="platform-sno")


def test_check_mode_on_a_fresh_cluster_creates_nothing(cluster_factory):
    cp = cluster_factory("h100-8x2-rdma", name="platform-check")
    before = snapshot(cp)
    run = _ok(run_playbook(PLATFORM, CHAT, kubeconfig=cp.kubeconfig, check=True, diff=True, extravars=_vars()))
    assert snapshot(cp) == before
    # the dry run went through the API server: the operator objects were validated
    actions = [o["action"] for r in run.results_of("inference.blueprints.k8s_apply") for o in r.get("objects", [])]
    assert "created" in actions


def test_preflight_short_of_gpus_fails_listing_the_gap_and_creates_nothing(sno):
    # The chat site plans H100s with RDMA; this cluster is one RTX PRO 6000 without RDMA.
    before = snapshot(sno)
    run = run_playbook(PLATFORM, CHAT, kubeconfig=sno.kubeconfig, extravars=_vars())
    assert run.rc != 0
    msg = run.failure_messages()
    assert "requirement(s) not met; nothing was changed" in msg
    assert "x h100 needed" in msg and "0 found" in msg
    assert "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition: 1" in msg
    assert "RDMA" in msg
    assert snapshot(sno) == before
    assert not run.results_of("inference.blueprints.k8s_apply")


def test_converge_h100_rdma_then_noop(h100):
    first = _ok(run_playbook(PLATFORM, CHAT, kubeconfig=h100.kubeconfig, extravars=_vars()))
    assert first.changed > 0

    policy = _get(h100, "nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy")
    assert policy["status"]["state"] == "ready"
    driver = policy["spec"]["driver"]
    # the loaded ClusterPolicy schema decides open kernel modules' spelling
    assert driver.get("kernelModuleType") == "open" or driver.get("useOpenKernelModules") is True
    assert driver["rdma"] == {"enabled": True, "useHostMofed": False}
    assert policy["spec"]["dcgmExporter"]["serviceMonitor"]["enabled"] is True
    nic = _get(h100, "mellanox.com/v1alpha1", "NicClusterPolicy", "nic-cluster-policy")
    assert nic["status"]["state"] == "ready"
    assert "rdma_shared_device_a" in nic["spec"]["rdmaSharedDevicePlugin"]["config"]
    nfd = _get(h100, "nfd.openshift.io/v1", "NodeFeatureDiscovery", "nfd-instance", "openshift-nfd")
    assert "0207" in nfd["spec"]["workerConfig"]["configData"]
    dsc = _get(h100, "datasciencecluster.opendatahub.io/v1", "DataScienceCluster", "default-dsc")
    assert dsc["spec"]["components"]["kserve"]["managementState"] == "Managed"
    gw = _get(h100, "gateway.networking.k8s.io/v1", "Gateway", "openshift-ai-inference", "openshift-ingress")
    assert gw["spec"]["gatewayClassName"] == "openshift-default"
    for ns, name in [
        ("openshift-nfd", "nfd"),
        ("nvidia-gpu-operator", "gpu-operator-certified"),
        ("nvidia-network-operator", "nvidia-network-operator"),
        ("redhat-ods-operator", "rhods-operator"),
        ("openshift-lws-operator", "leader-worker-set"),
        ("cert-manager-operator", "openshift-cert-manager-operator"),
        ("openshift-keda", "openshift-custom-metrics-autoscaler-operator"),
    ]:
        sub = _get(h100, "operators.coreos.com/v1alpha1", "Subscription", name, ns)
        assert sub and sub["status"]["state"] == "AtLatestKnown", (ns, name)
    pis = _get(h100, "machineconfiguration.openshift.io/v1", "PinnedImageSet", "inference-blueprints-worker")
    assert pis["metadata"]["labels"]["machineconfiguration.openshift.io/role"] == "worker"
    assert all("@sha256:" in i["name"] for i in pis["spec"]["pinnedImages"])
    keda = _get(h100, "keda.sh/v1alpha1", "KedaController", "keda", "openshift-keda")
    assert keda is not None
    cm = _get(h100, "v1", "ConfigMap", "cluster-monitoring-config", "openshift-monitoring")
    assert "enableUserWorkload: true" in cm["data"]["config.yaml"]

    second = _ok(run_playbook(PLATFORM, CHAT, kubeconfig=h100.kubeconfig, extravars=_vars()))
    assert second.changed == 0, [r[1] for r in second.results if r[4].get("changed")]


def test_clusterpolicy_never_ready_fails_with_the_timeout_message(cluster_factory):
    cp = cluster_factory("h100-8x2-rdma", name="platform-timeout")
    cp.set_never_ready("ClusterPolicy", "gpu-cluster-policy")
    try:
        run = run_playbook(
            PLATFORM,
            CHAT,
            kubeconfig=cp.kubeconfig,
            tags="nfd,gpu_operator",
            extravars=_vars(gpu_operator_timeout=6),
        )
    finally:
        cp.clear_never_ready()
    assert run.rc != 0
    msg = run.failure_messages()
    assert "timed out after 6 s" in msg
    assert "ClusterPolicy gpu-cluster-policy (nvidia.com/v1)" in msg
    assert "waited for status.state == 'ready'" in msg
    assert "last saw status.state=" in msg


def test_teardown_leaves_none_of_our_objects(h100):
    run = _ok(run_playbook(TEARDOWN, CHAT, kubeconfig=h100.kubeconfig, extravars=_vars()))
    assert run.changed > 0
    left = {obj for obj in snapshot(h100) if obj[0] != "Namespace" or obj[2] in OUR_NAMESPACES}
    assert left == set(), sorted(left)


def test_teardown_can_keep_the_operators(cluster_factory):
    cp = cluster_factory("h100-8x2-rdma", name="platform-keep")
    extravars = _vars()
    _ok(run_playbook(PLATFORM, CHAT, kubeconfig=cp.kubeconfig, tags="nfd,gpu_operator", extravars=extravars))
    _ok(
        run_playbook(TEARDOWN, CHAT, kubeconfig=cp.kubeconfig, extravars={**extravars, "teardown_keep_operators": True})
    )
    assert _get(cp, "nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy") is None
    assert _get(cp, "operators.coreos.com/v1alpha1", "Subscription", "gpu-operator-certified", "nvidia-gpu-operator")


def test_converge_sno_rtx_pro_6000_then_noop(sno):
    host = "store-berlin-001"
    first = _ok(run_playbook(PLATFORM, EDGE, kubeconfig=sno.kubeconfig, limit=host, extravars=_vars()))
    assert first.changed > 0
    policy = _get(sno, "nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy")
    assert policy["status"]["state"] == "ready"
    assert policy["spec"]["driver"]["rdma"]["enabled"] is False  # no RDMA on this site
    # no network operator: the edge blueprint does not list it and no plan needs RDMA
    assert _get(sno, "mellanox.com/v1alpha1", "NicClusterPolicy", "nic-cluster-policy") is None
    # Single Node OpenShift: the images are pinned in the master pool
    pis = _get(sno, "machineconfiguration.openshift.io/v1", "PinnedImageSet", "inference-blueprints-master")
    assert pis is not None
    second = _ok(run_playbook(PLATFORM, EDGE, kubeconfig=sno.kubeconfig, limit=host, extravars=_vars()))
    assert second.changed == 0, [r[1] for r in second.results if r[4].get("changed")]
