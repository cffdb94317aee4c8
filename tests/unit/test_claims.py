"""Platform objects several sites share (module_utils/claims.py) through the apply and removal engines, against a
fake client whose applies replace the live object; tests/integration/test_multisite.py runs two sites on the real
API server."""

from __future__ import annotations

import json

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import claims, k8s_apply, k8s_client, ownership
from ansible_collections.inference.blueprints.plugins.module_utils.intent import platform

IMG_A = "registry.example/a@sha256:" + "a" * 64
IMG_B = "registry.example/b@sha256:" + "b" * 64


def pins(*images):
    return {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "PinnedImageSet",
        "metadata": {"name": "inference-blueprints-worker", "labels": {"machineconfiguration.openshift.io/role": "w"}},
        "spec": {"pinnedImages": [{"name": i} for i in images]},
    }


def policy_ns(channel="stable"):
    return {
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "Subscription",
        "metadata": {"name": "gpu-operator-certified", "namespace": "nvidia-gpu-operator"},
        "spec": {"name": "gpu-operator-certified", "channel": channel},
    }


def own(site, *objs):
    return {
        **ownership.policy(site),
        "shared": [platform.sharing(o, f"llm-{site}") for o in objs],
    }


class Client:
    """Live objects by (kind, namespace, name); an apply replaces the live object."""

    class Discovery:
        def refresh(self):
            pass

        def served(self):
            return {"": ["v1"]}

        def kinds(self, api_version):
            return {}  # the removal guard's census of a namespace finds nothing else in it

    def __init__(self, live=()):
        self.live = {self._key(o): o for o in live}
        # the operator's namespace (a removal finds objects in a missing namespace absent)
        self.namespaces = {("Namespace", None, "nvidia-gpu-operator")}
        self.discovery = self.Discovery()
        self.writes = []

    @staticmethod
    def _key(o):
        return (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])

    def resource(self, api_version, kind, refresh_after=None):
        del refresh_after
        return k8s_client.Resource(
            "", "v1", kind, kind.lower() + "s", kind not in ("PinnedImageSet", "ClusterPolicy", "Namespace"), [], []
        )

    def get(self, resource, name, namespace=None):
        if (resource.kind, namespace, name) in self.namespaces:
            return {"metadata": {"name": name}}
        return self.live.get((resource.kind, namespace, name))

    def apply(self, resource, obj, field_manager, force, dry_run):
        self.writes.append(obj)
        if not dry_run:
            self.live[self._key(obj)] = json.loads(json.dumps(obj))
        return obj

    def request(self, method, path, query=None, accept=None):
        return {"items": [], "metadata": {}}

    def delete(self, resource, name, namespace=None, dry_run=False, propagation="Background"):
        return self.live.pop((resource.kind, namespace, name), None) is not None


def params(policy, state_objs=()):
    return {
        "field_manager": "inference-blueprints",
        "force_conflicts": True,
        "namespace": None,
        "wait_timeout": 5,
        "wait_deleted": False,
        "ownership": policy,
        "claim_objects": list(state_objs),
    }


def live_pins(client):
    return [
        p["name"] for p in client.live[("PinnedImageSet", None, "inference-blueprints-worker")]["spec"]["pinnedImages"]
    ]


def test_the_sharing_rule_is_the_platform_intents():
    assert platform.sharing(pins(IMG_A), "llm-a")["merge"] == {"spec.pinnedImages": "union"}
    assert platform.sharing(policy_ns(), "llm-a") == {
        "ref": "Subscription/nvidia-gpu-operator/gpu-operator-certified",
        "merge": {},
    }
    staging = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "stage", "namespace": "llm-a"}}
    assert platform.sharing(staging, "llm-a") is None
    assert platform.sharing({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "llm-a"}}, "llm-a") is None


def test_two_sites_claim_merge_and_leave_one_after_the_other():
    client = Client()
    a, b = own("site-a", pins(IMG_A), policy_ns()), own("site-b", pins(IMG_B), policy_ns())
    k8s_apply.apply_all(client, [pins(IMG_A), policy_ns()], params(a))
    # the second site needs no adopt: the objects carry the collection's annotations
    k8s_apply.apply_all(client, [pins(IMG_B), policy_ns()], params(b))
    assert live_pins(client) == [IMG_A, IMG_B]
    live = client.live[("PinnedImageSet", None, "inference-blueprints-worker")]
    notes = live["metadata"]["annotations"]
    assert notes[ownership.ANNOTATION] == "site-a"
    assert json.loads(notes[claims.key("site-a")]) == {
        "site": "site-a",
        "merge": {"spec.pinnedImages": [{"name": IMG_A}]},
    }
    # the first site again: the union stays, nothing is written
    client.writes.clear()
    results, _d, changed = k8s_apply.apply_all(client, [pins(IMG_A), policy_ns()], params(a))
    assert live_pins(client) == [IMG_A, IMG_B]
    assert {r["action"] for r in results} == {"unchanged"} and not changed

    # site a leaves: its claim goes, its pin goes, the objects stay for b
    results, _d, changed = k8s_apply.delete_all(client, [pins(IMG_A), policy_ns()], params(a))
    assert changed and {r["action"] for r in results} == {"released"}, results
    assert live_pins(client) == [IMG_B]
    assert (
        claims.key("site-a")
        not in client.live[("PinnedImageSet", None, "inference-blueprints-worker")]["metadata"]["annotations"]
    )
    assert ("Subscription", "nvidia-gpu-operator", "gpu-operator-certified") in client.live
    # b leaves last: what the sites created is deleted
    results, _d, _c = k8s_apply.delete_all(client, [pins(IMG_B), policy_ns()], params(b))
    assert {r["action"] for r in results} == {"deleted"}, results
    assert client.live == {}


def test_a_removal_keeps_a_shared_object_the_site_does_not_claim_and_a_users_object():
    user = {**policy_ns(), "metadata": {**policy_ns()["metadata"], "annotations": {"owner": "them"}}}
    client = Client([user])
    a = own("site-a", policy_ns())
    with pytest.raises(k8s_client.ClientError) as err:
        k8s_apply.apply_all(client, [policy_ns()], params(a))
    assert "not created by inference.blueprints" in str(err.value)
    results, _d, changed = k8s_apply.delete_all(client, [policy_ns()], params(a))
    assert not changed and results[0]["action"] == "kept"
    theirs = Client([ownership.stamp(policy_ns(), ownership.policy("site-b"))])
    results, _d, changed = k8s_apply.delete_all(theirs, [policy_ns()], params(a))
    assert not changed and results[0]["action"] == "kept" and "site-b" in results[0]["reason"]


def test_conflicting_settings_stop_before_any_write_naming_both_sites_and_the_field():
    client = Client()
    a = own("site-a", policy_ns("stable"))
    k8s_apply.apply_all(client, [policy_ns("stable")], params(a))
    client.writes.clear()
    b = own("site-b", pins(IMG_B), policy_ns("v25.3"))
    with pytest.raises(k8s_client.ClientError) as err:
        # the operand, checked before the operators are written
        k8s_apply.apply_all(client, [pins(IMG_B)], params(b, [policy_ns("v25.3")]))
    msg = str(err.value)
    assert "Subscription/nvidia-gpu-operator/gpu-operator-certified spec.channel" in msg, msg
    assert "site 'site-b' sets \"v25.3\", site(s) 'site-a' set \"stable\"" in msg, msg
    assert "nothing was applied" in msg and client.writes == []
    # alone on the cluster a site may change its own settings
    k8s_apply.apply_all(client, [policy_ns("v25.3")], params(a))
    assert client.live[("Subscription", "nvidia-gpu-operator", "gpu-operator-certified")]["spec"]["channel"] == "v25.3"


def test_an_object_of_an_earlier_release_is_claimed_by_its_creator():
    old = ownership.stamp(pins(IMG_A), ownership.policy("site-a"))
    client = Client([old])
    k8s_apply.apply_all(client, [pins(IMG_B)], params(own("site-b", pins(IMG_B))))
    assert live_pins(client) == [IMG_A, IMG_B]
    assert sorted(claims.claimants(client.live[("PinnedImageSet", None, "inference-blueprints-worker")])) == [
        "site-a",
        "site-b",
    ]


def test_rdma_on_the_gpu_policy_is_on_while_any_site_needs_it():
    def gpu(rdma):
        return {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": "gpu-cluster-policy"},
            "spec": {"driver": {"rdma": {"enabled": rdma, "useHostMofed": False}}},
        }

    client = Client()
    a, b = own("site-a", gpu(True)), own("site-b", gpu(False))
    k8s_apply.apply_all(client, [gpu(True)], params(a))
    k8s_apply.apply_all(client, [gpu(False)], params(b))
    live = client.live[("ClusterPolicy", None, "gpu-cluster-policy")]
    assert live["spec"]["driver"]["rdma"]["enabled"] is True
    k8s_apply.delete_all(client, [gpu(True)], params(a))
    assert client.live[("ClusterPolicy", None, "gpu-cluster-policy")]["spec"]["driver"]["rdma"]["enabled"] is False


def test_long_site_names_make_valid_annotation_keys():
    name = "a" * 63
    k = claims.key(name)
    assert len(k.split("/", 1)[1]) <= 63 and k != claims.key("a" * 62 + "b")


def test_a_field_another_site_set_and_this_one_leaves_unset_is_a_conflict():
    client = Client()
    theirs = policy_ns()
    theirs["spec"]["config"] = {"env": [{"name": "X", "value": "1"}]}
    k8s_apply.apply_all(client, [theirs], params(own("site-a", theirs)))
    live = client.live[("Subscription", "nvidia-gpu-operator", "gpu-operator-certified")]
    fields = {"f:spec": {"f:name": {}, "f:channel": {}, "f:config": {"f:env": {}}}, "f:metadata": {"f:labels": {}}}
    live["metadata"]["managedFields"] = [
        {"manager": "inference-blueprints", "operation": "Apply", "apiVersion": live["apiVersion"], "fieldsV1": fields}
    ]
    with pytest.raises(k8s_client.ClientError) as err:
        k8s_apply.apply_all(client, [policy_ns()], params(own("site-b", policy_ns())))
    assert "spec.config: site 'site-b' leaves it unset, site(s) 'site-a' set" in str(err.value), str(err.value)


class Cluster(Client):
    """Every kind the two chat sites' platform renders, namespaced as on OpenShift; the cluster's own namespaces."""

    NAMESPACED = frozenset(
        {"Subscription", "OperatorGroup", "NodeFeatureDiscovery", "NodeFeatureRule", "KedaController", "Gateway",
         "ConfigMap", "IPPool", "ClusterServiceVersion", "Job", "PersistentVolumeClaim"}
    )  # fmt: skip

    def __init__(self):
        super().__init__()
        self.namespaces = {("Namespace", None, n) for n in ("openshift-ingress", "openshift-monitoring")}

    def resource(self, api_version, kind, refresh_after=None):
        del refresh_after
        return k8s_client.Resource("", "v1", kind, kind.lower() + "s", kind in self.NAMESPACED, [], [])


def test_two_example_sites_share_the_platform_they_render(tmp_path):
    """The real templates: example-chat and a copy with another site, namespace, ModelCar and load (no RDMA)."""
    from ansible_collections.inference.blueprints.plugins.module_utils import cli
    from ansible_collections.inference.blueprints.plugins.plugin_utils import platform as stage

    from tests.integration.test_multisite import OTHER_IMAGE, _second_site
    from tests.serving_helpers import INVENTORIES

    (a,) = cli.site_intents(str(INVENTORIES / "example-chat"), None).values()
    (b,) = cli.site_intents(str(_second_site(tmp_path)), None).values()
    ra, rb = stage.render_phase(a, "all"), stage.render_phase(b, "all")
    client = Cluster()

    def actions(results):
        return sorted({r["action"] for r in results})

    k8s_apply.apply_all(client, ra["objects"], params(ra["ownership"]))
    results, _d, _c = k8s_apply.apply_all(client, rb["objects"], params(rb["ownership"]))
    assert actions(results) == ["configured"]  # every object of b's platform was a's: claimed, none refused
    pinned = live_pins(client)
    assert len(pinned) == 2 and OTHER_IMAGE in pinned
    results, _d, changed = k8s_apply.apply_all(client, ra["objects"], params(ra["ownership"]))
    assert not changed and live_pins(client) == pinned

    gone_a = stage.render_phase(a, "all", state="absent")
    results, _d, _c = k8s_apply.delete_all(client, gone_a["objects"], params(gone_a["ownership"]))
    deleted = sorted(f"{r['kind']}/{r['name']}" for r in results if r["action"] == "deleted")
    # only what example-chat alone needed (the network operator for its RDMA) is deleted
    assert deleted == [
        "IPPool/rdma-pool",
        "MacvlanNetwork/rdma-net",
        "Namespace/nvidia-network-operator",
        "NicClusterPolicy/nic-cluster-policy",
        "OperatorGroup/nvidia-network-operator",
        "Subscription/nvidia-network-operator",
    ], results
    assert live_pins(client) == [OTHER_IMAGE]
    assert client.live[("ClusterPolicy", None, "gpu-cluster-policy")]["spec"]["driver"]["rdma"]["enabled"] is False
    results, _d, changed = k8s_apply.apply_all(client, rb["objects"], params(rb["ownership"]))
    assert not changed

    gone_b = stage.render_phase(b, "all", state="absent")
    k8s_apply.delete_all(client, gone_b["objects"], params(gone_b["ownership"]))
    assert client.live == {}
