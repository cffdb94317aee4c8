# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Stage: the pools (seed section 4, Little's law): one serve pool, or prefill and decode pools sized per GPU."""

from __future__ import annotations

from dataclasses import replace

from . import disagg, search
from . import sizing as sz
from .checkpoint import served
from .engine import decode_ctx, engine_memory
from .engine_args import engine_args
from .kvtransfer import KVTransfer, kv_transfer_json, offload_decision, offload_per_pool
from .serving import pd_connector
from .structs import Pools, PoolSpec, Rates, Run, r


def _max_num_seqs(run: Run, ps: PoolSpec) -> int:
    """max_num_seqs per DP rank. A serve or decode engine runs the batch the layout search sized (its TPOT p95 meets
    the SLO when the rank is full; the policy's number and the KV pool only ever lowered it, search._batch_cap): vLLM
    admits up to --max-num-seqs sequences, so a larger number would break the TPOT every figure of the plan promises.
    When the search sized none (even one sequence misses TPOT; the plan warns), one. A prefill engine decodes nothing:
    the policy's number, else vLLM's 256. Always capped at what the KV pool holds at the mean context, so hybrid
    models never exceed their Mamba blocks (vLLM refuses to start otherwise)."""
    t, pol = run.traffic, run.pol
    prefill = ps.role == "prefill"
    dcp = 1 if prefill else ps.lay.dcp
    cap = sz.max_sequences(ps.mem["blocks"], t["prompt_tokens_mean"] + t["output_tokens_mean"], ps.mem["geom"], dcp)
    want = (pol["max_num_seqs"] or 256) if prefill else int(ps.batch or 1)
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
        # what `vllm serve` loads for this pool's weights (checkpoint.served; the report's serve line)
        "served_model": served(ps.ctx.model, ps.ctx.weights, run.n["quantized_checkpoint"], run.n["artifact"])["model"],
        "engine_args": engine_args(run, replace(ps, spec=ps.spec if role != "prefill" else None), mns, kvt),
    }


# --------------------------------------------------------------------------- aggregated


def serve_pools(run: Run, main: tuple, rates: Rates, xfer: KVTransfer) -> Pools:
    """One pool of the replicas the traffic needs (the layout search's choice), capped by the hardware."""
    c, lay, mem = main
    ch = rates.serve.chosen
    serve = pool_entry(run, PoolSpec("serve", run.gpu, lay, mem, c, c.spec, None, ch.batch or None), xfer)
    serve["required_replicas"] = ch.replicas or None
    serve["sessions_per_replica"] = (ch.batch or 0) * lay.dp
    return Pools({"prefill": None, "decode": None, "serve": serve}, mem, lay, c)


# --------------------------------------------------------------------------- disaggregated


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


def _deployed(run: Run, dis, lam: float) -> tuple[int, int]:
    """Replicas of each pool the hardware holds: the traffic's need, or every GPU with a warning when it needs more;
    then the latency at that load (disagg.Disagg.deployed) for the plan's figures."""
    p, d = dis.prefill, dis.decode
    p_reps, d_reps = dis.replicas_on_hw()
    if p_reps < p.replicas or d_reps < d.replicas:
        dem = search.demand(run)
        dis.deployed = (disagg.prefill_at(p, dem, lam, p_reps), disagg.decode_at(d, dem, lam, d_reps))
        ttft, busy = dis.deployed[0].doc()["ttft_p95_ms"], dis.deployed[1].doc().get("slot_utilization")
        run.warnings.append(
            f"the traffic needs {p.gpus} prefill + {d.gpus} decode GPUs ({p.gpus + d.gpus}); the hardware gives "
            f"{p_reps * p.world} + {d_reps * d.world}, all of them are planned and the SLOs are missed at the planned "
            f"load (prefill TTFT p95 {'unbounded' if ttft is None else f'{ttft} ms'}, decode slots "
            f"{'offered more than they hold' if busy is None else f'{busy * 100:.0f} % busy'})"
        )
    return p_reps, d_reps


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
    """Prefill pool on the main hardware (no speculative heads), decode pool on its own GPU type or the same, each
    as the layout search sized it for the traffic."""
    c, lay, _mem = main
    dis = rates.disagg
    p, d = dis.prefill, dis.decode
    cp, dc = c.with_spec(None), decode_ctx(c)
    p_reps, d_reps = _deployed(run, dis, rates.lam)
    play = replace(p.lay, dcp=1, pcp=1, replicas=p_reps)
    dcp = _pd_dcp(run, d.lay.tp, lay.dcp if d.lay.tp % max(lay.dcp, 1) == 0 else 1)
    dlay = replace(d.lay, dcp=dcp, replicas=d_reps)
    pmem = engine_memory(cp, play, 0)
    dmem = engine_memory(dc, dlay, dc.num_spec)
    bs = _pd_block_size(run, pmem, dmem)
    dgpu = dis.decode_hw.gpu
    pools = {
        "prefill": pool_entry(run, PoolSpec("prefill", run.gpu, play, pmem, cp, None, bs), xfer),
        "decode": pool_entry(run, PoolSpec("decode", dgpu, dlay, dmem, dc, dc.spec, bs, d.batch), xfer),
        "serve": None,
    }
    for role, pl, mm, cand in (("prefill", pools["prefill"], pmem, p), ("decode", pools["decode"], dmem, d)):
        lat = cand.load.doc() if cand.load else {}
        what = (
            f"TTFT p95 {lat.get('ttft_p95_ms')} ms (queueing and KV transfer included)"
            if role == "prefill"
            else f"TPOT p95 {lat.get('tpot_p95_ms')} ms at batch {cand.batch} per rank"
        )
        run.dec.add(
            f"{role} pool",
            f"{pl['replicas']} x {pl['gpus_per_replica']} {pl['gpu']}",
            f"TP={pl['tp']} PP={pl['pp']} DP={pl['dp']} EP={pl['ep']} DCP={pl['dcp']} PCP={pl['pcp']}: the cheapest "
            f"{role} layout for the traffic, {what}; {mm['weights_gib_per_gpu']} GiB weights + "
            f"{mm['overhead_gib_per_gpu']} GiB overhead leave {mm['kv_pool_gib_per_gpu']} GiB/GPU for KV "
            f"({mm['blocks']} blocks of {mm['geom']['block_size']} tokens)",
        )
    pools["prefill"]["required_gpus"] = p.gpus
    pools["decode"]["required_gpus"] = d.gpus
    pools["decode"]["sessions_per_gpu"] = r(d.batch * d.lay.dp / d.world, 1)
    es = p.load.t_mixed if p.load else 0.0  # mean prefill service time of one rank
    pools["prefill"]["requests_per_s_per_gpu"] = r(p.lay.dp / es / p.world, 2) if es else None
    return Pools(pools, dmem, dlay, dc, d.gpus / p.gpus if p.gpus else None)


def build_pools(run: Run, main: tuple, rates: Rates, plan_io: tuple) -> Pools:
    """Stage 8: the pools, each with its engine arguments."""
    disagg, xfer = plan_io
    if disagg:
        return disagg_pools(run, main, rates, xfer)
    return serve_pools(run, main, rates, xfer)
