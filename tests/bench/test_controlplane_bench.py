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
