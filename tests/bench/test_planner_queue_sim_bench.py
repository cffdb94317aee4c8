"""The planner's closed-form queueing against the discrete-event simulation of the serving queue, over the whole
oracle grid (issue 36 item 2): figures printed; TPOT p95 asserted within 10 % (the unit suite,
tests/unit/planner/test_queue_sim.py, asserts a sample, the RAG case and the known gaps).

For every grid point the aggregated engine the plan sizes and its P/D option's prefill pool are simulated
(tests/unit/planner/queue_sim.py: Poisson arrivals, the planner's own step times, slots, chunked prefill, the router's
policy) and their TTFT / TPOT p95 printed next to the planner's, each run lasting 30 of the pool's holds
(``queue_sim.arrivals_for``: at most 60000 arrivals). The aggregated engines whose simulated TTFT p95 is over the
point's TTFT SLO are printed after the table: the closed form's slot wait is optimistic there (docs/planner.md
"Limitations"). The grid runs twice: under the default slot queue (policy ``slot_queue: erlang``, Erlang C over a
mean hold) and under ``slot_queue: chain`` (planner/slots.py). Each aggregated engine's TTFT p95 is also printed in
its two parts: the
wait for the step that admits a request into a slot (the planner's slot wait; the simulation's also holds the rest of
the step in progress) and the time from that step to the first token (the planner's TTFT of a request that finds a
free slot, ``search.open_rank``). A few minutes.
Run: .venv/bin/python -m pytest -q -s tests/bench/test_planner_queue_sim_bench.py
"""

from __future__ import annotations

import copy

from tests.unit.planner import oracle_data as od
from tests.unit.planner import queue_sim as qs
from tests.unit.planner import sim_fleet as sf

WITHIN = 0.10
# (slot queue, point) -> why the closed form's TPOT p95 of its aggregated engine is off the simulation by more than
# 10 % (measured on the grid of issue 36; docs/planner.md "Limitations")
TPOT_OFF: dict = {
    ("erlang", "70b-h200x16-rag"): "24.4 ms against 19.6 (1.25x, conservative): the aggregated option, the plan is P/D",
    ("erlang", "35b-h100-rag"): "21.6 ms against 19.6 (1.10x, conservative): not explained yet",
    ("erlang", "30b-h200-batch-cap"): "37.2 ms against 41.5 (0.90x; SLO 200 ms): not explained yet",
    ("erlang", "27b-h100-batch-cap"): "85.8 ms against 96.2 (0.89x; SLO 200 ms): not explained yet",
    ("chain", "70b-h200x16-rag"): "25.7 ms against 19.6 (1.31x, conservative): the aggregated option, the plan is P/D",
}


def _r(a: float, b: float) -> str:
    return f"{a / b:5.2f}" if b else "    -"


def _inputs(pt: dict, queue: str) -> dict:
    inp = copy.deepcopy(pt["planner_inputs"])
    if queue != "erlang":
        inp["policy"] = dict(inp.get("policy") or {}, slot_queue=queue)
    return inp


def _grid(queue: str) -> list:
    """Print the grid's pools under one slot queue model; return the TPOT misses not listed in TPOT_OFF."""
    print(f"\n== slot_queue: {queue}: closed form / simulation, p95 (seconds) ==")
    print("point                pool     engines slots   TTFT plan    sim  ratio   TPOT plan    sim  ratio")
    misses, over_slo, ratios, parts = [], [], [], []
    for pt in od.points():
        plan, inp = od.plan_for_traffic(_inputs(pt, queue))
        for c in sf.cases(copy.deepcopy(inp)):
            sim = qs.simulate(c.fleet, c.lam, c.prompt, c.output, n=qs.arrivals_for(c.lam, c.hold))
            tpot = c.tpot_p95 or 0.0
            print(
                f"{pt['id']:20s} {'serve' if c.fleet.decode else 'prefill':8s} {c.fleet.engines:7d} {c.fleet.slots:5d}"
                f"   {c.ttft_p95:9.3f} {sim.ttft_p95:6.3f} {_r(c.ttft_p95, sim.ttft_p95)}"
                f"   {tpot:9.4f} {sim.tpot_p95:6.4f} {_r(tpot, sim.tpot_p95)}"
            )
            if not c.fleet.decode:
                continue
            ratios.append(c.ttft_p95 / sim.ttft_p95)
            wait, after = sim._p(sim.wait, 0.95), sim._p(sim.after, 0.95)
            parts.append(
                f"{pt['id']:20s} {c.wait_p95:14.3f} {wait:6.3f} {_r(c.wait_p95, wait)}"
                f"   {c.open_ttft_p95:18.3f} {after:6.3f} {_r(c.open_ttft_p95, after)}"
            )
            if (queue, pt["id"]) not in TPOT_OFF and abs(tpot / sim.tpot_p95 - 1) > WITHIN:
                misses.append((queue, pt["id"], tpot, sim.tpot_p95))
            slo = pt["planner_inputs"].get("slo", {}).get("ttft_p95_ms")
            if slo and sim.ttft_p95 * 1000 > slo:
                figs = f"{c.ttft_p95:.2f} s planned, {sim.ttft_p95:.2f} s simulated, SLO {slo / 1000:g} s"
                what = "an option, the plan is P/D" if plan["disaggregated"] else "the plan"
                over_slo.append(f"{pt['id']} ({what}): {figs}")
    print(f"\n== slot_queue: {queue}: aggregated TTFT p95 in two parts, planned / simulated (seconds) ==")
    print("point                slot wait plan    sim  ratio   after admission plan    sim  ratio")
    print("\n".join(parts))
    ratios.sort()
    near = sum(1 for r in ratios if abs(r - 1) <= WITHIN)
    low = sum(1 for r in ratios if r < 1 - WITHIN)
    print(
        f"\n== slot_queue: {queue}: aggregated TTFT p95 {near} of {len(ratios)} within 10 %, {low} more than 10 % "
        f"under the simulation, {ratios[0]:.2f}-{ratios[-1]:.2f}x, median {ratios[len(ratios) // 2]:.2f}x =="
    )
    print(f"== slot_queue: {queue}: aggregated engines over their TTFT SLO in the simulation: {len(over_slo)} ==")
    print("\n".join(over_slo))
    return misses


def test_closed_form_against_the_simulation_over_the_grid():
    misses = _grid("erlang") + _grid("chain")
    assert not misses, misses
