# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Stage: the layout search. Every TP x PP x DP x EP engine the hardware and KServe can run is sized with the
step-latency model (batch from TPOT p95, replicas from TTFT p95 and the traffic); the fewest GPUs win. The same
machinery sizes the prefill and decode pools of the disaggregated option (docs/planner.md, "Layout search")."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from . import calibration as calib
from . import latency as lt
from . import perf, routing, slots
from . import queueing as qu
from . import sizing as sz
from .engine import GIB, EngineCtx, engine_memory, expert_shard, valid_tp, valid_tps
from .steps import Topology
from .structs import Layout, Run, r

KSERVE_PP = (
    "pipeline parallel across nodes: KServe v0.20.0 ships no LLMInferenceService preset that spreads one engine's "
    "pipeline stages over nodes (only data-parallel LeaderWorkerSets span nodes)"
)
MAX_BATCH = 1024
DEFAULT_BUDGET = 8192  # vLLM's max_num_batched_tokens for online serving when the policy leaves it null


@dataclass(frozen=True)
class Hardware:
    gpu: dict
    gpn: int
    nodes: int
    interconnect: str

    @property
    def total(self) -> int:
        return self.gpn * self.nodes

    def topo(self) -> Topology:
        return Topology(self.gpn, self.interconnect)


@dataclass
class Demand:
    """The traffic in the model's terms: an open (arrival rate) or closed (concurrent sessions) workload."""

    lam: float | None
    sessions: int | None
    work: lt.Workload
    util: float
    router: str = "random"  # policy router: which ranks share one queue (routing.shared_queue)

    @property
    def open(self) -> bool:
        return self.lam is not None


@dataclass
class Candidate:
    role: str  # serve | prefill | decode
    lay: Layout
    world: int
    mem: dict | None = None
    fits: bool = False
    headroom_ok: bool = False
    batch: int = 0
    limit: str = ""
    full: lt.Point | None = None
    load: lt.Point | None = None
    replicas: int = 0  # needed by the traffic
    gpus: int = 0  # needed by the traffic
    rejected: str = ""
    notes: list = field(default_factory=list)
    moe: bool = False
    engine: object = None  # latency.EngineModel of the layout (P/D pools: to re-size at the replicas deployed)
    transfer: float = 0.0  # P/D prefill: the KV transfer of a p95 prompt in its TTFT

    @property
    def ok(self) -> bool:
        return not self.rejected and self.replicas > 0

    def label(self) -> str:
        lay = self.lay
        s = f"TP={lay.tp}"
        if lay.pp > 1:
            s += f" PP={lay.pp}"
        if lay.dp > 1:
            s += f" DP={lay.dp}"
        if lay.ep > 1:
            s += f" EP={lay.ep}"
        elif self.moe and lay.tp * lay.dp > 1:
            s += f" experts TP={lay.tp * lay.dp}"
        return s + f" ({self.world} GPU{'s' if self.world > 1 else ''}/engine)"

    def experts(self) -> str | None:
        """How a MoE layout splits its experts: "expert parallel" (EP over TP x DP ranks), "tensor parallel" (every
        expert split over them, no --enable-expert-parallel) or "whole" (one rank a stage)."""
        if not self.moe:
            return None
        if self.lay.ep > 1:
            return "expert parallel"
        return "tensor parallel" if self.lay.tp * self.lay.dp > 1 else "whole"

    def doc(self, cost: Cost | None = None) -> dict:
        lay = self.lay
        d = {
            "role": self.role,
            "layout": {"tp": lay.tp, "pp": lay.pp, "dp": lay.dp, "ep": lay.ep},
            "experts": self.experts(),
            "gpus_per_engine": self.world,
            "fits": self.fits,
            "kv_pool_gib_per_gpu": self.mem["kv_pool_gib_per_gpu"] if self.mem else None,
            "kv_headroom_ok": self.headroom_ok,
            "batch_per_rank": self.batch or None,
            "batch_limited_by": self.limit or None,
            "replicas_needed": self.replicas or None,
            "gpus_needed": self.gpus or None,
        }
        if cost is not None and self.gpus:
            d["cost_per_hour"] = r(self.gpus * cost.per_gpu_hour, 2)
            d["cost_per_million_tokens"] = cost.per_mtok(self.gpus * cost.per_gpu_hour)
        if self.load:
            d["latency"] = self.load.doc()
        if self.rejected:
            d["rejected"] = self.rejected
        return d


@dataclass(frozen=True)
class Cost:
    """What a pool of GPUs costs: cost class x GPU-hours (H100 = 1.0), and per million output tokens at the planned
    arrival rate (null without arrivals)."""

    per_gpu_hour: float
    lam: float
    out_tokens: float

    def per_mtok(self, per_hour: float) -> float | None:
        tokens_h = self.lam * self.out_tokens * 3600
        return r(per_hour * 1e6 / tokens_h, 3) if tokens_h > 0 else None


# --------------------------------------------------------------------------- inputs of the search


def workload(run: Run) -> lt.Workload:
    t = run.traffic
    return lt.Workload(
        float(t["prompt_tokens_mean"]),
        float(t["prompt_tokens_p95"]),
        float(t["output_tokens_mean"]),
        int(run.pol["max_num_batched_tokens"] or DEFAULT_BUDGET),
        float(t["output_tokens_p95"]),
        run.pol["slot_queue"],
    )


def demand(run: Run) -> Demand:
    t = run.traffic
    return Demand(
        t["arrival_rate_rps"],
        t["concurrent_sessions"],
        workload(run),
        run.pol["target_utilization"],
        run.pol.get("router") or "random",
    )


def efficiencies(run: Run, c: EngineCtx, hw: Hardware) -> tuple[perf.Eff, list[str]]:
    """The GPU's figures for this precision, then the policy overrides, then a matching calibration entry."""
    eff = perf.efficiencies(hw.gpu, c.model, c.weights, c.kv_dtype)
    eff, why = perf.with_policy(eff, run.pol)
    key = {
        "model": c.model["id"],
        "gpu": hw.gpu["id"],
        "vllm_version": run.n["vllm_version"],
        "weights": c.weights,
        "kv_cache_dtype": c.kv_dtype,
    }
    entry = calib.find(run.n["calibration"], key)
    if entry:

        def make(e: perf.Eff, lay: dict) -> lt.EngineModel:  # the measured layout as the plan wrote it (ep 1: no EP)
            return lt.EngineModel(c, Layout(tp=lay["tp"], pp=lay["pp"], dp=lay["dp"], ep=lay["ep"]), e, hw.topo())

        eff, note = calib.apply(eff, entry, make)
        why.append(note)
    return eff, why


def eff_source(eff: perf.Eff, hw: Hardware) -> str:
    if eff.calibrated:
        return eff.calibrated
    return (
        f"{eff.gemm_kind} GEMMs at {eff.gemm_compute:.2f} of {hw.gpu['id']} peak FLOP/s and {eff.gemm_bandwidth:.2f} "
        f"of its bandwidth, {eff.gemm.launch_s * 1e6:.0f} us per call at least ({eff.source}; "
        "catalog/performance.yaml)"
    )


# --------------------------------------------------------------------------- enumeration


def _dps(tp: int, hw: Hardware) -> list[int]:
    out, d = [], 1
    while tp * d <= hw.total:
        world = tp * d
        if world <= hw.gpn or world % hw.gpn == 0:
            out.append(d)
        d *= 2
    return out


FP8_BLOCK_N = 128  # block-FP8 checkpoints scale weights in 128 x 128 blocks (models.yaml fp8_format: block)


def expert_tp_refusal(c: EngineCtx, moe_tp: int) -> str:
    """Why vLLM would refuse to split every expert over ``moe_tp`` ranks (tensor parallel experts), or "". A block-FP8
    checkpoint needs each rank's slice of an expert's gate/up output to be whole 128-wide blocks: vLLM's
    Fp8MoEMethod.create_weights raises "The output_size of gate's and up's weight = N is not divisible by weight
    quantization block_n = 128" (vllm/model_executor/layers/quantization/fp8.py)."""
    inter = c.model.get("moe_intermediate_size")
    if not inter or moe_tp <= 1:
        return ""
    if inter % moe_tp:
        return f"moe_intermediate_size {inter} does not split over {moe_tp} ranks"
    if perf.gemm_dtype(c.model, c.weights) == "fp8_block" and (inter // moe_tp) % FP8_BLOCK_N:
        return (
            f"experts split by TP over {moe_tp} ranks: {inter // moe_tp} of each expert's {inter} intermediate a rank "
            f"is not a multiple of the {FP8_BLOCK_N}-wide FP8 blocks (vLLM Fp8MoEMethod refuses it)"
        )
    return ""


def _moe_splits(c: EngineCtx, tp: int, dp: int) -> list[int]:
    """The expert splits of a MoE engine of TP x DP ranks a stage, as EP sizes (aiconfigurator's vLLM space: moe_tp x
    moe_ep = TP x DP, never both above 1): expert parallel (``--enable-expert-parallel``, EP = TP x DP) and, where
    the checkpoint allows it, every expert split by TP over the TP x DP ranks (EP 1: vLLM's default without the
    flag). One rank: neither."""
    width = tp * dp
    if width == 1:
        return [1]
    return [width] + ([1] if not expert_tp_refusal(c, width) else [])


def layouts(run: Run, c: EngineCtx, hw: Hardware) -> tuple[list[Layout], list[tuple[Layout, str]]]:
    """Engine layouts to size, and layouts refused before sizing (with why)."""
    model = c.model
    moe = model["kind"] == "moe"
    tps = valid_tps(model, hw.gpn)
    dcp = run.pol["dcp"]
    if dcp != "auto" and any(tp % dcp == 0 for tp in tps):  # DCP reuses TP ranks: only TPs it divides
        tps = [tp for tp in tps if tp % dcp == 0]
    out, refused = [], []
    for tp in tps:
        for d in _dps(tp, hw) if moe else [1]:
            out += [Layout(tp=tp, dp=d, ep=ep) for ep in (_moe_splits(c, tp, d) if moe else [1])]
        for pp in (2, 4, 8):
            if pp > model["layers"] // 2:
                break
            lays = [Layout(tp=tp, pp=pp, ep=ep) for ep in (_moe_splits(c, tp, 1) if moe else [1])]
            if tp * pp <= hw.gpn:
                out += lays
            elif tp == max(tps) and tp * pp <= hw.total and (tp * pp) % hw.gpn == 0:
                refused.append((lays[0], KSERVE_PP))
    return out, refused


# --------------------------------------------------------------------------- sizing one candidate


def _memory(c: EngineCtx, lay: Layout, run: Run, num_spec: int) -> tuple[dict, bool, bool, str]:
    mem = engine_memory(c, lay, num_spec)
    if c.kvmem is not None:
        over = mem["weights_bytes"] + c.overhead(lay.tp, lay.pp, expert_shard(c.model, lay)) + c.kvmem - c.total
        if over > 0:
            why = (
                f"{mem['weights_gib_per_gpu']} GiB weights + {mem['overhead_gib_per_gpu']} GiB overhead + "
                f"kv_cache_memory_bytes exceed the GPU by {r(over / GIB, 1)} GiB"
            )
            return mem, False, False, why
    need = sz.blocks_per_request(run.n["max_model_len"], mem["geom"], lay.dcp)
    if mem["blocks"] < need:
        why = (
            f"{mem['weights_gib_per_gpu']} GiB of weights + {mem['overhead_gib_per_gpu']} GiB overhead leave "
            f"{mem['kv_pool_gib_per_gpu']} GiB/GPU of KV, less than one {run.n['max_model_len']}-token sequence"
        )
        return mem, False, False, why
    headroom = mem["kv_pool_bytes"] >= c.headroom * c.budget or c.kvmem is not None
    return mem, True, headroom, ""


def _kv_sequences(run: Run, mem: dict) -> int:
    """Sequences the KV pool holds at the traffic's mean length (prompt + output), less room for a full batch's
    total length to reach its 95th percentile: ``b x mean + 1.645 x sqrt(b) x std <= what b means hold`` (the lengths
    log-normal through their mean and p95). The slots may run nearly full under a loose TTFT SLO; with spread
    lengths a batch of mean-length slots would sometimes not fit, and vLLM would preempt."""
    t = run.traffic
    mean = t["prompt_tokens_mean"] + t["output_tokens_mean"]
    kv = sz.max_sequences(mem["blocks"], mean, mem["geom"], 1)
    var = sum(
        t[f"{kind}_tokens_mean"] ** 2 * qu.lognormal_cv2(t[f"{kind}_tokens_mean"], t[f"{kind}_tokens_p95"])
        for kind in ("prompt", "output")
    )
    if kv <= 0 or var <= 0:
        return kv
    zs = qu.Z95 * math.sqrt(var)  # b x mean + zs x sqrt(b) <= kv x mean, a quadratic in sqrt(b)
    root = (-zs + math.sqrt(zs * zs + 4 * mean * mean * kv)) / (2 * mean)
    return max(1, int(root * root + 1e-9))


def _batch_cap(run: Run, mem: dict, w: lt.Workload, role: str) -> tuple[int, str]:
    kv = _kv_sequences(run, mem)
    caps = [(kv, "kv")]
    if run.pol["max_num_seqs"]:
        caps.append((run.pol["max_num_seqs"], "max_num_seqs"))
    if role == "serve":
        caps.append((max(1, w.budget - 1), "max_num_batched_tokens"))
    caps.append((MAX_BATCH, "planner limit"))
    return min(caps)


def _headroom_rule(cand: Candidate, c: EngineCtx) -> str:
    """Below the KV headroom a layout is kept only when TPOT, not KV, limits its batch."""
    if cand.headroom_ok or cand.limit not in ("kv",):
        return ""
    return (
        f"KV pool {cand.mem['kv_pool_gib_per_gpu']} GiB/GPU is below {int(c.headroom * 100)} % of the budget and KV, "
        "not TPOT, limits its batch"
    )


def _agg_at(em: lt.EngineModel, dem: Demand, ranks: int, batch: int, full: lt.Point) -> lt.Point:
    """One rank's latency when ``ranks`` ranks share the traffic; under open traffic the wait for one of its ``batch``
    sequence slots is in its TTFT. The DP ranks of one engine share one queue: KServe's presets start vLLM without an
    external or hybrid DP load balancer, so vLLM's own sends each request to the rank with the least waiting and
    running work; engines share it too when the router sends each request to the least loaded engine (policy
    ``router: least_loaded``, llm-d's picker), not with an even random split (``random``)."""
    if not dem.open:
        per_rank = max(1.0, (dem.sessions or 0) / ranks)
        p = lt.aggregated(em, min(batch, per_rank), dem.work)
        if per_rank <= batch:
            return p
        # more clients than slots: the slots run full and the rest wait their turn, R = clients / throughput (Little)
        wait = (per_rank / batch - 1.0) * p.e2e
        return replace(
            p,
            ttft_p50=p.ttft_p50 + wait,
            ttft_p95=p.ttft_p95 + wait,
            ttft_mean=p.ttft_mean + wait,
            e2e=p.e2e + wait,
        )
    p, servers, pre = open_rank(em, dem, ranks, batch, full)
    jsq = routing.jsq(dem.router, servers, em.lay.dp)
    if dem.work.queue == "chain":
        q = slots.chain_point(em, dem.work, (p, servers, pre, jsq), (dem.lam / ranks, batch), full)
        if q is not None:
            return q
    return lt.with_slot_queue(p, batch, dem.work.hold_cv2, (servers, jsq), (full.e2e if pre > 1 else 0.0, None))


def open_rank(em: lt.EngineModel, dem: Demand, ranks: int, batch: int, full: lt.Point) -> tuple:
    """One rank of ``ranks`` under open traffic before its wait for a slot: (its point at the occupancy its own
    hold gives, by fixed point; the ranks sharing its queue; the ranks sharing its prefill queue)."""
    lam = dem.lam / ranks
    servers = routing.shared_queue(dem.router, dem.lam, ranks // em.lay.dp, em.lay.dp)[1]
    pre = servers  # the ranks sharing a slot queue share its prefill queue too (routing.shared_queue)
    b = min(float(batch), max(1.0, lam * full.e2e))
    p = lt.aggregated(em, b, dem.work, lam, servers=pre)
    for _dummy in range(4):
        if not p.stable:
            break
        nb = min(float(batch), max(1.0, lam * p.e2e))
        if abs(nb - b) < 0.5:
            break
        b = nb
        p = lt.aggregated(em, b, dem.work, lam, servers=pre)
    return p, servers, pre


def _needed_ranks(dem: Demand, batch: int, e2e: float) -> float:
    """A floor on the ranks: open traffic fills every slot at most (the queue model decides the rest), a closed
    population at most ``target_utilization`` of them."""
    if dem.open:
        return dem.lam * e2e / batch
    return (dem.sessions or 0) / (batch * dem.util)


def _smallest(ok, lo: int, hi: int) -> int | None:
    """Smallest R in [lo, hi] with ok(R) (ok monotone); None when even hi fails."""
    lo = max(1, lo)
    if ok(lo):
        return lo
    r_ = lo
    while True:
        r_ = min(hi, r_ * 2)
        if ok(r_):
            break
        if r_ >= hi:
            return None
        lo = r_
    a, b = lo, r_
    while b - a > 1:
        mid = (a + b) // 2
        if ok(mid):
            b = mid
        else:
            a = mid
    return b


@dataclass(frozen=True)
class Sizer:
    """What sizing one pool's candidates shares: the run, the engine context, the hardware, its efficiencies and the
    traffic."""

    run: Run
    c: EngineCtx
    hw: Hardware
    eff: perf.Eff
    dem: Demand


def batch_slo(run: Run) -> float:
    """TPOT (seconds) a full rank is sized for: the SLO itself. TPOT p95 is the p95 over requests of each request's
    mean TPOT (latency.tpot_p95), the percentile the SLO names; no margin is added on top of the model."""
    return run.slo["tpot_p95_ms"] / 1000


def _fitted(sz_: Sizer, role: str, lay: Layout, num_spec: int) -> Candidate:
    """A ``role`` candidate of layout ``lay`` with its memory sized (``num_spec`` speculative tokens); rejected with
    the reason when its weights, overhead and KV do not fit."""
    c = sz_.c
    cand = Candidate(role, lay, lay.world, moe=c.model["kind"] == "moe")
    mem, fits, headroom, why = _memory(c, lay, sz_.run, num_spec)
    cand.mem, cand.fits, cand.headroom_ok = mem, fits, headroom
    if not fits:
        cand.rejected = why
    return cand


def size_serve(sz_: Sizer, lay: Layout) -> Candidate:
    """An aggregated engine: batch from TPOT p95 (prefill chunks mixed in), replicas from TTFT p95 and the traffic."""
    run, c, hw, eff, dem = sz_.run, sz_.c, sz_.hw, sz_.eff, sz_.dem
    cand = _fitted(sz_, "serve", lay, c.num_spec)
    if not cand.fits:
        return cand
    mem = cand.mem
    em = lt.EngineModel(c, lay, eff, hw.topo())
    cap, limit = _batch_cap(run, mem, dem.work, "serve")
    slo_tpot, slo_ttft = run.slo["tpot_p95_ms"] / 1000, run.slo["ttft_p95_ms"] / 1000
    b, full = lt.max_batch(lambda x: lt.aggregated(em, x, dem.work), batch_slo(run), cap)
    if b == 0:
        cand.rejected = (
            f"TPOT p95 {_ms(full.tpot_p95)} ms even at one sequence per rank (SLO {run.slo['tpot_p95_ms']} ms)"
        )
        return cand
    cand.batch, cand.full = b, full
    cand.limit = "tpot" if b < cap else limit
    cand.rejected = _headroom_rule(cand, c)
    if cand.rejected:
        return cand
    # a floor on the ranks: the requests in flight if each took one lone sequence's E2E
    ranks0 = _needed_ranks(dem, b, lt.aggregated(em, 1.0, dem.work, 1e-9).e2e)

    def ok(reps: int) -> bool:
        ranks = reps * lay.dp
        p = _agg_at(em, dem, ranks, b, full)
        # open traffic: the slot queue is in p (stable, TTFT); a closed population keeps target_utilization spare
        filled = dem.open or (dem.sessions or 0) / ranks <= dem.util * b
        return p.stable and filled and p.tpot_p95 <= slo_tpot and p.ttft_p95 <= slo_ttft

    hw_engines = max(1, hw.total // lay.world)
    reps = _smallest(ok, math.ceil(ranks0 / lay.dp - 1e-9), max(4 * hw_engines, 64))
    if reps is None:
        most = max(4 * hw_engines, 64)
        cand.rejected = _serve_miss(sz_, lay, em, _agg_at(em, dem, most * lay.dp, b, full), most)
        return cand
    cand.replicas, cand.gpus, cand.engine = reps, reps * lay.world, em
    cand.load = _agg_at(em, dem, reps * lay.dp, b, full)
    return cand


def _serve_miss(sz_: Sizer, lay: Layout, em: lt.EngineModel, p: lt.Point, most: int) -> str:
    """Why no replica count up to ``most`` engines (``p``: a rank's latency at that many) meets the SLOs, naming
    the SLO actually missed: the prefill of a p95 prompt alone is too slow only when its TTFT with no queue is above
    the SLO; otherwise the traffic needs more engines than the search tries (the queue does not drain, or TTFT/TPOT
    p95 under that load are over their SLOs)."""
    run, dem = sz_.run, sz_.dem
    slo = run.slo
    idle = lt.aggregated(em, 1.0, dem.work, 1e-9)
    if idle.ttft_p95 * 1000 > slo["ttft_p95_ms"] + 1e-9:
        return (
            f"TTFT p95 {_ms(idle.ttft_p95)} ms with no queue, over its SLO of {slo['ttft_p95_ms']} ms: the prefill "
            f"of a p95 prompt ({int(dem.work.prompt_p95)} tokens) alone is too slow on {lay.world} GPU(s)"
        )
    engines = f"{most} engine(s) of {lay.world} GPU(s) ({most * lay.world} GPUs)"
    at = f"at {engines}"
    if not p.stable or math.isinf(p.ttft_p95):
        what = f"{dem.lam:g} req/s" if dem.open else f"{dem.sessions} concurrent sessions"
        return f"throughput: even {engines} do not carry {what} (the queue does not drain)"
    if p.tpot_p95 * 1000 > slo["tpot_p95_ms"] + 1e-9:
        return f"TPOT p95 {_ms(p.tpot_p95)} ms {at}, over its SLO of {slo['tpot_p95_ms']} ms"
    if p.ttft_p95 * 1000 > slo["ttft_p95_ms"] + 1e-9:
        return f"TTFT p95 {_ms(p.ttft_p95)} ms under the load {at}, over its SLO of {slo['ttft_p95_ms']} ms"
    return f"capacity: {dem.sessions} concurrent sessions need more sequence slots than {at} hold"


def settle_batch(sz_: Sizer, cand: Candidate) -> None:
    """max_num_seqs of the chosen engine at its replicas. The search sized it at the largest batch whose TPOT p95
    meets the SLO when the rank is full; with fewer slots the rank's bursts wait in its queue (TTFT) instead of
    slowing every step (TPOT). Between the fewest slots the planned load needs and that batch, the plan takes the one
    that leaves TTFT p95 (slot wait included, at the planned load) and TPOT p95 of a full rank the same share of
    headroom to their SLOs: both SLOs hold, and neither is spent when the traffic leaves room. Open traffic only (a
    closed population fills at most target_utilization of the batch)."""
    run, dem, em = sz_.run, sz_.dem, cand.engine
    if not cand.ok or not dem.open or em is None or cand.batch <= 1:
        return
    slo_tpot, slo_ttft = run.slo["tpot_p95_ms"] / 1000, run.slo["ttft_p95_ms"] / 1000
    ranks = cand.replicas * cand.lay.dp

    def at(c: int) -> tuple[lt.Point, lt.Point]:
        full = lt.aggregated(em, c, dem.work) if c != cand.batch else cand.full
        return full, _agg_at(em, dem, ranks, c, full)

    def worse(pts: tuple) -> float:  # the larger share of its SLO either spends (inf: the queue does not drain)
        full, load = pts
        if not load.stable or math.isinf(load.ttft_p95):
            return math.inf
        return max(full.tpot_p95 / slo_tpot, load.ttft_p95 / slo_ttft, load.tpot_p95 / slo_tpot)

    def tpot_side(pts: tuple) -> bool:  # TPOT spends more of its SLO than TTFT: fewer slots would balance them
        full, load = pts
        return load.stable and full.tpot_p95 / slo_tpot >= load.ttft_p95 / slo_ttft

    hi, hi_pts = cand.batch, (cand.full, cand.load)
    if not tpot_side(hi_pts):
        return
    lo = max(1, math.ceil(dem.lam * cand.load.e2e / ranks))
    while hi - lo > 1:  # the smallest batch on the TPOT side: the two shares cross between it and the one below
        mid = (lo + hi) // 2
        pts = at(mid)
        if tpot_side(pts):
            hi, hi_pts = mid, pts
        else:
            lo = mid
    best_c, best_pts = hi, hi_pts
    low_pts = at(lo) if lo < hi else None
    if low_pts is not None and worse(low_pts) < worse(best_pts):
        best_c, best_pts = lo, low_pts
    if worse(best_pts) > 1.0 + 1e-9:  # never trade a met SLO away
        return
    if best_c < cand.batch:
        cand.batch, (cand.full, cand.load), cand.limit = best_c, best_pts, "ttft/tpot balance"


def _ms(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x * 1000:.1f}"


# --------------------------------------------------------------------------- choosing


def _score(cand: Candidate, slo: dict) -> tuple:
    p = cand.load
    margin = max(p.tpot_p95 * 1000 / slo["tpot_p95_ms"], p.ttft_p95 * 1000 / slo["ttft_p95_ms"])
    return (cand.gpus, round(margin, 2), cand.world)


def lost_because(c: Candidate, best: Candidate, slo: dict, total: int) -> str:
    if c.rejected:
        return c.rejected
    if c.gpus > total:
        return f"needs {c.gpus} GPUs for the traffic; the hardware has {total}"
    if c.gpus > best.gpus:
        return f"needs {c.gpus} GPUs ({c.replicas} x {c.world}) where {best.label()} needs {best.gpus}"
    sb, sc = _score(best, slo), _score(c, slo)
    if sc[1] > sb[1]:
        return f"same {c.gpus} GPUs, less SLO headroom (worst p95/SLO {sc[1]} vs {sb[1]})"
    return f"same {c.gpus} GPUs and SLO headroom; a smaller engine ({best.world} GPUs) is simpler to place"


@dataclass
class Search:
    """The layout search's result for one pool role."""

    chosen: Candidate
    candidates: list
    hw: Hardware
    eff: perf.Eff
    eff_why: list
    within_hw: bool
    deployed: object = None  # latency at the replicas the hardware holds, when fewer than needed

    def table(self, lam: float, out_tokens: float, chosen: bool = True) -> list[dict]:
        """Every candidate, the chosen layout first, then runner-ups and refused layouts with why they lost, each
        with its cost for the traffic (``chosen``: whether the plan deploys this pool, not the P/D option)."""
        rows, slo_total = [], self.hw.total
        cost = Cost(self.hw.gpu["cost_class"], lam, out_tokens)
        order = sorted(self.candidates, key=lambda x: (bool(x.rejected), not x.fits, x.gpus or 10**9, x.world))
        for cand in order:
            if cand is self.chosen:
                continue
            d = cand.doc(cost)
            d["why"] = lost_because(cand, self.chosen, self._slo, slo_total)
            rows.append(d)
        head = self.chosen.doc(cost)
        head["chosen"] = chosen
        head["why"] = "fewest GPUs that meet TTFT p95 and TPOT p95 at the traffic" + (
            "" if self.within_hw else f" (more than the {slo_total} GPUs the hardware has)"
        )
        if not chosen:
            head["why"] += "; the plan disaggregates instead"
        return [head, *rows]

    _slo: dict = field(default_factory=dict)


def best_of(cands: list[Candidate], slo: dict, total: int) -> tuple[Candidate | None, bool]:
    """The fewest GPUs among the candidates that meet the SLOs within the hardware; when the traffic needs more GPUs
    than there are, the one whose engines on the hardware carry the largest share of it (every GPU used)."""
    ok = [x for x in cands if x.ok]
    if not ok:
        return None, False
    within = [x for x in ok if x.gpus <= total]
    if within:
        return min(within, key=lambda x: _score(x, slo)), True
    return min(ok, key=lambda x: (-round(served(x, total), 3), *_score(x, slo))), False


def search_serve(run: Run, c: EngineCtx, hw: Hardware) -> Search | None:
    """The aggregated pool's layout: None when no layout fits memory (the caller raises the planner's fit error)."""
    eff, eff_why = efficiencies(run, c, hw)
    dem = demand(run)
    lays, refused = layouts(run, c, hw)
    sizer = Sizer(run, c, hw, eff, dem)
    cands = [size_serve(sizer, lay) for lay in lays]
    for lay, why in refused:
        cand = Candidate("serve", lay, lay.world, rejected=why, moe=c.model["kind"] == "moe")
        cand.mem, cand.fits, cand.headroom_ok, dummy = _memory(c, lay, run, c.num_spec)
        cands.append(cand)
    servable = [x for x in cands if x.fits and x.rejected != KSERVE_PP]
    if not servable:
        return None
    chosen, within = best_of(cands, run.slo, hw.total)
    if chosen is None:  # nothing meets the SLOs: the candidate closest to them, said in a warning
        sized = [x for x in servable if x.full is not None] or servable
        chosen = min(sized, key=lambda x: x.full.tpot_p95 if x.full else 1e9)
        within = False
    elif within and run.pol["batch_sizing"] == "balanced":
        settle_batch(sizer, chosen)
    s = Search(chosen, cands, hw, eff, eff_why, within)
    s._slo = run.slo
    return s


def served(c: Candidate, total: int) -> float:
    """The share of the traffic the engines of an aggregated candidate that the hardware holds carry."""
    if not c.replicas:
        return 0.0
    return min(1.0, (total // c.world) / c.replicas)


def point_at(run: Run, c: EngineCtx, s: Search, lay: Layout) -> lt.Point:
    """One rank's latency when ``lay.replicas`` engines (fewer than the traffic needs) carry all of it."""
    em = lt.EngineModel(c, Layout(tp=lay.tp, pp=lay.pp, dp=lay.dp, ep=lay.ep, dcp=lay.dcp), s.eff, s.hw.topo())
    return _agg_at(em, demand(run), lay.replicas * lay.dp, s.chosen.batch or 1, s.chosen.full)


def first_fit_tp(c: EngineCtx, hw: Hardware) -> int:
    """The smallest TP whose full replica fits a node (the seed's rule; used to explain wider TP choices)."""
    for tp in valid_tps(c.model, hw.gpn):
        if valid_tp(c.model, tp)[0] and c.fits(tp, 1)[0]:
            return tp
    return 0
