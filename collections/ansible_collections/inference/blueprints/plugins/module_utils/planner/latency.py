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
import statistics
from dataclasses import dataclass, replace

from . import perf
from . import sizing as sz
from .engine import EngineCtx, peak_flops
from .structs import Layout

Z95 = 1.6449  # standard normal 95th percentile
_NORMAL = statistics.NormalDist()
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

    @property
    def hold_cv2(self) -> float:
        """Squared coefficient of variation of how long a request holds its sequence slot: its output length's, from
        a log-normal fitted to the output mean and p95 (the decode steps dominate the hold)."""
        return lognormal_cv2(self.output_mean, self.output_p95)


def _bf16_peak(gpu: dict) -> float:
    return gpu["bf16_tflops"] * 1e12


def gemm_list(m: dict, tp: int) -> list[tuple[float, float, float, str]] | None:
    """The dense GEMMs of one TP rank as (layers, K, N, kind): kind "w" runs in the weights' precision, "shared" too
    (a MoE layer's shared expert), "bf16" stays unquantized (the MoE router). None when the model entry lacks the
    layer shapes."""
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
        qk, v, qr, kvr = (
            ml["qk_nope_head_dim"] + ml["qk_rope_head_dim"],
            ml["v_head_dim"],
            ml["q_lora_rank"],
            ml["kv_lora_rank"],
        )
        out += [
            (layers, h, qr, "w"),  # q_a and kv_a are replicated on every TP rank
            (layers, h, kvr + ml["qk_rope_head_dim"], "w"),
            (layers, qr, heads * qk / tp, "w"),
            (layers, kvr, heads * (ml["qk_nope_head_dim"] + v) / tp, "w"),
            (layers, heads * v / tp, h, "w"),
        ]
    else:
        hd, full = m["head_dim"], m["full_attention_layers"]
        q = heads * hd * (2 if m.get("attn_output_gate") else 1) / tp
        kv = 2 * max(1, m["num_key_value_heads"] // tp) * hd
        out += [(full, h, q + kv, "w"), (full, heads * hd / tp, h, "w")]
        g = m.get("gdn")
        if g:
            lin = layers - full
            nk, nv, dk, dv = g["num_key_heads"], g["num_value_heads"], g["key_head_dim"], g["value_head_dim"]
            out += [
                (lin, h, (2 * nk * dk + 2 * nv * dv) / tp, "w"),
                (lin, h, 2 * nv / tp, "w"),
                (lin, nv * dv / tp, h, "w"),
            ]
    if layers - moe_layers:
        inter = m["intermediate_size"]
        out += [(layers - moe_layers, h, 2 * inter / tp, "w"), (layers - moe_layers, inter / tp, h, "w")]
    if moe:
        shared = m.get("shared_expert_intermediate_size", 0)
        if shared:
            out += [(moe_layers, h, 2 * shared / tp, "shared"), (moe_layers, shared / tp, h, "shared")]
        out.append((moe_layers, h, m["experts"], "bf16"))
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
        self.ep = lay.ep if lay.ep > 1 else 1
        moe = m.get("kind") == "moe"
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
            self.gemms = [(self.layers, m["hidden_size"], per / m["hidden_size"], "w")] * 4
        self.bpp = sz.WEIGHT_BYTES[c.weights]
        self.vocab = lm_params / m["hidden_size"]
        self.routed_active = routed_active / pp
        shard = self.ep if self.ep > 1 else tp
        self.expert_bytes = wb["experts"] / (shard * pp)
        self.kv_tok = sz.kv_bytes_per_token_rank(m, c.kv_bytes, tp, pp, lay.dcp)
        self.state_seq = sz.gdn_state_bytes_per_seq(m, tp, pp, 0)
        if m["attention"] == "mla":
            mla = m["mla"]
            self.d_qk, self.d_v = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"], mla["v_head_dim"]
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
        self.ep_spans_nodes = self.ep > 1 and self.ep > topo.gpn
        self.pp_spans_nodes = tp * pp > topo.gpn
        self.inter = perf.interconnect(topo.interconnect)
        self._cache: dict = {}

    # ------------------------------------------------------------------ op groups
    def _roof(self, flops: float, peak: float, ce: float, nbytes: float, be: float) -> float:
        return max(flops / (peak * ce) if flops else 0.0, nbytes / (self.bw * be) if nbytes else 0.0)

    def _allreduce(self, nbytes: float) -> float:
        if self.tp <= 1:
            return 0.0
        eff = self.eff
        bus = eff.allreduce_bus.get(self.tp) or min(eff.allreduce_bus.values())
        return eff.allreduce_latency_s + nbytes * 2 * (self.tp - 1) / self.tp / (bus * 1e9)

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
        """vLLM's default expert-parallel exchange (all2all_backend allgather_reducescatter) for one MoE layer: the
        DP ranks all-gather their tokens' hidden states and router logits (BF16) before the experts and
        reduce-scatter the experts' output after; every rank then runs its local experts over all the DP group's
        tokens."""
        if self.ep <= 1 or self.dp <= 1:
            return 0.0
        group = tokens * self.dp
        gather = group * (self.hidden + self.e_total) * 2.0
        scatter = group * self.hidden * 2.0
        return self._nccl(self.eff.allgather, self.dp, gather) + self._nccl(self.eff.reducescatter, self.dp, scatter)

    def stage(self, b: float, chunk: float = 0.0, ctx_dec: float = 0.0, ctx_pre: float = 0.0) -> dict:
        """One pipeline stage of one step (1/PP of the layers) for ``b`` decoding sequences and a ``chunk``."""
        eff, pp = self.eff, self.pp
        tokens = b + chunk
        out = {}
        t = shared = 0.0
        for layers, k, n, kind in self.gemms:
            if kind == "bf16":
                t += layers * eff.bf16.time(tokens, (k, n), 2.0, (self.peak_bf16, self.bw))
            elif kind == "shared":
                shared += layers * eff.gemm.time(tokens, (k, n), self.bpp, (self.peak, self.bw))
            else:
                t += layers * eff.gemm.time(tokens, (k, n), self.bpp, (self.peak, self.bw))
        out["gemm"] = t / pp
        sampled = b + (1 if chunk else 0)
        lm = (self.hidden, self.vocab / self.tp)
        out["lm_head"] = eff.bf16.time(sampled, lm, 2.0, (self.peak_bf16, self.bw)) / pp
        if self.moe:
            group_tokens = tokens * (self.dp if self.ep > 1 else 1)
            touched = 1.0 - (1.0 - self.k / self.e_total) ** max(group_tokens, 0.0) if group_tokens > 0 else 0.0
            flops = 2 * self.routed_active * group_tokens / (self.ep if self.ep > 1 else self.tp)
            mf = eff.moe_for(self.ep)
            routed = self.moe_layers / pp * mf.launch_s + self._roof(
                flops, self.peak, mf.compute, self.expert_bytes * touched, mf.bandwidth
            )
            if mf.pair_bandwidth:  # sorting / scattering every routed pair (local or not) through the kernel
                pairs = group_tokens * self.k * self.moe_layers / pp
                routed += pairs * self.hidden * 2.0 / (self.bw * mf.pair_bandwidth)
            shared /= pp
            if tokens <= SHARED_EXPERT_STREAM_TOKENS:  # the shared expert runs beside the routed experts
                out["moe"], out["shared_expert"] = max(routed, shared), 0.0
            else:
                out["moe"], out["shared_expert"] = routed, shared
            out["ep_exchange"] = self.moe_layers / pp * self._ep_exchange(tokens)
        if b:
            out["attention"] = self.attn_layers / pp * eff.attn_launch_s + b * ctx_dec * self.kv_tok / (
                self.bw * eff.attn_bandwidth
            )
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
        out["allreduce"] = 2 * self.layers / pp * self._allreduce(tokens * self.hidden * 2.0)
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


def lognormal_sigma(mean: float, p95: float) -> float:
    """sigma of a log-normal with this mean and 95th percentile (0 when they are equal)."""
    if p95 <= mean:
        return 0.0
    r = math.log(p95 / mean)
    disc = Z95 * Z95 - 2 * r
    return Z95 - math.sqrt(disc) if disc > 0 else Z95


def prompt_points(mean: float, p95: float) -> tuple[float, float, list[float]]:
    """(median, p95, five quantile points at 10/30/50/70/90 %) of the log-normal prompt-length model."""
    s = lognormal_sigma(mean, p95)
    mu = math.log(mean) - s * s / 2
    zs = (-1.2816, -0.5244, 0.0, 0.5244, 1.2816)
    return math.exp(mu), p95, [math.exp(mu + s * z) for z in zs]


def mg1_wait(lam: float, es: float, es2: float) -> tuple[float, float]:
    """Mean waiting time of an M/G/1 queue (Pollaczek-Khinchine) and its utilisation; inf when saturated."""
    rho = lam * es
    if rho >= 1:
        return math.inf, rho
    return lam * es2 / (2 * (1 - rho)), rho


def wait_quantile(mean_wait: float, rho: float, p: float) -> float:
    """p-quantile of the waiting time, P(W > t) = rho exp(-rho t / E[W]) (exact for M/M/1, heavy-traffic M/G/1)."""
    if rho <= 0 or mean_wait <= 0 or rho <= 1 - p:
        return 0.0
    if math.isinf(mean_wait):
        return math.inf
    return mean_wait / rho * math.log(rho / (1 - p))


def erlang_c(servers: int, offered: float) -> float:
    """Probability that an arrival waits in an M/M/c queue of ``servers`` servers offered ``offered`` Erlangs
    (arrival rate x holding time); 1 when ``offered >= servers``. Erlang B by its recursion, then C from B: stable
    for thousands of servers."""
    if offered <= 0:
        return 0.0
    if offered >= servers:
        return 1.0
    b = 1.0
    for k in range(1, servers + 1):
        b = offered * b / (k + offered * b)
    rho = offered / servers
    return b / (1 - rho * (1 - b))


@dataclass(frozen=True)
class SlotWait:
    """Waiting for a free sequence slot: ``slots`` (max_num_seqs) servers, each request holding one for ``hold``
    seconds, Poisson arrivals at ``lam``."""

    rho: float  # offered / slots
    prob: float  # P(an arrival waits), Erlang C
    rate: float  # slots / hold - lam, scaled to M/G/c: the decay rate of the wait's tail, 1/s

    @property
    def stable(self) -> bool:
        return self.rho < 1

    @property
    def mean(self) -> float:
        return self.prob / self.rate if self.stable else math.inf

    @property
    def p50(self) -> float:
        return self.quantile(0.5)

    @property
    def p95(self) -> float:
        return self.quantile(0.95)

    def quantile(self, p: float) -> float:
        """The ``p``-quantile of the wait: 0 when at most 1 - p of arrivals wait."""
        if self.prob <= 1 - p:
            return 0.0
        if not self.stable or p >= 1:
            return math.inf
        return math.log(self.prob / (1 - p)) / self.rate


def _mgc_scale(c: int, rho: float, cv2: float) -> float:
    """M/G/c mean wait / M/M/c mean wait. For constant holds Cosmetatos' M/D/c approximation, half the M/M/c wait
    times 1 + (1 - rho)(c - 1)(sqrt(4 + 5c) - 2) / (16 rho c); between constant and exponential holds linear in cv2
    (Tijms); above, Allen-Cunneen's (1 + cv2) / 2."""
    cv2 = max(0.0, cv2)
    if cv2 >= 1:
        return (1 + cv2) / 2
    if rho <= 0:
        return 0.5
    # at most the M/M/c wait: the correction only matters near saturation, and constant holds never wait longer
    md = min(1.0, 0.5 * (1 + (1 - rho) * (c - 1) * (math.sqrt(4 + 5 * c) - 2) / (16 * rho * c)))
    return cv2 + (1 - cv2) * md


def slot_wait(lam: float, slots: int, hold: float, cv2: float = 1.0) -> SlotWait:
    """An M/G/c queue for one rank's sequence slots (``slots`` = max_num_seqs servers, Poisson arrivals at ``lam``,
    each request holding a slot ``hold`` seconds on average with squared coefficient of variation ``cv2``): an arrival
    waits with probability C (Erlang C, M/M/c), and a wait that happens is exponential with the M/M/c mean
    1 / (c / hold - lam) scaled to M/G/c (``_mgc_scale``): P(W > t) = C exp(-t rate). Against a simulation of the
    same queue (tests/unit/planner/test_latency_model.py) P(wait) is within a few per cent and the wait's p95 and
    mean within 20 % (the simulation's own spread over seeds is about 15 %)."""
    offered = lam * hold
    slots = max(1, int(slots))
    if offered <= 0 and not math.isinf(hold):
        return SlotWait(0.0, 0.0, math.inf)
    if math.isinf(hold) or offered >= slots:
        return SlotWait(offered / slots if not math.isinf(hold) else math.inf, 1.0, 0.0)
    rate = (slots / hold - lam) / _mgc_scale(slots, offered / slots, cv2)
    return SlotWait(offered / slots, erlang_c(slots, offered), rate)


def lognormal_cv2(mean: float, p95: float) -> float:
    """Squared coefficient of variation of a log-normal with this mean and 95th percentile (0 when they are equal)."""
    sigma = lognormal_sigma(mean, p95)
    return math.exp(sigma * sigma) - 1.0


def lognormal_quantile(p50: float, p95: float, u: float) -> float:
    """The ``u``-quantile of a log-normal through this median and 95th percentile (``p95`` when it has no spread)."""
    if p50 <= 0 or p95 <= p50 or math.isinf(p95):
        return p95
    return p50 * math.exp(math.log(p95 / p50) / Z95 * _NORMAL.inv_cdf(u))


def with_wait_p95(p50: float, p95: float, sw: SlotWait) -> float:
    """An upper bound of the 95th percentile of TTFT + a slot wait independent of it: the least over splits ``a`` of
    TTFT's (1 - a)-quantile plus the wait's (0.95 + a)-quantile (P(sum > that) <= a + 0.05 - a), TTFT log-normal
    through its p50 and p95. When fewer than 5 % wait it is TTFT's (1 - (0.05 - C))-quantile: a few per cent of
    waits still move the p95 of the sum, which adding the wait's own p95 (0) would miss."""
    if sw.prob <= 1e-9:  # nobody waits (to rounding)
        return p95
    if not sw.stable:
        return math.inf
    best = min(
        lognormal_quantile(p50, p95, 1 - a) + sw.quantile(0.95 + a) for a in (0.05 * k / 16 for k in range(1, 16))
    )
    if sw.prob < 0.05:  # the split at which the wait's quantile is 0
        best = min(best, lognormal_quantile(p50, p95, 0.95 + sw.prob))
    return best


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
        return out


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


def _ttft(em: EngineModel, w: Workload, pf: Prefill, ld: RankLoad):
    """TTFT p50 / p95 / mean and the prefill utilisation: an M/G/1 queue whose server is the rank's prefill (each
    prompt occupies its token share of the prefill steps), plus the prompt's own step(s), the step in flight,
    vLLM's per-request prefill overhead and ``extra`` (the KV transfer of P/D). A closed population (concurrent
    sessions, no arrival rate) waits by the measured closed-loop factor instead, exponentially distributed."""
    b, lam, t_bar, extra = ld.b, ld.lam, ld.t_bar, ld.extra
    med, p95, pts = prompt_points(w.prompt_mean, w.prompt_p95)
    scale = pf.share / w.prompt_mean
    svc = [scale * x for x in pts]
    es = sum(svc) / len(svc)
    es2 = sum(s * s for s in svc) / len(svc)
    wq, rho = mg1_wait(lam, es, es2)

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
    w50, w95 = wait_quantile(wq, rho, 0.5), wait_quantile(wq, rho, 0.95)
    p50 = s50 + w50 + t_bar / 2 + extra
    # p95 of (own prefill + wait), independent: the medians plus the root-sum-square of the two tails
    p95v = s50 + w50 + math.hypot(s95 - s50, w95 - w50) + t_bar + extra
    mean = own(w.prompt_mean, pf.k) + wq + t_bar / 2 + extra
    return p50, p95v, mean, rho


def aggregated(em: EngineModel, b: float, w: Workload, lam: float | None = None, util: float = 0.9) -> Point:
    """Latency of one rank decoding ``b`` sequences while prefilling arrivals at ``lam`` per second (closed loop
    ``lam = b / E2E`` when None), prefill chunks mixed into the decode steps (vLLM chunked prefill)."""
    ctx = w.prompt_mean + w.output_mean / 2
    b = max(b, 1.0)
    t_dec = em.step(b, 0.0, ctx)
    out_steps = max(1.0, w.output_mean - 1)
    closed = lam is None
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
    phi95 = min(1.0, phi + Z95 * math.sqrt(phi * (1 - phi) / out_steps))
    tpot95 = t_dec + phi95 * (pf.t_step - t_dec)
    p50, p95, mean, rho = _ttft(em, w, pf, RankLoad(b, rate, t_bar, 0.0, closed))
    e2e = mean + out_steps * t_bar
    return Point(b, rate, t_bar, tpot95, p50, p95, mean, rho, phi, t_dec, pf.t_step, e2e, rho < 1)


def with_slot_queue(p: Point, slots: int, cv2: float, ranks: int = 1) -> Point:
    """``p`` (one rank under open traffic at ``p.lam``) with the wait for one of its ``slots`` sequence slots
    (max_num_seqs) added: TTFT mean and E2E grow by the wait's mean, TTFT p50 by the wait's p50, TTFT p95 is the
    bound of ``with_wait_p95``. ``e2e`` is then the client's (queued time included). ``ranks``: the DP ranks of one
    engine share one queue (vLLM's internal load balancer sends each request to the least loaded rank), so the queue
    has ``ranks x slots`` servers and ``ranks x p.lam`` arrivals. A rank whose slots are offered more than they hold
    is unstable."""
    if not p.stable:
        return p
    sw = slot_wait(p.lam * ranks, slots * ranks, p.e2e, cv2)
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
    return Point(b, b / (out_steps * t), t, t, 0.0, 0.0, 0.0, 0.0, 0.0, t, t, out_steps * t, True)


def prefill_only(em: EngineModel, lam: float, w: Workload, transfer_s: float, util: float = 0.9) -> Point:
    """A P/D prefill rank: prompts batched up to the token budget, no decodes; TTFT adds the KV transfer."""
    pf = prefill_plan(em, 0.0, w, lam, util)
    p50, p95, mean, rho = _ttft(em, w, pf, RankLoad(0.0, lam, 0.0, transfer_s))
    return Point(0.0, lam, 0.0, 0.0, p50, p95, mean, rho, 0.0, 0.0, pf.share, mean, rho < 1)


def max_batch(fn, slo_s: float, cap: int) -> tuple[int, object]:
    """The largest batch in [1, cap] whose ``fn(b).tpot_p95`` meets ``slo_s`` (0, None when even 1 misses)."""
    lo, hi = 0, max(1, int(cap))
    best = None
    p = fn(1)
    if not p.stable or p.tpot_p95 > slo_s:
        return 0, p
    lo, best = 1, p
    p = fn(hi)
    if p.stable and p.tpot_p95 <= slo_s:
        return hi, p
    while hi - lo > 1:
        mid = (lo + hi) // 2
        p = fn(mid)
        if p.stable and p.tpot_p95 <= slo_s:
            lo, best = mid, p
        else:
            hi = mid
    return lo, best


def kv_transfer_s(c: EngineCtx, length: float, ranks: int, link_gb_s: float, latency_s: float) -> float:
    """Moving one prompt's KV (and GDN state) from the prefill engine's ranks to the decode engine."""
    nbytes = length * sz.kv_bytes_per_token(c.model, c.kv_bytes) + sz.gdn_state_bytes_per_seq(c.model, 1, 1, 0)
    return latency_s + nbytes / (max(ranks, 1) * link_gb_s * 1e9)
