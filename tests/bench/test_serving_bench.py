"""Converge and no-op re-run of each example site vs `kubectl apply --server-side` of the same objects.

Figures are printed (run with -s), not asserted: the goal is at most 3x kubectl. Readiness waits are
excluded from the converge figure (the time the k8s_apply and k8s_wait tasks spent waiting is
subtracted once: waits of clusters that run side by side overlap and count once).
Each side gets its own fresh control plane of the site's profile, one per cluster where the site has
several that would collide on one plane (the sovereign and burst clusters, the edge fleet's Single
Node sites), and stopped when the site's test ends. Both sides create the same objects from nothing;
with several clusters, ansible-playbook runs them with its forks and kubectl runs one apply per
cluster at the same time. The no-op is timed as a user runs it (ansible-playbook, readiness checks
included), median of three runs, against the median of three kubectl re-applies of the live objects
the playbook applied.
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from controlplane import artifacts
from controlplane.cluster import ControlPlane

from tests.bench.bench_helpers import (
    count_files,
    export_applied,
    timed_cli_playbook,
    timed_kubectl_apply,
    timed_playbook,
)
from tests.serving_helpers import EXAMPLES, INVENTORIES, PLAYBOOKS

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROWS: list[str] = []
NOOP_RUNS = 3


# Inventories whose clusters must not share one plane, so each cluster gets its own (its host_vars
# point k8s_kubeconfig at it), as it has in the field:
# - the sovereign and burst clusters each hold a ScaledObject of the same name and namespace with
#   different triggers, so on one plane the two runs would rewrite each other's;
# - the edge fleet's sites are Single Node clusters of their own: on one plane, three sites would
#   apply the same names one after another (forks 1) or race (forks > 1), and kubectl would be
#   timed on one site's objects against the playbook's three.
SEPARATE_PLANES = {"example-sovereign-burst", "example-edge-fleet"}


def _inventory_with_planes(inventory: str, planes: dict, dest: Path) -> Path:
    target = dest / inventory
    shutil.copytree(INVENTORIES / inventory, target)
    for host, plane in planes.items():
        hv = target / "host_vars" / f"{host}.yml"
        hv.parent.mkdir(exist_ok=True)
        with hv.open("a") as fh:
            fh.write(f"\nk8s_kubeconfig: {plane.kubeconfig}\n")
    return target


def _hosts(inventory: str) -> list[str]:
    return sorted(cli.site_intents(str(INVENTORIES / inventory), None))


def _kubectl_side_by_side(jobs: list) -> dict:
    """Wall seconds of `kubectl apply --server-side` to every (plane, manifests) at once, and the rcs."""
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        runs = list(pool.map(lambda job: timed_kubectl_apply(*job), jobs))
    return {"wall": time.monotonic() - start, "rcs": [rc for run in runs for rc in run["rcs"]]}


@pytest.fixture
def planes():
    """Start fresh control planes for one site, stopped when its test ends (a bench of every example
    keeps up to 4 planes at a time, not the 18 of the whole run)."""
    with contextlib.ExitStack() as stack:
        yield lambda profile: stack.enter_context(ControlPlane(profile))


@pytest.mark.parametrize("inventory", sorted(EXAMPLES))
def test_converge_vs_kubectl(planes, tmp_path, inventory):
    profile = EXAMPLES[inventory]
    render_dir = tmp_path / "render"
    rendered = timed_playbook(
        PLAYBOOKS / "site.yml",
        INVENTORIES / inventory,
        extravars={"delivery": "render", "render_dir": str(render_dir), "report_dir": str(tmp_path / "rep")},
    )
    assert rendered["rc"] == 0, rendered["tail"]

    if inventory in SEPARATE_PLANES:
        ours = {h: planes(profile) for h in _hosts(inventory)}
        site, kubeconfig = _inventory_with_planes(inventory, ours, tmp_path / "inv"), None
    else:
        ours = {None: planes(profile)}
        site, kubeconfig = INVENTORIES / inventory, ours[None].kubeconfig
    # the site's pvc:// weights, staged as its storage team would before a converge (not timed)
    intents = cli.site_intents(str(INVENTORIES / inventory), None)
    for host, intent in intents.items():
        artifacts.stage(ours[host if host in ours else None].new_api_client(), intent)
    # the staged weights' namespace exists before the first converge: the site adopts it
    adopt = artifacts.adopted(intents.values())
    run = {"kubeconfig": kubeconfig, "extravars": {"report_dir": str(tmp_path / "rep"), "adopt": adopt}}
    first = timed_playbook(PLAYBOOKS / "site.yml", site, **run)
    assert first["rc"] == 0, first["tail"]
    again = timed_playbook(PLAYBOOKS / "site.yml", site, **run)
    assert again["rc"] == 0, again["tail"]
    # the no-op as a user runs it: ansible-playbook itself, readiness checks included; the median of
    # NOOP_RUNS (one run on a 2-core machine varies by +-20 %)
    noops = [timed_cli_playbook(PLAYBOOKS / "site.yml", site, **run) for _ in range(NOOP_RUNS)]
    for cli_run in noops:
        assert cli_run["rc"] == 0 and cli_run["changed"] == 0, cli_run["tail"]
    cli_run = {"wall": statistics.median(r["wall"] for r in noops), "changed": 0}

    # kubectl gets exactly what the playbook applied to each plane, as live objects, on fresh planes
    # of the same profile; with several clusters, one kubectl per cluster, all at once (as the
    # playbook's forks run the clusters)
    jobs = []
    objects = 0
    for key, plane in ours.items():
        refs = [r for r in first["applied"] if key is None or r[0] == key]
        manifests = export_applied(plane, refs, tmp_path / "applied" / str(key or "all"))
        objects += count_files(manifests)
        jobs.append((planes(profile), manifests))
    k1 = _kubectl_side_by_side(jobs)
    again_k = [_kubectl_side_by_side(jobs) for _ in range(NOOP_RUNS)]
    k2 = {"wall": statistics.median(r["wall"] for r in again_k), "rcs": [rc for r in again_k for rc in r["rcs"]]}

    converge = first["wall"] - first["waits"]
    noop = again["wall"] - again["waits"]
    row = (
        f"{inventory:20s} objects={objects:3d} (rendered {count_files(render_dir)})  "
        f"converge {converge:6.1f} s "
        f"(waits {first['waits']:.1f} s excluded) vs kubectl {k1['wall']:5.2f} s = {converge / k1['wall']:5.1f}x | "
        f"no-op {cli_run['wall']:6.1f} s (ansible-playbook, median of {NOOP_RUNS}, changed=0) vs kubectl "
        f"{k2['wall']:5.2f} s = {cli_run['wall'] / k2['wall']:5.1f}x; via ansible-runner, waits excluded {noop:6.1f} s"
        + (f"; {len(ours)} planes" if len(ours) > 1 else "")
    )
    ROWS.append(row)
    print("\n" + row)
    for rc, err in k1["rcs"] + k2["rcs"]:
        assert rc == 0, err
