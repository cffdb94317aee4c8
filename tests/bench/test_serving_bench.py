"""Converge and no-op re-run of each example site vs `kubectl apply --server-side` of the same objects.

Figures are printed (run with -s), not asserted: the goal is at most 3x kubectl. Readiness waits are
excluded from the converge figure (the time spent in k8s_wait is measured and subtracted).
Each side gets its own fresh control plane of the site's profile (one per cluster where two clusters'
objects would collide on one plane), so both create the same objects from nothing. The no-op is
timed as a user runs it (ansible-playbook, readiness checks included); kubectl applies the live
objects the playbook applied.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli

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


# Inventories whose clusters must not share one plane: the sovereign and burst clusters each hold a
# ScaledObject of the same name and namespace with different triggers, so on one plane the two runs
# rewrite each other's. Each cluster gets its own plane (its host_vars point k8s_kubeconfig at it).
SEPARATE_PLANES = {"example-sovereign-burst"}


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


@pytest.mark.parametrize("inventory", sorted(EXAMPLES))
def test_converge_vs_kubectl(cluster_factory, tmp_path, inventory):
    profile = EXAMPLES[inventory]
    forks = 1 if inventory == "example-edge-fleet" else 10
    render_dir = tmp_path / "render"
    rendered = timed_playbook(
        PLAYBOOKS / "site.yml",
        INVENTORIES / inventory,
        extravars={"delivery": "render", "render_dir": str(render_dir), "report_dir": str(tmp_path / "rep")},
        forks=forks,
    )
    assert rendered["rc"] == 0, rendered["tail"]

    if inventory in SEPARATE_PLANES:
        ours = {h: cluster_factory(profile, name=f"bench-ansible-{inventory}-{h}") for h in _hosts(inventory)}
        site, kubeconfig = _inventory_with_planes(inventory, ours, tmp_path / "inv"), None
    else:
        ours = {None: cluster_factory(profile, name=f"bench-ansible-{inventory}")}
        site, kubeconfig = INVENTORIES / inventory, ours[None].kubeconfig
    run = {"kubeconfig": kubeconfig, "extravars": {"report_dir": str(tmp_path / "rep")}, "forks": forks}
    first = timed_playbook(PLAYBOOKS / "site.yml", site, **run)
    assert first["rc"] == 0, first["tail"]
    again = timed_playbook(PLAYBOOKS / "site.yml", site, **run)
    assert again["rc"] == 0, again["tail"]
    # the no-op as a user runs it: ansible-playbook itself, readiness checks included
    cli_run = timed_cli_playbook(PLAYBOOKS / "site.yml", site, **run)
    assert cli_run["rc"] == 0 and cli_run["changed"] == 0, cli_run["tail"]

    # kubectl gets exactly what the playbook applied to each plane, as live objects, on fresh planes
    # of the same profile
    k1 = {"wall": 0.0, "rcs": []}
    k2 = {"wall": 0.0, "rcs": []}
    objects = 0
    for key, plane in ours.items():
        refs = [r for r in first["applied"] if key is None or r[0] == key]
        manifests = export_applied(plane, refs, tmp_path / "applied" / str(key or "all"))
        objects += count_files(manifests)
        theirs = cluster_factory(profile, name=f"bench-kubectl-{inventory}-{key or 'all'}")
        for total, one in ((k1, timed_kubectl_apply(theirs, manifests)), (k2, timed_kubectl_apply(theirs, manifests))):
            total["wall"] += one["wall"]
            total["rcs"] += one["rcs"]

    converge = first["wall"] - first["waits"]
    noop = again["wall"] - again["waits"]
    row = (
        f"{inventory:20s} objects={objects:3d} (rendered {count_files(render_dir)})  "
        f"converge {converge:6.1f} s "
        f"(waits {first['waits']:.1f} s excluded) vs kubectl {k1['wall']:5.2f} s = {converge / k1['wall']:5.1f}x | "
        f"no-op {cli_run['wall']:6.1f} s (ansible-playbook, changed={cli_run['changed']}) vs kubectl "
        f"{k2['wall']:5.2f} s = {cli_run['wall'] / k2['wall']:5.1f}x; via ansible-runner, waits excluded {noop:6.1f} s"
        + (f"; {len(ours)} planes" if len(ours) > 1 else "")
    )
    ROWS.append(row)
    print("\n" + row)
    for rc, err in k1["rcs"] + k2["rcs"]:
        assert rc == 0, err
