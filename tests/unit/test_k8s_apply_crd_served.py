"""A CustomResourceDefinition and its objects in one apply (module_utils/k8s_apply.py): the API server marks a
CRD Established before its discovery lists the new resource, so the apply waits for both before it writes the
CRD's objects. Stop 43's CI caught the gap under load (tests/integration/test_k8s_modules.py
test_crd_and_its_objects_in_one_call); here a fake client's discovery lists the kind only some refreshes later."""

from __future__ import annotations

import time

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_apply, k8s_client

GROUP = "demo.example.com"


def crd():
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": "Widget", "plural": "widgets"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": True, "storage": True}, {"name": "v0", "served": False}],
        },
    }


WIDGET = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "ns"}}


class LaggingClient:
    """Its discovery lists Widget only after ``lag`` refreshes following the CRD's creation."""

    def __init__(self, lag):
        self.lag, self.refreshes, self.writes, self.crd_created = lag, 0, [], False
        client = self

        class Discovery:
            def refresh(self):
                if client.crd_created:
                    client.refreshes += 1

        self.discovery = Discovery()

    def resource(self, api_version, kind, refresh_after=None):
        del refresh_after
        if kind == "CustomResourceDefinition":
            return k8s_client.Resource("apiextensions.k8s.io", "v1", kind, "customresourcedefinitions", False, [], [])
        if kind == "Widget" and api_version == f"{GROUP}/v1" and self.crd_created and self.refreshes > self.lag:
            return k8s_client.Resource(GROUP, "v1", kind, "widgets", True, [], [])
        raise k8s_client.KindNotServed(f"the API server does not serve {kind} in {api_version}")

    def get(self, resource, name, namespace=None):
        if resource.kind == "CustomResourceDefinition" and self.crd_created:
            return {**crd(), "status": {"conditions": [{"type": "Established", "status": "True"}]}}
        return None

    def apply(self, resource, obj, field_manager, force, dry_run):
        if obj["kind"] == "Widget":
            assert self.refreshes > self.lag, "Widget written before discovery served it"
        self.crd_created = self.crd_created or obj["kind"] == "CustomResourceDefinition"
        self.writes.append(obj["kind"])
        return obj


PARAMS = {"field_manager": "t", "force_conflicts": True, "namespace": None, "wait_timeout": 3, "ownership": None}


def test_the_crds_objects_wait_for_discovery_not_only_for_established():
    client = LaggingClient(lag=3)
    results, _diffs, changed = k8s_apply.apply_all(client, [WIDGET, crd()], PARAMS)
    assert changed and client.writes == ["CustomResourceDefinition", "Widget"]
    assert [(r["kind"], r["action"]) for r in results] == [
        ("CustomResourceDefinition", "created"),
        ("Widget", "created"),
    ]


def test_discovery_that_never_lists_the_kind_times_out_naming_it():
    client = LaggingClient(lag=10**9)
    with pytest.raises(k8s_client.ClientError) as err:
        k8s_apply.apply_all(client, [WIDGET, crd()], {**PARAMS, "wait_timeout": 0.5})
    msg = str(err.value)
    assert f"discovery to list {GROUP}/v1 Widget" in msg and "Established" in msg
    assert f"{GROUP}/v0" not in msg  # a version the CRD does not serve is not waited for
    assert client.writes == ["CustomResourceDefinition"]


class SlowEstablished(LaggingClient):
    """Established only ``after`` seconds from the CRD's creation; discovery never lists the kind."""

    def __init__(self, after):
        super().__init__(lag=10**9)
        self.after, self.created_at = after, None

    def get(self, resource, name, namespace=None):
        if resource.kind == "CustomResourceDefinition" and self.crd_created:
            self.created_at = self.created_at or time.monotonic()
            if time.monotonic() - self.created_at < self.after:
                return crd()
        return super().get(resource, name, namespace)


def test_establishing_and_discovery_share_the_wait_timeout():
    """wait_timeout bounds the CRD's whole wait: Established after most of it leaves discovery the rest, not a
    second wait_timeout of its own."""
    client = SlowEstablished(after=1.5)
    start = time.monotonic()
    with pytest.raises(k8s_client.ClientError) as err:
        k8s_apply.apply_all(client, [WIDGET, crd()], {**PARAMS, "wait_timeout": 2})
    took = time.monotonic() - start
    assert "discovery to list" in str(err.value) and "after 2 s" in str(err.value)
    # a wait of its own would end 2 s after the 1.5 s to Established, 3.5 s at the soonest
    assert took < 3.2, f"waited {took:.1f} s for a wait_timeout of 2 s"
