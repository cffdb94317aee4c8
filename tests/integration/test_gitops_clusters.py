"""GitOps per cluster, on two control planes (issue 26, finding 1): the sovereign-burst site written with
delivery=gitops and each cluster bootstrapped on its own plane.

How the apply is done: the tree is written by the product (plugin_utils/gitops.py). On each plane the test
runs the bootstrap the docs give, `kubectl kustomize argocd/<cluster>` (the real kubectl and its kustomize)
applied server-side. Kinds the local plane cannot hold (the ArgoCD health-check patch, whose argocd-operator
CRD the module proxy does not serve, and the platform kinds tests/serving_helpers.py lists) are left out of
every apply and every count. Then the test plays Argo CD's application controller, and only that: every
Application on the plane whose destination is the plane (Argo CD's in-cluster) is synced by building its
source path with `kubectl kustomize` and applying the result server-side as `argocd-controller` (Argo CD's
field manager with ServerSideApply=true), each object stamped with Argo CD v3's tracking annotation
(`argocd.argoproj.io/tracking-id: <app>:<group>/<kind>:<namespace>/<name>`, util/argo/resource_tracking.go),
and its sync status set to Synced; the app-of-apps' Applications are picked up as they appear, in sync-wave
order. No Argo CD runs: waves are not gated on health and nothing is retried.

Then, per plane: no object is part of two Applications (counted from the manifests each Application synced and
from the live tracking annotations), the live objects are exactly that cluster's tree, the ScaledObjects keep
their own minimums (zero on the burst cluster, the planned replicas on-prem), and drift.yml's GitOps play
finds nothing; once the other cluster's Application takes one object (what the layout of earlier releases did
at every sync), drift.yml names it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.plugin_utils import gitops

from tests.ansible_run import run_playbook
from tests.serving_helpers import INVENTORIES, LOCAL_SCHEMA_GAPS, NOT_SERVED_LOCALLY

pytestmark = [pytest.mark.cluster]

SITE = INVENTORIES / "example-sovereign-burst"
PLAYBOOKS = INVENTORIES.parent / "playbooks"
SOV, BURST = "onprem-fra-1", "burst-aws-1"
GITOPS = {"delivery": "gitops", "gitops": {"repo_url": "https://git.example.com/platform/sites.git"}}
TRACKING = "argocd.argoproj.io/tracking-id"
MANAGER = "argocd-controller"
# kinds the local plane cannot hold (no CRD, or an older CRD than the target version's fields): left out of
# every apply and every count (tests/serving_helpers.py says why for each)
NOT_SERVED = set(NOT_SERVED_LOCALLY) | set(LOCAL_SCHEMA_GAPS)


def _key(obj: dict) -> tuple:
    group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
    return (group, obj["kind"], obj["metadata"].get("namespace") or "", obj["metadata"]["name"])


def _kustomize(plane, directory: Path) -> list[dict]:
    res = plane.kubectl("kustomize", str(directory))
    assert res.returncode == 0, res.stderr
    return [d for d in yaml.safe_load_all(res.stdout) if d]


def _apply(plane, objs: list[dict], manager: str) -> None:
    if not objs:
        return
    res = plane.kubectl(
        "apply", "--server-side", f"--field-manager={manager}", "--force-conflicts", "-f", "-",
        input=yaml.safe_dump_all(objs, sort_keys=False),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr


def _applications(plane, namespace: str) -> list[dict]:
    res = plane.kubectl("get", "applications.argoproj.io", "-n", namespace, "-o", "json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["items"]


class ArgoCD:
    """Argo CD's application controller as far as these tests need it (see the module docstring)."""

    def __init__(self, plane, repo: Path, namespace: str):
        self.plane, self.repo, self.namespace = plane, repo, namespace
        self.synced: dict[str, list[tuple]] = {}  # Application -> keys of the objects it synced

    def sync_all(self) -> None:
        while True:
            pending = [a for a in _applications(self.plane, self.namespace) if a["metadata"]["name"] not in self.synced]
            if not pending:
                return
            wave = lambda a: int((a["metadata"].get("annotations") or {}).get("argocd.argoproj.io/sync-wave", "0"))  # noqa: E731
            for app in sorted(pending, key=lambda a: (wave(a), a["metadata"]["name"])):
                self.sync(app)

    def sync(self, app: dict) -> None:
        name = app["metadata"]["name"]
        assert app["spec"]["destination"]["server"] == "https://kubernetes.default.svc", name
        objs = [
            o
            for o in _kustomize(self.plane, self.repo / app["spec"]["source"]["path"])
            if _key(o)[:2] not in NOT_SERVED
        ]
        for o in objs:
            k = _key(o)
            o["metadata"].setdefault("annotations", {})[TRACKING] = f"{name}:{k[0]}/{k[1]}:{k[2]}/{k[3]}"
        _apply(self.plane, objs, MANAGER)
        self.synced[name] = [_key(o) for o in objs]
        status = {"status": {"sync": {"status": "Synced", "revision": "HEAD"}, "health": {"status": "Healthy"}}}
        res = self.plane.kubectl(
            "patch", "applications.argoproj.io", name, "-n", self.namespace, "--type", "merge", "-p", json.dumps(status)
        )
        assert res.returncode == 0, res.stderr

    def live_owner(self, key: tuple) -> str | None:
        group, kind, ns, name = key
        resource = f"{kind.lower()}.{group}" if group else kind.lower()
        args = ["get", resource, name, "-o", "json"] + (["-n", ns] if ns else [])
        res = self.plane.kubectl(*args)
        assert res.returncode == 0, (key, res.stderr)
        value = (json.loads(res.stdout)["metadata"].get("annotations") or {}).get(TRACKING, "")
        return value.split(":", 1)[0] or None


@pytest.fixture(scope="module")
def gitops_planes(cluster_factory):
    """The two clusters' planes, this module's own: stopped after it."""
    yield {SOV: cluster_factory(name="gitops-onprem"), BURST: cluster_factory(name="gitops-burst")}
    cluster_factory.release("gitops-onprem")
    cluster_factory.release("gitops-burst")


@pytest.fixture(scope="module")
def synced(gitops_planes, tmp_path_factory):
    repo = tmp_path_factory.mktemp("llm-sites")
    intents = cli.site_intents(str(SITE), None, {**GITOPS, "render_dir": str(repo)})
    gitops.write(str(repo), gitops.site_tree(intents))
    planes = gitops_planes
    argo = {}
    for host, plane in planes.items():
        ns = intents[host]["gitops"]["argocd_namespace"]
        plane.kubectl("create", "namespace", ns)
        # the bootstrap of the docs: oc apply --server-side -k argocd/<cluster>, on that cluster
        boot = [o for o in _kustomize(plane, repo / "argocd" / host) if _key(o)[:2] not in NOT_SERVED]
        assert {o["kind"] for o in boot} == {"AppProject", "Application"}
        _apply(plane, boot, "kubectl")
        argo[host] = ArgoCD(plane, repo, ns)
        argo[host].sync_all()
    return intents, repo, planes, argo


def test_each_cluster_syncs_its_own_tree_and_no_object_belongs_to_two_applications(synced):
    intents, repo, planes, argo = synced
    for host, a in argo.items():
        assert f"example-sovereign-burst-{host}" in a.synced, "the cluster's own root"
        other = BURST if host == SOV else SOV
        assert not [n for n in a.synced if other in n], f"{host} synced an Application of {other}"
        owners: dict[tuple, set[str]] = {}
        for app, keys in a.synced.items():
            for k in keys:
                owners.setdefault(k, set()).add(app)
        shared = {k: v for k, v in owners.items() if len(v) > 1}
        assert not shared, (host, shared)
        # and live: each object's tracking annotation names the one Application that synced it
        wrong = [(k, a.live_owner(k), next(iter(v))) for k, v in owners.items() if a.live_owner(k) != next(iter(v))]
        assert not wrong, (host, wrong)
        # the live objects are exactly this cluster's tree
        mine = {
            _key(yaml.safe_load(p.read_text()))
            for p in (repo / "clusters" / host).rglob("*.yaml")
            if p.name != "kustomization.yaml"
        }
        assert set(owners) == {k for k in mine if k[:2] not in NOT_SERVED}, host


def test_each_cluster_converges_to_its_own_plan(synced):
    intents, _, planes, _ = synced
    for host, plane in planes.items():
        ns = intents[host]["serving"]["namespace"]
        live = json.loads(plane.kubectl("get", "scaledobjects.keda.sh", "-n", ns, "-o", "json").stdout)["items"]
        mins = {o["metadata"]["name"]: o["spec"].get("minReplicaCount") for o in live}
        model = intents[host]["serving"]["models"][0]
        if host == BURST:
            assert mins == {model["names"]["scaledobject"]: 0}
        else:
            assert mins[model["names"]["scaledobject"]] >= 1
        routes = json.loads(plane.kubectl("get", "httproutes", "-n", ns, "-o", "json").stdout)["items"]
        names = {r["metadata"]["name"] for r in routes}
        front = intents[SOV]["burst"]["front_door"]["route"]["name"]
        assert (front in names) == (host == SOV)


def _inventory(tmp_path: Path, planes: dict) -> Path:
    inv = tmp_path / "inventory"
    shutil.copytree(SITE, inv)
    for host, plane in planes.items():
        hv = inv / "host_vars" / f"{host}.yml"
        data = yaml.safe_load(hv.read_text()) or {}
        data["k8s_kubeconfig"] = str(plane.kubeconfig)
        hv.write_text(yaml.safe_dump(data))
    return inv


def test_drift_finds_nothing_then_names_the_object_another_application_took(synced, tmp_path):
    intents, repo, planes, argo = synced
    inv = _inventory(tmp_path, planes)
    extra = {**GITOPS, "render_dir": str(repo)}
    clean = run_playbook(PLAYBOOKS / "drift.yml", inv, extravars=extra)
    assert clean.rc == 0, clean.failure_messages()
    # the on-prem cluster's model-service Application takes the burst cluster's LLMInferenceService, as the
    # combined root of earlier releases made it do at every sync
    model = intents[BURST]["serving"]["models"][0]["name"]
    ns = intents[BURST]["serving"]["namespace"]
    app = next(a["name"] for a in intents[SOV]["gitops"]["apps"] if a["component"] == "model_service")
    value = f"{app}:serving.kserve.io/LLMInferenceService:{ns}/{model}"
    patch = json.dumps({"metadata": {"annotations": {TRACKING: value}}})
    res = planes[BURST].kubectl("patch", "llminferenceservice", model, "-n", ns, "--type", "merge", "-p", patch)
    assert res.returncode == 0, res.stderr
    found = run_playbook(PLAYBOOKS / "drift.yml", inv, extravars=extra)
    assert found.rc != 0
    msg = found.failure_messages()
    assert BURST in str(found.failures()) and model in msg and app in msg and TRACKING in msg, msg
    assert SOV not in [f[0] for f in found.failures()], "the on-prem cluster has no drift"


def test_the_bootstrap_of_earlier_releases_made_the_clusters_fight(synced, tmp_path):
    """What the one combined root did: the burst plane's Argo CD also syncs the on-prem tree, and the
    objects both trees name (the LLMInferenceService, the ScaledObject) end up with two owners."""
    intents, repo, planes, _ = synced
    plane = planes[BURST]
    ns = intents[BURST]["gitops"]["argocd_namespace"]
    other_root = [o for o in _kustomize(plane, repo / "argocd" / SOV) if o["kind"] == "Application"]
    _apply(plane, other_root, "kubectl")
    fight = ArgoCD(plane, repo, ns)
    fight.sync_all()
    owners: dict[tuple, set[str]] = {}
    for app, keys in fight.synced.items():
        for k in keys:
            owners.setdefault(k, set()).add(app)
    kinds = {k[1] for k, v in owners.items() if len(v) > 1}
    assert {"LLMInferenceService", "ScaledObject"} <= kinds
