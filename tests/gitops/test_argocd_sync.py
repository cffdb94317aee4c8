"""Argo CD v3.5.1's application controller and repo server sync the example chat site's GitOps tree on a
local control plane, with the health checks and sync timeout the tree ships (tests/gitops/harness.py says what
is the test's own). One plane and one Argo CD for the module.

- every wave syncs to Healthy: the app-of-apps creates each component's Application in its sync wave and
  waits for it to be Healthy before the next (the tree's Application health check), so the last wave
  (serving_autoscaling's ScaledObject, which reads observability's token Secret) is reached only in order;
- a second sync changes nothing (no object's spec generation moves);
- a hand edit is drift: self-heal (on in the tree) takes it back.
"""

from __future__ import annotations

import json
import time

import pytest

from .harness import GitServer
from .tree import Synced, render, wait_healthy
from .tree import live as deployed

pytestmark = [pytest.mark.cluster]

SITE, HOST = "example-chat", "chat-east-1"
SYNC_SECONDS = 900


@pytest.fixture(scope="module")
def synced(cluster_factory, tmp_path_factory):
    plane = cluster_factory(name="gitops-argocd")
    root = tmp_path_factory.mktemp("argocd")
    git = GitServer(root).start()
    site = None
    try:
        intents = render(SITE, git.work, git.url)
        git.commit("the example chat site's tree")
        site = Synced(plane, git, intents, HOST, root / "argocd")
        site.wait(SYNC_SECONDS)
        yield {"plane": plane, "argo": site.argo, "git": git, "intents": intents, "apps": site.apps,
               "names": site.names, "seconds": site.seconds}  # fmt: skip
    finally:
        if site:
            site.stop()
        git.stop()
        cluster_factory.release("gitops-argocd")


def test_every_wave_syncs_to_healthy_in_order(synced):
    apps = {a["metadata"]["name"]: a for a in synced["apps"]}
    assert synced["names"] <= set(apps)
    waves = sorted((int(a["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]), n) for n, a in apps.items())
    # each wave's Application was created (by the app-of-apps' sync) no earlier than the previous wave's
    created = [apps[n]["metadata"]["creationTimestamp"] for _w, n in waves if n in synced["names"]]
    assert created == sorted(created)
    print(f"argocd: {len(apps)} Applications Synced+Healthy in {synced['seconds']:.0f} s")


def _generations(plane, argo) -> dict:
    """Each deployed object's spec generation; an Application's spec itself (its CRD has no status subresource, so
    Argo CD's status writes move its generation)."""
    return {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): (
            json.dumps(o["spec"], sort_keys=True) if o["kind"] == "Application" else o["metadata"].get("generation")
        )
        for a in argo.applications()
        for o in deployed(plane, a)
    }


def test_a_second_sync_changes_nothing(synced):
    plane, argo = synced["plane"], synced["argo"]
    before = _generations(plane, argo)
    root_name = synced["intents"][HOST]["gitops"]["root"]["name"]
    root = next(a for a in argo.applications() if a["metadata"]["name"] == root_name)
    started = ((root.get("status") or {}).get("operationState") or {}).get("startedAt") or ""
    # a hard refresh and a sync of the unchanged revision
    res = plane.kubectl("annotate", "--overwrite", "-n", argo.namespace, "application", root["metadata"]["name"],
                        "argocd.argoproj.io/refresh=hard")  # fmt: skip
    assert res.returncode == 0, res.stderr
    op = {"operation": {"initiatedBy": {"username": "test"}, "sync": {"revision": "main"}}}
    res = plane.kubectl("patch", "-n", argo.namespace, "application", root["metadata"]["name"], "--type=merge",
                        "-p", json.dumps(op))  # fmt: skip
    assert res.returncode == 0, res.stderr
    # the app-of-apps syncs wave by wave, each child Application waited for to be Healthy: 74 s in CI at stop 37,
    # over 120 s at stop 39 (a loaded machine); a wait, not a figure
    end = time.monotonic() + 300
    while time.monotonic() < end:
        r = next(a for a in argo.applications() if a["metadata"]["name"] == root["metadata"]["name"])
        # this sync's own operation state (initiated by "test", started after the last one), finished: the
        # history's length is no sign, it stops growing at the Application's revision history limit (10)
        state = (r.get("status") or {}).get("operationState") or {}
        ours = state.get("operation", {}).get("initiatedBy", {}).get("username") == "test"
        if ours and state.get("startedAt", "") > started and state.get("finishedAt") and not r.get("operation"):
            assert state["phase"] == "Succeeded", state
            break
        time.sleep(1)
    else:
        raise AssertionError(f"the second sync did not finish:\n{argo.tail()}")
    wait_healthy(argo, synced["names"], 120)
    after = _generations(plane, argo)
    assert after == before


def test_a_hand_edit_is_drift_and_self_heal_takes_it_back(synced):
    plane, argo = synced["plane"], synced["argo"]
    app = next(a for a in argo.applications() if a["metadata"]["name"].endswith("-serving-autoscaling"))
    scaled = next(o for o in deployed(plane, app) if o["kind"] == "ScaledObject")
    ns, name, want = scaled["metadata"]["namespace"], scaled["metadata"]["name"], scaled["spec"]["maxReplicaCount"]
    res = plane.kubectl("patch", "scaledobject.keda.sh", name, "-n", ns, "--type=merge", "--field-manager=hand",
                        "-p", json.dumps({"spec": {"maxReplicaCount": want + 5}}))  # fmt: skip
    assert res.returncode == 0, res.stderr
    end = time.monotonic() + 120
    while time.monotonic() < end:
        live = json.loads(plane.kubectl("get", "scaledobject.keda.sh", name, "-n", ns, "-o", "json").stdout)
        if live["spec"]["maxReplicaCount"] == want:
            break
        time.sleep(1)
    else:
        raise AssertionError(f"self-heal did not revert {name}:\n{argo.tail()}")
    # taken back by a sync of Argo CD's own (self-heal: automated, started after the edit), not by anyone else; the
    # field is back before the sync records its result (the application controller writes it in a later pass)
    before, end = app["status"]["operationState"], time.monotonic() + 120
    while True:
        healed = next(a for a in argo.applications() if a["metadata"]["name"] == app["metadata"]["name"])
        op = healed["status"]["operationState"]
        if (op["startedAt"] > before["startedAt"] and op.get("finishedAt")) or time.monotonic() > end:
            break
        time.sleep(1)
    assert op["startedAt"] > before["startedAt"] and op["operation"]["initiatedBy"].get("automated"), op
    assert op["phase"] == "Succeeded" and any(r["name"] == name for r in op["syncResult"]["resources"]), op
