"""Cold build of the components issue 24 adds to the local control plane (printed, not asserted).

kwok (``tests/controlplane/kwok``) and the LeaderWorkerSet controller (``tests/controlplane/lws``) are
built the way ``make controlplane`` builds them, with an EMPTY Go build cache (a temporary GOCACHE) and
the module cache as it is (the download is not what is measured; ``go mod download`` first). kube-scheduler
is part of kcp (its packages mostly shared with kube-controller-manager): its cost is the growth of the
kcp binary and of its rebuild, printed too. Wall time, CPU time (user+sys of go and its compilers) and
the build cache each build filled. ``make bench`` (pytest -s) shows the figures.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CONTROLPLANE = HERE.parent / "controlplane"
COMPONENTS = {
    "kwok": ("kwok", "sigs.k8s.io/kwok/cmd/kwok"),
    "lws": ("lws", "sigs.k8s.io/lws/cmd"),
}


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _env(gocache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "GOEXPERIMENT"}
    return env | {"GOTOOLCHAIN": "local", "GOFLAGS": "", "GOCACHE": str(gocache)}


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_cold_build_of_component(component, tmp_path):
    if shutil.which("go") is None:
        raise AssertionError("Go is needed to measure the build (make controlplane needs it too)")
    subdir, package = COMPONENTS[component]
    cwd = CONTROLPLANE / subdir
    gocache = tmp_path / "gocache"
    subprocess.run(["go", "mod", "download"], cwd=cwd, env=_env(gocache), check=True, capture_output=True)
    shutil.rmtree(gocache, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    res = subprocess.run(
        ["go", "build", "-trimpath", "-o", str(tmp_path / component), package],
        cwd=cwd,
        env=_env(gocache),
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert res.returncode == 0, res.stderr[-3000:]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    load = os.getloadavg()[0]
    print(
        f"\n[bench] cold build of {component} ({package}): {wall / 60:.1f} min wall, {cpu / 60:.1f} CPU-min, "
        f"+{_du(gocache) / 2**30:.2f} GB build cache, binary {(tmp_path / component).stat().st_size / 2**20:.0f} MiB "
        f"({os.cpu_count()} cores, load {load:.1f} at the end)"
    )


def test_kcp_with_the_scheduler():
    """The kcp binary (kube-scheduler is one of its subcommands): size, and whether it runs the scheduler."""
    from controlplane.cluster import BINARY

    assert BINARY.exists(), f"{BINARY} is missing: make controlplane"
    res = subprocess.run([str(BINARY), "scheduler", "--help"], capture_output=True, text=True, check=False, timeout=60)
    assert "kube-scheduler" in (res.stdout + res.stderr), res.stderr[-2000:]
    size = BINARY.stat().st_size / 2**20
    print(f"\n[bench] kcp (kube-apiserver, controller-manager, scheduler, kubectl): {size:.0f} MiB")
