# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Stage: the pools (seed section 4, Little's law): one serve pool, or prefill and decode pools sized per GPU."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from . import sizing as sz
from .engine import EngineCtx, decode_ctx, decode_sessions, divisors, engine_memory, prefill_rate
from .engine_args import engine_args
from .errors import PlanError
from .kvtransfer import KVTransfer, kv_transfer_json, offload_decision, offload_per_pool
from .layout import choose_layout
from .serving import pd_connector
from .structs import Layout, Pools, PoolSpec, Rates, Run, r


def _max_num_seqs(run: Run, ps: PoolSpec) -> int:
    """max_num_seqs per DP rank: the policy's value, else the batch the TPOT target allows (decode/serve) or
    vLLM's 256 (prefill); always capped at what the KV pool holds at the mean context, so hybrid models never
    exceed their Mamba blocks (vLLM refuses to start otherwise)."""
    t, pol = run.traffic, run.pol
    prefill = ps.role == "prefill"
    dcp = 1 if prefill else ps.lay.dcp
    batch = None if prefill else ps.batch
    cap = sz.max_sequences(ps.mem["blocks"], t["prompt_tokens_mean"] + t["output_tokens_mean"], ps.mem["geom"], dcp)
    want = pol["max_num_seqs"] or (int(batch) if batch else 256)
    return max(1, min(want, cap))


def _pool_gpn(run: Run, role: str) -> int:
    d = run.n["decode"]
    return d["gpus_per_node"] if role == "decode" and d else run.gpn


def pool_entry(run: Run, ps: PoolSpec, xfer: KVTransfer) -> dict:
    """One pool of the plan: sizes, memory, KV, the KV tier below HBM, engine environment and arguments."""
    lay, mem, role = ps.lay, ps.mem, ps.role
    mns = _max_num_seqs(run, ps)
    off = offload_per_pool(run, xfer, lay, (ps.gpu, _pool_gpn(run, role)))
    offload_decision(run, role, off)
    kvt = kv_transfer_json(xfer.connector(), off)
    return {
        "role": role,
        "gpu": ps.gpu["id"],
        "replicas": lay.replicas,
        "gpus_per_replica": lay.world,
        "gpus": lay.replicas * lay.world,
        "tp": lay.tp,
        "pp": lay.pp,
        "dp": lay.dp,
        "ep": lay.ep,
        "dcp": lay.dcp if role != "prefill" else 1,
        "pcp": lay.pcp if role != "decode" else 1,
        "max_num_seqs": mns,
        "memory": {
            "weights_gib_per_gpu": mem["weights_gib_per_gpu"],
            "kv_pool_gib_per_gpu": mem["kv_pool_gib_per_gpu"],
            "overhead_gib_per_gpu": mem["overhead_gib_per_gpu"],
            "budget_gib_per_gpu": mem["budget_gib_per_gpu"],
            "gpu_memory_gib": mem["gpu_memory_gib"],
        },
        "kv": {
            "block_size": mem["geom"]["block_size"],
            "blocks": mem["blocks"],
            "tokens": mem["tokens"],
            "max_concurrency": mem["max_concurrency"],
        },
        "kv_offload": off,
        "engine_env": dict(xfer.env),
        "engine_args": engine_args(run, replace(ps, spec=ps.spec if role != "prefill" else None), mns, kvt),
    }


# --------------------------------------------------------------------------- aggregated


def serve_pools(run: Run, main: tuple, rates: Rates, xfer: KVTransfer) -> Pools:
    """One pool of ``lay.replicas`` engines; ``required_replicas`` says what the traffic needs."""
    c, lay, mem = main
    util_t = run.pol["target_utilization"]
    s_engine = rates.s_engine
    required = (
        math.ceil((rates.lam / rates.prefill["requests_per_s"] + rates.sessions / max(s_engine, 1e-9)) / util_t)
        if s_engine
        else None
    )
    batch = rates.decode["sessions_per_engine"] / lay.dp
    serve = pool_entry(run, PoolSpec("serve", run.gpu, lay, mem, c, c.spec, None, batch), xfer)
    serve["required_replicas"] = required
    serve["sessions_per_replica"] = s_engine
    if required and required > lay.replicas:
        run.warnings.append(
            f"traffic needs {required} engine(s) of {lay.world} GPUs at target utilization {util_t}; "
            f"the hardware has {lay.replicas}"
        )
    return Pools({"prefill": None, "decode": None, "serve": serve}, mem, lay, c)


# --------------------------------------------------------------------------- disaggregated


@dataclass
class _DecodeSide:
    gpu: dict
    gpn: int
    ctx: EngineCtx
    tp: int
    pp: int
    dcp: int
    avail: int  # GPUs the decode pool may use
    p_avail: int  # GPUs the prefill pool may use


def _pd_dcp(run: Run, tp: int, dcp: int) -> int:
    """The decode pool's DCP under the P/D connector's rule (NIXL: DCP=1 unless MLA, then 1 or TP)."""
    rule = run.sup.connector_needs(pd_connector(run)).get("pd_dcp", "any")
    if dcp <= 1 or rule == "any" or (rule == "transfer_tp" and dcp == tp):
        return dcp
    run.dec.add(
        "decode context parallel (P/D)",
        1,
        f"vLLM {run.sup.version} accepts DCP={dcp} with {pd_connector(run)} between P/D pools "
        + ("only for MLA models" if rule == "one" else f"only as 1 or TP={tp}")
        + " (engine_compat.yaml)",
    )
    return 1


def _decode_side(run: Run, c: EngineCtx, lay: Layout) -> _DecodeSide:
    """The decode pool's GPU type and layout: its own node pool, or the same hardware as prefill."""
    gpn, nodes = run.gpn, run.nodes
    d = run.n["decode"]
    if not d:
        dcp = _pd_dcp(run, lay.tp, lay.dcp if lay.tp % max(lay.dcp, 1) == 0 else 1)
        return _DecodeSide(run.gpu, gpn, c, lay.tp, lay.pp, dcp, gpn * nodes, gpn * nodes)
    cd = decode_ctx(c)
    dl = choose_layout(cd, d["gpus_per_node"], d["nodes"], run.dec, "decode")
    if dl.get("below_headroom"):
        run.warnings.append("decode layout " + dl["below_headroom"])
    dcp = _pd_dcp(run, dl["tp"], lay.dcp if dl["tp"] % max(lay.dcp, 1) == 0 else 1)
    return _DecodeSide(
        cd.gpu, d["gpus_per_node"], cd, dl["tp"], dl["pp"], dcp, d["gpus_per_node"] * d["nodes"], gpn * nodes
    )


def _decode_rate(run: Run, ds: _DecodeSide, rates: Rates, ddp: int) -> dict:
    """Sessions per GPU at the TPOT target for a decode engine of ``ddp`` DP ranks (an EP group when MoE)."""
    moe = run.model["kind"] == "moe"
    dep = ds.tp * ddp if moe and ds.tp * ddp > 1 else 1
    dlay = Layout(tp=ds.tp, pp=ds.pp, dp=ddp, ep=dep, dcp=ds.dcp)
    mem = engine_memory(ds.ctx, dlay, ds.ctx.num_spec)
    sess = decode_sessions(ds.ctx, dlay, rates.tpot_s, run.pol["decode_mbu"], rates.ctx_avg)
    kv_cap = sz.max_sequences(mem["blocks"], rates.cap_ctx, mem["geom"], ds.dcp) * ddp
    seq_cap = (run.pol["max_num_seqs"] or 10**9) * ddp
    s_eng = min(sess["sessions_per_engine"], kv_cap, seq_cap)
    return {"lay": dlay, "mem": mem, "ds": sess, "kv_cap": kv_cap, "per_gpu": s_eng / (ds.tp * ds.pp * ddp)}


def _decode_rates(run: Run, ds: _DecodeSide, rates: Rates) -> dict:
    moe = run.model["kind"] == "moe"
    dps = [d for d in divisors(max(1, ds.gpn // ds.tp)) if moe] if ds.pp == 1 else []
    return {d: _decode_rate(run, ds, rates, d) for d in (dps or [1])}


def _needs(run: Run, pr1: dict, full: dict, rates: Rates, dgpu: dict) -> tuple[int, int]:
    """GPUs the traffic needs in each pool (Little's law at the target utilization)."""
    u, n = run.pol["target_utilization"], run.n
    need_p = max(1, math.ceil(rates.lam / (pr1["requests_per_s"] * u)))
    per_gpu, kv_cap = full["per_gpu"], full["kv_cap"]
    if per_gpu <= 0:
        raise PlanError(
            "slo.tpot_p95_ms", f"no decode engine on {dgpu['id']} meets {n['slo']['tpot_p95_ms']} ms per token"
        )
    need_d = max(1, math.ceil(rates.sessions / (per_gpu * u)))
    run.dec.add(
        "decode pool (Little's law)",
        f"{need_d} GPUs",
        f"{rates.sessions} sessions / ({r(per_gpu, 1)} sessions per {dgpu['id']} at TPOT "
        f"{n['slo']['tpot_p95_ms']} ms, MBU {run.pol['decode_mbu']}"
        f", capped by KV {kv_cap} and max_num_seqs) / target utilization {u}",
    )
    run.dec.add(
        "prefill pool (Little's law)",
        f"{need_p} GPUs",
        f"{r(rates.lam, 1)} req/s x {run.traffic['prompt_tokens_mean']} tokens / ({r(pr1['tokens_per_s'], 0)} "
        f"tok/s per {run.gpu['id']} at MFU {run.pol['prefill_mfu']} "
        f"of {pr1['peak_kind']} peak) / target utilization {u}",
    )
    return need_p, need_d


def _fit_hardware(run: Run, need: tuple, lay: Layout, ds: _DecodeSide) -> tuple[int, int]:
    need_p, need_d = need
    if run.n["decode"]:
        p_gpus, d_gpus = min(need_p, ds.p_avail), min(need_d, ds.avail)
    elif need_p + need_d <= ds.p_avail:
        p_gpus, d_gpus = need_p, need_d
    else:
        p_gpus = max(lay.tp * lay.pp * lay.pcp, round(ds.p_avail * need_p / (need_p + need_d)))
        d_gpus = max(ds.tp * ds.pp, ds.p_avail - p_gpus)
    if p_gpus < need_p or d_gpus < need_d:
        run.warnings.append(
            f"traffic needs {need_p} prefill + {need_d} decode GPUs; the hardware gives {p_gpus} + {d_gpus} "
            "(pools scaled down)"
        )
    return p_gpus, d_gpus


def _best_split(need_gpus: int, avail_gpus: int, lay: Layout, gpn: int, moe: bool) -> tuple[int, int]:
    """(replicas, dp_per_engine) covering ``need_gpus`` within ``avail_gpus``; MoE engines prefer whole-node
    DP+EP groups unless that wastes a node or more (seed section 3: EP+DP within a node)."""
    tp = lay.tp
    best = None
    for dp in divisors(max(1, gpn // tp)) if moe else [1]:
        eng = tp * dp
        if eng > max(avail_gpus, tp):
            continue
        reps = min(math.ceil(need_gpus / eng), max(1, avail_gpus // eng))
        used = reps * eng
        key = (min(used, need_gpus), -(max(0, used - need_gpus) // gpn), dp)
        if best is None or key > best[0]:
            best = (key, reps, dp)
    return best[1], best[2]


def _prefill_layout(run: Run, lay: Layout, need_p: int, p_gpus: int) -> Layout:
    moe = run.model["kind"] == "moe"
    if lay.pcp > 1 or lay.pp > 1:
        p_dp, p_reps = 1, max(1, p_gpus // (lay.tp * lay.pp * lay.pcp))
    else:
        room = run.total_gpus if run.n["decode"] else p_gpus
        p_reps, p_dp = _best_split(min(need_p, p_gpus), room, lay, run.gpn, moe)
    p_ep = lay.tp * lay.pcp * p_dp if moe and lay.tp * lay.pcp * p_dp > 1 else 1
    return Layout(tp=lay.tp, pp=lay.pp, dp=p_dp, ep=p_ep, dcp=1, pcp=lay.pcp, replicas=p_reps)


def _decode_engines(run: Run, ds: _DecodeSide, d_rates: dict, room: tuple) -> tuple[int, dict]:
    """The DP size whose engines (at their own per-GPU rate) cover the most sessions within the GPUs given,
    then the fewest GPUs, then the largest EP group."""
    u = run.pol["target_utilization"]
    d_gpus, sessions = room
    d_room = ds.avail if run.n["decode"] else d_gpus
    target = max(sessions, 1) / u
    best = None
    for d, rt in d_rates.items():
        eng = ds.tp * ds.pp * d
        if eng > max(d_room, ds.tp * ds.pp) or rt["per_gpu"] <= 0:
            continue
        reps = min(math.ceil(target / (rt["per_gpu"] * eng)), max(1, d_room // eng))
        key = (min(reps * eng * rt["per_gpu"], target), -reps * eng, d)
        if best is None or key > best[0]:
            best = (key, reps, rt)
    d_reps, dr = best[1], best[2]
    held = d_reps * ds.tp * ds.pp * dr["lay"].dp * dr["per_gpu"]
    if sessions <= held < target:
        run.warnings.append(
            f"the decode pool holds {int(held)} sessions at the TPOT SLO: "
            f"{sessions} sessions run it above the target utilization {u}"
        )
    if held < sessions:
        run.warnings.append(f"the decode pool holds {int(held)} sessions at the TPOT SLO; traffic has {sessions}")
    return d_reps, dr


def _pd_block_size(run: Run, pmem: dict, dmem: dict) -> int | None:
    """NIXL moves KV block by block: both sides need the same block size."""
    pb, db = pmem["geom"]["block_size"], dmem["geom"]["block_size"]
    if pb == db:
        return None
    bs = max(pb, db)
    run.dec.add(
        "kv block size (P/D)", bs, f"prefill ({pb}) and decode ({db}) pools differ; KV transfer needs one block size"
    )
    return bs


def disagg_pools(run: Run, main: tuple, rates: Rates, xfer: KVTransfer) -> Pools:
    """Prefill pool on the main hardware (no speculative heads), decode pool on its own GPU type or the same."""
    c, lay, _mem = main
    cp = c.with_spec(None)
    pr1 = prefill_rate(cp, 1, run.traffic["prompt_tokens_mean"], run.pol["prefill_mfu"])
    ds = _decode_side(run, c, lay)
    d_rates = _decode_rates(run, ds, rates)
    need_p, need_d = _needs(run, pr1, d_rates[max(d_rates)], rates, ds.gpu)  # the whole-node EP group
    p_gpus, d_gpus = _fit_hardware(run, (need_p, need_d), lay, ds)
    play = _prefill_layout(run, lay, need_p, p_gpus)
    d_reps, dr = _decode_engines(run, ds, d_rates, (d_gpus, rates.sessions))
    dlay = replace(dr["lay"], replicas=d_reps)
    pmem = engine_memory(cp, play, 0)
    bs = _pd_block_size(run, pmem, dr["mem"])
    batch = dr["ds"]["sessions_per_engine"] / dlay.dp
    pools = {
        "prefill": pool_entry(run, PoolSpec("prefill", run.gpu, play, pmem, cp, None, bs), xfer),
        "decode": pool_entry(run, PoolSpec("decode", ds.gpu, dlay, dr["mem"], ds.ctx, ds.ctx.spec, bs, batch), xfer),
        "serve": None,
    }
    for role, pl, mm in (("prefill", pools["prefill"], pmem), ("decode", pools["decode"], dr["mem"])):
        run.dec.add(
            f"{role} pool",
            f"{pl['replicas']} x {pl['gpus_per_replica']} {pl['gpu']}",
            f"TP={pl['tp']} PP={pl['pp']} DP={pl['dp']} EP={pl['ep']} DCP={pl['dcp']} PCP={pl['pcp']}; "
            f"{mm['weights_gib_per_gpu']} GiB weights + {mm['overhead_gib_per_gpu']} GiB overhead leave "
            f"{mm['kv_pool_gib_per_gpu']} GiB/GPU for KV ({mm['blocks']} blocks of {mm['geom']['block_size']} tokens)",
        )
    pools["prefill"]["required_gpus"] = need_p
    pools["decode"]["required_gpus"] = need_d
    pools["decode"]["sessions_per_gpu"] = r(dr["per_gpu"], 1)
    pools["prefill"]["requests_per_s_per_gpu"] = r(pr1["requests_per_s"], 2)
    return Pools(pools, dr["mem"], dlay, ds.ctx, need_d / need_p if need_p else None)


def build_pools(run: Run, main: tuple, rates: Rates, plan_io: tuple) -> Pools:
    """Stage 8: the pools, each with its engine arguments."""
    disagg, xfer = plan_io
    if disagg:
        return disagg_pools(run, main, rates, xfer)
    return serve_pools(run, main, rates, xfer)
