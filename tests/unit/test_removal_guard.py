"""A removal never takes what is not the site's with it (module_utils/removal_guard.py), against a fake client:
a Namespace the site created that holds a user's object is kept (the site's objects in it deleted), one that holds
only the site's and what the control plane makes in every namespace is deleted, and an object a user hung on one of
ours by an ownerReference stays (ours deleted with propagationPolicy=Orphan). tests/integration/test_teardown_guard.py
runs the same against the real API server."""

from __future__ import annotations

from ansible_collections.inference.blueprints.plugins.module_utils import k8s_apply, ownership, removal_guard

from tests.unit.test_ownership_rules import OWN, FakeClient, cm, ns, params

OURS = {ownership.ANNOTATION: "example-chat"}


def uid(obj, value):
    obj["metadata"]["uid"] = value
    return obj


def owned_by(obj, owner, controller):
    ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"]}
    obj["metadata"]["ownerReferences"] = [{**ref, "uid": owner["metadata"]["uid"], "controller": controller}]
    return obj


def sa(namespace, name):
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}}


def test_a_namespace_holding_a_users_configmap_is_kept_and_named():
    client = FakeClient([ns("llm", OURS), cm("llm", "cfg", OURS), cm("llm", "theirs"), cm("llm", "kube-root-ca.crt")])
    results, _diffs, _changed = k8s_apply.delete_all(client, [ns("llm"), cm("llm", "cfg")], params())
    by = {(r["kind"], r["name"]): r for r in results}
    assert by[("ConfigMap", "cfg")]["action"] == "deleted"
    assert by[("Namespace", "llm")]["action"] == "kept"
    assert "ConfigMap/llm/theirs" in by[("Namespace", "llm")]["reason"]
    assert "kube-root-ca.crt" not in by[("Namespace", "llm")]["reason"]
    assert ("Namespace", None, "llm") not in client.deletes
    lines = removal_guard.kept_lines(results)
    assert len(lines) == 1 and lines[0].startswith("kept Namespace/llm: the site created it, but it holds 1 object")


def test_a_namespace_with_only_the_sites_and_the_control_planes_objects_is_deleted():
    live = [ns("llm", OURS), cm("llm", "cfg", OURS), cm("llm", "kube-root-ca.crt"), sa("llm", "default")]
    client = FakeClient(live)
    results, _diffs, _changed = k8s_apply.delete_all(client, [ns("llm"), cm("llm", "cfg")], params())
    assert {r["action"] for r in results} == {"deleted"}
    assert ("Namespace", None, "llm") in client.deletes
    assert removal_guard.kept_lines(results) == []


def test_what_a_controller_made_from_ours_goes_with_it_but_a_users_dependent_stays():
    deploy = uid({**cm("llm", "app", OURS), "kind": "Deployment"}, "u-app")
    made = owned_by(uid(cm("llm", "made"), "u-made"), deploy, controller=True)
    theirs = owned_by(uid(cm("llm", "theirs"), "u-theirs"), deploy, controller=False)
    client = FakeClient([ns("llm", OURS), deploy, made, theirs])
    results, _diffs, _changed = k8s_apply.delete_all(
        client, [ns("llm"), {**deploy, "metadata": {**deploy["metadata"]}}], params()
    )
    by = {(r["kind"], r["name"]): r for r in results}
    assert by[("Namespace", "llm")]["action"] == "kept", by
    assert by[("Deployment", "app")]["kept_dependents"] == ["ConfigMap/llm/theirs"]
    assert ("Deployment", "llm", "app") in client.orphaned
    assert ("ConfigMap", "llm", "made") in client.deletes  # made by the controller: deleted on its own
    assert ("ConfigMap", "llm", "theirs") not in client.deletes


def test_a_token_secret_of_our_service_account_is_the_control_planes():
    account = {**sa("llm", "runner"), "metadata": {"name": "runner", "namespace": "llm", "annotations": OURS}}
    token = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/service-account-token",
        "metadata": {"name": "runner-token", "namespace": "llm",
                     "annotations": {"kubernetes.io/service-account.name": "runner"}},
    }  # fmt: skip
    census = removal_guard.Census([account, token], OWN)
    assert census.automatic(token) and not census.foreign(token)
    user_secret = {**token, "type": "Opaque", "metadata": {"name": "mine", "namespace": "llm"}}
    assert census.foreign(user_secret)


def test_what_the_garbage_collector_is_removing_anyway_keeps_no_namespace():
    """A DaemonSet whose owner (the site's ClusterPolicy, deleted by the operands' removal) is gone, and an object
    being deleted, go whatever the removal does: they do not keep the namespace."""
    orphan = {**cm("gpu", "driver"), "kind": "DaemonSet"}
    orphan["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "policy", "uid": "u-1"}]
    leaving = cm("gpu", "leaving")
    leaving["metadata"]["deletionTimestamp"] = "2026-11-28T17:00:00Z"
    census = removal_guard.Census([orphan, leaving], OWN, lookup=lambda ref, ns: removal_guard.GONE)
    assert census.foreign_in("gpu") == []
    unreadable = removal_guard.Census([orphan], OWN, lookup=lambda ref, ns: None)
    assert unreadable.foreign_in("gpu") == [orphan]  # an owner that cannot be read proves nothing


def _monitoring(kind, name, api_version="v1"):
    labels = {"app.kubernetes.io/part-of": "llminferenceservice", "app.kubernetes.io/component": "llm-monitoring"}
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": "llm", "labels": labels}}


def _llmisvc(name, annotations=None):
    meta = {"name": name, "namespace": "llm", **({"annotations": annotations} if annotations else {})}
    return {"apiVersion": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceService", "metadata": meta}


def test_kserves_namespace_monitoring_goes_with_the_sites_services_but_stays_for_anothers():
    """OpenShift AI's KServe makes a metrics reader ServiceAccount, its token and the PodMonitors/ServiceMonitors once
    per namespace for all its LLMInferenceServices (no ownerReference) and deletes them with the last one: with only
    the site's services there they are no reason to keep the namespace; with a user's service there they are."""
    monitor = _monitoring("PodMonitor", "kserve-llm-isvc-vllm-engine", "monitoring.coreos.com/v1")
    account = _monitoring("ServiceAccount", "kserve-metrics-reader-sa")
    token = {
        **_monitoring("Secret", "kserve-metrics-reader-sa-secret"),
        "type": "kubernetes.io/service-account-token",
    }
    token["metadata"]["annotations"] = {"kubernetes.io/service-account.name": "kserve-metrics-reader-sa"}
    ours = [_llmisvc("qwen", OURS), monitor, account, token]
    census = removal_guard.Census(ours, OWN)
    assert not [o["metadata"]["name"] for o in ours if census.foreign(o)]
    assert "KServe" in census.shared(monitor)
    theirs = removal_guard.Census([*ours, _llmisvc("users-model")], OWN)
    assert {o["metadata"]["name"] for o in theirs.objects if theirs.foreign(o)} == {
        "users-model",
        "kserve-llm-isvc-vllm-engine",
        "kserve-metrics-reader-sa",
        "kserve-metrics-reader-sa-secret",
    }
    # a user's object that only looks alike (other labels) is still the user's
    lookalike = {**cm("llm", "metrics"), "metadata": {"name": "metrics", "namespace": "llm", "labels": {"a": "b"}}}
    assert removal_guard.Census([*ours, lookalike], OWN).foreign(lookalike)
