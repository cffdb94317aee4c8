"""Several sites on one cluster (issue 31 item 3), against the real API server.

example-chat and a second chat site (its own site_name, serving namespace and ModelCar image, a smaller load)
converge on one control plane, the second with no ``adopt`` entry: it claims the platform objects the first
created (module_utils/claims.py). The PinnedImageSet then pins both sites' ModelCars; the first site converges
again with nothing changed; a second site whose shared settings differ is refused before anything is applied,
naming both sites and the field. Tearing down the first site leaves the second's pin and every shared object;
tearing down the second leaves no object that carries the collection's annotations, and a user's objects made
beforehand are untouched.
"""

from __future__ import annotations

import shutil

import pytest
import yaml
from kubernetes import dynamic
from kubernetes.client.rest import ApiException

from tests.ansible_run import run_playbook
from tests.serving_helpers import EXAMPLES, INVENTORIES, PLAYBOOKS

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

CHAT_IMAGE = "registry.redhat.io/rhai/modelcar-qwen3-5-35b-a3b-fp8-dynamic@sha256:"
OTHER_IMAGE = "registry.example.com/team-b/modelcar-qwen3-5-35b-a3b-fp8-dynamic@sha256:" + "b" * 64
PINS = ("machineconfiguration.openshift.io/v1", "PinnedImageSet", "inference-blueprints-worker")
PREFIXES = ("inference.blueprints/created-by", "inference.blueprints/claimed-by.")
# objects of a user's, made before any site: no site may change or delete them
USER_PINS = {
    "apiVersion": "machineconfiguration.openshift.io/v1",
    "kind": "PinnedImageSet",
    "metadata": {"name": "their-pins", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
    "spec": {"pinnedImages": [{"name": "registry.example.com/theirs@sha256:" + "c" * 64}]},
}
USER_CM = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "their-config", "namespace": "default"},
    "data": {"keep": "me"},
}
VOLATILE = ("resourceVersion", "managedFields", "generation")


def _second_site(tmp_path):
    """A copy of example-chat: another site_name, serving namespace and ModelCar, one H100's worth of traffic."""
    inv = tmp_path / "team-b"
    shutil.copytree(INVENTORIES / "example-chat", inv)
    path = inv / "group_vars" / "all" / "site.yml"
    site = yaml.safe_load(path.read_text())
    model = site["models"][0]
    site.update(site_name="team-b-chat", serving_namespace="llm-team-b")
    model.update(name="team-b-chat", artifact={"uri": f"oci://{OTHER_IMAGE}"})
    model["traffic"].update(concurrent_sessions=200, arrival_rate_rps=2)
    model["slo"].update(tpot_p95_ms=60)
    path.write_text(yaml.safe_dump(site, sort_keys=False))
    return inv


def _run(playbook, inventory, cluster, tmp_path, **kw):
    extra = kw.pop("extravars", {})
    return run_playbook(
        PLAYBOOKS / playbook,
        inventory,
        kubeconfig=cluster.kubeconfig,
        extravars={"report_dir": str(tmp_path / "reports"), **extra},
        **kw,
    )


def _ok(run):
    assert run.rc == 0, run.failure_messages() or run.stdout[-4000:]
    return run


def _res(cluster, api_version, kind):
    return dynamic.DynamicClient(cluster.new_api_client()).resources.get(api_version=api_version, kind=kind)


def _get(cluster, api_version, kind, name, namespace=None):
    try:
        return _res(cluster, api_version, kind).get(name=name, namespace=namespace).to_dict()
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _pins(cluster):
    live = _get(cluster, *PINS)
    return sorted(p["name"] for p in live["spec"]["pinnedImages"]) if live else None


def _stable(obj):
    return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k not in VOLATILE}}


def _census(cluster):
    """Every object on the API server that carries the collection's annotations (created-by or a claim)."""
    client = dynamic.DynamicClient(cluster.new_api_client())
    found = []
    for res in client.resources.search():
        if "list" not in (res.verbs or []) or "/" in res.name or res.kind.endswith("List"):
            continue
        try:
            items = res.get().to_dict().get("items") or []
        except ApiException:
            continue
        for item in items:
            notes = (item.get("metadata") or {}).get("annotations") or {}
            if any(k.startswith(PREFIXES) for k in notes):
                meta = item["metadata"]
                found.append(f"{res.kind}/{meta.get('namespace') or ''}/{meta['name']}")
    return sorted(set(found))


def test_two_sites_share_the_platform_and_leave_it_one_after_the_other(cluster_factory, tmp_path):
    cluster = cluster_factory(EXAMPLES["example-chat"], name="multisite")
    try:
        _shared_platform(cluster, tmp_path)
    finally:
        cluster_factory.release("multisite")


def _shared_platform(cluster, tmp_path):  # noqa: PLR0915 - one story, in order
    chat, team_b = INVENTORIES / "example-chat", _second_site(tmp_path)
    _res(cluster, "machineconfiguration.openshift.io/v1", "PinnedImageSet").create(body=USER_PINS)
    _res(cluster, "v1", "ConfigMap").create(body=USER_CM, namespace="default")
    theirs = [_stable(_get(cluster, "machineconfiguration.openshift.io/v1", "PinnedImageSet", "their-pins"))]
    theirs.append(_stable(_get(cluster, "v1", "ConfigMap", "their-config", "default")))

    _ok(_run("site.yml", chat, cluster, tmp_path))
    assert any(p.startswith(CHAT_IMAGE) for p in _pins(cluster)), _pins(cluster)

    # a second site whose shared settings differ: refused before anything is applied, naming both and the field
    clash = _run("site.yml", team_b, cluster, tmp_path, extravars={"openshift_ai_dashboard": False})
    assert clash.rc != 0
    msg = clash.failure_messages()
    assert "DataScienceCluster/default-dsc spec.components.dashboard.managementState" in msg, msg
    assert "site 'team-b-chat' sets \"Removed\", site(s) 'example-chat' set \"Managed\"" in msg, msg
    assert _get(cluster, "v1", "Namespace", "llm-team-b") is None
    assert OTHER_IMAGE not in _pins(cluster)

    # check mode of the second site's platform: no refusal, nothing written
    _ok(_run("platform.yml", team_b, cluster, tmp_path, check=True))
    assert OTHER_IMAGE not in _pins(cluster)

    # the second site, with no adopt: it claims what the first created; both ModelCars are pinned
    _ok(_run("site.yml", team_b, cluster, tmp_path))
    pins = _pins(cluster)
    assert OTHER_IMAGE in pins and any(p.startswith(CHAT_IMAGE) for p in pins), pins
    policy = _get(cluster, "nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy")
    notes = policy["metadata"]["annotations"]
    assert notes["inference.blueprints/created-by"] == "example-chat"
    assert {"inference.blueprints/claimed-by.example-chat", "inference.blueprints/claimed-by.team-b-chat"} <= set(notes)
    # RDMA stays on: example-chat's P/D moves KV over RDMA, whatever the second site needs
    assert policy["spec"]["driver"]["rdma"]["enabled"] is True

    # the first site converges again: nothing to change, its claim and the union intact
    again = _ok(_run("site.yml", chat, cluster, tmp_path))
    assert again.changed == 0, [r[1] for r in again.results if r[4].get("changed")]
    assert _pins(cluster) == pins

    # the first site leaves: its pin and its claims go, the shared objects stay for the second
    _ok(_run("teardown.yml", chat, cluster, tmp_path))
    left = _pins(cluster)
    assert left is not None and OTHER_IMAGE in left and not any(p.startswith(CHAT_IMAGE) for p in left), left
    assert _get(cluster, "nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy") is not None
    sub = _get(cluster, "operators.coreos.com/v1alpha1", "Subscription", "rhods-operator", "redhat-ods-operator")
    assert sub is not None and not any(k.endswith(".example-chat") for k in sub["metadata"]["annotations"])
    assert _get(cluster, "gateway.networking.k8s.io/v1", "GatewayClass", "openshift-default") is not None
    assert _get(cluster, "v1", "Namespace", "llm-chat") is None
    # the second site still converges with nothing to change
    still = _ok(_run("site.yml", team_b, cluster, tmp_path))
    assert still.changed == 0, [r[1] for r in still.results if r[4].get("changed")]

    # the last site leaves: nothing of the collection remains; the user's objects are as they were
    _ok(_run("teardown.yml", team_b, cluster, tmp_path))
    assert _census(cluster) == []
    assert _get(cluster, *PINS) is None
    assert _stable(_get(cluster, "machineconfiguration.openshift.io/v1", "PinnedImageSet", "their-pins")) == theirs[0]
    assert _stable(_get(cluster, "v1", "ConfigMap", "their-config", "default")) == theirs[1]
