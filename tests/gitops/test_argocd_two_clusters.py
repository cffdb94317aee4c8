"""The sovereign-burst site's two clusters, each on its own control plane with its own Argo CD (v3.5.1, real),
both reading one Git repository served on loopback: each syncs only its own tree (argocd/<cluster>
bootstrapped on that cluster), to Healthy, and they do not fight: once Healthy, no further sync operation
runs on either plane for several reconciliation periods, and every live object carries its own cluster's
Application in Argo CD's tracking annotation."""

from __future__ import annotations

import json
import time

import pytest

from .harness import GitServer
from .tree import Synced, render

pytestmark = [pytest.mark.cluster]

SITE = "example-sovereign-burst"
SOV, BURST = "onprem-fra-1", "burst-aws-1"
TRACKING = "argocd.argoproj.io/tracking-id"


@pytest.fixture(scope="module")
def clusters(cluster_factory, tmp_path_factory):
    root = tmp_path_factory.mktemp("argocd-two")
    git = GitServer(root).start()
    sites = {}
    try:
        intents = render(SITE, git.work, git.url)
        git.commit("the sovereign-burst site's tree")
        planes = {SOV: cluster_factory(name="gitops-argocd-onprem"), BURST: cluster_factory(name="gitops-argocd-burst")}
        for host, plane in planes.items():
            sites[host] = Synced(plane, git, intents, host, root / host)
        for site in sites.values():
            site.wait(900)
        yield sites
    finally:
        for site in sites.values():
            site.stop()
        git.stop()
        cluster_factory.release("gitops-argocd-onprem")
        cluster_factory.release("gitops-argocd-burst")


def _history(site: Synced) -> dict[str, int]:
    return {a["metadata"]["name"]: len((a.get("status") or {}).get("history") or []) for a in site.argo.applications()}


def test_each_cluster_syncs_only_its_own_tree_and_they_do_not_fight(clusters):
    for host, site in clusters.items():
        other = next(h for h in clusters if h != host)
        names = {a["metadata"]["name"] for a in site.argo.applications()}
        assert names == site.names, (host, sorted(names ^ site.names))
        assert not any(other in n for n in names), (host, sorted(names))
        for app in site.argo.applications():
            for r in (app.get("status") or {}).get("resources") or []:
                kind = f"{r['kind']}.{r['group']}" if r.get("group") else r["kind"]
                args = ["get", kind, r["name"], "-o", "json"] + (["-n", r["namespace"]] if r.get("namespace") else [])
                live = json.loads(site.plane.kubectl(*args, check=True).stdout)
                owner = (live["metadata"].get("annotations") or {}).get(TRACKING, "").split(":")[0]
                assert owner == app["metadata"]["name"], (host, kind, r["name"], owner)
    before = {h: _history(s) for h, s in clusters.items()}
    time.sleep(15)  # three reconciliation periods (5 s, tests/gitops/harness.py): a fight would sync again
    assert {h: _history(s) for h, s in clusters.items()} == before


def test_the_scaled_objects_keep_each_clusters_own_minimum(clusters):
    mins = {}
    for host, site in clusters.items():
        res = site.plane.kubectl("get", "scaledobjects.keda.sh", "-A", "-o", "json", check=True)
        mins[host] = sorted(o["spec"].get("minReplicaCount", 0) for o in json.loads(res.stdout)["items"])
    assert mins[BURST] and set(mins[BURST]) == {0}, mins
    assert mins[SOV] and min(mins[SOV]) >= 1, mins
