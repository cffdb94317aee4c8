"""Every single-node pod that adds IPC_LOCK runs under a ServiceAccount bound to OpenShift AI's SCC, and no
other pod does (intent/scc_grant.py; admission itself: tests/controlplane/test_scc_admission.py).

No cluster: the example sites' intents, rendered with the roles' templates.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.plugin_utils import render

INVENTORIES = Path(__file__).resolve().parents[3] / "inventories"
EXAMPLES = sorted(p.name for p in INVENTORIES.iterdir() if (p / "hosts.yml").exists())
SCC_ROLE = "openshift-ai-llminferenceservice-scc"


def _adds_ipc_lock(pod: dict) -> bool:
    return any(
        "IPC_LOCK" in (((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or [])
        for c in pod["containers"]
    )


@pytest.mark.parametrize("site", EXAMPLES)
def test_single_node_ipc_lock_pools_and_only_they_get_the_scc_grant(site):
    for intent in cli.site_intents(str(INVENTORIES / site), None).values():
        objects = render.render_components(intent["stages"]["serving"], intent)
        ns = intent["serving"]["namespace"]
        bound = {
            s["name"]
            for o in objects
            if o["kind"] == "RoleBinding"
            and o["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": SCC_ROLE}
            for s in o["subjects"]
            if s["kind"] == "ServiceAccount" and s["namespace"] == ns
        }
        accounts = {o["metadata"]["name"] for o in objects if o["kind"] == "ServiceAccount"}
        used = set()
        for svc in (o for o in objects if o["kind"] == "LLMInferenceService"):
            for pool in (p for p in (svc["spec"], svc["spec"].get("prefill")) if p):
                pod = pool["template"]
                sa = pod.get("serviceAccountName")
                if pool.get("worker") is None and _adds_ipc_lock(pod):
                    assert sa in bound and sa in accounts, f"{svc['metadata']['name']}: IPC_LOCK without the SCC grant"
                    used.add(sa)
                else:
                    assert sa not in bound, f"{svc['metadata']['name']}: a grant for a pod that does not need it"
        assert bound == used


def test_chat_prefill_and_grid_27b_pools_are_granted():
    chat = next(iter(cli.site_intents(str(INVENTORIES / "example-chat"), None).values()))
    grants = {m["name"]: m["scc_grant"] for m in chat["serving"]["models"] if m["scc_grant"]}
    assert any("prefill" in g["roles"] for g in grants.values())
    grid = next(iter(cli.site_intents(str(INVENTORIES / "example-ai-grid"), None).values()))
    assert [m["name"] for m in grid["serving"]["models"] if m["scc_grant"]], "the grid's single-node RDMA pools"
