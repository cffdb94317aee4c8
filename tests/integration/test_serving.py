"""Converge an example site on the local control plane, with the real KServe controller.

``site.yml`` converges (plan -> platform -> serving -> verify) with every object accepted by
the API server under strict field validation and KServe's own admission webhooks; a second run
changes nothing; what KServe's controller made of the site is checked against the site's
deployment intent (tests/kserve_checks.py: workloads, scheduler, pool, route, monitors, Ready);
and a site whose planned GPUs the cluster does not have fails in preflight with nothing applied.
The molecule scenarios converge every other example site the same way.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from kubernetes import dynamic
from kubernetes.client.rest import ApiException

from tests import quiet
from tests.ansible_run import run_playbook
from tests.kserve_checks import check_intent
from tests.serving_helpers import (
    EXAMPLES,
    INVENTORIES,
    PLAYBOOKS,
    blueprint_of,
    blueprint_signature,
    check_engine_args,
    known_vllm_flags,
)
from tests.simulator.simulator import CSV_ENV, csv_object

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

QUIET_SECONDS = 20  # the issue asks 60 s; a loop like KServe's moves an object every ~2 s, 20 s shows it
SERVING_KINDS = [
    ("serving.kserve.io/v1alpha2", "LLMInferenceService"),
    ("inference.networking.k8s.io/v1", "InferencePool"),
    ("keda.sh/v1alpha1", "ScaledObject"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
]


@contextmanager
def _env(**values):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update({k: str(v) for k, v in values.items()})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _converge(inventory, cluster, tmp_path, **extra):
    # The fleet's sites share one local control plane here: apply them one at a time.
    forks = "1" if inventory == "example-edge-fleet" else "10"
    with _env(ANSIBLE_FORKS=forks):
        return run_playbook(
            PLAYBOOKS / "site.yml",
            INVENTORIES / inventory,
            kubeconfig=cluster.kubeconfig,
            extravars={"report_dir": str(tmp_path / "reports"), **extra},
        )


def _namespaces(inventory):
    return {h: i["serving"]["namespace"] for h, i in cli.site_intents(str(INVENTORIES / inventory), None).items()}


def _live(cluster, namespace):
    dyn = dynamic.DynamicClient(cluster.new_api_client())
    objs = []
    for api_version, kind in SERVING_KINDS:
        res = dyn.resources.get(api_version=api_version, kind=kind)
        objs += [o.to_dict() for o in res.get(namespace=namespace).items]
    return objs


# The molecule scenarios (make molecule) converge every example site the same way, with an
# idempotence step, the same KServe checks and a blueprint-specific verify; here the chat site
# (the richest: P/D, NIXL over RDMA, data parallelism through KServe's DP preset, a KV tier,
# speculative decoding) is converged and checked object by object.
@pytest.mark.parametrize("inventory", ["example-chat"])
def test_example_site_converges_idempotently(cluster_factory, tmp_path, inventory):
    cluster = cluster_factory(EXAMPLES[inventory])
    first = _converge(inventory, cluster, tmp_path)
    assert first.rc == 0, first.failure_messages() or first.stdout[-4000:]
    applied = [o for r in first.results_of("inference.blueprints.k8s_apply") for o in r.get("objects", [])]
    assert applied, "nothing was applied"
    assert {o["action"] for o in applied} <= {"created", "configured", "unchanged"}

    second = _converge(inventory, cluster, tmp_path)
    assert second.rc == 0, second.failure_messages() or second.stdout[-4000:]
    changed = [(r[0], r[1]) for r in second.results if r[3] == "ok" and r[4].get("changed")]
    assert second.changed == 0, f"second run changed: {changed}"

    flags = known_vllm_flags()
    for host, namespace in _namespaces(inventory).items():
        live = _live(cluster, namespace)
        svcs = [o for o in live if o["kind"] == "LLMInferenceService"]
        assert svcs, f"{host}: no LLMInferenceService in {namespace}"
        problems = [p for s in svcs for p in check_engine_args(s, flags)]
        assert not problems, "\n".join(problems)
        missing = blueprint_signature(live, blueprint_of(inventory))
        assert not missing, f"{host}: {missing}"
    dyn = dynamic.DynamicClient(cluster.new_api_client())
    for host, intent in cli.site_intents(str(INVENTORIES / inventory), None).items():
        problems = check_intent(dyn, intent)
        assert not problems, f"{host}: what KServe made of the site differs from its intent:\n" + "\n".join(problems)

    # quiet when converged (issue 33 item 3): no workload pod without an IP (KServe's certificate loop,
    # docs/upstream.md), and nothing the site or its controllers own moves while it is left alone
    intents = cli.site_intents(str(INVENTORIES / inventory), None)
    namespaces = sorted({i["serving"]["namespace"] for i in intents.values()})
    site = next(iter(intents.values()))["ownership"]["value"]
    kubectl = [str(cluster.binary), "kubectl", f"--kubeconfig={cluster.kubeconfig}"]
    noisy = quiet.check(kubectl, namespaces, site, QUIET_SECONDS)
    assert not noisy, f"not quiet for {QUIET_SECONDS} s once converged:\n" + "\n".join(noisy)


def test_preflight_fails_without_the_planned_gpus_and_applies_nothing(cluster_factory, tmp_path):
    # The chat site plans 2 x 8 H100; the single-node RTX PRO 6000 profile has none of them.
    cluster = cluster_factory("sno-rtx-pro-6000")
    run = _converge("example-chat", cluster, tmp_path)
    assert run.rc != 0
    failed = run.failures()
    assert failed, run.stdout[-3000:]
    host, task, action, status, result = failed[0]
    assert action == "inference.blueprints.cluster_facts", (task, action, result.get("msg"))
    assert "gpu" in str(result.get("msg", "")).lower() or "h100" in str(result.get("msg", "")).lower()
    assert run.results_of("inference.blueprints.k8s_apply") == [], "objects were applied before preflight failed"
    core = dynamic.DynamicClient(cluster.new_api_client()).resources.get(api_version="v1", kind="Namespace")
    with pytest.raises(ApiException) as err:
        core.get(name="llm-chat")
    assert err.value.status == 404


def test_plans_for_another_vllm_than_openshift_ais_presets_stop_at_preflight(cluster_factory, tmp_path):
    """OpenShift AI 3.5.0's CSV names the vLLM of its presets (0.24.0+rhaiv.9): a site planned for the default
    vLLM 0.33 stops at preflight with the fix, nothing applied; stating vllm_version 0.24.0 passes preflight (in
    check mode: the platform stage of a cluster that already runs the site would write nothing either way)."""
    cluster = cluster_factory(EXAMPLES["example-chat"])
    # as OLM installs rhods-operator.3.5.0: its deployment names the presets' engine (catalog/csv_env.yaml)
    csv = csv_object("engine-check", "rhods-operator.3.5.0", "3.5.0", CSV_ENV["rhods-operator.3.5.0"])
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "engine-check"}})
    cluster.kubectl("create", "-f", "-", input=json.dumps(csv), check=True)
    cluster.kubectl(
        "patch", "clusterserviceversion", "rhods-operator.3.5.0", "-n", "engine-check", "--subresource=status",
        "--type=merge", "-p", '{"status": {"phase": "Succeeded", "reason": "InstallSucceeded"}}', check=True,
    )  # fmt: skip
    try:
        run = _converge("example-chat", cluster, tmp_path)
        assert run.rc != 0
        host, _task, action, _status, result = run.failures()[0]
        assert action == "inference.blueprints.cluster_facts", (action, result.get("msg"))
        msg = str(result.get("msg"))
        assert "vLLM engine: the plans are written for vLLM 0.33.0 (the default; the site sets no vllm_version)" in msg
        assert "rhods-operator.3.5.0 (engine-check/rhods-operator.3.5.0) run vLLM 0.24.0+rhaiv.9" in msg, msg
        assert 'set vllm_version: "0.24.0"' in msg, msg
        assert run.results_of("inference.blueprints.k8s_apply") == [], "objects were applied before preflight failed"

        stated = run_playbook(
            PLAYBOOKS / "platform.yml",
            INVENTORIES / "example-chat",
            kubeconfig=cluster.kubeconfig,
            extravars={"report_dir": str(tmp_path / "reports"), "vllm_version": "0.24.0"},
            check=True,
        )
        assert stated.rc == 0, stated.failure_messages() or stated.stdout[-4000:]
        (read,) = stated.results_of("inference.blueprints.cluster_facts")
        assert read["unmet"] == [], read["unmet"]
        assert read["cluster_facts"]["csvs"]["engine-check/rhods-operator.3.5.0"]["engine"]["vllm_version"] == (
            "0.24.0+rhaiv.9"
        )
    finally:
        # the CSV first and waited for: the other tests of this control plane must not see its engine
        cluster.kubectl("delete", "clusterserviceversion", "rhods-operator.3.5.0", "-n", "engine-check", "--wait")
        cluster.kubectl("delete", "namespace", "engine-check", "--wait=false")
