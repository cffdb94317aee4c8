"""Faults from operators and the API (docs/reliability.md, "Faults"): each ends in a clear message
and the run is safe to run again.

The stage-level scenario runs the real ``site.yml`` of the example chat site against the package's
control plane (real kube-apiserver, RBAC, admission) and injects, one after the other:

1. an operator that never becomes ready (the status simulator's ``neverReady`` list holds the GPU
   operator's Subscription back; operator waits shortened to 4 s): the run fails with a timeout
   naming the object, the condition waited for and the status last seen;
2. an admission refusal (a ValidatingAdmissionPolicy, enforced by the kube-apiserver itself, that
   refuses LLMInferenceServices in the serving namespace): the run fails naming the policy, the
   object and the policy's reason;
3. another field manager owning a field the collection sets (server-side apply as ``someone-else``
   first): the stage takes the field over (``force_conflicts`` defaults to true) and says so in
   the object's managedFields; the run converges;

and then a plain re-run converges and changes nothing. Cheaper module-level playbooks cover what a
stage cannot be made to meet on this control plane: a kind whose CRD is missing, an SSA conflict
without ``force_conflicts`` (HTTP 409) and HTTP 429 (the control plane runs with priority and
fairness off, so a loopback front that always answers 429 stands in for a throttling server).
"""

from __future__ import annotations

import contextlib
import http.server
import json
import re
import sys
import threading
import uuid
from pathlib import Path

import pytest
import yaml

from tests.reliability import results
from tests.reliability.harness import (
    PLAYBOOKS,
    TRACEBACK,
    ansible_env,
    ansible_playbook,
    copy_inventory,
    delete_namespace,
)
from tests.reliability.test_teardown import changed_count

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SITE = "example-chat"
# every component whose operator the platform stage waits for: the wait's deadline is the longest
# any of them asks for (intent/waits.py timeout_of)
OPERATOR_COMPONENTS = ("gpu_operator", "nfd", "network_operator", "openshift_ai", "autoscaling", "image_prewarm")
OPERATOR_TIMEOUTS = [f"{c}_timeout=4" for c in OPERATOR_COMPONENTS]


def sim_never_ready(plane, entries: list[str]) -> None:
    plane.ensure(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "sim-config", "namespace": "sim-system"},
            "data": {"neverReady": "\n".join(entries)},
        }
    )


def admission_policy(name: str, namespace: str) -> list[dict]:
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["serving.kserve.io"],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["llminferenceservices"],
                    }
                ]
            },
            "validations": [{"expression": "false", "message": "change freeze: no new model services"}],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}},
        },
    }
    return [policy, binding]


def serving_namespace(inventory: Path) -> str:
    for p in sorted(inventory.glob("group_vars/**/*.yml")):
        doc = yaml.safe_load(p.read_text()) or {}
        if isinstance(doc, dict) and doc.get("serving_namespace"):
            return doc["serving_namespace"]
    return "llm-serving"


def assert_clear(result, *fragments: str) -> str:
    assert result.rc != 0, result.output[-3000:]
    err = result.error_text()
    assert err, result.output[-3000:]
    for f in fragments:
        assert re.search(f, err), f"{f!r} not in the error:\n{err[:3000]}"
    assert not TRACEBACK.search(result.output), result.output[-3000:]
    return err


def test_stage_faults_end_clearly_and_a_rerun_converges(plane, tmp_path):
    census = plane.census
    inventory = copy_inventory(SITE, tmp_path)
    env = ansible_env(plane.kubeconfig)
    base = [f"report_dir={tmp_path / 'reports'}"]
    ns = serving_namespace(inventory)
    figures: dict[str, dict] = {}
    policy = f"rel-freeze-{uuid.uuid4().hex[:6]}"
    try:
        # 1. an operator that never becomes ready
        sim_never_ready(plane, ["Subscription/gpu-operator-certified"])
        r = ansible_playbook(PLAYBOOKS / "site.yml", inventory, env=env, extravars=base + OPERATOR_TIMEOUTS)
        err = assert_clear(
            r, r"timed out after \d+ s", r"Subscription \S*gpu-operator-certified", r"waited for", r"last saw"
        )
        figures["operator_never_ready"] = {"clear": True, "seconds": round(r.seconds, 1), "message": err[:400]}
        sim_never_ready(plane, [])

        # 2. an admission policy refuses the model service
        for obj in admission_policy(policy, ns):
            plural = {"ValidatingAdmissionPolicy": "validatingadmissionpolicies"}.get(obj["kind"], "")
            plane.call(
                "POST", f"/apis/admissionregistration.k8s.io/v1/{plural or 'validatingadmissionpolicybindings'}", obj
            )
        r = ansible_playbook(PLAYBOOKS / "site.yml", inventory, env=env, extravars=base)
        err = assert_clear(
            r,
            rf"admission policy {policy}",
            r"denied \w+ of LLMInferenceService",
            "change freeze: no new model services",
        )
        figures["admission_refusal"] = {"clear": True, "seconds": round(r.seconds, 1), "message": err[:400]}
        for kind in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
            plane.call("DELETE", f"/apis/admissionregistration.k8s.io/v1/{kind}/{policy}")

        # 3. another field manager owns a field the stage sets: converged once, then someone
        # else takes the serving namespace's managed-by label; the stage takes it back
        r = ansible_playbook(PLAYBOOKS / "site.yml", inventory, env=env, extravars=base)
        assert r.rc == 0, r.output[-3000:]
        label = "app.kubernetes.io/managed-by"
        plane.call(
            "PATCH",
            f"/api/v1/namespaces/{ns}?fieldManager=someone-else&force=true",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {label: "someone-else"}}},
            content_type="application/apply-patch+yaml",
        )
        r = ansible_playbook(PLAYBOOKS / "site.yml", inventory, env=env, extravars=base)
        assert r.rc == 0, r.output[-3000:]
        live = plane.call("GET", f"/api/v1/namespaces/{ns}")
        assert live["metadata"]["labels"][label] == "inference-blueprints", live["metadata"]["labels"]
        owners = [m["manager"] for m in live["metadata"]["managedFields"] if label in json.dumps(m.get("fieldsV1"))]
        assert owners == ["inference-blueprints"], owners
        figures["field_manager_conflict"] = {"clear": True, "taken_over": True, "seconds": round(r.seconds, 1)}

        # and a re-run changes nothing
        before = census.total()
        r = ansible_playbook(PLAYBOOKS / "site.yml", inventory, env=env, extravars=base)
        assert r.rc == 0, r.output[-3000:]
        assert changed_count(r.output) == 0, r.output[-3000:]
        assert census.total() == before
        figures["rerun"] = {"changed": 0, "seconds": round(r.seconds, 1)}
    finally:
        sim_never_ready(plane, [])
        for kind in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
            with contextlib.suppress(Exception):  # gone already
                plane.call("DELETE", f"/apis/admissionregistration.k8s.io/v1/{kind}/{policy}")
        ansible_playbook(PLAYBOOKS / "teardown.yml", inventory, env=env)
        for k, v in figures.items():
            results.record("faults", k, v)


# ---------------------------------------------------------------------------- module-level faults
def play(tasks: list[dict]) -> str:
    return yaml.safe_dump([{"name": "Fault", "hosts": "localhost", "gather_facts": False, "tasks": tasks}])


def run_play(tmp_path: Path, tasks: list[dict], kubeconfig: str):
    pb = tmp_path / f"play-{uuid.uuid4().hex[:6]}.yml"
    pb.write_text(play(tasks))
    inv = tmp_path / "hosts"
    inv.write_text("localhost ansible_connection=local\n")
    env = ansible_env(kubeconfig)
    return ansible_playbook(pb, inv, env=env, extravars=[f"ansible_python_interpreter={sys.executable}"])


def apply_task(objects: list[dict], **extra) -> dict:
    return {"name": "Apply", "inference.blueprints.k8s_apply": {"objects": objects, **extra}}


def test_missing_crd_names_the_kind_and_that_nothing_serves_it(plane, tmp_path):
    ns = "rel-" + uuid.uuid4().hex[:6]
    objs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {"apiVersion": "widgets.nowhere.example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": ns}},
    ]
    before = plane.census.total()
    r = run_play(tmp_path, [apply_task(objs)], plane.kubeconfig)
    err = assert_clear(
        r, "does not serve Widget in widgets.nowhere.example.com/v1", "nothing on this cluster provides API group"
    )
    written = plane.census.total() - before
    results.record("faults", "crd_missing", {"clear": True, "objects_written": written, "message": err[:400]})
    assert written == 0, "the Namespace was written before the unserved kind was found"


def test_conflict_without_force_is_a_clear_409_and_a_rerun_is_safe(plane, tmp_path):
    ns = "rel-" + uuid.uuid4().hex[:6]
    plane.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": ns}}
    plane.call(
        "PATCH",
        f"/api/v1/namespaces/{ns}/configmaps/cfg?fieldManager=someone-else",
        {**cm, "data": {"key": "theirs"}},
        content_type="application/apply-patch+yaml",
    )
    mine = {**cm, "data": {"key": "ours"}}
    try:
        r = run_play(tmp_path, [apply_task([mine], force_conflicts=False)], plane.kubeconfig)
        err = assert_clear(
            r,
            rf"conflict applying ConfigMap {ns}/cfg",
            r"\.data\.key",
            'conflict with "someone-else"',
            "force_conflicts",
        )
        assert plane.call("GET", f"/api/v1/namespaces/{ns}/configmaps/cfg")["data"] == {"key": "theirs"}
        again = run_play(tmp_path, [apply_task([mine], force_conflicts=False)], plane.kubeconfig)
        assert_clear(again, rf"conflict applying ConfigMap {ns}/cfg")
        results.record("faults", "conflict_409", {"clear": True, "message": err[:400]})
    finally:
        delete_namespace(plane.census.api, ns)


class _Throttle(http.server.BaseHTTPRequestHandler):
    hits = 0

    def _answer(self):
        type(self).hits += 1
        body = json.dumps(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "reason": "TooManyRequests",
                "message": "too many requests, please try again later",
                "code": 429,
            }  # fmt: skip
        ).encode()
        self.send_response(429)
        self.send_header("Retry-After", "0")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PATCH = do_POST = do_DELETE = _answer  # noqa: N815

    def log_message(self, *args):
        pass


def test_throttling_429_is_retried_then_named(plane, tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Throttle)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = tmp_path / "throttled"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "t", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
                "users": [{"name": "t", "user": {"token": "not-a-secret"}}],
                "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}],
                "current-context": "t",
            }
        )
    )
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "default"}}
    try:
        r = run_play(tmp_path, [apply_task([cm])], str(kubeconfig))
    finally:
        server.shutdown()
    err = assert_clear(r, r"kept throttling GET /\S+ \(HTTP 429\) after 6 retries", "Run again when")
    results.record("faults", "throttled_429", {"clear": True, "requests": _Throttle.hits, "message": err[:400]})
    assert _Throttle.hits >= 7, f"{_Throttle.hits} requests: the 429 was not retried"
