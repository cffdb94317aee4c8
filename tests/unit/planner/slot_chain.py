# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""A candidate for the aggregated engine's slot wait (issue 36 item 2), measured by the queue-simulation bench beside
the planner's closed form before any plan uses it.

The planner's wait for a sequence slot (``queueing.slot_wait``) is Erlang C over one mean hold: it misses that a
rank's requests hold their slots longer the more slots are busy (a bigger decode batch is a longer step) and longest
when the rank is full and every freed slot admits a waiting prompt whose prefill chunks ride on the next steps. Over
the 51 aggregated engines of the oracle grid its TTFT p95 is 0.31-1.82x the simulation's (5 within 10 %).

The candidate is a birth-death chain per shared queue: with ``n`` requests at ``ranks`` ranks of ``slots`` slots each,
requests leave at ``n / h(n / ranks)`` below ``N = ranks x slots`` (``h(m)``: a request's hold with ``m`` slots of
its rank busy, the planner's own ``latency.aggregated`` at that batch) and at ``N / h_full`` at and above it
(``h_full``: the hold of a full rank); an arrival waits when it finds ``n >= N`` (Poisson arrivals see time
averages), and a wait is exponential at the full rank's drain ``N / h_full - lam``, scaled to M/G/c as the planner's
(``queueing._mgc_scale``). Measured on 2026-11-30 against the simulations of the grid: 20 of 51 within 10 %, 25
within 20 %, the median |log ratio| 0.20 (the closed form's 0.51), 0.53-3.03x; it is conservative where a rank of
hundreds of slots runs at 95-99 % of what it can hold (a 1 % longer full hold there is a 2-3x longer wait, in the
model and in the simulation alike)."""

from __future__ import annotations

import math

from ansible_collections.inference.blueprints.plugins.module_utils.planner import queueing as qu


def slot_wait(lam: float, queue: tuple, holds: tuple, cv2: float) -> qu.SlotWait:
    """The wait for one of ``ranks x slots`` slots fed at ``lam`` (Poisson), ``queue`` = (slots, ranks); ``holds`` =
    (``hold_at``, ``hold_full``): ``hold_at(m)`` a request's hold with ``m`` slots of its rank busy, ``hold_full``
    its hold when the rank is full and admits as slots free; ``cv2`` the holds' squared CV."""
    slots, ranks = queue
    hold_at, hold_full = holds
    n_max = slots * ranks
    rho = lam * hold_full / n_max
    if rho >= 1:
        return qu.SlotWait(rho, 1.0, 0.0)
    logp = [0.0]
    for n in range(1, n_max + 1):
        mu = n / hold_at(n / ranks) if n < n_max else n_max / hold_full
        logp.append(logp[-1] + math.log(lam / mu))
    top = max(logp)
    p = [math.exp(x - top) for x in logp]
    waiting = p[n_max] / (1 - rho)  # the geometric tail from N on, its ratio rho
    prob = waiting / (sum(p[:n_max]) + waiting)
    drain = n_max / hold_full - lam
    return qu.SlotWait(rho, prob, drain / qu._mgc_scale(n_max, rho, cv2))
