# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Stages: the main engine's memory and KV, SLO feasibility, the traffic (Little's law) and disaggregation from the
modelled cost per token (both options sized by the layout search)."""

from __future__ import annotations

import math

from . import disagg, search, units
from . import latency as lt
from . import sizing as sz
from .engine import EngineCtx, decode_ctx, decode_sessions, engine_memory, prefill_rate, valid_tps
from .errors import PlanError
from .layout import replication
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
            if c.kv_pool(c.wb["total"] / (tp * pp), tp, pp) <= 0:
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


# --------------------------------------------------------------------------- traffic


def size_traffic(run: Run, s) -> Rates:
    """Stage 5: the traffic in both of Little's terms at the chosen layout's latency (arrival rate x E2E = requests
    in flight); the search already sized the pool from it."""
    t = run.traffic
    ch = s.chosen
    e2e = (ch.load or ch.full).e2e if (ch.load or ch.full) else math.inf
    lam, sessions = t["arrival_rate_rps"], t["concurrent_sessions"]
    if lam is None:
        lam = sessions / e2e if e2e and not math.isinf(e2e) else 0.0
        run.dec.add(
            "arrival rate",
            r(lam, 2),
            f"Little's law: {sessions} sessions / {r(e2e, 2)} s per request (TTFT + output x TPOT at the planned load)",
        )
        inflight = float(sessions)
    else:
        inflight = lam * e2e if not math.isinf(e2e) else float(sessions or 0)
        if sessions is None:
            sessions = math.ceil(inflight)
            run.dec.add("concurrent sessions", sessions, f"Little's law: {lam} req/s x {r(e2e, 2)} s per request")
        elif sessions > inflight * 1.5:
            run.dec.add(
                "requests in flight",
                r(inflight, 1),
                f"{lam} req/s x {r(e2e, 2)} s per request (Little's law); the {sessions} concurrent sessions include "
                "think time between requests, so the engines size for the requests in flight, not the sessions",
            )
    return Rates(lam, sessions, inflight, s)


# --------------------------------------------------------------------------- disaggregation


def _gates(run: Run, lay: Layout, rates: Rates) -> str | None:
    """Why the P/D option is not even sized (None: size it)."""
    n, pol = run.n, run.pol
    has_decode_hw = n["decode"] is not None
    if pol["disaggregation"] == "never":
        return "policy disaggregation: never"
    if pol["disaggregation"] == "always":
        return None
    if (n["nodes"] > 1 or has_decode_hw) and n["interconnect"] != "rdma":
        return (
            f"interconnect {n['interconnect']}: no RDMA NICs between nodes, so KV transfer between pools would run "
            "over TCP and cost more than it saves (seed section 4: NIXL wants RDMA/NVLink; one node uses NVLink)"
        )
    if run.total_gpus < 2 and not has_decode_hw:
        return "one GPU: nothing to split"
    return None


def _per_mtok(cost: float, rates: Rates, out_tokens: float) -> float | None:
    """Cost classes (H100-hours) per million output tokens for a fleet costing ``cost`` per hour."""
    tokens_h = rates.lam * out_tokens * 3600
    return cost * 1e6 / tokens_h if tokens_h > 0 else None


def _option_latency(cands: list) -> dict:
    """An option's TTFT p95 and TPOT p95 at the traffic as the plan's latency reports them: the serve pool's, or the
    P/D prefill pool's TTFT with the wait for a decode slot (queueing.with_wait_p95) and the decode pool's TPOT."""
    loads = [c.load for c in cands]
    if not all(loads):
        return {"ttft_p95_ms": None, "tpot_p95_ms": None}
    if len(loads) == 1:
        doc = loads[0].doc()
        return {"ttft_p95_ms": doc["ttft_p95_ms"], "tpot_p95_ms": doc["tpot_p95_ms"]}
    p, d = loads
    ttft = p.ttft_p95 if d.slots is None else lt.with_wait_p95(p.ttft_p50, p.ttft_p95, d.slots)
    return {
        "ttft_p95_ms": None if math.isinf(ttft) else r(ttft * 1000, 1),
        "tpot_p95_ms": d.doc()["tpot_p95_ms"],
    }


def _option_doc(cands: list, hw_cost: list, rates: Rates, out_tokens: float, transfer: float | None = None) -> dict:
    gpus = sum(c.gpus for c in cands)
    cost = sum(c.gpus * k for c, k in zip(cands, hw_cost, strict=True))
    per_mtok = _per_mtok(cost, rates, out_tokens)
    d = {
        "gpus": gpus,
        "cost_per_hour": r(cost, 2),
        "cost_per_million_tokens": r(per_mtok, 3) if per_mtok is not None else None,
    }
    d.update(_option_latency(cands))
    for c in cands:
        d[c.role] = {
            "gpu_layout": c.label(),
            "replicas": c.replicas,
            "gpus": c.gpus,
            "batch_per_rank": c.batch or None,
            "latency": c.load.doc() if c.load else None,
        }
    if transfer is not None:
        d["kv_transfer_ms"] = r(transfer * 1000, 2)
    return d


def _compare(run: Run, s, rates: Rates, dis) -> tuple[bool, str, dict]:
    """The cost rule: split only when the P/D fleet for the traffic costs pol.pd_cost_margin less per token."""
    margin = run.pol["pd_cost_margin"]
    ch = s.chosen
    out_tokens = run.traffic["output_tokens_mean"]
    c_main = run.gpu["cost_class"]
    agg_ok = ch.ok
    agg_cost = ch.gpus * c_main if agg_ok else math.inf
    doc = {
        "margin": margin,
        "cost_unit": f"{units.COST}: cost_class x GPU-hours (H100 = 1.0); cost_per_hour in {units.COST_PER_HOUR}, "
        f"cost_per_million_tokens in {units.COST_PER_MTOK} at the planned arrival rate",
        "aggregated": _option_doc([ch], [c_main], rates, out_tokens) if agg_ok else {"rejected": ch.rejected},
    }
    if dis.prefill is None:
        doc["disaggregated"] = {"rejected": dis.why}
        return False, f"stay aggregated: the P/D option cannot be sized ({dis.why})", doc
    ddoc = _option_doc(
        [dis.prefill, dis.decode],
        [dis.prefill_hw.gpu["cost_class"], dis.decode_hw.gpu["cost_class"]],
        rates,
        out_tokens,
        dis.transfer_s,
    )
    ddoc["prefill_to_decode_gpus"] = f"{dis.prefill.gpus}:{dis.decode.gpus}"
    doc["disaggregated"] = ddoc
    agg_fits = agg_ok and s.within_hw
    both = (
        f"cost per token at the SLOs: aggregated {ch.gpus} x {run.gpu['id']} ({r(agg_cost, 2)} {units.COST_PER_HOUR})"
        f" vs P/D {dis.prefill.gpus} prefill + {dis.decode.gpus} decode ({r(dis.cost, 2)} {units.COST_PER_HOUR}; P:D "
        f"{dis.prefill.gpus}:{dis.decode.gpus} from modelled prefill and decode throughput)"
    )
    if agg_fits and not dis.within_hw:
        return False, f"stay aggregated: the P/D pools do not fit the hardware; {both}", doc
    if dis.within_hw and not agg_fits:
        return True, f"disaggregate: the aggregated pool does not meet the SLOs within the hardware; {both}", doc
    if not agg_fits and not dis.within_hw:  # the traffic needs more than the hardware: the option carrying more of it
        a_share, d_share = (search.served(ch, run.total_gpus) if agg_ok else 0.0), dis.served()
        over = (
            f"neither option fits the hardware: its GPUs carry {r(a_share * 100, 0)} % of the traffic aggregated, "
            f"{r(d_share * 100, 0)} % as P/D"
        )
        # a share is known to one engine of its option: closer than the smaller engine's share is the same share
        grain = min(
            1 / ch.replicas if agg_ok and ch.replicas else 1.0,
            1 / dis.decode.replicas if dis.decode is not None and dis.decode.replicas else 1.0,
        )
        if abs(d_share - a_share) >= grain - 1e-9:
            split = d_share > a_share
            return split, f"{'disaggregate' if split else 'stay aggregated'}: {over}; {both}", doc
        # the same share either way: the option that plans more of the GPUs there are (the SLOs are missed, so none
        # is left idle that the other would run)
        a_idle, d_idle = _idle_on_hw(run, ch) if agg_ok else run.total_gpus, _idle_pd_on_hw(run, dis)
        if a_idle != d_idle:
            split = d_idle < a_idle
            return (
                split,
                f"{'disaggregate' if split else 'stay aggregated'}: {over}, and it leaves {min(a_idle, d_idle)} of "
                f"{run.total_gpus} GPUs idle where the other leaves {max(a_idle, d_idle)}; {both}",
                doc,
            )
    if dis.cost <= agg_cost * (1 - margin):
        saved = r((1 - dis.cost / agg_cost) * 100, 1)
        return True, f"disaggregate: P/D costs {saved} % less per token (margin {int(margin * 100)} %); {both}", doc
    saving = (1 - dis.cost / agg_cost) * 100 if agg_cost and not math.isinf(agg_cost) else 0.0
    if saving > 0.05:
        verdict = f"P/D saves {r(saving, 1)} % per token, under the {int(margin * 100)} % margin"
    elif saving < -0.05:
        verdict = f"P/D costs {r(-saving, 1)} % more per token"
    else:
        verdict = "P/D costs the same per token (a split must save the margin)"
    return False, f"stay aggregated: {verdict}; {both}", doc


def _idle_on_hw(run: Run, ch) -> int:
    """GPUs an aggregated candidate that needs more than the hardware leaves idle: those short of a whole engine."""
    return run.total_gpus - (run.total_gpus // ch.world) * ch.world


def _idle_pd_on_hw(run: Run, dis) -> int:
    """GPUs of the main hardware the P/D pools it holds leave idle: all of them when the pools do not fit it at all;
    with the decode pool on GPUs of its own, those the prefill engines leave."""
    if dis.prefill is None or dis.served() <= 0:
        return run.total_gpus
    pr, dr = dis.replicas_on_hw()
    on_main = pr * dis.prefill.world + (dr * dis.decode.world if dis.decode_hw is dis.prefill_hw else 0)
    return max(0, run.total_gpus - on_main)


def pd_connector(run: Run) -> str:
    """The connector that moves KV between P/D pools."""
    return "MooncakeConnector" if run.pol["kv_connector"] == "mooncake" else "NixlConnector"


def _pd_refusal(run: Run, lays: dict) -> str | None:
    """Why the engine would refuse P/D for these pool layouts (engine_compat.yaml), or None."""
    name = pd_connector(run)
    max_pp = run.sup.connector_needs(name).get("max_pp")
    if not max_pp:
        return None
    over = {role: lay.pp for role, lay in lays.items() if lay.pp > max_pp}
    if not over:
        return None
    where = ", ".join(f"the {role} engine needs PP={pp}" for role, pp in over.items())
    return (
        f"{where}, and vLLM {run.sup.version} accepts {name} on {run.model['attention']} models only with "
        f"PP <= {max_pp} (engine_compat.yaml)"
    )


def choose_disagg(run: Run, c: EngineCtx, lay: Layout, rates: Rates) -> bool:
    """Stage 6: prefill/decode disaggregation from the model's cost per token, both options sized side by side;
    only where the P/D connector accepts the layouts (engine_compat.yaml)."""
    mode = run.pol["disaggregation"]
    gate = _gates(run, lay, rates)
    s = rates.serve
    if gate:
        rates.disagg = None
        ch = s.chosen
        run.comparison = {
            "margin": run.pol["pd_cost_margin"],
            "aggregated": _option_doc([ch], [run.gpu["cost_class"]], rates, run.traffic["output_tokens_mean"])
            if ch.ok
            else {"rejected": ch.rejected},
            "disaggregated": {"rejected": f"not sized: {gate}"},
            "choice": "aggregated",
            "why": gate,
        }
        run.dec.add("disaggregation", False, gate)
        return False
    d = run.n["decode"]
    dhw = s.hw if not d else search.Hardware(d["gpu"], d["gpus_per_node"], d["nodes"], run.n["interconnect"])
    dis = disagg.search_disagg(run, (c, decode_ctx(c)), (s.hw, dhw), rates.lam)
    rates.disagg = dis
    split, why, doc = _compare(run, s, rates, dis)
    if mode == "always":
        if dis.prefill is None:
            raise PlanError("policy.disaggregation", f"always cannot be planned: {dis.why}")
        split, why = True, f"policy disaggregation: always; the cost rule alone says: {why}"
    refusal = _pd_refusal(run, {"prefill": dis.prefill.lay, "decode": dis.decode.lay}) if split else None
    if refusal and mode == "always":
        raise PlanError("policy.disaggregation", f"always cannot be planned: {refusal}")
    if refusal:
        split, why = False, f"stay aggregated: {refusal} (cost rule: {why})"
        rates.pd_refused = refusal
    doc["choice"] = "disaggregated" if split else "aggregated"
    doc["why"] = why
    run.comparison = doc
    run.dec.add("disaggregation", split, why + ("; the pools below replace the single-pool layout" if split else ""))
    return split
