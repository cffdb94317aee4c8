"""The planner's closed-form queueing against the discrete-event simulation of the serving queue, over the whole
oracle grid (issue 36 item 2): figures printed; TPOT p95 asserted within 10 % (the unit suite,
tests/unit/planner/test_queue_sim.py, asserts a sample, the RAG case and the known gaps).

For every grid point the aggregated engine the plan sizes and its P/D option's prefill pool are simulated
(tests/unit/planner/queue_sim.py: Poisson arrivals, the planner's own step times, slots, chunked prefill, the router's
policy) and their TTFT / TPOT p95 printed next to the planner's, each run lasting 30 of the pool's holds
(``queue_sim.arrivals_for``: at most 60000 arrivals). The aggregated engines whose simulated TTFT p95 is over the
point's TTFT SLO are printed after the table: the closed form's slot wait is optimistic there (docs/planner.md
"Limitations"). Beside the closed form's TTFT ratio, the candidate slot wait's (tests/unit/planner/slot_chain.py), a
birth-death chain measured here before any plan uses it. Then each aggregated engine's TTFT p95 in its two parts: the
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
# point -> why the closed form's TPOT p95 of its aggregated engine is off the simulation by more than 10 % (measured on
# the grid of issue 36; docs/planner.md "Limitations")
TPOT_OFF: dict = {
    "70b-h200x16-rag": "24.4 ms against 19.6 (1.25x, conservative): the aggregated option, the plan is P/D",
    "35b-h100-rag": "21.6 ms against 19.6 (1.10x, conservative): not explained yet",
    "30b-h200-batch-cap": "37.2 ms against 41.4 (0.90x; SLO 200 ms): not explained yet",
    "27b-h100-batch-cap": "85.8 ms against 96.2 (0.89x; SLO 200 ms): not explained yet",
}


def _r(a: float, b: float) -> str:
    return f"{a / b:5.2f}" if b else "    -"


def test_closed_form_against_the_simulation_over_the_grid():
    print("\n== closed form / simulation, p95 (seconds) ==")
    print(
        "point                pool     engines slots   TTFT plan    sim  ratio  chain ratio   TPOT plan    sim  ratio"
    )
    misses, over_slo, chain, parts = [], [], [], []
    for pt in od.points():
        plan, inp = od.plan_for_traffic(pt["planner_inputs"])
        for c in sf.cases(copy.deepcopy(inp)):
            sim = qs.simulate(c.fleet, c.lam, c.prompt, c.output, n=qs.arrivals_for(c.lam, c.hold))
            tpot = c.tpot_p95 or 0.0
            print(
                f"{pt['id']:20s} {'serve' if c.fleet.decode else 'prefill':8s} {c.fleet.engines:7d} {c.fleet.slots:5d}"
                f"   {c.ttft_p95:9.3f} {sim.ttft_p95:6.3f} {_r(c.ttft_p95, sim.ttft_p95)}"
                f"  {_r(c.ttft_p95_chain, sim.ttft_p95) if c.ttft_p95_chain else '    -'}      "
                f"   {tpot:9.4f} {sim.tpot_p95:6.4f} {_r(tpot, sim.tpot_p95)}"
            )
            if c.fleet.decode:
                chain.append((c.ttft_p95 / sim.ttft_p95, c.ttft_p95_chain / sim.ttft_p95))
                wait, after = sim._p(sim.wait, 0.95), sim._p(sim.after, 0.95)
                parts.append(
                    f"{pt['id']:20s} {c.wait_p95:14.3f} {wait:6.3f} {_r(c.wait_p95, wait)}"
                    f"   {c.open_ttft_p95:18.3f} {after:6.3f} {_r(c.open_ttft_p95, after)}"
                )
            if c.fleet.decode and pt["id"] not in TPOT_OFF and abs(tpot / sim.tpot_p95 - 1) > WITHIN:
                misses.append((pt["id"], tpot, sim.tpot_p95))
            slo = pt["planner_inputs"].get("slo", {}).get("ttft_p95_ms")
            if c.fleet.decode and slo and sim.ttft_p95 * 1000 > slo:
                figs = f"{c.ttft_p95:.2f} s planned, {sim.ttft_p95:.2f} s simulated, SLO {slo / 1000:g} s"
                what = "an option, the plan is P/D" if plan["disaggregated"] else "the plan"
                over_slo.append(f"{pt['id']} ({what}): {figs}")
    print("\n== aggregated TTFT p95 in two parts, planned / simulated (seconds) ==")
    print("point                slot wait plan    sim  ratio   after admission plan    sim  ratio")
    print("\n".join(parts))
    for name, col in (("closed form", 0), ("candidate chain (slot_chain.py)", 1)):
        rs = [r[col] for r in chain]
        near = sum(1 for r in rs if abs(r - 1) <= WITHIN)
        print(f"\n== aggregated TTFT p95, {name}: {near} of {len(rs)} within 10 %, {min(rs):.2f}-{max(rs):.2f}x ==")
    print(f"\n== aggregated engines over their TTFT SLO in the simulation: {len(over_slo)} ==")
    print("\n".join(over_slo))
    assert not misses, misses
