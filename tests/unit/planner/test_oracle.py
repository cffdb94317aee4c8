# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Issue 9: the planner against aiconfigurator 0.12.0 (vLLM backend, measured kernel data) as an oracle.

The reference figures are checked in (oracle/aiconfigurator.json, with the command and version that produced each);
aiconfigurator is not needed to run these tests. Goals:

1. the planner's TPOT and TTFT are within +-25 % of aiconfigurator's for the same layout and batch;
2. at the batch the planner picks, aiconfigurator's TPOT meets the SLO;
3. the planner's GPU count for the traffic is <= 1.1 x aiconfigurator's best.

Points that miss a goal on purpose or for a known reason are listed in XFAIL_* with the reason; docs/planner.md
("aiconfigurator as an oracle") explains each. The lists are strict: a point that starts to meet its goal fails until
it is taken off the list.
"""

from __future__ import annotations

import pytest

from tests.unit.planner import oracle_data as od

POINTS = od.points()
IDS = [p["id"] for p in POINTS]

# goal 1 at the planner's own (layout, batch): (point id, "ttft" | "tpot") -> why it is off by more than 25 %
XFAIL_LATENCY: dict = {}
# goal 2
XFAIL_SLO: dict = {}
# goal 3: the planner sizes a rank's batch (max_num_seqs) for TPOT p95 (the SLO's percentile) with
# policy.latency_margin (5 %), and its replicas for TTFT p95 with the wait for a free sequence slot (an M/G/c queue
# per rank); aiconfigurator compares its mean TPOT with the SLO and counts no wait for a slot (its batch runs 100 %
# full). docs/planner.md "aiconfigurator as an oracle" has the figures under either set of criteria.
_MARGIN = (
    "policy.latency_margin: a full rank is sized for TPOT p95 <= 95 % of the SLO, so it holds fewer sequences and "
    "the traffic needs one more engine; with latency_margin 0 the planner needs aiconfigurator's count (at the "
    "cost of goal 2 at 70b-h100-chat, 30b-h200-mid and 35b-h200-mid)"
)
XFAIL_GPUS: dict = {
    "30b-h100-chat": (
        _MARGIN + ": on 1 GPU the margin caps TP=1 at 228 sequences and 30 req/s offers 226 of them (99 % busy, "
        "TTFT p95 3.6 s with the slot queue, SLO 1 s)"
    ),
    "27b-h100-long": (
        "TPOT p95 with the margin caps a TP=1 rank at 30 sequences (aiconfigurator runs 40 at its mean TPOT, 79.3 of "
        "80 ms); on 2 GPUs each rank's 30 slots are 84 % busy, a quarter of arrivals wait for one, TTFT p95 7.5 s "
        "against 3 s; with latency_margin 0 and the mean TPOT the planner needs 2"
    ),
    "35b-h200-mid": (
        "TPOT p95 with the margin caps a TP=1 rank at 72 sequences (aiconfigurator: 96 at its mean TPOT, 29.5 of "
        "30 ms): on 4 GPUs 10 req/s a rank offers 86 sequences to 72 slots; under aiconfigurator's criteria the "
        "aggregated plan still needs 5 and the P/D plan 4 (with target_utilization 1 on the prefill pool)"
    ),
    "70b-h200-mid": (
        "TPOT p95 vs mean: 2000-token prompts mixed into the decode steps make the p95 of per-request TPOT exceed "
        "its mean, so TP=2 holds 47 sequences (aiconfigurator: 64 at its mean TPOT); 3 x TP=2 would offer 49 a rank, "
        "and TP=4 fits the traffic on 2 engines"
    ),
    "70b-h100x16-long": (
        "the planner's Llama-70B steps with 4000-token prompts mixed in are 8-11 % slower than aiconfigurator's, "
        "and TPOT p95 with the margin cuts the TP=2 batch to 22 (aiconfigurator: 40 at its mean TPOT): 16 GPUs as "
        "4 x TP=4, 14 under aiconfigurator's criteria, vs its 10"
    ),
}


def _expected_failure(table: dict, key, met: bool, detail: str) -> None:
    """A listed point that meets its goal fails (take it off the list); an unlisted one that misses it fails."""
    if key in table:
        assert not met, f"{key} now meets the goal: take it off the expected failures ({detail})"
        pytest.xfail(table[key])
    assert met, detail


def test_the_data_says_where_it_came_from():
    data = od.load()
    assert data["tool"] == "aiconfigurator" and data["version"] == "0.12.0"
    assert len(POINTS) >= 12
    models = {p["planner_inputs"]["model"] for p in POINTS}
    gpus = {p["planner_inputs"]["gpu"] for p in POINTS}
    assert len(models) >= 4 and gpus == {"h100", "h200"}
    for p in POINTS:
        assert p["best"]["command"].startswith("aiconfigurator cli default")
        assert p["estimates"], p["id"]
        for e in p["estimates"]:
            assert e["command"].startswith("aiconfigurator cli estimate") and "--backend vllm" in e["command"]


def _at_choice(pt: dict) -> list[dict]:
    p = od.planned(pt)
    mode, lay, batch = od.chosen(p)
    rows = [c for c in od.comparisons(pt) if c["mode"] == mode and c["layout"] == lay and c["batch"] == batch]
    if p["disaggregated"]:
        pre = p["pools"]["prefill"]
        play = {k: pre[k] for k in ("tp", "pp", "dp", "ep")}
        rows += [c for c in od.comparisons(pt) if c["mode"] == "static_ctx" and c["layout"] == play]
    return rows


@pytest.mark.parametrize("pt", POINTS, ids=IDS)
@pytest.mark.parametrize("metric", ["ttft", "tpot"])
def test_latency_within_25_percent_at_the_planners_choice(pt, metric):
    rows = [r for r in _at_choice(pt) if r[f"{metric}_ratio"] is not None]
    assert rows, f"{pt['id']}: no aiconfigurator estimate at the planner's choice: rerun oracle/tools/run_oracle.py"
    bad = [r for r in rows if abs(r[f"{metric}_ratio"] - 1) > od.TOLERANCE]
    detail = "; ".join(
        f"{r['mode']} {r['layout']} batch {r['batch']}: planner {metric} {r[f'{metric}_ms']:.1f} ms vs "
        f"aiconfigurator {r[f'aic_{metric}_ms']:.1f} ms"
        for r in bad
    )
    _expected_failure(XFAIL_LATENCY, (pt["id"], metric), not bad, f"{pt['id']}: {detail}")


@pytest.mark.parametrize("pt", POINTS, ids=IDS)
def test_aiconfigurator_meets_the_tpot_slo_at_the_planners_batch(pt):
    p = od.planned(pt)
    mode, lay, batch = od.chosen(p)
    tpot = od.interpolate(pt, mode, lay, batch, "tpot_ms")
    assert tpot is not None, f"{pt['id']}: no aiconfigurator estimate around batch {batch}: rerun run_oracle.py"
    slo = pt["planner_inputs"]["slo"]["tpot_p95_ms"]
    detail = f"{pt['id']}: aiconfigurator TPOT {tpot:.1f} ms at the planner's batch {batch} ({mode} {lay}), SLO {slo}"
    _expected_failure(XFAIL_SLO, pt["id"], tpot <= slo, detail)


@pytest.mark.parametrize("pt", POINTS, ids=IDS)
def test_gpu_count_within_110_percent_of_aiconfigurators_best(pt):
    best = pt["best"]["gpus"]
    assert best, f"{pt['id']}: aiconfigurator found no configuration: {pt['best'].get('error')}"
    mine = od.plan_gpus(od.planned(pt))
    detail = f"{pt['id']}: planner {mine} GPUs vs aiconfigurator's best {best}"
    _expected_failure(XFAIL_GPUS, pt["id"], mine <= od.GPU_FACTOR * best, detail)


def test_the_comparison_can_fail():
    """A planner that halved its TPOT would miss goal 1: the comparison is not vacuous."""
    pt = POINTS[0]
    rows = [r for r in od.comparisons(pt) if r["tpot_ratio"] is not None]
    assert rows
    assert any(abs(r["tpot_ratio"] * 0.5 - 1) > od.TOLERANCE for r in rows)
