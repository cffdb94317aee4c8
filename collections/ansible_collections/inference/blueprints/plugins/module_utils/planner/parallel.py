# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Stage: the engine layout (seed section 3): TP/PP, DP/EP for MoE, decode and prefill context parallelism,
replicas."""

from __future__ import annotations

from dataclasses import replace

from . import perf, search
from .engine import EngineCtx, divisors, prefill_rate
from .errors import PlanError
from .layout import choose_layout
from .search import first_fit_tp
from .structs import Decisions, Layout, Run, r


def decode_context(run: Run) -> int:
    """p95 prompt + p95 output (capped by output_token_cap): the context a long decode reaches."""
    t, cap = run.traffic, run.pol["output_token_cap"]
    return t["prompt_tokens_p95"] + min(t["output_tokens_p95"], cap or t["output_tokens_p95"])


def _explicit_dcp(run: Run, tp: int) -> int:
    d = run.pol["dcp"]
    if tp % d:
        raise PlanError(
            "policy.dcp",
            f"DCP={d} must divide TP={tp} (DCP reuses the TP ranks); valid: {', '.join(map(str, divisors(tp)))}",
        )
    ok, why = run.sup.dcp_ok(run.model, tp, 1, d)
    if not ok:
        raise PlanError("policy.dcp", f"{why} (engine_compat.yaml)")
    run.dec.add("decode context parallel", d, "policy dcp")
    return d


def choose_dcp(run: Run, tp: int) -> int:
    """DCP for long decode contexts (seed section 3), within what the engine accepts for the attention type."""
    model, pol, dec = run.model, run.pol, run.dec
    decode_ctx, long_ctx = decode_context(run), pol["long_context_tokens"]
    if pol["dcp"] != "auto":
        return _explicit_dcp(run, tp)
    if decode_ctx < long_ctx:
        why = f"p95 decode context {decode_ctx} tokens < {long_ctx} (seed: DCP for >=128k decode)"
        dec.add("decode context parallel", 1, why)
        return 1
    if tp < 2:
        why = (
            f"long decode ({decode_ctx} tokens) wants DCP, but DCP reuses TP ranks and needs TP >= 2 (TP % "
            "DCP == 0); TP=1 here"
        )
        dec.add("decode context parallel", 1, why)
        return 1
    d, rule = run.sup.dcp_max(model, tp)
    if d < 2:
        dec.add("decode context parallel", 1, f"long decode ({decode_ctx} tokens) wants DCP, but {rule}")
        return 1
    kv = model["num_key_value_heads"]
    why = f"long decode ({decode_ctx} tokens): DCP shards KV over the existing TP={tp} ranks, no new GPUs"
    if model["attention"] != "mla" and tp > kv:
        why += f"; TP={tp} over {kv} KV heads replicates KV {tp // kv}x, DCP={d} removes it ({rule})"
    dec.add("decode context parallel", d, why + " (seed section 3)")
    return d


def _explicit_pcp(run: Run, lay: Layout) -> tuple[int, int]:
    p, dp_engine = run.pol["pcp"], lay.dp
    ok, why = run.sup.pcp_ok(p, 1)
    if not ok:
        raise PlanError("policy.pcp", f"vLLM {run.sup.version} refuses it: {why}; use pcp: auto (engine_compat.yaml)")
    if lay.tp * p > run.gpn or lay.tp * lay.pp * p > run.total_gpus:
        raise PlanError("policy.pcp", f"PCP={p} needs TP x PCP = {lay.tp * p} GPUs in a node; nodes have {run.gpn}")
    if p > 1 and dp_engine > 1:
        why = f"policy pcp={p}: the planner does not combine PCP with DP > 1, so the engine drops DP={dp_engine}"
        run.dec.add("data parallel", 1, why)
        dp_engine = 1
    run.dec.add("prefill context parallel", p, "policy pcp")
    return p, dp_engine


def prefill_efficiency(run: Run, c: EngineCtx) -> float:
    """One compute efficiency for whole-prompt estimates: the policy's prefill_mfu, else the catalog's GEMM figure
    (expert GEMMs for MoE models) for this GPU and precision."""
    if run.pol["prefill_mfu"] is not None:
        return run.pol["prefill_mfu"]
    eff = perf.efficiencies(c.gpu, c.model, c.weights, c.kv_dtype)
    return eff.moe_compute if c.model["kind"] == "moe" else eff.gemm_compute


def _smallest_pcp(run: Run, c: EngineCtx, lay: Layout) -> tuple[int, float]:
    """The smallest power-of-two PCP whose prefill estimate meets the TTFT SLO, within a node."""
    p95, tp, pp = run.traffic["prompt_tokens_p95"], lay.tp, lay.pp
    mfu = prefill_efficiency(run, c)
    p = 2
    while True:
        t = prefill_rate(c, tp * pp * p, p95, mfu)
        ttft = p95 / t["tokens_per_s"] * 1000
        if ttft <= run.slo["ttft_p95_ms"] or tp * p * 2 > run.gpn or tp * pp * p * 2 > run.total_gpus:
            return p, ttft
        p *= 2


def choose_pcp(run: Run, c: EngineCtx, lay: Layout, long_tp: str = "") -> tuple[int, int]:
    """(PCP, DP per engine) for long prompts (seed section 3), where the engine supports PCP."""
    if run.pol["pcp"] != "auto":
        return _explicit_pcp(run, lay)
    p95, long_ctx, dec, tp = run.traffic["prompt_tokens_p95"], run.pol["long_context_tokens"], run.dec, lay.tp
    if p95 < long_ctx:
        dec.add("prefill context parallel", 1, f"p95 prompt {p95} tokens < {long_ctx} (seed: PCP for >=128k prefill)")
        return 1, lay.dp
    if not run.sup.pcp_ok(2, 1)[0]:
        why = (
            f"long prefill ({p95} tokens) wants PCP, but in vLLM {run.sup.version} "
            f"{run.sup.row['context_parallel']['pcp']['why']}"
        )
        dec.add("prefill context parallel", 1, why + long_tp)
        return 1, lay.dp
    if lay.dp > 1:
        why = (
            f"long prefill ({p95} tokens) wants PCP, but the planner does not combine PCP with DP > 1 "
            f"(DP={lay.dp}); set policy pcp: 2 to trade DP for PCP"
        )
        dec.add("prefill context parallel", 1, why)
        return 1, lay.dp
    if tp * 2 > run.gpn or tp * lay.pp * 2 > run.total_gpus:
        why = f"long prefill wants PCP=2, but TP x PCP = {tp * 2} exceeds the {run.gpn} GPUs of a node"
        dec.add("prefill context parallel", 1, why)
        return 1, lay.dp
    p, ttft = _smallest_pcp(run, c, lay)
    dec.add(
        "prefill context parallel",
        p,
        f"long prefill ({p95} tokens): PCP={p} splits prompt attention over TP x PCP = {tp * p} GPUs, "
        f"est. {r(ttft, 0)} ms at MFU {r(prefill_efficiency(run, c), 2)} vs TTFT SLO {run.slo['ttft_p95_ms']} ms "
        "(seed section 3)",
    )
    return p, lay.dp


def _long_prompt_note(run: Run, c: EngineCtx, s, lay: Layout) -> str:
    """Where vLLM has no PCP for the attention type, long prompts (>= long_context_tokens) are split by a wider TP: the
    layout search picks it when the TTFT SLO needs it. Says so (decision ``engine: tensor parallel (long prompts)``)
    and returns a note for the PCP decision."""
    p95, slo = run.traffic["prompt_tokens_p95"], run.slo["ttft_p95_ms"]
    if run.pol["pcp"] != "auto" or p95 < run.pol["long_context_tokens"] or run.sup.pcp_ok(2, 1)[0]:
        return ""
    tp0 = first_fit_tp(c, s.hw)
    if lay.dp > 1 or lay.pp > 1 or not tp0 or lay.tp <= tp0:
        return f"; TP stays {lay.tp} (DP={lay.dp}, PP={lay.pp}): its prefill meets the TTFT SLO"
    narrow = next((x for x in s.candidates if x.lay.tp == tp0 and x.lay.dp == 1 and x.lay.pp == 1), None)
    narrow_ttft = (
        f"{narrow.load.doc()['ttft_p95_ms']} ms"
        if narrow is not None and narrow.load
        else (narrow.rejected if narrow is not None and narrow.rejected else "n/a")
    )
    ttft = s.chosen.load.doc()["ttft_p95_ms"] if s.chosen.load else "n/a"
    run.dec.add(
        "engine: tensor parallel (long prompts)",
        lay.tp,
        f"p95 prompt {p95} tokens: TP={lay.tp} splits the prefill over {lay.tp} GPUs, TTFT p95 {ttft} ms vs SLO "
        f"{slo} ms (TP={tp0} fits the weights: {narrow_ttft}); PCP, the seed's choice, has no "
        f"{run.model['attention']} backend in vLLM {run.sup.version}",
    )
    return f"; TP={lay.tp} splits the long prefill instead"


def _hw_engines(run: Run, lay: Layout) -> int:
    return max(0, run.total_gpus // lay.world)


def _layout_decisions(run: Run, s, lay: Layout, moe: bool) -> None:
    ch, total = s.chosen, run.total_gpus
    eff_note = search.eff_source(s.eff, s.hw)
    run.dec.add(
        "engine: layout search",
        ch.label(),
        f"{len([x for x in s.candidates if x.ok])} of {len(s.candidates)} TP x PP x DP x EP layouts meet the SLOs; "
        f"this one needs the fewest GPUs ({ch.gpus}) for the traffic: batch {ch.batch} per rank (limited by "
        f"{ch.limit}), {ch.replicas} replica(s); efficiencies: {eff_note}",
    )
    run.dec.add(
        "engine: tensor parallel",
        lay.tp,
        f"layout search: TP={lay.tp}"
        + (f" x PP={lay.pp} within a node" if lay.pp > 1 else "")
        + f" leaves {ch.mem['kv_pool_gib_per_gpu']} GiB/GPU for KV ("
        + ("above" if ch.headroom_ok else "below")
        + f" the {int(run.pol['kv_headroom_fraction'] * 100)} % headroom"
        + ("" if ch.headroom_ok else "; TPOT, not KV, limits the batch")
        + ")",
    )
    if lay.pp > 1:
        run.dec.add("engine: pipeline parallel", lay.pp, f"within one node ({lay.tp * lay.pp} of {run.gpn} GPUs)")
    if moe:
        run.dec.add(
            "data / expert parallel",
            f"DP={lay.dp} per engine, EP={lay.ep}",
            (
                f"MoE: {lay.dp} attention-DP rank(s) of TP={lay.tp} share the experts via --enable-expert-parallel "
                f"(EP = TP x DP per stage = {lay.ep})"
                + (
                    f"; the EP group spans {lay.world // run.gpn} nodes (LeaderWorkerSet)"
                    if lay.world > run.gpn
                    else ""
                )
            )
            if lay.ep > 1
            else "MoE on one GPU per stage: no expert parallelism",
        )
    hw_max = _hw_engines(run, lay)
    why = (
        f"{ch.replicas} engine(s) of {lay.world} GPUs (TP={lay.tp} x PP={lay.pp} x PCP={lay.pcp} x DP={lay.dp}) "
        f"meet TTFT p95 {run.slo['ttft_p95_ms']} ms and TPOT p95 {run.slo['tpot_p95_ms']} ms at the traffic"
    )
    if lay.replicas < ch.replicas:
        why += f"; the hardware holds {hw_max}, all of them run"
    run.dec.add(
        "replicas", lay.replicas, why + ("; independent replicas behind the router" if lay.replicas > 1 else "")
    )
    if lay.replicas < 1:
        raise PlanError("nodes", f"the layout needs {lay.world} GPUs per engine; the hardware has {total}")


def _no_fit(run: Run, c: EngineCtx) -> PlanError:
    """No layout KServe can run holds the model: the seed's fit error, or the cross-node PP that would."""
    base = choose_layout(c, run.gpn, run.nodes, Decisions(), "probe")  # raises the fit error when nothing fits
    return PlanError(
        "nodes",
        f"{c.model['id']} with {c.weights} weights fits {run.nodes} x {run.gpn} {run.gpu['id']} only as "
        f"TP={base['tp']} x PP={base['pp']} across nodes, and {search.KSERVE_PP}; use more GPUs per node, a GPU "
        "with more memory, smaller weights or a shorter max_model_len",
    )


def aggregated_warnings(run: Run, lay: Layout, s, dis=None) -> None:
    """The aggregated plan's warnings: no layout meets the SLOs, the traffic needs more engines than the hardware
    holds (and how many P/D pools would need when that is fewer: the plan stays aggregated for a reason of its own,
    e.g. the single pool carries more of the traffic on the GPUs there are), PCIe all-reduce, KV below the headroom.
    Only for the plan that is chosen: the caller calls it when the plan stays aggregated (a P/D plan says its own);
    ``dis`` is the P/D option sized beside it (disagg.Disagg; None when there is none the engine would run)."""
    ch, c = s.chosen, lay
    if not ch.ok:
        run.warnings.append(
            f"no layout meets both SLOs at the traffic on {run.total_gpus} {run.gpu['id']}: "
            f"{ch.label()} comes closest ({ch.rejected or 'too few GPUs'})"
        )
    if c.tp > 1 and not run.gpu.get("link_gb_s"):
        run.warnings.append(
            f"TP={c.tp} on {run.gpu['id']} runs its per-layer all-reduce over PCIe (no NVLink); the latency model "
            "charges the measured PCIe all-reduce"
        )
    if not ch.headroom_ok:
        budget = run.gpu["memory_mib"] * 2**20 * run.n["gpu_memory_utilization"]
        run.warnings.append(
            f"serve layout below the KV headroom: {ch.mem['kv_pool_gib_per_gpu']} GiB/GPU for KV (< "
            f"{int(run.pol['kv_headroom_fraction'] * 100)} % of {r(budget / 2**30)} GiB); TPOT limits the batch, so "
            "the pool holds it"
        )
    if not ch.ok or lay.replicas >= ch.replicas:
        return
    pt = s.deployed.doc() if s.deployed is not None else {}
    at = ""
    if pt:
        ttft, tpot = pt.get("ttft_p95_ms"), pt.get("tpot_p95_ms")
        at = f" (TTFT p95 {'unbounded' if ttft is None else f'{ttft} ms'}, TPOT p95 {tpot} ms at that load)"
    pd = ""
    if dis is not None and dis.prefill is not None and dis.decode is not None and dis.decode_hw is dis.prefill_hw:
        pd_gpus = dis.prefill.gpus + dis.decode.gpus
        if pd_gpus < ch.gpus:
            pd = (
                f"; as P/D pools it would need {pd_gpus} ({dis.prefill.gpus} prefill + {dis.decode.gpus} decode; "
                "disaggregation_options.why says why the plan stays aggregated)"
            )
    run.warnings.append(
        f"the traffic needs {ch.replicas} engine(s) of {lay.world} GPUs ({ch.gpus} GPUs){pd}; the hardware holds "
        f"{lay.replicas} ({run.total_gpus} GPUs), all of them are planned and the SLOs are missed at the planned "
        f"load{at}"
    )


def choose_engine(run: Run, c: EngineCtx):
    """Stage 3: the main engine's layout from the layout search; DCP/PCP for long contexts; replicas.
    Returns (Layout, search.Search)."""
    hw = search.Hardware(run.gpu, run.gpn, run.nodes, run.n["interconnect"])
    s = search.search_serve(run, c, hw)
    if s is None:
        raise _no_fit(run, c)
    ch = s.chosen
    for w in s.eff_why:
        run.dec.add("efficiency", "policy/calibration", w)
    moe = run.model["kind"] == "moe"
    lay = ch.lay
    long_tp = _long_prompt_note(run, c, s, lay)
    tp = lay.tp
    dcp = choose_dcp(run, tp)
    pcp, dp = choose_pcp(run, c, lay, long_tp)
    if pcp > 1 and dcp > 1 and (dcp not in (pcp, tp * pcp) or not run.sup.pcp_ok(pcp, dcp)[0]):
        ok, why = run.sup.pcp_ok(pcp, dcp)
        why = why if not ok else f"vLLM requires DCP in (1, PCP, TP x PCP) when PCP={pcp}"
        run.dec.add("decode context parallel", 1, f"{why}; DCP={dcp} dropped")
        dcp = 1
    ep = tp * pcp * dp if (moe and lay.ep > 1) else 1  # the search's expert split: EP, or experts split by TP
    lay = replace(lay, dp=dp, ep=ep, dcp=dcp, pcp=pcp)
    lay = replace(lay, replicas=max(1, min(ch.replicas or 1, _hw_engines(run, lay))))
    if ch.ok and lay.replicas < ch.replicas and ch.full is not None:
        s.deployed = search.point_at(run, c, s, lay)
    _layout_decisions(run, s, lay, moe)
    return lay, s
