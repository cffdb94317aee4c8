# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Stage: the vLLM engine arguments of one pool (complete: they are also what `vllm serve` users run)."""

from __future__ import annotations

import json

from .checkpoint import served
from .structs import PoolSpec, Run


def _spec_json(spec: dict) -> str:
    cfg = {k: v for k, v in spec.items() if v is not None}
    return json.dumps(cfg, separators=(",", ":"), sort_keys=True)


def _parallel_args(run: Run, ps: PoolSpec) -> list[str]:
    lay, role = ps.lay, ps.role
    a = [f"--tensor-parallel-size={lay.tp}"]
    if lay.pp > 1:
        a.append(f"--pipeline-parallel-size={lay.pp}")
    if lay.dp > 1:
        a.append(f"--data-parallel-size={lay.dp}")
    if lay.ep > 1:
        a.append("--enable-expert-parallel")
        if run.pol["eplb"]:
            a.append("--enable-eplb")
    if lay.dcp > 1 and role in ("decode", "serve"):
        a.append(f"--decode-context-parallel-size={lay.dcp}")
    if lay.pcp > 1 and role in ("prefill", "serve"):
        a.append(f"--prefill-context-parallel-size={lay.pcp}")
    return a


def _memory_args(run: Run, ps: PoolSpec) -> list[str]:
    n, c = run.n, ps.ctx
    a = [f"--max-model-len={n['max_model_len']}"]
    if n["kv_cache_memory_bytes"] is not None:
        a.append(f"--kv-cache-memory-bytes={n['kv_cache_memory_bytes']}")
    else:
        a.append(f"--gpu-memory-utilization={n['gpu_memory_utilization']}")
    if c.kv_dtype != "auto":
        a.append(f"--kv-cache-dtype={c.kv_dtype}")
    if ps.block_size:
        a.append(f"--block-size={ps.block_size}")
    return a


def _scheduler_args(run: Run, max_num_seqs: int | None) -> list[str]:
    pol, off = run.pol, run.flagset["turn_off"]  # how this engine version spells "off" (--disable-X or --no-enable-X)
    a = [
        "--enable-prefix-caching" if pol["prefix_caching"] else off["--enable-prefix-caching"],
        "--enable-chunked-prefill" if pol["chunked_prefill"] else off["--enable-chunked-prefill"],
    ]
    if max_num_seqs:
        a.append(f"--max-num-seqs={max_num_seqs}")
    if pol["max_num_batched_tokens"]:
        a.append(f"--max-num-batched-tokens={pol['max_num_batched_tokens']}")
    return a


def _model_args(run: Run, ps: PoolSpec) -> list[str]:
    n, pol, c = run.n, run.pol, ps.ctx
    a = []
    quantization = served(c.model, c.weights, n["quantized_checkpoint"], n["artifact"])["quantization"]
    if quantization:
        a.append(f"--quantization={quantization}")
    if pol["language_model_only"] and c.model.get("vision_params_b"):
        a.append("--language-model-only")
    return a


def engine_args(run: Run, ps: PoolSpec, max_num_seqs: int | None, kvt: str | None) -> list[str]:
    """Every vLLM flag of one pool; only flags of the engine version's flag set (catalog/vllm_flags_<minor>.yaml).
    ``kvt`` is the pool's --kv-transfer-config JSON."""
    a = _parallel_args(run, ps) + _memory_args(run, ps) + _scheduler_args(run, max_num_seqs) + _model_args(run, ps)
    if kvt:
        a.append(f"--kv-transfer-config={kvt}")
    if ps.spec and ps.role in ("decode", "serve"):
        a.append(f"--speculative-config={_spec_json(ps.spec)}")
    allowed = run.flagset["flags"]
    for arg in a:
        flag = arg.split("=", 1)[0]
        if flag not in allowed:
            raise AssertionError(f"planner bug: {flag} is not in vllm_flags_{run.flagset['version']}")
    return a
