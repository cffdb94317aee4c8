"""The sovereign burst site's two clusters, each synced by its own Argo CD v3.5.1 from the one Git repository
(issue 34 item 3): two control planes, two Argo CDs, one repository holding both clusters' trees.

- each cluster's app-of-apps syncs its own tree to Healthy through all its waves;
- each plane holds only what its own tree says: no Application of one cluster points into the other's tree, and
  no object of the other cluster's tree (the burst cluster's scale-from-zero trigger on the sovereign's queue,
  the sovereign's front door) reaches it;
- they stay settled: once both are Healthy, nothing either Argo CD deployed changes for FIGHT_SECONDS and neither
  starts a new sync operation (an object two Applications claim, or a diff that never settles, would show as a
  change or a new sync here);
- each converges to its own plan: the burst cluster's ScaledObject scales from zero, the on-prem one keeps a
  replica, the front door's route is on the sovereign cluster only;
- drift.yml's GitOps play finds nothing on either; once another Application's tracking id takes one object of the
  burst cluster (what the combined root of earlier releases did at every sync; that cluster's Argo CD stopped
  first, so its self-heal does not take it back), drift.yml names the object, the Application and the cluster.
"""

from __future__ import annotations

import json
import shutil
import time

import pytest
import yaml

from tests.ansible_run import run_playbook
from tests.serving_helpers import INVENTORIES

from .harness import GitServer
from .tree import Synced, live, render

pytestmark = [pytest.mark.cluster]

SITE = "example-sovereign-burst"
SOV, BURST = "onprem-fra-1", "burst-aws-1"
PLAYBOOKS = INVENTORIES.parent / "playbooks"
TRACKING = "argocd.argoproj.io/tracking-id"
SYNC_SECONDS = 900
FIGHT_SECONDS = 30


@pytest.fixture(scope="module")
def clusters(cluster_factory, tmp_path_factory):
    root = tmp_path_factory.mktemp("argocd-two")
    git = GitServer(root).start()
    synced: dict[str, Synced] = {}
    planes: dict[str, object] = {}
    try:
        intents = render(SITE, git.work, git.url)
        git.commit("the sovereign burst site's trees")
        for host in sorted(intents):
            planes[host] = cluster_factory(name=f"gitops-{host}")
            synced[host] = Synced(planes[host], git, intents, host, root / f"argocd-{host}")
        for s in synced.values():
            s.wait(SYNC_SECONDS)
        yield {"git": git, "intents": intents, "synced": synced, "root": root}
    finally:
        for s in synced.values():
            s.stop()
        git.stop()
        for host in planes:
            cluster_factory.release(f"gitops-{host}")


def _deployed(s: Synced) -> dict[tuple, dict]:
    """(kind, namespace, name) -> the live object, of everything the cluster's Applications deployed."""
    return {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
        for app in s.argo.applications()
        for o in live(s.plane, app)
    }


def _tree(git, paths: list[str], groups: dict | None = None) -> set[tuple]:
    """(kind, namespace, name) of every object under the given directories of the repository; ``groups`` collects
    each kind's API group."""
    out = set()
    for p in paths:
        for f in sorted((git.work / p).glob("*.yaml")):
            if f.name == "kustomization.yaml":
                continue
            for d in yaml.safe_load_all(f.read_text()):
                if d:
                    out.add((d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]))
                    if groups is not None:
                        groups[d["kind"]] = d["apiVersion"].rpartition("/")[0]
    return out


def _absent(plane, groups: dict, key: tuple) -> bool:
    """The object is not on the plane at all (whoever would have put it there)."""
    kind, ns, name = key
    resource = f"{kind}.{groups[kind]}" if groups.get(kind) else kind
    res = plane.kubectl("get", resource, name, *(["-n", ns] if ns else []), "-o", "name")
    return res.returncode != 0 and ("NotFound" in res.stderr or "doesn't have a resource type" in res.stderr)


def test_each_cluster_syncs_its_own_tree_to_healthy(clusters):
    for host, s in clusters["synced"].items():
        apps = {a["metadata"]["name"]: a for a in s.argo.applications()}
        assert s.names <= set(apps), (host, s.names - set(apps))
        print(f"FIGURE argocd-two-clusters {host}: {len(apps)} Applications Synced+Healthy in {s.seconds:.0f} s")


def test_each_plane_holds_only_its_own_tree(clusters):
    git, synced = clusters["git"], clusters["synced"]
    paths = {h: [a["path"] for a in s.gitops["apps"] if (git.work / a["path"]).is_dir()] for h, s in synced.items()}
    for host, s in synced.items():
        others = [h for h in synced if h != host]
        for app in s.argo.applications():
            path = app["spec"]["source"]["path"]
            assert not any(path in paths[o] for o in others), f"{host}'s Argo CD syncs {path}, another cluster's"
        groups: dict = {}
        mine = _tree(git, paths[host], groups)
        theirs = set().union(*(_tree(git, paths[o], groups) for o in others)) - mine
        deployed = set(_deployed(s))
        assert theirs, f"the other cluster's tree is empty: nothing to tell the clusters apart ({paths})"
        assert not deployed & theirs, f"{host} holds the other cluster's objects: {sorted(deployed & theirs)[:5]}"
        assert mine <= deployed, f"{host} lacks objects of its own tree: {sorted(mine - deployed)[:5]}"
        # on the plane itself, not only in what this cluster's Argo CD lists
        present = [k for k in sorted(theirs) if not _absent(s.plane, groups, k)]
        assert not present, f"{host}'s plane holds objects of the other cluster's tree: {present[:5]}"


def test_the_two_argo_cds_do_not_fight(clusters):
    synced = clusters["synced"]

    def state() -> dict:
        out = {}
        for host, s in synced.items():
            for key, obj in _deployed(s).items():
                if key[0] == "Application":  # no status subresource: its status writes move the generation
                    out[(host, *key)] = json.dumps(obj["spec"], sort_keys=True)
                else:
                    out[(host, *key)] = obj["metadata"].get("generation") or obj["metadata"]["resourceVersion"]
            for app in s.argo.applications():
                op = (app.get("status") or {}).get("operationState") or {}
                out[(host, "sync", app["metadata"]["name"])] = op.get("startedAt")
        return out

    before = state()
    time.sleep(FIGHT_SECONDS)
    after = state()
    moved = {k: (before.get(k), after.get(k)) for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert not moved, f"objects or syncs moved in {FIGHT_SECONDS} s with both clusters Healthy: {moved}"


def test_each_cluster_converges_to_its_own_plan(clusters):
    intents, synced = clusters["intents"], clusters["synced"]
    front = intents[SOV]["burst"]["front_door"]["route"]["name"]
    for host, s in synced.items():
        ns = intents[host]["serving"]["namespace"]
        live = json.loads(s.plane.kubectl("get", "scaledobjects.keda.sh", "-n", ns, "-o", "json").stdout)["items"]
        mins = {o["metadata"]["name"]: o["spec"].get("minReplicaCount") for o in live}
        scaler = intents[host]["serving"]["models"][0]["names"]["scaledobject"]
        assert (mins[scaler] == 0) == (host == BURST), (host, mins)
        routes = json.loads(s.plane.kubectl("get", "httproutes", "-n", ns, "-o", "json").stdout)["items"]
        assert (front in {r["metadata"]["name"] for r in routes}) == (host == SOV), host


def _inventory(tmp_path, synced: dict):
    inv = tmp_path / "inventory"
    shutil.copytree(INVENTORIES / SITE, inv)
    for host, s in synced.items():
        hv = inv / "host_vars" / f"{host}.yml"
        data = yaml.safe_load(hv.read_text()) or {}
        data["k8s_kubeconfig"] = str(s.plane.kubeconfig)
        hv.write_text(yaml.safe_dump(data))
    return inv


def test_drift_finds_nothing_then_names_the_object_another_application_took(clusters, tmp_path):
    """Last in the module: it stops the burst cluster's Argo CD."""
    intents, synced, git = clusters["intents"], clusters["synced"], clusters["git"]
    inv = _inventory(tmp_path, synced)
    extra = {"delivery": "gitops", "gitops": {"repo_url": git.url, "revision": "main"}, "render_dir": str(git.work)}
    clean = run_playbook(PLAYBOOKS / "drift.yml", inv, extravars=extra)
    assert clean.rc == 0, clean.failure_messages()
    synced[BURST].stop()  # its self-heal would take the object back
    model = intents[BURST]["serving"]["models"][0]["name"]
    ns = intents[BURST]["serving"]["namespace"]
    app = next(a["name"] for a in intents[SOV]["gitops"]["apps"] if a["component"] == "model_service")
    value = f"{app}:serving.kserve.io/LLMInferenceService:{ns}/{model}"
    patch = json.dumps({"metadata": {"annotations": {TRACKING: value}}})
    res = synced[BURST].plane.kubectl("patch", "llminferenceservice", model, "-n", ns, "--type", "merge", "-p", patch)
    assert res.returncode == 0, res.stderr
    found = run_playbook(PLAYBOOKS / "drift.yml", inv, extravars=extra)
    assert found.rc != 0
    msg = found.failure_messages()
    assert BURST in str(found.failures()) and model in msg and app in msg and TRACKING in msg, msg
    assert SOV not in [f[0] for f in found.failures()], "the on-prem cluster has no drift"
