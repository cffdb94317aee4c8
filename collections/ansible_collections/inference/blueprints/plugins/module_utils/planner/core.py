# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009, PLR0917
"""plan(): layout, memory, KV capacity, pools, speculative decoding, KV connector and engine arguments."""

from __future__ import annotations

import json
import math

from . import data
from . import inputs as inputs_mod
from . import sizing as sz
from .errors import PlanError

GIB = sz.GIB


def _r(x: float, n: int = 2) -> float:
    return round(float(x), n)


def _num(x: float):
    """An int when the value is whole (byte counts), else rounded to 0.1."""
    return int(round(x)) if abs(x - round(x)) < 1e-6 else round(float(x), 1)


class _Decisions(list):
    def add(self, what: str, choice, why: str) -> None:
        self.append({"what": what, "choice": choice, "why": why})


# --------------------------------------------------------------------------- precision


def _gpu_supports(gpu: dict, weights: str) -> bool:
    if weights == "fp4":
        return bool(gpu.get("fp4_native"))
    return True


def _peak_flops(gpu: dict, weights: str) -> tuple[float, str]:
    if weights == "fp4" and gpu.get("fp4_tflops"):
        return gpu["fp4_tflops"] * 1e12, "FP4"
    if weights in ("fp8", "fp4") and gpu.get("fp8_native") and gpu.get("fp8_tflops"):
        return gpu["fp8_tflops"] * 1e12, "FP8"
    return gpu["bf16_tflops"] * 1e12, "BF16"


# --------------------------------------------------------------------------- layout


def _divisors(n: int) -> list[int]:
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


class _Ctx:
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

    def overhead(self, world: int) -> float:
        return (self.overhead_base + sz.nontorch_gib(world)) * GIB

    def kv_pool(self, w_gpu: float, world: int) -> float:
        if self.kvmem is not None:
            return float(self.kvmem)
        return self.budget - w_gpu - self.overhead(world)

    def fits(self, tp: int, pp: int, num_spec: int | None = None, headroom: bool = True) -> tuple[bool, float, float]:
        """Seed 002 section 3 fit test for a full replica (no EP sharding): weights/(TP x PP) plus overhead
        must leave a KV pool of at least kv_headroom_fraction of the budget (``headroom``) and one
        max_model_len sequence."""
        w = self.wb["total"] / (tp * pp)
        kv = self.kv_pool(w, tp * pp)
        if self.kvmem is not None:
            ok = w + self.overhead(tp * pp) + kv <= self.total
        else:
            ok = kv >= (self.headroom * self.budget if headroom else 0.0) and kv > 0
        geom = sz.block_geometry(self.model, self.kv_bytes, tp, pp, self.num_spec if num_spec is None else num_spec)
        blocks = sz.num_blocks(kv, geom)
        ok = ok and blocks >= sz.blocks_per_request(self.n["max_model_len"], geom)
        return ok, w, kv


def choose_layout(c: _Ctx, gpn: int, nodes: int, dec: _Decisions, label: str) -> dict:
    """TP first (minimum that fits with KV headroom, within a node), PP only when a node is not enough."""
    model = c.model
    tps = []
    for tp in _divisors(gpn):
        ok, why = valid_tp(model, tp)
        if ok:
            tps.append(tp)
    if not tps:
        raise PlanError("gpus_per_node", f"no TP size divides {gpn} GPUs per node and {model['id']}'s heads")
    tried = []
    for tp in tps:
        ok, w, kv = c.fits(tp, 1)
        tried.append((tp, 1, w, kv))
        if ok:
            why = (
                f"{_r(w / GIB)} GiB of {c.weights} weights per GPU leave {_r(kv / GIB)} GiB for KV "
                f"({_r(kv / c.budget * 100, 1)} % of the {_r(c.budget / GIB)} GiB budget >= "
                f"{int(c.headroom * 100)} % headroom)"
            )
            if tp > 1:
                w1, kv1 = tried[0][2], tried[0][3]
                why += f"; TP={tried[0][0]} would leave {_r(kv1 / GIB)} GiB ({_r(w1 / GIB)} GiB weights)"
            dec.add(f"{label}: tensor parallel", tp, "minimum TP that fits (seed section 3): " + why)
            return {"tp": tp, "pp": 1}
    tp = tps[-1]
    for pp in range(2, nodes + 1):
        ok, w, kv = c.fits(tp, pp)
        tried.append((tp, pp, w, kv))
        if ok:
            one = next(t for t in tried if t[1] == 1 and t[0] == tp)
            dec.add(
                f"{label}: pipeline parallel",
                pp,
                f"weights do not fit one node: TP={one[0]} leaves {_r(one[3] / GIB)} GiB/GPU for KV "
                f"(< {int(c.headroom * 100)} % of {_r(c.budget / GIB)} GiB); PP={pp} x TP={tp} over {pp} nodes "
                f"leaves {_r(kv / GIB)} GiB (PP is the last resort, seed section 3)",
            )
            dec.add(f"{label}: tensor parallel", tp, f"a whole node per pipeline stage ({gpn} GPUs)")
            return {"tp": tp, "pp": pp}
    # nothing meets the headroom: take the layout with the most KV that still holds one max_model_len sequence
    ok_min = [t for t in tried if c.fits(t[0], t[1], headroom=False)[0]]
    if ok_min:
        tp, pp, w, kv = max(ok_min, key=lambda t: (t[3], -t[0] * t[1]))
        msg = (
            f"below the KV headroom: the widest layout leaves {_r(kv / GIB)} GiB/GPU for KV "
            f"({_r(kv / c.budget * 100, 1)} % of {_r(c.budget / GIB)} GiB < {int(c.headroom * 100)} %); "
            "more nodes (PP) or smaller weights would restore it"
        )
        if pp > 1:
            dec.add(f"{label}: pipeline parallel", pp, msg)
        dec.add(f"{label}: tensor parallel", tp, msg if pp == 1 else f"a whole node per pipeline stage ({gpn} GPUs)")
        return {"tp": tp, "pp": pp, "below_headroom": msg}
    raise _infeasible(c, gpn, nodes, max(tried, key=lambda t: t[3]))


def _infeasible(c: _Ctx, gpn: int, nodes: int, best: tuple) -> PlanError:
    model, gpu = c.model, c.gpu
    tp, pp, w, kv = best
    where = f"{nodes} node(s) x {gpn} {gpu['id']}"
    if c.kvmem is not None:
        over = w + c.overhead(tp * pp) + kv - c.total
        msg = (
            f"{model['id']}: {_r(w / GIB, 1)} GiB weights/GPU + {_r(c.overhead(tp * pp) / GIB, 1)} GiB overhead + "
            f"kv_cache_memory_bytes {_r(kv / GIB, 1)} GiB exceed the {_r(c.total / GIB, 1)} GiB of a {gpu['id']} by "
            f"{_r(over / GIB, 1)} GiB (TP={tp}); lower kv_cache_memory_bytes"
        )
        return PlanError("kv_cache_memory_bytes", msg)
    geom = sz.block_geometry(c.model, c.kv_bytes, tp, pp, c.num_spec)
    need = sz.blocks_per_request(c.n["max_model_len"], geom) * geom["block_bytes"]
    short = need - kv
    msg = (
        f"{model['id']} with {c.weights} weights ({_r(c.wb['total'] / GIB, 1)} GiB) does not fit {where}: "
        f"the widest layout (TP={tp}, PP={max(pp, 1)}) holds {_r(w / GIB, 1)} GiB of weights and "
        f"{_r(c.overhead(tp * pp) / GIB, 1)} GiB of activations per GPU, leaving {_r(kv / GIB, 1)} GiB of a "
        f"{_r(c.budget / GIB, 1)} GiB budget (gpu_memory_utilization {c.util}) for KV: {_r(short / GIB, 1)} GiB short "
        f"of the {_r(need / GIB, 2)} GiB one {c.n['max_model_len']}-token sequence needs"
    )
    if kv > 0:
        fit_len = sz.max_context(kv, geom)
        return PlanError(
            "max_model_len",
            f"one {c.n['max_model_len']}-token sequence needs {_r(need / GIB, 2)} GiB of KV per GPU; {model['id']} on "
            f"{where} leaves {_r(kv / GIB, 2)} GiB (TP={tp}, PP={pp}); use max_model_len <= {fit_len}, "
            "more GPUs or smaller weights",
        )
    sugg = suggest_fits(c)
    if sugg:
        msg += "; would fit with KV headroom: " + "; ".join(sugg)
    return PlanError("model", msg)


def suggest_fits(c: _Ctx, limit: int = 4) -> list[str]:
    """Smallest GPU counts (per precision, per GPU type) that hold the model with KV headroom."""
    out = []
    gpus = data.gpus()
    order = [c.gpu["id"]] + [g for g in gpus if g != c.gpu["id"]]
    for gid in order:
        g = dict(gpus[gid], id=gid)
        for w in ("fp4", "fp8", "bf16"):
            if not _gpu_supports(g, w):
                continue
            cc = _Ctx(dict(c.n, kv_cache_memory_bytes=None), g, w, c.kv_dtype, c.spec)
            for n in (1, 2, 4, 8, 16, 32):
                tp = min(n, 8)
                pp = n // tp
                if not valid_tp(c.model, tp)[0]:
                    continue
                if cc.fits(tp, pp)[0]:
                    out.append(f"{w} on {n} x {gid}" + (f" (TP={tp}, PP={pp})" if pp > 1 else f" (TP={tp})"))
                    break
            if len(out) >= limit:
                return out
        if gid == c.gpu["id"] and out:
            continue
    return out[:limit]


# --------------------------------------------------------------------------- engine sizing


def engine_memory(c: _Ctx, tp: int, pp: int, dp: int, ep: int, dcp: int, pcp: int, num_spec: int, n: dict) -> dict:
    """Per-GPU memory and KV capacity of one engine (one vLLM instance of TP x PP x PCP x DP GPUs)."""
    model = c.model
    world = tp * pp * pcp * dp
    w_gpu = sz.weights_per_gpu(c.wb, tp, pp, ep)
    overhead = c.overhead(world)
    kv = c.kv_pool(w_gpu, world)
    geom = sz.block_geometry(model, c.kv_bytes, tp, pp, num_spec)
    geom0 = sz.block_geometry(model, c.kv_bytes, tp, pp, 0)
    blocks = sz.num_blocks(kv, geom)
    mml = n["max_model_len"]
    conc = {str(ctx): sz.max_sequences(blocks, ctx, geom, dcp) * dp for ctx in n["contexts"]}
    return {
        "world": world,
        "weights_gib_per_gpu": _r(w_gpu / GIB, 3),
        "overhead_gib_per_gpu": _r(overhead / GIB, 3),
        "kv_pool_gib_per_gpu": _r(max(kv, 0) / GIB, 3),
        "budget_gib_per_gpu": _r(c.budget / GIB, 3),
        "gpu_memory_gib": _r(c.total / GIB, 3),
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


def decode_sessions(
    c: _Ctx, tp: int, pp: int, dp: int, ep: int, dcp: int, tpot_s: float, mbu: float, ctx_avg: float
) -> dict:
    """Sessions one engine decodes within ``tpot_s`` (bandwidth roofline, seed/sizing section 6).

    Per GPU and step: weights read (non-expert share + local experts touched) + per session 2 x GDN state
    (read + write) + the KV of its context. With PP, PP micro-batches are in flight.
    """
    model = c.model
    bw = c.gpu["bandwidth_tb_s"] * 1e12 * mbu
    per_seq = (
        2 * sz.gdn_state_bytes_per_seq(model, tp, pp, c.num_spec)
        + sz.kv_bytes_per_token_rank(model, c.kv_bytes, tp, pp, dcp) * ctx_avg
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


def prefill_rate(c: _Ctx, gpus: int, prompt: int, mfu: float) -> dict:
    peak, kind = _peak_flops(c.gpu, c.weights)
    f = sz.prefill_flops_per_token(c.model, prompt)
    tok_s = mfu * peak * gpus / f
    return {
        "tokens_per_s": tok_s,
        "requests_per_s": tok_s / prompt,
        "flops_per_token": f,
        "peak": peak,
        "peak_kind": kind,
    }


# --------------------------------------------------------------------------- plan


def plan(inputs: dict) -> dict:
    n = inputs_mod.normalize(inputs)
    model, gpu, pol = n["model"], n["gpu"], n["policy"]
    traffic, slo = n["traffic"], n["slo"]
    dec = _Decisions()
    warnings: list[str] = []
    seed: list[dict] = []

    dec.add("policy", n["blueprint"], f"from {n['policy_source']}")

    # ---- weight precision (seed section 3: quantize first)
    if n["weights"] == "auto":
        weights = None
        for w in pol["allowed_weights"]:
            if not _gpu_supports(gpu, w):
                continue
            cc = _Ctx(n, gpu, w, "auto", None)
            if any(cc.fits(tp, 1)[0] for tp in _divisors(n["gpus_per_node"]) if valid_tp(model, tp)[0]):
                weights = w
                break
        if weights is None:
            weights = next((w for w in pol["allowed_weights"] if _gpu_supports(gpu, w)), "bf16")
        dec.add(
            "weights",
            weights,
            f"first of allowed_weights {pol['allowed_weights']} that {gpu['id']} runs and that fits a node "
            "(seed: quantize first)",
        )
    else:
        weights = n["weights"]
        if weights not in pol["allowed_weights"]:
            raise PlanError("weights", f"{weights} is not in the blueprint's allowed_weights {pol['allowed_weights']}")
        if not _gpu_supports(gpu, weights):
            raise PlanError(
                "weights",
                f"fp4 (NVFP4) needs a GPU with FP4 tensor cores; {gpu['id']} has none (use b200 or "
                "rtx-pro-6000, or fp8)",
            )
        dec.add("weights", weights, "given by the inventory")
    if weights == "fp8" and not gpu.get("fp8_native"):
        warnings.append(
            f"{gpu['id']} has no FP8 tensor cores: vLLM runs FP8 weights weight-only (Marlin), compute at BF16 rates"
        )
    if model.get("native_dtype") == "fp8" and weights == "bf16":
        warnings.append(f"{model['id']} ships FP8 weights; bf16 needs an up-cast checkpoint")

    # ---- KV cache dtype
    if n["kv_cache_dtype"] is None:
        kv_dtype = "fp8" if (gpu.get("fp8_native") and weights in ("fp8", "fp4")) else "auto"
        dec.add(
            "kv cache dtype",
            kv_dtype,
            "FP8 KV halves KV bytes per token on a GPU with FP8 support and quantized weights (seed section 5)"
            if kv_dtype == "fp8"
            else "model dtype (BF16): weights are not quantized or the GPU lacks FP8",
        )
    else:
        kv_dtype = n["kv_cache_dtype"]
        if kv_dtype == "nvfp4" and not gpu.get("fp4_native"):
            raise PlanError(
                "kv_cache_dtype", f"nvfp4 KV needs FP4 tensor cores; {gpu['id']} has none (use fp8 or auto)"
            )
        dec.add("kv cache dtype", kv_dtype, "given by the inventory")

    # ---- speculative decoding (seed section 6)
    spec = _choose_speculative(model, pol, dec)

    c = _Ctx(n, gpu, weights, kv_dtype, spec)
    c_nospec = _Ctx(n, gpu, weights, kv_dtype, None)
    gpn, nodes = n["gpus_per_node"], n["nodes"]
    total_gpus = gpn * nodes

    # speculative heads cost memory; a strict budget falls back to n-gram (seed: no draft to host)
    if spec and spec["method"] != "ngram" and pol["speculative"] == "auto":
        lay_spec = _try_layout(c, gpn, nodes)
        lay_plain = _try_layout(c_nospec, gpn, nodes)
        if lay_plain and (not lay_spec or (lay_spec["tp"] * lay_spec["pp"] > lay_plain["tp"] * lay_plain["pp"])):
            spec = _ngram_spec()
            dec.add(
                "speculative decoding",
                "ngram",
                f"{spec_name(spec)}: the draft/MTP weights would not fit the minimum layout (seed: strict "
                "memory budget -> n-gram)",
            )
            c = _Ctx(n, gpu, weights, kv_dtype, spec)

    if spec and _try_layout(c, gpn, nodes) is None and _try_layout(c_nospec, gpn, nodes) is None:
        choose_layout(c_nospec, gpn, nodes, dec, "engine")  # raises: report the model's own weights
    lay = choose_layout(c, gpn, nodes, dec, "engine")
    if lay["tp"] > 1 and not gpu.get("link_gb_s"):
        warnings.append(
            f"TP={lay['tp']} on {gpu['id']} runs its per-layer all-reduce over PCIe (no NVLink); "
            "expect lower decode speed than the roofline"
        )
    if lay.get("below_headroom"):
        warnings.append("serve/prefill layout " + lay["below_headroom"])
    tp, pp = lay["tp"], lay["pp"]

    # ---- DP / EP (seed section 3: DP after TP; EP+DP for MoE within a node)
    moe = model["kind"] == "moe"
    dp_engine = gpn // tp if moe and pp == 1 else 1

    # ---- context parallel (seed section 3: DCP first for long decode, PCP for long prefill)
    long_ctx = pol["long_context_tokens"]
    out95 = min(traffic["output_tokens_p95"], pol["output_token_cap"] or traffic["output_tokens_p95"])
    decode_ctx = traffic["prompt_tokens_p95"] + out95
    dcp = _choose_dcp(model, pol, tp, decode_ctx, long_ctx, dec)
    pcp, dp_engine = _choose_pcp(c, n, pol, tp, pp, dp_engine, gpn, total_gpus, long_ctx, dec)
    if pcp > 1 and dcp > 1 and dcp not in (pcp, tp * pcp):
        dec.add(
            "decode context parallel", 1, f"vLLM requires DCP in (1, PCP, TP x PCP) when PCP={pcp}; DCP={dcp} dropped"
        )
        dcp = 1

    engine_gpus = tp * pp * pcp * dp_engine
    if pp > 1:
        replicas = nodes // pp if engine_gpus >= gpn else total_gpus // engine_gpus
    else:
        replicas = total_gpus // engine_gpus
    ep = tp * pcp * dp_engine if (moe and tp * pcp * dp_engine > 1) else 1
    dp_total = dp_engine * replicas
    if moe:
        dec.add(
            "data / expert parallel",
            f"DP={dp_engine} per engine, EP={ep}",
            f"MoE: DP ranks within a node share experts via --enable-expert-parallel (EP = TP x DP per stage = {ep})"
            if ep > 1
            else "MoE on one GPU per stage: no expert parallelism",
        )
    dec.add(
        "replicas",
        replicas,
        f"{total_gpus} GPUs / {engine_gpus} per engine (TP={tp} x PP={pp} x PCP={pcp} x DP={dp_engine}); "
        + ("independent replicas behind the router" if not moe or replicas > 1 else "one engine"),
    )
    if replicas < 1:
        raise PlanError("nodes", f"the layout needs {engine_gpus} GPUs per engine; the hardware has {total_gpus}")
    if total_gpus - replicas * engine_gpus:
        warnings.append(
            f"{total_gpus - replicas * engine_gpus} GPU(s) left idle: {total_gpus} is not a multiple of {engine_gpus}"
        )

    mem = engine_memory(c, tp, pp, dp_engine, ep, dcp, pcp, c.num_spec, n)
    if mem["blocks"] < sz.blocks_per_request(n["max_model_len"], mem["geom"], dcp):
        raise PlanError(
            "max_model_len",
            f"one {n['max_model_len']}-token sequence does not fit the KV pool "
            f"({mem['kv_pool_gib_per_gpu']} GiB/GPU); lower max_model_len",
        )
    _kv_decisions(c, n, mem, tp, dcp, spec, dec)

    # ---- SLO feasibility (an SLO no size can meet is an error)
    mfu, mbu, util_t = pol["prefill_mfu"], pol["decode_mbu"], pol["target_utilization"]
    _check_slo(c, n, gpn, nodes)

    # ---- rates
    tpot_s = slo["tpot_p95_ms"] / 1000.0
    ctx_avg = traffic["prompt_tokens_mean"] + traffic["output_tokens_mean"] / 2
    ds = decode_sessions(c, tp, pp, dp_engine, ep, dcp, tpot_s, mbu, ctx_avg)
    cap_ctx = traffic["prompt_tokens_mean"] + traffic["output_tokens_mean"]
    kv_cap = sz.max_sequences(mem["blocks"], cap_ctx, mem["geom"], dcp) * dp_engine
    seq_cap = (pol["max_num_seqs"] or 10**9) * dp_engine  # null: the TPOT batch sets it
    s_engine = max(0, min(ds["sessions_per_engine"], kv_cap, seq_cap))
    pr = prefill_rate(c, engine_gpus, traffic["prompt_tokens_mean"], mfu)
    ttft_mean_s = traffic["prompt_tokens_mean"] / (pr["tokens_per_s"] / dp_engine)
    pr95 = prefill_rate(c, engine_gpus // dp_engine, traffic["prompt_tokens_p95"], mfu)
    ttft_p95_s = traffic["prompt_tokens_p95"] / pr95["tokens_per_s"]
    e2e = ttft_mean_s + max(0, traffic["output_tokens_mean"] - 1) * tpot_s
    lam = traffic["arrival_rate_rps"]
    sessions = traffic["concurrent_sessions"]
    if lam is None:
        lam = sessions / e2e
        dec.add(
            "arrival rate",
            _r(lam, 2),
            f"Little's law: {sessions} sessions / {_r(e2e, 2)} s per request (TTFT + output x TPOT)",
        )
    if sessions is None:
        sessions = math.ceil(lam * e2e)
        dec.add("concurrent sessions", sessions, f"Little's law: {lam} req/s x {_r(e2e, 2)} s per request")
    if ttft_p95_s * 1000 > slo["ttft_p95_ms"]:
        warnings.append(
            f"estimated prefill time of a p95 prompt ({traffic['prompt_tokens_p95']} tokens) is "
            f"{_r(ttft_p95_s * 1000, 0)} ms "
            f"on one engine, above the TTFT SLO {slo['ttft_p95_ms']} ms"
        )

    # ---- disaggregation (seed section 4)
    disagg, dis_why = _choose_disagg(c, n, pol, replicas, sessions, lam, pr, engine_gpus, s_engine, dp_engine)
    dec.add("disaggregation", disagg, dis_why + ("; the pools below replace the single-pool layout" if disagg else ""))

    pools: dict = {"prefill": None, "decode": None, "serve": None}
    flagset = data.vllm_flags(n["vllm_version"])
    connector = _choose_connector(n, pol, disagg, dec)

    if disagg:
        pools, main_mem, main_lay, main_ctx, ratio = _size_disagg(
            c, n, pol, dec, warnings, tp, pp, pcp, dcp, lam, sessions, ctx_avg, cap_ctx, tpot_s, connector
        )
        seed.append(
            {
                "claim": "prefill:decode workers 1:3 to 1:5 for chat (seed section 4)",
                "seed": "1:3 - 1:5",
                "plan": f"1:{_r(ratio, 1)}" if ratio else "n/a",
                "note": "ratio follows from per-GPU rates and E2E time; the seed's 30 req/s and 150 sessions "
                "give ~1:1.9 at E2E 9.3 s",
            }
        )
    else:
        required = (
            math.ceil((lam / pr["requests_per_s"] + sessions / max(s_engine, 1e-9)) / util_t) if s_engine else None
        )
        pools["serve"] = _pool(
            "serve",
            gpu,
            replicas,
            tp,
            pp,
            dp_engine,
            ep,
            dcp,
            pcp,
            mem,
            n,
            pol,
            c,
            spec,
            connector,
            None,
            flagset,
            batch=ds["sessions_per_engine"] / dp_engine,
        )
        pools["serve"]["required_replicas"] = required
        pools["serve"]["sessions_per_replica"] = s_engine
        if required and required > replicas:
            warnings.append(
                f"traffic needs {required} engine(s) of {engine_gpus} GPUs at target utilization {util_t}; "
                f"the hardware has {replicas}"
            )
        main_mem, main_lay, main_ctx = mem, {"tp": tp, "pp": pp, "dp": dp_engine, "ep": ep, "dcp": dcp, "pcp": pcp}, c
        main_lay["replicas"] = replicas

    main_pool = pools["decode"] or pools["serve"]
    c0 = _Ctx(n, gpu, weights, kv_dtype, None)
    mem0 = engine_memory(c0, tp, pp, dp_engine, ep, dcp, pcp, 0, n)
    seed.extend(_seed_notes(n, c0, mem0, weights, kv_dtype, tpot_s, tp, dcp, decode_ctx, long_ctx))

    wb = main_ctx.wb
    out = {
        "model": {
            "id": model["id"],
            "name": n["name"],
            "hf_repo": model.get("hf_repo"),
            "kind": model["kind"],
            "attention": model["attention"],
            "source": model.get("source"),
        },
        "blueprint": n["blueprint"],
        "policy": pol,
        "policy_source": n["policy_source"],
        "hardware": {
            "gpu": gpu["id"],
            "gpu_name": gpu["name"],
            "gpu_link": gpu.get("link"),
            "gpus_per_node": gpn,
            "nodes": nodes,
            "gpus_total": total_gpus,
            "interconnect": n["interconnect"],
            "decode_gpu": n["decode"]["gpu"]["id"] if n["decode"] else None,
            "decode_gpus_per_node": n["decode"]["gpus_per_node"] if n["decode"] else None,
            "decode_nodes": n["decode"]["nodes"] if n["decode"] else None,
        },
        "weights": {
            "precision": weights,
            "total_gib": _r(wb["total"] / GIB, 3),
            "experts_gib": _r(wb["experts"] / GIB, 3),
            "vision_gib": _r(wb["vision"] / GIB, 3),
            "speculative_gib": _r(wb["speculative"] / GIB, 3),
        },
        "memory": {
            "weights_gib_per_gpu": main_mem["weights_gib_per_gpu"],
            "kv_pool_gib_per_gpu": main_mem["kv_pool_gib_per_gpu"],
            "overhead_gib_per_gpu": main_mem["overhead_gib_per_gpu"],
            "budget_gib_per_gpu": main_mem["budget_gib_per_gpu"],
            "gpu_memory_gib": main_mem["gpu_memory_gib"],
            "gpu_memory_utilization": n["gpu_memory_utilization"],
            "kv_cache_memory_bytes": n["kv_cache_memory_bytes"],
        },
        "kv": {
            "dtype": main_ctx.kv_dtype,
            "element_bytes": main_ctx.kv_bytes,
            "bytes_per_token": _num(sz.kv_bytes_per_token(model, main_ctx.kv_bytes)),
            "bytes_per_token_per_gpu": _num(main_mem["kv_bytes_per_token_per_gpu"]),
            "kv_heads_per_gpu": sz.kv_heads_per_rank(model, main_lay["tp"]),
            "kv_replication": _replication(model, main_lay["tp"]),
            "state_bytes_per_seq": _num(sz.gdn_state_bytes_per_seq(model, 1, 1, main_ctx.num_spec)),
            "state_bytes_per_seq_per_gpu": _num(main_mem["state_bytes_per_seq_per_gpu"]),
            "block_size": main_mem["geom"]["block_size"],
            "block_size_no_spec": main_mem["block_size_no_spec"],
            "page_bytes": int(main_mem["geom"]["page_bytes"]),
            "blocks": main_mem["blocks"],
            "tokens": main_mem["tokens"],
            "reported_tokens": main_mem["reported_tokens"],
            "max_concurrency": main_mem["max_concurrency"],
            "scope": "per engine (one vLLM instance: TP x PP x PCP x DP GPUs)",
        },
        "layout": {
            "tp": main_lay["tp"],
            "pp": main_lay["pp"],
            "dp": main_lay["dp"] * main_lay["replicas"] if disagg else dp_total,
            "ep": main_lay["ep"],
            "dcp": main_lay["dcp"],
            "pcp": main_lay["pcp"] if not disagg else pools["prefill"]["pcp"],
            "dp_per_engine": main_lay["dp"],
            "replicas": main_lay["replicas"],
            "gpus_per_replica": main_lay["tp"] * main_lay["pp"] * main_lay["pcp"] * main_lay["dp"],
        },
        "disaggregated": disagg,
        "pools": pools,
        "speculative": spec,
        "kv_connector": connector,
        "kv_offload": {"tier": pol["kv_offload"], "gib_per_engine": pol["kv_offload_gib"]}
        if pol["kv_offload"] != "none"
        else None,
        "engine_args": main_pool["engine_args"],
        "autoscaling": {
            "scale_to_zero": pol["scale_to_zero"],
            "min_replicas": 0 if pol["scale_to_zero"] else min(pol["min_replicas"], main_pool["replicas"]),
            "max_replicas": main_pool["replicas"],
            "target_utilization": pol["target_utilization"],
        },
        "vllm_version": n["vllm_version"],
        "traffic": dict(traffic, arrival_rate_rps=_r(lam, 3), concurrent_sessions=sessions),
        "slo": slo,
        "efficiency": {"prefill_mfu": mfu, "decode_mbu": mbu, "target_utilization": util_t},
        "estimates": {
            "prefill_flops_per_token": _r(pr["flops_per_token"] / 1e9, 3),
            "prefill_peak": pr["peak_kind"],
            "prefill_tokens_per_s_per_gpu": _r(pr["tokens_per_s"] / engine_gpus, 0),
            "prefill_requests_per_s_per_gpu": _r(pr["requests_per_s"] / engine_gpus, 2),
            "decode_sessions_per_gpu_at_tpot": _r(ds["sessions_per_engine"] / engine_gpus, 1),
            "decode_sessions_per_engine": s_engine,
            "decode_bytes_per_session_step_gpu": int(ds["per_seq_bytes_per_gpu"]),
            "decode_weight_bytes_per_step_gpu": int(ds["weights_read_bytes_per_gpu"]),
            "tpot_min_ms": _r(ds["min_tpot_s"] * 1000, 2),
            "ttft_mean_ms": _r(ttft_mean_s * 1000, 1),
            "ttft_p95_prefill_ms": _r(ttft_p95_s * 1000, 1),
            "e2e_s": _r(e2e, 3),
        },
        "seed_comparison": seed,
        "decisions": list(dec),
        "warnings": warnings,
    }
    return out


# --------------------------------------------------------------------------- helpers


def _replication(model: dict, tp: int) -> int:
    if model["attention"] == "mla":
        return tp
    kv = model["num_key_value_heads"]
    return max(1, tp // kv) if tp > kv else 1


def _try_layout(c: _Ctx, gpn: int, nodes: int) -> dict | None:
    try:
        return choose_layout(c, gpn, nodes, _Decisions(), "probe")
    except PlanError:
        return None


def _ngram_spec() -> dict:
    return {
        "method": "ngram",
        "model": None,
        "num_speculative_tokens": 4,
        "prompt_lookup_max": 4,
        "prompt_lookup_min": 2,
    }


def spec_name(spec: dict | None) -> str:
    return spec["method"] if spec else "off"


def _choose_speculative(model: dict, pol: dict, dec: _Decisions) -> dict | None:
    p = pol["speculative"]
    mtp = {"method": model.get("mtp_method"), "model": None, "num_speculative_tokens": 2}
    eagle = {"method": "eagle3", "model": model.get("eagle3_draft"), "num_speculative_tokens": 3}
    if p == "off":
        dec.add("speculative decoding", "off", "policy speculative: off")
        return None
    if p == "mtp":
        if not model.get("mtp_method"):
            raise PlanError(
                "policy.speculative", f"{model['id']} has no trained MTP head; use eagle3 (with a draft), ngram or off"
            )
        dec.add("speculative decoding", mtp["method"], "policy speculative: mtp")
        return mtp
    if p == "eagle3":
        if not model.get("eagle3_draft"):
            raise PlanError(
                "policy.speculative", f"no EAGLE-3 draft for {model['id']} in the catalog; use mtp, ngram or off"
            )
        dec.add("speculative decoding", "eagle3", f"policy speculative: eagle3 (draft {eagle['model']})")
        return eagle
    if p == "ngram":
        dec.add("speculative decoding", "ngram", "policy speculative: ngram")
        return _ngram_spec()
    # auto: seed section 6 table
    if pol["tool_calling_heavy"]:
        dec.add(
            "speculative decoding",
            "off",
            "heavy tool-calling traffic: constrained decoding collapses acceptance (seed section 6: disable or test)",
        )
        return None
    if pol["code_completion"]:
        dec.add(
            "speculative decoding",
            "ngram",
            "code completion: repetitive structure gives n-gram/prompt-lookup a high hit rate, no draft to "
            "host (seed section 6)",
        )
        return _ngram_spec()
    if model["kind"] == "moe" and model.get("mtp_method"):
        dec.add(
            "speculative decoding",
            mtp["method"],
            "MoE model with a trained MTP head: native MTP (seed section 6, MoE flagship row)",
        )
        return mtp
    if model.get("eagle3_draft"):
        dec.add(
            "speculative decoding",
            "eagle3",
            f"dense model with a public EAGLE-3 draft ({eagle['model']}); seed recommends EAGLE 3.x",
        )
        return eagle
    if model.get("mtp_method"):
        dec.add(
            "speculative decoding",
            mtp["method"],
            "seed recommends EAGLE 3.1 for dense Qwen3.6, but the catalog has no EAGLE draft for it; the "
            "checkpoint ships a "
            "trained MTP head, which the seed calls the natural choice for MTP-trained models",
        )
        return mtp
    dec.add(
        "speculative decoding",
        "off",
        "no MTP head or EAGLE draft in the catalog; n-gram only pays on repetitive text (set speculative: ngram)",
    )
    return None


def _choose_dcp(model: dict, pol: dict, tp: int, decode_ctx: int, long_ctx: int, dec: _Decisions) -> int:
    if pol["dcp"] != "auto":
        d = pol["dcp"]
        if tp % d:
            raise PlanError(
                "policy.dcp",
                f"DCP={d} must divide TP={tp} (DCP reuses the TP ranks); valid: "
                f"{', '.join(str(x) for x in _divisors(tp))}",
            )
        dec.add("decode context parallel", d, "policy dcp")
        return d
    if decode_ctx < long_ctx:
        dec.add(
            "decode context parallel",
            1,
            f"p95 decode context {decode_ctx} tokens < {long_ctx} (seed: DCP for >=128k decode)",
        )
        return 1
    if tp < 2:
        dec.add(
            "decode context parallel",
            1,
            f"long decode ({decode_ctx} tokens) wants DCP, but DCP reuses TP ranks and needs TP >= 2 (TP % "
            "DCP == 0); TP=1 here",
        )
        return 1
    d = tp if model["attention"] == "mla" else max(2, tp // model["num_key_value_heads"])
    while tp % d:
        d -= 1
    dec.add(
        "decode context parallel",
        d,
        f"long decode ({decode_ctx} tokens): DCP shards KV over the existing TP={tp} ranks, no new GPUs"
        + (
            f"; TP={tp} over {model['num_key_value_heads']} KV heads replicates KV "
            f"{tp // model['num_key_value_heads']}x, DCP={d} removes it"
            if model["attention"] != "mla" and tp > model["num_key_value_heads"]
            else ""
        )
        + " (seed section 3)",
    )
    return d


def _choose_pcp(
    c: _Ctx, n: dict, pol: dict, tp: int, pp: int, dp_engine: int, gpn: int, total: int, long_ctx: int, dec: _Decisions
):
    p95 = n["traffic"]["prompt_tokens_p95"]
    if pol["pcp"] != "auto":
        p = pol["pcp"]
        if tp * p > gpn or tp * pp * p > total:
            raise PlanError("policy.pcp", f"PCP={p} needs TP x PCP = {tp * p} GPUs in a node; nodes have {gpn}")
        if p > 1 and dp_engine > 1:
            dec.add(
                "data parallel",
                1,
                f"policy pcp={p}: vLLM 0.33 rejects PCP with DP > 1, so the engine drops DP={dp_engine}",
            )
            dp_engine = 1
        dec.add("prefill context parallel", p, "policy pcp")
        return p, dp_engine
    if p95 < long_ctx:
        dec.add("prefill context parallel", 1, f"p95 prompt {p95} tokens < {long_ctx} (seed: PCP for >=128k prefill)")
        return 1, dp_engine
    if dp_engine > 1:
        dec.add(
            "prefill context parallel",
            1,
            f"long prefill ({p95} tokens) wants PCP, but vLLM 0.33 rejects PCP together with DP > 1 (DP={dp_engine}); "
            "set policy pcp: 2 to trade DP for PCP",
        )
        return 1, dp_engine
    if tp * 2 > gpn or tp * pp * 2 > total:
        dec.add(
            "prefill context parallel",
            1,
            f"long prefill wants PCP=2, but TP x PCP = {tp * 2} exceeds the {gpn} GPUs of a node",
        )
        return 1, dp_engine
    # smallest power-of-two PCP whose prefill estimate meets the TTFT SLO, within a node
    p = 2
    while True:
        t = prefill_rate(c, tp * pp * p, p95, pol["prefill_mfu"])
        ttft = p95 / t["tokens_per_s"] * 1000
        if ttft <= n["slo"]["ttft_p95_ms"] or tp * p * 2 > gpn or tp * pp * p * 2 > total:
            break
        p *= 2
    dec.add(
        "prefill context parallel",
        p,
        f"long prefill ({p95} tokens): PCP={p} splits prompt attention over TP x PCP = {tp * p} GPUs, "
        f"est. {_r(ttft, 0)} ms at MFU {pol['prefill_mfu']} vs TTFT SLO {n['slo']['ttft_p95_ms']} ms (seed section 3)",
    )
    return p, dp_engine


def _kv_decisions(c: _Ctx, n: dict, mem: dict, tp: int, dcp: int, spec, dec: _Decisions) -> None:
    model = c.model
    geom = mem["geom"]
    per_tok = sz.kv_bytes_per_token(model, c.kv_bytes)
    rep = _replication(model, tp)
    why = f"{model['full_attention_layers']} attention layers x " + (
        f"({model['mla']['kv_lora_rank']}+{model['mla']['qk_rope_head_dim']}) latent"
        if model["attention"] == "mla"
        else f"2 x {model['num_key_value_heads']} KV heads x {model['head_dim']}"
    )
    why += f" x {c.kv_bytes} B"
    if rep > 1:
        why += f"; TP={tp} replicates KV {rep}x per GPU"
    if dcp > 1:
        why += f"; DCP={dcp} shards tokens"
    dec.add("kv bytes per token", int(per_tok), why)
    if model["attention"] == "hybrid_gdn":
        st = sz.gdn_state_bytes_per_seq(model, 1, 1, c.num_spec)
        dec.add(
            "kv block size",
            geom["block_size"],
            f"hybrid GDN: vLLM raises the attention block to hold one {int(geom['state_bytes_per_layer'])} "
            "B GDN layer state per GPU "
            f"(padding {_r(geom['state_padding_pct'], 2)} %); state per sequence {_r(st / 1e6, 1)} MB"
            + (
                f"; {c.num_spec} speculative tokens add conv rows (block {mem['block_size_no_spec']} without)"
                if c.num_spec
                else ""
            )
            + "; vLLM derives it itself",
        )
    else:
        dec.add("kv block size", geom["block_size"], "vLLM default for this attention type")
    dec.add(
        "kv pool per GPU",
        f"{mem['kv_pool_gib_per_gpu']} GiB",
        (
            f"--kv-cache-memory-bytes={n['kv_cache_memory_bytes']}"
            if n["kv_cache_memory_bytes"] is not None
            else f"{mem['gpu_memory_gib']} GiB x {n['gpu_memory_utilization']} - "
            f"{mem['weights_gib_per_gpu']} GiB weights - {mem['overhead_gib_per_gpu']} GiB activations/graphs/NCCL"
        )
        + f" -> {mem['blocks']} blocks of {geom['block_size']} tokens",
    )


def _check_slo(c: _Ctx, n: dict, gpn: int, nodes: int) -> None:
    """Errors only for SLOs no size can meet: bounds at 100 % of peak bandwidth / FLOPs and the widest engine."""
    model = c.model
    tps = [t for t in _divisors(gpn) if valid_tp(model, t)[0]]
    best_tpot = None
    for pp in range(1, nodes + 1):
        for tp in tps:
            w = c.wb["total"] / (tp * pp)
            if c.kv_pool(w, tp * pp) <= 0:
                continue
            ep = tp if model["kind"] == "moe" else 1
            ds = decode_sessions(c, tp, pp, 1, ep, 1, 1.0, 1.0, n["traffic"]["prompt_tokens_mean"])
            best_tpot = ds["min_tpot_s"] if best_tpot is None else min(best_tpot, ds["min_tpot_s"])
    tpot = n["slo"]["tpot_p95_ms"]
    if best_tpot is not None and best_tpot * 1000 > tpot:
        raise PlanError(
            "slo.tpot_p95_ms",
            f"{tpot} ms cannot be met: one sequence needs at least {_r(best_tpot * 1000, 2)} ms per token "
            f"on {c.gpu['id']} "
            f"(its weight shard read once per step at 100 % of {c.gpu['bandwidth_tb_s']} TB/s, widest layout); "
            f"use >= {math.ceil(best_tpot * 1000)} ms, a faster GPU or smaller weights",
        )
    p95 = n["traffic"]["prompt_tokens_p95"]
    example = (
        f" (the {n['blueprint']} blueprint's example traffic; give traffic.prompt_tokens_p95 to override)"
        if "prompt_tokens_p95" in n["traffic_defaulted"] and "prompt_tokens_mean" in n["traffic_defaulted"]
        else ""
    )
    allg = gpn * nodes
    pr = prefill_rate(c, allg, p95, 1.0)
    t = p95 / pr["tokens_per_s"] * 1000
    if t > n["slo"]["ttft_p95_ms"]:
        raise PlanError(
            "slo.ttft_p95_ms",
            f"{n['slo']['ttft_p95_ms']} ms cannot be met: prefilling a p95 prompt of {p95} tokens{example} "
            f"takes at least {_r(t, 1)} ms "
            f"even on all {allg} GPUs at 100 % of {pr['peak_kind']} peak; use >= {math.ceil(t)} ms, shorter "
            "prompts or more/faster GPUs",
        )


def _choose_disagg(c, n, pol, replicas, sessions, lam, pr, engine_gpus, s_engine, dp_engine):
    mode = pol["disaggregation"]
    if mode == "never":
        return False, "policy disaggregation: never"
    has_decode_hw = n["decode"] is not None
    if mode == "always":
        if replicas < 2 and not has_decode_hw:
            raise PlanError(
                "policy.disaggregation",
                f"always needs at least two engines (one prefill, one decode); the hardware holds {replicas}",
            )
        return True, "policy disaggregation: always"
    if n["nodes"] == 1 and not has_decode_hw:
        return False, "single node: the prefill-to-decode hop costs more than it saves (seed section 4)"
    if n["interconnect"] != "rdma":
        return False, (
            f"interconnect {n['interconnect']}: no RDMA NICs between nodes, so KV transfer between pools would run "
            "over TCP and cost more than it saves (seed section 4: NIXL wants RDMA/NVLink)"
        )
    if sessions < pol["pd_min_sessions"]:
        return (
            False,
            f"{sessions} concurrent sessions < {pol['pd_min_sessions']}: below ~100 sessions the transfer "
            "hop costs more than it saves (seed 7.6)",
        )
    if replicas < 2 and not has_decode_hw:
        return False, "fewer than two engines: two pools of one are worse than one pool of two (seed section 4)"
    # GPU-seconds per request on each side, and their cost (seed section 4 rule, sizing section 6)
    g_p = engine_gpus / pr["requests_per_s"]
    g_d = engine_gpus * (sessions / max(lam, 1e-9)) / max(s_engine, 1e-9)
    cost_p = c.gpu["cost_class"]
    cost_d = n["decode"]["gpu"]["cost_class"] if has_decode_hw else cost_p
    u = pol["target_utilization"]
    interference = 0.85
    agg = cost_p * (g_p + g_d) / (u * interference)
    dis = cost_p * g_p / u + cost_d * g_d / u
    ratio = g_p / max(g_d, 1e-12)
    why = (
        f"prefill:decode GPU-seconds {_r(ratio, 3)} vs decode:prefill GPU cost {_r(cost_d / cost_p, 2)}; "
        f"cost/request aggregated {_r(agg, 3)} (x1/{interference} interference) vs disaggregated {_r(dis, 3)}"
    )
    if dis < agg:
        return True, "disaggregate: " + why
    return False, "stay aggregated: " + why


def _choose_connector(n, pol, disagg, dec):
    k = pol["kv_connector"]
    off = pol["kv_offload"] != "none"
    shared = pol["shared_kv_cache"]
    transport = {"nvlink": "ucx-nvlink", "rdma": "ucx-rdma", "ethernet": "ucx-tcp"}[n["interconnect"]]
    if k == "none":
        dec.add("kv connector", None, "policy kv_connector: none")
        return None
    if k == "mooncake":
        dec.add(
            "kv connector", "MooncakeConnector", "policy kv_connector: mooncake (cluster-scale shared KV pool, RDMA)"
        )
        return {"name": "MooncakeConnector", "role": "kv_both", "transport": "rdma", "connectors": None}
    lm = {
        "name": "LMCacheConnectorV1",
        "role": "kv_both",
        "transport": f"lmcache-{pol['kv_offload'] if off else 'local'}" + ("+remote" if shared else ""),
    }
    nixl = {"name": "NixlConnector", "role": "kv_both", "transport": transport}
    if k == "lmcache" and not disagg:
        dec.add("kv connector", "LMCacheConnectorV1", "policy kv_connector: lmcache")
        return dict(lm, connectors=None)
    if disagg:
        if off or shared or k == "lmcache":
            dec.add(
                "kv connector",
                "MultiConnector(NixlConnector, LMCacheConnectorV1)",
                f"P/D transfer over NIXL ({transport}) plus LMCache tiering/sharing (seed section 4 table)",
            )
            return {"name": "MultiConnector", "role": "kv_both", "transport": transport, "connectors": [nixl, lm]}
        dec.add(
            "kv connector",
            "NixlConnector",
            f"P/D in one cluster with {n['interconnect']}: NIXL over UCX (seed section 4 table)",
        )
        return dict(nixl, connectors=None)
    if off or shared:
        dec.add(
            "kv connector",
            "LMCacheConnectorV1",
            f"KV tiering HBM->{pol['kv_offload'].upper() if off else 'remote'}"
            + (" with a shared prefix cache" if shared else "")
            + " (seed section 4/5: LMCache)",
        )
        return dict(lm, connectors=None)
    dec.add("kv connector", None, "aggregated serving without KV offload: no connector")
    return None


def _kv_transfer_json(conn: dict | None) -> str | None:
    if not conn:
        return None

    def one(x):
        return {"kv_connector": x["name"], "kv_role": x["role"]}

    if conn["name"] == "MultiConnector":
        cfg = {
            "kv_connector": "MultiConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": {"connectors": [one(x) for x in conn["connectors"]]},
        }
    else:
        cfg = one(conn)
    if conn["name"] == "NixlConnector":
        cfg["kv_connector_extra_config"] = {"backends": ["UCX"]}
    return json.dumps(cfg, separators=(",", ":"), sort_keys=True)


def _spec_json(spec: dict) -> str:
    cfg = {k: v for k, v in spec.items() if v is not None}
    return json.dumps(cfg, separators=(",", ":"), sort_keys=True)


def engine_args(
    role, tp, pp, dp, ep, dcp, pcp, max_num_seqs, n, pol, c, spec, connector, block_size, flagset
) -> list[str]:
    a = [f"--tensor-parallel-size={tp}"]
    if pp > 1:
        a.append(f"--pipeline-parallel-size={pp}")
    if dp > 1:
        a.append(f"--data-parallel-size={dp}")
    if ep > 1:
        a.append("--enable-expert-parallel")
        if pol["eplb"]:
            a.append("--enable-eplb")
    if dcp > 1 and role in ("decode", "serve"):
        a.append(f"--decode-context-parallel-size={dcp}")
    if pcp > 1 and role in ("prefill", "serve"):
        a.append(f"--prefill-context-parallel-size={pcp}")
    a.append(f"--max-model-len={n['max_model_len']}")
    if n["kv_cache_memory_bytes"] is not None:
        a.append(f"--kv-cache-memory-bytes={n['kv_cache_memory_bytes']}")
    else:
        a.append(f"--gpu-memory-utilization={n['gpu_memory_utilization']}")
    if c.kv_dtype != "auto":
        a.append(f"--kv-cache-dtype={c.kv_dtype}")
    if block_size:
        a.append(f"--block-size={block_size}")
    a.append("--enable-prefix-caching" if pol["prefix_caching"] else "--disable-prefix-caching")
    a.append("--enable-chunked-prefill" if pol["chunked_prefill"] else "--disable-chunked-prefill")
    if max_num_seqs:
        a.append(f"--max-num-seqs={max_num_seqs}")
    if pol["max_num_batched_tokens"]:
        a.append(f"--max-num-batched-tokens={pol['max_num_batched_tokens']}")
    if not n["quantized_checkpoint"] and c.weights != c.model.get("native_dtype", "bf16"):
        if c.weights != "fp8":
            raise PlanError(
                "quantized_checkpoint", "only fp8 can be quantized online by vLLM; provide an NVFP4 checkpoint"
            )
        a.append("--quantization=fp8")
    if pol["language_model_only"] and c.model.get("vision_params_b"):
        a.append("--language-model-only")
    kvt = _kv_transfer_json(connector)
    if kvt:
        a.append(f"--kv-transfer-config={kvt}")
    if spec and role in ("decode", "serve"):
        a.append(f"--speculative-config={_spec_json(spec)}")
    allowed = flagset["flags"]
    for arg in a:
        flag = arg.split("=", 1)[0]
        if flag not in allowed:
            raise AssertionError(f"planner bug: {flag} is not in vllm_flags_{flagset['version']}")
    return a


def _max_num_seqs(pol, mem, n, dcp, batch=None):
    """max_num_seqs per DP rank: the policy's value, else the batch the TPOT target allows (decode/serve) or
    vLLM's 256 (prefill); always capped at what the KV pool holds at the mean context, so hybrid models never
    exceed their Mamba blocks (vLLM refuses to start otherwise)."""
    t = n["traffic"]
    cap = sz.max_sequences(mem["blocks"], t["prompt_tokens_mean"] + t["output_tokens_mean"], mem["geom"], dcp)
    want = pol["max_num_seqs"] or (int(batch) if batch else 256)
    return max(1, min(want, cap)), cap


def _pool(
    role, gpu, replicas, tp, pp, dp, ep, dcp, pcp, mem, n, pol, c, spec, connector, block_size, flagset, batch=None
) -> dict:
    mns, cap = _max_num_seqs(pol, mem, n, dcp if role != "prefill" else 1, batch if role != "prefill" else None)
    return {
        "role": role,
        "gpu": gpu["id"],
        "replicas": replicas,
        "gpus_per_replica": tp * pp * pcp * dp,
        "gpus": replicas * tp * pp * pcp * dp,
        "tp": tp,
        "pp": pp,
        "dp": dp,
        "ep": ep,
        "dcp": dcp if role != "prefill" else 1,
        "pcp": pcp if role != "decode" else 1,
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
        "engine_args": engine_args(
            role,
            tp,
            pp,
            dp,
            ep,
            dcp,
            pcp,
            mns,
            n,
            pol,
            c,
            spec if role != "prefill" else None,
            connector,
            block_size,
            flagset,
        ),
    }


def _best_split(need_gpus: int, avail_gpus: int, tp: int, gpn: int, moe: bool) -> tuple[int, int]:
    """(replicas, dp_per_engine) covering ``need_gpus`` within ``avail_gpus``; MoE engines prefer whole-node
    DP+EP groups unless that wastes a node or more (seed section 3: EP+DP within a node)."""
    best = None
    for dp in _divisors(max(1, gpn // tp)) if moe else [1]:
        eng = tp * dp
        if eng > max(avail_gpus, tp):
            continue
        reps = min(math.ceil(need_gpus / eng), max(1, avail_gpus // eng))
        used = reps * eng
        key = (min(used, need_gpus), -(max(0, used - need_gpus) // gpn), dp)
        if best is None or key > best[0]:
            best = (key, reps, dp)
    return best[1], best[2]


def _size_disagg(c, n, pol, dec, warnings, tp, pp, pcp, dcp, lam, sessions, ctx_avg, cap_ctx, tpot_s, connector):
    model, gpu = c.model, c.gpu
    moe = model["kind"] == "moe"
    u = pol["target_utilization"]
    flagset = data.vllm_flags(n["vllm_version"])
    gpn, nodes = n["gpus_per_node"], n["nodes"]
    # prefill pool on the main hardware (no speculative heads)
    cp = _Ctx(n, gpu, c.weights, c.kv_dtype, None)
    pr1 = prefill_rate(cp, 1, n["traffic"]["prompt_tokens_mean"], pol["prefill_mfu"])
    need_p = max(1, math.ceil(lam / (pr1["requests_per_s"] * u)))
    # decode pool: its own GPU type or the same hardware
    if n["decode"]:
        dgpu, dgpn, dnodes = n["decode"]["gpu"], n["decode"]["gpus_per_node"], n["decode"]["nodes"]
        kvd = c.kv_dtype if (c.kv_dtype != "nvfp4" or dgpu.get("fp4_native")) else "fp8"
        dweights = c.weights if _gpu_supports(dgpu, c.weights) else "fp8"
        cd = _Ctx(n, dgpu, dweights, kvd, c.spec)
        dl = choose_layout(cd, dgpn, dnodes, dec, "decode")
        if dl.get("below_headroom"):
            warnings.append("decode layout " + dl["below_headroom"])
        dtp, dpp = dl["tp"], dl["pp"]
        d_avail = dgpn * dnodes
        p_avail = gpn * nodes
    else:
        dgpu, dgpn, cd, dtp, dpp = gpu, gpn, c, tp, pp
        d_avail = p_avail = gpn * nodes
    # decode sessions per GPU at the TPOT target, for an engine of DP ranks (EP group when MoE)
    ddcp = dcp if dtp % max(dcp, 1) == 0 else 1

    def decode_rate(ddp):
        dep = dtp * ddp if moe and dtp * ddp > 1 else 1
        mem = engine_memory(cd, dtp, dpp, ddp, dep, ddcp, 1, cd.num_spec, n)
        ds = decode_sessions(cd, dtp, dpp, ddp, dep, ddcp, tpot_s, pol["decode_mbu"], ctx_avg)
        kv_cap = sz.max_sequences(mem["blocks"], cap_ctx, mem["geom"], ddcp) * ddp
        seq_cap = (pol["max_num_seqs"] or 10**9) * ddp
        s_eng = min(ds["sessions_per_engine"], kv_cap, seq_cap)
        return {"dp": ddp, "ep": dep, "mem": mem, "ds": ds, "kv_cap": kv_cap, "per_gpu": s_eng / (dtp * dpp * ddp)}

    dps = [d for d in _divisors(max(1, dgpn // dtp)) if moe] if dpp == 1 else []
    rates = {d: decode_rate(d) for d in (dps or [1])}
    full = rates[max(rates)]  # the whole-node EP group the seed prefers
    per_gpu, kv_cap = full["per_gpu"], full["kv_cap"]
    if per_gpu <= 0:
        raise PlanError(
            "slo.tpot_p95_ms", f"no decode engine on {dgpu['id']} meets {n['slo']['tpot_p95_ms']} ms per token"
        )
    need_d = max(1, math.ceil(sessions / (per_gpu * u)))
    dec.add(
        "decode pool (Little's law)",
        f"{need_d} GPUs",
        f"{sessions} sessions / ({_r(per_gpu, 1)} sessions per {dgpu['id']} at TPOT "
        f"{n['slo']['tpot_p95_ms']} ms, MBU {pol['decode_mbu']}"
        f", capped by KV {kv_cap} and max_num_seqs) / target utilization {u}",
    )
    dec.add(
        "prefill pool (Little's law)",
        f"{need_p} GPUs",
        f"{_r(lam, 1)} req/s x {n['traffic']['prompt_tokens_mean']} tokens / ({_r(pr1['tokens_per_s'], 0)} "
        f"tok/s per {gpu['id']} at MFU {pol['prefill_mfu']} "
        f"of {pr1['peak_kind']} peak) / target utilization {u}",
    )
    # fit pools to the hardware
    if n["decode"]:
        p_gpus, d_gpus = min(need_p, p_avail), min(need_d, d_avail)
    elif need_p + need_d <= p_avail:
        p_gpus, d_gpus = need_p, need_d
    else:
        p_gpus = max(tp * pp * pcp, round(p_avail * need_p / (need_p + need_d)))
        d_gpus = max(dtp * dpp, p_avail - p_gpus)
    if p_gpus < need_p or d_gpus < need_d:
        warnings.append(
            f"traffic needs {need_p} prefill + {need_d} decode GPUs; the hardware gives {p_gpus} + {d_gpus} "
            "(pools scaled down)"
        )
    if pcp > 1 or pp > 1:
        p_dp = 1
        p_reps = max(1, p_gpus // (tp * pp * pcp))
    else:
        p_reps, p_dp = _best_split(min(need_p, p_gpus), p_avail if n["decode"] else p_gpus, tp, gpn, moe)
    # decode engines: the DP size whose engines (at their own per-GPU rate) cover the most sessions
    # within the GPUs given, then the fewest GPUs, then the largest EP group
    d_room = d_avail if n["decode"] else d_gpus
    target = max(sessions, 1) / u
    best = None
    for d, r in rates.items():
        eng = dtp * dpp * d
        if eng > max(d_room, dtp * dpp) or r["per_gpu"] <= 0:
            continue
        reps = min(math.ceil(target / (r["per_gpu"] * eng)), max(1, d_room // eng))
        key = (min(reps * eng * r["per_gpu"], target), -reps * eng, d)
        if best is None or key > best[0]:
            best = (key, reps, r)
    d_reps, dr = best[1], best[2]
    d_dp, d_ep, dmem, ds = dr["dp"], dr["ep"], dr["mem"], dr["ds"]
    if sessions <= d_reps * dtp * dpp * d_dp * dr["per_gpu"] < target:
        warnings.append(
            f"the decode pool holds {int(d_reps * dtp * dpp * d_dp * dr['per_gpu'])} sessions at the TPOT SLO: "
            f"{sessions} sessions run it above the target utilization {u}"
        )
    if d_reps * dtp * dpp * d_dp * dr["per_gpu"] < sessions:
        warnings.append(
            f"the decode pool holds {int(d_reps * dtp * dpp * d_dp * dr['per_gpu'])} sessions at the TPOT SLO; "
            f"traffic has {sessions}"
        )
    p_ep = tp * pcp * p_dp if moe and tp * pcp * p_dp > 1 else 1
    pmem = engine_memory(cp, tp, pp, p_dp, p_ep, 1, pcp, 0, n)
    # NIXL moves KV block by block: both sides need the same block size
    bs = None
    if pmem["geom"]["block_size"] != dmem["geom"]["block_size"]:
        bs = max(pmem["geom"]["block_size"], dmem["geom"]["block_size"])
        dec.add(
            "kv block size (P/D)",
            bs,
            f"prefill ({pmem['geom']['block_size']}) and decode ({dmem['geom']['block_size']}) pools "
            "differ; KV transfer needs one block size",
        )
    pools = {
        "prefill": _pool(
            "prefill", gpu, p_reps, tp, pp, p_dp, p_ep, 1, pcp, pmem, n, pol, cp, None, connector, bs, flagset
        ),
        "decode": _pool(
            "decode",
            dgpu,
            d_reps,
            dtp,
            dpp,
            d_dp,
            d_ep,
            ddcp,
            1,
            dmem,
            n,
            pol,
            cd,
            cd.spec,
            connector,
            bs,
            flagset,
            batch=ds["sessions_per_engine"] / d_dp,
        ),
        "serve": None,
    }
    for role, pl, mm in (("prefill", pools["prefill"], pmem), ("decode", pools["decode"], dmem)):
        dec.add(
            f"{role} pool",
            f"{pl['replicas']} x {pl['gpus_per_replica']} {pl['gpu']}",
            f"TP={pl['tp']} PP={pl['pp']} DP={pl['dp']} EP={pl['ep']} DCP={pl['dcp']} PCP={pl['pcp']}; "
            f"{mm['weights_gib_per_gpu']} GiB weights + {mm['overhead_gib_per_gpu']} GiB overhead leave "
            f"{mm['kv_pool_gib_per_gpu']} GiB/GPU for KV ({mm['blocks']} blocks of {mm['geom']['block_size']} tokens)",
        )
    pools["prefill"]["required_gpus"] = need_p
    pools["decode"]["required_gpus"] = need_d
    pools["decode"]["sessions_per_gpu"] = _r(dr["per_gpu"], 1)
    pools["prefill"]["requests_per_s_per_gpu"] = _r(pr1["requests_per_s"], 2)
    lay = {"tp": dtp, "pp": dpp, "dp": d_dp, "ep": d_ep, "dcp": ddcp, "pcp": 1, "replicas": d_reps}
    ratio = need_d / need_p if need_p else None
    return pools, dmem, lay, cd, ratio


def _seed_notes(n, c, mem, weights, kv_dtype, tpot_s, tp, dcp, decode_ctx, long_ctx) -> list[dict]:
    """Where the seed's figures and vLLM's arithmetic part ways for this plan (figures without speculative heads)."""
    out = []
    mid, gid = c.model["id"], c.gpu["id"]
    pol = n["policy"]
    wgb = c.wb["total"] / 1e9
    claims = {
        ("Qwen3.6-27B", "fp8"): ("~27 GB FP8 weights", 27.0),
        ("Qwen3.5-35B-A3B", "bf16"): ("~70 GB BF16 weights", 70.0),
        ("Qwen3.5-35B-A3B", "fp8"): ("~37 GB FP8 weights (seed 7.6: 96 - 37 - 4 = 55)", 37.0),
        ("Qwen3.5-397B-A17B", "fp8"): ("~397 GB FP8 weights", 397.0),
    }
    if (mid, weights) in claims:
        claim, val = claims[(mid, weights)]
        out.append(
            {
                "claim": claim,
                "seed": f"{val} GB",
                "plan": f"{_r(wgb, 1)} GB ({_r(c.wb['total'] / GIB, 2)} GiB)",
                "note": "embedding/lm_head stay BF16 in quantized checkpoints; vision tower loaded unless "
                "--language-model-only",
            }
        )
    geom = mem["geom"]
    if mid == "Qwen3.6-27B" and gid == "rtx-pro-6000" and kv_dtype == "fp8" and tp == 1:
        b65 = sz.num_blocks(65e9, geom)
        out.append(
            {
                "claim": "96 GB - 27 GB - 4 GB = 65 GB of KV -> ~2 M FP8 tokens (seed 7.6)",
                "seed": "65 GB, ~2,000,000 tokens",
                "plan": f"{mem['kv_pool_gib_per_gpu']} GiB, {mem['tokens']} tokens in blocks "
                f"({mem['reported_tokens']} as vLLM logs it)",
                "note": f"vLLM budgets {n['gpu_memory_utilization']} of {mem['gpu_memory_gib']} GiB and "
                "measures ~7.3 GiB of "
                "activations/graphs; the seed assumes 100 % use",
            }
        )
        for ctx, seed_n in ((32768, 50), (131072, 15)):
            if ctx <= n["max_model_len"]:
                got = sz.max_sequences(mem["blocks"], ctx, geom, dcp)
                out.append(
                    {
                        "claim": f"~{seed_n} sessions at {ctx // 1024}k (seed 7.6)",
                        "seed": seed_n,
                        "plan": got,
                        "note": "with the seed's 65 GB pool vLLM's block math gives "
                        f"{sz.max_sequences(b65, ctx, geom, 1)}; "
                        f"each sequence also holds {geom['gdn_groups']} GDN state blocks",
                    }
                )
        out.append(
            {
                "claim": "~4 sessions at 512k with FP4 KV (seed 7.6)",
                "seed": 4,
                "plan": "not plannable: 524288 tokens exceed the 262144-token native window",
                "note": f"FP8 KV already gives {sz.max_sequences(b65, 524288, geom, 1)} in the seed's 65 GB "
                "(block math); "
                "NVFP4 KV would give ~6-7; '~4 with FP4' matches a 1M context",
            }
        )
    if mid == "Qwen3.5-35B-A3B" and gid == "rtx-pro-6000" and weights == "fp8":
        out.append(
            {
                "claim": "35B-A3B at FP8 leaves ~55 GB for KV on a 96 GB card (seed 7.6)",
                "seed": "55 GB",
                "plan": f"{_r(mem['kv_pool_bytes'] / 1e9, 1)} GB ({mem['kv_pool_gib_per_gpu']} GiB)",
                "note": "vLLM's budget is 0.92 of memory and MoE activations take ~8 GiB, not 4 GB",
            }
        )
    if mid == "Qwen3.5-35B-A3B":
        h100 = dict(data.gpus()["h100"], id="h100")
        ch = _Ctx(n, h100, "fp8", "fp8", None)
        f800 = sz.prefill_flops_per_token(c.model, 800)
        rate = prefill_rate(ch, 1, 800, pol["prefill_mfu"])["requests_per_s"]
        implied = 30 * 800 * f800 / (h100["fp8_tflops"] * 1e12)
        out.append(
            {
                "claim": "one H100 of prefill per ~30 req/s at 800-token prompts (seed section 4)",
                "seed": "30 req/s",
                "plan": f"{_r(rate, 1)} req/s at MFU {pol['prefill_mfu']}",
                "note": f"30 req/s implies MFU {_r(implied, 3)} of FP8 peak ({_r(f800 / 1e9, 2)} "
                "GFLOP/token); measured vLLM "
                "prefill reaches 0.10-0.20",
            }
        )
        l40s = dict(data.gpus()["l40s"], id="l40s")
        cl = _Ctx(n, l40s, "fp8", "fp8", None)
        s45 = decode_sessions(cl, 1, 1, 4, 4, 1, 0.045, pol["decode_mbu"], 900)["sessions_per_engine"] / 4
        sp = decode_sessions(cl, 1, 1, 4, 4, 1, tpot_s, pol["decode_mbu"], 900)["sessions_per_engine"] / 4
        out.append(
            {
                "claim": "one L40S-class decode GPU per ~150 concurrent sessions (seed section 4)",
                "seed": "150 sessions",
                "plan": f"{_r(s45, 0)} at TPOT 45 ms"
                + (f", {_r(sp, 0)} at TPOT {_r(tpot_s * 1000, 0)} ms" if abs(tpot_s - 0.045) > 1e-9 else "")
                + f" (EP group of 4, MBU {pol['decode_mbu']})",
                "note": "holds only for TPOT ~45 ms in an EP group >= 4: each session moves ~129 MB of GDN "
                "state per step; "
                "one L40S alone cannot hold the FP8 weights plus 150 sessions",
            }
        )
    if decode_ctx >= long_ctx and tp < 2:
        out.append(
            {
                "claim": "any Qwen3.5 >=128k decode: add DCP=2, no new GPUs (seed Table 2)",
                "seed": "DCP=2",
                "plan": "DCP=1",
                "note": "DCP reuses TP ranks (TP % DCP == 0); this layout has TP=1",
            }
        )
    return out
