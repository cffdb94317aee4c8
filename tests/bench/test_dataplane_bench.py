"""Benchmark of the data plane through the real llm-d router (printed, not asserted; docs/dataplane.md).

Prints: the prefix-affinity share of the chat config against a random picker and the config without
its prefix scorer; the AI grid's admission per tier under saturation and its full-band refusals; the
P/D path (where each request was routed and prefilled); the scale-from-zero trigger values at zero
endpoints; the build times ``make dataplane`` recorded, and with ``DATAPLANE_COLD_BUILD=1`` a cold
build measured now (an empty Go build cache; minutes of CPU).

Run with ``make bench`` (pytest -s) to see the figures.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from dataplane import test_pd, test_priority, test_routing, test_scale_from_zero
from dataplane.conftest import RunningCluster, pd_traffic, routed_models
from dataplane.harness import BINARIES, DataPlane, binary
from dataplane.traffic import prefix_affinity

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def plane_cluster(cluster_factory):
    """A control plane of its own (as in tests/dataplane), or the one DATAPLANE_CLUSTER_DIR names."""
    for name in BINARIES:
        binary(name)
    if os.environ.get("DATAPLANE_CLUSTER_DIR"):
        return RunningCluster(os.environ["DATAPLANE_CLUSTER_DIR"])
    return cluster_factory("h100-8x2-rdma", name="dataplane", kserve=False)


def test_dataplane_build_times():
    log = ROOT / ".cache" / "dataplane" / "build-times.jsonl"
    rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    for what in ("router", "simulator"):
        mine = [r for r in rows if r["what"] == what]
        if mine:
            slowest = max(mine, key=lambda r: r["seconds"])
            print(
                f"\n[bench] dataplane build {what}: last {mine[-1]['seconds']} s "
                f"({mine[-1]['at']}, load {mine[-1]['load']}); "
                f"slowest recorded {slowest['seconds']} s ({slowest['at']}, load {slowest['load']})"
            )
    if os.environ.get("DATAPLANE_COLD_BUILD") == "1":
        with tempfile.TemporaryDirectory() as gocache:
            t0 = time.monotonic()
            res = subprocess.run(
                ["make", "-B", "dataplane"],
                cwd=ROOT,
                env={**os.environ, "GOCACHE": gocache},
                capture_output=True,
                text=True,
                check=False,
            )
            print(
                f"\n[bench] dataplane cold build (empty GOCACHE, modules cached): {time.monotonic() - t0:.0f} s, "
                f"rc {res.returncode}, load {Path('/proc/loadavg').read_text().split()[:3]}"
            )


def test_prefix_affinity_share(plane_cluster, tmp_path):
    host, model, objects = routed_models("example-chat")[0]
    out = {}
    for name, cfg in (
        ("rendered", model["scheduler"]["config"]),
        ("random picker", test_routing.random_picker(model["scheduler"]["config"])),
        ("no prefix scorer", test_routing.remove_prefix_scorer(model["scheduler"]["config"])),
    ):
        work = tmp_path / name.replace(" ", "-")
        with DataPlane(
            plane_cluster, work, model, objects, {"both": 4}, config=cfg, sim_args=test_routing.FAST_ENGINE
        ) as dp:
            out[name] = asyncio.run(prefix_affinity(dp))
    print(
        "\n[bench] prefix affinity, chat config, 8 conversations x 6 turns over 4 engines: "
        + "; ".join(
            f"{k} {v['share']:.0%} of follow-ups on the holder ({v['endpoints_used']} endpoints used)"
            for k, v in out.items()
        )
    )


def test_admission_per_tier(plane_cluster, tmp_path):
    model, objects = test_priority._grid_model()
    with test_priority._plane(plane_cluster, tmp_path / "order", model, objects) as dp:
        figures = asyncio.run(test_priority.admission_order(dp))
    parts = []
    for tier in figures["tiers"]:
        adm = figures["by_tier"][tier]["admission"]
        parts.append(
            f"{tier} mean {statistics.mean(adm):.2f} s max {max(adm):.2f} s ({len(adm)} admitted)"
            if adm
            else f"{tier} none"
        )
    print(f"\n[bench] admission under saturation, {model['name']}: " + "; ".join(parts))
    refusals = []
    for band in test_priority._tiers(model):
        with test_priority._plane(plane_cluster, tmp_path / band["tier"], model, objects) as dp:
            f = asyncio.run(test_priority.full_band(dp, band))
        refusals.append(
            f"{band['tier']} band {f['band']}: {f['refused']} of {f['sent']} refused 429 within "
            f"{f['refused_after_seconds'] or 0:.2f} s"
        )
    print("[bench] full bands: " + "; ".join(refusals))


def test_pd_path(plane_cluster, tmp_path):
    model, objects = next((m, o) for _, m, o in routed_models("example-chat", pd_traffic()) if m["disaggregated"])
    with DataPlane(plane_cluster, tmp_path, model, objects, {"prefill": 2, "decode": 2}, sim_args=test_pd.ENGINE) as dp:
        t0 = time.monotonic()
        f = test_pd.pd_path(dp)
        seconds = time.monotonic() - t0
    print(
        f"\n[bench] P/D path, chat with 8k prompts: {len(f['statuses'])} requests, "
        f"statuses {sorted(set(f['statuses']))}, "
        f"routed to {sorted(set(f['routed_to']))}, prefill picked on {sorted(set(f['prefill_picked']))}, "
        f"{f['prefilled_remotely']:.0f} prefilled remotely, {f['decoded']:.0f} decoded, {seconds:.1f} s"
    )


def test_scale_from_zero_trigger(plane_cluster, tmp_path):
    host, model, objects, scaled = test_scale_from_zero.ZERO[0]
    with DataPlane(plane_cluster, tmp_path, model, objects, {}) as dp:
        t0 = time.monotonic()
        f = asyncio.run(test_scale_from_zero._demand_at_zero(dp, scaled["spec"]["triggers"]))
        seconds = time.monotonic() - t0
    values = "; ".join(f"{k} {v['value']} (activation {v['activation']:g})" for k, v in f["triggers"].items())
    print(
        f"\n[bench] scale from zero, {model['name']}: with 0 endpoints and {test_scale_from_zero.HELD} requests "
        f"waiting: {values}; served after the first engine: {f['served_after_scale_up']} ({seconds:.1f} s in all)"
    )
