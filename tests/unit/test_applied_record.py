"""A converge prunes what the stage applied before and no longer renders (module_utils/applied_record.py), only
what carries the site's created-by annotation; check mode lists it and deletes nothing. Against a fake client;
tests/integration/test_teardown_guard.py runs a converge, a change of the inventory and a second converge."""

from __future__ import annotations

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import (
    applied_record,
    k8s_apply,
    k8s_client,
    ownership,
)

from tests.unit.test_ownership_rules import OWN, FakeClient, cm, ns, params

OURS = {ownership.ANNOTATION: "example-chat"}
SPEC = {"stage": "serving", "namespace": "llm"}


def recorded(objects):
    return applied_record.record_object(OWN, SPEC, objects)


def test_the_record_name_is_a_dns_label_per_site_and_stage():
    assert applied_record.name_of("example-chat", "serving") == "inference-blueprints-applied-example-chat-serving"
    long = applied_record.name_of("a" * 80, "serving")
    assert len(long) <= 63 and long != applied_record.name_of("a" * 81, "serving")


def test_a_second_apply_prunes_only_the_sites_dropped_objects_and_says_so():
    before = [ns("llm"), cm("llm", "keep"), cm("llm", "dropped"), cm("llm", "users-now")]
    live = [ns("llm", OURS), cm("llm", "keep", OURS), cm("llm", "dropped", OURS), cm("llm", "users-now")]
    client = FakeClient([*live, recorded(before)])
    previous = applied_record.read(client, OWN, SPEC)
    keep = [ns("llm"), cm("llm", "keep")]
    results, _d, changed = k8s_apply.prune(client, keep, params(record=SPEC), previous, (True, False))
    assert {(r["name"], r["action"]) for r in results} == {("dropped", "pruned"), ("users-now", "kept")}
    assert changed and client.writes == []  # check mode: a dry run, the record not rewritten
    results, _d, _c = k8s_apply.prune(client, keep, params(record=SPEC), previous)
    assert ("ConfigMap", "llm", "dropped") in client.deletes
    assert ("ConfigMap", "llm", "users-now") not in client.deletes
    assert [w["metadata"]["name"] for w in client.writes] == [applied_record.name_of("example-chat", "serving")]


def test_an_unchanged_set_rewrites_nothing():
    objs = [ns("llm"), cm("llm", "keep")]
    client = FakeClient([ns("llm", OURS), cm("llm", "keep", OURS), recorded(objs)])
    previous = applied_record.read(client, OWN, SPEC)
    results, _d, changed = k8s_apply.prune(client, objs, params(record=SPEC), previous)
    assert (results, changed, client.writes, client.deletes) == ([], False, [], [])


def test_a_configmap_of_the_records_name_that_is_not_the_sites_stops_the_apply_before_any_write():
    name = applied_record.name_of("example-chat", "serving")
    theirs = {**recorded([cm("llm", "dropped")]), "metadata": {"name": name, "namespace": "llm", "annotations": {}}}
    client = FakeClient([cm("llm", "dropped", OURS), theirs])
    with pytest.raises(k8s_client.ClientError, match=f"ConfigMap llm/{name} exists and was not created by site"):
        applied_record.read(client, OWN, SPEC)
