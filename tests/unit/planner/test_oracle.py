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
# goal 3: the planner sizes TPOT at p95 (the SLO's percentile) with policy.latency_margin (5 %) on a full rank and
# target_utilization (0.9) of the batch in flight; aiconfigurator compares its mean TPOT with the SLO and fills its
# batch to 100 %. docs/planner.md "aiconfigurator as an oracle" has the figures under either set of criteria.
_MARGIN = (
    "policy.latency_margin: a full rank is sized for TPOT p95 <= 95 % of the SLO, so it holds fewer sequences and "
    "the traffic needs one more engine; with latency_margin 0 the planner needs aiconfigurator's count (at the "
    "cost of goal 2 at 70b-h100-chat and 30b-h200-mid)"
)
XFAIL_GPUS: dict = {
    "35b-h100x16-chat": _MARGIN,
    "35b-h200-mid": _MARGIN,
    "30b-h100-chat": _MARGIN,
    "35b-h100-batch": (
        "target_utilization 0.9: the KV-limited batch (318 per GPU) carries 40 req/s x E2E on 4 GPUs, not 3 "
        "(aiconfigurator fills its 320 to 100 %); the planner's TPOT at that batch is also 13 % above "
        "aiconfigurator's (the shared expert leaves vLLM's side stream above 256 tokens a step)"
    ),
    "70b-h200-mid": (
        "TPOT p95 vs mean: 2000-token prompts mixed into the decode steps make the p95 of per-request TPOT exceed "
        "its mean; with the mean (aiconfigurator's criterion) the planner needs 5 GPUs"
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
