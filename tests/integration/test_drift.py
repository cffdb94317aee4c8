"""playbooks/drift.yml against out-of-band edits on the local control plane (issue 12).

The rag site's serving stage is applied into its own namespace, then five edits are made with
kubectl, as another field manager would: a scale, an image patched in, an engine argument
changed, a label added, an object deleted. drift.yml must report each with its object and field
and fail; with -e drift_fix=true it takes everything back, after which it reports nothing.
"""

from __future__ import annotations

import json

import pytest

from tests.ansible_run import run_playbook
from tests.serving_helpers import INVENTORIES, PLAYBOOKS

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NS = "drift-test"
SITE = "example-rag"
EXTRA = {"serving_namespace": NS, "model_service_wait": False}


def _drift(cluster, **extra):
    return run_playbook(
        PLAYBOOKS / "drift.yml", INVENTORIES / SITE, kubeconfig=cluster.kubeconfig, extravars={**EXTRA, **extra}
    )


def _found(run) -> list[dict]:
    results = run.results_of("inference.blueprints.k8s_drift")
    return [d for r in results for d in r.get("drift", [])]


def _kubectl(cluster, *args):
    proc = cluster.kubectl(*args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture
def drift_namespace(cluster):
    """The namespace the test applies the rag site's serving stage into, deleted after it: its service names a
    Gateway this plane does not have, and KServe's controller re-reconciles such a service every 2 s (0.8 s of
    CPU each) for as long as it exists, which slowed every later test of the session."""
    yield NS
    cluster.kubectl("delete", "namespace", NS, "--wait=false", "--ignore-not-found")


def test_drift_reports_every_out_of_band_edit_and_fixes_it(cluster, drift_namespace):
    applied = run_playbook(
        PLAYBOOKS / "serving.yml", INVENTORIES / SITE, kubeconfig=cluster.kubeconfig, extravars=EXTRA
    )
    assert applied.rc == 0, applied.failure_messages() or applied.stdout[-3000:]

    clean = _drift(cluster)
    assert clean.rc == 0, clean.failure_messages()
    assert _found(clean) == [], _found(clean)

    svc = json.loads(_kubectl(cluster, "get", "llminferenceservice", "qwen-rag", "-n", NS, "-o", "json"))
    env = svc["spec"]["template"]["containers"][0]["env"]
    args_index = next(i for i, e in enumerate(env) if e["name"] == "VLLM_ADDITIONAL_ARGS")
    _kubectl(
        cluster, "patch", "llminferenceservice", "qwen-rag", "-n", NS, "--type=merge", "-p", '{"spec":{"replicas":5}}'
    )
    edits = [
        {"op": "add", "path": "/spec/template/containers/0/image", "value": "quay.io/someone/vllm:latest"},
        {"op": "replace", "path": f"/spec/template/containers/0/env/{args_index}/value", "value": "--max-num-seqs=1"},
    ]
    _kubectl(cluster, "patch", "llminferenceservice", "qwen-rag", "-n", NS, "--type=json", "-p", json.dumps(edits))
    _kubectl(cluster, "label", "llminferenceservice", "qwen-rag", "-n", NS, "team=someone-else")
    _kubectl(cluster, "delete", "prometheusrule", "qwen-rag-slo", "-n", NS)

    drifted = _drift(cluster)
    assert drifted.rc != 0, "drift.yml must fail when it finds drift"
    found = {(d["object"].split(" ", 1)[1].split(" ", 1)[0], d["field"]): d for d in _found(drifted)}
    svc_ref = f"{NS}/qwen-rag"
    expected = {
        (svc_ref, "spec.replicas"): (5, svc["spec"].get("replicas")),
        (svc_ref, "spec.template.containers[name=main].image"): ("quay.io/someone/vllm:latest", None),
        (svc_ref, "spec.template.containers[name=main].env[name=VLLM_ADDITIONAL_ARGS].value"): (
            "--max-num-seqs=1",
            None,
        ),
        (svc_ref, "metadata.labels[team]"): ("someone-else", None),
        (f"{NS}/qwen-rag-slo", "(the object)"): ("absent", "present"),
    }
    for key, (live, intended) in expected.items():
        assert key in found, f"not reported: {key}; reported: {sorted(found)}; {drifted.failure_messages()}"
        assert found[key]["live"] == live, found[key]
        if key[1] != "spec.template.containers[name=main].env[name=VLLM_ADDITIONAL_ARGS].value":
            assert found[key]["intended"] == intended, found[key]
        else:  # the intended value is our engine arguments
            assert found[key]["intended"].startswith("--"), found[key]
    assert "kubectl" in " ".join(found[(svc_ref, "spec.replicas")].get("owners", [])), found[(svc_ref, "spec.replicas")]
    assert "qwen-rag-slo" in drifted.failure_messages()

    fixed = _drift(cluster, drift_fix=True)
    assert fixed.rc == 0, fixed.failure_messages()
    after = _drift(cluster)
    assert after.rc == 0 and _found(after) == [], _found(after)
