# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""The step-latency model: one engine step per GPU as op groups, each the slower of compute and memory, plus
collectives and fixed kernel costs (docs/planner.md, Latency). latency.py turns its steps into a rank's TPOT and TTFT
at a load.

Units: seconds, bytes, FLOPs. ``b`` is the number of decoding sequences of one DP rank in a step, ``chunk`` the prefill
tokens the same step carries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import perf, skew
from . import sizing as sz
from .engine import EngineCtx, peak_flops
from .queueing import lognormal_cv2
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
