# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Stage: precision (weights, KV dtype) and the TP/PP that fit the model (seed section 3: quantize first, TP first,
PP last)."""

from __future__ import annotations

from dataclasses import dataclass

from . import checkpoint, data
from . import sizing as sz
from .engine import GIB, EngineCtx, divisors, gpu_supports, valid_tp, valid_tps
from .errors import PlanError
from .structs import Decisions, Run, r


@dataclass(frozen=True)
class Precision:
    weights: str
    kv_dtype: str


# --------------------------------------------------------------------------- precision


def _auto_weights(run: Run) -> str:
    n, gpu, pol = run.n, run.gpu, run.pol
    for w in pol["allowed_weights"]:
        if not gpu_supports(gpu, w) or not checkpoint.servable(run.model, w, n["quantized_checkpoint"], n["artifact"]):
            continue
        cc = EngineCtx(n, gpu, w, "auto", None)
        if any(cc.fits(tp, 1)[0] for tp in valid_tps(run.model, run.gpn)):
            return w
    return next((w for w in pol["allowed_weights"] if gpu_supports(gpu, w)), "bf16")


def _choose_weights(run: Run) -> str:
    n, gpu, pol = run.n, run.gpu, run.pol
    if n["weights"] == "auto":
        weights = _auto_weights(run)
        run.dec.add(
            "weights",
            weights,
            f"first of allowed_weights {pol['allowed_weights']} that {gpu['id']} runs and that fits a node "
            "(seed: quantize first)",
        )
        return weights
    weights = n["weights"]
    own = run.model.get("checkpoint_quantization") not in (None, "none") and weights == run.model["native_dtype"]
    if weights not in pol["allowed_weights"] and not own:
        raise PlanError("weights", f"{weights} is not in the blueprint's allowed_weights {pol['allowed_weights']}")
    if not gpu_supports(gpu, weights):
        raise PlanError(
            "weights",
            f"int4 (W4A16) needs vLLM's CUDA kernels; {gpu['id']} is not an NVIDIA GPU (use bf16 or fp8)"
            if weights == "int4"
            else f"fp4 (NVFP4) needs a GPU with FP4 tensor cores; {gpu['id']} has none (use b200 or rtx-pro-6000, "
            "or fp8)",
        )
    run.dec.add("weights", weights, "the checkpoint's own precision" if own else "given by the inventory")
    return weights


def _choose_kv_dtype(run: Run, weights: str) -> str:
    gpu = run.gpu
    if run.n["kv_cache_dtype"] is None:
        kv_dtype = "fp8" if (gpu.get("fp8_native") and weights in ("fp8", "fp4", "int4")) else "auto"
        run.dec.add(
            "kv cache dtype",
            kv_dtype,
            "FP8 KV halves KV bytes per token on a GPU with FP8 support and quantized weights (seed section 5)"
            if kv_dtype == "fp8"
            else "model dtype (BF16): weights are not quantized or the GPU lacks FP8",
        )
        return kv_dtype
    kv_dtype = run.n["kv_cache_dtype"]
    if kv_dtype == "nvfp4" and not gpu.get("fp4_native"):
        raise PlanError("kv_cache_dtype", f"nvfp4 KV needs FP4 tensor cores; {gpu['id']} has none (use fp8 or auto)")
    run.dec.add("kv cache dtype", kv_dtype, "given by the inventory")
    return kv_dtype


def choose_precision(run: Run) -> Precision:
    """Stage 1: weight precision (seed section 3: quantize first) and KV cache dtype (seed section 5)."""
    weights = _choose_weights(run)
    gpu, model = run.gpu, run.model
    if weights == "fp8" and not gpu.get("fp8_native"):
        run.warnings.append(
            f"{gpu['id']} has no FP8 tensor cores: vLLM runs FP8 weights weight-only (Marlin), compute at BF16 rates"
        )
    if model.get("native_dtype") == "fp8" and weights == "bf16":
        run.warnings.append(f"{model['id']} ships FP8 weights; bf16 needs an up-cast checkpoint")
    _served_checkpoint(run, weights)
    return Precision(weights, _choose_kv_dtype(run, weights))


def _served_checkpoint(run: Run, weights: str) -> None:
    """The checkpoint vLLM loads (checkpoint.served); weights it quantizes online carry per-tensor scales."""
    n = run.n
    s = checkpoint.served(run.model, weights, n["quantized_checkpoint"], n["artifact"])
    if s["quantization"] == "fp8" and run.model.get("fp8_format", "block") != "channel":
        n["model"] = {**run.model, "fp8_format": "channel"}
    flag = f" --quantization={s['quantization']}" if s["quantization"] else ""
    run.dec.add("checkpoint", s["model"] + flag, s["why"])


# --------------------------------------------------------------------------- TP / PP


def _min_tp(c: EngineCtx, tps: list[int], tried: list, where: tuple) -> dict | None:
    dec, label, _gpn = where
    for tp in tps:
        ok, w, kv = c.fits(tp, 1)
        tried.append((tp, 1, w, kv))
        if not ok:
            continue
        why = (
            f"{r(w / GIB)} GiB of {c.weights} weights per GPU leave {r(kv / GIB)} GiB for KV "
            f"({r(kv / c.budget * 100, 1)} % of the {r(c.budget / GIB)} GiB budget >= "
            f"{int(c.headroom * 100)} % headroom)"
        )
        if tp > 1:
            w1, kv1 = tried[0][2], tried[0][3]
            why += f"; TP={tried[0][0]} would leave {r(kv1 / GIB)} GiB ({r(w1 / GIB)} GiB weights)"
        dec.add(f"{label}: tensor parallel", tp, "minimum TP that fits (seed section 3): " + why)
        return {"tp": tp, "pp": 1}
    return None


def _min_pp(c: EngineCtx, tp: int, nodes: int, tried: list, where: tuple) -> dict | None:
    dec, label, gpn = where
    for pp in range(2, nodes + 1):
        ok, w, kv = c.fits(tp, pp)
        tried.append((tp, pp, w, kv))
        if not ok:
            continue
        one = next(t for t in tried if t[1] == 1 and t[0] == tp)
        dec.add(
            f"{label}: pipeline parallel",
            pp,
            f"weights do not fit one node: TP={one[0]} leaves {r(one[3] / GIB)} GiB/GPU for KV "
            f"(< {int(c.headroom * 100)} % of {r(c.budget / GIB)} GiB); PP={pp} x TP={tp} over {pp} nodes "
            f"leaves {r(kv / GIB)} GiB (PP is the last resort, seed section 3)",
        )
        dec.add(f"{label}: tensor parallel", tp, f"a whole node per pipeline stage ({gpn} GPUs)")
        return {"tp": tp, "pp": pp}
    return None


def _below_headroom(c: EngineCtx, tried: list, where: tuple) -> dict | None:
    """Nothing meets the headroom: the layout with the most KV that still holds one max_model_len sequence."""
    dec, label, gpn = where
    ok_min = [t for t in tried if c.fits(t[0], t[1], headroom=False)[0]]
    if not ok_min:
        return None
    tp, pp, _w, kv = max(ok_min, key=lambda t: (t[3], -t[0] * t[1]))
    msg = (
        f"below the KV headroom: the widest layout leaves {r(kv / GIB)} GiB/GPU for KV "
        f"({r(kv / c.budget * 100, 1)} % of {r(c.budget / GIB)} GiB < {int(c.headroom * 100)} %); "
        "more nodes (PP) or smaller weights would restore it"
    )
    if pp > 1:
        dec.add(f"{label}: pipeline parallel", pp, msg)
    dec.add(f"{label}: tensor parallel", tp, msg if pp == 1 else f"a whole node per pipeline stage ({gpn} GPUs)")
    return {"tp": tp, "pp": pp, "below_headroom": msg}


def choose_layout(c: EngineCtx, gpn: int, nodes: int, dec: Decisions, label: str) -> dict:
    """TP first (minimum that fits with KV headroom, within a node), PP only when a node is not enough."""
    tps = valid_tps(c.model, gpn)
    if not tps:
        raise PlanError("gpus_per_node", f"no TP size divides {gpn} GPUs per node and {c.model['id']}'s heads")
    tried: list = []
    where = (dec, label, gpn)
    found = (
        _min_tp(c, tps, tried, where) or _min_pp(c, tps[-1], nodes, tried, where) or _below_headroom(c, tried, where)
    )
    if found:
        return found
    raise _infeasible(c, gpn, nodes, max(tried, key=lambda t: t[3]))


def try_layout(c: EngineCtx, gpn: int, nodes: int) -> dict | None:
    try:
        return choose_layout(c, gpn, nodes, Decisions(), "probe")
    except PlanError:
        return None


def _infeasible(c: EngineCtx, gpn: int, nodes: int, best: tuple) -> PlanError:
    model, gpu = c.model, c.gpu
    tp, pp, w, kv = best
    where = f"{nodes} node(s) x {gpn} {gpu['id']}"
    if c.kvmem is not None:
        over = w + c.overhead(tp, pp) + kv - c.total
        msg = (
            f"{model['id']}: {r(w / GIB, 1)} GiB weights/GPU + {r(c.overhead(tp, pp) / GIB, 1)} GiB overhead + "
            f"kv_cache_memory_bytes {r(kv / GIB, 1)} GiB exceed the {r(c.total / GIB, 1)} GiB of a {gpu['id']} by "
            f"{r(over / GIB, 1)} GiB (TP={tp}); lower kv_cache_memory_bytes"
        )
        return PlanError("kv_cache_memory_bytes", msg)
    geom = sz.block_geometry(c.model, c.kv_bytes, tp, pp, c.num_spec)
    need = sz.blocks_per_request(c.n["max_model_len"], geom) * geom["block_bytes"]
    short = need - kv
    msg = (
        f"{model['id']} with {c.weights} weights ({r(c.wb['total'] / GIB, 1)} GiB) does not fit {where}: "
        f"the widest layout (TP={tp}, PP={max(pp, 1)}) holds {r(w / GIB, 1)} GiB of weights and "
        f"{r(c.overhead(tp, pp) / GIB, 1)} GiB of activations per GPU, leaving {r(kv / GIB, 1)} GiB of a "
        f"{r(c.budget / GIB, 1)} GiB budget (gpu_memory_utilization {c.util}) for KV: {r(short / GIB, 1)} GiB short "
        f"of the {r(need / GIB, 2)} GiB one {c.n['max_model_len']}-token sequence needs"
    )
    if kv > 0:
        fit_len = sz.max_context(kv, geom)
        return PlanError(
            "max_model_len",
            f"one {c.n['max_model_len']}-token sequence needs {r(need / GIB, 2)} GiB of KV per GPU; {model['id']} on "
            f"{where} leaves {r(kv / GIB, 2)} GiB (TP={tp}, PP={pp}); use max_model_len <= {fit_len}, "
            "more GPUs or smaller weights",
        )
    sugg = suggest_fits(c)
    if sugg:
        msg += "; would fit with KV headroom: " + "; ".join(sugg)
    return PlanError("model", msg)


def _smallest_fit(cc: EngineCtx, model: dict) -> str | None:
    for n in (1, 2, 4, 8, 16, 32):
        tp = min(n, 8)
        pp = n // tp
        if valid_tp(model, tp)[0] and cc.fits(tp, pp)[0]:
            return f"{n} x {cc.gpu['id']}" + (f" (TP={tp}, PP={pp})" if pp > 1 else f" (TP={tp})")
    return None


def suggest_fits(c: EngineCtx, limit: int = 4) -> list[str]:
    """Smallest GPU counts (per precision, per GPU type) that hold the model with KV headroom."""
    out = []
    gpus = data.gpus()
    order = [c.gpu["id"]] + [g for g in gpus if g != c.gpu["id"]]
    n0 = dict(c.n, kv_cache_memory_bytes=None)
    for gid in order:
        g = dict(gpus[gid], id=gid)
        for w in ("fp4", "fp8", "bf16"):
            if not gpu_supports(g, w):
                continue
            fit = _smallest_fit(EngineCtx(n0, g, w, c.kv_dtype, c.spec), c.model)
            if fit:
                out.append(f"{w} on {fit}")
            if len(out) >= limit:
                return out
    return out[:limit]


def replication(model: dict, tp: int) -> int:
    if model["attention"] == "mla":
        return tp
    kv = model["num_key_value_heads"]
    return max(1, tp // kv) if tp > kv else 1


__all__ = ["Precision", "choose_layout", "choose_precision", "divisors", "replication", "suggest_fits", "try_layout"]
