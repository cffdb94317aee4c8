"""The planner against aiconfigurator 0.12.0 (the issue 9 oracle): figures printed, not asserted.

For every grid point of tests/unit/planner/oracle/aiconfigurator.json: the planner's choice (layout, batch, GPUs for
the traffic, modelled TTFT/TPOT p95) next to aiconfigurator's best GPU count, aiconfigurator's TPOT at the planner's
batch, and the planner's TTFT/TPOT against aiconfigurator's for every stored (mode, layout, batch); then the planning
time per point. The goals and the points that miss them are asserted in tests/unit/planner/test_oracle.py.
Run: .venv/bin/python -m pytest -q -s tests/bench/test_planner_oracle_bench.py
"""

from __future__ import annotations

import statistics
import time

from tests.unit.planner import oracle_data as od


def _pct(x: float | None) -> str:
    return "      -" if x is None else f"{(x - 1) * 100:+6.1f}%"


def test_planner_vs_aiconfigurator_figures():
    rows, errs = [], {"ttft": [], "tpot": []}
    print("\n== planner choice vs aiconfigurator 0.12.0 (vLLM backend) ==")
    head = "point                 GPUs plan/aic(x)   layout            batch  aic TPOT@batch  SLO   plan TTFT/TPOT p95"
    print(head)
    for pt in od.points():
        t = time.perf_counter()
        p = od.planned(pt)
        secs = time.perf_counter() - t
        mode, lay, batch = od.chosen(p)
        aic_tpot = od.interpolate(pt, mode, lay, batch, "tpot_ms")
        mine, best = od.plan_gpus(p), pt["best"]["gpus"]
        slo = pt["planner_inputs"]["slo"]
        lat = p["latency"]
        lay_s = f"{'P/D ' if p['disaggregated'] else ''}tp{lay['tp']}pp{lay['pp']}dp{lay['dp']}ep{lay['ep']}"
        print(
            f"{pt['id']:20s} {mine:3d}/{best!s:>3}({mine / best if best else 0:4.2f})  {lay_s:17s} {batch:5d}  "
            f"{aic_tpot if aic_tpot is None else round(aic_tpot, 1)!s:>14}  {slo['tpot_p95_ms']:4}  "
            f"{lat['ttft_p95_ms']}/{lat['tpot_p95_ms']}  ({secs * 1000:.0f} ms to plan)"
        )
        rows.append(secs)
    print("\n== same layout and batch: planner / aiconfigurator - 1 ==")
    print(
        "point                 mode        layout        batch   aic TTFT  plan TTFT    diff"
        "   aic TPOT  plan TPOT    diff"
    )
    for pt in od.points():
        for c in od.comparisons(pt):
            lay = c["layout"]
            lay_s = f"tp{lay['tp']}pp{lay['pp']}dp{lay['dp']}ep{lay['ep']}"

            def f(x):
                return "        -" if x is None else f"{x:9.1f}"

            print(
                f"{pt['id']:20s} {c['mode']:10s} {lay_s:13s} {c['batch']:5d} {f(c['aic_ttft_ms'])} {f(c['ttft_ms'])} "
                f"{_pct(c['ttft_ratio'])} {f(c['aic_tpot_ms'])} {f(c['tpot_ms'])} {_pct(c['tpot_ratio'])}"
            )
            for k in ("ttft", "tpot"):
                if c[f"{k}_ratio"] is not None:
                    errs[k].append(abs(c[f"{k}_ratio"] - 1))
    for k, v in errs.items():
        if v:
            within = sum(1 for e in v if e <= od.TOLERANCE)
            print(
                f"{k.upper()}: {len(v)} comparisons, median |error| {statistics.median(v) * 100:.1f}%, "
                f"max {max(v) * 100:.1f}%, {within} within +-25%"
            )
    print(f"planning time per point: median {statistics.median(rows) * 1000:.0f} ms, max {max(rows) * 1000:.0f} ms")
