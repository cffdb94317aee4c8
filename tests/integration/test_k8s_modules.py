"""k8s_apply and k8s_wait against the local control plane (real kube-apiserver, upstream CRDs)."""

from __future__ import annotations

import uuid

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
