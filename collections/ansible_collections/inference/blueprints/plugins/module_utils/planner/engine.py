# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""One engine's sizing: the hardware/precision context, per-GPU memory and KV capacity, and roofline rates."""

from __future__ import annotations

from . import sizing as sz
from .structs import Layout, r

GIB = sz.GIB


def gpu_supports(gpu: dict, weights: str) -> bool:
    if weights == "fp4":
        return bool(gpu.get("fp4_native"))
    if weights == "int4":  # vLLM's W4A16 kernels (Marlin, Machete) are CUDA kernels
        return gpu.get("vendor", "nvidia") == "nvidia"
    return True


def peak_flops(gpu: dict, weights: str) -> tuple[float, str]:
    if weights == "fp4" and gpu.get("fp4_tflops"):
        return gpu["fp4_tflops"] * 1e12, "FP4"
    if weights in ("fp8", "fp4") and gpu.get("fp8_native") and gpu.get("fp8_tflops"):
        return gpu["fp8_tflops"] * 1e12, "FP8"
    return gpu["bf16_tflops"] * 1e12, "BF16"


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def valid_tp(model: dict, tp: int) -> tuple[bool, str]:
    if model["num_attention_heads"] % tp:
        return False, f"{model['num_attention_heads']} attention heads are not divisible by TP={tp}"
    if model["attention"] != "mla":
        kv = model["num_key_value_heads"]
        if kv % tp and tp % kv:
            return False, f"{kv} KV heads and TP={tp} do not divide each other"
    g = model.get("gdn")
    if g and (g["num_key_heads"] % tp or g["num_value_heads"] % tp):
        return False, f"GDN heads {g['num_key_heads']}/{g['num_value_heads']} are not divisible by TP={tp}"
    return True, ""


def valid_tps(model: dict, gpn: int) -> list[int]:
    """TP sizes that divide a node's GPUs and the model's heads."""
    return [tp for tp in divisors(gpn) if valid_tp(model, tp)[0]]


class EngineCtx:
    """Everything one engine sizing needs (hardware, precision, memory settings)."""

    def __init__(self, n: dict, gpu: dict, weights: str, kv_dtype: str, spec: dict | None):
        self.n = n
        self.model = n["model"]
        self.gpu = gpu
        self.weights = weights
        self.kv_dtype = kv_dtype
        self.kv_bytes = sz.KV_BYTES[kv_dtype]
        self.spec = spec
        self.num_spec = spec["num_speculative_tokens"] if spec else 0
        pol = n["policy"]
        self.vision = not pol["language_model_only"]
        self.wb = sz.weight_bytes(
            self.model,
            weights,
            vision=self.vision,
            mtp=bool(spec and spec["method"] not in ("ngram", "eagle3")),
            draft=bool(spec and spec["method"] == "eagle3"),
        )
        self.util = n["gpu_memory_utilization"]
        self.total = gpu["memory_mib"] * sz.MIB
        self.budget = self.total * self.util
        self.kvmem = n["kv_cache_memory_bytes"]
        self.headroom = pol["kv_headroom_fraction"]
        self.overhead_base = pol["overhead_gib"] if pol["overhead_gib"] is not None else self.model["overhead_gib"]

    def with_spec(self, spec: dict | None) -> EngineCtx:
        return EngineCtx(self.n, self.gpu, self.weights, self.kv_dtype, spec)

    def overhead(self, tp: int, pp: int = 1, ep: int = 1) -> float:
        """Activations, CUDA graphs and non-torch memory of one GPU rank."""
        return (self.overhead_base + sz.nontorch_gib(tp, pp, ep)) * GIB

    def kv_pool(self, w_gpu: float, tp: int, pp: int = 1, ep: int = 1) -> float:
        if self.kvmem is not None:
            return float(self.kvmem)
        return self.budget - w_gpu - self.overhead(tp, pp, ep)

    def fits(self, tp: int, pp: int, num_spec: int | None = None, headroom: bool = True) -> tuple[bool, float, float]:
        """Seed 002 section 3 fit test for a full replica (no EP sharding): weights/(TP x PP) plus overhead
        must leave a KV pool of at least kv_headroom_fraction of the budget (``headroom``) and one
        max_model_len sequence."""
        w = self.wb["total"] / (tp * pp)
        kv = self.kv_pool(w, tp, pp)
        if self.kvmem is not None:
            ok = w + self.overhead(tp, pp) + kv <= self.total
        else:
            ok = kv >= (self.headroom * self.budget if headroom else 0.0) and kv > 0
        geom = sz.block_geometry(self.model, self.kv_bytes, tp, pp, self.num_spec if num_spec is None else num_spec)
        blocks = sz.num_blocks(kv, geom)
        ok = ok and blocks >= sz.blocks_per_request(self.n["max_model_len"], geom)
        return ok, w, kv


def decode_ctx(c: EngineCtx) -> EngineCtx:
    """The decode pool's engine context on its own GPU type (n["decode"]): the main precision where the GPU runs it,
    else FP8 weights / FP8 KV."""
    d = c.n["decode"]
    if not d:
        return c
    dgpu = d["gpu"]
    kvd = c.kv_dtype if (c.kv_dtype != "nvfp4" or dgpu.get("fp4_native")) else "fp8"
    dweights = c.weights if gpu_supports(dgpu, c.weights) else "fp8"
    return EngineCtx(c.n, dgpu, dweights, kvd, c.spec)


def expert_shard(model: dict, lay: Layout) -> int:
    """Ranks a stage's routed experts are spread over: EP, or with experts split by TP (no expert parallelism) every
    TP x DP rank of the stage (vLLM flattens TP and DP for MoE layers); 1 for dense models."""
    if model.get("kind") != "moe":
        return lay.ep
    return lay.ep if lay.ep > 1 else lay.tp * lay.dp


def engine_memory(c: EngineCtx, lay: Layout, num_spec: int) -> dict:
    """Per-GPU memory and KV capacity of one engine (one vLLM instance of TP x PP x PCP x DP GPUs)."""
    model, n = c.model, c.n
    tp, pp, dp, dcp, pcp = lay.tp, lay.pp, lay.dp, lay.dcp, lay.pcp
    world = lay.world
    shard = expert_shard(c.model, lay)
    w_gpu = sz.weights_per_gpu(c.wb, tp, pp, shard)
    overhead = c.overhead(tp, pp, shard)
    kv = c.kv_pool(w_gpu, tp, pp, shard)
    geom = sz.block_geometry(model, c.kv_bytes, tp, pp, num_spec)
    geom0 = sz.block_geometry(model, c.kv_bytes, tp, pp, 0)
    blocks = sz.num_blocks(kv, geom)
    mml = n["max_model_len"]
    conc = {str(ctx): sz.max_sequences(blocks, ctx, geom, dcp) * dp for ctx in n["contexts"]}
    return {
        "world": world,
        "weights_gib_per_gpu": r(w_gpu / GIB, 3),
        "overhead_gib_per_gpu": r(overhead / GIB, 3),
        "kv_pool_gib_per_gpu": r(max(kv, 0) / GIB, 3),
        "budget_gib_per_gpu": r(c.budget / GIB, 3),
        "gpu_memory_gib": r(c.total / GIB, 3),
        "kv_pool_bytes": int(max(kv, 0)),
        "weights_bytes": w_gpu,
        "geom": geom,
        "block_size_no_spec": geom0["block_size"],
        "blocks": blocks,
        "tokens": blocks * geom["block_size"] * dcp * dp,
        "reported_tokens": sz.reported_kv_tokens(blocks, mml, geom, dcp, pcp) * dp if blocks else 0,
        "max_concurrency": conc,
        "kv_bytes_per_token_per_gpu": sz.kv_bytes_per_token_rank(model, c.kv_bytes, tp, pp, dcp),
        "state_bytes_per_seq_per_gpu": sz.gdn_state_bytes_per_seq(model, tp, pp, num_spec),
    }


def decode_sessions(c: EngineCtx, lay: Layout, tpot_s: float, mbu: float, ctx_avg: float) -> dict:
    """Sessions one engine decodes within ``tpot_s`` (bandwidth roofline, seed/sizing section 6).

    Per GPU and step: weights read (non-expert share + local experts touched) + per session 2 x GDN state
    (read + write) + the KV of its context. With PP, PP micro-batches are in flight.
    """
    model = c.model
    tp, pp, dp, ep = lay.tp, lay.pp, lay.dp, lay.ep
    bw = c.gpu["bandwidth_tb_s"] * 1e12 * mbu
    per_seq = (
        2 * sz.gdn_state_bytes_per_seq(model, tp, pp, c.num_spec)
        + sz.kv_bytes_per_token_rank(model, c.kv_bytes, tp, pp, lay.dcp) * ctx_avg
    )
    frac = 1.0
    s_rank = 0.0
    for _iteration in range(20):
        w = sz.weights_read_per_step(c.wb, tp, pp, ep, frac)
        s_rank = max(0.0, (tpot_s * bw - pp * w) / per_seq)
        frac = sz.expert_fraction_touched(model, max(1.0, s_rank * dp / pp))
    w1 = sz.weights_read_per_step(c.wb, tp, pp, ep, sz.expert_fraction_touched(model, 1))
    t_min = (pp * w1 + per_seq) / bw
    return {
        "sessions_per_engine": int(s_rank * dp),
        "per_seq_bytes_per_gpu": per_seq,
        "weights_read_bytes_per_gpu": sz.weights_read_per_step(c.wb, tp, pp, ep, frac),
        "min_tpot_s": t_min,
    }


def prefill_rate(c: EngineCtx, gpus: int, prompt: int, mfu: float) -> dict:
    peak, kind = peak_flops(c.gpu, c.weights)
    f = sz.prefill_flops_per_token(c.model, prompt)
    tok_s = mfu * peak * gpus / f
    return {
        "tokens_per_s": tok_s,
        "requests_per_s": tok_s / prompt,
        "flops_per_token": f,
        "peak": peak,
        "peak_kind": kind,
    }
