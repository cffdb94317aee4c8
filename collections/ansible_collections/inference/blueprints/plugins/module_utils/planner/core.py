# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""plan(): the planning stages in order.

inputs (inputs.normalize) -> precision (layout.choose_precision) -> speculative decoding (speculative) ->
engine layout (parallel.choose_engine) -> memory/KV, rates, disaggregation (serving) -> KV connector
(kvtransfer) -> pools with their engine arguments (pools, engine_args) -> the plan document (assemble).
Each stage is a function over the small structures in ``structs``; decisions carry their reasons.
"""

from __future__ import annotations

from . import compat
from . import inputs as inputs_mod
from .assemble import Outcome, plan_document
from .engine import EngineCtx, decode_sessions, engine_memory, prefill_rate, valid_tp
from .kvtransfer import choose_kv_transfer
from .layout import choose_layout, choose_precision, suggest_fits
from .parallel import aggregated_warnings, choose_engine
from .pools import build_pools
from .seed import seed_notes
from .serving import check_slo, choose_disagg, main_memory, size_traffic
from .speculative import choose_speculative, spec_name
from .structs import Layout, Run, r

_Ctx = EngineCtx  # the name the seed-number tests use

__all__ = [
    "EngineCtx",
    "Layout",
    "choose_layout",
    "decode_sessions",
    "engine_memory",
    "plan",
    "prefill_rate",
    "spec_name",
    "suggest_fits",
    "valid_tp",
]


def _pd_ratio_note(ratio: float | None) -> dict:
    return {
        "claim": "prefill:decode workers 1:3 to 1:5 for chat (seed section 4)",
        "seed": "1:3 - 1:5",
        "plan": f"1:{r(ratio, 1)}" if ratio else "n/a",
        "note": "ratio follows from per-GPU rates and E2E time; the seed's 30 req/s and 150 sessions "
        "give ~1:1.9 at E2E 9.3 s",
    }


def plan(inputs: dict) -> dict:
    """The sizing plan for ``inputs`` (docs/planner.md); raises PlanError naming the input it cannot plan for."""
    run = Run(inputs_mod.normalize(inputs))
    run.dec.add("policy", run.n["blueprint"], f"from {run.n['policy_source']}")
    prec = choose_precision(run)
    c = choose_speculative(run, prec)
    check_slo(run, c)
    lay, s = choose_engine(run, c)
    mem = main_memory(run, c, lay)
    rates = size_traffic(run, s)
    disagg = choose_disagg(run, c, lay, rates)
    if not disagg:
        aggregated_warnings(run, lay, rates.serve, None if rates.pd_refused else rates.disagg)
    xfer = choose_kv_transfer(run, disagg)
    pools = build_pools(run, (c, lay, mem), rates, (disagg, xfer))
    if disagg:
        run.seed.append(_pd_ratio_note(pools.ratio))
    run.seed.extend(seed_notes(run, c.with_spec(None), lay, run.slo["tpot_p95_ms"] / 1000))
    out = plan_document(run, Outcome(c, lay, rates, disagg, xfer, pools))
    refused = compat.refusals(out, run.model)
    if refused:  # every stage asks the table first; this is the last line of defence
        raise AssertionError("planner bug: the engine would refuse this plan: " + "; ".join(refused))
    return out
