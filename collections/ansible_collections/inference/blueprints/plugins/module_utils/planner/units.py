# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""The units of the plan's figures, in one place: the plan document's ``units`` key, the Markdown report's columns and
the decisions' ``unit`` (issue 36). A key's unit is its own entry here, else the one its suffix names."""

from __future__ import annotations

# Cost: GPU-hours weighted by the GPU's cost_class (gpus.yaml; an H100 = 1.0), so "8.0" an hour is what 8 H100s cost.
COST = "H100-hours"
COST_PER_HOUR = f"{COST} per hour"
COST_PER_MTOK = f"{COST} per million output tokens"

FRACTION = "fraction (0-1)"
KEYS = {
    "cost_per_hour": f"{COST_PER_HOUR} (GPUs x cost_class; an H100 = 1.0)",
    "cost_per_million_tokens": f"{COST_PER_MTOK} at the planned arrival rate",
    "max_num_seqs": "sequences per DP rank",
    "batch_per_rank": "sequences per DP rank",
    "batch_per_rank_at_tpot": "sequences per DP rank",
    "sequences_per_rank": "decoding sequences per DP rank (mean at the planned load)",
    "arrival_rate_per_rank": "requests per second per DP rank",
    "requests_in_flight": "requests",
    "decode_step_ms_at_batch": "milliseconds (a decode-only step of a full rank)",
    "mixed_step_ms_at_batch": "milliseconds (a step of a full rank that carries a prefill chunk)",
    "requests_per_s_per_gpu": "requests per second per GPU",
    "sessions_per_gpu": "sequences per GPU",
    "sessions_per_replica": "sequences per engine",
    "concurrent_sessions": "sessions",
    "replicas": "engines",
    "required_replicas": "engines",
    "replicas_needed": "engines",
    "gpus": "GPUs",
    "gpus_needed": "GPUs",
    "required_gpus": "GPUs",
    "gpus_per_replica": "GPUs per engine",
    "gpus_per_engine": "GPUs per engine",
    "tp": "tensor-parallel ranks (GPUs per pipeline stage)",
    "pp": "pipeline stages",
    "dp": "data-parallel ranks",
    "dp_per_engine": "data-parallel ranks per engine",
    "ep": "expert-parallel ranks (1: none)",
    "dcp": "decode context-parallel ranks (within TP)",
    "pcp": "prefill context-parallel ranks",
    "gpus_per_node": "GPUs",
    "gpus_total": "GPUs",
    "decode_gpus_per_node": "GPUs",
    "nodes": "nodes",
    "decode_nodes": "nodes",
    "count": "GPUs",
    "min_replicas": "engines",
    "max_replicas": "engines",
    "ranks_per_engine": "GPU ranks",
    "ranks_per_pod": "GPU ranks",
    "kv_heads_per_gpu": "KV heads per GPU",
    "kv_replication": "copies of each KV head",
    "num_speculative_tokens": "tokens per step",
    "long_context_tokens": "tokens",
    "max_num_batched_tokens": "tokens per step",
    "output_token_cap": "tokens",
    "max_model_len": "tokens",
    "cpu_bytes_to_use": "bytes per engine core",
    "gib_per_rank": "GiB (2^30 bytes) per GPU rank",
    "requested_gib_per_rank": "GiB (2^30 bytes) per GPU rank",
    "gib_per_engine": "GiB (2^30 bytes) per engine",
    "gib_per_pod": "GiB (2^30 bytes) per pod",
    "shm_gib_per_pod": "GiB (2^30 bytes) per pod",
    "disk_gib_per_pod": "GiB (2^30 bytes) per pod",
    "kv_offload_gib": "GiB (2^30 bytes) per GPU rank",
    "kv_offload_max_gib_per_gpu": "GiB (2^30 bytes) per GPU",
    "overhead_gib": "GiB (2^30 bytes) per GPU",
    "kv_headroom_fraction": FRACTION + " of the per-GPU budget",
    "pd_cost_margin": FRACTION + " of the aggregated cost per token",
    "block_size": "tokens per KV block",
    "block_size_no_spec": "tokens per KV block",
    "blocks": "KV blocks (per GPU rank; every rank holds the same count)",
    "tokens": "tokens of KV per engine",
    "reported_tokens": "tokens (vLLM's 'GPU KV cache size' log line)",
    "max_concurrency": "sequences per engine, by context length in tokens",
    "element_bytes": "bytes",
    "prompt_tokens_mean": "tokens",
    "prompt_tokens_p95": "tokens",
    "output_tokens_mean": "tokens",
    "output_tokens_p95": "tokens",
    "prefill_utilization": FRACTION + " of the time a rank's prefill is busy",
    "mixed_step_share": FRACTION + " of a rank's steps that carry a prefill chunk",
    "slot_utilization": "offered sequences / sequence slots (1 or more: overloaded)",
    "slot_wait_probability": FRACTION + " of arrivals that wait for a sequence slot",
    "target_utilization": FRACTION,
    "gpu_memory_utilization": FRACTION + " of GPU memory vLLM budgets",
    "gemm_compute": FRACTION + " of the GPU's peak FLOP/s",
    "moe_compute": FRACTION + " of the GPU's peak FLOP/s",
    "prefill_mfu": FRACTION + " of the GPU's peak FLOP/s",
    "gemm_bandwidth": FRACTION + " of the GPU's memory bandwidth",
    "moe_bandwidth": FRACTION + " of the GPU's memory bandwidth",
    "decode_mbu": FRACTION + " of the GPU's memory bandwidth",
    "margin": FRACTION + " of the aggregated cost per token",
}
SUFFIXES = (
    ("_ms", "milliseconds"),
    ("_s", "seconds"),
    ("_rps", "requests per second"),
    ("_gib", "GiB (2^30 bytes)"),
    ("_gib_per_gpu", "GiB (2^30 bytes) per GPU"),
    ("_gib_per_rank", "GiB (2^30 bytes) per GPU rank"),
    ("_gib_per_pod", "GiB (2^30 bytes) per pod"),
    ("_gib_per_engine", "GiB (2^30 bytes) per engine"),
    ("_bytes", "bytes"),
    ("bytes_per_token", "bytes per token"),
    ("bytes_per_token_per_gpu", "bytes per token per GPU"),
    ("bytes_per_seq", "bytes per sequence"),
    ("bytes_per_seq_per_gpu", "bytes per sequence per GPU"),
)


def of(key: str) -> str | None:
    """The unit of a plan key (None: a count, a name or a flag)."""
    if key in KEYS:
        return KEYS[key]
    best = None
    for suffix, unit in SUFFIXES:  # the longest matching suffix wins
        if key.endswith(suffix) and (best is None or len(suffix) > len(best[0])):
            best = (suffix, unit)
    return best[1] if best else None


def plan_units() -> dict:
    """The plan document's ``units`` key: the unit of every figure whose key does not name it, then the suffixes."""
    out = dict(KEYS)
    out.update({f"*{suffix}": unit for suffix, unit in SUFFIXES})
    return out


# Decisions whose choice is a number: its unit ("<label>: tensor parallel" and the like end with these).
DECISIONS = {
    "kv bytes per token": "bytes",
    "kv block size": "tokens",
    "kv block size (P/D)": "tokens",
    "arrival rate": "requests per second",
    "concurrent sessions": "sessions",
    "requests in flight": "requests",
    "replicas": "engines",
    "tensor parallel": "GPUs per stage",
    "tensor parallel (long prompts)": "GPUs per stage",
    "pipeline parallel": "stages",
    "decode context parallel": "ranks",
    "decode context parallel (P/D)": "ranks",
    "prefill context parallel": "ranks",
    "data parallel": "ranks",
}


def of_decision(what: str, choice) -> str | None:
    """The unit of a decision's choice, when it is a number."""
    if isinstance(choice, bool) or not isinstance(choice, (int, float)):
        return None
    return DECISIONS.get(what) or DECISIONS.get(what.rsplit(": ", 1)[-1])


def with_unit(value, unit: str | None) -> str:
    """A figure as printed: the value and its unit (``n/a`` for a missing one)."""
    if value is None or value == "":
        return "n/a"
    return f"{value} {unit}" if unit else str(value)
