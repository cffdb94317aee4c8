"""Nothing that is not the site's is lost, and nothing the site dropped is left (issue 31, items 1 and 14), on the
real API server with its garbage collector.

- Item 1: the batch site's serving stage is applied into a namespace it creates; a user then puts a ConfigMap, a
  Secret, a custom resource (a PrometheusRule) and a ConfigMap that names one of the site's objects as its owner
  into that namespace. ``teardown.yml`` deletes the site's objects, keeps the namespace and the user's four objects,
  and its output names what it kept and why. With nothing foreign left in it, the next converge and teardown delete
  the namespace.
- Item 14: the site's serving stage with two models, then the inventory without the second one: drift reports
  the second model's objects (its LLMInferenceService, ScaledObject, ...) before the converge, check mode lists them
  as to be pruned and deletes nothing, the converge prunes and lists them, and a second converge changes nothing.
"""

from __future__ import annotations

import copy

import pytest
import yaml
from kubernetes import dynamic
from kubernetes.client.rest import ApiException

from tests.ansible_run import run_playbook
from tests.serving_helpers import INVENTORIES, PLAYBOOKS

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SITE = "example-batch"
CREATED_BY = "inference.blueprints/created-by"
MODEL = yaml.safe_load((INVENTORIES / SITE / "group_vars/all/site.yml").read_text())["models"][0]


def _extra(ns, **more):
    return {"serving_namespace": ns, "model_service_wait": False, **more}


def _run(cluster, playbook, ns, check=False, **more):
    return run_playbook(
        PLAYBOOKS / playbook,
        INVENTORIES / SITE,
        kubeconfig=cluster.kubeconfig,
        extravars=_extra(ns, **more),
        check=check,
    )


def _api(cluster, api_version, kind):
    return dynamic.DynamicClient(cluster.new_api_client()).resources.get(api_version=api_version, kind=kind)


def _get(cluster, api_version, kind, name, namespace=None):
    try:
        return _api(cluster, api_version, kind).get(name=name, namespace=namespace).to_dict()
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _ok(run):
    assert run.rc == 0, run.failure_messages() or run.stdout[-4000:]
    return run


def _site_objects(cluster, ns) -> list[str]:
    """What in ``ns`` still carries the site's created-by annotation (the kinds the serving stage renders)."""
    kinds = [
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("v1", "ServiceAccount"),
        ("rbac.authorization.k8s.io/v1", "Role"),
        ("rbac.authorization.k8s.io/v1", "RoleBinding"),
        ("serving.kserve.io/v1alpha2", "LLMInferenceService"),
        ("keda.sh/v1alpha1", "ScaledObject"),
        ("keda.sh/v1alpha1", "TriggerAuthentication"),
        ("monitoring.coreos.com/v1", "PrometheusRule"),
    ]
    out = []
    for api_version, kind in kinds:
        for item in _api(cluster, api_version, kind).get(namespace=ns).items:
            meta = item.to_dict()["metadata"]
            if (meta.get("annotations") or {}).get(CREATED_BY) == SITE:
                out.append(f"{kind}/{meta['name']}")
    return out


def _users_objects(cluster, ns) -> list[tuple[str, str, dict]]:
    """A user's ConfigMap, Secret and PrometheusRule in the site's namespace, and a ConfigMap owned (not as a
    controller) by the site's LLMInferenceService: (apiVersion, kind, body)."""
    owner = _get(cluster, "serving.kserve.io/v1alpha2", "LLMInferenceService", MODEL["name"], ns)
    assert owner is not None, "the site's LLMInferenceService was not applied"
    owner_ref = {
        "apiVersion": "serving.kserve.io/v1alpha2",
        "kind": "LLMInferenceService",
        "name": MODEL["name"],
        "uid": owner["metadata"]["uid"],
    }
    rule = {"groups": [{"name": "mine", "rules": [{"alert": "Mine", "expr": "vector(0) > 1"}]}]}
    return [
        ("v1", "ConfigMap", {"metadata": {"name": "users-config"}, "data": {"prompt": "keep me"}}),
        ("v1", "Secret", {"metadata": {"name": "users-secret"}, "stringData": {"token": "s3cret"}}),
        ("monitoring.coreos.com/v1", "PrometheusRule", {"metadata": {"name": "users-rule"}, "spec": rule}),
        ("v1", "ConfigMap", {"metadata": {"name": "users-notes", "ownerReferences": [owner_ref]}, "data": {"a": "b"}}),
    ]


@pytest.fixture
def namespaces(cluster):
    made: list[str] = []
    yield made
    for ns in made:
        cluster.kubectl("delete", "namespace", ns, "--wait=false", "--ignore-not-found")


def test_teardown_keeps_the_namespace_and_everything_of_the_user_in_it(cluster, namespaces):
    ns = "guard-batch"
    namespaces.append(ns)
    _ok(_run(cluster, "serving.yml", ns))
    users = _users_objects(cluster, ns)
    for api_version, kind, body in users:
        _api(cluster, api_version, kind).create(
            body={"apiVersion": api_version, "kind": kind, **body, "metadata": {**body["metadata"], "namespace": ns}},
            namespace=ns,
        )
    before = {(k, b["metadata"]["name"]): _get(cluster, a, k, b["metadata"]["name"], ns) for a, k, b in users}

    gone = _ok(_run(cluster, "teardown.yml", ns))
    assert _get(cluster, "v1", "Namespace", ns) is not None, "the namespace holding the user's objects was deleted"
    assert _get(cluster, "v1", "Namespace", ns)["metadata"].get("deletionTimestamp") is None
    for (kind, name), obj in before.items():
        live = _get(cluster, obj["apiVersion"], kind, name, ns)
        assert live is not None, f"{kind}/{ns}/{name} of the user was deleted"
        if name != "users-notes":  # its reference to the deleted service is dropped by the garbage collector
            assert live["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"], f"{kind}/{name} changed"
    assert _site_objects(cluster, ns) == [], "the site's own objects were not removed"
    # the output names the kept namespace, every object of the user that kept it, and the orphaned dependent
    objects = [o for r in gone.results_of("inference.blueprints.k8s_apply") for o in r.get("objects", [])]
    kept = [o for o in objects if (o["kind"], o["name"], o["action"]) == ("Namespace", ns, "kept")]
    assert kept, objects
    for ref in (f"ConfigMap/{ns}/users-config", f"Secret/{ns}/users-secret", f"PrometheusRule/{ns}/users-rule"):
        assert ref in kept[0]["reason"], (ref, kept[0]["reason"])
    service = [o for o in objects if (o["kind"], o["name"]) == ("LLMInferenceService", MODEL["name"])]
    assert service and service[0]["action"] == "deleted", service
    assert service[0]["kept_dependents"] == [f"ConfigMap/{ns}/users-notes"], service
    assert f"kept Namespace/{ns}: the site created it, but it holds" in gone.stdout, gone.stdout[-5000:]

    # nothing foreign left: the next converge takes the kept namespace up again, the next teardown deletes it
    for api_version, kind, body in users:
        _api(cluster, api_version, kind).delete(name=body["metadata"]["name"], namespace=ns)
    _ok(_run(cluster, "serving.yml", ns))
    _ok(_run(cluster, "teardown.yml", ns))
    live = _get(cluster, "v1", "Namespace", ns)
    assert live is None or live["metadata"].get("deletionTimestamp"), "the site's empty namespace was kept"


def test_a_converge_prunes_what_the_plan_dropped_and_drift_reports_it_first(cluster, namespaces):
    ns = "prune-batch"
    namespaces.append(ns)
    second = copy.deepcopy(MODEL)
    second["name"] = "qwen-batch-b"
    second["served_name"] = "qwen-batch-b"  # two models may not share the name clients send (issue 31 item 9)
    _ok(_run(cluster, "serving.yml", ns, models=[MODEL, second]))
    assert _get(cluster, "keda.sh/v1alpha1", "ScaledObject", "qwen-batch-b-scaler", ns) is not None

    drifted = _run(cluster, "drift.yml", ns, models=[MODEL])
    assert drifted.rc != 0, "drift.yml found no drift in objects the plan dropped"
    found = [d for r in drifted.results_of("inference.blueprints.k8s_drift") for d in r.get("drift", [])]
    dropped = {d["object"].split(" ")[1] for d in found if d["live"] == "present"}
    assert f"{ns}/qwen-batch-b-scaler" in dropped and f"{ns}/qwen-batch-b" in dropped, found

    checked = _ok(_run(cluster, "serving.yml", ns, check=True, models=[MODEL]))
    would = [o for r in checked.results_of("inference.blueprints.k8s_apply") for o in r.get("objects", [])]
    assert ("ScaledObject", "qwen-batch-b-scaler", "pruned") in {(o["kind"], o["name"], o["action"]) for o in would}
    assert _get(cluster, "keda.sh/v1alpha1", "ScaledObject", "qwen-batch-b-scaler", ns) is not None, "check mode"

    pruned = _ok(_run(cluster, "serving.yml", ns, models=[MODEL]))
    listed = {
        (o["kind"], o["name"])
        for r in pruned.results_of("inference.blueprints.k8s_apply")
        for o in r.get("objects", [])
        if o["action"] == "pruned"
    }
    assert listed == {
        ("LLMInferenceService", "qwen-batch-b"),
        ("ScaledObject", "qwen-batch-b-scaler"),
        ("InferenceObjective", "qwen-batch-b-batch"),
        ("PodMonitor", "qwen-batch-b-vllm-serve"),
        ("ServiceMonitor", "qwen-batch-b-epp"),
        ("PrometheusRule", "qwen-batch-b-slo"),
        # the dropped model's pods are gone, so are the policies that admitted their paths (intent/traffic_paths.py)
        ("NetworkPolicy", "qwen-batch-b-scheduler-paths"),
        ("NetworkPolicy", "qwen-batch-b-workload-paths"),
    }, listed
    assert _get(cluster, "keda.sh/v1alpha1", "ScaledObject", "qwen-batch-b-scaler", ns) is None
    assert _get(cluster, "serving.kserve.io/v1alpha2", "LLMInferenceService", "qwen-batch-b", ns) is None
    assert _get(cluster, "keda.sh/v1alpha1", "ScaledObject", "qwen-batch-scaler", ns) is not None

    again = _ok(_run(cluster, "serving.yml", ns, models=[MODEL]))
    assert again.changed == 0, again.stdout[-3000:]
    clean = _ok(_run(cluster, "drift.yml", ns, models=[MODEL]))
    assert [d for r in clean.results_of("inference.blueprints.k8s_drift") for d in r.get("drift", [])] == []
    _ok(_run(cluster, "teardown.yml", ns, models=[MODEL]))
