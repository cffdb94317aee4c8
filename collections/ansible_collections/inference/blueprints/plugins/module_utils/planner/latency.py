# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""The step-latency model: one engine step per GPU as op groups, each the slower of compute and memory, plus
collectives and fixed kernel costs; TPOT and TTFT (with queueing) at p50 and p95 from it (docs/planner.md, Latency).

Units: seconds, bytes, FLOPs. ``b`` is the number of decoding sequences of one DP rank in a step, ``chunk`` the prefill
tokens the same step carries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from . import perf, skew
from . import sizing as sz
from .engine import EngineCtx, peak_flops
from .queueing import (
    SlotWait,
    StepMix,
    chain_slot_wait,
    erlang_c,
    jsq_wait,
    lognormal_cv2,
    mg1_wait,
    prompt_points,
    slot_wait,
    tpot_p95,
    wait_quantile,
    with_wait_p95,
)
from .structs import Layout

GDN_CHUNK = sz.GDN_CHUNK
# vLLM runs a MoE layer's shared expert on an auxiliary CUDA stream beside the routed experts for steps of at most
# this many tokens (VLLM_SHARED_EXPERTS_STREAM_TOKEN_THRESHOLD, default 256; fused_moe shared-experts runner).
SHARED_EXPERT_STREAM_TOKENS = 256


@dataclass(frozen=True)
class Topology:
    """Where an engine's GPUs sit: GPUs per node and what connects nodes."""

    gpn: int
    interconnect: str  # nvlink | rdma | ethernet


@dataclass(frozen=True)
class Workload:
    """The traffic shape one engine sees (tokens per request)."""

    prompt_mean: float
    prompt_p95: float
    output_mean: float
    budget: int  # max_num_batched_tokens
    output_p95: float = 0.0  # 0: output lengths taken as constant
    queue: str = "erlang"  # policy slot_queue: how a rank's queue is modelled (docs/planner.md "TTFT and queueing")

    @property
    def hold_cv2(self) -> float:
        """Squared coefficient of variation of how long a request holds its sequence slot: its output length's, from
        a log-normal fitted to the output mean and p95 (the decode steps dominate the hold)."""
        return lognormal_cv2(self.output_mean, self.output_p95)

    @property
    def prompt_cv2(self) -> float:
        """Squared coefficient of variation of the prompt lengths (log-normal through their mean and p95)."""
        return lognormal_cv2(self.prompt_mean, self.prompt_p95)


def _bf16_peak(gpu: dict) -> float:
    return gpu["bf16_tflops"] * 1e12


def gemm_list(m: dict, tp: int) -> list[tuple] | None:
    """The dense GEMMs of one TP rank as (layers, K, N, kind, rows): kind "w" runs in the weights' precision, "shared"
    too (a MoE layer's shared expert), "bf16" stays unquantized (the MoE router, MLA's absorbed BMMs); rows "all" runs
    over every token of a step, "decode" over its decoding sequences only, "prefill" over its prefill chunk only. None
    when the model entry lacks the layer shapes."""
    h, layers = m["hidden_size"], m["layers"]
    moe = m.get("kind") == "moe"
    moe_layers = m.get("moe_layers", layers) if moe else 0
    if (moe and "moe_intermediate_size" not in m) or (layers - moe_layers and "intermediate_size" not in m):
        return None
    heads = m["num_attention_heads"]
    out = []
    if m["attention"] == "mla":
        ml = m["mla"]
        if "q_lora_rank" not in ml:
            return None
        nope, rope, v, qr, kvr = (
            ml["qk_nope_head_dim"],
            ml["qk_rope_head_dim"],
            ml["v_head_dim"],
            ml["q_lora_rank"],
            ml["kv_lora_rank"],
        )
        hr = heads / tp
        # vLLM's MLA (vllm/model_executor/layers/mla.py, attention/backends/mla/common.py): q_a and kv_a run as one
        # replicated GEMM (fused_qkv_a_proj); decode absorbs kv_b into two BF16 batched matmuls per layer (W_UK_T on
        # the query, W_UV on the attention output, one call each over the rank's heads); prefill up-projects the
        # chunk's latents with kv_b_proj and runs ordinary attention
        out += [
            (layers, h, qr + kvr + rope, "mla", "all"),
            (layers, qr, hr * (nope + rope), "mla", "all"),
            (layers, nope, hr * kvr, "mla_bf16", "decode"),
            (layers, kvr, hr * v, "mla_bf16", "decode"),
            (layers, kvr, hr * (nope + v), "w", "prefill"),
            (layers, hr * v, h, "mla", "all"),
        ]
    else:
        hd, full = m["head_dim"], m["full_attention_layers"]
        q = heads * hd * (2 if m.get("attn_output_gate") else 1) / tp
        kv = 2 * max(1, m["num_key_value_heads"] // tp) * hd
        out += [(full, h, q + kv, "w", "all"), (full, heads * hd / tp, h, "w", "all")]
        g = m.get("gdn")
        if g:
            lin = layers - full
            nk, nv, dk, dv = g["num_key_heads"], g["num_value_heads"], g["key_head_dim"], g["value_head_dim"]
            out += [
                (lin, h, (2 * nk * dk + 2 * nv * dv) / tp, "w", "all"),
                (lin, h, 2 * nv / tp, "w", "all"),
                (lin, nv * dv / tp, h, "w", "all"),
            ]
    if layers - moe_layers:
        inter = m["intermediate_size"]
        out += [
            (layers - moe_layers, h, 2 * inter / tp, "w", "all"),
            (layers - moe_layers, inter / tp, h, "w", "all"),
        ]
    if moe:
        shared = m.get("shared_expert_intermediate_size", 0)
        if shared:
            out += [(moe_layers, h, 2 * shared / tp, "shared", "all"), (moe_layers, shared / tp, h, "shared", "all")]
        out.append((moe_layers, h, m["experts"], "bf16", "all"))
    return out


class EngineModel:
    """Step times of one engine layout (per DP rank; one token through every pipeline stage)."""

    def __init__(self, c: EngineCtx, lay: Layout, eff: perf.Eff, topo: Topology):
        self.c, self.lay, self.eff, self.topo = c, lay, eff, topo
        m, gpu = c.model, c.gpu
        self.bw = gpu["bandwidth_tb_s"] * 1e12
        self.peak, self.peak_kind = peak_flops(gpu, c.weights)
        self.peak_bf16 = _bf16_peak(gpu)
        tp, pp = lay.tp, lay.pp
        self.tp, self.pp, self.dp = tp, pp, lay.dp
        moe = m.get("kind") == "moe"
        # experts split by EP (ep = TP x DP ranks) or, without --enable-expert-parallel, every expert split by TP over
        # the TP x DP ranks (moe_tp; vLLM flattens TP and DP for the MoE layers)
        self.ep = lay.ep if lay.ep > 1 else 1
        self.moe_width = tp * lay.dp if moe else 1
        self.moe_tp = max(1, self.moe_width // self.ep)
        self.moe = moe
        self.layers = m["layers"]
        self.attn_layers = m["full_attention_layers"]
        self.lin_layers = sz.linear_layers(m)
        self.hidden = m["hidden_size"]
        wb = c.wb
        lm_params = m["lm_head_params_b"] * 1e9
        routed_total = m.get("expert_params_b", 0) * 1e9
        k, e = m.get("experts_per_token", 0), m.get("experts", 0)
        self.k, self.e_total = k, e
        routed_active = routed_total * k / e if moe and e else 0.0
        self.moe_layers = m.get("moe_layers", self.layers) if moe else 0
        self.gemms = gemm_list(m, tp)
        if self.gemms is None:  # no layer shapes: the active non-expert parameters over four GEMMs a layer
            per = (m["active_params_b"] * 1e9 - routed_active) / (4 * self.layers * tp)
            self.gemms = [(self.layers, m["hidden_size"], per / m["hidden_size"], "w", "all")] * 4
        self.bpp = sz.WEIGHT_BYTES[c.weights]
        self.vocab = lm_params / m["hidden_size"]
        self.routed_active = routed_active / pp
        self.expert_bytes = wb["experts"] / (self.moe_width * pp)
        self.kv_tok = sz.kv_bytes_per_token_rank(m, c.kv_bytes, tp, pp, lay.dcp)
        self.kv_heads = sz.kv_heads_per_rank(m, tp)
        self.state_seq = sz.gdn_state_bytes_per_seq(m, tp, pp, 0)
        self._init_attention(m, tp)
        # the DP group's MoE exchange crosses the node interconnect when the engine spans nodes
        self.ep_spans_nodes = moe and self.dp > 1 and self.moe_width > topo.gpn
        # vLLM's sequence-parallel MoE (ParallelConfig.use_sequence_parallel_moe: the allgather_reducescatter
        # exchange, expert parallelism, TP > 1 and DP > 1): each TP rank sends its 1/TP of the DP rank's tokens, the
        # exchange runs over the whole EP group (TP x DP ranks) and a TP all-gather replaces the MoE's all-reduce
        self.sp_moe = moe and self.ep > 1 and tp > 1 and self.dp > 1
        self.pp_spans_nodes = tp * pp > topo.gpn
        self.tp_spans_nodes = tp > topo.gpn  # the TP all-reduce's ring crosses the node interconnect
        self.inter = perf.interconnect(topo.interconnect)
        self._cache: dict = {}

    def _init_attention(self, m: dict, tp: int) -> None:
        """Attention shapes of one rank; MLA: the decode block's weights and FLOPs a token (the fit's terms)."""
        self.mla_fit = None
        if m["attention"] == "mla":
            mla = m["mla"]
            self.d_qk, self.d_v = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"], mla["v_head_dim"]
            # the latent query (kv_lora_rank + rope) against the latent KV, then the latent output (kv_lora_rank)
            self.mla_attn_width = 2 * mla["kv_lora_rank"] + mla["qk_rope_head_dim"]
            rows = [(g[1], g[2], g[3]) for g in (self.gemms or []) if g[3].startswith("mla")]  # (k, n, kind)
            self.mla_weight_bytes = sum(k * n * (2.0 if kind == "mla_bf16" else self.bpp) for k, n, kind in rows)
            self.mla_flops_tok = sum(2 * k * n for k, n, kind in rows if kind == "mla")
            self.mla_flops_tok_bf16 = sum(2 * k * n for k, n, kind in rows if kind == "mla_bf16")
            self.mla_fit = self.eff.mla if rows else None
        else:
            self.d_qk = self.d_v = m["head_dim"]
        self.q_heads = m["num_attention_heads"] / tp
        g = m.get("gdn")
        self.gdn_flops_tok = (
            (g["num_value_heads"] / tp)
            * (6 * g["key_head_dim"] * g["value_head_dim"] + 2 * GDN_CHUNK * (g["key_head_dim"] + g["value_head_dim"]))
            if g
            else 0.0
        )

    # ------------------------------------------------------------------ op groups
    def _roof(self, flops: float, peak: float, ce: float, nbytes: float, be: float) -> float:
        return max(flops / (peak * ce) if flops else 0.0, nbytes / (self.bw * be) if nbytes else 0.0)

    def _allreduce(self, nbytes: float) -> float:
        """One TP all-reduce (the dense layers', and a MoE layer's with its experts split by TP): a ring whose bus is
        NVLink's inside a node; when the TP group spans nodes the ring crosses the node interconnect, whose per-GPU
        bandwidth bounds its bus and whose latency every crossing adds (issue 36 item 3: a TP16 engine over two
        nodes was priced as if NVLink joined them)."""
        if self.tp <= 1:
            return 0.0
        eff = self.eff
        bus = eff.allreduce_bus.get(self.tp) or min(eff.allreduce_bus.values())
        latency = eff.allreduce_latency_s
        if self.tp_spans_nodes:
            bus = min(bus, self.inter["gb_s_per_gpu"] or bus)
            latency += 2 * self.inter["latency_us"] * 1e-6
        return latency + nbytes * 2 * (self.tp - 1) / self.tp / (bus * 1e9)

    def _nccl(self, table: dict, n: int, nbytes: float) -> float:
        """One NCCL all-gather / reduce-scatter of an ``nbytes`` buffer over ``n`` ranks: latency + bus time."""
        lat, bus = table["latency_us"], table["bus_gb_s"]
        k = min((x for x in lat if x >= n), default=max(lat))
        gb = bus[k]
        t = lat[k] * 1e-6
        if self.ep_spans_nodes:  # the ring crosses the node interconnect: its per-GPU bandwidth bounds the bus
            gb = min(gb, self.inter["gb_s_per_gpu"] or gb)
            t += 2 * self.inter["latency_us"] * 1e-6
        return t + nbytes * (n - 1) / n / (gb * 1e9)

    def _ep_exchange(self, tokens: float) -> float:
        """vLLM's default exchange of a MoE layer with attention-DP (all2all_backend allgather_reducescatter): the
        ranks all-gather their tokens' hidden states and router logits (BF16) before the experts and reduce-scatter
        the experts' output after; every rank then runs its experts (its EP share, or its TP slice of every expert)
        over all the DP group's tokens. The exchange runs over the DP group, or with sequence-parallel MoE
        (``sp_moe``) over the EP group of TP x DP ranks, each sending its 1/TP chunk, followed by a TP all-gather of
        the layer's output (vllm/distributed/device_communicators/all2all.py AgRsAll2AllManager: get_ep_group() if
        is_sequence_parallel else get_dp_group(); the MoE blocks' sequence_parallel_chunk and
        tensor_model_parallel_all_gather, e.g. models/qwen3_moe.py)."""
        if not self.moe or self.dp <= 1:
            return 0.0
        group = tokens * self.dp
        gather = group * (self.hidden + self.e_total) * 2.0
        scatter = group * self.hidden * 2.0
        ranks = self.tp * self.dp if self.sp_moe else self.dp
        t = self._nccl(self.eff.allgather, ranks, gather) + self._nccl(self.eff.reducescatter, ranks, scatter)
        if self.sp_moe:
            t += self._nccl(self.eff.allgather, self.tp, tokens * self.hidden * 2.0)
        return t

    def _mla_decode(self, b: float, ctx: float, block: bool) -> dict:
        """MLA attention of ``b`` decoding sequences on one stage, from the measured MLA decode block (perf.MlaFit):
        FlashMLA / FlashInfer-MLA reads every sequence's latent KV (replicated on every TP rank) and computes, per
        local head, the latent query against it, so it is the slower of those bytes and FLOPs. In a decode-only step
        (``block``) the whole block is the fit: its per-layer fixed time, the projections' weights read (or their
        FLOPs) and the attention; in a step that carries prefill chunks the projections run as GEMMs over every
        token (stage()) and only the attention comes from the fit."""
        f, layers = self.mla_fit, self.attn_layers / self.pp
        kv = b * ctx * self.kv_tok * self.pp  # kv_tok is per stage; the fit is per layer
        per_layer = kv / self.attn_layers
        aflops = 2 * b * ctx * self.q_heads * self.mla_attn_width
        attn = max(per_layer / (self.bw * f.kv_bandwidth), aflops / (self.peak_bf16 * f.attention_compute))
        out = {"attention": layers * attn}
        if block:
            w = self.mla_weight_bytes
            flops = self.mla_flops_tok / self.peak + self.mla_flops_tok_bf16 / self.peak_bf16
            g = max(w / (self.bw * f.weight_bandwidth), b * flops / f.gemm_compute)
            out["mla_projections"] = layers * (f.launch_s + g)
        else:
            out["attention"] += layers * self.eff.attn_launch_s
        return out

    def _dense_gemms(self, b: float, chunk: float) -> tuple[float, float]:
        """(GEMMs, shared expert) of one stage: every weight matrix over the rows it sees. A decode-only step of an MLA
        model leaves the attention block's own GEMMs to the measured block (``_mla_decode``)."""
        eff, tokens = self.eff, b + chunk
        t = shared = 0.0
        mla_block = self.mla_fit is not None and not chunk
        for layers, k, n, kind, which in self.gemms:
            rows = tokens if which == "all" else (b if which == "decode" else chunk)
            if not rows or (mla_block and kind.startswith("mla")):
                continue
            if kind in ("bf16", "mla_bf16"):
                t += layers * eff.bf16.time(rows, (k, n), 2.0, (self.peak_bf16, self.bw))
            elif kind == "shared":
                shared += layers * eff.gemm.time(rows, (k, n), self.bpp, (self.peak, self.bw))
            else:
                t += layers * eff.gemm.time(rows, (k, n), self.bpp, (self.peak, self.bw))
        return t / self.pp, shared / self.pp

    def _moe(self, tokens: float, shared: float) -> dict:
        """The routed experts of one stage (vLLM fused_experts over the DP group's tokens), the shared expert beside
        them up to 256 tokens a step, and the DP group's exchange."""
        eff, pp = self.eff, self.pp
        group_tokens = tokens * self.dp
        touched = skew.touched_share(self.e_total, self.k, group_tokens, eff.routing_skew)
        flops = 2 * self.routed_active * group_tokens / self.moe_width
        mf = eff.moe_for(self.ep, self.moe_tp)  # EP (an expert map), one rank, or every expert split by TP
        routed = self.moe_layers / pp * mf.launch_s + self._roof(
            flops, self.peak, mf.compute, self.expert_bytes * touched, mf.bandwidth
        )
        if mf.pair_bandwidth:  # sorting / scattering every routed pair (local or not) through the kernel
            pairs = group_tokens * self.k * self.moe_layers / pp
            routed += pairs * self.hidden * 2.0 / (self.bw * mf.pair_bandwidth)
        if tokens <= SHARED_EXPERT_STREAM_TOKENS:  # the shared expert runs beside the routed experts
            out = {"moe": max(routed, shared), "shared_expert": 0.0}
        else:
            out = {"moe": routed, "shared_expert": shared}
        out["ep_exchange"] = self.moe_layers / pp * self._ep_exchange(tokens)
        return out

    def _attention(self, b: float, chunk: float, ctx_dec: float, ctx_pre: float) -> dict:
        """Decode attention over the ``b`` sequences' KV (and GDN state), prefill attention and GDN scan of a chunk."""
        eff, pp, out = self.eff, self.pp, {}
        if b and self.mla_fit is not None:
            out.update(self._mla_decode(b, ctx_dec, not chunk))
        elif b:
            per_layer = eff.attn_launch_s + b * self.kv_heads * eff.attn_per_seq_s
            out["attention"] = self.attn_layers / pp * per_layer + b * ctx_dec * self.kv_tok / (
                self.bw * eff.attn_bandwidth
            )
        if b:
            out["gdn"] = b * 2 * self.state_seq / (self.bw * eff.gdn_state_bandwidth) if self.state_seq else 0.0
        if chunk:
            frac = min(1.0, max(0.0, math.log2(max(ctx_pre * 2, 1) / 1024) / 2))  # 1k tokens short .. 4k long
            ae = eff.attn_prefill_short + (eff.attn_prefill_long - eff.attn_prefill_short) * frac
            attn_flops = self.attn_layers / pp * 2 * self.q_heads * (self.d_qk + self.d_v) * chunk * ctx_pre
            out["attention_prefill"] = attn_flops / (self.peak_bf16 * ae)
            if self.lin_layers:
                out["gdn_scan"] = (
                    self.lin_layers / pp * self.gdn_flops_tok * chunk / (self.peak_bf16 * eff.gdn_scan_compute)
                )
        return out

    def stage(self, b: float, chunk: float = 0.0, ctx_dec: float = 0.0, ctx_pre: float = 0.0) -> dict:
        """One pipeline stage of one step (1/PP of the layers) for ``b`` decoding sequences and a ``chunk``."""
        eff, pp = self.eff, self.pp
        tokens = b + chunk
        gemm, shared = self._dense_gemms(b, chunk)
        out = {"gemm": gemm}
        sampled = b + (1 if chunk else 0)
        lm = (self.hidden, self.vocab / self.tp)
        out["lm_head"] = eff.bf16.time(sampled, lm, 2.0, (self.peak_bf16, self.bw)) / pp
        if self.moe:
            out.update(self._moe(tokens, shared))
        out.update(self._attention(b, chunk, ctx_dec, ctx_pre))
        en = eff.engine
        out["elementwise"] = (
            self.layers
            / pp
            * (
                en["elementwise_kernels_per_layer"] * en["elementwise_launch_us"] * 1e-6
                + tokens
                * self.hidden
                * (en["elementwise_bytes_per_hidden"] + en["activation_bytes_per_hidden"] / self.tp)
                / (self.bw * en["elementwise_bandwidth"])
            )
        )
        # after attention and after the MLP; a sequence-parallel MoE layer gathers over TP instead (ep_exchange)
        reductions = 2 * self.layers - (self.moe_layers if self.sp_moe else 0)
        out["allreduce"] = reductions / pp * self._allreduce(tokens * self.hidden * 2.0)
        if pp > 1:
            gb = (self.inter["gb_s_per_gpu"] if self.pp_spans_nodes else 0) or self.eff.link_gb_s
            out["p2p"] = en["p2p_latency_us"] * 1e-6 + tokens * self.hidden * 2.0 / (gb * 1e9)
        out["cpu"] = en["step_cpu_overhead_ms"] * 1e-3 / pp
        return out

    def step(self, b: float, chunk: float = 0.0, ctx_dec: float = 0.0, ctx_pre: float = 0.0) -> float:
        """Seconds for one step of the engine: every pipeline stage in turn for micro-batches of b/PP sequences."""
        key = (round(b, 3), round(chunk, 1), round(ctx_dec), round(ctx_pre))
        t = self._cache.get(key)
        if t is None:
            t = self._cache[key] = self.pp * sum(self.stage(b / self.pp, chunk, ctx_dec, ctx_pre).values())
        return t

    def prefill_overhead(self) -> float:
        return self.eff.engine["prefill_request_overhead_ms_per_layer"] * 1e-3 * self.layers


# --------------------------------------------------------------------------- prompt-length distribution


# --------------------------------------------------------------------------- aggregated engines


@dataclass
class Point:
    """Latency of one DP rank at a batch and load."""

    b: float
    lam: float
    tpot_p50: float
    tpot_p95: float
    ttft_p50: float
    ttft_p95: float
    ttft_mean: float
    rho: float
    mixed_share: float
    t_decode: float
    t_mixed: float
    e2e: float
    stable: bool
    slots: SlotWait | None = None  # open traffic: the wait for a free sequence slot, already in TTFT and E2E
    kind: str = "serve"  # serve | prefill (a P/D prefill rank: no decodes) | decode (a P/D decode rank: no prefill)

    def doc(self) -> dict:
        def ms(x: float):
            return None if math.isinf(x) else round(x * 1000, 1)

        slots = {}
        if self.slots is not None:
            slots = {
                "slot_utilization": None if math.isinf(self.slots.rho) else round(self.slots.rho, 3),
                "slot_wait_probability": round(self.slots.prob, 3),
                "slot_wait_p95_ms": ms(self.slots.p95),
            }
        out = {
            "ttft_p50_ms": ms(self.ttft_p50),
            "ttft_p95_ms": ms(self.ttft_p95),
            "ttft_mean_ms": ms(self.ttft_mean),
            "tpot_p50_ms": ms(self.tpot_p50),
            "tpot_p95_ms": ms(self.tpot_p95),
            "decode_step_ms": ms(self.t_decode),
            "mixed_step_ms": ms(self.t_mixed),
            "mixed_step_share": round(self.mixed_share, 3),
            "prefill_utilization": round(self.rho, 3),
            "sequences_per_rank": round(self.b, 1),
            "arrival_rate_per_rank": round(self.lam, 3),
            "e2e_s": None if math.isinf(self.e2e) else round(self.e2e, 3),
        }
        out.update(slots)
        if self.kind in NOT_APPLICABLE:  # what a P/D pool does not do has no figure (null), and the plan says why
            keys, why = NOT_APPLICABLE[self.kind]
            out.update(dict.fromkeys(keys))
            out["not_applicable"] = why
        return out


# The figures a P/D pool's rank has none of, and why (issue 36: no 0.0 placeholders).
NOT_APPLICABLE = {
    "prefill": (
        ("tpot_p50_ms", "tpot_p95_ms", "decode_step_ms", "mixed_step_share", "sequences_per_rank"),
        "a P/D prefill engine decodes no tokens: TPOT, decode steps and decoding sequences are the decode pool's",
    ),
    "decode": (
        ("ttft_p50_ms", "ttft_p95_ms", "ttft_mean_ms", "mixed_step_ms", "mixed_step_share", "prefill_utilization"),
        "a P/D decode engine prefills nothing: TTFT is the prefill pool's (the plan's latency adds the wait for a "
        "decode slot)",
    ),
}


@dataclass
class Prefill:
    """How one rank prefills: ``k`` prompts (of mean length) share each prefill step of ``t_step`` seconds; a prompt
    longer than the step's token room takes ``n`` chunks."""

    k: float
    n: int
    t_step: float  # a step that carries the prefill chunk(s) (and the decodes of the rank)
    share: float  # seconds of prefill steps one mean prompt occupies: n x t_step / k


def _room(w: Workload, b: float) -> float:
    return max(1.0, w.budget - b)


def _ctx(w: Workload, b: float) -> float:
    """Mean context of the decoding sequences of a step (none without decodes)."""
    return w.prompt_mean + w.output_mean / 2 if b else 0.0


def _chunk_step(em: EngineModel, b: float, w: Workload, k: float, length: float) -> tuple[int, float]:
    """(chunks, seconds of one chunk's step) for a prompt of ``length``, ``k`` such prompts sharing a step."""
    room = _room(w, b)
    n = max(1, math.ceil(length / room))
    tokens = length / n if n > 1 else min(room, k * length)
    return n, em.step(b, tokens, _ctx(w, b), length / 2)


def prefill_plan(em: EngineModel, b: float, w: Workload, lam: float, util: float) -> Prefill:
    """The fewest prompts per prefill step (vLLM fills a step's token budget with waiting prompts) that keep the
    rank's prefill busy share under ``util``; k = 1 at light load."""
    room = _room(w, b)
    kmax = max(1.0, math.floor(room / w.prompt_mean)) if w.prompt_mean < room else 1.0
    k = 1.0
    while True:
        n, t = _chunk_step(em, b, w, k, w.prompt_mean)
        share = n * t / k
        if lam * share <= util or k >= kmax:
            return Prefill(k, n, t, share)
        k = min(kmax, max(k + 1, math.ceil(k * lam * n * t / (k * util))))


PREFILL_UTIL = 0.9  # a rank batches waiting prompts into a prefill step until its prefill is busy at most this share


def closed_loop_factor(b: float) -> float:
    """Mean TTFT / unqueued TTFT of a closed population of ``b`` clients that resubmit on completion: 1 + log2(b) / 8,
    at most 2 (aiconfigurator 0.12.0 sdk/backends/vllm_backend.py _ttft_queuing_factor, fitted to measured vLLM
    TTFTs at fixed concurrency 1-64)."""
    return 1.0 if b <= 1 else min(1.0 + math.log2(b) / 8.0, 2.0)


@dataclass(frozen=True)
class RankLoad:
    """What a rank's TTFT depends on besides the engine: decoding sequences, arrival rate, mean step time, fixed
    extra time (P/D KV transfer) and whether the clients form a closed loop."""

    b: float
    lam: float
    t_bar: float = 0.0
    extra: float = 0.0
    closed: bool = False
    servers: int = 1  # ranks whose prefill serves one queue (routing.shared_queue); ``lam`` is per rank


def prefill_wait(lam: float, es: float, es2: float, servers: int) -> tuple[float, float, float, float]:
    """(mean, p50, p95 of the wait for a rank's prefill, utilisation): one rank, an M/G/1 queue (Pollaczek-Khinchine,
    the exponential tail); ``servers`` ranks behind a least-loaded router offered ``servers x lam``: Erlang C over
    them and the wait of the rank a request is sent to (``jsq_wait``)."""
    if servers <= 1:
        wq, rho = mg1_wait(lam, es, es2)
        return wq, wait_quantile(wq, rho, 0.5), wait_quantile(wq, rho, 0.95), rho
    cv2 = es2 / (es * es) - 1.0 if es > 0 else 0.0
    sw = jsq_wait(slot_wait(lam * servers, servers, es, cv2), 1, es, cv2)
    if not sw.stable:
        return math.inf, math.inf, math.inf, sw.rho
    return sw.mean, sw.p50, sw.p95, sw.rho


def _prompt_queue(per_token: float, pts: list, lam: float, servers: int) -> tuple[float, float, float, float]:
    """``prefill_wait`` for prompts of the quantile lengths ``pts``, each served ``per_token`` seconds a token."""
    svc = [per_token * x for x in pts]
    es = sum(svc) / len(svc)
    return prefill_wait(lam, es, sum(x * x for x in svc) / len(svc), servers)


def _ttft(em: EngineModel, w: Workload, pf: Prefill, ld: RankLoad):
    """TTFT p50 / p95 / mean and the prefill utilisation: an M/G/1 queue whose server is the rank's prefill (each
    prompt occupies its token share of the prefill steps), plus the prompt's own step(s), the step in flight,
    vLLM's per-request prefill overhead and ``extra`` (the KV transfer of P/D). A closed population (concurrent
    sessions, no arrival rate) waits by the measured closed-loop factor instead, exponentially distributed."""
    if w.queue == "chain" and not ld.closed:
        return _ttft_tokens(em, w, ld)
    b, lam, t_bar, extra = ld.b, ld.lam, ld.t_bar, ld.extra
    med, p95, pts = prompt_points(w.prompt_mean, w.prompt_p95)
    wq, w50, w95, rho = _prompt_queue(pf.share / w.prompt_mean, pts, lam, ld.servers)

    def own(length: float, k: float) -> float:
        n, t = _chunk_step(em, b, w, k, length)
        return n * t

    extra += em.prefill_overhead()
    if ld.closed:
        # the measured factor covers every wait of a closed population, prompts batched into one step included:
        # it multiplies the TTFT of the prompt alone in its step
        f = closed_loop_factor(b) - 1.0  # mean wait as a share of the unqueued TTFT
        return (
            (own(med, 1.0) + extra) * (1 + math.log(2) * f),
            (own(p95, 1.0) + extra) * (1 + math.log(20) * f),
            (own(w.prompt_mean, 1.0) + extra) * (1 + f),
            rho,
        )
    s50, s95 = own(med, pf.k), own(p95, pf.k)
    p50 = s50 + w50 + t_bar / 2 + extra
    # p95 of (own prefill + wait), independent: the medians plus the root-sum-square of the two tails
    p95v = s50 + w50 + math.hypot(s95 - s50, w95 - w50) + t_bar + extra
    mean = own(w.prompt_mean, pf.k) + wq + t_bar / 2 + extra
    return p50, p95v, mean, rho


def _ttft_tokens(em: EngineModel, w: Workload, ld: RankLoad):
    """TTFT p50 / p95 / mean and the prefill utilisation of open traffic with policy ``slot_queue: chain``: the
    prompt waits for the tokens ahead of it (an M/G/1 queue in tokens: vLLM fills each step's token room with the
    admitted prompts' chunks in arrival order, so the server is the room of a full step, ``room`` tokens a
    ``step(b, room)``), then its own chunks ride in the steps (a prompt shorter than the room shares its step with the
    tokens that arrive over it), plus the step in flight, vLLM's per-request prefill overhead and ``extra`` (the KV
    transfer of P/D). Checked against the queue simulation (tests/bench/test_planner_queue_sim_bench.py)."""
    b, lam, t_bar = ld.b, ld.lam, ld.t_bar
    extra = ld.extra + em.prefill_overhead()
    med, p95, pts = prompt_points(w.prompt_mean, w.prompt_p95)
    room, ctx = _room(w, b), _ctx(w, b)
    per_token = em.step(b, room, ctx, w.prompt_mean / 2) / room  # a token's share of a full step
    wq, w50, w95, rho = _prompt_queue(per_token, pts, lam, ld.servers)

    # a prefill rank of a queue over several ranks (vLLM's balancer, a least-loaded router) is sent an arrival while
    # it steps only when every rank is busy: Erlang C over them; a decoding rank always steps
    crowd = 1.0
    if not b and ld.servers > 1:
        crowd = erlang_c(ld.servers, ld.servers * lam * em.step(0.0, min(room, w.prompt_mean), ctx, w.prompt_mean / 2))

    def own(length: float) -> float:
        n = max(1, math.ceil(length / room))
        if n > 1:
            return n * em.step(b, room, ctx, length / 2)
        carry = crowd * lam * w.prompt_mean * em.step(b, length, ctx, length / 2)  # others' tokens over its step
        return em.step(b, min(room, length + carry), ctx, length / 2)

    s50, s95, s_mean = own(med), own(p95), own(w.prompt_mean)
    # the step in flight when the prompt comes: uniform over a step, always one on a decoding rank; a prefill rank
    # steps only while it has prompts, so an arrival finds one about as often as a step holds an arrival (on a
    # queue over several ranks, as often as every rank is busy)
    t_in, busy = (t_bar, 1.0) if b else (s_mean, min(1.0, lam * s_mean) if ld.servers <= 1 else crowd)

    def in_flight(u: float) -> float:
        return max(0.0, u - (1 - busy)) / busy * t_in if busy > 0 else 0.0

    r50, r95 = in_flight(0.5), in_flight(0.95)
    p50 = s50 + w50 + r50 + extra
    # p95 of (own prefill + wait + step in flight), independent: the medians plus the root-sum-square of the tails
    p95v = s50 + w50 + r50 + math.hypot(s95 - s50, w95 - w50, r95 - r50) + extra
    mean = s_mean + wq + busy * t_in / 2 + extra
    return p50, p95v, mean, rho


def aggregated(em: EngineModel, b: float, w: Workload, lam: float | None = None, servers: int = 1) -> Point:
    """Latency of one rank decoding ``b`` sequences while prefilling arrivals at ``lam`` per second (closed loop
    ``lam = b / E2E`` when None), prefill chunks mixed into the decode steps (vLLM chunked prefill); ``servers``
    ranks serve one queue with it (a least-loaded router)."""
    ctx = w.prompt_mean + w.output_mean / 2
    b = max(b, 1.0)
    t_dec = em.step(b, 0.0, ctx)
    out_steps = max(1.0, w.output_mean - 1)
    closed = lam is None
    util = PREFILL_UTIL
    pf = prefill_plan(em, b, w, 0.0, util)
    rate, t_bar, stable = (lam or 0.0), t_dec, True
    for _dummy in range(6):
        extra = pf.n * (pf.t_step - t_dec) / pf.k  # decode time one request's prefill adds to the rank's steps
        if closed:
            # b clients resubmit on completion: rate = b / E2E(t_bar) and t_bar = t_dec / (1 - rate x extra)
            c0 = pf.n * pf.t_step + em.prefill_overhead()
            q = c0 - b * extra - t_dec * out_steps
            t_new = (-q + math.sqrt(q * q + 4 * out_steps * t_dec * c0)) / (2 * out_steps)
            rate = b / (c0 + out_steps * t_new)
        else:
            load = rate * extra
            if load >= 1:
                stable = False
                break
            t_new = t_dec / (1 - load)
        pf_new = prefill_plan(em, b, w, rate, util)
        done = abs(t_new - t_bar) < 1e-6 and pf_new.k == pf.k
        t_bar, pf = t_new, pf_new
        if done:
            break
    if not stable:
        inf = math.inf
        return Point(b, rate, inf, inf, inf, inf, inf, 1.0, 1.0, t_dec, pf.t_step, inf, False)
    phi = min(1.0, rate * pf.n * t_bar / pf.k)
    tpot95 = tpot_p95(
        StepMix(t_dec, pf.t_step, t_bar, pf.n * (pf.t_step - t_dec) / pf.k),
        rate * t_bar,
        (w.output_mean, w.output_p95),
        w.prompt_cv2 + (min(1.0, w.hold_cv2) if closed else 1.0),
    )
    p50, p95, mean, rho = _ttft(em, w, pf, RankLoad(b, rate, t_bar, 0.0, closed, servers))
    e2e = mean + out_steps * t_bar
    return Point(b, rate, t_bar, tpot95, p50, p95, mean, rho, phi, t_dec, pf.t_step, e2e, rho < 1)


def with_slot_queue(p: Point, slots: int, cv2: float, queue: tuple = (1, False), holds: tuple = (0.0, None)) -> Point:
    """``p`` (one rank under open traffic at ``p.lam``) with the wait for one of its ``slots`` sequence slots
    (max_num_seqs) added: TTFT mean and E2E grow by the wait's mean, TTFT p50 by the wait's p50, TTFT p95 is the
    bound of ``with_wait_p95``. ``e2e`` is then the client's (queued time included). ``queue`` = (ranks, jsq):
    ``ranks`` share one queue (the DP ranks of one engine: vLLM's internal load balancer sends each request to the
    least loaded rank), so it has ``ranks x slots`` servers and ``ranks x p.lam`` arrivals; ``jsq``: the ranks are
    engines a least-loaded router picks from (``queueing.jsq_wait``); ``holds`` = (``hold_full``, ``hold_at``):
    a request's hold when every slot decodes (the pace the slots free at when an arrival waits) and, for policy
    ``slot_queue: chain``, its hold with ``m`` slots of its rank busy, ``hold_at(m)``; given, the wait is
    ``queueing.chain_slot_wait``'s (holds that grow with the batch), else Erlang C on the mean hold ``p.e2e``. A rank
    whose slots are offered more than they hold is unstable."""
    if not p.stable:
        return p
    ranks, jsq = queue
    hold_full, hold_at = holds
    if hold_at is not None:
        slow = p.tpot_p50 / p.t_decode if p.t_decode > 0 else 1.0
        sw = chain_slot_wait(p.lam * ranks, (slots, ranks), (hold_at, hold_full), cv2, (1 + slow * slow) / 2)
    else:
        sw = slot_wait(p.lam * ranks, slots * ranks, p.e2e, cv2, hold_full)
    if jsq:
        sw = jsq_wait(sw, slots, max(p.e2e, hold_full), cv2)
    if not sw.stable:
        inf = math.inf
        return replace(p, ttft_p50=inf, ttft_p95=inf, ttft_mean=inf, e2e=inf, stable=False, slots=sw)
    return replace(
        p,
        ttft_p50=p.ttft_p50 + sw.p50,
        ttft_p95=with_wait_p95(p.ttft_p50, p.ttft_p95, sw),
        ttft_mean=p.ttft_mean + sw.mean,
        e2e=p.e2e + sw.mean,
        slots=sw,
    )


def decode_only(em: EngineModel, b: float, w: Workload) -> Point:
    """A P/D decode rank: decode steps only (its prompts arrive as KV)."""
    ctx = w.prompt_mean + w.output_mean / 2
    b = max(b, 1.0)
    t = em.step(b, 0.0, ctx)
    out_steps = max(1.0, w.output_mean - 1)
    return Point(b, b / (out_steps * t), t, t, 0.0, 0.0, 0.0, 0.0, 0.0, t, t, out_steps * t, True, kind="decode")


def prefill_only(em: EngineModel, lam: float, w: Workload, transfer_s: float, servers: int = 1) -> Point:
    """A P/D prefill rank: prompts batched up to the token budget, no decodes; TTFT adds the KV transfer.
    ``servers``: ranks that serve one queue with it (a least-loaded router)."""
    pf = prefill_plan(em, 0.0, w, lam, PREFILL_UTIL)
    p50, p95, mean, rho = _ttft(em, w, pf, RankLoad(0.0, lam, 0.0, transfer_s, servers=servers))
    return Point(0.0, lam, 0.0, 0.0, p50, p95, mean, rho, 0.0, 0.0, pf.share, mean, rho < 1, kind="prefill")


def max_batch(fn, slo_s: float, cap: int) -> tuple[int, object]:
    """The largest batch in [1, cap] whose ``fn(b).tpot_p95`` meets ``slo_s`` (0, None when even 1 misses): TPOT p95
    grows with the batch, nearly linearly, so the search interpolates between the last batch that meets the SLO and
    the first that misses it (false position), halving the interval when interpolation does not."""

    def excess(p) -> float:
        return p.tpot_p95 - slo_s if p.stable and not math.isinf(p.tpot_p95) else math.inf

    hi = max(1, int(cap))
    p = fn(1)
    if excess(p) > 0:
        return 0, p
    lo, best, e_lo = 1, p, excess(p)
    p = fn(hi)
    if excess(p) <= 0:
        return hi, p
    e_hi, bisect = excess(p), False
    while hi - lo > 1:
        if bisect or math.isinf(e_hi) or e_hi <= e_lo:
            mid = (lo + hi) // 2
        else:
            mid = min(hi - 1, max(lo + 1, int(lo + (hi - lo) * (-e_lo) / (e_hi - e_lo))))
        p = fn(mid)
        e = excess(p)
        width = hi - lo
        if e <= 0:
            lo, best, e_lo = mid, p, e
        else:
            hi, e_hi = mid, e
        bisect = (hi - lo) * 2 > width  # interpolation barely moved a bound: halve next
    return lo, best


def kv_transfer_s(c: EngineCtx, length: float, ranks: int, link_gb_s: float, latency_s: float) -> float:
    """Moving one prompt's KV (and GDN state) from the prefill engine's ranks to the decode engine."""
    nbytes = length * sz.kv_bytes_per_token(c.model, c.kv_bytes) + sz.gdn_state_bytes_per_seq(c.model, 1, 1, 0)
    return latency_s + nbytes / (max(ranks, 1) * link_gb_s * 1e9)
