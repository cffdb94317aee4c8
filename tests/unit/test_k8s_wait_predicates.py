"""The readiness predicates of k8s_wait, on objects shaped like the real ones."""

from __future__ import annotations

from ansible_collections.inference.blueprints.plugins.module_utils.k8s_wait import describe_test, evaluate


def test_condition_true_is_ready_and_reports_reason():
    obj = {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "AllGood"}]}}
    assert evaluate({"kind": "X", "condition": "Ready", "status": "True"}, obj) == (True, "Ready=True reason=AllGood")


def test_condition_false_reports_message():
    obj = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Pending", "message": "no GPU"}]}}
    ready, seen = evaluate({"kind": "X", "condition": "Ready", "status": "True"}, obj)
    assert not ready
    assert seen == "Ready=False reason=Pending message='no GPU'"


def test_missing_condition_lists_the_ones_present():
    obj = {"status": {"conditions": [{"type": "Progressing", "status": "True"}]}}
    ready, seen = evaluate({"kind": "X", "condition": "Ready", "status": "True"}, obj)
    assert not ready and seen == "no Ready condition (conditions: Progressing)"


def test_field_value_and_any_of_values():
    obj = {"status": {"state": "notReady"}}
    assert evaluate({"kind": "ClusterPolicy", "field": "status.state", "value": "ready"}, obj) == (
        False,
        "status.state='notReady'",
    )
    assert evaluate({"kind": "X", "field": "status.state", "value": ["ready", "notReady"]}, obj)[0]


def test_absent_object():
    assert evaluate({"kind": "X", "field": "status.state", "value": "ready"}, None) == (
        False,
        "the object does not exist",
    )


def test_deployment_needs_current_generation_and_available_replicas():
    spec = {"kind": "Deployment"}
    stale = {
        "metadata": {"generation": 2},
        "spec": {"replicas": 2},
        "status": {"observedGeneration": 1, "availableReplicas": 2},
    }
    assert evaluate(spec, stale)[0] is False
    ready = {
        "metadata": {"generation": 2},
        "spec": {"replicas": 2},
        "status": {"observedGeneration": 2, "availableReplicas": 2},
    }
    assert evaluate(spec, ready) == (True, "2/2 replicas ready")


def test_describe_test():
    assert describe_test({"kind": "X", "condition": "Ready", "status": "True"}) == "condition Ready=True"
    assert describe_test({"kind": "X", "field": "status.state", "value": "ready"}) == "status.state == 'ready'"
    assert describe_test({"kind": "DaemonSet"}) == "built-in readiness of DaemonSet"
