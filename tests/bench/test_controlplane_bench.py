"""Benchmark of the local control plane: start-to-ready time and memory (printed, not asserted).

Budget from issue 3: start to ready <= 10 s, <= 600 MB per instance. Run with
``make bench`` (pytest -s) to see the figures. Since issue 24 an instance also runs kube-scheduler
(a child of kcp), kwok and the LeaderWorkerSet controller: their share is printed too.
"""

from __future__ import annotations

import time

import pytest
from controlplane.cluster import ControlPlane

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("profile", ["h100-8x2-rdma", "sno-rtx-pro-6000"])
def test_controlplane_start_to_ready_and_rss(profile):
    t0 = time.monotonic()
    cp = ControlPlane(profile, kserve=False).start()
    try:
        ready = time.monotonic() - t0
        rss_ready = cp.rss_bytes()
        # Some load: one object of each simulated kind would be more; a CRD list is the
        # heaviest read the tests make.
        cp.kubectl("get", "crd", "-o", "json")
        time.sleep(2)
        rss_settled = cp.rss_bytes()
        parts = cp.component_rss()
        print(
            f"\n[bench] controlplane {profile}: start-to-ready {ready:.2f}s "
            f"(kcp ready {cp.timings['kcp_ready']:.2f}s, seeded {cp.timings['seeded']:.2f}s; then side by side: "
            f"kwok nodes Ready {cp.timings['kwok_ready']:.2f}s, LWS webhooks {cp.timings['lws_ready']:.2f}s; "
            f"budget 10s); RSS at ready {rss_ready / 2**20:.0f} MiB (kwok {parts['kwok'] / 2**20:.0f}, "
            f"LWS {parts['lws'] / 2**20:.0f}), after a CRD list {rss_settled / 2**20:.0f} MiB (budget 600 MB)"
        )
    finally:
        cp.stop()


def test_kserve_controller_start_and_rss():
    """The real KServe controller (KCP_KSERVE): its share of start-up and memory."""
    t0 = time.monotonic()
    cp = ControlPlane("h100-8x2-rdma", kserve=True).start()
    try:
        ready = time.monotonic() - t0
        k = cp.kserve.timings
        print(
            f"\n[bench] controlplane h100-8x2-rdma + KServe controller: start-to-ready {ready:.2f}s "
            f"(control plane seeded {cp.timings['seeded']:.2f}s; controller readyz {k['readyz']:.2f}s, "
            f"webhooks answering {k['webhooks']:.2f}s, presets {k['presets']:.2f}s, "
            f"conversion webhook on the CRDs {k['conversion']:.2f}s after its start); "
            f"RSS controller {cp.kserve_rss_bytes() / 2**20:.0f} MiB, instance {cp.rss_bytes() / 2**20:.0f} MiB"
        )
    finally:
        cp.stop()


def _apiserver_cpu_and_peak(cp) -> tuple[float, float, float]:
    """(CPU seconds, peak RSS MiB, RSS MiB) of the plane's kube-apiserver (a child of kcp)."""
    import os
    from pathlib import Path

    hz = os.sysconf("SC_CLK_TCK")
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
            if len(cmd) < 2 or cmd[1] != b"apiserver" or str(cp.workdir).encode() not in b" ".join(cmd):
                continue
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            status = dict(line.split(":", 1) for line in (proc / "status").read_text().splitlines() if ":" in line)
        except OSError:
            continue
        return (
            (int(stat[11]) + int(stat[12])) / hz,
            int(status["VmHWM"].split()[0]) / 1024,
            int(status["VmRSS"].split()[0]) / 1024,
        )
    raise AssertionError("no kube-apiserver process found")


@pytest.mark.parametrize("start_gc_seconds", ["0", "120"])
def test_apiserver_start_cpu_with_and_without_the_startup_gc(monkeypatch, start_gc_seconds):
    """kube-apiserver's CPU and memory for a snapshot-restored start of a KServe plane, with kcp's start-time
    garbage collection (cmd/kcp/main.go startupGC: collect only near 1600 MiB for the first 120 s) and without it
    (KCP_START_GC_SECONDS=0: GOGC=50 from the start), 30 s after ready and once the start window is over."""
    monkeypatch.setenv("KCP_START_GC_SECONDS", start_gc_seconds)
    cp = ControlPlane("h100-8x2-rdma", kserve=True).start()
    try:
        time.sleep(30)
        cpu, peak, rss = _apiserver_cpu_and_peak(cp)
        time.sleep(max(5.0, 130 - cp.ready_seconds - 30))
        cpu2, peak2, rss2 = _apiserver_cpu_and_peak(cp)
        print(
            f"\n[bench] kube-apiserver, KCP_START_GC_SECONDS={start_gc_seconds} (snapshot restored: {cp.restored}, "
            f"conversions set in etcd: {sorted(cp.conversions_set)}): ready in {cp.ready_seconds:.1f}s; 30 s after "
            f"ready {cpu:.1f} CPU-s, RSS {rss:.0f} MiB (peak {peak:.0f}); after the start window {cpu2:.1f} CPU-s, "
            f"RSS {rss2:.0f} MiB (peak {peak2:.0f})"
        )
    finally:
        cp.stop()
