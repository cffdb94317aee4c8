# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Recompute the kernel efficiencies of planner/catalog/performance.yaml from aiconfigurator's measured tables.

Not a test. It needs the installed aiconfigurator_core package data and pandas (the `oracle` extra: make oracle-setup;
nothing is copied into the repository):

    .venv/bin/python tests/unit/planner/oracle/tools/derive_efficiency.py

For every GPU it prints what the catalog records: per GEMM kind the plateau and knee compute efficiency, the grid of
compute efficiency by rows and weight size, the large-shape weight bandwidth efficiency at 8 and 32 rows, the launch
floor of small calls; the fused-MoE fits (launch + roofline; expert parallel, one rank, experts split by TP); paged
decode attention (launch + per-sequence cost + KV bytes); prefill attention at short and long contexts; the MLA decode
block; the Gated DeltaNet state and scan; vLLM's custom all-reduce; NCCL all-gather and reduce-scatter (vLLM's default
expert-parallel exchange).
"""

from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pandas as pd
import yaml

BASE = os.path.join(importlib.util.find_spec("aiconfigurator_core").submodule_search_locations[0], "systems")
BYTES = {"bfloat16": 2, "fp8": 1, "fp8_block": 1, "nvfp4": 0.5625}
GPUS = {
    "h100": ("h100_sxm", "0.24.0"),
    "h200": ("h200_sxm", "0.24.0"),
    "b200": ("b200_sxm", "0.24.0"),
    "l40s": ("l40s", "0.24.0"),
    "rtx-pro-6000": ("rtx_pro_6000_server", "0.24.0"),
    "a100-80gb": ("a100_sxm", "0.14.0"),
}
# expert shapes of the catalog's MoE models: (hidden, moe_intermediate, experts, top-k)
MOE_SHAPES = [
    (2048, 512, 256, 8),  # Qwen3.5-35B-A3B
    (2048, 768, 128, 8),  # Qwen3-30B-A3B
    (4096, 1024, 512, 10),  # Qwen3.5-397B-A17B
    (7168, 2048, 256, 8),  # DeepSeek-V3
    (4096, 1536, 128, 8),  # Qwen3-235B-A22B (oracle/architectures)
    (7168, 2048, 384, 8),  # Kimi-K2 (oracle/architectures)
]


def read(path: str):
    return pd.read_parquet(path) if os.path.exists(path) else None


def peak(spec: dict, dtype: str) -> float | None:
    if dtype == "bfloat16":
        return spec["bfloat16_tc_flops"]
    return spec.get("fp8_tc_flops") if dtype.startswith("fp8") else spec.get("fp4_tc_flops")


# the compute-efficiency grid: rows (tokens) x log2 of the weight's elements (N x K)
GRID_ROWS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
GRID_LOG2_WEIGHTS = (20, 22, 24, 26, 28, 30)


def _grid(x) -> dict:
    """Median achieved/peak FLOP/s per (rows, weight size), two significant digits: weights of 2^(c-1) .. 2^(c+1)
    elements (N, K >= 256) at each measured row count. The weight size moves the efficiency more than the row count
    (large matrices fill the GPU), which one plateau figure misses by 15-25 % for the 70B's matrices; at decode rows
    it carries the per-call floor, which grows with the weight (block FP8 on H100: ~60 us at 1M elements, ~95 us at
    100M)."""
    x = x[(x.n >= 256) & (x.k >= 256)]
    lnk = np.log2(x.n * x.k)
    out = {}
    for m in GRID_ROWS:
        row = []
        for c in GRID_LOG2_WEIGHTS:
            z = x.eff[(x.m == m) & (lnk >= c - 1) & (lnk < c + 1)]
            row.append(float(f"{float(z.median()):.2g}") if len(z) >= 3 else None)
        out[m] = row
    return out


def gemm(d, spec: dict) -> dict:
    out, bw = {}, spec["mem_bw"]
    d = d.loc[d.groupby(["gemm_dtype", "m", "n", "k"]).latency.idxmin()]  # vLLM runs one kernel per shape
    for dt, x in d.groupby("gemm_dtype"):
        p = peak(spec, dt)
        if not p or dt not in BYTES:
            continue
        t = x.latency * 1e-3
        ec = 2 * x.m * x.n * x.k / t / p
        em = x.n * x.k * BYTES[dt] / t / bw
        big = (x.n >= 4096) & (x.k >= 4096)
        large_w = x.n * x.k * BYTES[dt] >= 256e6
        small_shape = (x.n <= 256) & (x.k <= 2048)
        out[dt] = {
            "compute": round(float(ec[big & (x.m >= 1024)].median()), 2),
            "compute_by_rows": {m: round(float(ec[big & (x.m == m)].median()), 2) for m in (512, 1024, 2048)},
            "bandwidth": round(float(em[large_w & (x.m == 32)].median()), 2),
            "bandwidth_small": round(float(em[large_w & (x.m == 8)].median()), 2),
            "launch_us": round(float(x.latency[small_shape & (x.m == 32)].median() * 1000), 1),
            "launch_small_us": round(float(x.latency[small_shape & (x.m == 8)].median() * 1000), 1),
            "compute_grid": _grid(x.assign(eff=ec)),
        }
    return out


def _moe_fit(x, p: float, bw: float, nbytes: float) -> dict:
    """launch + max(touched expert bytes / (BW x bandwidth), FLOPs / (peak x compute)) + routed-pair bytes / (BW x
    pair_bandwidth), least squares in log time. num_tokens is what enters vLLM's fused_experts on one rank (every
    token routed over all experts, the rank's expert_map keeps E/EP of them, or every expert's 1/moe_tp slice): the
    rank's FLOPs are its 1/(EP x moe_tp) share of the pairs, while the sort/align/scatter work is over every pair (the
    pair term).

    The rows are aiconfigurator's "balanced" routing (its collector's balanced_logits): token t takes experts
    t, t + E/k, t + 2E/k, ... (spread evenly below E/k tokens), so min(1, n x k / E) of the experts are touched, every
    one of them from E/k tokens on. That, not the uniform-routing count the planner uses at plan time
    (1 - (1 - k/E)^n, 64 % at 16 tokens of 128 experts top-8), is what the measured kernel read; fitting the
    bandwidth against the uniform count had it read a third fewer bytes than it did and overpriced small batches."""
    t = x.latency.to_numpy() * 1e-3
    n, k, e = x.num_tokens.to_numpy(), x.topk.to_numpy(), x.num_experts.to_numpy()
    ep, h, i = x.moe_ep_size.to_numpy() * x.moe_tp_size.to_numpy(), x.hidden_size.to_numpy(), x.inter_size.to_numpy()
    w = e / ep * np.minimum(1.0, n * k / e) * 3 * h * i * nbytes
    f = 2 * n * k / ep * 3 * h * i
    pb = n * k * h * 2.0
    lt = np.log(t)
    cs = np.arange(0.04, 1.0, 0.02)[:, None]
    best = None
    for t0 in np.arange(0, 102.5e-6, 5e-6):
        for m in np.arange(0.4, 1.0, 0.04):
            wt = w / (bw * m)
            for g in (np.inf, 4, 2, 1, 0.5, 0.3, 0.2, 0.1, 0.05, 0.03):
                pred = t0 + np.maximum(wt, f / (p * cs)) + pb / (bw * g)
                err = np.sqrt(np.mean((np.log(pred) - lt) ** 2, axis=1))
                j = int(np.argmin(err))
                if best is None or err[j] < best[0]:
                    best = (float(err[j]), t0, m, float(cs[j, 0]), g)
    err, t0, m, c, g = best
    return {
        "compute": round(c, 2),
        "bandwidth": round(float(m), 2),
        "launch_us": round(float(t0) * 1e6, 1),
        "pair_bandwidth": None if g == np.inf else float(g),
        "rms_log_err": round(err, 2),
    }


def moe(d, spec: dict) -> dict:
    """Per expert dtype: fits over every measured shape (``all``) and per shape of the catalog's MoE models, for
    expert parallelism (EP 2-16, an expert map on the rank), for one rank with every expert (``@ep1``) and for every
    expert split by TP (``@tp``: moe_tp 2-16, EP 1, no expert map; vLLM's layout without --enable-expert-parallel)."""
    out, bw = {}, spec["mem_bw"]
    d = d[(d.distribution == "balanced") & (d.moe_ep_size <= 16) & (d.moe_tp_size <= 16) & (d.num_tokens >= 16)]
    d = d[(d.moe_tp_size == 1) | (d.moe_ep_size == 1)]
    sel = np.zeros(len(d), bool)
    for h, i, e, k in MOE_SHAPES:
        sel |= ((d.hidden_size == h) & (d.inter_size == i) & (d.num_experts == e) & (d.topk == k)).to_numpy()
    d = d[sel]
    keys = ["moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_ep_size", "moe_tp_size"]
    d = d.loc[d.groupby(keys).latency.idxmin()]

    def kinds(y):  # vLLM runs another kernel configuration without an expert map (EP 1): fitted apart
        return {
            "": y[y.moe_ep_size > 1],
            "@ep1": y[(y.moe_ep_size == 1) & (y.moe_tp_size == 1)],
            "@tp": y[(y.moe_ep_size == 1) & (y.moe_tp_size > 1)],
        }

    for dt, x in d.groupby("moe_dtype"):
        p = peak(spec, dt)
        if dt not in BYTES or not p:
            continue
        r = {f"all{tag}": _moe_fit(y, p, bw, BYTES[dt]) for tag, y in kinds(x).items() if len(y)}
        for (h, i, e, k), y in x.groupby(["hidden_size", "inter_size", "num_experts", "topk"]):
            for tag, z in kinds(y).items():
                if len(z) >= 4:
                    r[f"{h}x{i}x{e}x{k}{tag}"] = _moe_fit(z, p, bw, BYTES[dt])
        out[dt] = r
    return out


def attention(gen, ctx, spec: dict) -> dict:
    """Paged decode attention (vLLM's FlashAttention decode) per layer: launch + per_seq_kv_head x batch x the rank's
    KV heads (block tables, per-sequence work) + KV bytes / (BW x bandwidth), least squares in log time over head dims
    128-256 (the catalog's models), batch >= 8; prefill attention as before."""
    out, bw = {}, spec["mem_bw"]
    if gen is not None and "window_size" in gen:
        g = gen[(gen.window_size == 0) & (gen.head_dim >= 128) & (gen.head_dim <= 256) & (gen.batch_size >= 8)].copy()
        g["ctx"] = g.isl + g.step
        keys = ["kv_cache_dtype", "batch_size", "ctx", "num_heads", "num_key_value_heads", "head_dim"]
        g = g.loc[g.groupby(keys).latency.idxmin()]
        for kv, x in g.groupby("kv_cache_dtype"):
            t = x.latency.to_numpy() * 1e-3
            b = (x.batch_size * x.ctx * 2 * x.num_key_value_heads * x.head_dim * BYTES[kv]).to_numpy()
            seqs = (x.batch_size * x.num_key_value_heads).to_numpy()
            grid = np.arange(0.1, 1.0, 0.01)[:, None]
            best = None
            for t0 in np.arange(0, 40e-6, 1e-6):
                for s in np.arange(0, 0.1e-6, 0.004e-6):
                    err = np.mean(np.log((t0 + s * seqs + b / (bw * grid)) / t) ** 2, axis=1)
                    j = int(np.argmin(err))
                    if best is None or err[j] < best[0]:
                        best = (float(err[j]), t0, s, float(grid[j, 0]))
            out[f"decode_{kv}"] = {
                "bandwidth": round(best[3], 2),
                "launch_us": round(best[1] * 1e6, 1),
                "per_seq_kv_head_us": round(best[2] * 1e6, 3),
                "rms_log_err": round(float(np.sqrt(best[0])), 2),
            }
    if ctx is not None and "window_size" in ctx:
        c = ctx[(ctx.window_size == 0) & (ctx.head_dim >= 128) & (ctx.kv_cache_dtype == "bfloat16")]
        ec = 4 * c.batch_size * c.isl * c.isl / 2 * c.num_heads * c.head_dim / (c.latency * 1e-3)
        ec = ec / spec["bfloat16_tc_flops"]
        out["prefill"] = {
            "compute_short": round(float(ec[(c.isl >= 512) & (c.isl <= 1024)].median()), 2),
            "compute_long": round(float(ec[c.isl >= 4096].median()), 2),
        }
    return out


# DeepSeek-V3's MLA shapes, those of aiconfigurator's mla_generation_module tables (its vLLM collector measures the
# whole MLA attention block of DeepseekV3ForCausalLM at num_heads = 128 / TP)
MLA = {"hidden": 7168, "kv_lora": 512, "rope": 64, "nope": 128, "v": 128, "q_lora": 1536}
MLA_GEMM = {"fp8_block": ("fp8_block", 1.0), "bfloat16": ("bf16", 2.0), "nvfp4": ("fp4", 0.5625)}


def mla(d, spec: dict) -> dict:
    """vLLM's MLA attention block at decode, per layer: launch + max(weights / (BW x weight_bandwidth), projection
    FLOPs / (peak x gemm_compute)) + max(latent KV bytes / (BW x kv_bandwidth), attention FLOPs / (BF16 peak x
    attention_compute)), least squares in log time over heads (1-128), batch (1-1024) and context (2-128k)."""
    out, m, bw, p16 = {}, MLA, spec["mem_bw"], spec["bfloat16_tc_flops"]
    for (gt, kv), x in d.groupby(["gemm_type", "kv_cache_dtype"]):
        if gt not in MLA_GEMM:
            continue
        kind, wb = MLA_GEMM[gt]
        pw = {"fp8_block": spec.get("fp8_tc_flops"), "bfloat16": p16, "nvfp4": spec.get("fp4_tc_flops")}[gt] or p16
        x = x.loc[x.groupby(["num_heads", "batch_size", "step"]).latency.idxmin()]
        h, b, ctx = x.num_heads.to_numpy(), x.batch_size.to_numpy(), x.step.to_numpy()
        t = x.latency.to_numpy() * 1e-3
        qkv_a = m["hidden"] * (m["q_lora"] + m["kv_lora"] + m["rope"])
        q_b, o = m["q_lora"] * h * (m["nope"] + m["rope"]), h * m["v"] * m["hidden"]
        bmm = 2 * h * m["nope"] * m["kv_lora"]  # W_UK_T and W_UV, BF16
        wbytes = (qkv_a + q_b + o) * wb + bmm * 2
        wflops = 2 * b * (qkv_a + q_b + o) / pw + 2 * b * bmm / p16  # seconds at 100 % of the peaks
        kvbytes = b * ctx * (m["kv_lora"] + m["rope"]) * BYTES[kv]
        aflops = 2 * b * ctx * h * (2 * m["kv_lora"] + m["rope"])
        grid = np.arange(0.3, 1.0, 0.05)
        ekv, ca = (a.ravel()[:, None] for a in np.meshgrid(grid, grid, indexing="ij"))
        att = np.maximum(kvbytes[None, :] / (bw * ekv), aflops[None, :] / (p16 * ca))
        best, lt = None, np.log(t)
        for t0 in np.arange(10e-6, 200e-6, 2e-6):
            for ew in (0.5, 0.6, 0.7, 0.8, 0.9):
                for cw in (0.08, 0.12, 0.16, 0.2, 0.3, 0.4, 0.5):
                    g = np.maximum(wbytes / (bw * ew), wflops / cw)
                    err = np.sqrt(np.mean((np.log(t0 + g[None, :] + att) - lt) ** 2, axis=1))
                    j = int(np.argmin(err))
                    if best is None or err[j] < best[0]:
                        best = (float(err[j]), t0, ew, cw, float(ekv[j, 0]), float(ca[j, 0]))
        err, t0, ew, cw, e_kv, c_a = best
        out.setdefault(kind, {})["fp8" if kv == "fp8" else "bf16"] = {
            "launch_us": round(t0 * 1e6, 1),
            "weight_bandwidth": ew,
            "gemm_compute": cw,
            "kv_bandwidth": round(e_kv, 2),
            "attention_compute": round(c_a, 2),
            "rms_log_err": round(err, 3),
        }
    return out


def gdn(d, spec: dict) -> dict:
    if d is None:
        return {}
    g = d[(d.kernel_source == "fused_recurrent_gated_delta_rule_packed_decode") & (d.batch_size >= 16)]
    state = g.batch_size * g.num_v_heads * g.head_k_dim * g.head_v_dim * 4 * 2
    c = d[(d.kernel_source == "chunk_gated_delta_rule_flashinfer") & (d.num_tokens >= 2048)]
    f = c.num_tokens * c.num_v_heads * (6 * c.head_k_dim * c.head_v_dim + 2 * 64 * (c.head_k_dim + c.head_v_dim))
    return {
        "state_bandwidth": round(float((state / (g.latency * 1e-3) / spec["mem_bw"]).median()), 2),
        "scan_compute": round(float((f / (c.latency * 1e-3) / spec["bfloat16_tc_flops"]).median()), 3),
    }


def comm(system: str) -> dict:
    out = {}
    for v in ("0.24.0", "0.22.0", "0.19.0", "0.14.0"):
        d = read(f"{BASE}/data/{system}/comm/vllm/{v}/custom_allreduce_perf.parquet")
        if d is None:
            continue
        x = d[d.backend == "vllm_graph"]
        res = {}
        for n, y in x.groupby("num_gpus"):
            size, t = y.message_size.to_numpy() * 2, y.latency.to_numpy() * 1e-3
            mid = (size >= 8 * 2**20) & (size <= 16 * 2**20)
            busbw = size[mid] * 2 * (n - 1) / n / t[mid]
            res[int(n)] = {
                "latency_us": round(float(np.median(t[size <= 65536])) * 1e6, 1),
                "bus_gb_s": round(float(np.median(busbw)) / 1e9),
            }
        out["allreduce_" + v] = res
        break
    # NCCL all-gather / reduce-scatter: vLLM's default expert-parallel exchange (all2all_backend
    # allgather_reducescatter). message_size counts FP16 elements of the whole (gathered) buffer.
    d = None
    for v in ("2.29.2", "2.27.3", "2.23"):
        d = read(f"{BASE}/data/{system}/comm/nccl/{v}/nccl_perf.parquet")
        if d is not None:
            break
    if d is not None:
        d = d[d.nccl_dtype == "half"]
        for op in ("all_gather", "reduce_scatter"):
            res = {}
            for n, y in d[d.op_name == op].groupby("num_gpus"):
                size, t = y.message_size.to_numpy() * 2, y.latency.to_numpy() * 1e-3
                mid = (size >= 8 * 2**20) & (size <= 32 * 2**20)
                res[int(n)] = {
                    "latency_us": round(float(np.median(t[size <= 32768])) * 1e6, 1),
                    "bus_gb_s": round(float(np.median(size[mid] * (n - 1) / n / t[mid])) / 1e9),
                }
            out["nccl_" + op] = res
    return out


def main() -> None:
    result = {}
    for gid, (system, ver) in GPUS.items():
        with open(f"{BASE}/{system}.yaml", encoding="utf-8") as fh:
            spec = yaml.safe_load(fh)["gpu"]
        data = f"{BASE}/data/{system}"
        r = {"measured_on": f"aiconfigurator {system}, vLLM {ver}"}
        g = read(f"{data}/gemm/vllm/{ver}/gemm_perf.parquet")
        if g is not None:
            r["gemm"] = gemm(g, spec)
        m = read(f"{data}/moe/vllm/{ver}/moe_perf.parquet")
        if m is not None:
            r["moe"] = moe(m, spec)
        r["attention"] = attention(
            read(f"{data}/attention/vllm/{ver}/generation_attention_perf.parquet"),
            read(f"{data}/attention/vllm/{ver}/context_attention_perf.parquet"),
            spec,
        )
        r["gdn"] = gdn(read(f"{data}/linear_attention/vllm/{ver}/gdn_perf.parquet"), spec)
        g = read(f"{data}/mla/vllm/{ver}/mla_generation_module_perf.parquet")
        if g is not None:
            r["mla_decode"] = mla(g, spec)
        r["comm"] = comm(system)
        result[gid] = r
    print(yaml.safe_dump(json.loads(json.dumps(result, default=float)), sort_keys=False, width=120))


if __name__ == "__main__":
    main()
