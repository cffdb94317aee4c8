# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SecurityContextConstraints grant of the single-node pods that add ``IPC_LOCK``.

RDMA memory registration (``ibv_reg_mr``, what UCX's ``rc``/``dc`` transports under NIXL and NCCL's
IB transport do for every buffer they send from) pins the pages, and the kernel counts pinned pages
against ``RLIMIT_MEMLOCK`` unless the process has ``CAP_IPC_LOCK``. A container's default memlock
limit (8 MiB or less) is far below the KV blocks NIXL registers, so the engine container adds
``IPC_LOCK`` (intent/serving.py ``_pod``); KServe's data-parallel presets add it themselves with
``SYS_RAWIO`` and ``NET_RAW``.

On OpenShift a pod may add a capability only under an SCC that allows it: ``restricted-v2``, which
every authenticated identity may use, allows ``NET_BIND_SERVICE`` alone. OpenShift AI ships the SCC
``openshift-ai-llminferenceservice-scc`` (``IPC_LOCK``, ``SYS_RAWIO``, ``NET_BIND_SERVICE``,
``NET_RAW``; otherwise restricted-v2's rules) with a ClusterRole of the same name granting ``use`` on it
(red-hat-data-services/kserve rhoai-3.5 ``config/overlays/odh/rbac/llmisvc/llm-svc-scc.yaml``), and its
KServe binds that role only to the ServiceAccounts of multi-node workloads, removing the binding when
the service has no ``worker`` (``pkg/controller/v1alpha2/llmisvc/workload_permissions_odh.go``). A
single-node pool that adds ``IPC_LOCK`` is therefore refused by SCC admission.

The grant: a ServiceAccount of the model's own, set as ``serviceAccountName`` of exactly those pools'
pod templates (KServe keeps a template's own ServiceAccount, ``expectedSingleNodeMainServiceAccount``),
and a RoleBinding of OpenShift AI's ClusterRole to it, in the serving namespace. No other pod runs under
it, and no other SCC is granted.
"""

from __future__ import annotations

# OpenShift AI's SCC for LLMInferenceService workloads and the ClusterRole granting ``use`` on it (same name).
OPENSHIFT_AI_SCC = "openshift-ai-llminferenceservice-scc"
CAPABILITY = "IPC_LOCK"


def _adds(template: dict, capability: str) -> bool:
    for c in template.get("containers") or []:
        if capability in (((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or []):
            return True
    return False


def grant(model: dict, decisions: list) -> dict | None:
    """Scope OpenShift AI's SCC to the single-node pools of ``model`` that add IPC_LOCK (their templates
    get the ServiceAccount); None when no pool needs it. Multi-node pools are KServe's to grant."""
    pools = [
        w for w in (model["prefill"], model["main"]) if w and w["worker"] is None and _adds(w["template"], CAPABILITY)
    ]
    if not pools:
        return None
    sa = model["names"]["scc_service_account"]
    for w in pools:
        w["template"]["serviceAccountName"] = sa
    roles = [w["role"] for w in pools]
    decisions.append(
        {
            "model": model["name"],
            "what": "SCC",
            "choice": f"{OPENSHIFT_AI_SCC} for ServiceAccount {sa} ({', '.join(roles)})",
            "why": f"the {', '.join(roles)} pods add {CAPABILITY} for RDMA memory registration, which restricted-v2 "
            "refuses; OpenShift AI's KServe grants its SCC only to multi-node workloads",
        }
    )
    return {
        "service_account": sa,
        "role_binding": f"{sa}-scc",
        "cluster_role": OPENSHIFT_AI_SCC,
        "roles": roles,
    }
