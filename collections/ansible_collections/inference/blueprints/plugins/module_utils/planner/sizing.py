# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""The arithmetic: weights, KV bytes, vLLM block geometry, KV pools and rooflines.

Every function is pure. Units: bytes unless the name says otherwise; GiB = 2**30, GB = 1e9.
"""

from __future__ import annotations

import math

GIB = 2**30
MIB = 2**20
DEFAULT_BLOCK_SIZE = 16  # vLLM CacheConfig default for attention-only models
MLA_BLOCK_SIZE = 64  # FlashMLA's page size (vLLM forces it for MLA backends)
# Non-torch memory per GPU (CUDA context, NCCL/custom all-reduce buffers): llm-d-planner's vLLM 0.19.0 calibration on
# H100 (llm-d-incubation/llm-d-planner PR #254, data/configuration/vllm_memory_constants.json NON_TORCH_OVERHEAD_GIB).
NONTORCH_TP1_PP1_GIB = 0.27
NONTORCH_TP1_PPN_GIB = 0.07
NONTORCH_COLLECTIVE_GIB = 2.10  # TP > 1; the planner applies it to expert-parallel (all-to-all) ranks too
GDN_CHUNK = 64  # chunk length of the chunked Gated DeltaNet scan (prefill FLOPs)

# bytes per weight parameter; fp4 = NVFP4: 4-bit values + one FP8 scale per 16 (4.5 bits); int4 = W4A16 (AWQ,
# GPTQ, compressed-tensors pack-quantized): 4-bit values + one 16-bit scale per group of 128 (4.125 bits)
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5625, "int4": 0.515625}
# bytes per KV element for each vLLM --kv-cache-dtype the planner emits ("auto" = model dtype, BF16)
KV_BYTES = {"auto": 2.0, "bfloat16": 2.0, "fp8": 1.0, "nvfp4": 0.5625}


def weight_bytes(model: dict, weights: str, *, vision: bool = True, mtp: bool = False, draft: bool = False) -> dict:
    """Weight memory of the whole model, split the way vLLM shards it.

    Quantized checkpoints keep embedding, lm_head and a few small tensors in BF16; the vision tower
    (when loaded) and an EAGLE draft are BF16 too.
    """
    bpp = WEIGHT_BYTES[weights]
    if weights == "fp8" and model.get("native_dtype") == "fp8":
        bpp = 1.0
    emb = model["embedding_params_b"] * 1e9
    head = model["lm_head_params_b"] * 1e9
    unq = model.get("unquantized_params_b", 0) * 1e9
    experts = model.get("expert_params_b", 0) * 1e9
    quant_nonexpert = model["params_b"] * 1e9 - emb - head - unq - experts
    expert_b = experts * bpp
    nonexpert_b = quant_nonexpert * bpp + (head + unq) * 2.0
    embedding_b = emb * 2.0
    vision_b = model.get("vision_params_b", 0) * 1e9 * 2.0 if vision else 0.0
    mtp_b = model.get("mtp_params_b", 0) * 1e9 * bpp if mtp else 0.0
    draft_b = model.get("draft_params_b", 0) * 1e9 * 2.0 if draft else 0.0
    total = expert_b + nonexpert_b + embedding_b + vision_b + mtp_b + draft_b
    return {
        "experts": expert_b,
        "nonexpert": nonexpert_b,  # layers + lm_head (read every decode step)
        "embedding": embedding_b,  # input embedding (only looked-up rows are read)
        "vision": vision_b,
        "speculative": mtp_b + draft_b,
        "total": total,
    }


def weights_per_gpu(wb: dict, tp: int, pp: int, ep: int) -> float:
    """Per-GPU weight bytes: everything sharded by TP x PP; experts by EP (= TP x DP per stage) when on."""
    shard = tp * pp
    experts = wb["experts"] / (max(ep, tp) * pp)
    return (wb["total"] - wb["experts"]) / shard + experts


def weights_read_per_step(wb: dict, tp: int, pp: int, ep: int, expert_fraction: float = 1.0) -> float:
    """Bytes one GPU reads from HBM per decode step for weights (no input embedding, no vision tower)."""
    shard = tp * pp
    dense = (wb["nonexpert"] + wb["speculative"]) / shard
    experts = wb["experts"] / (max(ep, tp) * pp) * expert_fraction
    return dense + experts


def kv_heads_per_rank(model: dict, tp: int) -> int:
    """KV heads each TP rank stores; when TP exceeds the KV heads they are replicated (at least 1)."""
    if model["attention"] == "mla":
        return 1
    return max(1, model["num_key_value_heads"] // tp)


def kv_token_bytes_per_layer(model: dict, kv_bytes: float, tp: int = 1) -> float:
    """KV bytes one token takes in one attention layer on one TP rank."""
    if model["attention"] == "mla":
        mla = model["mla"]
        return (mla["kv_lora_rank"] + mla["qk_rope_head_dim"]) * kv_bytes
    return 2 * kv_heads_per_rank(model, tp) * model["head_dim"] * kv_bytes


def kv_bytes_per_token(model: dict, kv_bytes: float) -> float:
    """Whole-model KV bytes per token (all attention layers, no TP)."""
    if model["attention"] == "mla":
        return model["full_attention_layers"] * kv_token_bytes_per_layer(model, kv_bytes)
    return model["full_attention_layers"] * 2 * model["num_key_value_heads"] * model["head_dim"] * kv_bytes


def kv_bytes_per_token_rank(model: dict, kv_bytes: float, tp: int, pp: int, dcp: int) -> float:
    """KV bytes per token stored on one GPU: its PP stage's layers, its KV heads, 1/DCP of the tokens."""
    layers = model["full_attention_layers"] / pp
    return layers * kv_token_bytes_per_layer(model, kv_bytes, tp) / dcp


def gdn_state_bytes_per_layer(model: dict, tp: int = 1, num_spec: int = 0) -> float:
    """Gated DeltaNet state per sequence and layer on one TP rank (vLLM's gated_delta_net_state_shape).

    SSM state (n_v/TP) x d_k x d_v in FP32, plus the causal-conv window
    ((2 n_k d_k + n_v d_v)/TP) x (kernel - 1 + speculative tokens) in the model dtype.
    """
    g = model.get("gdn")
    if not g:
        return 0.0
    ssm = g["num_value_heads"] / tp * g["key_head_dim"] * g["value_head_dim"] * g.get("ssm_state_bytes", 4)
    conv_dim = (2 * g["num_key_heads"] * g["key_head_dim"] + g["num_value_heads"] * g["value_head_dim"]) / tp
    conv = conv_dim * (g["conv_kernel"] - 1 + num_spec) * g.get("conv_state_bytes", 2)
    return ssm + conv


def linear_layers(model: dict) -> int:
    return model["layers"] - model["full_attention_layers"] if model["attention"] == "hybrid_gdn" else 0


def gdn_state_bytes_per_seq(model: dict, tp: int = 1, pp: int = 1, num_spec: int = 0) -> float:
    return gdn_state_bytes_per_layer(model, tp, num_spec) * linear_layers(model) / pp


def block_geometry(model: dict, kv_bytes: float, tp: int, pp: int = 1, num_spec: int = 0) -> dict:
    """vLLM's KV page layout on one GPU.

    Attention-only: 16-token blocks, one page per layer. Hybrid GDN: vLLM raises the attention block
    size (in multiples of 16) until one attention page holds one GDN state, pads the state page to it,
    and groups layers so that each of the L_full tensors is shared by one attention layer and one layer
    of each GDN group (3 groups for the 3:1 pattern).
    """
    per_tok = kv_token_bytes_per_layer(model, kv_bytes, tp)
    attn = model["full_attention_layers"]
    if model["attention"] == "hybrid_gdn":
        state = gdn_state_bytes_per_layer(model, tp, num_spec)
        block = DEFAULT_BLOCK_SIZE * math.ceil(state / (DEFAULT_BLOCK_SIZE * per_tok))
        page = block * per_tok
        groups_gdn = math.ceil(linear_layers(model) / attn)
        pad = (page - state) / state * 100.0
    else:
        block = MLA_BLOCK_SIZE if model["attention"] == "mla" else DEFAULT_BLOCK_SIZE
        page = block * per_tok
        groups_gdn = 0
        state = 0.0
        pad = 0.0
    layers_per_group = math.ceil(attn / pp)
    return {
        "block_size": block,
        "page_bytes": page,
        "layers_per_group": layers_per_group,
        "block_bytes": page * layers_per_group,  # one block id across all tensors of a group
        "gdn_groups": groups_gdn,
        "state_bytes_per_layer": state,
        "state_padding_pct": pad,
    }


def num_blocks(kv_pool_bytes: float, geom: dict) -> int:
    """vLLM get_num_blocks: available // page // tensors-per-group."""
    if kv_pool_bytes <= 0:
        return 0
    return int(kv_pool_bytes // geom["page_bytes"] // geom["layers_per_group"])


def blocks_per_request(ctx: int, geom: dict, dcp: int = 1) -> int:
    """Blocks one request of ``ctx`` tokens holds: its attention blocks (1/DCP of the tokens per rank)
    plus one block per GDN group for its recurrent state."""
    return math.ceil(ctx / (geom["block_size"] * dcp)) + geom["gdn_groups"]


def max_sequences(blocks: int, ctx: int, geom: dict, dcp: int = 1) -> int:
    return blocks // blocks_per_request(ctx, geom, dcp)


def max_context(kv_pool_bytes: float, geom: dict, dcp: int = 1) -> int:
    """Longest context one sequence can have in this pool (whole blocks, after its GDN state blocks)."""
    blocks = num_blocks(kv_pool_bytes, geom) - geom["gdn_groups"]
    return max(0, blocks * geom["block_size"] * dcp)


def reported_kv_tokens(blocks: int, max_model_len: int, geom: dict, dcp: int = 1, pcp: int = 1) -> int:
    """The "GPU KV cache size: N tokens" vLLM logs: max concurrency at max_model_len x max_model_len."""
    conc = blocks / blocks_per_request(max_model_len, geom, dcp)
    return int(conc * max_model_len * pcp)


def nontorch_gib(tp: int, pp: int = 1, ep: int = 1) -> float:
    """Non-torch memory of one GPU rank: collective buffers with TP (or EP all-to-all), little with PP alone."""
    if tp > 1 or ep > 1:
        return NONTORCH_COLLECTIVE_GIB
    return NONTORCH_TP1_PPN_GIB if pp > 1 else NONTORCH_TP1_PP1_GIB


def prefill_flops_per_token(model: dict, prompt_tokens: int) -> float:
    """Prefill FLOPs per token at a prompt of ``prompt_tokens`` (causal attention over L/2 on average)."""
    f = 2.0 * model["active_params_b"] * 1e9
    if model["attention"] == "mla":
        mla = model["mla"]
        d_qk = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]
        d_v = mla["v_head_dim"]
    else:
        d_qk = d_v = model["head_dim"]
    f += model["full_attention_layers"] * 2 * model["num_attention_heads"] * (d_qk + d_v) * (prompt_tokens / 2)
    g = model.get("gdn")
    if g:
        dk, dv = g["key_head_dim"], g["value_head_dim"]
        f += linear_layers(model) * g["num_value_heads"] * (6 * dk * dv + 2 * GDN_CHUNK * (dk + dv))
    return f


def expert_fraction_touched(model: dict, tokens_per_step: float) -> float:
    """Share of routed experts at least one of ``tokens_per_step`` tokens selects (uniform routing)."""
    if model.get("kind") != "moe" or tokens_per_step <= 0:
        return 1.0
    k, e = model["experts_per_token"], model["experts"]
    return 1.0 - (1.0 - k / e) ** tokens_per_step
