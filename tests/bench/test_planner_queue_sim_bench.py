"""The planner's closed-form queueing against the discrete-event simulation of the serving queue, over the whole
oracle grid (issue 36 item 2): figures printed; TPOT p95 asserted within 10 % (the unit suite,
tests/unit/planner/test_queue_sim.py, asserts a sample, the RAG case and the known gaps).

For every grid point the aggregated engine the plan sizes and its P/D option's prefill pool are simulated
(tests/unit/planner/queue_sim.py: Poisson arrivals, the planner's own step times, slots, chunked prefill, the router's
policy) and their TTFT / TPOT p95 printed next to the planner's. The grid runs twice: under the default slot queue
(policy ``slot_queue: erlang``, Erlang C over a mean hold) and under ``slot_queue: chain`` (planner/slots.py).

The simulated TTFT p95 is noisy where plans land (the slots 5-10 % waiting: the 95th percentile turns on a few busy
periods). Measured on 2026-11-30: one run of 30 holds per engine (what this bench ran before) differs from another
seed's by more than 10 % on 34 of 51 aggregated engines (median 25 %, at most 152 %), and even 8 runs of 100 holds
pooled spread 12-28 % over three independent pools of four engines. So every figure here is a pool of ``SEEDS`` runs
of ``HOLDS`` holds each (``queue_sim.arrivals_for``), and the table prints the TTFT p95 of each half of the pool: the
figure's own uncertainty. A closed form can be no closer to the simulation than those halves are to each other.

Also printed: the simulation's quantile at the planner's TTFT p95 (the p95 is right when that is 0.95), each
aggregated engine's TTFT p95 in its two parts (the wait for the step that admits a request into a slot: the planner's
slot wait, the simulation's also holding the rest of the step in progress; and the time from that step to the first
token: the planner's TTFT of a request that finds a free slot, ``search.open_rank``), and the engines whose simulated
TTFT p95 is over the point's TTFT SLO. About 25 minutes on 2 cores.
Run: .venv/bin/python -m pytest -q -s tests/bench/test_planner_queue_sim_bench.py
"""

from __future__ import annotations

import bisect
import copy

from tests.unit.planner import oracle_data as od
from tests.unit.planner import queue_sim as qs
from tests.unit.planner import sim_fleet as sf

WITHIN = 0.10
LEVEL_BAND = 0.02  # the simulation's quantile at the planner's TTFT p95: within 2 points of 0.95
SEEDS = tuple(range(7, 15))  # eight samples of the traffic, pooled; halves: the first four and the last four
HOLDS = 100.0  # each run lasts 100 of the pool's holds (its first tenth warm-up)
MOST = 400_000  # arrivals of one run at most (the batch example's engines: about 94000 for 100 holds)
# (slot queue, point) -> why the closed form's TPOT p95 of its aggregated engine is off the pooled simulation by more
# than 10 % (measured on the grid of issue 36 on 2026-11-30; docs/planner.md "Limitations")
TPOT_OFF: dict = {
    ("erlang", "70b-h200x16-rag"): "24.4 ms against 19.6 (1.25x, conservative): the aggregated option, the plan is P/D",
    ("erlang", "27b-h100-batch-cap"): "85.8 ms against 96.8 (0.89x; SLO 200 ms): not explained yet",
    ("chain", "70b-h200x16-rag"): "25.7 ms against 19.6 (1.31x, conservative): the aggregated option, the plan is P/D",
}


def _r(a: float, b: float) -> str:
    return f"{a / b:5.2f}" if b else "    -"


def _inputs(pt: dict, queue: str) -> dict:
    inp = copy.deepcopy(pt["planner_inputs"])
    if queue != "erlang":
        inp["policy"] = dict(inp.get("policy") or {}, slot_queue=queue)
    return inp


def _sample(c: sf.Case) -> tuple:
    """(the pooled result, its first half's TTFT p95, its second half's)."""
    runs = sf.runs(c, SEEDS, HOLDS, MOST)
    half = len(runs) // 2
    return qs.pool(runs), qs.pool(runs[:half]).ttft_p95, qs.pool(runs[half:]).ttft_p95


def _median(xs: list) -> float:
    return sorted(xs)[len(xs) // 2]


def _grid(queue: str) -> list:
    """Print the grid's pools under one slot queue model; return the TPOT misses not listed in TPOT_OFF."""
    print(f"\n== slot_queue: {queue}: closed form / simulation, p95 (seconds) ==")
    print(
        "point                pool     engines slots   TTFT plan    sim  ratio  halves        q(sim)"
        "   TPOT plan    sim  ratio"
    )
    misses, over_slo, rows = [], [], []
    for pt in od.points():
        plan, inp = od.plan_for_traffic(_inputs(pt, queue))
        for c in sf.cases(copy.deepcopy(inp)):
            sim, a, b = _sample(c)
            tpot = c.tpot_p95 or 0.0
            level = bisect.bisect_right(sim.ttft, c.ttft_p95) / max(1, len(sim.ttft))  # the simulation's quantile
            print(
                f"{pt['id']:20s} {'serve' if c.fleet.decode else 'prefill':8s} {c.fleet.engines:7d} {c.fleet.slots:5d}"
                f"   {c.ttft_p95:9.3f} {sim.ttft_p95:6.3f} {_r(c.ttft_p95, sim.ttft_p95)}"
                f"  {a:6.3f} {b:6.3f}  {level:6.3f}"
                f"   {tpot:9.4f} {sim.tpot_p95:6.4f} {_r(tpot, sim.tpot_p95)}"
            )
            if not c.fleet.decode:
                continue
            rows.append((pt["id"], c, sim, abs(a - b) / sim.ttft_p95, level))
            if (queue, pt["id"]) not in TPOT_OFF and abs(tpot / sim.tpot_p95 - 1) > WITHIN:
                misses.append((queue, pt["id"], tpot, sim.tpot_p95))
            slo = pt["planner_inputs"].get("slo", {}).get("ttft_p95_ms")
            if slo and sim.ttft_p95 * 1000 > slo:
                figs = f"{c.ttft_p95:.2f} s planned, {sim.ttft_p95:.2f} s simulated, SLO {slo / 1000:g} s"
                what = "an option, the plan is P/D" if plan["disaggregated"] else "the plan"
                over_slo.append(f"{pt['id']} ({what}): {figs}")
    _summary(queue, rows)
    print(f"== slot_queue: {queue}: aggregated engines over their TTFT SLO in the simulation: {len(over_slo)} ==")
    print("\n".join(over_slo))
    return misses


def _summary(queue: str, rows: list) -> None:
    print(f"\n== slot_queue: {queue}: aggregated TTFT p95 in two parts, planned / simulated (seconds) ==")
    print("point                slot wait plan    sim  ratio   after admission plan    sim  ratio")
    for pid, c, sim, _u, _l in rows:
        wait, after = sim._p(sim.wait, 0.95), sim._p(sim.after, 0.95)
        print(
            f"{pid:20s} {c.wait_p95:14.3f} {wait:6.3f} {_r(c.wait_p95, wait)}"
            f"   {c.open_ttft_p95:18.3f} {after:6.3f} {_r(c.open_ttft_p95, after)}"
        )
    ratios = sorted(c.ttft_p95 / sim.ttft_p95 for _p, c, sim, _u, _l in rows)
    near = sum(1 for r in ratios if abs(r - 1) <= WITHIN)
    low = sum(1 for r in ratios if r < 1 - WITHIN)
    # within 10 % or within the simulation's own uncertainty (its halves' difference), whichever is wider
    fair = sum(1 for _p, c, sim, u, _l in rows if abs(c.ttft_p95 / sim.ttft_p95 - 1) <= max(WITHIN, u))
    unsure = [u for *_x, u, _l in rows]
    levels = sorted(lv for *_x, lv in rows)
    band = sum(1 for q in levels if abs(q - 0.95) <= LEVEL_BAND)
    print(
        f"\n== slot_queue: {queue}: aggregated TTFT p95 {near} of {len(ratios)} within 10 %, {low} more than 10 % "
        f"under the simulation, {ratios[0]:.2f}-{ratios[-1]:.2f}x, median {_median(ratios):.2f}x =="
    )
    print(
        f"== slot_queue: {queue}: the simulation's halves differ by more than 10 % on "
        f"{sum(1 for u in unsure if u > WITHIN)} of {len(unsure)} (median {100 * _median(unsure):.0f} %, at most "
        f"{100 * max(unsure):.0f} %); within 10 % or the halves' difference: {fair} of {len(rows)} =="
    )
    print(
        f"== slot_queue: {queue}: the planner's TTFT p95 is the simulation's p{100 * (0.95 - LEVEL_BAND):g}-"
        f"p{100 * (0.95 + LEVEL_BAND):g} on {band} of {len(levels)} aggregated engines, "
        f"p{100 * levels[0]:.1f}-p{100 * levels[-1]:.1f}, median p{100 * _median(levels):.1f} =="
    )


def test_closed_form_against_the_simulation_over_the_grid():
    misses = _grid("erlang") + _grid("chain")
    assert not misses, misses
