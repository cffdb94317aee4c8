"""What a site created and what it only found (module_utils/ownership.py), and how the apply and removal engines
use it: an object that exists without the site's annotation stops an apply before its first write, a removal keeps
it. The engines run here against a fake client that records every write; tests/integration/test_ownership.py runs
the same against the real API server."""

from __future__ import annotations

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_apply, k8s_client, ownership

OWN = ownership.policy("example-chat", ["Namespace/team-a", "*/shared/*"])


def ns(name, annotations=None):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "annotations": annotations or {}}}


def cm(namespace, name, annotations=None):
    meta = {"name": name, "namespace": namespace, "annotations": annotations or {}}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"a": "b"}}


def test_classify_by_the_live_copys_annotation_not_by_labels():
    ours = {ownership.ANNOTATION: "example-chat"}
    assert ownership.classify(ns("llm-chat"), None, OWN) == ownership.NEW
    assert ownership.classify(ns("llm-chat"), ns("llm-chat", ours), OWN) == ownership.OURS
    # our labels on an object prove nothing: a taken-over namespace carried them
    labelled = {**ns("llm-chat"), "metadata": {"name": "llm-chat", "labels": {"app.kubernetes.io/managed-by": "x"}}}
    assert ownership.classify(ns("llm-chat"), labelled, OWN) == ownership.FOREIGN
    # another site's object is not ours either
    other = ns("llm-chat", {ownership.ANNOTATION: "example-rag"})
    assert ownership.classify(ns("llm-chat"), other, OWN) == ownership.FOREIGN


@pytest.mark.parametrize(
    ("obj", "adopted"),
    [
        (ns("team-a"), True),
        (ns("team-b"), False),
        (cm("shared", "anything"), True),
        (cm("team-a", "x"), False),  # adopting a namespace adopts the namespace, not what is in it
        (ns("shared"), False),  # */shared/* names objects in namespace shared, not the namespace itself
    ],
)
def test_adopt_entries(obj, adopted):
    assert ownership.adopted(obj, OWN["adopt"]) is adopted


@pytest.mark.parametrize("entry", ["Namespace/x", "ConfigMap/ns/name", "*/team-a/*", "Secret/*/*"])
def test_valid_adopt_entries(entry):
    assert ownership.check_entry(entry) is None


@pytest.mark.parametrize("entry", ["x", "a/b/c/d", "Namespace/", "/x", "has space/x"])
def test_invalid_adopt_entries_say_the_form(entry):
    assert "Kind/name or Kind/namespace/name" in ownership.check_entry(entry)


def test_stamp_leaves_the_rendered_object_alone():
    obj = ns("llm-chat")
    stamped = ownership.stamp(obj, OWN)
    assert stamped["metadata"]["annotations"] == {ownership.ANNOTATION: "example-chat"}
    assert obj["metadata"]["annotations"] == {}


class FakeClient:
    """Live objects by (kind, namespace, name); records writes and deletes."""

    KINDS = ("ConfigMap", "Secret", "ServiceAccount", "Deployment")

    class Discovery:
        def refresh(self):
            pass

        def served(self):
            return {"": ["v1"]}

        def kinds(self, api_version):
            return {k: [k.lower() + "s", True, ["delete", "get", "list"], []] for k in FakeClient.KINDS}

    def __init__(self, live):
        self.live = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in live}
        self.writes, self.deletes, self.orphaned = [], [], []
        self.discovery = self.Discovery()

    def request(self, method, path, query=None, accept=None):
        """A list of one kind in one namespace (what removal_guard asks)."""
        assert method == "GET", path
        parts = path.strip("/").split("/")  # api v1 namespaces <ns> <plural>
        namespace, plural = parts[3], parts[4]
        items = [o for (k, n, _name), o in self.live.items() if n == namespace and k.lower() + "s" == plural]
        return {"items": items, "metadata": {}}

    def resource(self, api_version, kind, refresh_after=None):
        del refresh_after
        namespaced = kind != "Namespace"
        return k8s_client.Resource("", "v1", kind, kind.lower() + "s", namespaced, [], [])

    def get(self, resource, name, namespace=None):
        return self.live.get((resource.kind, namespace, name))

    def apply(self, resource, obj, field_manager, force, dry_run):
        self.writes.append(obj)
        return obj

    def delete(self, resource, name, namespace=None, dry_run=False, propagation="Background"):
        self.deletes.append((resource.kind, namespace, name))
        if propagation == "Orphan":
            self.orphaned.append((resource.kind, namespace, name))
        return self.live.pop((resource.kind, namespace, name), None) is not None


def params(**kw):
    base = {
        "field_manager": "inference-blueprints",
        "force_conflicts": True,
        "namespace": None,
        "wait_timeout": 5,
        "wait_deleted": False,
        "ownership": OWN,
        "claim_objects": [],
    }
    return {**base, **kw}


def test_apply_refuses_a_namespace_it_did_not_create_before_any_write():
    client = FakeClient([ns("llm-chat", {"team": "x"})])
    with pytest.raises(k8s_client.ClientError) as err:
        k8s_apply.apply_all(client, [ns("llm-chat"), cm("llm-chat", "cfg")], params())
    msg = str(err.value)
    assert "Namespace/llm-chat (not created by inference.blueprints)" in msg
    assert 'adopt: ["Namespace/llm-chat"]' in msg and "Nothing was applied" in msg
    assert client.writes == []


def test_apply_refuses_when_a_later_phase_would_take_an_object_over():
    """The platform's operands are claimed with its operators: an operand the site may not take over stops the
    stage before the operators are written."""
    client = FakeClient([cm("gpu", "cluster-policy")])
    with pytest.raises(k8s_client.ClientError, match="ConfigMap/gpu/cluster-policy"):
        k8s_apply.apply_all(client, [ns("gpu")], params(claim_objects=[cm("gpu", "cluster-policy")]))
    assert client.writes == []


def test_apply_stamps_new_and_own_objects_and_leaves_adopted_ones_unstamped():
    client = FakeClient([ns("team-a", {"owner": "them"}), cm("llm", "mine", {ownership.ANNOTATION: "example-chat"})])
    k8s_apply.apply_all(client, [ns("team-a"), cm("llm", "mine"), cm("llm", "new")], params())
    by_name = {o["metadata"]["name"]: o["metadata"].get("annotations") or {} for o in client.writes}
    assert ownership.ANNOTATION not in by_name["team-a"]
    assert by_name["mine"][ownership.ANNOTATION] == "example-chat"
    assert by_name["new"][ownership.ANNOTATION] == "example-chat"


def test_removal_deletes_only_what_the_site_created():
    mine = {ownership.ANNOTATION: "example-chat"}
    client = FakeClient(
        [
            ns("team-a"),  # adopted
            ns("llm-chat", mine),
            ns("someone-else"),  # found, never adopted
            cm("llm-chat", "cfg", mine),
        ]
    )
    objs = [ns("team-a"), ns("llm-chat"), ns("someone-else"), cm("llm-chat", "cfg"), cm("llm-chat", "gone")]
    results, _diffs, changed = k8s_apply.delete_all(client, objs, params())
    actions = {(r["kind"], r["name"]): (r["action"], r.get("reason", "")) for r in results}
    assert actions[("Namespace", "team-a")][0] == "kept" and "adopted" in actions[("Namespace", "team-a")][1]
    assert actions[("Namespace", "someone-else")] == ("kept", "not created by inference.blueprints")
    assert actions[("Namespace", "llm-chat")][0] == "deleted"
    assert actions[("ConfigMap", "cfg")][0] == "deleted"
    assert actions[("ConfigMap", "gone")][0] == "absent"
    # the adopted namespace is given back: an apply of its name alone drops the fields only the site set
    assert client.writes == [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}]
    # no delete request at all for what the site keeps
    assert ("Namespace", None, "team-a") not in client.deletes
    assert ("Namespace", None, "someone-else") not in client.deletes
    assert {("ConfigMap", "llm-chat", "cfg"), ("Namespace", None, "llm-chat")} <= set(client.deletes)
    assert changed


def test_removal_deletes_the_csv_of_our_subscription_named_as_derived():
    csv = {"apiVersion": "v1", "kind": "ClusterServiceVersion", "metadata": {"name": "op.v1", "namespace": "op"}}
    client = FakeClient([csv, ns("op")])
    own = {**OWN, "derived": ["ClusterServiceVersion/op/op.v1"]}
    results, _d, _c = k8s_apply.delete_all(client, [csv], params(ownership=own))
    assert results[0]["action"] == "deleted"
    results, _d, _c = k8s_apply.delete_all(FakeClient([csv, ns("op")]), [csv], params())
    assert results[0]["action"] == "kept"


def test_without_a_policy_every_object_is_applied_and_removed():
    client = FakeClient([ns("x")])
    k8s_apply.apply_all(client, [ns("x")], params(ownership={}))
    assert client.writes and ownership.ANNOTATION not in (client.writes[0]["metadata"].get("annotations") or {})
    results, _d, _c = k8s_apply.delete_all(client, [ns("x")], params(ownership={}))
    assert results[0]["action"] == "deleted"
