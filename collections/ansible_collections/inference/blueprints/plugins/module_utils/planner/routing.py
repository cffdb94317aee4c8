# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Which ranks share one queue, by the router's policy (policy key ``router``, issue 36 item 2; docs/planner.md
"TTFT and queueing").

``random`` (the default until the oracle grid is regenerated with the other, docs/planner.md): the router splits
the arrivals evenly at random over the engines; each engine's DP ranks share one queue, for slots and for prefill
(vLLM's internal load balancer sends each request to its least loaded rank), engines do not. Until 2026-11-30 each
rank's prefill was its own M/G/1 queue under ``random``: 1.4-2.8x the simulation's TTFT p95 on the P/D prefill pools
of DP-attention MoE engines (tests/unit/planner/test_queue_sim.py, dsv3-h200-chat 0.70 s against 0.50).
``least_loaded``: the router sends each request to the engine with the least outstanding work (llm-d's
inference scheduler scores queue depth and KV use, llm-d/llm-d-inference-scheduler's load-aware scorers), so every
rank of the pool serves one queue: join-the-shortest-queue over ``n`` servers is close to one M/G/n queue (checked
against a simulation of both policies in tests/unit/planner/test_queue_sim.py)."""

from __future__ import annotations

POLICIES = ("least_loaded", "random")


def shared_queue(router: str, lam: float, engines: int, dp: int) -> tuple[float, int]:
    """(arrival rate, ranks) of one queue when ``engines`` engines of ``dp`` ranks carry ``lam`` requests a second."""
    engines, dp = max(1, int(engines)), max(1, int(dp))
    if router == "least_loaded":
        return lam, engines * dp
    return lam / engines, dp


def jsq(router: str, ranks: int, dp: int) -> bool:
    """Whether a request that finds its queue's ranks busy waits at the rank the router committed it to (a
    least-loaded router over more than one engine: ``queueing.jsq_wait``) rather than for the first free one."""
    return router == "least_loaded" and ranks > dp
