# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""The distributions the plan's percentiles come from (docs/planner.md, "TTFT and queueing", "TPOT p95"): log-normal
lengths, the M/G/1 prefill wait, the M/G/c wait for a sequence slot, the p95 of TTFT with that wait, and the p95 over
requests of a request's TPOT from the prompts its rank admits during its life. Units: seconds."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

Z95 = 1.6449  # standard normal 95th percentile
_NORMAL = statistics.NormalDist()


def lognormal_sigma(mean: float, p95: float) -> float:
    """sigma of a log-normal with this mean and 95th percentile (0 when they are equal)."""
    if p95 <= mean:
        return 0.0
    r = math.log(p95 / mean)
    disc = Z95 * Z95 - 2 * r
    return Z95 - math.sqrt(disc) if disc > 0 else Z95


def prompt_points(mean: float, p95: float) -> tuple[float, float, list[float]]:
    """(median, p95, five quantile points at 10/30/50/70/90 %) of the log-normal prompt-length model."""
    s = lognormal_sigma(mean, p95)
    mu = math.log(mean) - s * s / 2
    zs = (-1.2816, -0.5244, 0.0, 0.5244, 1.2816)
    return math.exp(mu), p95, [math.exp(mu + s * z) for z in zs]


def mg1_wait(lam: float, es: float, es2: float) -> tuple[float, float]:
    """Mean waiting time of an M/G/1 queue (Pollaczek-Khinchine) and its utilisation; inf when saturated."""
    rho = lam * es
    if rho >= 1:
        return math.inf, rho
    return lam * es2 / (2 * (1 - rho)), rho


def wait_quantile(mean_wait: float, rho: float, p: float) -> float:
    """p-quantile of the waiting time, P(W > t) = rho exp(-rho t / E[W]) (exact for M/M/1, heavy-traffic M/G/1)."""
    if rho <= 0 or mean_wait <= 0 or rho <= 1 - p:
        return 0.0
    if math.isinf(mean_wait):
        return math.inf
    return mean_wait / rho * math.log(rho / (1 - p))


def erlang_c(servers: int, offered: float) -> float:
    """Probability that an arrival waits in an M/M/c queue of ``servers`` servers offered ``offered`` Erlangs
    (arrival rate x holding time); 1 when ``offered >= servers``. Erlang B by its recursion, then C from B: stable
    for thousands of servers."""
    if offered <= 0:
        return 0.0
    if offered >= servers:
        return 1.0
    b = 1.0
    for k in range(1, servers + 1):
        b = offered * b / (k + offered * b)
    rho = offered / servers
    return b / (1 - rho * (1 - b))


@dataclass(frozen=True)
class SlotWait:
    """Waiting for a free sequence slot: ``slots`` (max_num_seqs) servers, each request holding one for ``hold``
    seconds, Poisson arrivals at ``lam``."""

    rho: float  # offered / slots
    prob: float  # P(an arrival waits), Erlang C
    rate: float  # slots / hold - lam, scaled to M/G/c: the decay rate of the wait's tail, 1/s
    busy95: float = 0.0  # slots of a rank busy at the 95th percentile of time (chain_slot_wait; 0: not modelled)

    @property
    def stable(self) -> bool:
        return self.rho < 1

    @property
    def mean(self) -> float:
        return self.prob / self.rate if self.stable else math.inf

    @property
    def p50(self) -> float:
        return self.quantile(0.5)

    @property
    def p95(self) -> float:
        return self.quantile(0.95)

    def quantile(self, p: float) -> float:
        """The ``p``-quantile of the wait: 0 when at most 1 - p of arrivals wait."""
        if self.prob <= 1 - p:
            return 0.0
        if not self.stable or p >= 1:
            return math.inf
        return math.log(self.prob / (1 - p)) / self.rate


def _mgc_scale(c: int, rho: float, cv2: float) -> float:
    """M/G/c mean wait / M/M/c mean wait. For constant holds Cosmetatos' M/D/c approximation, half the M/M/c wait
    times 1 + (1 - rho)(c - 1)(sqrt(4 + 5c) - 2) / (16 rho c); between constant and exponential holds linear in cv2
    (Tijms); above, Allen-Cunneen's (1 + cv2) / 2."""
    cv2 = max(0.0, cv2)
    if cv2 >= 1:
        return (1 + cv2) / 2
    if rho <= 0:
        return 0.5
    # at most the M/M/c wait: the correction only matters near saturation, and constant holds never wait longer
    md = min(1.0, 0.5 * (1 + (1 - rho) * (c - 1) * (math.sqrt(4 + 5 * c) - 2) / (16 * rho * c)))
    return cv2 + (1 - cv2) * md


def slot_wait(lam: float, slots: int, hold: float, cv2: float = 1.0, hold_full: float = 0.0) -> SlotWait:
    """An M/G/c queue for one rank's sequence slots (``slots`` = max_num_seqs servers, Poisson arrivals at ``lam``,
    each request holding a slot ``hold`` seconds on average with squared coefficient of variation ``cv2``): an arrival
    waits with probability C (Erlang C, M/M/c), and a wait that happens is exponential with the M/M/c mean
    1 / (c / hold - lam) scaled to M/G/c (``_mgc_scale``): P(W > t) = C exp(-t rate). Against a simulation of the
    same queue (tests/unit/planner/test_latency_model.py) P(wait) is within a few per cent and the wait's p95 and
    mean within 20 % (the simulation's own spread over seeds is about 15 %)."""
    offered = lam * hold
    slots = max(1, int(slots))
    if offered <= 0 and not math.isinf(hold):
        return SlotWait(0.0, 0.0, math.inf)
    if math.isinf(hold) or offered >= slots:
        return SlotWait(offered / slots if not math.isinf(hold) else math.inf, 1.0, 0.0)
    # a wait happens when every slot is busy: the slots then turn over at the full rank's pace (``hold_full``, its
    # steps at every slot decoding), slower than the mean hold's
    drain = slots / max(hold, hold_full) - lam
    if drain <= 0:  # full, the slots free slower than requests arrive: the queue does not drain
        return SlotWait(max(1.0, offered / slots), 1.0, 0.0)
    return SlotWait(offered / slots, erlang_c(slots, offered), drain / _mgc_scale(slots, offered / slots, cv2))


def chain_slot_wait(lam: float, queue: tuple, holds: tuple, cv2: float, spread: float = 1.0) -> SlotWait:
    """The wait for one of ``ranks x slots`` sequence slots fed at ``lam`` (Poisson) when a request's hold depends on
    how many slots of its rank are busy (policy ``slot_queue: chain``, docs/planner.md "TTFT and queueing"): a bigger
    decode batch is a longer step. ``queue`` = (slots, ranks); ``holds`` = (``hold_at``, ``hold_full``):
    ``hold_at(m)`` a request's hold with ``m`` slots of its rank busy, ``hold_full`` its hold when the rank is full;
    ``spread``: how much wider than a birth-death chain's the occupancy's noise is (1: none).

    A birth-death chain over ``n``, the requests at the queue's ranks: they leave at ``n / hold_at(n / ranks)`` below
    ``N = ranks x slots`` and at ``N / hold_full`` from ``N`` on, a geometric tail. Every running request advances
    a token a step, a processor-sharing queue whose occupancy does not depend on the holds' spread. Prefill bursts
    that stall a whole rank make its noise ``spread`` times larger: the chain's log-probabilities are divided by it,
    which keeps its mode and widens it. An arrival waits when it finds ``n >= N`` (Poisson arrivals see time
    averages), and a wait is exponential at the full rank's drain ``N / hold_full - lam``, scaled to M/G/c as
    ``slot_wait`` (``_mgc_scale``). With one hold for every ``m`` and no spread this is Erlang C. ``busy95``: the
    slots of a rank busy at the occupancy's 95th percentile."""
    slots, ranks = max(1, int(queue[0])), max(1, int(queue[1]))
    hold_at, hold_full = holds
    n_max = slots * ranks
    if lam <= 0:
        return SlotWait(0.0, 0.0, math.inf)
    rho = lam * hold_full / n_max
    if math.isinf(hold_full) or rho >= 1:
        return SlotWait(max(1.0, rho) if not math.isinf(hold_full) else math.inf, 1.0, 0.0)
    logp, acc = [0.0], 0.0
    for n in range(1, n_max):
        acc += math.log(lam * hold_at(n / ranks) / n) / spread
        logp.append(acc)
    logp.append(acc + math.log(rho) / spread)  # n = N: the full rank's departures
    top = max(logp)
    p = [math.exp(x - top) for x in logp]
    waiting = p[n_max] / (1 - rho ** (1 / spread))  # n >= N, the geometric tail
    drain = n_max / hold_full - lam
    total, acc, n95 = sum(p[:n_max]) + waiting, 0.0, n_max
    for n in range(n_max):
        acc += p[n]
        if acc >= 0.95 * total:
            n95 = n
            break
    return SlotWait(rho, waiting / total, drain / _mgc_scale(n_max, rho, cv2), n95 / ranks)


def jsq_wait(central: SlotWait, slots: int, hold: float, cv2: float = 1.0) -> SlotWait:
    """The wait for a slot when a least-loaded router sends each arrival to one of several members of ``slots``
    servers each (holds of ``hold`` seconds when every slot is busy, squared CV ``cv2``), ``central`` the queue of all
    their servers (``slot_wait``). An arrival waits about as often as there (Erlang C: it waits only when every member
    is busy), but a
    request that waits is committed to its member and waits for one of that member's ``slots`` to free, the residual
    of the first of them, (1 + cv2) / 2 x hold / slots on average, not for the first of all the servers; deeper queues
    (near saturation) wait as the central queue's M/G/c. Checked against a simulation of join-the-shortest-queue in
    tests/unit/planner/test_queue_sim.py (a 64k-token prefill pool: the central queue alone halved the wait)."""
    if not central.stable or central.prob <= 0 or central.rate <= 0 or math.isinf(central.rate):
        return central
    residual = (1 + max(0.0, cv2)) / 2 * hold / max(1, slots)
    return replace(central, rate=1 / max(1 / central.rate, residual))


def lognormal_cv2(mean: float, p95: float) -> float:
    """Squared coefficient of variation of a log-normal with this mean and 95th percentile (0 when they are equal)."""
    sigma = lognormal_sigma(mean, p95)
    return math.exp(sigma * sigma) - 1.0


def lognormal_quantile(p50: float, p95: float, u: float) -> float:
    """The ``u``-quantile of a log-normal through this median and 95th percentile (``p95`` when it has no spread)."""
    if p50 <= 0 or p95 <= p50 or math.isinf(p95):
        return p95
    return p50 * math.exp(math.log(p95 / p50) / Z95 * _NORMAL.inv_cdf(u))


# Gauss-Legendre nodes and weights on [-1, 1] (16 points): the integral over TTFT in ``with_wait_p95``
_GL16 = (
    (0.0950125098376374, 0.1894506104550685),
    (0.2816035507792589, 0.1826034150449236),
    (0.4580167776572274, 0.1691565193950025),
    (0.6178762444026438, 0.1495959888165767),
    (0.7554044083550030, 0.1246289712555339),
    (0.8656312023878318, 0.0951585116824928),
    (0.9445750230732326, 0.0622535239386479),
    (0.9894009349916499, 0.0271524594117541),
)
_Z_LOW = -7.0  # the TTFT log-normal's mass below exp(mu - 7 sigma) is negligible (1e-12)


def _sum_tail(x: float, mu: float, s: float, sw: SlotWait) -> float:
    """P(TTFT + W > x) for TTFT = exp(mu + s Z) and the slot wait W (0 with probability 1 - C, else exponential):
    P(TTFT > x) + C E[exp(-rate (x - TTFT)); TTFT <= x], the expectation by Gauss-Legendre over z."""
    if x <= 0:
        return 1.0
    zx = (math.log(x) - mu) / s
    if zx <= _Z_LOW:
        return 1.0
    half, mid = (zx - _Z_LOW) / 2, (zx + _Z_LOW) / 2
    acc = 0.0
    for node, weight in _GL16:
        for z in (mid - half * node, mid + half * node):
            acc += weight * _NORMAL.pdf(z) * math.exp(-sw.rate * (x - math.exp(mu + s * z)))
    return 1.0 - _NORMAL.cdf(zx) + sw.prob * half * acc


def with_wait_p95(p50: float, p95: float, sw: SlotWait) -> float:
    """The 95th percentile of TTFT + a slot wait independent of it: TTFT the log-normal through its p50 and p95, the
    wait 0 for the 1 - C of arrivals that find a free slot and exponential (rate ``sw.rate``) for the others; the
    sum's tail is integrated numerically and its 0.95 point found by bisection. A wait that only a few per cent of
    arrivals see still moves the p95 of the sum (its own p95 is 0)."""
    if sw.prob <= 1e-9:  # nobody waits (to rounding)
        return p95
    if not sw.stable:
        return math.inf
    if p50 <= 0 or p95 <= p50 or math.isinf(p95):  # TTFT without spread: the wait's tail shifted by it
        return p95 + sw.quantile(0.95)
    s = math.log(p95 / p50) / Z95
    mu = math.log(p50)
    lo, hi = p95, lognormal_quantile(p50, p95, 0.975) + sw.quantile(0.975)  # hi: a union bound, tail <= 5 %
    for _dummy in range(60):
        if hi - lo <= 1e-4 * lo:
            break
        mid = (lo + hi) / 2
        if _sum_tail(mid, mu, s, sw) > 0.05:
            lo = mid
        else:
            hi = mid
    return hi


@dataclass(frozen=True)
class StepMix:
    """A rank's steps: decode-only (``t_dec``), carrying prefill chunks (``t_mix``), their mean (``t_bar``) and the
    decode time one admitted prompt's prefill adds to the rank's steps (``extra``: its chunks x (t_mix - t_dec) /
    prompts a step)."""

    t_dec: float
    t_mix: float
    t_bar: float
    extra: float


# equal-probability midpoints of the output-length distribution (standard normal quantiles of (i + 0.5) / 8)
_EIGHT = tuple(_NORMAL.inv_cdf((i + 0.5) / 8) for i in range(8))
_SQRT2 = math.sqrt(2.0)


def tpot_p95(st: StepMix, per_step: float, output: tuple[float, float], v: float) -> float:
    """The 95th percentile over requests of a request's TPOT (the mean time between its output tokens, as vLLM's
    benchmark reports it), from the step model; ``output``: the output lengths' (mean, p95). A request's ``n`` decode
    steps take ``n x t_dec`` plus the prefill chunks of the prompts its rank admits meanwhile, ``S = sum of M prompts'
    extra``, so its TPOT is
    ``t_dec + S / n``. M has mean ``per_step x n`` (admissions a step x its steps; E[TPOT] = t_bar) and S variance
    ``E[M] x extra^2 x v``, with v = the prompt lengths' squared CV (each prompt's chunks scale with its length) +
    Var(M)/E[M]: 1 for Poisson arrivals into free slots; for a full rank, where a prompt is admitted when another
    sequence finishes, the renewal counts' min(1, output lengths' squared CV) (a window of about one hold: Poisson-like
    for spread lengths, the long-run renewal spread below it; constant lengths: every other slot turns over exactly
    once in a request's life, no spread, p95 = mean). S by a gamma with that mean and variance (Wilson-
    Hilferty), mixed over the requests' output lengths (short requests spread more), at most every step mixed; the
    0.95 point of the mixture by bisection. Per-step latency varies much more than this: the p95 of per-token ITL
    would be t_mix as soon as more than 5 % of steps carry prefill chunks."""
    gap = max(0.0, st.t_mix - st.t_dec)
    if per_step <= 0 or st.extra <= 0 or v <= 1e-12 or gap <= 0:
        return st.t_bar
    out_mean, out_p95 = output
    sigma = lognormal_sigma(out_mean, out_p95) if out_p95 > out_mean else 0.0
    mu = math.log(out_mean) - sigma * sigma / 2
    lengths = [math.exp(mu + sigma * z) for z in _EIGHT] if sigma else [out_mean]
    # per request length: (decode steps, mean of S, 1 / (9 kappa)) of the gamma approximation
    pts = []
    for length in lengths:
        n = max(1.0, length - 1)
        pts.append((n, per_step * n * st.extra, v / (9.0 * per_step * n)))

    def tail(x: float) -> float:  # P(TPOT > x) over requests
        out = 0.0
        for n, m, c in pts:
            s = (x - st.t_dec) * n  # S at which this request's TPOT is x
            if s >= n * gap:
                continue  # more than every step mixed: impossible
            z = ((max(s, 0.0) / m) ** (1 / 3) - (1 - c)) / math.sqrt(c)
            out += 0.5 * math.erfc(z / _SQRT2)
        return out / len(pts)

    lo, hi = st.t_bar, st.t_dec + gap
    if tail(lo) <= 0.05:
        return lo
    while hi - lo > 1e-3 * hi:
        mid = (lo + hi) / 2
        if tail(mid) > 0.05:
            lo = mid
        else:
            hi = mid
    return hi
