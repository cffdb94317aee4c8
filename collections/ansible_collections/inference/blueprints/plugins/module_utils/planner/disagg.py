# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Stage: the disaggregated (P/D) option. Every layout is sized as a prefill engine (replicas until TTFT p95, the
KV transfer and the wait for a decode slot included, meets the SLO) and as a decode engine (the largest batch whose
TPOT p95 meets it, replicas until arrivals find a free slot); the cheapest pair that fits wins. It reuses the layout
search's machinery (search.py: layouts, memory, batch caps) (docs/planner.md, "Layout search")."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from . import latency as lt
from . import perf, routing, units
from . import queueing as qu
from .search import (
    Candidate,
    Cost,
    Demand,
    Hardware,
    Sizer,
    _batch_cap,
    _fitted,
    _headroom_rule,
    _ms,
    _smallest,
    batch_slo,
    demand,
    efficiencies,
    layouts,
)
from .structs import Layout, Run, r

# P/D: the share of prompts that may wait for a decode slot. The prefill pool meets TTFT at the (95 + this) th
# percentile, so that TTFT p95 holds with the wait (union bound: P(TTFT + wait > SLO) <= 4 % + 1 %).
DECODE_SLOT_WAIT = 0.01


def size_decode(sz_: Sizer, lay: Layout, lam: float) -> Candidate:
    """A P/D decode engine: decode-only steps; sequences in flight = arrival rate x decode time (Little's law)."""
    run, c, hw, eff, dem = sz_.run, sz_.c, sz_.hw, sz_.eff, sz_.dem
    cand = _fitted(sz_, "decode", lay, c.num_spec)
    if not cand.fits:
        return cand
    mem = cand.mem
    em = lt.EngineModel(c, lay, eff, hw.topo())
    cap, limit = _batch_cap(run, mem, dem.work, "decode")
    b, full = lt.max_batch(lambda x: lt.decode_only(em, x, dem.work), batch_slo(run), cap)
    if b == 0:
        cand.rejected = f"TPOT {_ms(full.tpot_p95)} ms even at one sequence (SLO {run.slo['tpot_p95_ms']} ms)"
        return cand
    cand.batch, cand.full, cand.limit = b, full, ("tpot" if b < cap else limit)
    cand.rejected = _headroom_rule(cand, c)
    if cand.rejected:
        return cand
    inflight = lam * full.e2e if dem.open else float(dem.sessions or 0)
    reps = max(1, math.ceil(inflight / (b * dem.util * lay.dp) - 1e-9))
    if dem.open:
        # the fewest replicas whose ranks find a free slot at once for all but DECODE_SLOT_WAIT of arrivals (a prompt
        # that arrives as KV waits for one like any request); the hold is the decode time of a full rank
        def free(n: int) -> bool:
            return _decode_slots(dem, lam, (n, lay.dp), b, full.e2e).prob <= DECODE_SLOT_WAIT

        reps = _smallest(free, math.ceil(inflight / (b * lay.dp) - 1e-9), max(4 * reps, 64)) or reps
    cand.replicas, cand.gpus, cand.engine = reps, reps * lay.world, em
    cand.load = decode_at(cand, dem, lam, reps)
    return cand


def decode_at(cand: Candidate, dem: Demand, lam: float, reps: int) -> lt.Point:
    """One decode rank's latency when ``reps`` engines of the candidate carry the traffic."""
    b, lay = cand.batch, cand.lay
    inflight = lam * cand.full.e2e if dem.open else float(dem.sessions or 0)
    per_rank = max(1.0, min(float(b), inflight / (reps * lay.dp)))
    load = lt.decode_only(cand.engine, per_rank, dem.work)
    if dem.open:
        load = replace(load, slots=_decode_slots(dem, lam, (reps, lay.dp), b, cand.full.e2e))
    return load


def _decode_slots(dem: Demand, lam: float, engines: tuple, batch: int, hold: float) -> lt.SlotWait:
    """The wait for a decode slot when ``engines`` = (replicas, DP ranks each) of ``batch`` slots carry ``lam``."""
    reps, dp = engines
    q_lam, ranks = routing.shared_queue(dem.router, lam, reps, dp)
    sw = lt.slot_wait(q_lam, batch * ranks, hold, dem.work.hold_cv2)
    return lt.jsq_wait(sw, batch, hold, dem.work.hold_cv2) if routing.jsq(dem.router, ranks, dp) else sw


def prefill_at(cand: Candidate, dem: Demand, lam: float, reps: int) -> lt.Point:
    """One prefill rank's latency when ``reps`` engines of the candidate carry the traffic."""
    q_lam, ranks = routing.shared_queue(dem.router, lam, reps, cand.lay.dp)
    return lt.prefill_only(cand.engine, lam / (reps * cand.lay.dp), dem.work, cand.transfer, servers=ranks)


def size_prefill(sz_: Sizer, lay: Layout, lam: float, transfer: float) -> Candidate:
    """A P/D prefill engine: replicas until TTFT (queueing and the KV transfer included) meets the SLO at the
    (95 + DECODE_SLOT_WAIT)th percentile, room for the prompts that wait for a decode slot."""
    run, c, hw, eff, dem = sz_.run, sz_.c, sz_.hw, sz_.eff, sz_.dem
    cand = _fitted(sz_, "prefill", lay, 0)
    if not cand.fits:
        return cand
    cand.engine, cand.transfer = lt.EngineModel(c, lay, eff, hw.topo()), transfer
    slo_ttft = run.slo["ttft_p95_ms"] / 1000

    def at(reps: int) -> lt.Point:
        return prefill_at(cand, dem, lam, reps)

    def ok(reps: int) -> bool:
        p = at(reps)
        tail = qu.lognormal_quantile(p.ttft_p50, p.ttft_p95, 0.95 + (DECODE_SLOT_WAIT if dem.open else 0.0))
        return p.stable and p.rho <= dem.util and tail <= slo_ttft

    reps = _smallest(ok, 1, 256)
    if reps is None:
        cand.rejected = _prefill_miss(run, dem, lay, at(256), 256)
        return cand
    cand.replicas, cand.gpus, cand.load = reps, reps * lay.world, at(reps)
    cand.batch = 0
    return cand


def _prefill_miss(run: Run, dem: Demand, lay: Layout, p: lt.Point, most: int) -> str:
    """Why no prefill replica count up to ``most`` meets TTFT: the SLO actually missed, never a figure under it."""
    at = f"at {most} prefill engine(s) of {lay.world} GPU(s)"
    slo = run.slo["ttft_p95_ms"]
    if not p.stable or math.isinf(p.ttft_p95):
        return (
            f"throughput: even {most} prefill engine(s) of {lay.world} GPU(s) do not keep up with the prompts (the "
            "queue does not drain)"
        )
    if p.ttft_p95 * 1000 > slo + 1e-9:
        return f"TTFT p95 {_ms(p.ttft_p95)} ms {at}, over its SLO of {slo} ms"
    return (
        f"TTFT p95 {_ms(p.ttft_p95)} ms {at} is within its SLO of {slo} ms, but the engines are {p.rho * 100:.0f} % "
        f"busy (target utilization {dem.util * 100:.0f} %) or the prompts waiting for a decode slot miss it"
    )


@dataclass
class Disagg:
    prefill: Candidate | None
    decode: Candidate | None
    prefill_hw: Hardware
    decode_hw: Hardware
    cost: float  # GPU-hours (cost classes) per hour for the traffic
    within_hw: bool
    why: str = ""
    prefill_all: list = field(default_factory=list)
    decode_all: list = field(default_factory=list)
    transfer_s: float = 0.0
    eff_why: list = field(default_factory=list)
    deployed: tuple | None = None  # (prefill, decode) latency at the replicas the hardware holds, when fewer

    def replicas_on_hw(self) -> tuple[int, int]:
        """(prefill, decode) replicas the hardware holds: the traffic's need, or, when the pools need more GPUs than
        there are, every GPU: one engine each, then the next engine to the pool furthest below its need."""
        p, d = self.prefill, self.decode
        if self.decode_hw is not self.prefill_hw:
            return (
                max(1, min(p.replicas, self.prefill_hw.total // p.world)),
                max(1, min(d.replicas, self.decode_hw.total // d.world)),
            )
        free = self.prefill_hw.total - p.world - d.world
        if p.gpus + d.gpus <= self.prefill_hw.total or free < 0:
            return p.replicas, d.replicas
        reps = [1, 1]
        while True:
            opts = [
                (reps[i] / cand.replicas, i)
                for i, cand in enumerate((p, d))
                if reps[i] < cand.replicas and free >= cand.world
            ]
            if not opts:
                return reps[0], reps[1]
            i = min(opts)[1]
            reps[i] += 1
            free -= (p, d)[i].world

    def table(self, lam: float, out_tokens: float, chosen: bool) -> list[dict]:
        """Every prefill and decode candidate of the P/D option with its cost for the traffic; the option's pair
        first (``chosen``: whether the plan deploys it)."""
        rows = []
        for role, cands, best, hw in (
            ("prefill", self.prefill_all, self.prefill, self.prefill_hw),
            ("decode", self.decode_all, self.decode, self.decode_hw),
        ):
            cost = Cost(hw.gpu["cost_class"], lam, out_tokens)
            order = sorted(cands, key=lambda x: (x is not best, bool(x.rejected), not x.ok, x.gpus or 10**9, x.world))
            for cand in order:
                d = cand.doc(cost)
                if cand is best:
                    d["chosen"] = chosen
                    d["why"] = f"the P/D option's {role} pool: the cheapest pair that fits" + (
                        "" if chosen else "; the plan stays aggregated"
                    )
                elif cand.rejected or not cand.ok:
                    d["why"] = cand.rejected or f"no {role} replica count meets the SLO"
                elif best is not None:
                    more = (cand.gpus - best.gpus) * hw.gpu["cost_class"]
                    d["why"] = (
                        f"costs {r(more, 2)} {units.COST_PER_HOUR} more than {best.label()} for the traffic"
                        if more > 0
                        else f"the pair with it costs more or fits the hardware less well than with {best.label()}"
                    )
                rows.append(d)
        return rows

    def served(self) -> float:
        """The share of the traffic the pools the hardware holds carry (1: all of it)."""
        if self.prefill is None:
            return 0.0
        if self.prefill.world + self.decode.world > self.prefill_hw.total and self.decode_hw is self.prefill_hw:
            return 0.0
        pr, dr = self.replicas_on_hw()
        return min(1.0, pr / self.prefill.replicas, dr / self.decode.replicas)


def settle_decode(sz_: Sizer, cand: Candidate, prefill: Candidate, lam: float) -> None:
    """max_num_seqs of the chosen P/D decode engine at its replicas, as ``settle_batch`` for a serve engine: between
    the fewest slots the decode load needs and the largest batch whose TPOT meets the SLO, the one that leaves TPOT
    of a full rank and TTFT p95 (the prefill pool's, with the wait for a decode slot: queueing.with_wait_p95) the same
    share of headroom, never past either SLO."""
    run, dem, em = sz_.run, sz_.dem, cand.engine
    if not cand.ok or not dem.open or em is None or cand.batch <= 1 or prefill.load is None:
        return
    slo_tpot, slo_ttft = run.slo["tpot_p95_ms"] / 1000, run.slo["ttft_p95_ms"] / 1000
    pl, lay = prefill.load, cand.lay

    def at(c: int) -> tuple[float, float]:  # (TPOT of a full rank, TTFT p95 with the decode slot wait) / SLOs
        full = lt.decode_only(em, c, dem.work) if c != cand.batch else cand.full
        sw = _decode_slots(dem, lam, (cand.replicas, lay.dp), c, full.e2e)
        return full.tpot_p95 / slo_tpot, lt.with_wait_p95(pl.ttft_p50, pl.ttft_p95, sw) / slo_ttft

    hi = cand.batch
    tp_hi, tt_hi = at(hi)
    if tp_hi < tt_hi:
        return
    lo = max(1, math.ceil(lam * cand.full.e2e / (cand.replicas * lay.dp)))
    while hi - lo > 1:  # the smallest batch whose TPOT share still exceeds its TTFT share
        mid = (lo + hi) // 2
        tp_m, tt_m = at(mid)
        if tp_m >= tt_m:
            hi = mid
        else:
            lo = mid
    best = min((c for c in (lo, hi) if c <= cand.batch), key=lambda c: max(at(c)))
    if max(at(best)) > 1.0 + 1e-9 or best >= cand.batch:
        return
    cand.batch, cand.limit = best, "ttft/tpot balance"
    cand.full = lt.decode_only(em, best, dem.work)
    cand.load = decode_at(cand, dem, lam, cand.replicas)


def _transfer(sz_: Sizer, lay: Layout, same_node: bool, length: float) -> float:
    """The KV of a ``length``-token prompt from the prefill engine to the decode engine: NVLink inside one node, else
    the node interconnect."""
    if same_node:
        gb, latency = sz_.eff.link_gb_s, perf.interconnect("nvlink")["latency_us"] * 1e-6
    else:
        ic = perf.interconnect(sz_.run.n["interconnect"])
        gb, latency = ic["gb_s_per_gpu"] or sz_.eff.link_gb_s, ic["latency_us"] * 1e-6
    return lt.kv_transfer_s(sz_.c, length, lay.tp * lay.pp, gb, latency)


def search_disagg(run: Run, ctxs: tuple, hws: tuple, lam: float) -> Disagg:
    """Prefill pool on the main GPUs (no speculative heads), decode pool on the decode GPUs (or the same ones).
    ``ctxs`` = (main engine context, decode engine context), ``hws`` = (main hardware, decode hardware)."""
    (c, dc), (hw, dhw) = ctxs, hws
    dem = demand(run)
    cp = c.with_spec(None)
    eff_p, why_p = efficiencies(run, cp, hw)
    eff_d, why_d = efficiencies(run, dc, dhw)
    same_node = hw.nodes == 1 and dhw is hw
    max_pp = run.sup.connector_needs("MooncakeConnector" if run.pol["kv_connector"] == "mooncake" else "NixlConnector")
    max_pp = max_pp.get("max_pp") or 64  # engine_compat.yaml: NIXL moves hybrid (GDN) state only with PP=1
    p_lays = [x for x in layouts(run, cp, hw)[0] if x.pp <= max_pp]
    d_lays = [x for x in layouts(run, dc, dhw)[0] if x.pp <= max_pp]
    psz, dsz = Sizer(run, cp, hw, eff_p, dem), Sizer(run, dc, dhw, eff_d, dem)
    prefills = [size_prefill(psz, lay, lam, _transfer(psz, lay, same_node, dem.work.prompt_p95)) for lay in p_lays]
    decodes = [size_decode(dsz, lay, lam) for lay in d_lays]
    cost_p, cost_d = hw.gpu["cost_class"], dhw.gpu["cost_class"]
    pok = [x for x in prefills if x.ok]
    dok = [x for x in decodes if x.ok]
    out = Disagg(None, None, hw, dhw, math.inf, False, prefill_all=prefills, decode_all=decodes)
    out.eff_why = why_p + [w for w in why_d if w not in why_p]
    if not pok or not dok:
        out.why = "no prefill layout meets TTFT p95" if not pok else "no decode layout meets TPOT p95"
        return out
    best = None
    for p in pok:
        for d in dok:
            cost = p.gpus * cost_p + d.gpus * cost_d
            fits = p.gpus + d.gpus <= hw.total if dhw is hw else (p.gpus <= hw.total and d.gpus <= dhw.total)
            key = (not fits, cost, p.gpus + d.gpus, max(p.world, d.world))
            if best is None or key < best[0]:
                best = (key, p, d, cost, fits)
    _key, p, d, cost, fits = best
    if fits and run.pol["batch_sizing"] == "balanced":
        settle_decode(dsz, d, p, lam)
    out.prefill, out.decode, out.cost, out.within_hw = p, d, cost, fits
    out.transfer_s = _transfer(psz, p.lay, same_node, dem.work.prompt_mean)
    return out
