# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""A rank's wait for a sequence slot with policy ``slot_queue: chain`` (issue 36 item 2; docs/planner.md "TTFT and
queueing"): the requests at a queue as a birth-death chain whose holds grow with the slots busy
(``queueing.chain_slot_wait``), their spread widened by the prefill bursts that slow every sequence of the rank, and
TPOT p95 read at the busy hours' occupancy. ``erlang`` (the default) keeps Erlang C over the mean hold."""

from __future__ import annotations

import bisect
import math
from dataclasses import replace

from . import latency as lt

HOLD_KNOTS = 8  # the hold's curve over a rank's busy slots: its value at 1 and at 8 even steps up to the batch


def hold_curve(em: lt.EngineModel, w: lt.Workload, load: tuple, batch: int):
    """A request's hold (its E2E without a slot wait) as a function of the busy slots ``m`` of its rank, at the
    rank's arrival rate and prefill servers ``load`` = (lam, servers): the model at ``HOLD_KNOTS`` + 1 batches,
    linear between them (the chain asks for every m up to the batch). None when a knot's hold is infinite."""
    lam, pre = load
    ms = sorted({1.0, *(max(1.0, float(round(batch * k / HOLD_KNOTS))) for k in range(1, HOLD_KNOTS + 1))})
    hs = [lt.aggregated(em, m, w, lam, servers=pre).e2e for m in ms]
    if not all(math.isfinite(h) for h in hs):
        return None

    def hold_at(m: float) -> float:
        m = min(float(batch), max(1.0, m))
        i = bisect.bisect_left(ms, m)
        if i == 0 or ms[i] == m:
            return hs[i]
        a, b = ms[i - 1], ms[i]
        return hs[i - 1] + (hs[i] - hs[i - 1]) * (m - a) / (b - a)

    return hold_at


def chain_point(em: lt.EngineModel, w: lt.Workload, rank: tuple, load: tuple, full: lt.Point) -> lt.Point | None:
    """One rank under open traffic with its slot wait from the chain. ``rank`` = (its point before the wait, the
    ranks sharing its queue, the ranks sharing its prefill queue, whether a least-loaded router commits a waiting
    request to one engine); ``load`` = (the rank's arrival rate, its slots); ``full``: the rank with every slot busy.
    A request's TPOT p95 is the step time of the busy hours: the rank at the slots busy 5 % of the time, when that is
    more than the mean. None where the chain does not apply (an unstable rank, or some batch's own prefill queue does
    not drain): the caller keeps Erlang C over the mean hold."""
    p, servers, pre, jsq = rank
    lam, batch = load
    hold_at = hold_curve(em, w, (lam, pre), batch) if p.stable else None
    if hold_at is None:
        return None
    hold_full = max(hold_at(float(batch)), full.e2e)
    q = lt.with_slot_queue(p, batch, w.hold_cv2, (servers, jsq), (hold_full, hold_at))
    if q.stable and q.slots is not None and q.slots.busy95 > p.b:
        busy = lt.aggregated(em, min(float(batch), q.slots.busy95), w, lam, servers=pre)
        q = replace(q, tpot_p95=max(q.tpot_p95, busy.tpot_p95))
    return q
