# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Measured engine figures (plan input ``calibration``) that replace the catalog's efficiency assumptions.

One entry holds what a verify run measured for one (model, GPU, engine version): prefill tokens/s of an engine at
a prompt length and decode tokens/s per sequence at a batch. The planner scales its compute efficiencies until its
model reproduces the prefill figure and its bandwidth efficiencies until it reproduces the decode figure
(docs/planner.md, "Calibration").
"""

from __future__ import annotations

import math
from dataclasses import replace

from . import skew
from .errors import PlanError

FIELDS = (
    "model",
    "gpu",
    "vllm_version",
    "weights",
    "kv_cache_dtype",
    "layout",
    "prefill_tokens_per_s",
    "prompt_tokens",
    "decode_tokens_per_s_per_seq",
    "batch",
    "context_tokens",
    "kv_blocks",  # the engine's KV blocks (vLLM's num_gpu_blocks) where measured: recorded, not used yet
    "expert_routing_skew",  # the power-law alpha of the experts' loads measured on the site's traffic (skew.py)
    "measured_at",
    "source",
)
LAYOUT_KEYS = ("tp", "pp", "dp", "ep")


def _num(field: str, v, integer: bool = False):
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and math.isfinite(v)
    if not ok or (integer and int(v) != v):
        raise PlanError(field, f"must be a {'positive integer' if integer else 'number > 0'}, got {v!r}")
    return int(v) if integer else float(v)


def _entry(i: int, e) -> dict:
    where = f"calibration[{i}]"
    if not isinstance(e, dict):
        raise PlanError(where, f"must be a mapping, got {type(e).__name__}")
    for k in e:
        if k not in FIELDS:
            raise PlanError(f"{where}.{k}", f"unknown calibration key; valid: {', '.join(FIELDS)}")
    for k in ("model", "gpu", "vllm_version"):
        if not e.get(k):
            raise PlanError(f"{where}.{k}", "is required")
    if e.get("prefill_tokens_per_s") is None and e.get("decode_tokens_per_s_per_seq") is None:
        raise PlanError(where, "give prefill_tokens_per_s and/or decode_tokens_per_s_per_seq")
    out = {k: e.get(k) for k in FIELDS}
    out["vllm_version"] = str(e["vllm_version"])
    lay = e.get("layout") or {}
    if not isinstance(lay, dict) or any(k not in LAYOUT_KEYS for k in lay):
        raise PlanError(f"{where}.layout", f"must be a mapping of {', '.join(LAYOUT_KEYS)}")
    out["layout"] = {k: _num(f"{where}.layout.{k}", lay.get(k, 1), True) for k in LAYOUT_KEYS}
    if e.get("prefill_tokens_per_s") is not None:
        out["prefill_tokens_per_s"] = _num(f"{where}.prefill_tokens_per_s", e["prefill_tokens_per_s"])
        out["prompt_tokens"] = _num(f"{where}.prompt_tokens", e.get("prompt_tokens", 1024), True)
    if e.get("decode_tokens_per_s_per_seq") is not None:
        out["decode_tokens_per_s_per_seq"] = _num(
            f"{where}.decode_tokens_per_s_per_seq", e["decode_tokens_per_s_per_seq"]
        )
        out["batch"] = _num(f"{where}.batch", e.get("batch", 1), True)
        out["context_tokens"] = _num(f"{where}.context_tokens", e.get("context_tokens", 1024), True)
    if e.get("kv_blocks") is not None:
        out["kv_blocks"] = _num(f"{where}.kv_blocks", e["kv_blocks"], True)
    if e.get("expert_routing_skew") is not None:
        out["expert_routing_skew"] = skew_value(f"{where}.expert_routing_skew", e["expert_routing_skew"])
    return out


def skew_value(where: str, v):
    """An expert-routing skew: ``uniform``, or a power-law alpha above 1 and at most skew.MAX_ALPHA."""
    if v == "uniform":
        return v
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 1.0 < v <= skew.MAX_ALPHA
    if not ok:
        raise PlanError(where, f"must be uniform or a power-law alpha above 1 and at most {skew.MAX_ALPHA}, got {v!r}")
    return float(v)


def normalize(raw) -> list[dict]:
    """The ``calibration`` input: one mapping or a list of them (see docs/planner.md)."""
    if raw is None:
        return []
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list):
        raise PlanError("calibration", f"must be a mapping or a list of mappings, got {type(raw).__name__}")
    return [_entry(i, e) for i, e in enumerate(raw)]


def _minor(v: str) -> str:
    return ".".join(str(v).split(".")[:2])


def find(entries: list[dict], key: dict) -> dict | None:
    """The entry measured for ``key``'s model, GPU and engine minor version (and its weights / KV cache dtype when the
    entry names them); ``key`` has the entry's field names."""
    for e in entries:
        if e["model"] != key["model"] or e["gpu"] != key["gpu"]:
            continue
        if _minor(e["vllm_version"]) != _minor(key["vllm_version"]):
            continue
        if any(e.get(f) and e[f] != key[f] for f in ("weights", "kv_cache_dtype")):
            continue
        return e
    return None


def _solve(fn, target: float) -> tuple[float, bool]:
    """The scale s in [1/50, 50] where fn(s) == target (fn increasing); (s, True) when it hit a bound."""
    lo, hi = 0.02, 50.0
    if fn(hi) < target:
        return hi, True
    if fn(lo) > target:
        return lo, True
    for _dummy in range(50):
        mid = math.sqrt(lo * hi)
        if fn(mid) < target:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi), False


def apply(eff, entry: dict, make_model) -> tuple[object, str]:
    """``eff`` scaled to reproduce the entry's measurements; ``make_model(eff, layout)`` builds an EngineModel."""
    lay = entry["layout"]
    parts = []
    cscale = bscale = 1.0
    if entry.get("expert_routing_skew") is not None:  # first: the decode figure is fitted with the measured skew
        eff = replace(eff, routing_skew=skew.alpha_of(entry["expert_routing_skew"]))
        parts.append(f"expert routing skew {entry['expert_routing_skew']} (measured)")
    if entry.get("prefill_tokens_per_s"):
        n = entry["prompt_tokens"]

        def prefill_rate(s: float) -> float:
            em = make_model(eff.scaled(compute=s), lay)
            return n / em.step(0.0, n, 0.0, n / 2) * lay["dp"]

        cscale, capped = _solve(prefill_rate, entry["prefill_tokens_per_s"])
        parts.append(
            f"prefill {entry['prefill_tokens_per_s']:g} tok/s at {n}-token prompts: compute efficiencies x{cscale:.2f}"
            + (" (at the model's bound)" if capped else "")
        )
    if entry.get("decode_tokens_per_s_per_seq"):
        b, ctx = entry["batch"], entry["context_tokens"]

        def decode_rate(s: float) -> float:
            em = make_model(eff.scaled(compute=cscale, bandwidth=s), lay)
            return 1.0 / em.step(float(b), 0.0, float(ctx))

        bscale, capped = _solve(decode_rate, entry["decode_tokens_per_s_per_seq"])
        parts.append(
            f"decode {entry['decode_tokens_per_s_per_seq']:g} tok/s per sequence at batch {b}: bandwidth efficiencies "
            f"x{bscale:.2f}" + (" (at the model's bound)" if capped else "")
        )
    where = f"TP={lay['tp']} PP={lay['pp']} DP={lay['dp']}"
    src = entry.get("source") or "calibration input"
    note = (
        f"calibrated from measurements ({src}"
        + (f", {entry['measured_at']}" if entry.get("measured_at") else "")
        + f", {entry['gpu']}, vLLM {entry['vllm_version']}, {where}): "
        + "; ".join(parts)
    )
    return eff.scaled(compute=cscale, bandwidth=bscale, note=note), note
