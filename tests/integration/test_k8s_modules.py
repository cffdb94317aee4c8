"""k8s_apply and k8s_wait against the local control plane (real kube-apiserver, upstream CRDs)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from tests.ansible_run import run_playbook

pytestmark = pytest.mark.cluster


def _core(kubeconfig):
    return k8s.CoreV1Api(k8s_config.new_client_from_config(str(kubeconfig)))


def _play(tasks: str) -> str:
    return (
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        + "\n".join("    " + line for line in tasks.strip("\n").splitlines())
        + "\n"
    )


def _apply_task(ns: str, extra: str = "", data_value: str = "v1", field: str = "data") -> str:
    return f"""
- name: Apply
  inference.blueprints.k8s_apply:
    {extra}
    definition: |
      apiVersion: v1
      kind: Namespace
      metadata: {{name: {ns}}}
      ---
      apiVersion: v1
      kind: ConfigMap
      metadata: {{name: cfg, namespace: {ns}}}
      {field}: {{key: {data_value}}}
  register: out
- name: Show
  ansible.builtin.debug:
    var: out.objects
"""


@pytest.fixture
def ns():
    return "kt-" + uuid.uuid4().hex[:8]


def test_apply_creates_then_is_idempotent_then_updates(cluster, ns):
    first = run_playbook(_play(_apply_task(ns)), kubeconfig=cluster.kubeconfig)
    assert first.rc == 0, first.stdout
    assert first.changed == 1
    actions = [o["action"] for o in first.results_of("inference.blueprints.k8s_apply")[0]["objects"]]
    assert actions == ["created", "created"]
    assert _core(cluster.kubeconfig).read_namespaced_config_map("cfg", ns).data == {"key": "v1"}

    second = run_playbook(_play(_apply_task(ns)), kubeconfig=cluster.kubeconfig)
    assert second.rc == 0 and second.changed == 0
    actions = [o["action"] for o in second.results_of("inference.blueprints.k8s_apply")[0]["objects"]]
    assert actions == ["unchanged", "unchanged"]

    third = run_playbook(_play(_apply_task(ns, data_value="v2")), kubeconfig=cluster.kubeconfig)
    assert third.rc == 0 and third.changed == 1
    assert _core(cluster.kubeconfig).read_namespaced_config_map("cfg", ns).data == {"key": "v2"}


def test_check_mode_writes_nothing_but_predicts_change(cluster, ns):
    run = run_playbook(_play(_apply_task(ns)), kubeconfig=cluster.kubeconfig, check=True, diff=True)
    assert run.rc == 0, run.stdout
    assert run.changed == 1
    with pytest.raises(ApiException) as err:
        _core(cluster.kubeconfig).read_namespace(ns)
    assert err.value.status == 404


def test_unknown_field_is_the_api_servers_error(cluster, ns):
    run = run_playbook(_play(_apply_task(ns, field="dataa")), kubeconfig=cluster.kubeconfig)
    assert run.rc != 0
    msg = run.failure_messages()
    assert "ConfigMap" in msg and "dataa" in msg, msg
    # server-side apply's own wording for a field the schema does not declare
    assert "field not declared in schema" in msg, msg


def test_unknown_field_in_custom_resource_is_refused(cluster, ns):
    # A misspelled spec field in an upstream CRD (KServe's LLMInferenceService) must fail,
    # not be pruned silently.
    tasks = f"""
- name: Apply
  inference.blueprints.k8s_apply:
    objects:
      - {{apiVersion: v1, kind: Namespace, metadata: {{name: {ns}}}}}
      - apiVersion: serving.kserve.io/v1alpha2
        kind: LLMInferenceService
        metadata: {{name: m, namespace: {ns}}}
        spec:
          model: {{uri: "hf://Qwen/Qwen3.6-27B"}}
          replicaz: 2
"""
    run = run_playbook(_play(tasks), kubeconfig=cluster.kubeconfig)
    assert run.rc != 0
    msg = run.failure_messages()
    assert "LLMInferenceService" in msg and "replicaz" in msg, msg


def test_render_touches_no_cluster(tmp_path, ns):
    extra = f"delivery: render\n    render_dir: {tmp_path}"
    run = run_playbook(_play(_apply_task(ns, extra=extra)), kubeconfig="/nonexistent/kubeconfig")
    assert run.rc == 0, run.stdout
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.yaml"))
    assert files == [f"_cluster/namespace.core-{ns}.yaml", f"{ns}/configmap.core-cfg.yaml"]
    again = run_playbook(_play(_apply_task(ns, extra=extra)), kubeconfig="/nonexistent/kubeconfig")
    assert again.changed == 0


def test_absent_deletes_in_reverse_and_waits(cluster, ns):
    assert run_playbook(_play(_apply_task(ns)), kubeconfig=cluster.kubeconfig).rc == 0
    run = run_playbook(_play(_apply_task(ns, extra="state: absent")), kubeconfig=cluster.kubeconfig)
    assert run.rc == 0, run.stdout
    actions = [(o["kind"], o["action"]) for o in run.results_of("inference.blueprints.k8s_apply")[0]["objects"]]
    assert actions == [("ConfigMap", "deleted"), ("Namespace", "deleted")]
    with pytest.raises(ApiException) as err:
        _core(cluster.kubeconfig).read_namespace(ns)
    assert err.value.status == 404
    again = run_playbook(_play(_apply_task(ns, extra="state: absent")), kubeconfig=cluster.kubeconfig)
    assert again.rc == 0 and again.changed == 0


def test_wait_timeout_names_object_condition_and_what_it_saw(cluster, ns):
    tasks = f"""
- name: Apply
  inference.blueprints.k8s_apply:
    definition: |
      apiVersion: v1
      kind: Namespace
      metadata: {{name: {ns}}}
      ---
      apiVersion: v1
      kind: ConfigMap
      metadata: {{name: cfg, namespace: {ns}}}
      data: {{state: pending}}
- name: Wait
  inference.blueprints.k8s_wait:
    objects:
      - {{apiVersion: v1, kind: ConfigMap, namespace: {ns}, name: cfg, field: data.state, value: ready}}
      - {{apiVersion: v1, kind: ConfigMap, namespace: {ns}, name: missing, field: data.state, value: ready}}
    timeout: 3
    sleep: 0.5
"""
    run = run_playbook(_play(tasks), kubeconfig=cluster.kubeconfig)
    assert run.rc != 0
    msg = run.failure_messages()
    assert "timed out after 3 s" in msg
    assert f"ConfigMap {ns}/cfg (v1): waited for data.state == 'ready'; last saw data.state='pending'" in msg
    assert f"ConfigMap {ns}/missing (v1)" in msg and "does not exist" in msg


def test_wait_succeeds_on_condition(cluster, ns):
    tasks = """
- name: Wait for the namespace to be active
  inference.blueprints.k8s_wait:
    objects:
      - {apiVersion: v1, kind: Namespace, name: default, field: status.phase, value: Active}
    timeout: 10
"""
    run = run_playbook(_play(tasks), kubeconfig=cluster.kubeconfig)
    assert run.rc == 0, run.stdout


# ---------------------------------------------------------------------------- the fast apply path
# The action plugins run in-process; INFERENCE_BLUEPRINTS_K8S_TRACE makes the shared client log
# every HTTP request (method, path, status) and every discovery decision as JSON lines, and
# INFERENCE_BLUEPRINTS_CACHE_DIR gives each test its own discovery cache.


def _traced_play(tasks: str, trace: Path, cache: Path) -> str:
    env = f"  environment:\n    INFERENCE_BLUEPRINTS_K8S_TRACE: {trace}\n    INFERENCE_BLUEPRINTS_CACHE_DIR: {cache}\n"
    return _play(tasks).replace("  tasks:\n", env + "  tasks:\n", 1)


def _trace(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _writes(events: list[dict]) -> list[str]:
    return [f"{e['method']} {e['path']}" for e in events if e.get("method") and e["method"] != "GET"]


def _many_kinds(ns: str) -> list[dict]:
    """Objects of 11 kinds in an order that is unsafe as written (namespace last, binding before role)."""
    labels = {"app": "kt"}
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "kt", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kt"},
            "subjects": [{"kind": "ServiceAccount", "name": "kt", "namespace": ns}],
        },
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": {"name": "kt", "namespace": ns},
            "spec": {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up == 0", "for": "5m"}]}]},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "kt", "namespace": ns},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": "kt",
                        "containers": [
                            {
                                "name": "c",
                                "image": "registry.example.com/kt:1",
                                "ports": [{"containerPort": 8000}],
                                "resources": {"requests": {"cpu": "0.5", "memory": "1Gi"}},
                                "env": [{"name": "A", "value": "1"}],
                            }
                        ],
                    },
                },
            },
        },
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kt", "namespace": ns}, "data": {"a": "b"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kt", "namespace": ns}, "stringData": {"t": "x"}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kt", "namespace": ns},
            "spec": {"selector": labels, "ports": [{"name": "http", "port": 80, "targetPort": 8000}]},
        },
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "kt", "namespace": ns}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "kt", "namespace": ns},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": f"{ns}-reader"},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}],
        },
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": {"name": "kt", "namespace": ns},
            "spec": {"selector": {"matchLabels": labels}, "endpoints": [{"port": "http", "interval": "30s"}]},
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
    ]


def _apply_objects_task(objs: list[dict], extra: str = "") -> str:
    return (
        "- name: Apply\n  inference.blueprints.k8s_apply:\n"
        + (f"    {extra}\n" if extra else "")
        + f"    objects: {json.dumps(objs)}\n"
        + "    labels: {app.kubernetes.io/managed-by: kt}\n"
    )


def _live_versions(cluster, objs: list[dict]) -> dict:
    out = {}
    for o in objs:
        res = cluster.dynamic.resources.get(api_version=o["apiVersion"], kind=o["kind"])
        live = res.get(name=o["metadata"]["name"], namespace=o["metadata"].get("namespace")).to_dict()
        out[(o["kind"], o["metadata"]["name"])] = live["metadata"]["resourceVersion"]
    return out


def test_many_kinds_in_one_call_in_safe_order_then_a_noop_rerun_writes_nothing(cluster, ns, tmp_path):
    objs = _many_kinds(ns)
    trace, cache = tmp_path / "trace.jsonl", tmp_path / "cache"
    play = _traced_play(_apply_objects_task(objs), trace, cache)
    try:
        first = run_playbook(play, kubeconfig=cluster.kubeconfig)
        assert first.rc == 0, first.failure_messages() or first.stdout
        result = first.results_of("inference.blueprints.k8s_apply")[0]["objects"]
        order = [o["kind"] for o in result]
        assert order == [
            "Namespace",
            "ConfigMap",  # prerequisites, in list order
            "ServiceAccount",
            "Role",
            "ClusterRole",
            "RoleBinding",  # after its Role
            "Secret",  # after ServiceAccounts (a token Secret whose account is missing is deleted)
            "PrometheusRule",  # every other kind in order of first appearance
            "Deployment",
            "Service",
            "ServiceMonitor",
        ]
        assert {o["action"] for o in result} == {"created"}
        # Each write is one server-side apply with strict validation and our field manager.
        patches = [e for e in _trace(trace) if e.get("method") == "PATCH"]
        assert len(patches) == len(objs)
        assert all(
            "fieldManager=inference-blueprints" in p["query"] and "fieldValidation=Strict" in p["query"]
            for p in patches
        )

        before = _live_versions(cluster, objs)
        trace.unlink()
        second = run_playbook(play, kubeconfig=cluster.kubeconfig)
        assert second.rc == 0, second.failure_messages()
        assert second.changed == 0
        result = second.results_of("inference.blueprints.k8s_apply")[0]["objects"]
        assert [o["action"] for o in result] == ["unchanged"] * len(objs)
        events = _trace(trace)
        assert _writes(events) == [], "a no-op re-run must only read"
        assert len([e for e in events if e.get("method") == "GET"]) == len(objs)  # one read per object
        after = _live_versions(cluster, objs)
        # Controllers update Deployment status; every other object must be untouched.
        assert {k: v for k, v in after.items() if k[0] != "Deployment"} == {
            k: v for k, v in before.items() if k[0] != "Deployment"
        }

        # A real change is still applied, and only where it is.
        objs[3]["data"] = {"a": "c"}
        trace.unlink()
        third = run_playbook(_traced_play(_apply_objects_task(objs), trace, cache), kubeconfig=cluster.kubeconfig)
        assert third.rc == 0 and third.changed == 1
        changed = [
            o for o in third.results_of("inference.blueprints.k8s_apply")[0]["objects"] if o["action"] != "unchanged"
        ]
        assert [(o["kind"], o["action"]) for o in changed] == [("ConfigMap", "configured")]
        assert _writes(_trace(trace)) == [f"PATCH /api/v1/namespaces/{ns}/configmaps/kt"]
    finally:
        cluster.kubectl("delete", "clusterrole", f"{ns}-reader", "--ignore-not-found")


def _widget_crd(group: str) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
                        }
                    },
                }
            ],
        },
    }


def test_check_mode_with_a_new_namespace_and_crd_writes_nothing(cluster, ns, tmp_path):
    group = f"{ns}.example.com"
    objs = [
        {
            "apiVersion": f"{group}/v1",
            "kind": "Widget",
            "metadata": {"name": "w", "namespace": ns},
            "spec": {"size": 1},
        },
        _widget_crd(group),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": ns}, "data": {"a": "b"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": f"{ns}-pc"}, "value": 10},
    ]
    trace, cache = tmp_path / "trace.jsonl", tmp_path / "cache"
    run = run_playbook(
        _traced_play(_apply_objects_task(objs), trace, cache), kubeconfig=cluster.kubeconfig, check=True, diff=True
    )
    assert run.rc == 0, run.failure_messages()
    assert run.changed == 1
    result = {o["kind"]: o for o in run.results_of("inference.blueprints.k8s_apply")[0]["objects"]}
    assert {k: o["action"] for k, o in result.items()} == dict.fromkeys(result, "created")
    # The server could not dry-run what lives in a namespace or of a kind that does not exist yet.
    assert result["ConfigMap"]["validated"] is False and result["Widget"]["validated"] is False
    assert "validated" not in result["Namespace"] and "validated" not in result["PriorityClass"]
    writes = [e for e in _trace(trace) if e.get("method") not in (None, "GET")]
    assert writes and all("dryRun=All" in (e.get("query") or "") for e in writes), writes
    for args in (("get", "namespace", ns), ("get", "crd", f"widgets.{group}"), ("get", "priorityclass", f"{ns}-pc")):
        assert cluster.kubectl(*args).returncode != 0, f"check mode created {args}"


def test_crd_and_its_objects_in_one_call(cluster, ns, tmp_path):
    group = f"{ns}.example.com"
    widget = {
        "apiVersion": f"{group}/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": ns},
        "spec": {"size": 2},
    }
    objs = [widget, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, _widget_crd(group)]
    trace, cache = tmp_path / "trace.jsonl", tmp_path / "cache"
    try:
        run = run_playbook(_traced_play(_apply_objects_task(objs), trace, cache), kubeconfig=cluster.kubeconfig)
        assert run.rc == 0, run.failure_messages()
        result = run.results_of("inference.blueprints.k8s_apply")[0]["objects"]
        assert [(o["kind"], o["action"]) for o in result] == [
            ("Namespace", "created"),
            ("CustomResourceDefinition", "created"),
            ("Widget", "created"),
        ]
        got = cluster.kubectl("get", f"widgets.{group}", "w", "-n", ns, "-o", "jsonpath={.spec.size}")
        assert got.stdout == "2", got.stderr
        # Discovery: one fetch for the task, one more after the CRD became Established.
        assert [e["event"] for e in _trace(trace) if e.get("event")] == ["discovery-fetch", "discovery-fetch"]
    finally:
        cluster.kubectl("delete", "crd", f"widgets.{group}", "--ignore-not-found", "--wait=false")


def test_discovery_cache_is_reused_by_later_tasks(cluster, ns, tmp_path):
    trace, cache = tmp_path / "trace.jsonl", tmp_path / "cache"
    other = f"[{{apiVersion: v1, kind: ConfigMap, metadata: {{name: other, namespace: {ns}}}}}]"
    tasks = _apply_task(ns) + (
        f"- name: Apply again\n  inference.blueprints.k8s_apply:\n    objects: {other}\n"
        "- name: Wait\n  inference.blueprints.k8s_wait:\n"
        f"    objects: [{{apiVersion: v1, kind: ConfigMap, namespace: {ns}, name: other}}]\n"
        # cluster_facts reads what is served now (fresh discovery), which refreshes the cache
        "- name: Facts\n  inference.blueprints.cluster_facts:\n    gather_subset: api\n"
        f"- name: Apply after facts\n  inference.blueprints.k8s_apply:\n    objects: {other}\n"
    )
    run = run_playbook(_traced_play(tasks, trace, cache), kubeconfig=cluster.kubeconfig)
    assert run.rc == 0, run.failure_messages()
    events = _trace(trace)
    decisions = [e for e in events if e.get("event")]
    pids = list(dict.fromkeys(e["pid"] for e in decisions))
    assert len(pids) == 5, "five tasks, each in its own worker process"
    assert [(pids.index(e["pid"]), e["event"]) for e in decisions] == [
        (0, "discovery-fetch"),
        (1, "discovery-cache-read"),
        (2, "discovery-cache-read"),
        (3, "discovery-fetch"),
        (4, "discovery-cache-read"),
    ]
    discovery_gets = [(pids.index(e["pid"]), e["path"]) for e in events if e.get("path") in ("/api", "/apis")]
    assert discovery_gets == [(0, "/api"), (0, "/apis"), (3, "/api"), (3, "/apis")]
    files = list(cache.rglob("*.json"))
    assert len(files) == 1 and oct(files[0].stat().st_mode & 0o777) == "0o600"
    assert "discovery" in files[0].parts


def test_stale_discovery_cache_is_refreshed_when_a_new_crd_appears(cluster, ns, tmp_path):
    group = f"{ns}.example.com"
    trace, cache = tmp_path / "trace.jsonl", tmp_path / "cache"
    assert run_playbook(_traced_play(_apply_task(ns), trace, cache), kubeconfig=cluster.kubeconfig).rc == 0
    try:
        # An operator installs a CRD after our cache was written.
        crd = cluster.kubectl("apply", "-f", "-", input=json.dumps(_widget_crd(group)))
        assert crd.returncode == 0, crd.stderr
        ok = cluster.kubectl("wait", "--for=condition=Established", f"crd/widgets.{group}", "--timeout=60s")
        assert ok.returncode == 0, ok.stderr
        trace.unlink()
        widget = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": ns}}
        run = run_playbook(_traced_play(_apply_objects_task([widget]), trace, cache), kubeconfig=cluster.kubeconfig)
        assert run.rc == 0, run.failure_messages()
        assert [e["event"] for e in _trace(trace) if e.get("event")] == ["discovery-cache-read", "discovery-fetch"]
    finally:
        cluster.kubectl("delete", "crd", f"widgets.{group}", "--ignore-not-found", "--wait=false")


def test_kind_nobody_serves_names_kind_group_and_that_nothing_provides_it(cluster, ns, tmp_path):
    objs = [
        {"apiVersion": "widgets.nowhere.example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": ns}}
    ]
    run = run_playbook(_play(_apply_objects_task(objs)), kubeconfig=cluster.kubeconfig)
    assert run.rc != 0
    msg = run.failure_messages()
    assert "does not serve Widget in widgets.nowhere.example.com/v1" in msg, msg
    assert "nothing on this cluster provides API group widgets.nowhere.example.com" in msg, msg
    # and a known group at a version it does not serve
    objs = [
        {
            "apiVersion": "serving.kserve.io/v9",
            "kind": "LLMInferenceService",
            "metadata": {"name": "m", "namespace": ns},
        }
    ]
    run = run_playbook(_play(_apply_objects_task(objs)), kubeconfig=cluster.kubeconfig)
    assert "API group serving.kserve.io is served only in version(s)" in run.failure_messages()


def test_concurrent_waits_time_out_naming_every_pending_object(cluster, ns):
    states = {"a": "ready", "b": "pending", "c": "ready", "d": "starting"}
    cms = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": ns}, "data": {"state": s}}
        for n, s in states.items()
    ]
    objs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, *cms]
    waits = [
        {"apiVersion": "v1", "kind": "ConfigMap", "namespace": ns, "name": n, "field": "data.state", "value": "ready"}
        for n in [*states, "missing"]
    ] + [
        {
            "apiVersion": "widgets.nowhere.example.com/v1",
            "kind": "Widget",
            "namespace": ns,
            "name": "w",
            "condition": "Ready",
        }
    ]
    tasks = _apply_objects_task(objs) + (
        "- name: Wait\n  inference.blueprints.k8s_wait:\n"
        f"    objects: {json.dumps(waits)}\n    timeout: 3\n    sleep: 1\n"
    )
    run = run_playbook(_play(tasks), kubeconfig=cluster.kubeconfig)
    assert run.rc != 0
    failed = run.failures()[0][4]
    msg = failed["msg"]
    assert msg.startswith("timed out after 3 s: "), msg
    assert f"ConfigMap {ns}/b (v1): waited for data.state == 'ready'; last saw data.state='pending'" in msg
    assert f"ConfigMap {ns}/d (v1): waited for data.state == 'ready'; last saw data.state='starting'" in msg
    assert f"ConfigMap {ns}/missing (v1): waited for data.state == 'ready'; last saw the object does not exist" in msg
    assert (
        f"Widget {ns}/w (widgets.nowhere.example.com/v1): waited for condition Ready=True; last saw the API server"
        in msg
    )
    assert f"{ns}/a " not in msg and f"{ns}/c " not in msg
    assert [o["ready"] for o in failed["objects"]] == [True, False, True, False, False, False]
    # stops at the deadline (a poll round under load can run past it), not after per-object timeouts (6 x 3 s)
    assert 3 <= failed["elapsed"] < 12, failed["elapsed"]


def test_crd_established_is_read_from_discovery_and_a_refused_crd_times_out_with_its_condition(cluster, ns, tmp_path):
    """An Established CRD is found in one aggregated discovery read, never fetched in full (the
    LLMInferenceService CRD is ~740 KB); a CRD the API server will not establish (its kind clashes
    with another CRD of the group, so NamesAccepted=False) is read in full and the timeout quotes
    its condition."""
    group = f"{ns}.example.com"
    good = _widget_crd(group)
    clash = _widget_crd(group)
    clash["metadata"]["name"] = f"gadgets.{group}"
    clash["spec"]["names"] = {"kind": "Widget", "plural": "gadgets", "singular": "gadget", "listKind": "WidgetList"}
    trace, cache = tmp_path / "trace.jsonl", tmp_path / "cache"
    try:
        for crd in (good, clash):
            made = cluster.kubectl("apply", "-f", "-", input=json.dumps(crd))
            assert made.returncode == 0, made.stderr
        ok = cluster.kubectl("wait", "--for=condition=Established", f"crd/widgets.{group}", "--timeout=60s")
        assert ok.returncode == 0, ok.stderr

        def wait_task(names, timeout):
            specs = [
                {
                    "apiVersion": "apiextensions.k8s.io/v1",
                    "kind": "CustomResourceDefinition",
                    "name": n,
                    "condition": "Established",
                }
                for n in names
            ]
            return (
                "- name: Wait\n  inference.blueprints.k8s_wait:\n"
                f"    objects: {json.dumps(specs)}\n    timeout: {timeout}\n"
            )

        run = run_playbook(
            _traced_play(wait_task([f"widgets.{group}"], 30), trace, cache), kubeconfig=cluster.kubeconfig
        )
        assert run.rc == 0, run.failure_messages()
        result = run.results_of("inference.blueprints.k8s_wait")[0]["objects"]
        assert result[0]["ready"] and result[0]["seen"] == "Established=True (its resource is served)", result
        paths = [e["path"] for e in _trace(trace) if e.get("method") == "GET"]
        assert "/apis" in paths, paths
        assert not [p for p in paths if "customresourcedefinitions" in p], paths

        trace.unlink()
        run = run_playbook(
            _traced_play(wait_task([f"widgets.{group}", f"gadgets.{group}"], 3), trace, cache),
            kubeconfig=cluster.kubeconfig,
        )
        assert run.rc != 0
        msg = run.failure_messages()
        assert (
            f"CustomResourceDefinition gadgets.{group} (apiextensions.k8s.io/v1): waited for condition "
            "Established=True; last saw Established=False reason=NotAccepted" in msg
        ), msg
        assert f"widgets.{group} (" not in msg, msg
        paths = [e["path"] for e in _trace(trace) if e.get("method") == "GET"]
        assert f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.{group}" in paths, paths
        assert f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}" not in paths, paths
    finally:
        for crd in (good, clash):
            cluster.kubectl("delete", "crd", crd["metadata"]["name"], "--ignore-not-found", "--wait=false")


def test_forbidden_names_verb_resource_and_namespace(cluster, ns):
    sa_kubeconfig = cluster.mint_sa_kubeconfig(ns, "nobody")
    cm = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": ns}, "data": {"a": "b"}}]
    task = _apply_objects_task(cm, extra=f"kubeconfig: {sa_kubeconfig}")
    run = run_playbook(_play(task), kubeconfig=cluster.kubeconfig)
    assert run.rc != 0
    msg = run.failure_messages()
    assert f"forbidden: the credentials in use may not get configmaps in namespace {ns}" in msg, msg
    assert f"system:serviceaccount:{ns}:nobody" in msg
    # Reading allowed, writing not: the refused verb is the write.
    assert cluster.kubectl("create", "role", "cm-read", "-n", ns, "--verb=get", "--resource=configmaps").returncode == 0
    grant = ("create", "rolebinding", "cm-read", "-n", ns, "--role=cm-read", f"--serviceaccount={ns}:nobody")
    assert cluster.kubectl(*grant).returncode == 0
    deadline = time.monotonic() + 30
    while True:
        run = run_playbook(_play(task), kubeconfig=cluster.kubeconfig)
        msg = run.failure_messages()
        if "may not get" not in msg or time.monotonic() > deadline:
            break
    assert f"forbidden: the credentials in use may not patch configmaps in namespace {ns}" in msg, msg


def test_admission_policy_denial_quotes_its_reason(cluster, ns):
    name = f"{ns}-no-forbidden-key"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["configmaps"],
                    }
                ]
            },
            "validations": [
                {
                    "expression": "!has(object.data) || !('forbidden' in object.data)",
                    "message": "key forbidden is not allowed",
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}},
        },
    }
    bad = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": ns},
        "data": {"forbidden": "1"},
    }
    try:
        assert cluster.kubectl("create", "namespace", ns).returncode == 0
        for doc in (policy, binding):
            res = cluster.kubectl("apply", "-f", "-", input=json.dumps(doc))
            assert res.returncode == 0, res.stderr
        deadline = time.monotonic() + 30
        probe = ("apply", "--dry-run=server", "-f", "-")
        while "denied request" not in cluster.kubectl(*probe, input=json.dumps(bad)).stderr:
            assert time.monotonic() < deadline, "the admission policy never took effect"
            time.sleep(0.5)
        run = run_playbook(_play(_apply_objects_task([bad])), kubeconfig=cluster.kubeconfig)
        assert run.rc != 0
        msg = run.failure_messages()
        assert msg == (
            f"admission policy {name} (binding {name}) denied apply of ConfigMap {ns}/cfg (v1): "
            "key forbidden is not allowed"
        ), msg
    finally:
        cluster.kubectl(
            "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", name, "--ignore-not-found"
        )


def test_conflict_with_another_field_manager_is_explained(cluster, ns):
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": ns},
        "data": {"key": "theirs"},
    }
    assert cluster.kubectl("create", "namespace", ns).returncode == 0
    res = cluster.kubectl("apply", "--server-side", "--field-manager=someone-else", "-f", "-", input=json.dumps(cm))
    assert res.returncode == 0, res.stderr
    mine = {**cm, "data": {"key": "ours"}}
    run = run_playbook(
        _play(_apply_objects_task([mine], extra="force_conflicts: false")), kubeconfig=cluster.kubeconfig
    )
    assert run.rc != 0
    msg = run.failure_messages()
    assert f"conflict applying ConfigMap {ns}/cfg (v1): other field managers own .data.key" in msg, msg
    assert 'conflict with "someone-else"' in msg and "force_conflicts: true" in msg
    # the default (force_conflicts: true) takes the field over
    run = run_playbook(_play(_apply_objects_task([mine])), kubeconfig=cluster.kubeconfig)
    assert run.rc == 0 and run.changed == 1


def test_no_credential_files_are_left_behind(cluster, ns, tmp_path, monkeypatch):
    # The kubeconfig loader writes the client certificate, key and CA to temp files and
    # removes them at interpreter exit, which Ansible's workers skip (os._exit).
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    assert "client-key-data" in Path(cluster.kubeconfig).read_text()
    run = run_playbook(_play(_apply_task(ns)), kubeconfig=cluster.kubeconfig)
    assert run.rc == 0, run.failure_messages()
    left = [p.name for p in tmp.rglob("*") if p.is_file() and "-----BEGIN" in p.read_text(errors="replace")]
    assert left == [], f"credential files left in TMPDIR: {left}"
