# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which kinds are cluster-scoped, decided once for every delivery that has no API server to ask.

delivery=apply asks the cluster's discovery (k8s_apply._place); delivery=render and gitops write files
offline, so they place objects by this table: a cluster-scoped kind never carries ``metadata.namespace``
(kubectl and Argo CD refuse or mis-track such a manifest), a namespaced kind without one gets the default
namespace of its stage when the stage has one. A kind is keyed by its API group (``""`` for the core group)
and kind: two groups may serve one kind name at different scopes. tests/render/test_render.py checks every
example's render and GitOps tree against the local control plane's discovery.
"""

from __future__ import annotations

CLUSTER_SCOPED = frozenset(
    {
        ("", "Namespace"),
        ("", "PersistentVolume"),
        ("", "Node"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("apiregistration.k8s.io", "APIService"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
        ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
        ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
        ("storage.k8s.io", "StorageClass"),
        ("scheduling.k8s.io", "PriorityClass"),
        ("nvidia.com", "ClusterPolicy"),
        ("nvidia.com", "NVIDIADriver"),
        ("mellanox.com", "NicClusterPolicy"),
        ("mellanox.com", "HostDeviceNetwork"),
        ("mellanox.com", "MacvlanNetwork"),
        ("mellanox.com", "IPoIBNetwork"),
        ("datasciencecluster.opendatahub.io", "DataScienceCluster"),
        ("dscinitialization.opendatahub.io", "DSCInitialization"),
        ("gateway.networking.k8s.io", "GatewayClass"),
        ("machineconfiguration.openshift.io", "PinnedImageSet"),
        ("machineconfiguration.openshift.io", "MachineConfigPool"),
        ("machineconfiguration.openshift.io", "MachineConfig"),
        ("config.openshift.io", "ImageDigestMirrorSet"),
        ("config.openshift.io", "ClusterVersion"),
        ("config.openshift.io", "Infrastructure"),
        ("config.openshift.io", "Ingress"),
        ("operator.openshift.io", "LeaderWorkerSetOperator"),
        ("security.openshift.io", "SecurityContextConstraints"),
        ("keda.sh", "ClusterTriggerAuthentication"),
        ("cert-manager.io", "ClusterIssuer"),
    }
)


def group_of(api_version: str) -> str:
    return api_version.split("/", maxsplit=1)[0] if "/" in api_version else ""


def cluster_scoped(obj: dict) -> bool:
    return (group_of(obj["apiVersion"]), obj["kind"]) in CLUSTER_SCOPED


def placed(obj: dict, namespace: str | None) -> dict:
    """The object with its metadata.namespace set by its kind's scope: dropped on a cluster-scoped kind,
    ``namespace`` on a namespaced one that names none (when given). ``obj`` itself is not changed."""
    meta = dict(obj.get("metadata") or {})
    if cluster_scoped(obj):
        meta.pop("namespace", None)
    elif namespace and not meta.get("namespace"):
        meta["namespace"] = namespace
    return {**obj, "metadata": meta}
