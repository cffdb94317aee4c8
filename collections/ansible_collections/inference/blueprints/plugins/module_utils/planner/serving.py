# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Stages: the main engine's memory and KV, SLO feasibility, roofline rates (Little's law) and disaggregation
(seed section 4)."""

from __future__ import annotations

import math

from . import sizing as sz
from .engine import EngineCtx, decode_ctx, decode_sessions, engine_memory, prefill_rate, valid_tps
from .errors import PlanError
from .layout import replication, try_layout
from .structs import Layout, Rates, Run, r


def _kv_bytes_why(c: EngineCtx, lay: Layout) -> str:
    model = c.model
    why = f"{model['full_attention_layers']} attention layers x " + (
        f"({model['mla']['kv_lora_rank']}+{model['mla']['qk_rope_head_dim']}) latent"
        if model["attention"] == "mla"
        else f"2 x {model['num_key_value_heads']} KV heads x {model['head_dim']}"
    )
    why += f" x {c.kv_bytes} B"
    rep = replication(model, lay.tp)
    if rep > 1:
        why += f"; TP={lay.tp} replicates KV {rep}x per GPU"
    if lay.dcp > 1:
        why += f"; DCP={lay.dcp} shards tokens"
    return why


def _kv_decisions(run: Run, c: EngineCtx, mem: dict, lay: Layout) -> None:
    model, n, dec, geom = c.model, run.n, run.dec, mem["geom"]
    dec.add("kv bytes per token", int(sz.kv_bytes_per_token(model, c.kv_bytes)), _kv_bytes_why(c, lay))
    if model["attention"] == "hybrid_gdn":
        st = sz.gdn_state_bytes_per_seq(model, 1, 1, c.num_spec)
        dec.add(
            "kv block size",
            geom["block_size"],
            f"hybrid GDN: vLLM raises the attention block to hold one {int(geom['state_bytes_per_layer'])} "
            "B GDN layer state per GPU "
            f"(padding {r(geom['state_padding_pct'], 2)} %); state per sequence {r(st / 1e6, 1)} MB"
            + (
                f"; {c.num_spec} speculative tokens add conv rows (block {mem['block_size_no_spec']} without)"
                if c.num_spec
                else ""
            )
            + "; vLLM derives it itself",
        )
    else:
        dec.add("kv block size", geom["block_size"], "vLLM default for this attention type")
    dec.add(
        "kv pool per GPU",
        f"{mem['kv_pool_gib_per_gpu']} GiB",
        (
            f"--kv-cache-memory-bytes={n['kv_cache_memory_bytes']}"
            if n["kv_cache_memory_bytes"] is not None
            else f"{mem['gpu_memory_gib']} GiB x {n['gpu_memory_utilization']} - "
            f"{mem['weights_gib_per_gpu']} GiB weights - {mem['overhead_gib_per_gpu']} GiB activations/graphs/NCCL"
        )
        + f" -> {mem['blocks']} blocks of {geom['block_size']} tokens",
    )


def main_memory(run: Run, c: EngineCtx, lay: Layout) -> dict:
    """Stage 4: per-GPU memory and KV capacity of the main engine."""
    mem = engine_memory(c, lay, c.num_spec)
    if mem["blocks"] < sz.blocks_per_request(run.n["max_model_len"], mem["geom"], lay.dcp):
        raise PlanError(
            "max_model_len",
            f"one {run.n['max_model_len']}-token sequence does not fit the KV pool "
            f"({mem['kv_pool_gib_per_gpu']} GiB/GPU); lower max_model_len",
        )
    _kv_decisions(run, c, mem, lay)
    return mem


# --------------------------------------------------------------------------- SLO feasibility


def _best_tpot(run: Run, c: EngineCtx) -> float | None:
    best = None
    moe = run.model["kind"] == "moe"
    for pp in range(1, run.nodes + 1):
        for tp in valid_tps(run.model, run.gpn):
            if c.kv_pool(c.wb["total"] / (tp * pp), tp * pp) <= 0:
                continue
            lay = Layout(tp=tp, pp=pp, ep=tp if moe else 1)
            t = decode_sessions(c, lay, 1.0, 1.0, run.traffic["prompt_tokens_mean"])["min_tpot_s"]
            best = t if best is None else min(best, t)
    return best


def check_slo(run: Run, c: EngineCtx) -> None:
    """Errors only for SLOs no size can meet: bounds at 100 % of peak bandwidth / FLOPs and the widest engine."""
    n = run.n
    best_tpot = _best_tpot(run, c)
    tpot = n["slo"]["tpot_p95_ms"]
    if best_tpot is not None and best_tpot * 1000 > tpot:
        raise PlanError(
            "slo.tpot_p95_ms",
            f"{tpot} ms cannot be met: one sequence needs at least {r(best_tpot * 1000, 2)} ms per token "
            f"on {c.gpu['id']} "
            f"(its weight shard read once per step at 100 % of {c.gpu['bandwidth_tb_s']} TB/s, widest layout); "
            f"use >= {math.ceil(best_tpot * 1000)} ms, a faster GPU or smaller weights",
        )
    p95 = n["traffic"]["prompt_tokens_p95"]
    example = (
        f" (the {n['blueprint']} blueprint's example traffic; give traffic.prompt_tokens_p95 to override)"
        if "prompt_tokens_p95" in n["traffic_defaulted"] and "prompt_tokens_mean" in n["traffic_defaulted"]
        else ""
    )
    allg = run.total_gpus
    pr = prefill_rate(c, allg, p95, 1.0)
    t = p95 / pr["tokens_per_s"] * 1000
    if t > n["slo"]["ttft_p95_ms"]:
        raise PlanError(
            "slo.ttft_p95_ms",
            f"{n['slo']['ttft_p95_ms']} ms cannot be met: prefilling a p95 prompt of {p95} tokens{example} "
            f"takes at least {r(t, 1)} ms "
            f"even on all {allg} GPUs at 100 % of {pr['peak_kind']} peak; use >= {math.ceil(t)} ms, shorter "
            "prompts or more/faster GPUs",
        )


# --------------------------------------------------------------------------- rates


def _traffic_load(run: Run, e2e: float) -> tuple[float, int]:
    """(arrival rate, concurrent sessions), one derived from the other by Little's law when not given."""
    lam, sessions = run.traffic["arrival_rate_rps"], run.traffic["concurrent_sessions"]
    if lam is None:
        lam = sessions / e2e
        why = f"Little's law: {sessions} sessions / {r(e2e, 2)} s per request (TTFT + output x TPOT)"
        run.dec.add("arrival rate", r(lam, 2), why)
    if sessions is None:
        sessions = math.ceil(lam * e2e)
        run.dec.add("concurrent sessions", sessions, f"Little's law: {lam} req/s x {r(e2e, 2)} s per request")
    return lam, sessions


def estimate_rates(run: Run, c: EngineCtx, lay: Layout, mem: dict) -> Rates:
    """Stage 5: decode sessions at the TPOT SLO, prefill rates, TTFT estimates and the traffic (Little's law)."""
    pol, traffic = run.pol, run.traffic
    check_slo(run, c)
    tpot_s = run.slo["tpot_p95_ms"] / 1000.0
    ctx_avg = traffic["prompt_tokens_mean"] + traffic["output_tokens_mean"] / 2
    ds = decode_sessions(c, lay, tpot_s, pol["decode_mbu"], ctx_avg)
    cap_ctx = traffic["prompt_tokens_mean"] + traffic["output_tokens_mean"]
    kv_cap = sz.max_sequences(mem["blocks"], cap_ctx, mem["geom"], lay.dcp) * lay.dp
    seq_cap = (pol["max_num_seqs"] or 10**9) * lay.dp  # null: the TPOT batch sets it
    s_engine = max(0, min(ds["sessions_per_engine"], kv_cap, seq_cap))
    pr = prefill_rate(c, lay.world, traffic["prompt_tokens_mean"], pol["prefill_mfu"])
    ttft_mean_s = traffic["prompt_tokens_mean"] / (pr["tokens_per_s"] / lay.dp)
    pr95 = prefill_rate(c, lay.world // lay.dp, traffic["prompt_tokens_p95"], pol["prefill_mfu"])
    ttft_p95_s = traffic["prompt_tokens_p95"] / pr95["tokens_per_s"]
    e2e = ttft_mean_s + max(0, traffic["output_tokens_mean"] - 1) * tpot_s
    lam, sessions = _traffic_load(run, e2e)
    if ttft_p95_s * 1000 > run.slo["ttft_p95_ms"]:
        run.warnings.append(
            f"estimated prefill time of a p95 prompt ({traffic['prompt_tokens_p95']} tokens) is "
            f"{r(ttft_p95_s * 1000, 0)} ms on one engine, above the TTFT SLO {run.slo['ttft_p95_ms']} ms"
        )
    return Rates(tpot_s, ctx_avg, cap_ctx, ds, s_engine, pr, ttft_mean_s, ttft_p95_s, e2e, lam, sessions)


# --------------------------------------------------------------------------- disaggregation


def _pd_cost(run: Run, lay: Layout, rates: Rates) -> tuple[bool, str]:
    """GPU-seconds per request on each side, and their cost (seed section 4 rule, sizing section 6)."""
    engine_gpus = lay.world
    g_p = engine_gpus / rates.prefill["requests_per_s"]
    g_d = engine_gpus * (rates.sessions / max(rates.lam, 1e-9)) / max(rates.s_engine, 1e-9)
    cost_p = run.gpu["cost_class"]
    cost_d = run.n["decode"]["gpu"]["cost_class"] if run.n["decode"] else cost_p
    u = run.pol["target_utilization"]
    interference = 0.85
    agg = cost_p * (g_p + g_d) / (u * interference)
    dis = cost_p * g_p / u + cost_d * g_d / u
    why = (
        f"prefill:decode GPU-seconds {r(g_p / max(g_d, 1e-12), 3)} vs decode:prefill GPU cost "
        f"{r(cost_d / cost_p, 2)}; cost/request aggregated {r(agg, 3)} (x1/{interference} interference) vs "
        f"disaggregated {r(dis, 3)}"
    )
    return (True, "disaggregate: " + why) if dis < agg else (False, "stay aggregated: " + why)


def _disagg_rule(run: Run, lay: Layout, rates: Rates) -> tuple[bool, str]:
    n, pol = run.n, run.pol
    mode = pol["disaggregation"]
    has_decode_hw = n["decode"] is not None
    if mode == "never":
        return False, "policy disaggregation: never"
    if mode == "always":
        if lay.replicas < 2 and not has_decode_hw:
            raise PlanError(
                "policy.disaggregation",
                f"always needs at least two engines (one prefill, one decode); the hardware holds {lay.replicas}",
            )
        return True, "policy disaggregation: always"
    if n["nodes"] == 1 and not has_decode_hw:
        return False, "single node: the prefill-to-decode hop costs more than it saves (seed section 4)"
    if n["interconnect"] != "rdma":
        return False, (
            f"interconnect {n['interconnect']}: no RDMA NICs between nodes, so KV transfer between pools would run "
            "over TCP and cost more than it saves (seed section 4: NIXL wants RDMA/NVLink)"
        )
    if rates.sessions < pol["pd_min_sessions"]:
        return False, (
            f"{rates.sessions} concurrent sessions < {pol['pd_min_sessions']}: below ~100 sessions the transfer "
            "hop costs more than it saves (seed 7.6)"
        )
    if lay.replicas < 2 and not has_decode_hw:
        return False, "fewer than two engines: two pools of one are worse than one pool of two (seed section 4)"
    return _pd_cost(run, lay, rates)


def pd_connector(run: Run) -> str:
    """The connector that moves KV between P/D pools."""
    return "MooncakeConnector" if run.pol["kv_connector"] == "mooncake" else "NixlConnector"


def _pd_refusal(run: Run, c: EngineCtx, lay: Layout) -> str | None:
    """Why the engine would refuse P/D for this layout (engine_compat.yaml), or None."""
    name = pd_connector(run)
    max_pp = run.sup.connector_needs(name).get("max_pp")
    if not max_pp:
        return None
    pps = {"prefill": lay.pp}
    if run.n["decode"]:
        d = run.n["decode"]
        dl = try_layout(decode_ctx(c), d["gpus_per_node"], d["nodes"])
        pps["decode"] = dl["pp"] if dl else 1
    over = {role: pp for role, pp in pps.items() if pp > max_pp}
    if not over:
        return None
    where = ", ".join(f"the {role} engine needs PP={pp}" for role, pp in over.items())
    return (
        f"{where}, and vLLM {run.sup.version} accepts {name} on {run.model['attention']} models only with "
        f"PP <= {max_pp} (engine_compat.yaml)"
    )


def choose_disagg(run: Run, c: EngineCtx, lay: Layout, rates: Rates) -> bool:
    """Stage 6: prefill/decode disaggregation (seed section 4), only where the P/D connector accepts the layout."""
    disagg, why = _disagg_rule(run, lay, rates)
    refusal = _pd_refusal(run, c, lay) if disagg else None
    if refusal and run.pol["disaggregation"] == "always":
        raise PlanError("policy.disaggregation", f"always cannot be planned: {refusal}")
    if refusal:
        disagg, why = False, f"stay aggregated: {refusal} (cost rule: {why})"
    run.dec.add("disaggregation", disagg, why + ("; the pools below replace the single-pool layout" if disagg else ""))
    return disagg
