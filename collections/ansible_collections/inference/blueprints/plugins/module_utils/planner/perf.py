# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Per-GPU, per-precision efficiency figures for the step-latency model (catalog/performance.yaml), with the policy's
efficiency overrides and measured calibration applied on top."""

from __future__ import annotations

import copy
import functools
import math
from dataclasses import dataclass, field, replace

from . import data, skew

GEMM_DTYPE = {"bf16": "bf16", "fp4": "fp4"}  # int4 (W4A16) computes in BF16 after dequantizing: the bf16 figures


def catalog() -> dict:
    return data.load("performance.yaml")


def _gpu_entry(gid: str) -> dict:
    gpus = catalog()["gpus"]
    entry = gpus.get(gid)
    if entry is None:  # a GPU without figures: H100's, said in the source note
        base = copy.deepcopy(gpus["h100"])
        base["measured_on"] = f"no efficiency figures for {gid}: H100's assumed"
        return base
    if entry.get("like"):
        base = copy.deepcopy(gpus[entry["like"]])
        for k, v in entry.items():
            if k in ("gemm", "moe", "attention_decode") and isinstance(v, dict):
                base.setdefault(k, {}).update(v)
            elif k != "like":
                base[k] = v
        return base
    return entry


def gemm_dtype(model: dict, weights: str) -> str:
    if weights == "fp8":
        return "fp8_block" if model.get("fp8_format", "block") == "block" else "fp8"
    return GEMM_DTYPE.get(weights, "bf16")


def moe_shape(model: dict) -> str:
    """hidden x expert intermediate x experts x top-k: the key of the per-shape fused-MoE fits."""
    return "x".join(
        str(model.get(k, 0)) for k in ("hidden_size", "moe_intermediate_size", "experts", "experts_per_token")
    )


def moe_fit(table: dict, model: dict, split: str = "ep") -> MoeFit:
    """The fused-MoE fit for the model's expert shape when it was measured, else the fit over every shape. ``split``:
    "ep" (expert parallel, an expert map on the rank), "ep1" (one rank holds every expert) or "tp" (every expert split
    by TP, no expert map); the last two fall back to each other, then to the expert-parallel fit."""
    tags = {"ep": ("",), "ep1": ("@ep1", "@tp", ""), "tp": ("@tp", "@ep1", "")}[split]
    for tag in tags:
        for base in (moe_shape(model), "all"):
            if base + tag in table:
                return _moe(table[base + tag], base + tag)
    raise KeyError("all")


def _pick(table: dict, key: str, order: tuple) -> tuple[dict, str]:
    for k in (key, *order):
        if table.get(k):
            return table[k], k
    raise KeyError(key)


@dataclass(frozen=True)
class MoeFit:
    """vLLM fused_experts on one rank: launch + max(touched local expert bytes / (BW x bandwidth), local FLOPs /
    (peak x compute)) + every routed pair's BF16 hidden state / (BW x pair_bandwidth) (0: no pair term)."""

    compute: float
    bandwidth: float
    launch_s: float
    pair_bandwidth: float
    fit: str  # which catalog fit: "<hidden>x<moe_intermediate>x<experts>x<top-k>[@ep1]" or "all[@ep1]"

    def scaled(self, c: float, b: float) -> MoeFit:
        return replace(
            self,
            compute=min(1.0, self.compute * c),
            bandwidth=min(1.0, self.bandwidth * b),
            pair_bandwidth=min(1.0, self.pair_bandwidth * b) if self.pair_bandwidth else 0.0,
        )


def _moe(d: dict, fit: str) -> MoeFit:
    return MoeFit(
        compute=d["compute"],
        bandwidth=d["bandwidth"],
        launch_s=d.get("launch_us", 0.0) * 1e-6,
        pair_bandwidth=float(d.get("pair_bandwidth") or 0.0),
        fit=fit,
    )


GRID_LOG2_WEIGHTS = (20, 22, 24, 26, 28, 30)  # the compute grid's columns: log2 of a weight's N x K elements


def _interp(points: list, x: float) -> float:
    """Piecewise-linear through ``points`` ((x, y), ... ascending), flat beyond the ends."""
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):  # noqa: B905 - neighbours
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]


@functools.lru_cache(maxsize=8192)
def _grid_by_rows(grid: tuple, weights: float) -> list:
    """A grid's efficiency at one weight size for every row count: ((log2 rows, efficiency), ...); an engine has a few
    weight shapes and sizes thousands of steps, so each is interpolated once."""
    lw = math.log2(weights)
    out = []
    for m, effs in grid:
        pts = [(c, e) for c, e in zip(GRID_LOG2_WEIGHTS, effs) if e]  # noqa: B905 - the grid's columns
        if pts:
            out.append((math.log2(m), _interp(pts, lw)))
    return out


@dataclass(frozen=True)
class Gemm:
    """One GEMM kernel family's figures: a call costs max(launch floor, FLOPs / (peak x compute), weight bytes /
    (bandwidth x bandwidth))."""

    compute: float
    rows: tuple  # ((rows, compute efficiency), ...) below the plateau
    bandwidth: float  # decode-sized calls (>16 rows)
    bandwidth_small: float  # 1-16 rows
    launch_s: float
    launch_small_s: float
    grid: tuple = ()  # ((rows, (efficiency at each GRID_LOG2_WEIGHTS column or None, ...)), ...)

    def compute_at(self, rows: float, weights: float = 0.0) -> float:
        """Compute efficiency at ``rows`` tokens through a weight of ``weights`` (N x K) elements: the measured grid
        over rows and weight size (log2-interpolated both ways), else the knee over rows, then the plateau.

        Below the grid's first row (8) the call takes the first row's time, not less: the efficiency falls with the
        rows. aiconfigurator's measured vLLM tables time a GEMM of 1-7 rows the same as one of 8 (median ratio 0.98-1.01
        over every weight of 4M+ elements, BF16 / FP8 / block FP8 / NVFP4 on H100, B200 and L40S): those calls stream
        the weight and pay the kernel's floor whatever the rows; a flat efficiency would make them rows/8 as long."""
        if self.grid and weights > 0:
            by_rows = _grid_by_rows(self.grid, weights)
            if by_rows:
                lr = math.log2(max(rows, 1.0))
                below = 2.0 ** min(0.0, lr - by_rows[0][0])  # rows / the first row, when fewer
                return max(1e-4, _interp(by_rows, lr) * below)
        pts = self.rows
        if not pts or rows >= pts[-1][0]:
            return self.compute
        if rows <= pts[0][0]:
            return pts[0][1]
        return _interp([(math.log2(r), e) for r, e in pts], math.log2(rows))

    def time(self, rows: float, shape: tuple, bpp: float, device: tuple) -> float:
        """One call of ``rows`` tokens through a K x N weight (``shape``) of ``bpp`` bytes a parameter on a device of
        (peak FLOP/s, bandwidth B/s)."""
        (k, n), (peak, bw) = shape, device
        small = rows <= 16
        return max(
            self.launch_small_s if small else self.launch_s,
            2 * rows * k * n / (peak * self.compute_at(rows, k * n)) if rows else 0.0,
            k * n * bpp / (bw * (self.bandwidth_small if small else self.bandwidth)),
        )

    def scaled(self, c: float, b: float) -> Gemm:
        return replace(
            self,
            compute=min(1.0, self.compute * c),
            rows=tuple((k, min(1.0, v * c)) for k, v in self.rows),
            grid=tuple((m, tuple(min(1.0, e * c) if e else e for e in effs)) for m, effs in self.grid),
            bandwidth=min(1.0, self.bandwidth * b),
            bandwidth_small=min(1.0, self.bandwidth_small * b),
        )

    def fixed(self, c: float | None, b: float | None) -> Gemm:
        out = self
        if c is not None:
            out = replace(out, compute=c, rows=(), grid=())
        if b is not None:
            out = replace(out, bandwidth=b, bandwidth_small=b)
        return out


def _gemm(g: dict, grid: dict | None = None) -> Gemm:
    return Gemm(
        compute=g["compute"],
        rows=tuple(sorted((int(k), float(v)) for k, v in (g.get("compute_by_rows") or {}).items())),
        bandwidth=g["bandwidth"],
        bandwidth_small=g.get("bandwidth_small", g["bandwidth"]),
        launch_s=g.get("launch_us", 0.0) * 1e-6,
        launch_small_s=g.get("launch_small_us", g.get("launch_us", 0.0)) * 1e-6,
        grid=tuple(sorted((int(m), tuple(v)) for m, v in (grid or {}).items())),
    )


@dataclass(frozen=True)
class MlaFit:
    """vLLM's MLA attention block at decode (fused q_a/kv_a, q_b, the absorbed W_UK / W_UV batched matmuls, FlashMLA
    or FlashInfer-MLA, o_proj), per layer: launch + max(its weights / (BW x weight_bandwidth), its FLOPs / (peak x
    gemm_compute)) + max(latent KV bytes / (BW x kv_bandwidth), attention FLOPs / (BF16 peak x attention_compute))."""

    launch_s: float
    weight_bandwidth: float
    gemm_compute: float
    kv_bandwidth: float
    attention_compute: float

    def scaled(self, c: float, b: float) -> MlaFit:
        return replace(
            self,
            weight_bandwidth=min(1.0, self.weight_bandwidth * b),
            gemm_compute=min(1.0, self.gemm_compute * c),
            kv_bandwidth=min(1.0, self.kv_bandwidth * b),
            attention_compute=min(1.0, self.attention_compute * c),
        )


def _mla(e: dict, kind: str, kv_dtype: str) -> MlaFit | None:
    d = ((e.get("mla_decode") or {}).get(kind) or {}).get("fp8" if kv_dtype in ("fp8", "nvfp4") else "bf16")
    if not d:
        return None
    return MlaFit(
        launch_s=d["launch_us"] * 1e-6,
        weight_bandwidth=d["weight_bandwidth"],
        gemm_compute=d["gemm_compute"],
        kv_bandwidth=d["kv_bandwidth"],
        attention_compute=d["attention_compute"],
    )


@dataclass(frozen=True)
class Eff:
    """Efficiencies of one engine's kernels (fractions of the datasheet peak) and the fixed costs around them."""

    gemm: Gemm  # the weights' GEMM kind
    bf16: Gemm  # lm_head, MoE router (unquantized)
    moe: MoeFit  # expert parallel (an expert map on the rank)
    moe_ep1: MoeFit  # every expert on the rank (EP 1: vLLM runs another kernel configuration)
    moe_tp: MoeFit  # every expert split by TP over the rank's TP x DP group (EP 1, no expert map)
    attn_bandwidth: float
    attn_launch_s: float
    attn_per_seq_s: float  # decode attention: per sequence and KV head of the rank, a layer
    attn_prefill_short: float
    attn_prefill_long: float
    gdn_state_bandwidth: float
    gdn_scan_compute: float
    allreduce_latency_s: float
    allreduce_bus: dict
    allgather: dict  # NCCL, per group size: {latency_us: {n: us}, bus_gb_s: {n: GB/s}}
    reducescatter: dict
    link_gb_s: float
    engine: dict
    gemm_kind: str
    moe_kind: str
    source: str
    notes: tuple = field(default_factory=tuple)
    calibrated: str = ""  # set when measured figures replaced the assumptions
    mla: MlaFit | None = None  # MLA models: the measured decode attention block (None: GEMMs + attention apart)
    routing_skew: float = 0.0  # power-law alpha of the experts' loads (skew.py); 0: uniform routing

    @property
    def moe_compute(self) -> float:
        return self.moe.compute

    @property
    def moe_bandwidth(self) -> float:
        return self.moe.bandwidth

    def moe_for(self, ep: int, moe_tp: int = 1) -> MoeFit:
        if ep > 1:
            return self.moe
        return self.moe_tp if moe_tp > 1 else self.moe_ep1

    @property
    def gemm_compute(self) -> float:
        return self.gemm.compute

    @property
    def gemm_bandwidth(self) -> float:
        return self.gemm.bandwidth

    def scaled(self, compute: float = 1.0, bandwidth: float = 1.0, note: str = "") -> Eff:
        """A copy with every compute (bandwidth) efficiency multiplied by ``compute`` (``bandwidth``), capped at 1."""

        def c(x: float) -> float:
            return min(1.0, x * compute)

        def b(x: float) -> float:
            return min(1.0, x * bandwidth)

        return replace(
            self,
            gemm=self.gemm.scaled(compute, bandwidth),
            bf16=self.bf16.scaled(compute, bandwidth),
            moe=self.moe.scaled(compute, bandwidth),
            moe_ep1=self.moe_ep1.scaled(compute, bandwidth),
            moe_tp=self.moe_tp.scaled(compute, bandwidth),
            attn_prefill_short=c(self.attn_prefill_short),
            attn_prefill_long=c(self.attn_prefill_long),
            gdn_scan_compute=c(self.gdn_scan_compute),
            attn_bandwidth=b(self.attn_bandwidth),
            gdn_state_bandwidth=b(self.gdn_state_bandwidth),
            calibrated=note or self.calibrated,
            mla=self.mla.scaled(compute, bandwidth) if self.mla else None,
        )


def efficiencies(gpu: dict, model: dict, weights: str, kv_dtype: str) -> Eff:
    """The catalog's figures for this GPU, the weights' GEMM kind and the KV cache dtype."""
    e = _gpu_entry(gpu["id"])
    kind = gemm_dtype(model, weights)
    g, gk = _pick(e["gemm"], kind, ("fp8_block", "fp8", "bf16"))
    lm = e["gemm"]["bf16"]
    moe_kind = "fp8_block" if weights == "fp8" else kind
    mt, mk = _pick(e["moe"], moe_kind, ("fp8_block", "bf16"))
    moe, moe1, moetp = moe_fit(mt, model, "ep"), moe_fit(mt, model, "ep1"), moe_fit(mt, model, "tp")
    a, _ak = _pick(e["attention_decode"], "fp8" if kv_dtype in ("fp8", "nvfp4") else "bf16", ("bf16",))
    notes = []
    if gk != kind:
        notes.append(f"no {kind} GEMM figures for {gpu['id']}: {gk} used")
    if model.get("kind") == "moe" and mk != moe_kind:
        notes.append(f"no {moe_kind} MoE figures for {gpu['id']}: {mk} used")
    if model.get("kind") == "moe" and moe.fit == "all":
        notes.append(f"MoE expert shape {moe_shape(model)} not measured on {gpu['id']}: the fit over all shapes used")
    grids = e.get("gemm_grid") or {}
    return Eff(
        gemm=_gemm(g, grids.get(gk)),
        bf16=_gemm(lm, grids.get("bf16")),
        moe=moe,
        moe_ep1=moe1,
        moe_tp=moetp,
        attn_bandwidth=a["bandwidth"],
        attn_launch_s=a.get("launch_us", 0.0) * 1e-6,
        attn_per_seq_s=a.get("per_seq_kv_head_us", 0.0) * 1e-6,
        attn_prefill_short=e["attention_prefill"]["compute_short"],
        attn_prefill_long=e["attention_prefill"]["compute_long"],
        gdn_state_bandwidth=e["gdn"]["state_bandwidth"],
        gdn_scan_compute=e["gdn"]["scan_compute"],
        allreduce_latency_s=e["allreduce"]["latency_us"] * 1e-6,
        allreduce_bus={int(k): v for k, v in e["allreduce"]["bus_gb_s"].items()},
        allgather=e["allgather"],
        reducescatter=e["reducescatter"],
        link_gb_s=float(e.get("link_gb_s") or 32),
        engine=catalog()["engine"],
        gemm_kind=gk,
        moe_kind=mk,
        source=e.get("measured_on", ""),
        notes=tuple(notes),
        mla=_mla(e, kind, kv_dtype) if model.get("attention") == "mla" else None,
    )


def with_policy(eff: Eff, pol: dict) -> tuple[Eff, list[str]]:
    """policy prefill_mfu / decode_mbu, when set, replace every compute / bandwidth efficiency."""
    why = []
    eff = replace(eff, routing_skew=skew.alpha_of(pol.get("expert_routing_skew")))
    c, b = pol.get("prefill_mfu"), pol.get("decode_mbu")
    if c is not None:
        eff = replace(
            eff,
            moe=replace(eff.moe, compute=float(c)),
            moe_ep1=replace(eff.moe_ep1, compute=float(c)),
            moe_tp=replace(eff.moe_tp, compute=float(c)),
            attn_prefill_short=float(c),
            attn_prefill_long=float(c),
            gdn_scan_compute=float(c),
        )
        why.append(f"policy prefill_mfu {c} replaces the measured compute efficiencies")
    if b is not None:
        eff = replace(
            eff,
            moe=replace(eff.moe, bandwidth=float(b)),
            moe_ep1=replace(eff.moe_ep1, bandwidth=float(b)),
            moe_tp=replace(eff.moe_tp, bandwidth=float(b)),
            attn_bandwidth=float(b),
            gdn_state_bandwidth=float(b),
        )
        why.append(f"policy decode_mbu {b} replaces the measured bandwidth efficiencies")
    if c is not None or b is not None:
        eff = replace(eff, gemm=eff.gemm.fixed(c, b), bf16=eff.bf16.fixed(c, b))
    if eff.mla is not None and (c is not None or b is not None):
        m = eff.mla
        eff = replace(
            eff,
            mla=replace(
                m,
                weight_bandwidth=float(b) if b is not None else m.weight_bandwidth,
                kv_bandwidth=float(b) if b is not None else m.kv_bandwidth,
                gemm_compute=float(c) if c is not None else m.gemm_compute,
                attention_compute=float(c) if c is not None else m.attention_compute,
            ),
        )
    return eff, why


def interconnect(name: str) -> dict:
    return catalog()["interconnects"][name]
