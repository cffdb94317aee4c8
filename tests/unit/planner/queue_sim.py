# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""A discrete-event simulation of the serving queue (issue 36 item 2): the oracle of the planner's closed-form queueing.

Poisson arrivals go to engines by the router's policy (``random``: an engine drawn uniformly, as an even random split;
``least_loaded``: the engine with the fewest outstanding requests, as llm-d's load-aware picker); inside an engine
vLLM's own balancer gives each request to the DP rank with the fewest. Each rank runs vLLM's scheduler step by step:
the running sequences (at most ``slots``, max_num_seqs) each decode one token, the step's remaining token budget
(max_num_batched_tokens) goes to prefill chunks of admitted prompts in arrival order, and a waiting request is
admitted when a slot is free. A step takes the planner's own step time (``EngineModel.step``) for its decodes and
prefill tokens, so the simulation tests the queueing, not the kernels. A P/D prefill pool (``decode=False``) prefills
only: a request leaves its rank when its prompt is done. Prompt and output lengths are log-normal through the
workload's mean and p95 (as the planner models them). TTFT adds vLLM's per-request prefill overhead and ``extra``
(the KV transfer of P/D) as the planner does; TPOT is a request's (last token - first token) / (output - 1).

Nothing here is the planner's: it only borrows the step-time function. Seeded; the first tenth is warm-up.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field

from ansible_collections.inference.blueprints.plugins.module_utils.planner import queueing as qu

ROUTERS = ("random", "least_loaded")


@dataclass
class _Req:
    arrival: float
    prompt: int
    output: int
    left: int = 0  # prompt tokens still to prefill
    first: float = 0.0  # time of the first token
    admitted: float = -1.0  # time the rank gave it a sequence slot (its step that starts then carries its first chunk)
    done_step: int = 0  # the rank's step count at which its last token comes


@dataclass
class _Rank:
    waiting: deque = field(default_factory=deque)
    prefilling: list = field(default_factory=list)  # admitted, prompt not done (in admission order)
    decoding: list = field(default_factory=list)  # heap of (done_step, seq, request)
    steps: int = 0
    busy: bool = False

    @property
    def outstanding(self) -> int:
        return len(self.waiting) + len(self.prefilling) + len(self.decoding)


@dataclass(frozen=True)
class Fleet:
    """What the simulation runs: ``engines`` x ``dp`` ranks of ``slots`` sequences, the router's policy, the step-time
    function ``step(decodes, prefill_tokens, prefill_context)`` (seconds; the context a prefill token attends to on
    average), the token budget of a step and the fixed TTFT extras."""

    engines: int
    dp: int
    slots: int
    router: str
    step: object
    budget: int
    decode: bool = True
    ttft_extra: float = 0.0


@dataclass(frozen=True)
class Result:
    """Per-request figures after the warm-up, each sorted: TTFT, TPOT, and TTFT's two parts: ``wait`` (arrival to
    the step that admits it into a slot: the slot wait plus the rest of the step in progress) and ``after`` (that
    step's start to the first token: its prefill chunks behind the prompts admitted before it)."""

    ttft: list
    tpot: list
    wait: list = field(default_factory=list)
    after: list = field(default_factory=list)

    @staticmethod
    def _p(xs: list, q: float) -> float:
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0.0

    @property
    def ttft_p95(self) -> float:
        return self._p(self.ttft, 0.95)

    @property
    def tpot_p95(self) -> float:
        return self._p(self.tpot, 0.95)


def _lognormal(rnd: random.Random, mean: float, p95: float):
    s = qu.lognormal_sigma(mean, p95)
    mu = math.log(mean) - s * s / 2

    def draw() -> int:
        return max(1, round(math.exp(rnd.gauss(mu, s)) if s else mean))

    return draw


def _pick(fleet: Fleet, ranks: list, rnd: random.Random) -> _Rank:
    group = ranks[rnd.randrange(fleet.engines) * fleet.dp :][: fleet.dp] if fleet.router == "random" else ranks
    least = min(r.outstanding for r in group)
    return rnd.choice([r for r in group if r.outstanding == least])


def _plan_step(fleet: Fleet, rank: _Rank, now: float) -> tuple[int, list]:
    """(decodes, [(request, chunk tokens)]) of the rank's next step, starting at ``now``, admitting waiting requests
    into free slots."""
    while rank.waiting and len(rank.prefilling) + len(rank.decoding) < fleet.slots:
        req = rank.waiting.popleft()
        req.admitted = now
        rank.prefilling.append(req)
    room = max(1, fleet.budget - len(rank.decoding))
    chunks = []
    for req in rank.prefilling:
        if room <= 0:
            break
        take = min(req.left, room)
        chunks.append((req, take))
        room -= take
    return len(rank.decoding), chunks


def _step_time(fleet: Fleet, decodes: int, chunks: list) -> float:
    """A step's time: its decodes and prefill chunks, the chunks' attention context token-weighted (a chunk of
    ``take`` tokens after ``done`` of its prompt attends to done + take / 2 tokens on average)."""
    tokens = sum(c for _r, c in chunks)
    ctx = sum(c * (r.prompt - r.left + c / 2) for r, c in chunks) / tokens if tokens else 0.0
    return fleet.step(decodes, tokens, ctx)


def arrivals_for(lam: float, hold_s: float, holds: float = 30.0, least: int = 2000, most: int = 60000) -> int:
    """Arrivals to simulate so that the run lasts ``holds`` times a request's stay in its slot (``hold_s``): the
    first tenth is warm-up, so the slots fill over three holds before anything is measured. A fixed count is too
    short where the rate is high and requests stay long: 2000 arrivals at 40 req/s are 50 s against a 23 s hold
    (the batch example's shape), measured before the slots had filled (TTFT p95 0.52 s there, 2.98 s over 30
    holds)."""
    return int(min(most, max(least, holds * lam * max(hold_s, 0.0))))


def simulate(fleet: Fleet, lam: float, prompt: tuple, output: tuple, n: int = 4000, *, seed: int = 7) -> Result:  # noqa: PLR0913
    """Run ``n`` Poisson arrivals at ``lam`` a second through the fleet; ``prompt`` and ``output``: (mean, p95);
    ``seed``: another seed is another sample of the same traffic (the bench reads the figures' own noise from it)."""
    rnd = random.Random(seed)
    draw_prompt, draw_output = _lognormal(rnd, *prompt), _lognormal(rnd, *output)
    ranks = [_Rank() for _ in range(fleet.engines * fleet.dp)]
    events: list = [(rnd.expovariate(lam), 0, -1, None)]  # (time, seq, rank index or -1 for an arrival, payload)
    seq, arrived, ttft, tpot = 1, 0, [], []
    warm = n // 10

    def start(i: int, now: float) -> None:
        nonlocal seq
        rank = ranks[i]
        decodes, chunks = _plan_step(fleet, rank, now)
        if not decodes and not chunks:
            rank.busy = False
            return
        rank.busy = True
        t = _step_time(fleet, decodes, chunks)
        heapq.heappush(events, (now + t, seq, i, chunks))
        seq += 1

    while events:
        now, _s, i, payload = heapq.heappop(events)
        if i < 0:  # an arrival
            req = _Req(now, draw_prompt(), draw_output())
            req.left = req.prompt
            arrived += 1
            rank = _pick(fleet, ranks, rnd)
            rank.waiting.append(req)
            if arrived < n:
                heapq.heappush(events, (now + rnd.expovariate(lam), seq, -1, None))
                seq += 1
            if not rank.busy:
                start(ranks.index(rank), now)
            continue
        rank = ranks[i]
        rank.steps += 1
        while rank.decoding and rank.decoding[0][0] <= rank.steps:
            _d, _q, req = heapq.heappop(rank.decoding)
            tpot.append((req.arrival, (now - req.first) / (req.output - 1)))
        for req, took in payload:
            req.left -= took
            if req.left > 0:
                continue
            rank.prefilling.remove(req)
            req.first = now
            ttft.append((req.arrival, now - req.arrival + fleet.ttft_extra, req.admitted))
            if fleet.decode and req.output > 1:
                heapq.heappush(rank.decoding, (rank.steps + req.output - 1, seq, req))
                seq += 1
        start(i, now)
    ttft.sort()
    cut = ttft[warm][0] if len(ttft) > warm else 0.0
    kept = [t for t in ttft if t[0] >= cut]
    return Result(
        sorted(x for _a, x, _s in kept),
        sorted(x for a, x in tpot if a >= cut),
        sorted(s - a for a, _x, s in kept),
        sorted(a + x - s for a, x, s in kept),
    )


def pool(results: list) -> Result:
    """Independent runs (other seeds) as one sample: their per-request figures together."""
    return Result(
        sorted(x for r in results for x in r.ttft),
        sorted(x for r in results for x in r.tpot),
        sorted(x for r in results for x in r.wait),
        sorted(x for r in results for x in r.after),
    )
