# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""A model the catalog does not hold, described by its Hugging Face ``config.json``.

``architecture(config, quantization)`` turns the config's fields into the planner's architecture
(the catalog's fields: layer shapes, parameter split, KV geometry, the checkpoint's precision). The
``blueprints plan --architecture FILE`` option and a site's ``models[].architecture`` both reach it
through ``inputs.resolve_model``: one path for both. A config the planner cannot price (a layer type
it does not model, a quantization method it does not price, a missing field) raises PlanError naming
the field, what is wrong and what would be valid.
"""

from __future__ import annotations

from .errors import PlanError

FIELD = "model_architecture"
# model_type -> the family whose layers the planner prices (GQA attention + SwiGLU MLP; MoE: routed experts)
DENSE_TYPES = ("llama", "mistral", "qwen2", "qwen3", "granite")
MOE_TYPES = ("mixtral", "qwen2_moe", "qwen3_moe")
MODEL_TYPES = DENSE_TYPES + MOE_TYPES
# what a site may declare for its checkpoint (models[].quantization, --quantization); the planner's weights
QUANTIZATIONS = {
    "bf16": ("bf16", None),
    "fp8-block": ("fp8", "block"),
    "fp8-channel": ("fp8", "channel"),  # per-tensor or per-channel scales (FP8-dynamic, ModelOpt FP8)
    "int4": ("int4", None),  # W4A16: AWQ, GPTQ, compressed-tensors pack-quantized
    "nvfp4": ("fp4", None),
}
QUANT_METHODS = ("fp8", "compressed-tensors", "awq", "awq_marlin", "gptq", "gptq_marlin", "modelopt")
_DTYPES_16 = ("bfloat16", "float16", "float32", "auto")


def is_hf_config(arch) -> bool:
    """A Hugging Face config (model_type / architectures / num_hidden_layers) rather than the catalog's fields."""
    return isinstance(arch, dict) and any(k in arch for k in ("model_type", "architectures", "num_hidden_layers"))


def _need(cfg: dict, key: str, what: str = "a positive integer"):
    v = cfg.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        got = "missing" if key not in cfg else f"got {v!r}"
        raise PlanError(f"{FIELD}.{key}", f"{got}; the planner needs {what} (config.json field {key!r})")
    return v


def _model_type(cfg: dict) -> str:
    mt = cfg.get("model_type")
    if mt is None:
        raise PlanError(f"{FIELD}.model_type", f"missing; valid: one of {', '.join(MODEL_TYPES)}")
    if mt not in MODEL_TYPES:
        raise PlanError(
            f"{FIELD}.model_type",
            f"{mt!r} has layers the planner cannot price; valid: {', '.join(MODEL_TYPES)} "
            "(or give the catalog's architecture fields: kind, attention, layers, ...)",
        )
    return mt


def _no_sliding_window(cfg: dict, mt: str, maxpos: int) -> None:
    """Sliding-window attention keeps a different KV per layer; the planner prices full attention only."""
    sliding = cfg.get("sliding_window")
    on = cfg.get("use_sliding_window", mt in ("mistral", "mixtral"))
    if on and isinstance(sliding, int) and 0 < sliding < maxpos:
        raise PlanError(
            f"{FIELD}.sliding_window",
            f"{sliding} tokens of sliding-window attention: the planner prices full attention only; "
            "valid: null (or use_sliding_window: false)",
        )
    if any(t != "full_attention" for t in cfg.get("layer_types") or ()):
        raise PlanError(f"{FIELD}.layer_types", "has layers other than full_attention; valid: full_attention only")


def _moe(cfg: dict, mt: str, layers: int) -> dict:
    if mt == "mixtral":
        experts, inter, shared = _need(cfg, "num_local_experts"), _need(cfg, "intermediate_size"), 0
        moe_layers = layers
    else:
        experts, inter = _need(cfg, "num_experts"), _need(cfg, "moe_intermediate_size")
        shared = cfg.get("shared_expert_intermediate_size") or 0
        step = cfg.get("decoder_sparse_step") or 1
        dense = set(cfg.get("mlp_only_layers") or ())
        moe_layers = sum(1 for i in range(layers) if i not in dense and (i + 1) % step == 0)
    return {
        "experts": experts,
        "experts_per_token": _need(cfg, "num_experts_per_tok"),
        "moe_intermediate_size": inter,
        "shared_expert_intermediate_size": shared,
        "moe_layers": moe_layers,
    }


def _params(cfg: dict, shape: dict) -> dict:
    """The catalog's parameter split, counted from the layer shapes (billions)."""
    h, layers, hd = shape["hidden_size"], shape["layers"], shape["head_dim"]
    q, kv = shape["num_attention_heads"] * hd, shape["num_key_value_heads"] * hd
    bias = (q + 2 * kv) if (cfg.get("attention_bias") or cfg.get("model_type") in ("qwen2", "qwen2_moe")) else 0
    attn = h * q + 2 * h * kv + q * h + bias + (2 * hd if cfg.get("model_type", "").startswith("qwen3") else 0)
    norms = 2 * h
    vocab = _need(cfg, "vocab_size")
    emb = vocab * h
    moe = shape.get("moe_layers", 0)
    dense_layers = layers - moe
    dense_mlp = 3 * h * (shape.get("intermediate_size") or 0)
    experts = moe * shape.get("experts", 0) * 3 * h * shape.get("moe_intermediate_size", 0)
    shared = moe * 3 * h * shape.get("shared_expert_intermediate_size", 0)
    router = moe * h * (shape.get("experts", 0) + (1 if shape.get("shared_expert_intermediate_size") else 0))
    body = layers * (attn + norms) + dense_layers * dense_mlp + experts + shared + router + h
    tied = bool(cfg.get("tie_word_embeddings"))
    total = body + emb + (0 if tied else emb)
    active_experts = experts * shape.get("experts_per_token", 0) / shape["experts"] if experts else 0
    return {
        "params_b": total / 1e9,
        # tied: one matrix, read as lm_head every step and looked up as the embedding
        "embedding_params_b": 0.0 if tied else emb / 1e9,
        "lm_head_params_b": emb / 1e9,
        "expert_params_b": experts / 1e9,
        "active_params_b": (body - experts + active_experts) / 1e9,
        "unquantized_params_b": (router + layers * norms + h) / 1e9,
    }


def _shape(cfg: dict, mt: str) -> dict:
    layers, h = _need(cfg, "num_hidden_layers"), _need(cfg, "hidden_size")
    heads = _need(cfg, "num_attention_heads")
    kv = cfg.get("num_key_value_heads", heads)
    if isinstance(kv, bool) or not isinstance(kv, int) or kv < 1 or heads % kv:
        raise PlanError(
            f"{FIELD}.num_key_value_heads", f"got {kv!r}; valid: a positive divisor of num_attention_heads ({heads})"
        )
    hd = cfg.get("head_dim") or (h // heads)
    maxpos = _need(cfg, "max_position_embeddings")
    _no_sliding_window(cfg, mt, maxpos)
    shape = {
        "layers": layers,
        "full_attention_layers": layers,
        "hidden_size": h,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "head_dim": hd,
        "max_position_embeddings": maxpos,
    }
    if mt in MOE_TYPES:
        shape.update(_moe(cfg, mt, layers))
        if shape["moe_layers"] < layers:
            shape["intermediate_size"] = _need(cfg, "intermediate_size")
    else:
        shape["intermediate_size"] = _need(cfg, "intermediate_size")
    return shape


def _compressed_tensors(qc: dict) -> tuple[str, str | None]:
    groups = [g for g in (qc.get("config_groups") or {}).values() if isinstance(g, dict)]
    if not groups:
        raise PlanError(f"{FIELD}.quantization_config.config_groups", "missing; the planner reads weights' num_bits")
    kinds = set()
    for g in groups:
        w = g.get("weights") or {}
        bits, typ, strategy = w.get("num_bits"), w.get("type"), w.get("strategy")
        if bits == 8 and typ == "float":
            kinds.add(("fp8", "block" if strategy == "block" else "channel"))
        elif bits == 4 and typ == "int" and not g.get("input_activations"):
            kinds.add(("int4", None))
        elif bits == 4 and typ == "float":
            kinds.add(("fp4", None))
        else:
            raise PlanError(
                f"{FIELD}.quantization_config.config_groups",
                f"weights of {bits} bit(s) {typ} ({strategy}) with activations {g.get('input_activations')!r} "
                "are not priced; valid: 8-bit float (FP8), 4-bit int weight-only (W4A16), 4-bit float (NVFP4)",
            )
    if len(kinds) > 1:
        raise PlanError(f"{FIELD}.quantization_config.config_groups", f"mixes {sorted(kinds)}; valid: one scheme")
    return kinds.pop()


def _fp8_block(qc: dict) -> tuple[str, str | None]:
    block = qc.get("weight_block_size")
    if block is None:
        return "fp8", "channel"
    if list(block) != [128, 128]:
        raise PlanError(f"{FIELD}.quantization_config.weight_block_size", f"{block!r}; valid: [128, 128] or null")
    return "fp8", "block"


def checkpoint_quantization(cfg: dict) -> tuple[str, str | None, str]:
    """(weights, fp8_format, method) of the checkpoint a config describes, from its quantization_config."""
    qc = cfg.get("quantization_config")
    if not qc:
        dtype = cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"
        if dtype not in _DTYPES_16:
            raise PlanError(f"{FIELD}.torch_dtype", f"{dtype!r} is not priced; valid: {', '.join(_DTYPES_16)}")
        return "bf16", None, "none"
    method = qc.get("quant_method") if isinstance(qc, dict) else None
    path = f"{FIELD}.quantization_config.quant_method"
    if method not in QUANT_METHODS:
        raise PlanError(path, f"{method!r} is not a method the planner prices; valid: {', '.join(QUANT_METHODS)}")
    if method == "fp8":
        return (*_fp8_block(qc), method)
    if method == "compressed-tensors":
        return (*_compressed_tensors(qc), method)
    if method == "modelopt":
        algo = str(qc.get("quant_algo") or "").upper()
        if algo not in ("FP8", "NVFP4"):
            raise PlanError(f"{FIELD}.quantization_config.quant_algo", f"{algo!r}; valid: FP8, NVFP4")
        return ("fp8", "channel", method) if algo == "FP8" else ("fp4", None, method)
    bits = qc.get("bits", qc.get("w_bit"))
    if bits != 4:
        raise PlanError(f"{FIELD}.quantization_config.bits", f"{bits!r}-bit {method} is not priced; valid: 4 (W4A16)")
    return "int4", None, method


def _declared(cfg: dict, quantization: str | None) -> tuple[str, str | None, str]:
    found = checkpoint_quantization(cfg)
    if quantization is None:
        return found
    if quantization not in QUANTIZATIONS:
        raise PlanError("quantization", f"unknown value {quantization!r}; valid: {', '.join(QUANTIZATIONS)}")
    weights, fmt = QUANTIZATIONS[quantization]
    if found[2] != "none" and (found[0], found[1]) != (weights, fmt):
        raise PlanError(
            "quantization",
            f"{quantization} contradicts the config's quantization_config ({found[2]}: {found[0]}"
            f"{' ' + found[1] if found[1] else ''}); valid: leave it out (the config says) or fix the config",
        )
    return weights, fmt, found[2] if found[2] != "none" else f"declared {quantization}"


def architecture(cfg: dict, quantization: str | None = None) -> dict:
    """The planner's architecture fields for a Hugging Face config.json (and the declared quantization)."""
    mt = _model_type(cfg)
    shape = _shape(cfg, mt)
    weights, fmt, method = _declared(cfg, quantization)
    arch = {
        "kind": "moe" if mt in MOE_TYPES else "dense",
        "attention": "gqa",
        **shape,
        **_params(cfg, shape),
        "native_dtype": weights,
        "checkpoint_quantization": method,
        "source": f"config.json ({', '.join(cfg.get('architectures') or [mt])}); checkpoint: {method}",
    }
    if fmt:
        arch["fp8_format"] = fmt
    return arch
