# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Issue 36 item 2: a discrete-event simulation of the serving queue (queue_sim.py: Poisson arrivals, the planner's
own step times, slots, chunked prefill, the router's policy) as the oracle of the planner's closed-form queueing,
and the router's policy as an input of the plan.

The whole grid against the simulation is tests/bench/test_planner_queue_sim_bench.py (about 25 minutes: eight runs
of 100 holds pooled per engine); these are the cheap cases: a few grid points and the long-context RAG case of the
issue."""

from __future__ import annotations

import bisect
import copy
import functools
import math
from dataclasses import replace

import pytest
import yaml
from ansible_collections.inference.blueprints.plugins.module_utils.planner import batchq, plan
from ansible_collections.inference.blueprints.plugins.module_utils.planner import latency as lt
from ansible_collections.inference.blueprints.plugins.module_utils.planner import queueing as qu
from ansible_collections.inference.blueprints.plugins.module_utils.planner.errors import PlanError

from tests.unit.planner import oracle_data as od
from tests.unit.planner import queue_sim as qs
from tests.unit.planner import sim_fleet as sf

WITHIN = 0.10  # issue 36: the closed form within 10 % of the simulation


def _rag(router: str) -> dict:
    """The issue's long-context RAG case: 64k-token prompts at 0.3 req/s, TTFT 8 s, TPOT 30 ms, a 70B on 2 x 8 H200
    (the rag blueprint's policy; no KV tier, so the plan depends on the queueing only)."""
    with open(od.os.path.join(od.os.path.dirname(__file__), "..", "..", "..", "blueprints", "rag.yml")) as fh:
        pol = yaml.safe_load(fh)["policy"]
    pol = dict(pol, router=router, kv_offload="none", shared_kv_cache=False)
    return {
        "blueprint": "rag",
        "model": "Llama-3.3-70B-Instruct",
        "weights": "fp8",
        "kv_cache_dtype": "fp8",
        "gpu": "h200",
        "gpus_per_node": 8,
        "nodes": 2,
        "max_model_len": 131072,
        "policy": pol,
        "slo": {"ttft_p95_ms": 8000, "tpot_p95_ms": 30},
        "traffic": {
            "arrival_rate_rps": 0.3,
            "prompt_tokens_mean": 65536,
            "prompt_tokens_p95": 65536,
            "output_tokens_mean": 400,
            "output_tokens_p95": 1000,
        },
    }


def test_the_router_policy_is_an_input_of_the_plan():
    """llm-d's picker sends each request to the least loaded engine (``least_loaded``): a request that finds every
    prefill engine busy then waits at one of them, not for the first to free (queueing.jsq_wait); an even random
    split (``random``, the default until the oracle grid is regenerated) leaves engines idle while another queues.
    On the RAG case the least-loaded plan needs 20 GPUs (the issue's replay with the planner's step times: 18-24),
    the random split 36 (main planned 36 with no choice)."""
    least, rand = plan(_rag("least_loaded")), plan(_rag("random"))
    assert least["policy"]["router"] == "least_loaded"
    assert plan(dict(_rag("random"), policy={}))["policy"]["router"] == "random"
    assert least["disaggregated"] and od.plan_gpus(least) <= 24 < od.plan_gpus(rand)
    # the plan says which queue it computed: the router's and the slot queue's model
    said = {name: p["latency"]["queueing_model"] for name, p in (("least", least), ("random", rand))}
    assert "least loaded engine" in said["least"] and "even random split" not in said["least"], said
    assert "even random split" in said["random"] and "Erlang C" in said["random"], said
    chain = plan(dict(_rag("least_loaded"), policy=dict(_rag("least_loaded")["policy"], slot_queue="chain")))
    assert (
        "birth-death chain" in chain["latency"]["queueing_model"]
        and "Erlang C" not in chain["latency"]["queueing_model"]
    )


@pytest.mark.parametrize(
    ("key", "bad", "valid"), [("router", "round_robin", "least_loaded"), ("slot_queue", "mmc", "chain")]
)
def test_a_bad_queue_policy_is_refused(key, bad, valid):
    inp = _rag("least_loaded")
    inp["policy"][key] = bad
    with pytest.raises(PlanError) as e:
        plan(inp)
    assert f"policy.{key}" in str(e.value) and valid in str(e.value)


@pytest.mark.parametrize("router", ["least_loaded", "random"])
def test_the_rag_prefill_pool_matches_the_simulation(router):
    """The P/D prefill pool the plan sizes for the RAG case, simulated under the same router: TTFT p95 within 10 %.
    Before issue 36 the planner had no least-loaded queue: an M/G/1 queue per engine fed an even random split."""
    pool = [c for c in sf.cases(_rag(router)) if not c.fleet.decode][0]
    sim = qs.simulate(pool.fleet, pool.lam, pool.prompt, pool.output, n=2500)
    assert pool.ttft_p95 == pytest.approx(sim.ttft_p95, rel=WITHIN), (pool.ttft_p95, sim.ttft_p95)


def test_least_loaded_is_not_the_central_queue():
    """Four 64k-token prefill engines at 0.3 req/s: a request that waits is committed to one engine and waits for
    its prompt in progress (half of 5.6 s on average), not for the first of the four to free. The central M/G/c
    queue's wait is less than half the simulated one; the least-loaded wait is within 10 % of TTFT."""
    pool = [c for c in sf.cases(_rag("least_loaded")) if not c.fleet.decode][0]
    sim = qs.simulate(pool.fleet, pool.lam, pool.prompt, pool.output, n=2500)
    own = qs.simulate(pool.fleet, 1e-4, pool.prompt, pool.output, n=200).ttft_p95
    service = own - pool.fleet.ttft_extra
    central = qu.slot_wait(pool.lam, pool.fleet.engines, service, 0.0)
    jsq = qu.jsq_wait(central, 1, service, 0.0)
    assert central.p95 < 0.5 * (sim.ttft_p95 - own) <= jsq.p95 * 1.5
    assert own + jsq.p95 == pytest.approx(sim.ttft_p95, rel=WITHIN)


# grid points whose chosen pools the unit suite simulates (the bench runs the whole grid), under the grid's router
# (the default, random): a dense and two MoE chat points
SAMPLE = ("70b-h100-chat", "dsv3-h200-chat", "30b-h200-mid")
# (point, figure) -> the closed form off the simulation by more than 10 %, measured; strict: a point that comes
# within 10 % fails until it is taken off
KNOWN_GAPS = {
    # an aggregated engine's TTFT p95 under the simulation's: the slot wait of a nearly full rank (docs/planner.md
    # "Limitations"; the bench lists every point)
    ("27b-h100-long", "serve_ttft"): (
        "closed form 2.00 s, simulated 5.4-6.7 s (two pools of four runs; SLO 3 s): a prompt admitted into a full "
        "rank slows "
        "every sequence of it, so its slots free slower when an arrival waits, which Erlang C over a mean hold misses "
        "(policy slot_queue: chain models it, test_the_chain_plan_keeps_the_ttft_it_promises)"
    ),
}


@functools.cache
def _cases(pid: str) -> dict:
    pt = next(p for p in od.points() if p["id"] == pid)
    inp = od.plan_for_traffic(pt["planner_inputs"])[1]
    return {"serve" if c.fleet.decode else "prefill": c for c in sf.cases(copy.deepcopy(inp))}


def _check(key: tuple, planned: float, simulated: float) -> None:
    met = planned == pytest.approx(simulated, rel=WITHIN)
    if key in KNOWN_GAPS:
        assert not met, f"{key} is now within 10 % of the simulation: take it off KNOWN_GAPS"
        pytest.xfail(KNOWN_GAPS[key])
    assert met, (key, planned, simulated)


@pytest.mark.parametrize("pid", SAMPLE)
def test_tpot_p95_matches_the_simulation(pid):
    """TPOT p95 of the plan's aggregated engine (its batch, its replicas, the router) against the simulation of the
    same engines: within 10 %."""
    serve = _cases(pid)["serve"]
    sim = qs.simulate(serve.fleet, serve.lam, serve.prompt, serve.output, n=1200)
    _check((pid, "tpot"), serve.tpot_p95, sim.tpot_p95)


# an aggregated engine's TTFT p95 is noisy where plans land (5-10 % of arrivals wait for a slot): one run of 30 holds
# differs from another seed's by 25 % (median over the grid), so these checks pool four runs
SEEDS, HOLDS = range(7, 11), 30.0

PREFILL_POINTS = [p["id"] for p in od.points()]


@pytest.mark.parametrize("pid", PREFILL_POINTS)
def test_prefill_pool_ttft_p95_matches_the_simulation(pid):
    """TTFT p95 of the plan's P/D prefill pool against the simulation of the same engines, every grid point: within
    10 %, the simulation four runs pooled, each 200 s of the traffic (at least 2000 arrivals, at most 10000: a
    run of 2000 arrivals at 40 req/s, 50 s, is off a pool of eight long runs by up to 15 %). Before batchq.py (a
    rank's own queue as vLLM batches it) 35 of 51 were within 10 %, 0.62-2.84x. The closest to the edge is
    27b-h100-batch-cap, conservative: the bench's pool of eight runs of 100 holds puts it at 1.17x (whole prompts per
    step leave vLLM's chunk of a ninth prompt, 2.4 % of a rank near its capacity, uncounted)."""
    pool = _cases(pid).get("prefill")
    assert pool is not None, f"{pid}: the plan has no P/D option to simulate"
    n = min(10000, max(2000, int(200 * pool.lam)))
    sim = qs.pool([qs.simulate(pool.fleet, pool.lam, pool.prompt, pool.output, n=n, seed=s) for s in SEEDS])
    _check((pid, "prefill_ttft"), pool.ttft_p95, sim.ttft_p95)


def test_an_aggregated_engines_ttft_p95_against_the_simulation():
    """TTFT p95 of the plan's aggregated engine (the slot wait with its prefill) against the simulation (four runs of
    30 holds pooled): within 10 % is the goal; the point's gap is listed, measured, until the slot wait is
    modelled."""
    pid = "27b-h100-long"
    serve = _cases(pid)["serve"]
    sim = qs.pool(sf.runs(serve, SEEDS, HOLDS))
    _check((pid, "serve_ttft"), serve.ttft_p95, sim.ttft_p95)


@pytest.mark.parametrize(
    ("fixed", "per_token", "lam", "length"),
    [
        (0.030, 2e-6, 30.0, 800),  # a MoE-like step: ten prompts cost little more than one
        (0.004, 6e-5, 5.0, 2000),  # a dense-like step: the step grows with every prompt, four fit the budget
        (0.010, 2e-5, 9.5, 4000),  # two prompts fill a step: prompts wait beyond the step in progress
    ],
)
def test_a_prefill_ranks_own_queue_matches_the_simulation(fixed, per_token, lam, length):
    """batchq.prefill_ttft against the simulation of one prefill-only rank (vLLM's scheduler: each step takes the
    waiting prompts up to its 8192-token budget) with the same step time, fixed + per_token x tokens: TTFT p50 and
    p95 within 10 %, and a vanishing rate gives a prompt's own step."""

    def step(tokens: float) -> float:
        return fixed + per_token * tokens

    fleet = qs.Fleet(1, 1, 256, "random", lambda _d, tokens, _ctx: step(tokens), 8192, decode=False)
    sim = qs.pool([qs.simulate(fleet, lam, (length, length), (2, 2), n=4000, seed=s) for s in SEEDS])
    got = batchq.prefill_ttft(step, lam, (length, [length] * 5), 8192)
    assert got.p95 == pytest.approx(sim.ttft_p95, rel=WITHIN)
    assert got.p50 == pytest.approx(sim._p(sim.ttft, 0.5), rel=WITHIN)
    alone = batchq.prefill_ttft(step, 1e-6, (length, [length] * 5), 8192)
    assert alone.p95 == pytest.approx(step(length), rel=1e-3)
    assert batchq.prefill_ttft(step, lam, (9000, [9000] * 5), 8192) is None  # chunked prompts: not this model
    assert math.isinf(batchq.prefill_ttft(step, 8192 / length / step(8192) * 1.01, (length, [length] * 5), 8192).p95)


def test_batchq_keeps_its_figures_per_engine_and_rate(monkeypatch):
    """With a key (the caller's engine) a rate asked again, and the edge every rate past it shares, are not computed
    again, and what comes back is what the chain gives without a key; another key or rate is computed afresh."""

    def step(tokens: float) -> float:
        return 0.01 + 2e-5 * tokens

    chains = []
    real = batchq._stationary
    monkeypatch.setattr(batchq, "_stationary", lambda *a: chains.append(a) or real(*a))
    monkeypatch.setattr(batchq, "_KEPT", {})
    lengths, engine = (2000, [2000] * 5), object()
    fresh = batchq.prefill_ttft(step, 9.0, lengths, 8192)
    assert len(chains) == 1
    assert batchq.prefill_ttft(step, 9.0, lengths, 8192, key=engine) == fresh
    assert batchq.prefill_ttft(step, 9.0, lengths, 8192, key=engine) == fresh
    assert len(chains) == 2  # the second call with the key came from what it kept
    edge = 8192 // 2000 / step(8192 // 2000 * 2000)  # full steps' capacity
    past = [batchq.prefill_ttft(step, edge * f, lengths, 8192, key=engine) for f in (0.96, 0.97, 0.98)]
    assert len(chains) == 3 and all(p.floor and p == past[0] for p in past)  # one chain: the edge's
    batchq.prefill_ttft(step, 9.0, lengths, 8192, key=object())
    assert len(chains) == 4


def test_batchq_keeps_out_of_steps_of_many_short_prompts():
    """More prompts a step than the chain models (short prompts, a large budget) fall back at once, whatever the rate
    (a chain of hundreds of prompts a step at a high rate ran for ever), and the Poisson counts it builds stay whole
    far past where exp(-mu) underflows."""

    def step(tokens: float) -> float:
        return 0.02 + 1e-4 * tokens

    assert batchq.prefill_ttft(step, 482.0, (16, [16] * 5), 16384) is None
    assert batchq.prefill_ttft(step, 1000.0, (8, [8] * 5), 8192) is None
    for mu in (0.5, 40.0, 800.0, 5000.0):
        counts = batchq._poisson(mu)
        assert sum(counts) == pytest.approx(1.0, abs=1e-8)
        assert sum(n * p for n, p in enumerate(counts)) == pytest.approx(mu, rel=1e-6)


def _batch_cap_prefill():
    """The 27b-h100-batch-cap point's P/D prefill engine (eight 2000-token prompts a 16384-token step)."""
    pt = next(p for p in od.points() if p["id"] == "27b-h100-batch-cap")
    pool, work = sf.prefill_option(od.plan_for_traffic(pt["planner_inputs"])[1])
    return pool.engine, work, pool.transfer


def test_a_prefill_rank_behind_its_prompts_is_unstable():
    """Prompts spread around their mean (p95 twice it) leave the rank's utilisation, read at the prompts' length
    points, below 1 where full steps of mean-length prompts fall behind the arrivals: the rank's TTFT is infinite and
    it says it is not stable (it said stable with an infinite TTFT)."""
    em, work, transfer = _batch_cap_prefill()
    spread = replace(work, prompt_p95=2 * work.prompt_mean)
    p = lt.prefill_only(em, 10.7, spread, transfer)
    assert math.isinf(p.ttft_p95) and not p.stable and p.rho < 1


@pytest.mark.parametrize("p95_share", [1.0, 1.5, 2.0])
def test_a_prefill_ranks_ttft_grows_through_the_chains_edge(p95_share):
    """Past 95 % of its full steps' capacity batchq leaves a rank to the M/G/1 model; the TTFT there is at least
    batchq's at that edge, so it does not drop as the load grows (it fell from 3.23 s to 2.76 s with spread prompts,
    which a search for the fewest engines that meet the SLO cannot follow)."""
    em, work, transfer = _batch_cap_prefill()
    w = replace(work, prompt_p95=p95_share * work.prompt_mean)
    kmax = int(w.budget // w.prompt_mean)
    edge = batchq._NEAR_FULL * kmax / em.step(0.0, kmax * w.prompt_mean, 0.0, w.prompt_mean / 2)
    below, above = (lt.prefill_only(em, edge * f, w, transfer) for f in (0.999, 1.001))
    assert below.stable and above.stable
    assert above.ttft_p95 >= below.ttft_p95 and above.ttft_p50 >= below.ttft_p50 and above.ttft_mean >= below.ttft_mean


def test_the_simulation_splits_ttft_at_admission():
    """TTFT = the wait for the step that admits a request into a slot + the time from that step's start to its first
    token, request by request; a rank with room admits within a step, a rank whose two slots are 75 % busy makes its
    arrivals wait for one (the split the bench compares with the planner's slot wait and open-rank TTFT)."""

    def run(slots: int) -> qs.Result:
        fleet = qs.Fleet(1, 1, slots, "random", lambda decodes, tokens, _ctx: 0.01 + tokens * 1e-5, 2048)
        return qs.simulate(fleet, 1.5, (1000, 1000), (100, 100), n=1500)

    roomy, tight = run(64), run(2)
    for res in (roomy, tight):
        assert len(res.wait) == len(res.after) == len(res.ttft)
        # admitted at a step's start, after its arrival; its first token at least one step later
        assert min(res.wait) >= 0 and min(res.after) >= 0.01
    step = 0.01 + 2048 * 1e-5  # the longest step
    assert roomy._p(roomy.wait, 0.95) <= step
    assert tight._p(tight.wait, 0.95) > 10 * step
    assert tight._p(tight.after, 0.95) == pytest.approx(roomy._p(roomy.after, 0.95), rel=0.5)


def test_the_slot_chain_with_one_hold_is_erlang_c():
    """The chain of ``slot_queue: chain`` (queueing.chain_slot_wait) reduces to the M/M/c queue when a hold does not
    depend on how many slots are busy and no prefill burst widens it: Erlang C's probability of waiting and the drain
    c / hold - lam (exponential holds)."""
    sw = qu.chain_slot_wait(3.0, (8, 2), (lambda _m: 4.0, 4.0), 1.0)
    assert sw.prob == pytest.approx(qu.erlang_c(16, 12.0), rel=1e-9)
    assert sw.rate == pytest.approx(16 / 4.0 - 3.0, rel=1e-9)
    # holds that grow with the busy slots wait more often than the mean hold's Erlang C says
    grows = qu.chain_slot_wait(3.0, (8, 2), (lambda m: 3.0 + m / 8, 4.0), 1.0)
    assert grows.prob > qu.erlang_c(16, 3.0 * 3.5)
    # prefill bursts spread the occupancy: more arrivals find the slots full
    assert qu.chain_slot_wait(3.0, (8, 2), (lambda _m: 4.0, 4.0), 1.0, 1.7).prob > sw.prob
    # a full rank that frees its slots slower than requests come does not drain
    assert not qu.chain_slot_wait(3.0, (8, 2), (lambda _m: 4.0, 6.0), 1.0).stable


def _serve_sim(pid: str, queue: str) -> tuple:
    """(the plan's aggregated engine under ``slot_queue: queue``, its simulation, the point's TTFT SLO in s)."""
    pt = next(p for p in od.points() if p["id"] == pid)
    inp = copy.deepcopy(pt["planner_inputs"])
    inp["policy"] = dict(inp.get("policy") or {}, slot_queue=queue)
    inp = od.plan_for_traffic(inp)[1]
    serve = next(c for c in sf.cases(inp) if c.fleet.decode)
    return serve, qs.pool(sf.runs(serve, SEEDS, HOLDS)), pt["planner_inputs"]["slo"]["ttft_p95_ms"] / 1000


@pytest.mark.parametrize("pid", ["35b-h100x16-chat", "70b-h100-rag", "70b-h100-pd-long"])
def test_the_chain_plan_keeps_the_ttft_it_promises(pid):
    """Points whose plan under Erlang C (``slot_queue: erlang``) promises a TTFT p95 its engines miss under Poisson
    arrivals (the simulation, four runs pooled): the plan under ``slot_queue: chain`` sizes engines that keep it, and
    its figure is no lower than the simulation's 93rd percentile (Erlang C's: its 74th-90th). The ratio of the two p95s
    is not asserted: on these points two pools of four runs differ by up to 1.6x (35b-h100x16-chat 0.46 s and 0.30 s
    against the chain's 0.61 s, the simulation's p98-p99)."""
    erlang, erlang_sim, slo = _serve_sim(pid, "erlang")
    assert erlang.ttft_p95 <= slo < erlang_sim.ttft_p95, (erlang.ttft_p95, erlang_sim.ttft_p95, slo)
    chain, chain_sim, _slo = _serve_sim(pid, "chain")
    assert chain.ttft_p95 <= slo and chain_sim.ttft_p95 <= slo, (chain.ttft_p95, chain_sim.ttft_p95, slo)
    level = bisect.bisect_right(chain_sim.ttft, chain.ttft_p95) / len(chain_sim.ttft)
    assert level >= 0.93, (chain.ttft_p95, chain_sim.ttft_p95, level)
    assert chain.tpot_p95 == pytest.approx(chain_sim.tpot_p95, rel=WITHIN)


def test_the_chain_plan_on_a_too_small_cluster_leaves_no_gpu_idle():
    """30b-l40s-chat's own 8 L40S hold about half its traffic. Under the chain the P/D option carries 50 % on 5 of
    them (its next decode engine needs 4 GPUs, 3 are left) and the single pool 44 % on all 8: a share is only known to
    one engine of its option (here 1/9 of the traffic), so the two carry the same and the plan keeps the one that
    leaves no GPU idle while the SLOs are missed (serving.py; issue 27's rule)."""
    pt = next(p for p in od.points() if p["id"] == "30b-l40s-chat")
    inp = od.planner_run_inputs(copy.deepcopy(pt["planner_inputs"]))
    inp["policy"] = dict(inp.get("policy") or {}, slot_queue="chain")
    p = plan(inp)
    assert any("the SLOs are missed" in w for w in p["warnings"]), p["warnings"]
    assert p["latency"]["meets_slo"] is False and p["spare_gpus"]["count"] == 0, p["spare_gpus"]


def test_a_dp_prefill_pool_under_the_chain_matches_the_simulation():
    """dsv3-h200-mid's P/D prefill engine is 8 DP ranks behind vLLM's balancer: an arrival goes to an idle rank, so a
    step is in its way (and carries other prompts' tokens into its step) only when all 8 are busy, Erlang C over
    them. Counted as one rank's utilisation, the chain put its TTFT p95 at 2.19 s against 0.92 s simulated."""
    pt = next(p for p in od.points() if p["id"] == "dsv3-h200-mid")
    inp = copy.deepcopy(pt["planner_inputs"])
    inp["policy"] = dict(inp.get("policy") or {}, slot_queue="chain")
    pool = next(c for c in sf.cases(od.plan_for_traffic(inp)[1]) if not c.fleet.decode)
    assert pool.fleet.dp == 8
    sim = qs.pool(sf.runs(pool, SEEDS[:2], HOLDS))
    assert pool.ttft_p95 == pytest.approx(sim.ttft_p95, rel=WITHIN), (pool.ttft_p95, sim.ttft_p95)
