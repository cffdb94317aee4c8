# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Stage: the engine layout (seed section 3): TP/PP, DP/EP for MoE, decode and prefill context parallelism,
replicas."""

from __future__ import annotations

from dataclasses import replace

from .engine import EngineCtx, divisors, prefill_rate, valid_tps
from .errors import PlanError
from .layout import choose_layout
from .structs import Layout, Run, r


def decode_context(run: Run) -> int:
    """p95 prompt + p95 output (capped by output_token_cap): the context a long decode reaches."""
    t, cap = run.traffic, run.pol["output_token_cap"]
    return t["prompt_tokens_p95"] + min(t["output_tokens_p95"], cap or t["output_tokens_p95"])


def _explicit_dcp(run: Run, tp: int) -> int:
    d = run.pol["dcp"]
    if tp % d:
        raise PlanError(
            "policy.dcp",
            f"DCP={d} must divide TP={tp} (DCP reuses the TP ranks); valid: {', '.join(map(str, divisors(tp)))}",
        )
    ok, why = run.sup.dcp_ok(run.model, tp, 1, d)
    if not ok:
        raise PlanError("policy.dcp", f"{why} (engine_compat.yaml)")
    run.dec.add("decode context parallel", d, "policy dcp")
    return d


def choose_dcp(run: Run, tp: int) -> int:
    """DCP for long decode contexts (seed section 3), within what the engine accepts for the attention type."""
    model, pol, dec = run.model, run.pol, run.dec
    decode_ctx, long_ctx = decode_context(run), pol["long_context_tokens"]
    if pol["dcp"] != "auto":
        return _explicit_dcp(run, tp)
    if decode_ctx < long_ctx:
        why = f"p95 decode context {decode_ctx} tokens < {long_ctx} (seed: DCP for >=128k decode)"
        dec.add("decode context parallel", 1, why)
        return 1
    if tp < 2:
        why = (
            f"long decode ({decode_ctx} tokens) wants DCP, but DCP reuses TP ranks and needs TP >= 2 (TP % "
            "DCP == 0); TP=1 here"
        )
        dec.add("decode context parallel", 1, why)
        return 1
    d, rule = run.sup.dcp_max(model, tp)
    if d < 2:
        dec.add("decode context parallel", 1, f"long decode ({decode_ctx} tokens) wants DCP, but {rule}")
        return 1
    kv = model["num_key_value_heads"]
    why = f"long decode ({decode_ctx} tokens): DCP shards KV over the existing TP={tp} ranks, no new GPUs"
    if model["attention"] != "mla" and tp > kv:
        why += f"; TP={tp} over {kv} KV heads replicates KV {tp // kv}x, DCP={d} removes it ({rule})"
    dec.add("decode context parallel", d, why + " (seed section 3)")
    return d


def _explicit_pcp(run: Run, lay: Layout) -> tuple[int, int]:
    p, dp_engine = run.pol["pcp"], lay.dp
    ok, why = run.sup.pcp_ok(p, 1)
    if not ok:
        raise PlanError("policy.pcp", f"vLLM {run.sup.version} refuses it: {why}; use pcp: auto (engine_compat.yaml)")
    if lay.tp * p > run.gpn or lay.tp * lay.pp * p > run.total_gpus:
        raise PlanError("policy.pcp", f"PCP={p} needs TP x PCP = {lay.tp * p} GPUs in a node; nodes have {run.gpn}")
    if p > 1 and dp_engine > 1:
        why = f"policy pcp={p}: the planner does not combine PCP with DP > 1, so the engine drops DP={dp_engine}"
        run.dec.add("data parallel", 1, why)
        dp_engine = 1
    run.dec.add("prefill context parallel", p, "policy pcp")
    return p, dp_engine


def _smallest_pcp(run: Run, c: EngineCtx, lay: Layout) -> tuple[int, float]:
    """The smallest power-of-two PCP whose prefill estimate meets the TTFT SLO, within a node."""
    p95, tp, pp = run.traffic["prompt_tokens_p95"], lay.tp, lay.pp
    p = 2
    while True:
        t = prefill_rate(c, tp * pp * p, p95, run.pol["prefill_mfu"])
        ttft = p95 / t["tokens_per_s"] * 1000
        if ttft <= run.slo["ttft_p95_ms"] or tp * p * 2 > run.gpn or tp * pp * p * 2 > run.total_gpus:
            return p, ttft
        p *= 2


def choose_pcp(run: Run, c: EngineCtx, lay: Layout, long_tp: str = "") -> tuple[int, int]:
    """(PCP, DP per engine) for long prompts (seed section 3), where the engine supports PCP."""
    if run.pol["pcp"] != "auto":
        return _explicit_pcp(run, lay)
    p95, long_ctx, dec, tp = run.traffic["prompt_tokens_p95"], run.pol["long_context_tokens"], run.dec, lay.tp
    if p95 < long_ctx:
        dec.add("prefill context parallel", 1, f"p95 prompt {p95} tokens < {long_ctx} (seed: PCP for >=128k prefill)")
        return 1, lay.dp
    if not run.sup.pcp_ok(2, 1)[0]:
        why = (
            f"long prefill ({p95} tokens) wants PCP, but in vLLM {run.sup.version} "
            f"{run.sup.row['context_parallel']['pcp']['why']}"
        )
        dec.add("prefill context parallel", 1, why + long_tp)
        return 1, lay.dp
    if lay.dp > 1:
        why = (
            f"long prefill ({p95} tokens) wants PCP, but the planner does not combine PCP with DP > 1 "
            f"(DP={lay.dp}); set policy pcp: 2 to trade DP for PCP"
        )
        dec.add("prefill context parallel", 1, why)
        return 1, lay.dp
    if tp * 2 > run.gpn or tp * lay.pp * 2 > run.total_gpus:
        why = f"long prefill wants PCP=2, but TP x PCP = {tp * 2} exceeds the {run.gpn} GPUs of a node"
        dec.add("prefill context parallel", 1, why)
        return 1, lay.dp
    p, ttft = _smallest_pcp(run, c, lay)
    dec.add(
        "prefill context parallel",
        p,
        f"long prefill ({p95} tokens): PCP={p} splits prompt attention over TP x PCP = {tp * p} GPUs, "
        f"est. {r(ttft, 0)} ms at MFU {run.pol['prefill_mfu']} vs TTFT SLO {run.slo['ttft_p95_ms']} ms "
        "(seed section 3)",
    )
    return p, lay.dp


def _ttft_ms(run: Run, c: EngineCtx, gpus: int) -> float:
    p95 = run.traffic["prompt_tokens_p95"]
    return p95 / prefill_rate(c, gpus, p95, run.pol["prefill_mfu"])["tokens_per_s"] * 1000


def long_prompt_tp(run: Run, c: EngineCtx, lay: Layout) -> tuple[Layout, str]:
    """Where vLLM has no PCP for the attention type, long prompts (>= long_context_tokens) get a wider TP instead,
    as the seed adds PCP: the smallest TP above the fitting one, within a node, whose prefill estimate meets the
    TTFT SLO (else the widest). Only for engines of one DP rank and one pipeline stage; returns the layout and a
    note for the PCP decision."""
    p95, slo = run.traffic["prompt_tokens_p95"], run.slo["ttft_p95_ms"]
    if run.pol["pcp"] != "auto" or p95 < run.pol["long_context_tokens"] or run.sup.pcp_ok(2, 1)[0]:
        return lay, ""
    if lay.dp > 1 or lay.pp > 1:
        return lay, f"; TP stays {lay.tp} (DP={lay.dp}, PP={lay.pp})"
    wider = [t for t in valid_tps(run.model, run.gpn) if t > lay.tp]
    if not wider:
        return lay, f"; TP={lay.tp} is already the widest within a node"
    tp = next((t for t in wider if _ttft_ms(run, c, t) <= slo), wider[-1])
    run.dec.add(
        "engine: tensor parallel (long prompts)",
        tp,
        f"p95 prompt {p95} tokens: TP={tp} splits the prefill over {tp} GPUs, est. {r(_ttft_ms(run, c, tp), 0)} ms at "
        f"MFU {run.pol['prefill_mfu']} vs TTFT SLO {slo} ms (TP={lay.tp} fits the weights, est. "
        f"{r(_ttft_ms(run, c, lay.tp), 0)} ms); PCP, the seed's choice, has no {run.model['attention']} backend in "
        f"vLLM {run.sup.version}",
    )
    return replace(lay, tp=tp), f"; TP={tp} splits the long prefill instead"


def _replicas(run: Run, lay: Layout) -> int:
    engine_gpus = lay.world
    if lay.pp > 1:
        return run.nodes // lay.pp if engine_gpus >= run.gpn else run.total_gpus // engine_gpus
    return run.total_gpus // engine_gpus


def _layout_decisions(run: Run, lay: Layout, moe: bool) -> None:
    total, engine_gpus = run.total_gpus, lay.world
    if moe:
        run.dec.add(
            "data / expert parallel",
            f"DP={lay.dp} per engine, EP={lay.ep}",
            "MoE: DP ranks within a node share experts via --enable-expert-parallel "
            f"(EP = TP x DP per stage = {lay.ep})"
            if lay.ep > 1
            else "MoE on one GPU per stage: no expert parallelism",
        )
    run.dec.add(
        "replicas",
        lay.replicas,
        f"{total} GPUs / {engine_gpus} per engine (TP={lay.tp} x PP={lay.pp} x PCP={lay.pcp} x DP={lay.dp}); "
        + ("independent replicas behind the router" if not moe or lay.replicas > 1 else "one engine"),
    )
    if lay.replicas < 1:
        raise PlanError("nodes", f"the layout needs {engine_gpus} GPUs per engine; the hardware has {total}")
    if total - lay.replicas * engine_gpus:
        run.warnings.append(
            f"{total - lay.replicas * engine_gpus} GPU(s) left idle: {total} is not a multiple of {engine_gpus}"
        )


def choose_engine(run: Run, c: EngineCtx) -> Layout:
    """Stage 3: the main engine's layout: TP/PP that fit, DP+EP for MoE, DCP/PCP for long contexts, replicas."""
    base = choose_layout(c, run.gpn, run.nodes, run.dec, "engine")
    if base["tp"] > 1 and not run.gpu.get("link_gb_s"):
        run.warnings.append(
            f"TP={base['tp']} on {run.gpu['id']} runs its per-layer all-reduce over PCIe (no NVLink); "
            "expect lower decode speed than the roofline"
        )
    if base.get("below_headroom"):
        run.warnings.append("serve/prefill layout " + base["below_headroom"])
    moe = run.model["kind"] == "moe"
    tp, pp = base["tp"], base["pp"]
    lay = Layout(tp=tp, pp=pp, dp=run.gpn // tp if moe and pp == 1 else 1)
    lay, long_tp = long_prompt_tp(run, c, lay)
    tp = lay.tp
    dcp = choose_dcp(run, tp)
    pcp, dp = choose_pcp(run, c, lay, long_tp)
    if pcp > 1 and dcp > 1 and (dcp not in (pcp, tp * pcp) or not run.sup.pcp_ok(pcp, dcp)[0]):
        ok, why = run.sup.pcp_ok(pcp, dcp)
        why = why if not ok else f"vLLM requires DCP in (1, PCP, TP x PCP) when PCP={pcp}"
        run.dec.add("decode context parallel", 1, f"{why}; DCP={dcp} dropped")
        dcp = 1
    ep = tp * pcp * dp if (moe and tp * pcp * dp > 1) else 1
    lay = replace(lay, dp=dp, ep=ep, dcp=dcp, pcp=pcp)
    lay = replace(lay, replicas=_replicas(run, lay))
    _layout_decisions(run, lay, moe)
    return lay
