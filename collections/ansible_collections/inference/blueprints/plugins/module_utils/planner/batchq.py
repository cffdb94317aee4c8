# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""TTFT on a P/D prefill rank that serves its own queue, as vLLM's scheduler batches it (issue 36 item 2;
docs/planner.md "TTFT and queueing"): every step takes all the prompts waiting when it starts, up to the step's token
budget (max_num_batched_tokens), so a prompt that arrives during a step is prefilled in the next one together with
every prompt that arrived during the same step, before and after it, and a step's time depends on how many it
carries (``step(tokens)``). Units: seconds, prompts.

The prompts waiting when a step starts form a Markov chain: ``W' = W - min(W, K) + N`` with ``K`` the whole prompts
that fit the budget and ``N`` the Poisson arrivals during the step (``lam x step(min(W, K) x length)``); an empty
queue idles until the next arrival, which starts a step alone. Its stationary distribution by power iteration
(extrapolated every few steps, Aitken-style, where the chain mixes slowly near saturation). A request's TTFT is the
rest of the step in progress when it comes (uniform over that step: Poisson arrivals see time averages), then the
steps that take the prompts ahead of it, then its own step, whose size counts the prompts that came after it in the
same step too. Prompt lengths are taken at their mean (the grid's points have constant lengths); a prompt longer than
the budget (chunked over several steps) or more than ``_MAX_PER_STEP`` prompts a step are out of scope: the caller
keeps its M/G/1 model there. From ``_NEAR_FULL`` of the full steps' capacity on the chain mixes too slowly to follow,
and the figures at that load come back as a floor under the caller's. Two simplifications (measured in
docs/planner.md): whole prompts per step, where vLLM fills the room left with a chunk of the next prompt, and a
request that comes during a step after which nobody waits is placed among that step's arrivals as if its place did
not depend on when it came. Checked against the queue simulation over the oracle grid's prefill pools
(tests/unit/planner/test_queue_sim.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

_TOL = 1e-6  # the chain's L1 change per step at which it counts as stationary (plans agree to 0.1 ms with 1e-8)
_MAX_STEPS = 2000
_NEAR_FULL = 0.95  # full steps' share of the rank's capacity from which the M/G/1 model is kept
_MAX_WAITING = 400  # prompts waiting at a step's start beyond which the queue is near saturation: not modelled here
_EXTRAPOLATE = 4  # every this many steps the iteration jumps ahead along its geometric convergence
_SLICES = 4  # the step in progress split into this many slices when prompts wait beyond it
_MAX_PER_STEP = 64  # prompts a step takes at most that the chain models (shorter prompts: many small steps' worth of
# states and terms; the caller keeps its M/G/1 model)
_NEGLIGIBLE = 1e-13  # a term of the TTFT's distribution this light is left out
_DIRECT_MU = 600.0  # Poisson means below this start from exp(-mu); above, exp(-mu) nears underflow: log space
_QUANTILE_RTOL = 1e-4


@dataclass(frozen=True)
class BatchTTFT:
    """TTFT p50 / p95 / mean of a prefill rank's requests (seconds, without fixed extras). ``floor``: the rank runs
    past the load the chain models, and these are its figures at that load, a floor under the caller's own."""

    p50: float
    p95: float
    mean: float
    floor: bool = False


def _poisson(mu: float, tail: float = 1e-9) -> list[float]:
    """P(N = n) for n = 0.. until the rest is below ``tail`` (far past the mean: log space, so that a large ``mu``
    neither underflows exp(-mu) nor runs on)."""
    if mu <= 0:
        return [1.0]
    last = int(mu + 12 * math.sqrt(mu) + 30)  # beyond it the Poisson tail is far below ``tail``
    if mu < _DIRECT_MU:  # exp(-mu) is a normal float: the recurrence p(n) = p(n - 1) mu / n
        p = math.exp(-mu)
        out, acc = [p], p
        for n in range(1, last + 1):
            if acc >= 1 - tail:
                break
            p *= mu / n
            out.append(p)
            acc += p
        return out
    out, acc, log_mu = [], 0.0, math.log(mu)
    for n in range(last + 1):
        p = math.exp(n * log_mu - mu - math.lgamma(n + 1))
        out.append(p)
        acc += p
        if n >= mu and acc >= 1 - tail:
            break
    return out


def _stationary(kmax: int, arrivals: list) -> list[float] | None:
    """The chain of prompts waiting at a step's start (index 1..): ``arrivals[s]`` the Poisson counts during a step
    of ``s`` prompts. None when it does not settle within ``_MAX_STEPS`` steps or ``_MAX_WAITING`` prompts (a rank
    near saturation, where the TTFT is long whichever model gives it)."""
    pi = [0.0, 1.0]
    prev = 0.0
    for it in range(_MAX_STEPS):
        new = [0.0] * (len(pi) + len(arrivals[kmax]))
        for w in range(1, len(pi)):
            p = pi[w]
            if p < 1e-14:
                continue
            s = min(w, kmax)
            rest = w - s
            q = arrivals[s]
            new[rest or 1] += p * q[0]  # nobody came: the queue's rest, or an idle spell and one arrival
            for n in range(1, len(q)):
                new[rest + n] += p * q[n]
        while len(new) > 2 and new[-1] < 1e-14:
            new.pop()
        if len(new) > _MAX_WAITING:
            return None
        pad = [0.0] * max(0, len(new) - len(pi))
        diff = sum(abs(a - b) for a, b in zip(new, pi + pad, strict=False)) + sum(pi[len(new) :])
        if diff < _TOL:
            return new
        if it % _EXTRAPOLATE == _EXTRAPOLATE - 1 and 0 < diff < prev:
            r = diff / prev
            if r < 0.999:
                ext = [max(0.0, a + r / (1 - r) * (a - b)) for a, b in zip(new, pi + pad, strict=False)]
                z = sum(ext)
                new = [x / z for x in ext]
        prev, pi = diff, new
    return None


def _ttft_mass(chain: tuple, pi: list, lam: float, own) -> dict:
    """{(start, width): weight}: TTFT uniform on [start, start + width] with that weight (time-weighted over the
    steps and idle spells). ``chain`` = (the prompts a step takes at
    most, the step times by prompts, the Poisson arrivals during them); ``pi``: the chain's stationary distribution;
    ``own(k)``: [(the time of a step of ``k`` prompts, one of them the request's own, its weight)] over its
    lengths."""
    kmax, t, arrivals = chain
    steps: dict = {}  # {(head, k, width): weight}: its own step of k prompts after ``head``, expanded at the end

    def add_own(head: float, k: int, width: float, wt: float) -> None:
        key = (head, k, width)
        steps[key] = steps.get(key, 0.0) + wt

    later_cache: dict = {}

    def later(full: int, left: float) -> list:  # the arrivals over ``left`` s and then ``full`` full steps
        key = (full, left)
        if key not in later_cache:
            later_cache[key] = _poisson(lam * (left + full * t[kmax]))
        return later_cache[key]

    waiting: dict = {}  # prompts left over after a full step: {rest: probability}
    for w in range(1, len(pi)):
        p = pi[w]
        if p < 1e-12:
            continue
        s = min(w, kmax)
        ts, rest = t[s], w - s
        if rest:
            waiting[rest] = p
            continue
        add_own(0.0, 1, 0.0, p * arrivals[s][0] / lam)  # the step ends with nobody waiting: an idle spell follows
        _after_a_last_step((add_own, later), kmax, t, (ts, arrivals[s]), p)
    if waiting:  # prompts wait beyond a full step: who came before it in the step matters
        ts = t[kmax]
        h = ts / _SLICES
        for i in range(_SLICES):
            elapsed = (i + 0.5) * h
            ahead: dict = {}  # the prompts ahead of it when the next step starts
            for kb, qb in enumerate(_poisson(lam * elapsed)):
                for rest, p in waiting.items():
                    ahead[rest + kb] = ahead.get(rest + kb, 0.0) + p * qb
            for a, pa in ahead.items():
                if pa * h < _NEGLIGIBLE:
                    continue
                full = a // kmax
                head = ts - (i + 1) * h + full * t[kmax]
                # the prompts that come after it, until its own step starts, fill that step up to the budget
                _last(add_own, (head, h), (a + 1 - full * kmax, kmax), later(full, ts - elapsed), pa * h)
    mass: dict = {}
    for (head, k, width), wt in steps.items():
        for x, share in own(k):
            key = (head + x, width)
            mass[key] = mass.get(key, 0.0) + wt * share
    return mass


def _after_a_last_step(fns: tuple, kmax: int, t: list, step: tuple, p: float) -> None:
    """A request that comes during a step after which nobody waits (its weight ``p``; ``step`` = (its time, the
    Poisson counts of the others that come during it)): those of the step's arrivals beyond the budget wait a
    step. ``fns`` = (``add_own``, ``later``) of ``_ttft_mass``."""
    add_own, later = fns
    ts, counts = step
    for n, qn in enumerate(counts):  # n others come during the step
        if p * ts * qn < _NEGLIGIBLE:
            continue
        if n + 1 <= kmax:
            add_own(0.0, n + 1, ts, p * ts * qn)
            continue
        # its place among the n + 1 is uniform; those beyond the budget wait a step. All of a step's places share
        # their step's size (the rest of the n + 1 and those that come meanwhile), so they count by step
        for full in range(n // kmax + 1):
            places = min(kmax, n + 1 - full * kmax)
            fill = (n + 1 - full * kmax, kmax)
            _last(add_own, (full * t[kmax], ts), fill, later(full, 0.0), p * ts * qn * places / (n + 1))


def _last(add_own, at: tuple, fill: tuple, after: list, wt: float) -> None:
    """Its own step after ``at`` = (head, width): ``fill`` = (the prompts in it up to and with its own, the most a
    step takes) plus those that come after it (``after``: their Poisson counts), up to the budget."""
    base, kmax = fill
    acc = 0.0
    for ka, qa in enumerate(after):
        if base + ka >= kmax:
            add_own(at[0], kmax, at[1], wt * (1.0 - acc))
            return
        if wt * qa >= _NEGLIGIBLE:
            add_own(at[0], base + ka, at[1], wt * qa)
        acc += qa


def _quantile(items: list, total: float, q: float) -> float:
    def cdf(x: float) -> float:
        c = 0.0
        for lo, width, wt in items:
            if x >= lo + width:
                c += wt
            elif x > lo:
                c += wt * (x - lo) / width
        return c / total

    lo, hi = 0.0, max(a + b for a, b, _w in items)
    while hi - lo > _QUANTILE_RTOL * hi:
        mid = (lo + hi) / 2
        if cdf(mid) < q:
            lo = mid
        else:
            hi = mid
    return hi


_KEPT: dict = {}  # (the caller's key for ``step``, rate, lengths, budget) -> figures (None too)
_KEPT_MAX = 4096


def prefill_ttft(step, lam: float, lengths: tuple, budget: int, key=None) -> BatchTTFT | None:
    """TTFT of a prefill rank fed ``lam`` prompts a second, ``budget`` tokens a step at most, a step of ``tokens``
    taking ``step(tokens)`` seconds; ``lengths`` = (the prompts' mean length, a request's own length at equally
    likely points of their distribution): the queue runs on the mean, a request's own step carries its own prompt.
    None when a prompt does not fit one step's budget, more than ``_MAX_PER_STEP`` prompts fit one, there is no
    traffic or the queue does not settle here (the caller keeps its M/G/1 model); infinite figures when full steps
    do not keep up with the arrivals. From ``_NEAR_FULL`` of the full steps' capacity on, where the chain mixes too
    slowly to follow, the figures at that load with ``floor`` set: a TTFT that grows with the load stays at least
    that (the caller's M/G/1 model can be below it there). ``key``: what identifies ``step`` to the caller (its
    engine); with it the figures are kept per engine and rate (a search for the fewest prefill engines asks for the
    same ones again, and every rate past ``_NEAR_FULL`` asks for the figures at it, the slowest the chain computes)."""
    if key is None:
        return _prefill_ttft(step, lam, lengths, budget, None)
    length, points = lengths
    memo = (key, lam, length, tuple(points), budget)
    if memo not in _KEPT:
        if len(_KEPT) >= _KEPT_MAX:
            _KEPT.clear()
        _KEPT[memo] = _prefill_ttft(step, lam, lengths, budget, key)
    return _KEPT[memo]


def _prefill_ttft(step, lam: float, lengths: tuple, budget: int, key) -> BatchTTFT | None:
    """``prefill_ttft`` computed, not looked up (``key`` passed on to the figures at ``_NEAR_FULL``)."""
    length, points = lengths
    if lam <= 0 or length <= 0 or max(length, *points) > budget:
        return None
    kmax = int(budget // length)
    if kmax > _MAX_PER_STEP:
        return None
    t = [0.0] + [step(k * length) for k in range(1, kmax + 1)]
    if lam * t[kmax] >= kmax:
        inf = math.inf
        return BatchTTFT(inf, inf, inf)
    if lam * t[kmax] >= _NEAR_FULL * kmax:
        edge = prefill_ttft(step, _NEAR_FULL * kmax / t[kmax] * (1 - 1e-9), lengths, budget, key)
        return replace(edge, floor=True) if edge is not None else None
    arrivals = [[1.0]] + [_poisson(lam * t[k]) for k in range(1, kmax + 1)]
    pi = _stationary(kmax, arrivals)
    if pi is None:
        return None
    cache: dict = {}
    shares: dict = {}
    for x in points:  # equal lengths (no spread) count once
        shares[x] = shares.get(x, 0.0) + 1.0 / len(points)

    def own(k: int) -> list:
        if k not in cache:
            cache[k] = [(step(min(budget, (k - 1) * length + x)), share) for x, share in shares.items()]
        return cache[k]

    mass = _ttft_mass((kmax, t, arrivals), pi, lam, own)
    items = [(lo, width, wt) for (lo, width), wt in mass.items() if wt > _NEGLIGIBLE]
    total = sum(wt for _lo, _w, wt in items)
    mean = sum(wt * (lo + width / 2) for lo, width, wt in items) / total
    return BatchTTFT(_quantile(items, total, 0.5), _quantile(items, total, 0.95), mean)
