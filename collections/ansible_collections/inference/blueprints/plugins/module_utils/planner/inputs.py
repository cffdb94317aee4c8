# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Input validation and defaults. Every error names the input, says what was wrong and what is valid."""

from __future__ import annotations

import math

from . import calibration, data, hf_config
from .errors import PlanError

TOP_KEYS = (
    "model",
    "model_architecture",
    "model_quantization",
    "artifact",
    "name",
    "blueprint",
    "gpu",
    "gpus_per_node",
    "nodes",
    "interconnect",
    "decode_gpu",
    "decode_gpus_per_node",
    "decode_nodes",
    "weights",
    "kv_cache_dtype",
    "max_model_len",
    "contexts",
    "traffic",
    "traffic_defaults",
    "slo",
    "policy",
    "policy_source",
    "gpu_memory_utilization",
    "kv_cache_memory_bytes",
    "quantized_checkpoint",
    "vllm_version",
    "calibration",
)
TRAFFIC_KEYS = (
    "prompt_tokens_mean",
    "prompt_tokens_p95",
    "output_tokens_mean",
    "output_tokens_p95",
    "concurrent_sessions",
    "arrival_rate_rps",
)
SLO_KEYS = ("ttft_p95_ms", "tpot_p95_ms")
INTERCONNECTS = ("nvlink", "rdma", "ethernet")
WEIGHTS = ("auto", "bf16", "fp8", "fp4", "int4")
WEIGHT_ALIASES = {"nvfp4": "fp4", "bfloat16": "bf16", "w4a16": "int4"}
KV_DTYPES = ("auto", "bfloat16", "fp8", "nvfp4")
KV_ALIASES = {"bf16": "bfloat16", "fp4": "nvfp4", "fp8_e4m3": "fp8"}
ARCH_REQUIRED = (
    "kind",
    "attention",
    "layers",
    "full_attention_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "params_b",
    "active_params_b",
    "embedding_params_b",
    "lm_head_params_b",
    "max_position_embeddings",
)
ARCH_DEFAULTS = {
    "native_dtype": "bf16",
    "expert_params_b": 0,
    "unquantized_params_b": 0,
    "vision_params_b": 0,
    "mtp_layers": 0,
    "mtp_params_b": 0,
    "mtp_method": None,
    "eagle3_draft": None,
    "draft_params_b": 0,
    "overhead_gib": None,
    "hf_repo": None,
    "source": "explicit model_architecture input",
}

POLICY_ENUMS = {
    "disaggregation": ("auto", "always", "never"),
    "speculative": ("auto", "off", "mtp", "eagle3", "ngram"),
    "kv_offload": ("none", "dram", "nvme"),
    "kv_connector": ("auto", "nixl", "lmcache", "mooncake", "none"),
    "batch_sizing": ("balanced", "throughput"),
    "router": ("least_loaded", "random"),
    "slot_queue": ("chain", "erlang"),
}
POLICY_BOOLS = (
    "tool_calling_heavy",
    "code_completion",
    "shared_kv_cache",
    "prefix_caching",
    "chunked_prefill",
    "eplb",
    "language_model_only",
    "scale_to_zero",
)
POLICY_FRACTIONS = ("target_utilization", "kv_headroom_fraction")
POLICY_OPTIONAL_FRACTIONS = ("prefill_mfu", "decode_mbu")
POLICY_POSITIVE_INTS = ("long_context_tokens",)
POLICY_OPTIONAL_INTS = ("max_num_seqs", "max_num_batched_tokens", "output_token_cap")
POLICY_NUMBERS = ("kv_offload_gib", "kv_offload_max_gib_per_gpu")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _int(field: str, v, minimum: int = 1):
    if isinstance(v, str) and v.strip().isdigit():
        v = int(v.strip())
    if not _is_int(v):
        raise PlanError(field, f"must be an integer >= {minimum}, got {v!r}")
    if v < minimum:
        raise PlanError(field, f"must be an integer >= {minimum}, got {v}")
    return v


def _num(field: str, v, minimum: float = 0.0, maximum: float | None = None, strict: bool = False):
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            raise PlanError(field, f"must be a number, got {v!r}") from None
    if not _is_num(v):
        raise PlanError(field, f"must be a number, got {v!r}")
    if not math.isfinite(v):  # nan/inf compare false with every bound
        raise PlanError(field, f"must be a finite number, got {v}")
    if v < minimum or (strict and v == minimum):
        bound = f"> {minimum}" if strict else f">= {minimum}"
        raise PlanError(field, f"must be {bound}, got {v}")
    if maximum is not None and v > maximum:
        raise PlanError(field, f"must be <= {maximum}, got {v}")
    return v


def _choice(field: str, v, valid) -> str:
    if v not in valid:
        raise PlanError(field, f"unknown value {v!r}; valid: {', '.join(map(str, valid))}")
    return v


def _check_arch(model: dict, arch: dict) -> None:
    missing = [k for k in ARCH_REQUIRED if k not in arch]
    if missing:
        raise PlanError(
            "model_architecture", f"missing field(s) {', '.join(missing)}; required: {', '.join(ARCH_REQUIRED)}"
        )
    _choice("model_architecture.kind", model["kind"], ("dense", "moe"))
    _choice("model_architecture.attention", model["attention"], ("gqa", "mla", "hybrid_gdn"))
    if model["kind"] == "moe":
        for k in ("experts", "experts_per_token", "expert_params_b"):
            if not model.get(k):
                raise PlanError(f"model_architecture.{k}", "is required for kind: moe")
    if model["attention"] == "hybrid_gdn" and not isinstance(model.get("gdn"), dict):
        raise PlanError(
            "model_architecture.gdn",
            "is required for attention: hybrid_gdn (num_key_heads, num_value_heads, key_head_dim, "
            "value_head_dim, conv_kernel)",
        )
    if model["attention"] == "mla" and not isinstance(model.get("mla"), dict):
        raise PlanError(
            "model_architecture.mla",
            "is required for attention: mla (kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim)",
        )
    for k in ("layers", "full_attention_layers", "num_attention_heads", "num_key_value_heads", "head_dim"):
        _int(f"model_architecture.{k}", model[k])
    for k in ("params_b", "active_params_b"):
        _num(f"model_architecture.{k}", model[k], strict=True)


def _explicit_model(arch, mid, quantization=None) -> dict:
    if not isinstance(arch, dict):
        raise PlanError("model_architecture", f"must be a mapping of architecture fields, got {type(arch).__name__}")
    if hf_config.is_hf_config(arch):  # a Hugging Face config.json: the same conversion for the CLI and a site
        arch = {**hf_config.architecture(arch, quantization), "id": arch.get("id") or mid or "custom"}
    elif quantization is not None:
        raise PlanError(
            "quantization", "applies to a model described by its config.json; for catalog fields set native_dtype"
        )
    model = dict(ARCH_DEFAULTS)
    model.update(arch)
    _check_arch(model, arch)
    if model["overhead_gib"] is None:
        # llm-d-planner's base activation on vLLM 0.19.0 (PR #254): 2.5 GiB for MoE, 2.0 GiB for dense models
        model["overhead_gib"] = 2.5 if model["kind"] == "moe" else 2.0
    model["id"] = str(arch.get("id") or mid or "custom")
    return model


def resolve_model(inputs: dict) -> dict:
    arch = inputs.get("model_architecture")
    mid = inputs.get("model")
    if arch:
        return _explicit_model(arch, mid, inputs.get("model_quantization"))
    if inputs.get("model_quantization") is not None:
        raise PlanError(
            "quantization",
            "applies to a model described by its config.json (architecture); a catalog model's "
            "checkpoint follows weights",
        )
    if not mid:
        raise PlanError("model", "is required (a catalog id) unless model_architecture is given")
    catalog = data.models()
    if mid not in catalog:
        raise PlanError(
            "model", f"unknown model {mid!r}; catalog ids: {', '.join(catalog)} (or pass model_architecture)"
        )
    model = dict(ARCH_DEFAULTS)
    model.update(catalog[mid])
    model["id"] = mid
    return model


def resolve_gpu(field: str, gid) -> dict:
    catalog = data.gpus()
    if gid not in catalog:
        raise PlanError(field, f"unknown GPU {gid!r}; catalog ids: {', '.join(catalog)}")
    gpu = dict(catalog[gid])
    gpu["id"] = gid
    return gpu


def _check_fractions(merged: dict) -> None:
    for k in POLICY_FRACTIONS:
        _num(f"policy.{k}", merged[k], 0.0, 1.0, strict=True)
    for k in POLICY_OPTIONAL_FRACTIONS:  # null: the per-GPU efficiencies of catalog/performance.yaml
        if merged[k] is not None:
            _num(f"policy.{k}", merged[k], 0.0, 1.0, strict=True)
    _num("policy.pd_cost_margin", merged["pd_cost_margin"], 0.0, 0.9)


def _check_policy_values(merged: dict) -> None:
    for k, valid in POLICY_ENUMS.items():
        if merged[k] is False:  # YAML 1.1 reads a bare `off` / `no` as false
            merged[k] = next((v for v in ("off", "never", "none") if v in valid), False)
        _choice(f"policy.{k}", merged[k], valid)
    for k in POLICY_BOOLS:
        if not isinstance(merged[k], bool):
            raise PlanError(f"policy.{k}", f"must be true or false, got {merged[k]!r}")
    _check_fractions(merged)
    for k in POLICY_POSITIVE_INTS:
        _int(f"policy.{k}", merged[k])
    for k in POLICY_OPTIONAL_INTS:
        if merged[k] is not None:
            _int(f"policy.{k}", merged[k])
    for k in POLICY_NUMBERS:
        _num(f"policy.{k}", merged[k], strict=True)
    _int("policy.min_replicas", merged["min_replicas"], 0)
    if merged["expert_routing_skew"] != "auto":
        calibration.skew_value("policy.expert_routing_skew", merged["expert_routing_skew"])
    if merged["overhead_gib"] is not None:
        _num("policy.overhead_gib", merged["overhead_gib"])
    for k in ("dcp", "pcp"):
        if merged[k] != "auto":
            _int(f"policy.{k}", merged[k])


def _allowed_weights(aw) -> list[str]:
    if not isinstance(aw, list) or not aw:
        raise PlanError("policy.allowed_weights", f"must be a non-empty list of {', '.join(WEIGHTS[1:])}")
    out = [WEIGHT_ALIASES.get(w, w) for w in aw]
    for w in out:
        _choice("policy.allowed_weights", w, WEIGHTS[1:])
    return out


def resolve_policy(policy: dict | None) -> tuple[dict, dict]:
    """Merge the common defaults and the given policy; return (policy, example traffic and SLO).

    A blueprint's policy is the caller's to give (blueprints/<name>.yml is its only source); the
    planner knows no blueprint by name. The example traffic and SLO apply only to what the caller
    leaves out (the explicit CLI without traffic options)."""
    pol_cat = data.policies()
    bp = pol_cat["example"]
    merged = dict(pol_cat["common"])
    given = policy or {}
    if not isinstance(given, dict):
        raise PlanError("policy", f"must be a mapping, got {type(given).__name__}")
    for k in given:
        if k not in pol_cat["common"]:
            raise PlanError(f"policy.{k}", f"unknown policy key; valid: {', '.join(sorted(pol_cat['common']))}")
    merged.update(given)
    _check_policy_values(merged)
    merged["allowed_weights"] = _allowed_weights(merged["allowed_weights"])
    return merged, bp


def plain(x):
    """Deep copy into plain Python types (Ansible hands over str/dict subclasses that YAML/JSON dumpers refuse)."""
    if x is None or isinstance(x, bool):
        return x
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return float(x)
    if isinstance(x, str):
        return str(x)
    if isinstance(x, dict):
        return {plain(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return x


def _hardware(inputs: dict) -> dict:
    gpu = resolve_gpu("gpu", inputs.get("gpu") or _missing("gpu", "a GPU catalog id"))
    gpn = _int("gpus_per_node", inputs.get("gpus_per_node", 1))
    nodes = _int("nodes", inputs.get("nodes", 1))
    inter = inputs.get("interconnect") or ("rdma" if nodes > 1 else "nvlink")
    _choice("interconnect", inter, INTERCONNECTS)
    decode = None
    if inputs.get("decode_gpu"):
        decode = {
            "gpu": resolve_gpu("decode_gpu", inputs["decode_gpu"]),
            "gpus_per_node": _int("decode_gpus_per_node", inputs.get("decode_gpus_per_node", gpn)),
            "nodes": _int("decode_nodes", inputs.get("decode_nodes", 1)),
        }
    elif inputs.get("decode_gpus_per_node") is not None or inputs.get("decode_nodes") is not None:
        raise PlanError("decode_gpu", "is required when decode_gpus_per_node or decode_nodes is set")
    return {"gpu": gpu, "gpus_per_node": gpn, "nodes": nodes, "interconnect": inter, "decode": decode}


def _precision(inputs: dict, model: dict) -> dict:
    weights = inputs.get("weights") or "auto"
    weights = WEIGHT_ALIASES.get(weights, weights)
    _choice("weights", weights, WEIGHTS)
    native = model.get("native_dtype", "bf16")
    if model.get("checkpoint_quantization") and native != "bf16":
        # a quantized checkpoint is served as it is stored: vLLM does not quantize it again
        if weights not in ("auto", native):
            raise PlanError(
                "weights",
                f"{weights} differs from the checkpoint's own {native} weights ({model['checkpoint_quantization']}); "
                f"valid: {native} or auto",
            )
        weights = native
    kvd = inputs.get("kv_cache_dtype")
    if kvd is not None:
        kvd = KV_ALIASES.get(kvd, kvd)
        _choice("kv_cache_dtype", kvd, KV_DTYPES)
    return {"weights": weights, "kv_cache_dtype": kvd}


def _max_model_len(inputs: dict, model: dict) -> int:
    maxpos = model["max_position_embeddings"]
    mml = inputs.get("max_model_len")
    mml = maxpos if mml is None else _int("max_model_len", mml)
    if mml > maxpos:
        raise PlanError(
            "max_model_len",
            f"{mml} exceeds {model['id']}'s native window of {maxpos} tokens; use <= {maxpos} "
            "(longer contexts need a YaRN rope-scaling config, which the planner does not model)",
        )
    return mml


def _given_block(inputs: dict, name: str, keys: tuple) -> dict:
    given = inputs.get(name) or {}
    if not isinstance(given, dict):
        raise PlanError(name, f"must be a mapping with keys {', '.join(keys)}")
    for k in given:
        if k not in keys:
            raise PlanError(
                f"{name}.{k}", f"unknown {'traffic' if name == 'traffic' else 'SLO'} key; valid: {', '.join(keys)}"
            )
    return given


def _merged_traffic(bp: dict, given_t: dict) -> dict:
    traffic = dict(bp.get("traffic") or {})
    if given_t:
        # an explicit traffic block replaces the blueprint's example traffic except for unset keys
        if "concurrent_sessions" not in given_t and "arrival_rate_rps" in given_t:
            traffic.pop("concurrent_sessions", None)
        traffic.update({k: v for k, v in given_t.items() if v is not None})
    for k in TRAFFIC_KEYS:
        if traffic.get(k) is None:
            traffic[k] = None
        elif k == "arrival_rate_rps":
            traffic[k] = _num(f"traffic.{k}", traffic[k])
        else:
            traffic[k] = _int(f"traffic.{k}", traffic[k], 0 if k == "concurrent_sessions" else 1)
    for kind in ("prompt", "output"):  # a given mean without a p95 does not inherit the blueprint's example p95
        if f"{kind}_tokens_mean" in given_t and f"{kind}_tokens_p95" not in given_t:
            traffic[f"{kind}_tokens_p95"] = None
        if traffic[f"{kind}_tokens_p95"] is None:
            traffic[f"{kind}_tokens_p95"] = traffic[f"{kind}_tokens_mean"]
    for k in ("prompt_tokens_mean", "output_tokens_mean"):
        if traffic[k] is None:
            raise PlanError(f"traffic.{k}", "is required")
    return traffic


def _check_traffic(traffic: dict, given_t: dict, mml: int, maxpos: int) -> None:
    # the blueprint's example traffic (keys the caller did not give) is clamped to the model's window
    room = mml - (traffic["output_tokens_p95"] or 0)
    for k in ("prompt_tokens_p95", "prompt_tokens_mean"):
        if not ({k, "prompt_tokens_mean"} & set(given_t)) and traffic[k] is not None and traffic[k] > room:
            traffic[k] = max(1, min(traffic[k], room, traffic["prompt_tokens_p95"] or room))
    for kind in ("prompt", "output"):
        if traffic[f"{kind}_tokens_p95"] < traffic[f"{kind}_tokens_mean"]:
            raise PlanError(
                f"traffic.{kind}_tokens_p95",
                f"{traffic[f'{kind}_tokens_p95']} is below the mean {traffic[f'{kind}_tokens_mean']}; p95 "
                "must be >= mean",
            )
    for k in ("prompt_tokens_mean", "prompt_tokens_p95"):
        if traffic[k] >= mml:
            raise PlanError(
                f"traffic.{k}",
                f"prompt of {traffic[k]} tokens does not fit max_model_len {mml} (prompt plus at least one "
                f"output token); raise max_model_len (up to {maxpos}) or shorten prompts",
            )
    if traffic["concurrent_sessions"] is None and traffic["arrival_rate_rps"] is None:
        raise PlanError("traffic.concurrent_sessions", "give concurrent_sessions or arrival_rate_rps")


def _slo(inputs: dict, bp: dict) -> dict:
    slo = dict(bp.get("slo") or {})
    slo.update({k: v for k, v in _given_block(inputs, "slo", SLO_KEYS).items() if v is not None})
    for k in SLO_KEYS:
        slo[k] = _num(f"slo.{k}", slo[k], 0.0, strict=True)
    return slo


def _contexts(inputs: dict, mml: int) -> list[int]:
    contexts = inputs.get("contexts")
    if contexts is None:
        contexts = sorted({c for c in (8192, 32768, 131072) if c <= mml} | {mml})
    if isinstance(contexts, (int, str)):
        contexts = [contexts]
    if not isinstance(contexts, (list, tuple)) or not contexts:
        raise PlanError("contexts", "must be a non-empty list of context lengths")
    contexts = sorted({_int("contexts", c) for c in contexts})
    for c in contexts:
        if c > mml:
            raise PlanError("contexts", f"context {c} exceeds max_model_len {mml}; use values <= {mml}")
    return contexts


def _engine_settings(inputs: dict) -> dict:
    util = _num("gpu_memory_utilization", inputs.get("gpu_memory_utilization", 0.92), 0.0, 1.0, strict=True)
    kvmem = inputs.get("kv_cache_memory_bytes")
    if kvmem is not None:
        kvmem = _int("kv_cache_memory_bytes", kvmem)
    version = str(inputs.get("vllm_version") or data.DEFAULT_VLLM_VERSION)
    minor = ".".join(version.split(".")[:2])
    if minor not in data.supported_vllm_versions():
        raise PlanError(
            "vllm_version", f"no flag set for vLLM {version}; supported: {', '.join(data.supported_vllm_versions())}"
        )
    qc = inputs.get("quantized_checkpoint", True)
    if not isinstance(qc, bool):
        raise PlanError("quantized_checkpoint", f"must be true or false, got {qc!r}")
    artifact = inputs.get("artifact")
    if artifact is not None and not isinstance(artifact, str):
        raise PlanError("artifact", f"must be a URI string (hf://, pvc://, oci://), got {type(artifact).__name__}")
    return {
        "gpu_memory_utilization": util,
        "kv_cache_memory_bytes": kvmem,
        "quantized_checkpoint": qc,
        "artifact": artifact or None,
        "vllm_version": version,
    }


def normalize(inputs: dict) -> dict:
    """Validate ``inputs`` and fill defaults. Returns a new dict with resolved catalog entries."""
    if not isinstance(inputs, dict):
        raise PlanError("inputs", f"must be a mapping, got {type(inputs).__name__}")
    inputs = plain(inputs)
    for k in inputs:
        if k not in TOP_KEYS:
            raise PlanError(k, f"unknown input; valid: {', '.join(TOP_KEYS)}")
    blueprint = inputs.get("blueprint") or "chat"
    policy, bp = resolve_policy(inputs.get("policy"))
    if inputs.get("traffic_defaults"):  # the caller's example traffic (a blueprint file's defaults.traffic)
        bp = {**bp, "traffic": _given_block({"traffic": inputs["traffic_defaults"]}, "traffic", TRAFFIC_KEYS)}
    model = resolve_model(inputs)
    hardware = _hardware(inputs)
    precision = _precision(inputs, model)
    mml = _max_model_len(inputs, model)
    given_t = _given_block(inputs, "traffic", TRAFFIC_KEYS)
    traffic = _merged_traffic(bp, given_t)
    _check_traffic(traffic, given_t, mml, model["max_position_embeddings"])
    slo = _slo(inputs, bp)
    contexts = _contexts(inputs, mml)
    out = {
        "model": model,
        "name": inputs.get("name") or model["id"].lower().replace(".", "-").replace("_", "-"),
        "blueprint": blueprint,
        "policy": policy,
        "policy_source": inputs.get("policy_source") or "planner defaults (policies.yaml common)",
        **hardware,
        **precision,
        "max_model_len": mml,
        "contexts": contexts,
        "traffic": traffic,
        "traffic_defaulted": sorted(k for k in TRAFFIC_KEYS if k not in given_t),
        "slo": slo,
    }
    out.update(_engine_settings(inputs))
    out["calibration"] = calibration.normalize(inputs.get("calibration"))
    return out


def _missing(field: str, what: str):
    raise PlanError(field, f"is required ({what})")
