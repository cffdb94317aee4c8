# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Issues 9 and 27: the planner against aiconfigurator 0.12.0 (vLLM backend, measured kernel data) as an oracle.

The reference figures are checked in (oracle/aiconfigurator.json, with the command and version that produced each;
tests/bench/planner_oracle.py regenerates it); aiconfigurator is not needed to run these tests. Goals (issue 27):

1. the planner's TPOT and TTFT are within +-25 % of aiconfigurator's for the same layout and batch at its choice;
2. at the batch the planner picks (max_num_seqs), aiconfigurator's TPOT meets the SLO;
3. the planner's GPU count for the traffic is <= 1.1 x aiconfigurator's best.

Points where the planner disagrees with aiconfigurator on purpose are listed in XFAIL_* with the reason and a source
for the planner's side that is not its own output; docs/planner.md ("aiconfigurator as an oracle") explains each.
Issue 27 allows at most 10 % of the grid. The lists are strict: a point that starts to meet its goal fails until it
is taken off the list.
"""

from __future__ import annotations

import pytest

from tests.unit.planner import oracle_data as od
from tests.unit.planner import queue_sim as qs

POINTS = od.points()
IDS = [p["id"] for p in POINTS]

DSV3_ACROSS_NODES = (
    "aiconfigurator's NCCL table for h100_sxm (comm/nccl/*/nccl_perf.parquet) measures 2, 4 and 8 GPUs only, so "
    "its MoE exchange over two nodes is not measured: its static estimates (`cli estimate` at TP 8, attention DP 2, "
    "moe_tp 16 against TP 8 in one node, commands in docs/planner.md) charge the dispatch and combine of one "
    "1000-token prompt 215.6 ms against 9.8 ms in one node (3.5-3.7 ms a layer where 14.3 MB of BF16 hidden "
    "states take 0.29 ms at its own h100_sxm.yaml inter_node_bw of 50 GB/s a GPU), and a decode step of 14 tokens "
    "a MoE layer 33.3 ms in its MoE block against 12.9 ms in one node (about 340 us a layer more for about 200 kB "
    "each way). vLLM runs this layout's exchange over the 2-rank DP group (an all-gather before the experts, "
    "a reduce-scatter after: AgRsAll2AllManager) beside a TP 8 all-reduce inside the node; the planner prices the "
    "2-rank exchange from the same 50 GB/s and 10 us (catalog interconnects.rdma). Both count 16 GPUs"
)
# goal 1 at the planner's own (layout, batch): (point id, "ttft" | "tpot") -> why it is off by more than 25 %
XFAIL_LATENCY: dict = {
    ("dsv3-h100x16-chat", "ttft"): DSV3_ACROSS_NODES,
    ("dsv3-h100x16-chat", "tpot"): DSV3_ACROSS_NODES,
}
# goal 2: aiconfigurator's TPOT at the planner's max_num_seqs above the SLO
XFAIL_SLO: dict = {
    "32b-h100-chat": (
        "aiconfigurator's H100 block-FP8 table times Qwen3-32B's o_proj and down_proj shapes (N 5120, K 8192-65536) "
        "at 156-176 us at exactly 48 rows, against 85-101 us at 32, 33, 49 and 64 rows with the same DeepGEMM kernel; "
        "its H200 table (same kernels, same 132 SMs) measures 83-85 us at 48 rows for the same shapes, and the H100 "
        "spike at 48 rows hits unrelated shapes too (N 6144, N 8192 with K <= 1024). Its linear interpolation "
        "spreads the spike over batches 34-63: 141-144 us a call at the decode pool's batch 42, 37.4 ms TPOT (its "
        "TPOT at batch 64, 35.5 ms, is below its TPOT at 48, 39.5 ms). The planner's grid follows the measured rows "
        "around it (95 us at 42 rows; the table's 33 and 49 rows: 90-101 us), 32.9 ms TPOT"
    ),
}
# goal 3: the planner's GPUs > 1.1 x aiconfigurator's best
XFAIL_GPUS: dict = {
    "70b-h100-pd-long": (
        "open arrivals against a closed loop: aiconfigurator's best runs 5 sequences on one TP=2 engine offered 0.5 "
        "req/s (its closed loop at 82 % of its throughput), compares its mean TPOT with the SLO and counts no wait for "
        "a slot. With Poisson arrivals each 8000-token prompt stalls the decodes of a TP=2 engine for a 684 ms prefill "
        "step: mean TPOT 30.7 ms, per-request TPOT p95 40 ms (SLO 30 ms), and 5 slots 86 % busy make half of the "
        "arrivals wait seconds (M/D/5, checked against a simulation in test_slot_queue_matches_a_simulation): the "
        "planner needs TP=4 (4 GPUs). aiconfigurator's own static estimates give the same (`cli estimate` at TP=2, "
        "commands in docs/planner.md): an 8000-token prefill takes 595 ms and a decode step of 5 sequences 17.8 ms; "
        "a request decoding for ~6.3 s sees 3.2 other prompts on average (Poisson at 0.5 req/s) and 6 at its 95th "
        "percentile, so its TPOT is 25.3 ms on average and 32.1 ms at p95"
    ),
    "70b-h200x16-rag": (
        "open arrivals against a closed loop: aiconfigurator's best runs 3 TP=4 engines of one sequence each, every "
        "request replaced when it finishes (0.124 req/s an engine: 4.9 s to prefill 64000 tokens, then 300 tokens at "
        "10.5 ms), and counts no wait. Replayed under Poisson arrivals at 0.3 req/s with its own static estimates "
        "of that layout (test_aiconfigurators_best_misses_the_slos_under_poisson_arrivals, queue_sim.py; each "
        "request to the least-loaded engine, llm-d's picker) its 3 engines miss an SLO whatever max_num_seqs they "
        "run (TTFT p95 10.3-18.8 s against 8 s at 1 to 16 sequences an engine; TPOT p95 61 ms against 30 from 4 "
        "up); 4 engines (16 GPUs) put TTFT p95 at the SLO's edge (8.0 s from 4 sequences up, 11.4 s at one) and 5 "
        "(20 GPUs, the planner's count: 4 TP=4 prefill engines and 2 TP=2 decode engines) meet both with room "
        "(5.4 s, 27 ms from 2 sequences up)"
    ),
    "70b-h100x16-long": (
        "aiconfigurator's best prefills two 4000-token prompts in every mixed step (its ctx_tokens 8000: 20 mixed "
        "steps in a request's 300 instead of 40; TPOT 59.5 ms at 40 sequences, 65.7 ms with one prompt a step) and "
        "counts no wait for a slot, so one TP=2 engine serves 2.1 req/s. With Poisson arrivals at 2 req/s a rank the "
        "prompts mostly come one at a time (vLLM's scheduler does not wait to pair them) and prefill keeps the rank "
        "71 % busy: its steps average 2.5x a decode step, TPOT p95 87 ms and the 32 slots (TPOT 60 ms full) are "
        "offered 1.4x what they hold; 6 engines leave TPOT p95 at 63 ms, 7 meet both SLOs (14 GPUs). Pairing is not "
        "the lever: with two prompts in every prefill step 5 engines still run mean TPOT 68 ms, p95 80 ms, 42 of 40 "
        "slots. aiconfigurator's own static estimates say the same (`cli estimate` static_ctx / static_gen at TP=2, "
        "commands in docs/planner.md): one 4000-token prefill takes 343 ms, two 566 ms, a decode step of 40 "
        "sequences 22.7 ms, so the 2.0 req/s its best offers each engine keep it about 88 % busy with every prompt "
        "paired and 98 % with none (the decodes that ride in the prefill steps counted), next to no room for Poisson "
        "arrivals to queue in"
    ),
}


def _expected_failure(table: dict, key, met: bool, detail: str) -> None:
    """A listed point that meets its goal fails (take it off the list); an unlisted one that misses it fails."""
    if key in table:
        assert not met, f"{key} now meets the goal: take it off the expected failures ({detail})"
        pytest.xfail(table[key])
    assert met, detail


def test_disagreements_stay_within_a_tenth_of_the_grid():
    """Issue 27: at least 30 points, and the points listed in XFAIL_* (any goal) at most 10 % of them."""
    listed = {k if isinstance(k, str) else k[0] for table in (XFAIL_LATENCY, XFAIL_SLO, XFAIL_GPUS) for k in table}
    assert len(POINTS) >= 30
    assert listed <= set(IDS), sorted(listed - set(IDS))
    assert len(listed) <= 0.1 * len(POINTS), sorted(listed)


@pytest.mark.parametrize("pt", POINTS, ids=IDS)
def test_the_plan_on_the_points_own_cluster_does_not_contradict_itself(pt):
    """Issue 27: no warning about the option the plan did not choose, no `meets_slo: true` beside a warning that the
    SLOs are missed, and no idle GPU while it says so. On the point's own cluster, which is too small for some of the
    traffic (30b-l40s-chat)."""
    p = od.plan(od.planner_run_inputs(pt["planner_inputs"]))
    missed = [w for w in p["warnings"] if "the SLOs are missed" in w]
    single_pool = [w for w in p["warnings"] if "engine(s) of" in w or "no layout meets both SLOs" in w]
    pd_pools = [w for w in p["warnings"] if " decode GPUs (" in w]
    assert not (pd_pools if not p["disaggregated"] else single_pool), p["warnings"]
    if missed:
        assert p["latency"]["meets_slo"] is False, missed
        assert p["spare_gpus"]["count"] == 0, (missed, p["spare_gpus"])


def test_the_data_says_where_it_came_from():
    data = od.load()
    assert data["tool"] == "aiconfigurator" and data["version"] == "0.12.0"
    assert len(POINTS) >= 30
    inputs = [od.planner_run_inputs(p["planner_inputs"]) for p in POINTS]
    models = {i.get("model") or i["model_architecture"]["id"] for i in inputs}
    assert len(models) >= 8
    assert {"h100", "h200", "b200", "l40s"} <= {i["gpu"] for i in inputs}
    archs = [i for i in inputs if "model_architecture" in i]  # models outside the catalog, as --architecture reads them
    assert len(archs) >= 3 and any(i["model_architecture"]["attention"] == "mla" for i in archs)
    assert any(i.get("model") == "DeepSeek-V3" for i in inputs)  # an MLA family of the catalog
    assert any(i["model_architecture"]["id"] == "Qwen3-235B-A22B" for i in archs)
    long_prompts = [p for p in POINTS if p["planner_inputs"]["traffic"]["prompt_tokens_mean"] >= 8000]
    assert sum(od.planned(p)["model"]["kind"] == "moe" for p in long_prompts) >= 3  # long prompts on MoE
    for p in POINTS:
        assert p["best"]["command"].startswith("aiconfigurator cli default"), p["id"]
        assert p["best"]["gpus"], f"{p['id']}: aiconfigurator found no configuration under the SLOs"
        assert all(p["best"][m]["meets_slo"] for m in ("agg", "disagg") if p["best"].get(m)), p["id"]
        assert p["estimates"], p["id"]
        for e in p["estimates"]:
            assert e["command"].startswith("aiconfigurator cli estimate") and "--backend vllm" in e["command"]


def test_pd_is_sized_below_100_sessions():
    """Issue 27: the P/D option is sized from cost at any concurrency (no session threshold): the grid's points with
    fewer than 100 requests in flight have a sized P/D option, and one of them splits (aiconfigurator's best there is
    P/D too)."""
    low = []
    for pt in POINTS:
        if pt["planner_inputs"]["policy"]["disaggregation"] == "never":  # the batch and edge blueprints' policy
            continue
        p = od.planned(pt)
        if p["estimates"]["requests_in_flight"] < 100:
            low.append((pt["id"], p))
    assert len(low) >= 3
    assert not any(
        str(p["disaggregation_options"]["disaggregated"].get("rejected", "")).startswith("not sized") for _i, p in low
    )
    assert any(p["disaggregated"] for _i, p in low)


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
    assert rows, f"{pt['id']}: no aiconfigurator estimate at the planner's choice: rerun make oracle"
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
    assert tpot is not None, f"{pt['id']}: no aiconfigurator estimate around batch {batch}: rerun make oracle"
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


def _aic_step(pt: dict, lay: dict):
    """A step time (s) from aiconfigurator's own static estimates of ``lay``: its decode step at the batch (log-log
    between the stored batches) plus the point's prompt prefill pro rata to the step's prompt tokens."""
    isl = pt["planner_inputs"]["traffic"]["prompt_tokens_mean"]
    prefill = next(e["ttft_ms"] for e in pt["estimates"] if e["mode"] == "static_ctx" and e["layout"] == lay) / 1000
    batches = sorted(e["batch"] for e in pt["estimates"] if e["mode"] == "static_gen" and e["layout"] == lay)

    def step(decodes: int, tokens: int, _ctx_pre: float) -> float:  # its static_ctx estimate is of the mean prompt
        at = min(max(decodes, batches[0]), batches[-1])
        decode = od.interpolate(pt, "static_gen", lay, at, "tpot_ms") / 1000 if decodes else 0.0
        return decode + prefill * tokens / isl

    return step


REPLAYED = [p for p in POINTS if p.get("replay_layout")]


@pytest.mark.parametrize("pt", REPLAYED, ids=[p["id"] for p in REPLAYED])
def test_aiconfigurators_best_misses_the_slos_under_poisson_arrivals(pt):
    """Issue 36: aiconfigurator's best is a closed loop (its batch of requests, each replaced when it finishes).
    Replayed with its own kernel times (static estimates of its layout) under Poisson arrivals at the point's rate,
    each request to the least-loaded engine, its engines miss an SLO at any max_num_seqs up to its largest estimated
    batch; as many engines of that layout as the planner's GPUs meet both (XFAIL_GPUS says so)."""
    inp, lay = pt["planner_inputs"], pt["replay_layout"]
    t, slo = inp["traffic"], inp["slo"]
    lengths = ((t["prompt_tokens_mean"],) * 2, (t["output_tokens_mean"],) * 2)
    step, budget = _aic_step(pt, lay), inp["policy"]["max_num_batched_tokens"]

    def misses(engines: int, slots: int) -> bool:
        fleet = qs.Fleet(engines, lay["dp"], slots, "least_loaded", step, budget)
        r = qs.simulate(fleet, t["arrival_rate_rps"], *lengths, n=1500)
        return r.ttft_p95 * 1000 > slo["ttft_p95_ms"] or r.tpot_p95 * 1000 > slo["tpot_p95_ms"]

    engines = int(pt["best"]["agg"]["replicas_needed"])
    assert pt["best"]["agg"]["parallel"].startswith(f"tp{lay['tp']}pp{lay['pp']}dp{lay['dp']}")
    assert all(misses(engines, slots) for slots in (1, 4, 16))
    per_engine = lay["tp"] * lay["pp"] * lay["dp"]
    assert not misses(od.plan_gpus(od.planned(pt)) // per_engine, 4)


def test_the_comparison_can_fail():
    """A planner that halved its TPOT would miss goal 1: the comparison is not vacuous."""
    pt = POINTS[0]
    rows = [r for r in od.comparisons(pt) if r["tpot_ratio"] is not None]
    assert rows
    assert any(abs(r["tpot_ratio"] * 0.5 - 1) > od.TOLERANCE for r in rows)
