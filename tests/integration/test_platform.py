"""The platform stage on the local control plane (real kube-apiserver, upstream CRDs, the real KServe
controller, status simulator playing OLM and the operators).

One control plane per profile, started for its test class and stopped after it (one at a time: the
platform objects are cluster-wide singletons, and the machine is shared). The tests of a class run
in order on the same cluster: check mode on the fresh cluster, a wait that times out, the converge
and its no-op re-run, the teardown and its no-op re-run, and a teardown that keeps the operators.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from controlplane.cluster import ControlPlane

from tests.ansible_run import run_playbook

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PLATFORM = ROOT / "playbooks" / "platform.yml"
TEARDOWN = ROOT / "playbooks" / "teardown.yml"
CHAT = ROOT / "inventories" / "example-chat"
EDGE = ROOT / "inventories" / "example-edge-fleet"

# Namespaces the platform creates (operator namespaces and the pre-pull namespace).
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
OLM_KINDS = ("Subscription", "OperatorGroup", "ClusterServiceVersion", "InstallPlan")


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
            if kind in OLM_KINDS and meta.get("namespace") not in OUR_NAMESPACES:
                continue
            if kind == "Namespace" and (item.get("status") or {}).get("phase") == "Terminating":
                out.add((kind, "", meta["name"] + " (Terminating)"))
                continue
            out.add((kind, meta.get("namespace") or "", meta["name"]))
    return out


def _ok(run):
    assert run.rc == 0, run.failure_messages() or run.stdout[-4000:]
    return run


def _changed_tasks(run) -> list[str]:
    return [r[1] for r in run.results if r[4].get("changed")]


def _get(cp, api_version, kind, name, namespace=None):
    res = cp.dynamic.resources.get(api_version=api_version, kind=kind)
    try:
        return res.get(name=name, namespace=namespace).to_dict()
    except Exception:  # noqa: BLE001 - NotFound
        return None


def _kserve_presets(cp) -> list[str]:
    res = cp.dynamic.resources.get(api_version="serving.kserve.io/v1alpha2", kind="LLMInferenceServiceConfig")
    return sorted(i["metadata"]["name"] for i in res.get(namespace="redhat-ods-applications").to_dict()["items"])


@pytest.fixture(scope="class")
def cp(request):
    """One control plane of the class's profile, with the real KServe controller, stopped after the class."""
    plane = ControlPlane(request.cls.PROFILE, kserve=True).start()
    yield plane
    plane.stop()


class TestH100:
    """example-chat on 2 x 8 H100 with RDMA NICs: every platform component, the network operator included."""

    PROFILE = "h100-8x2-rdma"

    def test_check_mode_on_a_fresh_cluster_creates_nothing(self, cp):
        before = snapshot(cp)
        run = _ok(run_playbook(PLATFORM, CHAT, kubeconfig=cp.kubeconfig, check=True, diff=True))
        assert snapshot(cp) == before
        # one dry run of both phases went through the API server: every object validated or, in a
        # namespace this run would create, created without validation
        applies = run.results_of("inference.blueprints.k8s_apply")
        assert len(applies) == 1
        actions = {(o["kind"], o["action"]) for o in applies[0]["objects"]}
        assert ("Subscription", "created") in actions and ("ClusterPolicy", "created") in actions
        # nothing is waited for in check mode
        assert "waited" not in applies[0] and not run.results_of("inference.blueprints.k8s_wait")

    def test_clusterpolicy_never_ready_fails_with_the_timeout_message(self, cp):
        cp.set_never_ready("ClusterPolicy", "gpu-cluster-policy")
        try:
            run = run_playbook(
                PLATFORM, CHAT, kubeconfig=cp.kubeconfig, tags="gpu_operator", extravars={"gpu_operator_timeout": 6}
            )
        finally:
            cp.clear_never_ready()
        assert run.rc != 0
        msg = run.failure_messages()
        assert "timed out after 6 s" in msg
        assert "ClusterPolicy gpu-cluster-policy (nvidia.com/v1)" in msg
        assert "waited for status.state == 'ready'" in msg
        assert "last saw status.state=" in msg
        # only the tagged component: its operator, then its operands, in one task that failed on the
        # operands' wait and still lists what both phases applied
        applies = [r for r in run.results if r[2] == "inference.blueprints.k8s_apply"]
        assert [r[3] for r in applies] == ["failed"]
        assert set(applies[0][4]["phases"]) == {"operators", "reread", "operands"}
        applied = {o["kind"] for r in applies for o in r[4]["objects"]}
        assert {"Subscription", "ClusterPolicy"} <= applied and "NodeFeatureDiscovery" not in applied

    def test_converge_then_noop(self, cp):
        presets = _kserve_presets(cp)
        assert presets, "the KServe controller installs its presets at start"
        first = _ok(run_playbook(PLATFORM, CHAT, kubeconfig=cp.kubeconfig))
        assert first.changed > 0
        # one task: the operators applied and waited for at once, the cluster read again for the APIs
        # they installed, the operands applied and waited for at once
        applies = first.results_of("inference.blueprints.k8s_apply")
        assert len(applies) == 1 and not first.results_of("inference.blueprints.k8s_wait")
        assert list(applies[0]["phases"]) == ["operators", "reread", "operands"]
        assert all(o["ready"] for r in applies for o in r["waited"])
        waited = [o["ref"] for r in applies for o in r["waited"]]
        assert any(ref.startswith("ClusterServiceVersion nvidia-gpu-operator/") for ref in waited)
        assert "CustomResourceDefinition llminferenceservices.serving.kserve.io (apiextensions.k8s.io/v1)" in waited
        # operands of APIs this cluster does not serve are named, not applied
        dropped = [d["message"] for d in applies[0]["dropped"]]
        assert (
            "IPPool nvidia-network-operator/rdma-pool (the cluster does not serve nv-ipam.nvidia.com/v1alpha1)"
            in dropped
        )
        # and the run says so
        assert "not applied, the cluster does not serve their API: " in first.stdout

        policy = _get(cp, "nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy")
        assert policy["status"]["state"] == "ready"
        driver = policy["spec"]["driver"]
        # the ClusterPolicy schema this cluster serves (GPU operator v24.3 CRD) predates kernelModuleType
        assert driver.get("useOpenKernelModules") is True and "kernelModuleType" not in driver
        assert driver["rdma"] == {"enabled": True, "useHostMofed": False}
        assert policy["spec"]["dcgmExporter"]["serviceMonitor"]["enabled"] is True
        nic = _get(cp, "mellanox.com/v1alpha1", "NicClusterPolicy", "nic-cluster-policy")
        assert nic["status"]["state"] == "ready"
        assert "rdma_shared_device_a" in nic["spec"]["rdmaSharedDevicePlugin"]["config"]
        nfd = _get(cp, "nfd.openshift.io/v1", "NodeFeatureDiscovery", "nfd-instance", "openshift-nfd")
        assert "0207" in nfd["spec"]["workerConfig"]["configData"]
        dsc = _get(cp, "datasciencecluster.opendatahub.io/v1", "DataScienceCluster", "default-dsc")
        assert dsc["spec"]["components"]["kserve"]["managementState"] == "Managed"
        gw = _get(cp, "gateway.networking.k8s.io/v1", "Gateway", "openshift-ai-inference", "openshift-ingress")
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
            sub = _get(cp, "operators.coreos.com/v1alpha1", "Subscription", name, ns)
            assert sub and sub["status"]["state"] == "AtLatestKnown", (ns, name)
            # the catalog's default channel, read at preflight
            assert sub["spec"].get("channel"), (ns, name)
        pis = _get(cp, "machineconfiguration.openshift.io/v1", "PinnedImageSet", "inference-blueprints-worker")
        assert pis["metadata"]["labels"]["machineconfiguration.openshift.io/role"] == "worker"
        assert all("@sha256:" in i["name"] for i in pis["spec"]["pinnedImages"])
        assert _get(cp, "keda.sh/v1alpha1", "KedaController", "keda", "openshift-keda") is not None
        cm = _get(cp, "v1", "ConfigMap", "cluster-monitoring-config", "openshift-monitoring")
        assert "enableUserWorkload: true" in cm["data"]["config.yaml"]

        second = _ok(run_playbook(PLATFORM, CHAT, kubeconfig=cp.kubeconfig))
        assert second.changed == 0, _changed_tasks(second)
        # no second read of the cluster when every operator was already installed
        assert len(second.results_of("inference.blueprints.cluster_facts")) == 1
        assert list(second.results_of("inference.blueprints.k8s_apply")[0]["phases"]) == ["operators", "operands"]
        # OpenShift AI's objects leave what KServe installed in its namespace alone
        assert _kserve_presets(cp) == presets

    def test_teardown_leaves_none_of_our_objects_and_a_second_changes_nothing(self, cp):
        run = _ok(run_playbook(TEARDOWN, CHAT, kubeconfig=cp.kubeconfig))
        assert run.changed > 0
        assert snapshot(cp) == set()
        # not ours: the namespace KServe runs in stays
        assert _get(cp, "v1", "Namespace", "redhat-ods-applications") is not None
        again = _ok(run_playbook(TEARDOWN, CHAT, kubeconfig=cp.kubeconfig))
        assert again.changed == 0, _changed_tasks(again)

    def test_teardown_can_keep_the_operators(self, cp):
        _ok(run_playbook(PLATFORM, CHAT, kubeconfig=cp.kubeconfig, tags="nfd,gpu_operator"))
        _ok(run_playbook(TEARDOWN, CHAT, kubeconfig=cp.kubeconfig, extravars={"teardown_keep_operators": True}))
        assert _get(cp, "nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy") is None
        assert _get(cp, "nfd.openshift.io/v1", "NodeFeatureDiscovery", "nfd-instance", "openshift-nfd") is None
        sub = _get(cp, "operators.coreos.com/v1alpha1", "Subscription", "gpu-operator-certified", "nvidia-gpu-operator")
        assert sub is not None
        assert _get(
            cp,
            "operators.coreos.com/v1alpha1",
            "ClusterServiceVersion",
            sub["status"]["installedCSV"],
            "nvidia-gpu-operator",
        )


class TestSno:
    """One RTX PRO 6000 on Single Node OpenShift, no RDMA."""

    PROFILE = "sno-rtx-pro-6000"

    def test_preflight_short_of_gpus_fails_listing_the_gap_and_creates_nothing(self, cp):
        # The chat site plans H100s with RDMA; this cluster is one RTX PRO 6000 without RDMA.
        before = snapshot(cp)
        run = run_playbook(PLATFORM, CHAT, kubeconfig=cp.kubeconfig)
        assert run.rc != 0
        msg = run.failure_messages()
        assert "requirement(s) not met; nothing was changed" in msg
        assert "x h100 needed" in msg and "0 found" in msg
        assert "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition: 1" in msg
        assert "RDMA: the plan uses RDMA (qwen-chat moves KV between pods over RDMA" in msg
        assert snapshot(cp) == before
        assert not run.results_of("inference.blueprints.k8s_apply")

    def test_converge_then_noop(self, cp):
        host = "store-berlin-001"
        first = _ok(run_playbook(PLATFORM, EDGE, kubeconfig=cp.kubeconfig, limit=host))
        assert first.changed > 0
        policy = _get(cp, "nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy")
        assert policy["status"]["state"] == "ready"
        assert policy["spec"]["driver"]["rdma"]["enabled"] is False  # no RDMA on this site
        # no network operator: the edge blueprint does not list it and no plan needs RDMA
        assert _get(cp, "mellanox.com/v1alpha1", "NicClusterPolicy", "nic-cluster-policy") is None
        assert (
            _get(
                cp,
                "operators.coreos.com/v1alpha1",
                "Subscription",
                "nvidia-network-operator",
                "nvidia-network-operator",
            )
            is None
        )
        # Single Node OpenShift: the images are pinned in the master pool
        assert _get(cp, "machineconfiguration.openshift.io/v1", "PinnedImageSet", "inference-blueprints-master")
        second = _ok(run_playbook(PLATFORM, EDGE, kubeconfig=cp.kubeconfig, limit=host))
        assert second.changed == 0, _changed_tasks(second)

    def test_an_openshift_ai_release_with_another_vllm_stops_the_run_after_its_operators(self, cp):
        """The site moves to OpenShift AI 3.5.0 (channel fast-3.x), whose CSV names vLLM 0.24.0+rhaiv.9 for its
        presets, while its plans are written for the default vLLM 0.33: preflight cannot know (3.4.0's CSV names
        no version), so the platform stage reads the CSV again once the operators are up and stops before the
        operands. Stating vllm_version 0.24.0 then passes preflight and converges."""
        host, moved = "store-berlin-001", {"openshift_ai_channel": "fast-3.x"}
        run = run_playbook(PLATFORM, EDGE, kubeconfig=cp.kubeconfig, limit=host, extravars=moved)
        assert run.rc != 0
        msg = run.failure_messages()
        assert "the operators above are installed; read again, the cluster has 1 requirement(s) not met" in msg
        assert "vLLM engine: the plans are written for vLLM 0.33.0 (the default; the site sets no vllm_version)" in msg
        assert (
            "presets of rhods-operator.3.5.0 (redhat-ods-operator/rhods-operator.3.5.0) run vLLM 0.24.0+rhaiv.9" in msg
        )
        assert 'set vllm_version: "0.24.0"' in msg, msg
        sub = _get(cp, "operators.coreos.com/v1alpha1", "Subscription", "rhods-operator", "redhat-ods-operator")
        assert sub["spec"]["channel"] == "fast-3.x" and sub["status"]["installedCSV"] == "rhods-operator.3.5.0"
        # the run waited for the new channel's head, not the CSV the Subscription had installed from the old one
        (apply,) = [r for r in run.results if r[2] == "inference.blueprints.k8s_apply"]
        waited = [w["ref"] for w in apply[4]["waited"]]
        assert any(w.startswith("ClusterServiceVersion redhat-ods-operator/rhods-operator.3.5.0") for w in waited)
        assert "operands" not in apply[4]["phases"], apply[4]["phases"]
        stated = _ok(
            run_playbook(
                PLATFORM, EDGE, kubeconfig=cp.kubeconfig, limit=host, extravars={**moved, "vllm_version": "0.24.0"}
            )
        )
        (read,) = stated.results_of("inference.blueprints.cluster_facts")
        assert read["unmet"] == [] and not any(w.startswith("vLLM engine") for w in read["cluster_facts"]["warnings"])


RENDER_CHECKED = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Check every cluster's inventory against its requirements, then write its platform objects
      inference.blueprints.platform:
        phase: all
        hosts: "{{ ansible_play_hosts }}"
        deliveries: [render, gitops]
        write: true
        check_inventory: true
      run_once: true
"""


def test_a_fleet_that_renders_is_checked_against_its_inventory_before_anything_is_written(tmp_path):
    out = tmp_path / "render"
    extravars = {"delivery": "render", "render_dir": str(out), "preflight_openshift_version": "4.18.9"}
    run = run_playbook(RENDER_CHECKED, EDGE, extravars=extravars)
    assert run.rc != 0
    msg = run.failure_messages()
    assert "preflight: 3 requirement(s) not met; nothing was written" in msg
    assert "store-berlin-001: OpenShift version 4.18.9 is older than the supported minimum 4.19" in msg
    assert not out.exists()
    ok = _ok(run_playbook(RENDER_CHECKED, EDGE, extravars={**extravars, "preflight_openshift_version": "4.21.2"}))
    assert ok.changed == 1 and len(list(out.rglob("*.yaml"))) > 3 * 20
