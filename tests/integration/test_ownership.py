"""Never destroy what the site did not create (issue 23), against the real API server.

- A namespace that existed before the site, holding a user's object: the converge stops before its first write
  (naming the namespace and the ``adopt`` entry); with the namespace adopted it converges; a teardown, with or
  without the ``adopt`` entry, leaves the namespace and the user's object as they were (the object byte for byte,
  the namespace without a trace of the site's labels).
- Two hosts of one site that reach one API server: preflight stops, naming both, before anything is applied;
  ``same_cluster_as`` on both says it is meant.
"""

from __future__ import annotations

import pytest
from kubernetes import dynamic
from kubernetes.client.rest import ApiException

from tests.ansible_run import run_playbook
from tests.serving_helpers import EXAMPLES, INVENTORIES, PLAYBOOKS

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NS = "team-chat"
VOLATILE = ("resourceVersion", "managedFields", "generation")


def _core(cluster, kind):
    return dynamic.DynamicClient(cluster.new_api_client()).resources.get(api_version="v1", kind=kind)


def _get(cluster, kind, name, namespace=None):
    try:
        return _core(cluster, kind).get(name=name, namespace=namespace).to_dict()
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _stable(obj):
    """An object without what the API server changes on every write of anyone (for the namespace: our apply)."""
    meta = {k: v for k, v in obj["metadata"].items() if k not in VOLATILE}
    return {**obj, "metadata": meta}


def _run(playbook, cluster, tmp_path, **extra):
    return run_playbook(
        PLAYBOOKS / playbook,
        INVENTORIES / "example-chat",
        kubeconfig=cluster.kubeconfig,
        extravars={"report_dir": str(tmp_path / "reports"), "serving_namespace": NS, **extra},
    )


def test_a_users_namespace_survives_converge_and_teardown(cluster_factory, tmp_path):
    cluster = cluster_factory(EXAMPLES["example-chat"])
    _core(cluster, "Namespace").create(
        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": {"team": "chat"}}}
    )
    theirs = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "their-config", "namespace": NS, "annotations": {"owner": "team-chat"}},
        "data": {"prompt": "keep me"},
    }
    _core(cluster, "ConfigMap").create(body=theirs, namespace=NS)
    ns_before = _stable(_get(cluster, "Namespace", NS))
    cm_before = _get(cluster, "ConfigMap", "their-config", NS)
    try:
        # not adopted: refused before the first write of the site (its platform included), naming the fix
        refused = _run("site.yml", cluster, tmp_path)
        assert refused.rc != 0
        msg = refused.failure_messages()
        assert f"Namespace/{NS} (not created by inference.blueprints)" in msg, msg
        assert f'adopt: ["Namespace/{NS}"]' in msg, msg
        assert refused.results_of("inference.blueprints.k8s_apply") == [] or all(
            not o.get("action") or o["action"] == "unchanged"
            for r in refused.results_of("inference.blueprints.k8s_apply")
            for o in r.get("objects", [])
        ), "the refused run wrote objects"
        assert _stable(_get(cluster, "Namespace", NS)) == ns_before

        adopt = {"adopt": [f"Namespace/{NS}"]}
        done = _run("site.yml", cluster, tmp_path, **adopt)
        assert done.rc == 0, done.failure_messages() or done.stdout[-4000:]
        live_ns = _get(cluster, "Namespace", NS)
        assert "inference.blueprints/created-by" not in (live_ns["metadata"].get("annotations") or {})

        # a teardown that forgot the adopt entry still deletes nothing of the user's
        forgot = _run("teardown.yml", cluster, tmp_path)
        assert forgot.rc == 0, forgot.failure_messages() or forgot.stdout[-4000:]
        assert _get(cluster, "Namespace", NS) is not None
        kept = [
            o
            for r in forgot.results_of("inference.blueprints.k8s_apply")
            for o in r.get("objects", [])
            if o["kind"] == "Namespace" and o["name"] == NS
        ]
        assert kept and kept[0]["action"] == "kept", kept

        done = _run("site.yml", cluster, tmp_path, **adopt)
        assert done.rc == 0, done.failure_messages() or done.stdout[-4000:]
        gone = _run("teardown.yml", cluster, tmp_path, **adopt)
        assert gone.rc == 0, gone.failure_messages() or gone.stdout[-4000:]
        assert _get(cluster, "ConfigMap", "their-config", NS) == cm_before  # byte for byte, resourceVersion too
        assert _stable(_get(cluster, "Namespace", NS)) == ns_before  # the site's labels given back
        llmisvc = dynamic.DynamicClient(cluster.new_api_client()).resources.get(
            api_version="serving.kserve.io/v1alpha2", kind="LLMInferenceService"
        )
        assert llmisvc.get(namespace=NS).items == [], "the site's own objects were not removed"
    finally:
        _core(cluster, "Namespace").delete(name=NS)


def test_two_hosts_on_one_cluster_stop_preflight_naming_both(cluster_factory, tmp_path):
    cluster = cluster_factory(EXAMPLES["example-chat"])
    site = INVENTORIES / "example-sovereign-burst"
    run = run_playbook(
        PLAYBOOKS / "site.yml",
        site,
        kubeconfig=cluster.kubeconfig,
        extravars={"report_dir": str(tmp_path / "reports")},
    )
    assert run.rc != 0
    msg = run.failure_messages()
    assert "hosts burst-aws-1, onprem-fra-1 reach the same cluster (" in msg, msg
    assert "same_cluster_as" in msg, msg
    applied = [o for r in run.results_of("inference.blueprints.k8s_apply") for o in r.get("objects", [])]
    assert not applied, f"preflight let {len(applied)} object(s) through"
    # said to be meant: preflight passes (the preflight tag alone: nothing is applied)
    meant = run_playbook(
        PLAYBOOKS / "site.yml",
        site,
        kubeconfig=cluster.kubeconfig,
        tags="preflight",
        extravars={
            "report_dir": str(tmp_path / "reports"),
            "preflight_fail_on_unmet": False,
            "same_cluster_as": ["burst-aws-1", "onprem-fra-1"],
        },
    )
    assert meant.rc == 0, meant.failure_messages() or meant.stdout[-3000:]
