# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""The planner's chosen pools of a grid point as fleets for the queue simulation (queue_sim.py), next to the
planner's closed-form figures for them (issue 36 item 2)."""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.inference.blueprints.plugins.module_utils.planner import disagg, search
from ansible_collections.inference.blueprints.plugins.module_utils.planner.engine import EngineCtx
from ansible_collections.inference.blueprints.plugins.module_utils.planner.inputs import normalize
from ansible_collections.inference.blueprints.plugins.module_utils.planner.structs import Run

from tests.unit.planner import queue_sim as qs


@dataclass(frozen=True)
class Case:
    """One pool of a plan: the fleet to simulate, its traffic and the planner's TTFT / TPOT p95 for it (seconds;
    TPOT None for a P/D prefill pool)."""

    fleet: qs.Fleet
    lam: float
    prompt: tuple
    output: tuple
    ttft_p95: float
    tpot_p95: float | None
    # TTFT's parts by the planner (aggregated pools only): the slot wait's p95 and the TTFT p95 of a request that
    # finds a free slot (the rank before its slot wait, search.open_rank)
    wait_p95: float | None = None
    open_ttft_p95: float | None = None

    @property
    def hold(self) -> float:
        """Seconds a request holds its slot, by the planner's figures (the run length ``queue_sim.arrivals_for``
        scales to)."""
        return self.output[0] * (self.tpot_p95 or 0.0) + self.ttft_p95


def _step_fn(em, w, decode: bool):
    ctx_dec = w.prompt_mean + w.output_mean / 2
    cache: dict = {}

    def step(decodes: int, tokens: int, ctx_pre: float) -> float:
        # prefill tokens and their context to 32 and 256: the step-time grid, not the queue
        key = (decodes, -(-tokens // 32) * 32, round(ctx_pre / 256) * 256)
        t = cache.get(key)
        if t is None:
            t = cache[key] = em.step(float(decodes), float(key[1]), ctx_dec if decodes else 0.0, float(key[2]))
        return t

    return step


def _setting(inp: dict) -> tuple:
    run = Run(normalize(inp))
    c = EngineCtx(run.n, run.gpu, inp.get("weights", "auto"), inp.get("kv_cache_dtype", "auto"), None)
    hw = search.Hardware(run.gpu, run.gpn, run.nodes, run.n["interconnect"])
    return run, c, hw, search.demand(run)


def _prefill(setting: tuple):
    run, c, hw, dem = setting
    p = disagg.search_disagg(run, (c, c), (hw, hw), dem.lam).prefill
    return p if p is not None and p.ok else None


def prefill_option(inp: dict):
    """The P/D option's prefill pool for the inputs (``disagg``'s pool: its engine model, replicas, KV transfer) and
    the workload it serves; None without a P/D option."""
    setting = _setting(inp)
    p = _prefill(setting)
    return (p, setting[3].work) if p is not None else None


def cases(inp: dict) -> list[Case]:
    """The aggregated pool the planner sizes for the inputs and, when a P/D option exists, its prefill pool."""
    setting = _setting(inp)
    run, c, hw, dem = setting
    w, router = dem.work, dem.router
    prompt, output = (w.prompt_mean, w.prompt_p95), (w.output_mean, w.output_p95 or w.output_mean)
    out = []
    s = search.search_serve(run, c, hw)
    ch = s.chosen if s else None
    if ch is not None and ch.ok and ch.load is not None:
        em = ch.engine or search.lt.EngineModel(c, ch.lay, s.eff, hw.topo())
        extra = em.prefill_overhead()
        fleet = qs.Fleet(ch.replicas, ch.lay.dp, ch.batch, router, _step_fn(em, w, True), w.budget, True, extra)
        wait = ch.load.slots.p95 if ch.load.slots else 0.0
        opened = search.open_rank(em, dem, ch.replicas * ch.lay.dp, ch.batch, ch.full)[0].ttft_p95
        load = (ch.load.ttft_p95, ch.load.tpot_p95, wait, opened)
        out.append(Case(fleet, dem.lam, prompt, output, *load))
    p = _prefill(setting)
    if p is not None:
        em = p.engine
        extra = em.prefill_overhead() + p.transfer
        fleet = qs.Fleet(p.replicas, p.lay.dp, 256, router, _step_fn(em, w, False), w.budget, False, extra)
        out.append(Case(fleet, dem.lam, prompt, output, p.load.ttft_p95, None))
    return out


def runs(c: Case, seeds, holds: float, most: int = 60000) -> list:
    """The case simulated once per seed, each run ``holds`` of its holds long (``queue_sim.arrivals_for``): where the
    slots run 5-10 % waiting one run's TTFT p95 differs from another seed's by 25 % (median over the grid), so a
    figure compared with the planner's is a pool of several (``queue_sim.pool``)."""
    n = qs.arrivals_for(c.lam, c.hold, holds=holds, most=most)
    return [qs.simulate(c.fleet, c.lam, c.prompt, c.output, n=n, seed=s) for s in seeds]
