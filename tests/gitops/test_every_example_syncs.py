"""Every other example site's GitOps tree synced by Argo CD v3.5.1 to Healthy through all its waves (issue 34 item
3), each on a plane of its own, with the Argo CD configuration the tree ships. The chat site (with the second sync
and self-heal) is tests/gitops/test_argocd_sync.py, the sovereign burst's two clusters
tests/gitops/test_sovereign_two_clusters.py; a site of several clusters (the edge fleet) syncs its first one here:
their trees differ only by the cluster's own values. Each plane is of the profile the site's hardware matches, with
the site's ``pvc://`` weights staged first (tests/controlplane/artifacts.py), as its README says; KServe's controller
makes each LLMInferenceService Ready, which the tree's health check waits for.

Marker ``heavy`` (``make pytest-heavy``, not ``make test``): four plane starts and four Argo CDs beside make test's
other sessions took the 2-core CI machine over its budget at stop 40 (the whole run 70 minutes, CPU-bound).
"""

from __future__ import annotations

import pytest
from controlplane import artifacts

from tests.serving_helpers import EXAMPLES

from .harness import GitServer
from .tree import Synced, render

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.heavy]

COVERED = {"example-chat", "example-sovereign-burst"}  # the two modules named above
SITES = sorted(set(EXAMPLES) - COVERED)
SYNC_SECONDS = 900


@pytest.mark.parametrize("site", SITES)
def test_the_example_tree_syncs_to_healthy_through_every_wave(site, cluster_factory, tmp_path):
    git = GitServer(tmp_path).start()
    synced = None
    try:
        intents = render(site, git.work, git.url)
        git.commit(f"the {site} site's tree")
        host = sorted(intents)[0]
        plane = cluster_factory(EXAMPLES[site], name=f"gitops-{site}")  # the profile its hardware matches
        artifacts.stage(plane.new_api_client(), intents[host])  # its pvc:// weights, as the README stages them
        synced = Synced(plane, git, intents, host, tmp_path / "argocd").wait(SYNC_SECONDS)
        apps = {a["metadata"]["name"]: a for a in synced.argo.applications()}
        waves = sorted(int(apps[n]["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]) for n in synced.names)
        # each wave's Application was created (by the app-of-apps) no earlier than the previous wave's
        created = [apps[n]["metadata"]["creationTimestamp"] for n in sorted(synced.names, key=lambda n: int(
            apps[n]["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]))]  # fmt: skip
        assert created == sorted(created), created
        print(
            f"FIGURE argocd-example {site} {host}: {len(synced.names)} Applications (waves {waves[0]}-{waves[-1]}) "
            f"Synced+Healthy in {synced.seconds:.0f} s"
        )
    finally:
        if synced:
            synced.stop()
        git.stop()
        cluster_factory.release(f"gitops-{site}")
