# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""A rank's latency at a load: TPOT and TTFT (with queueing) at p50 and p95 from the step-latency model
(steps.py: ``EngineModel`` and the ``Workload`` it serves, which callers reach as ``lt.*``; the ``Topology`` it runs on
is imported from steps.py) (docs/planner.md, Latency).

Units: seconds, bytes, FLOPs. ``b`` is the number of decoding sequences of one DP rank in a step, ``chunk`` the prefill
tokens the same step carries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from . import batchq
from . import sizing as sz
from .engine import EngineCtx
from .queueing import (
    SlotWait,
    StepMix,
    chain_slot_wait,
    erlang_c,
    jsq_wait,
    mg1_wait,
    prompt_points,
    slot_wait,
    tpot_p95,
    wait_quantile,
    with_wait_p95,
)
from .steps import EngineModel, Workload

# --------------------------------------------------------------------------- prompt-length distribution


# --------------------------------------------------------------------------- aggregated engines


@dataclass
class Point:
    """Latency of one DP rank at a batch and load."""

    b: float
    lam: float
    tpot_p50: float
    tpot_p95: float
    ttft_p50: float
    ttft_p95: float
    ttft_mean: float
    rho: float
    mixed_share: float
    t_decode: float
    t_mixed: float
    e2e: float
    stable: bool
    slots: SlotWait | None = None  # open traffic: the wait for a free sequence slot, already in TTFT and E2E
    kind: str = "serve"  # serve | prefill (a P/D prefill rank: no decodes) | decode (a P/D decode rank: no prefill)

    def doc(self) -> dict:
        def ms(x: float):
            return None if math.isinf(x) else round(x * 1000, 1)

        slots = {}
        if self.slots is not None:
            slots = {
                "slot_utilization": None if math.isinf(self.slots.rho) else round(self.slots.rho, 3),
                "slot_wait_probability": round(self.slots.prob, 3),
                "slot_wait_p95_ms": ms(self.slots.p95),
            }
        out = {
            "ttft_p50_ms": ms(self.ttft_p50),
            "ttft_p95_ms": ms(self.ttft_p95),
            "ttft_mean_ms": ms(self.ttft_mean),
            "tpot_p50_ms": ms(self.tpot_p50),
            "tpot_p95_ms": ms(self.tpot_p95),
            "decode_step_ms": ms(self.t_decode),
            "mixed_step_ms": ms(self.t_mixed),
            "mixed_step_share": round(self.mixed_share, 3),
            "prefill_utilization": round(self.rho, 3),
            "sequences_per_rank": round(self.b, 1),
            "arrival_rate_per_rank": round(self.lam, 3),
            "e2e_s": None if math.isinf(self.e2e) else round(self.e2e, 3),
        }
        out.update(slots)
        if self.kind in NOT_APPLICABLE:  # what a P/D pool does not do has no figure (null), and the plan says why
            keys, why = NOT_APPLICABLE[self.kind]
            out.update(dict.fromkeys(keys))
            out["not_applicable"] = why
        return out


# The figures a P/D pool's rank has none of, and why (issue 36: no 0.0 placeholders).
NOT_APPLICABLE = {
    "prefill": (
        ("tpot_p50_ms", "tpot_p95_ms", "decode_step_ms", "mixed_step_share", "sequences_per_rank"),
        "a P/D prefill engine decodes no tokens: TPOT, decode steps and decoding sequences are the decode pool's",
    ),
    "decode": (
        ("ttft_p50_ms", "ttft_p95_ms", "ttft_mean_ms", "mixed_step_ms", "mixed_step_share", "prefill_utilization"),
        "a P/D decode engine prefills nothing: TTFT is the prefill pool's (the plan's latency adds the wait for a "
        "decode slot)",
    ),
}


@dataclass
class Prefill:
    """How one rank prefills: ``k`` prompts (of mean length) share each prefill step of ``t_step`` seconds; a prompt
    longer than the step's token room takes ``n`` chunks."""

    k: float
    n: int
    t_step: float  # a step that carries the prefill chunk(s) (and the decodes of the rank)
    share: float  # seconds of prefill steps one mean prompt occupies: n x t_step / k


def _room(w: Workload, b: float) -> float:
    return max(1.0, w.budget - b)


def _ctx(w: Workload, b: float) -> float:
    """Mean context of the decoding sequences of a step (none without decodes)."""
    return w.prompt_mean + w.output_mean / 2 if b else 0.0


def _chunk_step(em: EngineModel, b: float, w: Workload, k: float, length: float) -> tuple[int, float]:
    """(chunks, seconds of one chunk's step) for a prompt of ``length``, ``k`` such prompts sharing a step."""
    room = _room(w, b)
    n = max(1, math.ceil(length / room))
    tokens = length / n if n > 1 else min(room, k * length)
    return n, em.step(b, tokens, _ctx(w, b), length / 2)


def prefill_plan(em: EngineModel, b: float, w: Workload, lam: float, util: float) -> Prefill:
    """The fewest prompts per prefill step (vLLM fills a step's token budget with waiting prompts) that keep the
    rank's prefill busy share under ``util``; k = 1 at light load."""
    room = _room(w, b)
    kmax = max(1.0, math.floor(room / w.prompt_mean)) if w.prompt_mean < room else 1.0
    k = 1.0
    while True:
        n, t = _chunk_step(em, b, w, k, w.prompt_mean)
        share = n * t / k
        if lam * share <= util or k >= kmax:
            return Prefill(k, n, t, share)
        k = min(kmax, max(k + 1, math.ceil(k * lam * n * t / (k * util))))


PREFILL_UTIL = 0.9  # a rank batches waiting prompts into a prefill step until its prefill is busy at most this share


def closed_loop_factor(b: float) -> float:
    """Mean TTFT / unqueued TTFT of a closed population of ``b`` clients that resubmit on completion: 1 + log2(b) / 8,
    at most 2 (aiconfigurator 0.12.0 sdk/backends/vllm_backend.py _ttft_queuing_factor, fitted to measured vLLM
    TTFTs at fixed concurrency 1-64)."""
    return 1.0 if b <= 1 else min(1.0 + math.log2(b) / 8.0, 2.0)


@dataclass(frozen=True)
class RankLoad:
    """What a rank's TTFT depends on besides the engine: decoding sequences, arrival rate, mean step time, fixed
    extra time (P/D KV transfer) and whether the clients form a closed loop."""

    b: float
    lam: float
    t_bar: float = 0.0
    extra: float = 0.0
    closed: bool = False
    servers: int = 1  # ranks whose prefill serves one queue (routing.shared_queue); ``lam`` is per rank


def prefill_wait(lam: float, es: float, es2: float, servers: int) -> tuple[float, float, float, float]:
    """(mean, p50, p95 of the wait for a rank's prefill, utilisation): one rank, an M/G/1 queue (Pollaczek-Khinchine,
    the exponential tail); ``servers`` ranks behind a least-loaded router offered ``servers x lam``: Erlang C over
    them and the wait of the rank a request is sent to (``jsq_wait``)."""
    if servers <= 1:
        wq, rho = mg1_wait(lam, es, es2)
        return wq, wait_quantile(wq, rho, 0.5), wait_quantile(wq, rho, 0.95), rho
    cv2 = es2 / (es * es) - 1.0 if es > 0 else 0.0
    sw = jsq_wait(slot_wait(lam * servers, servers, es, cv2), 1, es, cv2)
    if not sw.stable:
        return math.inf, math.inf, math.inf, sw.rho
    return sw.mean, sw.p50, sw.p95, sw.rho


def _prompt_queue(per_token: float, pts: list, lam: float, servers: int) -> tuple[float, float, float, float]:
    """``prefill_wait`` for prompts of the quantile lengths ``pts``, each served ``per_token`` seconds a token."""
    svc = [per_token * x for x in pts]
    es = sum(svc) / len(svc)
    return prefill_wait(lam, es, sum(x * x for x in svc) / len(svc), servers)


def _ttft(em: EngineModel, w: Workload, pf: Prefill, ld: RankLoad):
    """TTFT p50 / p95 / mean and the prefill utilisation: an M/G/1 queue whose server is the rank's prefill (each
    prompt occupies its token share of the prefill steps), plus the prompt's own step(s), the step in flight,
    vLLM's per-request prefill overhead and ``extra`` (the KV transfer of P/D). A closed population (concurrent
    sessions, no arrival rate) waits by the measured closed-loop factor instead, exponentially distributed."""
    if w.queue == "chain" and not ld.closed:
        return _ttft_tokens(em, w, ld)
    b, lam, t_bar, extra = ld.b, ld.lam, ld.t_bar, ld.extra
    med, p95, pts = prompt_points(w.prompt_mean, w.prompt_p95)
    wq, w50, w95, rho = _prompt_queue(pf.share / w.prompt_mean, pts, lam, ld.servers)

    def own(length: float, k: float) -> float:
        n, t = _chunk_step(em, b, w, k, length)
        return n * t

    extra += em.prefill_overhead()
    if ld.closed:
        # the measured factor covers every wait of a closed population, prompts batched into one step included:
        # it multiplies the TTFT of the prompt alone in its step
        f = closed_loop_factor(b) - 1.0  # mean wait as a share of the unqueued TTFT
        return (
            (own(med, 1.0) + extra) * (1 + math.log(2) * f),
            (own(p95, 1.0) + extra) * (1 + math.log(20) * f),
            (own(w.prompt_mean, 1.0) + extra) * (1 + f),
            rho,
        )
    s50, s95 = own(med, pf.k), own(p95, pf.k)
    p50 = s50 + w50 + t_bar / 2 + extra
    # p95 of (own prefill + wait), independent: the medians plus the root-sum-square of the two tails
    p95v = s50 + w50 + math.hypot(s95 - s50, w95 - w50) + t_bar + extra
    mean = own(w.prompt_mean, pf.k) + wq + t_bar / 2 + extra
    return p50, p95v, mean, rho


def _ttft_tokens(em: EngineModel, w: Workload, ld: RankLoad):
    """TTFT p50 / p95 / mean and the prefill utilisation of open traffic with policy ``slot_queue: chain``: the
    prompt waits for the tokens ahead of it (an M/G/1 queue in tokens: vLLM fills each step's token room with the
    admitted prompts' chunks in arrival order, so the server is the room of a full step, ``room`` tokens a
    ``step(b, room)``), then its own chunks ride in the steps (a prompt shorter than the room shares its step with the
    tokens that arrive over it), plus the step in flight, vLLM's per-request prefill overhead and ``extra`` (the KV
    transfer of P/D). Checked against the queue simulation (tests/bench/test_planner_queue_sim_bench.py)."""
    b, lam, t_bar = ld.b, ld.lam, ld.t_bar
    extra = ld.extra + em.prefill_overhead()
    med, p95, pts = prompt_points(w.prompt_mean, w.prompt_p95)
    room, ctx = _room(w, b), _ctx(w, b)
    per_token = em.step(b, room, ctx, w.prompt_mean / 2) / room  # a token's share of a full step
    wq, w50, w95, rho = _prompt_queue(per_token, pts, lam, ld.servers)

    # a prefill rank of a queue over several ranks (vLLM's balancer, a least-loaded router) is sent an arrival while
    # it steps only when every rank is busy: Erlang C over them; a decoding rank always steps
    crowd = 1.0
    if not b and ld.servers > 1:
        crowd = erlang_c(ld.servers, ld.servers * lam * em.step(0.0, min(room, w.prompt_mean), ctx, w.prompt_mean / 2))

    def own(length: float) -> float:
        n = max(1, math.ceil(length / room))
        if n > 1:
            return n * em.step(b, room, ctx, length / 2)
        carry = crowd * lam * w.prompt_mean * em.step(b, length, ctx, length / 2)  # others' tokens over its step
        return em.step(b, min(room, length + carry), ctx, length / 2)

    s50, s95, s_mean = own(med), own(p95), own(w.prompt_mean)
    # the step in flight when the prompt comes: uniform over a step, always one on a decoding rank; a prefill rank
    # steps only while it has prompts, so an arrival finds one about as often as a step holds an arrival (on a
    # queue over several ranks, as often as every rank is busy)
    t_in, busy = (t_bar, 1.0) if b else (s_mean, min(1.0, lam * s_mean) if ld.servers <= 1 else crowd)

    def in_flight(u: float) -> float:
        return max(0.0, u - (1 - busy)) / busy * t_in if busy > 0 else 0.0

    r50, r95 = in_flight(0.5), in_flight(0.95)
    p50 = s50 + w50 + r50 + extra
    # p95 of (own prefill + wait + step in flight), independent: the medians plus the root-sum-square of the tails
    p95v = s50 + w50 + r50 + math.hypot(s95 - s50, w95 - w50, r95 - r50) + extra
    mean = s_mean + wq + busy * t_in / 2 + extra
    return p50, p95v, mean, rho


def aggregated(em: EngineModel, b: float, w: Workload, lam: float | None = None, servers: int = 1) -> Point:
    """Latency of one rank decoding ``b`` sequences while prefilling arrivals at ``lam`` per second (closed loop
    ``lam = b / E2E`` when None), prefill chunks mixed into the decode steps (vLLM chunked prefill); ``servers``
    ranks serve one queue with it (a least-loaded router)."""
    ctx = w.prompt_mean + w.output_mean / 2
    b = max(b, 1.0)
    t_dec = em.step(b, 0.0, ctx)
    out_steps = max(1.0, w.output_mean - 1)
    closed = lam is None
    util = PREFILL_UTIL
    pf = prefill_plan(em, b, w, 0.0, util)
    rate, t_bar, stable = (lam or 0.0), t_dec, True
    for _dummy in range(6):
        extra = pf.n * (pf.t_step - t_dec) / pf.k  # decode time one request's prefill adds to the rank's steps
        if closed:
            # b clients resubmit on completion: rate = b / E2E(t_bar) and t_bar = t_dec / (1 - rate x extra)
            c0 = pf.n * pf.t_step + em.prefill_overhead()
            q = c0 - b * extra - t_dec * out_steps
            t_new = (-q + math.sqrt(q * q + 4 * out_steps * t_dec * c0)) / (2 * out_steps)
            rate = b / (c0 + out_steps * t_new)
        else:
            load = rate * extra
            if load >= 1:
                stable = False
                break
            t_new = t_dec / (1 - load)
        pf_new = prefill_plan(em, b, w, rate, util)
        done = abs(t_new - t_bar) < 1e-6 and pf_new.k == pf.k
        t_bar, pf = t_new, pf_new
        if done:
            break
    if not stable:
        inf = math.inf
        return Point(b, rate, inf, inf, inf, inf, inf, 1.0, 1.0, t_dec, pf.t_step, inf, False)
    phi = min(1.0, rate * pf.n * t_bar / pf.k)
    tpot95 = tpot_p95(
        StepMix(t_dec, pf.t_step, t_bar, pf.n * (pf.t_step - t_dec) / pf.k),
        rate * t_bar,
        (w.output_mean, w.output_p95),
        w.prompt_cv2 + (min(1.0, w.hold_cv2) if closed else 1.0),
    )
    p50, p95, mean, rho = _ttft(em, w, pf, RankLoad(b, rate, t_bar, 0.0, closed, servers))
    e2e = mean + out_steps * t_bar
    return Point(b, rate, t_bar, tpot95, p50, p95, mean, rho, phi, t_dec, pf.t_step, e2e, rho < 1)


def with_slot_queue(p: Point, slots: int, cv2: float, queue: tuple = (1, False), holds: tuple = (0.0, None)) -> Point:
    """``p`` (one rank under open traffic at ``p.lam``) with the wait for one of its ``slots`` sequence slots
    (max_num_seqs) added: TTFT mean and E2E grow by the wait's mean, TTFT p50 by the wait's p50, TTFT p95 is the
    bound of ``with_wait_p95``. ``e2e`` is then the client's (queued time included). ``queue`` = (ranks, jsq):
    ``ranks`` share one queue (the DP ranks of one engine: vLLM's internal load balancer sends each request to the
    least loaded rank), so it has ``ranks x slots`` servers and ``ranks x p.lam`` arrivals; ``jsq``: the ranks are
    engines a least-loaded router picks from (``queueing.jsq_wait``); ``holds`` = (``hold_full``, ``hold_at``):
    a request's hold when every slot decodes (the pace the slots free at when an arrival waits) and, for policy
    ``slot_queue: chain``, its hold with ``m`` slots of its rank busy, ``hold_at(m)``; given, the wait is
    ``queueing.chain_slot_wait``'s (holds that grow with the batch), else Erlang C on the mean hold ``p.e2e``. A rank
    whose slots are offered more than they hold is unstable."""
    if not p.stable:
        return p
    ranks, jsq = queue
    hold_full, hold_at = holds
    if hold_at is not None:
        slow = p.tpot_p50 / p.t_decode if p.t_decode > 0 else 1.0
        sw = chain_slot_wait(p.lam * ranks, (slots, ranks), (hold_at, hold_full), cv2, (1 + slow * slow) / 2)
    else:
        sw = slot_wait(p.lam * ranks, slots * ranks, p.e2e, cv2, hold_full)
    if jsq:
        sw = jsq_wait(sw, slots, max(p.e2e, hold_full), cv2)
    if not sw.stable:
        inf = math.inf
        return replace(p, ttft_p50=inf, ttft_p95=inf, ttft_mean=inf, e2e=inf, stable=False, slots=sw)
    return replace(
        p,
        ttft_p50=p.ttft_p50 + sw.p50,
        ttft_p95=with_wait_p95(p.ttft_p50, p.ttft_p95, sw),
        ttft_mean=p.ttft_mean + sw.mean,
        e2e=p.e2e + sw.mean,
        slots=sw,
    )


def decode_only(em: EngineModel, b: float, w: Workload) -> Point:
    """A P/D decode rank: decode steps only (its prompts arrive as KV)."""
    ctx = w.prompt_mean + w.output_mean / 2
    b = max(b, 1.0)
    t = em.step(b, 0.0, ctx)
    out_steps = max(1.0, w.output_mean - 1)
    return Point(b, b / (out_steps * t), t, t, 0.0, 0.0, 0.0, 0.0, 0.0, t, t, out_steps * t, True, kind="decode")


def prefill_only(em: EngineModel, lam: float, w: Workload, transfer_s: float, servers: int = 1) -> Point:
    """A P/D prefill rank: prompts batched up to the token budget, no decodes; TTFT adds the KV transfer.
    ``servers``: ranks that serve one queue with it (a least-loaded router). A rank with its own queue whose prompts
    fit one step takes its TTFT from vLLM's batching (``batchq.prefill_ttft``: each step carries every prompt that
    waits when it starts); ``prefill_utilization`` stays the prompts' share of the rank's prefill capacity."""
    pf = prefill_plan(em, 0.0, w, lam, PREFILL_UTIL)
    p50, p95, mean, rho = _ttft(em, w, pf, RankLoad(0.0, lam, 0.0, transfer_s, servers=servers))
    batched = None
    if servers <= 1 and w.prompt_p95 <= w.budget:  # a rank's own queue, every prompt within one step's budget
        length = w.prompt_mean
        lengths = (length, prompt_points(w.prompt_mean, w.prompt_p95)[2])
        batched = batchq.prefill_ttft(lambda x: em.step(0.0, x, 0.0, length / 2), lam, lengths, w.budget, key=em)
    if batched is not None:
        extra = transfer_s + em.prefill_overhead()
        own = (batched.p50 + extra, batched.p95 + extra, batched.mean + extra)
        # past the load the chain follows, its figures at that load are a floor under the M/G/1 model's
        p50, p95, mean = (max(a, b) for a, b in zip(own, (p50, p95, mean), strict=True)) if batched.floor else own
    stable = rho < 1 and math.isfinite(p95)  # spread prompts: full steps can fall behind with rho below 1
    return Point(0.0, lam, 0.0, 0.0, p50, p95, mean, rho, 0.0, 0.0, pf.share, mean, stable, kind="prefill")


def max_batch(fn, slo_s: float, cap: int) -> tuple[int, object]:
    """The largest batch in [1, cap] whose ``fn(b).tpot_p95`` meets ``slo_s`` (0, None when even 1 misses): TPOT p95
    grows with the batch, nearly linearly, so the search interpolates between the last batch that meets the SLO and
    the first that misses it (false position), halving the interval when interpolation does not."""

    def excess(p) -> float:
        return p.tpot_p95 - slo_s if p.stable and not math.isinf(p.tpot_p95) else math.inf

    hi = max(1, int(cap))
    p = fn(1)
    if excess(p) > 0:
        return 0, p
    lo, best, e_lo = 1, p, excess(p)
    p = fn(hi)
    if excess(p) <= 0:
        return hi, p
    e_hi, bisect = excess(p), False
    while hi - lo > 1:
        if bisect or math.isinf(e_hi) or e_hi <= e_lo:
            mid = (lo + hi) // 2
        else:
            mid = min(hi - 1, max(lo + 1, int(lo + (hi - lo) * (-e_lo) / (e_hi - e_lo))))
        p = fn(mid)
        e = excess(p)
        width = hi - lo
        if e <= 0:
            lo, best, e_lo = mid, p, e
        else:
            hi, e_hi = mid, e
        bisect = (hi - lo) * 2 > width  # interpolation barely moved a bound: halve next
    return lo, best


def kv_transfer_s(c: EngineCtx, length: float, ranks: int, link_gb_s: float, latency_s: float) -> float:
    """Moving one prompt's KV (and GDN state) from the prefill engine's ranks to the decode engine."""
    nbytes = length * sz.kv_bytes_per_token(c.model, c.kv_bytes) + sz.gdn_state_bytes_per_seq(c.model, 1, 1, 0)
    return latency_s + nbytes / (max(ranks, 1) * link_gb_s * 1e9)
