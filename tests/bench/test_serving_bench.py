"""Converge and no-op re-run of each example site vs `kubectl apply --server-side` of the same objects.

Figures are printed (run with -s), not asserted: target at most 2x kubectl. Readiness waits are
excluded from the converge figure (the time spent in k8s_wait is measured and subtracted).
Each side gets its own fresh control plane of the site's profile, so both create the same objects
from nothing.
"""

from __future__ import annotations

import pytest

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

    ours = cluster_factory(profile, name=f"bench-ansible-{inventory}")
    first = timed_playbook(
        PLAYBOOKS / "site.yml",
        INVENTORIES / inventory,
        kubeconfig=ours.kubeconfig,
        extravars={"report_dir": str(tmp_path / "rep")},
        forks=forks,
    )
    assert first["rc"] == 0, first["tail"]
    again = timed_playbook(
        PLAYBOOKS / "site.yml",
        INVENTORIES / inventory,
        kubeconfig=ours.kubeconfig,
        extravars={"report_dir": str(tmp_path / "rep")},
        forks=forks,
    )
    assert again["rc"] == 0, again["tail"]
    # the no-op as a user runs it: ansible-playbook itself, readiness checks included
    cli = timed_cli_playbook(
        PLAYBOOKS / "site.yml",
        INVENTORIES / inventory,
        kubeconfig=ours.kubeconfig,
        extravars={"report_dir": str(tmp_path / "rep")},
        forks=forks,
    )
    assert cli["rc"] == 0 and cli["changed"] == 0, cli["tail"]

    # kubectl gets exactly what the playbook applied to our plane (every cluster of the inventory
    # is on it), as live objects
    manifests = export_applied(ours, first["applied"], tmp_path / "applied")
    theirs = cluster_factory(profile, name=f"bench-kubectl-{inventory}")
    k1 = timed_kubectl_apply(theirs, manifests)
    k2 = timed_kubectl_apply(theirs, manifests)

    converge = first["wall"] - first["waits"]
    noop = again["wall"] - again["waits"]
    row = (
        f"{inventory:20s} objects={count_files(manifests):3d} (rendered {count_files(render_dir)})  "
        f"converge {converge:6.1f} s "
        f"(waits {first['waits']:.1f} s excluded) vs kubectl {k1['wall']:5.2f} s = {converge / k1['wall']:5.1f}x | "
        f"no-op {cli['wall']:6.1f} s (ansible-playbook, changed={cli['changed']}) vs kubectl {k2['wall']:5.2f} s = "
        f"{cli['wall'] / k2['wall']:5.1f}x; via ansible-runner, waits excluded {noop:6.1f} s"
    )
    ROWS.append(row)
    print("\n" + row)
    for rc, err in k1["rcs"] + k2["rcs"]:
        assert rc == 0, err
