# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Recompute the kernel efficiencies of planner/catalog/performance.yaml from aiconfigurator's measured tables.

Not a test. Run it with the Python of a separate aiconfigurator environment (it needs pandas and the installed
aiconfigurator_core package data; nothing is copied into the repository):

    /tmp/aic-venv/bin/python tests/unit/planner/oracle/tools/derive_efficiency.py

For every GPU it prints what the catalog records: per GEMM kind the plateau and knee compute efficiency, the large-shape
weight bandwidth efficiency at 8 and 32 rows, the launch floor of small calls; the fused-MoE fit (launch + roofline);
paged decode attention (launch + KV bytes); prefill attention at short and long contexts; the Gated DeltaNet state and
scan; vLLM's custom all-reduce; DeepEP low-latency / high-throughput all-to-all.
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
MOE_SHAPES = [(2048, 512, 256, 8), (2048, 768, 128, 8), (4096, 1024, 512, 10), (7168, 2048, 256, 8)]


def read(path: str):
    return pd.read_parquet(path) if os.path.exists(path) else None


def peak(spec: dict, dtype: str) -> float | None:
    if dtype == "bfloat16":
        return spec["bfloat16_tc_flops"]
    return spec.get("fp8_tc_flops") if dtype.startswith("fp8") else spec.get("fp4_tc_flops")


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
        }
    return out


def moe(d, spec: dict) -> dict:
    out, bw = {}, spec["mem_bw"]
    d = d[(d.distribution == "balanced") & (d.moe_tp_size == 1) & (d.moe_ep_size <= 16) & (d.num_tokens >= 16)]
    sel = np.zeros(len(d), bool)
    for h, i, e, k in MOE_SHAPES:
        sel |= ((d.hidden_size == h) & (d.inter_size == i) & (d.num_experts == e) & (d.topk == k)).to_numpy()
    d = d[sel]
    keys = ["moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_ep_size"]
    d = d.loc[d.groupby(keys).latency.idxmin()]
    for dt, x in d.groupby("moe_dtype"):
        p = peak(spec, dt)
        if dt not in BYTES or not p:
            continue
        t = x.latency.to_numpy() * 1e-3
        local = x.num_experts.to_numpy() / x.moe_ep_size.to_numpy()
        touched = local * (1 - (1 - x.topk.to_numpy() / x.num_experts.to_numpy()) ** x.num_tokens.to_numpy())
        w = touched * 3 * x.hidden_size.to_numpy() * x.inter_size.to_numpy() * BYTES[dt]
        f = 2 * x.num_tokens.to_numpy() * x.topk.to_numpy() / x.moe_ep_size.to_numpy() * 3
        f = f * x.hidden_size.to_numpy() * x.inter_size.to_numpy()
        best = None
        for t0 in np.arange(0, 60e-6, 2.5e-6):
            for m in np.arange(0.2, 1.0, 0.02):
                for c in np.arange(0.04, 0.6, 0.01):
                    err = float(np.mean(np.log((t0 + np.maximum(w / (bw * m), f / (p * c))) / t) ** 2))
                    if best is None or err < best[0]:
                        best = (err, t0, m, c)
        err, t0, m, c = best
        out[dt] = {"compute": round(c, 2), "bandwidth": round(m, 2), "launch_us": round(t0 * 1e6, 1)}
        out[dt]["rms_log_err"] = round(float(np.sqrt(err)), 2)
    return out


def attention(gen, ctx, spec: dict) -> dict:
    out, bw = {}, spec["mem_bw"]
    if gen is not None and "window_size" in gen:
        g = gen[(gen.window_size == 0) & (gen.head_dim >= 128) & (gen.batch_size >= 8)].copy()
        g["ctx"] = g.isl + g.step
        keys = ["kv_cache_dtype", "batch_size", "ctx", "num_heads", "num_key_value_heads", "head_dim"]
        g = g.loc[g.groupby(keys).latency.idxmin()]
        for kv, x in g.groupby("kv_cache_dtype"):
            t = x.latency.to_numpy() * 1e-3
            b = x.batch_size * x.ctx * 2 * x.num_key_value_heads * x.head_dim * BYTES[kv]
            best = None
            for t0 in np.arange(0, 40e-6, 1e-6):
                for m in np.arange(0.1, 1.0, 0.01):
                    err = float(np.mean(np.log((t0 + b.to_numpy() / (bw * m)) / t) ** 2))
                    if best is None or err < best[0]:
                        best = (err, t0, m)
            out[f"decode_{kv}"] = {"bandwidth": round(best[2], 2), "launch_us": round(best[1] * 1e6, 1)}
    if ctx is not None and "window_size" in ctx:
        c = ctx[(ctx.window_size == 0) & (ctx.head_dim >= 128) & (ctx.kv_cache_dtype == "bfloat16")]
        ec = 4 * c.batch_size * c.isl * c.isl / 2 * c.num_heads * c.head_dim / (c.latency * 1e-3)
        ec = ec / spec["bfloat16_tc_flops"]
        out["prefill"] = {
            "compute_short": round(float(ec[(c.isl >= 512) & (c.isl <= 1024)].median()), 2),
            "compute_long": round(float(ec[c.isl >= 4096].median()), 2),
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
    d = read(f"{BASE}/data/{system}/comm/vllm/0.24.0/moe_a2a_perf.parquet")
    if d is not None:
        for (be, ph, ep, nodes), y in d.groupby(["comm_backend", "phase", "ep_size", "node_num"]):
            if be not in ("deepep_ll", "deepep_ht"):
                continue
            t = y.latency.to_numpy() * 1e-6
            b = y.num_tokens * y.hidden_size * y.topk * (1 if ph == "dispatch" else 2)
            a = np.vstack([np.ones(len(b)), b.to_numpy()]).T
            coef, *_ = np.linalg.lstsq(a, t, rcond=None)
            out[f"{be}/{ph}/ep{ep}/nodes{nodes}"] = {
                "latency_us": round(float(coef[0]) * 1e6, 1),
                "gb_s": round(1 / float(coef[1]) / 1e9, 1),
            }
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
        r["comm"] = comm(system)
        result[gid] = r
    print(yaml.safe_dump(json.loads(json.dumps(result, default=float)), sort_keys=False, width=120))


if __name__ == "__main__":
    main()
