"""Every process the tests start dies with its parent, even on SIGKILL (docs/reliability.md, "Processes").

A parent process (``process_parent.py``) starts the local control plane (kcp with its
kube-apiserver, etcd and kube-controller-manager; the KServe controller when the switch is on), a
guidellm mock server and an ``ansible-playbook`` run whose worker is busy; the test reads every
descendant PID from /proc, SIGKILLs the parent alone (not its group: nothing gets a signal but the
parent) and asserts that every one of those PIDs is gone within a few seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.controlplane import procutil
from tests.reliability import results
from tests.reliability.harness import ROOT

pytestmark = [pytest.mark.cluster]

# kcp runs etcd embedded and kube-apiserver and kube-controller-manager as its children
NEEDED = ("kcp run", "kcp apiserver", "kcp controller-manager", "mock-server", "ansible-playbook", "sleep 600")
GRACE = 10.0  # seconds for the kernel (PDEATHSIG) and the reaper to finish every child


def test_every_child_dies_when_the_parent_is_sigkilled(tmp_path):
    t0 = time.monotonic()
    log = open(tmp_path / "parent.log", "w")  # noqa: SIM115 - handed to the child
    parent = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "tests.reliability.process_parent", str(tmp_path)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # a signal to pytest's group must not reach it, nor ours its
    )
    log.close()
    pids_file = tmp_path / "pids.json"
    try:
        deadline = time.monotonic() + 300
        while not pids_file.exists():
            assert parent.poll() is None, "the parent exited early:\n" + (tmp_path / "parent.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the parent did not start its children in 300 s"
            time.sleep(0.2)
        tree = {int(k): v for k, v in json.loads(pids_file.read_text()).items()}
        names = " | ".join(tree.values())
        for needed in NEEDED:
            assert needed in names, f"{needed} is not among the parent's children: {names}"
        assert all(procutil.alive(p) for p in tree), "a child was gone before the kill"
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        killed = time.monotonic()
        survivors = dict(tree)
        while survivors and time.monotonic() - killed < GRACE:
            survivors = {p: c for p, c in survivors.items() if procutil.alive(p)}
            time.sleep(0.1)
        gone_in = time.monotonic() - killed
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    results.record(
        "processes",
        "sigkill_parent",
        {
            "children": len(tree),
            "survivors": len(survivors),
            "gone_in_seconds": round(gone_in, 2),
            "seconds": round(time.monotonic() - t0, 1),
        },
    )
    for pid in survivors:  # leave nothing behind even when the test fails
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not survivors, f"still running {GRACE:.0f} s after the parent's SIGKILL: {survivors}"


def test_a_detached_control_plane_stops_when_its_owner_is_gone(tmp_path):
    """`cluster.py up` detaches the plane on purpose (make cluster-up, the demo); a run that starts it
    for itself (the molecule scenarios: mk/molecule.mk sets CLUSTER_OWNER_PID to its recipe shell)
    names an owner, and the plane must stop when that owner dies, even by SIGKILL."""
    owner = subprocess.Popen(["sleep", "600"], start_new_session=True)  # noqa: S607 - coreutils sleep
    wd = tmp_path / "plane"
    t0 = time.monotonic()
    try:
        up = subprocess.run(  # noqa: S603 - our own interpreter and script
            [sys.executable, "tests/controlplane/cluster.py", "up", "--dir", str(wd), "--no-kserve"],
            cwd=ROOT,
            env={**os.environ, "CLUSTER_OWNER_PID": str(owner.pid)},
            capture_output=True,
            text=True,
            timeout=400,
            check=False,
        )
        assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
        state = json.loads((wd / "state.json").read_text())
        plane = [state["manager_pid"], state["kcp_pid"]]
        assert all(procutil.alive(p) for p in plane)
        owner.kill()
        owner.wait()
        killed = time.monotonic()
        while any(procutil.alive(p) for p in plane) and time.monotonic() - killed < 60:
            time.sleep(0.2)
        left = [p for p in plane if procutil.alive(p)]
        gone_in = time.monotonic() - killed
    finally:
        if owner.poll() is None:
            owner.kill()
        subprocess.run(  # noqa: S603 - leave nothing behind even when the test fails
            [sys.executable, "tests/controlplane/cluster.py", "down", "--dir", str(wd)],
            cwd=ROOT,
            capture_output=True,
            check=False,
        )
    results.record(
        "processes",
        "owner_gone",
        {"survivors": len(left), "gone_in_seconds": round(gone_in, 2), "seconds": round(time.monotonic() - t0, 1)},
    )
    assert not left, f"the plane ({left}) still runs 60 s after its owner {owner.pid} was SIGKILLed"
    assert not (wd / "state.json").exists(), "a plane that stopped leaves no state.json"
