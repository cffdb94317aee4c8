# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Stage: the plan document (the contract in docs/contracts.md section 3 and docs/planner.md)."""

from __future__ import annotations

from dataclasses import dataclass

from . import sizing as sz
from .engine import GIB, EngineCtx
from .kvtransfer import KVTransfer
from .layout import replication
from .structs import Layout, Pools, Rates, Run, num, r


@dataclass
class Outcome:
    """Everything the stages decided, as the plan document is built from it."""

    ctx: EngineCtx  # the main engine (serve or prefill hardware)
    lay: Layout  # the main engine's layout
    rates: Rates
    disagg: bool
    xfer: KVTransfer
    pools: Pools


def _model_doc(run: Run) -> dict:
    model = run.model
    return {
        "id": model["id"],
        "name": run.n["name"],
        "hf_repo": model.get("hf_repo"),
        "kind": model["kind"],
        "attention": model["attention"],
        "source": model.get("source"),
    }


def _hardware_doc(run: Run) -> dict:
    n, gpu, d = run.n, run.gpu, run.n["decode"]
    return {
        "gpu": gpu["id"],
        "gpu_name": gpu["name"],
        "gpu_link": gpu.get("link"),
        "gpus_per_node": run.gpn,
        "nodes": run.nodes,
        "gpus_total": run.total_gpus,
        "interconnect": n["interconnect"],
        "decode_gpu": d["gpu"]["id"] if d else None,
        "decode_gpus_per_node": d["gpus_per_node"] if d else None,
        "decode_nodes": d["nodes"] if d else None,
    }


def _weights_doc(wb: dict, precision: str) -> dict:
    return {
        "precision": precision,
        "total_gib": r(wb["total"] / GIB, 3),
        "experts_gib": r(wb["experts"] / GIB, 3),
        "vision_gib": r(wb["vision"] / GIB, 3),
        "speculative_gib": r(wb["speculative"] / GIB, 3),
    }


def _memory_doc(run: Run, mem: dict) -> dict:
    return {
        "weights_gib_per_gpu": mem["weights_gib_per_gpu"],
        "kv_pool_gib_per_gpu": mem["kv_pool_gib_per_gpu"],
        "overhead_gib_per_gpu": mem["overhead_gib_per_gpu"],
        "budget_gib_per_gpu": mem["budget_gib_per_gpu"],
        "gpu_memory_gib": mem["gpu_memory_gib"],
        "gpu_memory_utilization": run.n["gpu_memory_utilization"],
        "kv_cache_memory_bytes": run.n["kv_cache_memory_bytes"],
    }


def _kv_doc(model: dict, p: Pools) -> dict:
    ctx, mem, lay = p.main_ctx, p.main_mem, p.main_lay
    return {
        "dtype": ctx.kv_dtype,
        "element_bytes": ctx.kv_bytes,
        "bytes_per_token": num(sz.kv_bytes_per_token(model, ctx.kv_bytes)),
        "bytes_per_token_per_gpu": num(mem["kv_bytes_per_token_per_gpu"]),
        "kv_heads_per_gpu": sz.kv_heads_per_rank(model, lay.tp),
        "kv_replication": replication(model, lay.tp),
        "state_bytes_per_seq": num(sz.gdn_state_bytes_per_seq(model, 1, 1, ctx.num_spec)),
        "state_bytes_per_seq_per_gpu": num(mem["state_bytes_per_seq_per_gpu"]),
        "block_size": mem["geom"]["block_size"],
        "block_size_no_spec": mem["block_size_no_spec"],
        "page_bytes": int(mem["geom"]["page_bytes"]),
        "blocks": mem["blocks"],
        "tokens": mem["tokens"],
        "reported_tokens": mem["reported_tokens"],
        "max_concurrency": mem["max_concurrency"],
        "scope": "per engine (one vLLM instance: TP x PP x PCP x DP GPUs)",
    }


def _layout_doc(o: Outcome) -> dict:
    lay = o.pools.main_lay
    return {
        "tp": lay.tp,
        "pp": lay.pp,
        "dp": lay.dp * lay.replicas,
        "ep": lay.ep,
        "dcp": lay.dcp,
        "pcp": o.pools.pools["prefill"]["pcp"] if o.disagg else lay.pcp,
        "dp_per_engine": lay.dp,
        "replicas": lay.replicas,
        "gpus_per_replica": lay.world,
    }


def _estimates_doc(o: Outcome) -> dict:
    rt, engine_gpus = o.rates, o.lay.world
    ds, pr = rt.decode, rt.prefill
    return {
        "prefill_flops_per_token": r(pr["flops_per_token"] / 1e9, 3),
        "prefill_peak": pr["peak_kind"],
        "prefill_tokens_per_s_per_gpu": r(pr["tokens_per_s"] / engine_gpus, 0),
        "prefill_requests_per_s_per_gpu": r(pr["requests_per_s"] / engine_gpus, 2),
        "decode_sessions_per_gpu_at_tpot": r(ds["sessions_per_engine"] / engine_gpus, 1),
        "decode_sessions_per_engine": rt.s_engine,
        "decode_bytes_per_session_step_gpu": int(ds["per_seq_bytes_per_gpu"]),
        "decode_weight_bytes_per_step_gpu": int(ds["weights_read_bytes_per_gpu"]),
        "tpot_min_ms": r(ds["min_tpot_s"] * 1000, 2),
        "ttft_mean_ms": r(rt.ttft_mean_s * 1000, 1),
        "ttft_p95_prefill_ms": r(rt.ttft_p95_s * 1000, 1),
        "e2e_s": r(rt.e2e, 3),
    }


def _serving_doc(run: Run, o: Outcome) -> dict:
    pol = run.pol
    main_pool = o.pools.pools["decode"] or o.pools.pools["serve"]
    return {
        "disaggregated": o.disagg,
        "pools": o.pools.pools,
        "speculative": o.ctx.spec,
        "kv_connector": o.xfer.connector(),
        "kv_offload": main_pool["kv_offload"],
        "engine_env": main_pool["engine_env"],
        "engine_args": main_pool["engine_args"],
        "autoscaling": {
            "scale_to_zero": pol["scale_to_zero"],
            "min_replicas": 0 if pol["scale_to_zero"] else min(pol["min_replicas"], main_pool["replicas"]),
            "max_replicas": main_pool["replicas"],
            "target_utilization": pol["target_utilization"],
        },
    }


def plan_document(run: Run, o: Outcome) -> dict:
    """Stage 9: the plan as a plain dict (JSON/YAML serialisable)."""
    n, pol, p = run.n, run.pol, o.pools
    out = {
        "model": _model_doc(run),
        "blueprint": n["blueprint"],
        "policy": pol,
        "policy_source": n["policy_source"],
        "hardware": _hardware_doc(run),
        "weights": _weights_doc(p.main_ctx.wb, o.ctx.weights),
        "memory": _memory_doc(run, p.main_mem),
        "kv": _kv_doc(run.model, p),
        "layout": _layout_doc(o),
    }
    out.update(_serving_doc(run, o))
    out.update(
        {
            "vllm_version": n["vllm_version"],
            "traffic": dict(run.traffic, arrival_rate_rps=r(o.rates.lam, 3), concurrent_sessions=o.rates.sessions),
            "slo": run.slo,
            "efficiency": {
                "prefill_mfu": pol["prefill_mfu"],
                "decode_mbu": pol["decode_mbu"],
                "target_utilization": pol["target_utilization"],
            },
            "estimates": _estimates_doc(o),
            "seed_comparison": run.seed,
            "decisions": list(run.dec),
            "warnings": run.warnings,
        }
    )
    return out
