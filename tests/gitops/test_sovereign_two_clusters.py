"""The sovereign burst site's two clusters, each synced by its own Argo CD v3.5.1 from the one Git repository
(issue 34 item 3): two control planes, two Argo CDs, one repository holding both clusters' trees.

- each cluster's app-of-apps syncs its own tree to Healthy through all its waves;
- each plane holds only what its own tree says: no Application of one cluster points into the other's tree, and
  no object of the other cluster's tree (the burst cluster's scale-from-zero trigger on the sovereign's queue,
  the sovereign's front door) reaches it;
- they do not fight: once both are Healthy, nothing either Argo CD deployed changes for FIGHT_SECONDS, and
  neither starts a new sync operation.
"""

from __future__ import annotations

import json
import time

import pytest
import yaml

from .harness import GitServer
from .tree import Synced, render

pytestmark = [pytest.mark.cluster]

SITE = "example-sovereign-burst"
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
        yield {"git": git, "intents": intents, "synced": synced}
    finally:
        for s in synced.values():
            s.stop()
        git.stop()
        for host in planes:
            cluster_factory.release(f"gitops-{host}")


def _deployed(s: Synced) -> dict[tuple, dict]:
    """(kind, namespace, name) -> the live object, of everything the cluster's Applications deployed."""
    out = {}
    for app in s.argo.applications():
        for r in (app.get("status") or {}).get("resources") or []:
            kind = f"{r['kind']}.{r['group']}" if r.get("group") else r["kind"]
            args = ["get", kind, r["name"], "-o", "json"] + (["-n", r["namespace"]] if r.get("namespace") else [])
            res = s.plane.kubectl(*args)
            assert res.returncode == 0, res.stderr
            out[(r["kind"], r.get("namespace"), r["name"])] = json.loads(res.stdout)
    return out


def _tree(git, paths: list[str]) -> set[tuple]:
    """(kind, namespace, name) of every object under the given directories of the repository."""
    out = set()
    for p in paths:
        for f in sorted((git.work / p).glob("*.yaml")):
            if f.name == "kustomization.yaml":
                continue
            for d in yaml.safe_load_all(f.read_text()):
                if d:
                    out.add((d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]))
    return out


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
        mine = _tree(git, paths[host])
        theirs = set().union(*(_tree(git, paths[o]) for o in others)) - mine
        deployed = set(_deployed(s))
        assert theirs, f"the other cluster's tree is empty: nothing to tell the clusters apart ({paths})"
        assert not deployed & theirs, f"{host} holds the other cluster's objects: {sorted(deployed & theirs)[:5]}"
        assert mine <= deployed, f"{host} lacks objects of its own tree: {sorted(mine - deployed)[:5]}"


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
