"""OpenShift's SCC admission on the local control plane (scc_admission.py, issue 32 items 2 and 4).

The chat example's prefill pool is a single-node Deployment whose engine adds IPC_LOCK. Rendered as
before (the namespace's default ServiceAccount, no grant), OpenShift's admission refuses its pods with
OpenShift's message; rendered now (intent/scc_grant.py: its own ServiceAccount bound to OpenShift AI's
SCC) they are admitted under that SCC, with the namespace's UID, MCS level and restricted defaults
injected. A plain pod gets restricted-v2. The pods come from the controller-manager, as on OpenShift.
"""

from __future__ import annotations

import copy
import re
import time
from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.plugin_utils import render
from kubernetes.client.rest import ApiException
from simulator.kube import request

from controlplane.cluster import DEFAULT_PROFILE, ControlPlane
from controlplane.scc_admission import SCC_ANNOTATION

INVENTORY = Path(__file__).resolve().parents[2] / "inventories" / "example-chat"
NS = "scc-admission"
OPENSHIFT_AI_SCC = "openshift-ai-llminferenceservice-scc"


@pytest.fixture(scope="module")
def plane():
    """A plane of its own with the SCC admission on (KCP_SCC is off by default until the serving tests run
    with it), without KServe (the pods here are Deployments of their own)."""
    cluster = ControlPlane(DEFAULT_PROFILE, kserve=False, scc=True).start()
    try:
        cluster._call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def chat():
    """The chat example's serving objects and its prefill pool's pod template, as rendered now."""
    intent = next(iter(cli.site_intents(str(INVENTORY), None).values()))
    objects = render.render_components(intent["stages"]["serving"], intent)
    model = next(m for m in intent["serving"]["models"] if m["prefill"])
    return objects, model


def _deployment(name: str, template_spec: dict) -> dict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": template_spec},
        },
    }


def _engine_pod(template: dict) -> dict:
    """The pool's template with an image (KServe's preset gives it one) and without the model's volumes."""
    spec = copy.deepcopy(template)
    spec["containers"][0].setdefault("image", "registry.k8s.io/pause:3.10")
    return spec


def _wait(what: str, probe, timeout: float = 60):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = probe()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"no {what} after {timeout:.0f}s")


def _pods(cp, app: str) -> list[dict]:
    return request(cp.api_client, "GET", f"/api/v1/namespaces/{NS}/pods", query=[("labelSelector", f"app={app}")])[
        "items"
    ]


def _replica_failure(cp, app: str) -> str | None:
    sets = request(cp.api_client, "GET", f"/apis/apps/v1/namespaces/{NS}/replicasets",
                   query=[("labelSelector", f"app={app}")])["items"]  # fmt: skip
    for rs in sets:
        for c in (rs.get("status") or {}).get("conditions") or []:
            if c["type"] == "ReplicaFailure":
                return c["message"]
    return None


def test_namespaces_get_openshift_uid_and_mcs_annotations(plane):
    ns = plane._call("GET", f"/api/v1/namespaces/{NS}")["metadata"]["annotations"]
    assert re.fullmatch(r"1\d{9}/10000", ns["openshift.io/sa.scc.uid-range"])
    assert ns["openshift.io/sa.scc.supplemental-groups"] == ns["openshift.io/sa.scc.uid-range"]
    assert re.fullmatch(r"s0:c\d+,c\d+", ns["openshift.io/sa.scc.mcs"])


def test_old_render_single_node_ipc_lock_pod_is_refused(plane, chat):
    _, model = chat
    old = _engine_pod(model["prefill"]["template"])
    old.pop("serviceAccountName", None)  # the render before the grant: the namespace's default ServiceAccount
    assert "IPC_LOCK" in old["containers"][0]["securityContext"]["capabilities"]["add"]
    plane._call("POST", f"/apis/apps/v1/namespaces/{NS}/deployments", _deployment("old-prefill", old))
    message = _wait("refusal", lambda: _replica_failure(plane, "old-prefill"))
    assert "unable to validate against any security context constraint" in message
    assert 'capabilities.add: Invalid value: "IPC_LOCK": capability may not be added' in message
    assert f'provider "{OPENSHIFT_AI_SCC}": Forbidden: not usable by user or serviceaccount' in message
    assert _pods(plane, "old-prefill") == []


def test_rendered_grant_admits_the_pool_under_openshift_ai_scc(plane, chat):
    objects, model = chat
    sa = model["scc_grant"]["service_account"]
    for obj in objects:
        if obj["kind"] in ("ServiceAccount", "RoleBinding") and obj["metadata"]["name"].startswith(sa):
            obj = copy.deepcopy(obj)
            obj["metadata"]["namespace"] = NS
            for s in obj.get("subjects") or []:
                s["namespace"] = NS
            group = "/api/v1" if obj["kind"] == "ServiceAccount" else "/apis/rbac.authorization.k8s.io/v1"
            plane._call("POST", f"{group}/namespaces/{NS}/{obj['kind'].lower()}s", obj)
    spec = _engine_pod(model["prefill"]["template"])
    assert spec["serviceAccountName"] == sa
    plane._call("POST", f"/apis/apps/v1/namespaces/{NS}/deployments", _deployment("new-prefill", spec))
    pod = _wait("pod", lambda: _pods(plane, "new-prefill"))[0]
    ns = plane._call("GET", f"/api/v1/namespaces/{NS}")["metadata"]["annotations"]
    assert pod["metadata"]["annotations"][SCC_ANNOTATION] == OPENSHIFT_AI_SCC
    ctx = pod["spec"]["containers"][0]["securityContext"]
    assert ctx["runAsUser"] == int(ns["openshift.io/sa.scc.uid-range"].split("/")[0])
    assert ctx["capabilities"] == {"add": ["IPC_LOCK"], "drop": ["ALL"]}
    assert ctx["allowPrivilegeEscalation"] is False
    assert pod["spec"]["securityContext"]["seLinuxOptions"]["level"] == ns["openshift.io/sa.scc.mcs"]
    assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_plain_pod_gets_restricted_v2(plane):
    spec = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
    plane._call("POST", f"/apis/apps/v1/namespaces/{NS}/deployments", _deployment("plain", spec))
    pod = _wait("pod", lambda: _pods(plane, "plain"))[0]
    assert pod["metadata"]["annotations"][SCC_ANNOTATION] == "restricted-v2"
    assert pod["spec"]["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_use_goes_through_rbac(plane):
    """A user whose RBAC holds no use on any SCC but restricted-v2 (system:authenticated's) is refused a
    privileged pod; the admin (system:masters, every verb) is not."""
    spec = {
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "securityContext": {"privileged": True}}]
    }
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "priv", "namespace": NS}, "spec": spec}
    kubeconfig = plane.mint_sa_kubeconfig(NS, "creator")
    plane._call("POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "creator-edit", "namespace": NS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "creator", "namespace": NS}],
    })  # fmt: skip
    client = plane.new_api_client(kubeconfig)
    with pytest.raises(ApiException) as refused:
        request(client, "POST", f"/api/v1/namespaces/{NS}/pods", query=[("dryRun", "All")], body=body)
    assert "Privileged containers are not allowed" in refused.value.body
    pod = request(plane.api_client, "POST", f"/api/v1/namespaces/{NS}/pods", query=[("dryRun", "All")], body=body)
    assert pod["metadata"]["annotations"][SCC_ANNOTATION] == "privileged"
