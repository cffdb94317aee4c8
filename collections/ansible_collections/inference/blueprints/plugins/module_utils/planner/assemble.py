# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Stage: the plan document (the contract in docs/contracts.md section 3 and docs/planner.md)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import disagg, search, units
from . import latency as lt
from . import sizing as sz
from .engine import GIB, EngineCtx
from .kvtransfer import KVTransfer
from .layout import replication
from .structs import Layout, Pools, Rates, Run, num, r


@dataclass
class Outcome:
    """Everything the stages decided, as the plan document is built from it."""

    ctx: EngineCtx  # the main engine (serve or prefill hardware)
    lay: Layout  # the main engine's layout
    rates: Rates
    disagg: bool
    xfer: KVTransfer
    pools: Pools


def _model_doc(run: Run) -> dict:
    model = run.model
    return {
        "id": model["id"],
        "name": run.n["name"],
        "hf_repo": model.get("hf_repo"),
        "kind": model["kind"],
        "attention": model["attention"],
        "source": model.get("source"),
    }


def _hardware_doc(run: Run) -> dict:
    n, gpu, d = run.n, run.gpu, run.n["decode"]
    return {
        "gpu": gpu["id"],
        "gpu_name": gpu["name"],
        "gpu_link": gpu.get("link"),
        "gpus_per_node": run.gpn,
        "nodes": run.nodes,
        "gpus_total": run.total_gpus,
        "interconnect": n["interconnect"],
        "decode_gpu": d["gpu"]["id"] if d else None,
        "decode_gpus_per_node": d["gpus_per_node"] if d else None,
        "decode_nodes": d["nodes"] if d else None,
    }


def _weights_doc(wb: dict, precision: str) -> dict:
    return {
        "precision": precision,
        "total_gib": r(wb["total"] / GIB, 3),
        "experts_gib": r(wb["experts"] / GIB, 3),
        "vision_gib": r(wb["vision"] / GIB, 3),
        "speculative_gib": r(wb["speculative"] / GIB, 3),
    }


def _memory_doc(run: Run, mem: dict) -> dict:
    return {
        "weights_gib_per_gpu": mem["weights_gib_per_gpu"],
        "kv_pool_gib_per_gpu": mem["kv_pool_gib_per_gpu"],
        "overhead_gib_per_gpu": mem["overhead_gib_per_gpu"],
        "budget_gib_per_gpu": mem["budget_gib_per_gpu"],
        "gpu_memory_gib": mem["gpu_memory_gib"],
        "gpu_memory_utilization": run.n["gpu_memory_utilization"],
        "kv_cache_memory_bytes": run.n["kv_cache_memory_bytes"],
    }


def _kv_doc(model: dict, p: Pools) -> dict:
    ctx, mem, lay = p.main_ctx, p.main_mem, p.main_lay
    return {
        "dtype": ctx.kv_dtype,
        "element_bytes": ctx.kv_bytes,
        "bytes_per_token": num(sz.kv_bytes_per_token(model, ctx.kv_bytes)),
        "bytes_per_token_per_gpu": num(mem["kv_bytes_per_token_per_gpu"]),
        "kv_heads_per_gpu": sz.kv_heads_per_rank(model, lay.tp),
        "kv_replication": replication(model, lay.tp),
        "state_bytes_per_seq": num(sz.gdn_state_bytes_per_seq(model, 1, 1, ctx.num_spec)),
        "state_bytes_per_seq_per_gpu": num(mem["state_bytes_per_seq_per_gpu"]),
        "block_size": mem["geom"]["block_size"],
        "block_size_no_spec": mem["block_size_no_spec"],
        "page_bytes": int(mem["geom"]["page_bytes"]),
        "blocks": mem["blocks"],
        "tokens": mem["tokens"],
        "reported_tokens": mem["reported_tokens"],
        "max_concurrency": mem["max_concurrency"],
        "scope": "per engine (one vLLM instance: TP x PP x PCP x DP GPUs)",
    }


def _layout_doc(o: Outcome) -> dict:
    lay = o.pools.main_lay
    return {
        "tp": lay.tp,
        "pp": lay.pp,
        "dp": lay.dp * lay.replicas,
        "ep": lay.ep,
        "dcp": lay.dcp,
        "pcp": o.pools.pools["prefill"]["pcp"] if o.disagg else lay.pcp,
        "dp_per_engine": lay.dp,
        "replicas": lay.replicas,
        "gpus_per_replica": lay.world,
    }


_PREFILL_QUEUE = {
    "random": "one queue per engine: its DP ranks share it (vLLM's balancer sends each request to the least loaded "
    "rank), engines get an even random split of the arrivals",
    "least_loaded": "one queue over every rank of the pool (the router sends each request to the least loaded "
    "engine; a request that waits is committed to one rank and waits for it)",
}
_PREFILL = {
    "erlang": "prefill is an M/G/1 queue (M/G/c over the ranks sharing it): Poisson arrivals at the planned rate, "
    "first come first served, service = the prompt's share of the prefill steps (vLLM batches waiting prompts up to "
    "max_num_batched_tokens; the fewest per step that keep the rank under target_utilization), log-normal prompt "
    "lengths fitted to mean and p95; mean wait by Pollaczek-Khinchine, tail P(W > t) = rho exp(-rho t / E[W]); TTFT "
    "= own prefill step(s) + wait + the step in flight + vLLM's per-request prefill overhead (+ the KV transfer for "
    "P/D); p95 combines the prefill and wait tails as independent (medians + root-sum-square of the p95 excesses). ",
    "chain": "prefill is a queue of tokens (policy slot_queue: chain): each step's token room filled with the admitted"
    " prompts' chunks in arrival order, an M/G/1 queue whose server is a full step's room (M/G/c over the ranks "
    "sharing it), the prompt's own chunks in steps shared with the tokens that arrive meanwhile, the step in flight "
    "uniform over a step (on a prefill rank as often as a step is in flight, on a shared prefill queue as often as "
    "every rank is busy); p95 combines the tails as independent (medians + root-sum-square). ",
}
_SLOTS = {
    "erlang": "Before that, a request waits for one of its queue's sequence slots: an M/G/c queue (c = max_num_seqs x "
    "the ranks sharing it; each request holding a slot for its E2E), P(wait) = C by Erlang C, a wait that happens "
    "exponential with the M/M/c mean scaled to M/G/c (Cosmetatos' M/D/c factor for constant holds, linear in the "
    "hold's CV^2 up to exponential, (1 + CV^2) / 2 above; CV from the output lengths' log-normal); ",
    "chain": "Before that, a request waits for one of its queue's sequence slots: the requests at the queue a "
    "birth-death chain whose holds grow with the slots busy (the planner's hold at nine batches), its spread widened "
    "by the prefill bursts that stall a whole rank, a wait when it finds every slot busy, exponential at the full "
    "rank's drain scaled to M/G/c; TPOT p95 at the occupancy the chain exceeds 5 % of the time; ",
}
_AFTER = (
    "TTFT mean and p50 grow by the wait's, TTFT p95 is the exact 0.95 point of their sum (TTFT log-normal through its "
    "p50 and p95, the wait 0 or exponential; integrated numerically). Replicas are the fewest whose TTFT p95 meets "
    "the SLO, then max_num_seqs set between the slots the load needs and the largest batch TPOT allows, where TTFT and"
    " TPOT keep the same share of headroom (policy batch_sizing: throughput keeps that largest batch); the engine runs"
    " that max_num_seqs. P/D: a decode pool the fewest replicas whose slots are free at once for "
    f"{(1 - disagg.DECODE_SLOT_WAIT) * 100:.0f} % of arrivals at that largest batch, its prefill pool meeting TTFT at "
    f"p{(0.95 + disagg.DECODE_SLOT_WAIT) * 100:.0f}; then the decode max_num_seqs balanced the same way, TTFT p95 "
    "counting the wait for a decode slot"
)


def queueing_model(router: str, slot_queue: str) -> str:
    """How the plan computed its queueing, for the router and slot queue it used (the plan's
    ``latency.queueing_model``)."""
    return f"{_PREFILL_QUEUE[router]}; {_PREFILL[slot_queue]}{_SLOTS[slot_queue]}{_AFTER}"


TPOT_DEF = (
    "per-request mean time between output tokens (vLLM's benchmark TPOT); p50 = the mean step time with prefill chunks"
    " mixed in at the arrival rate, p95 = the 95th percentile over requests: a request's decode steps plus the prefill"
    " chunks its rank admits during them (a gamma with their mean and variance, mixed over the output lengths), at the"
    " planned batch"
)


def _latency_doc(run: Run, o: Outcome) -> dict:
    s = o.rates.serve
    if o.disagg:
        dis = o.rates.disagg
        p, d = dis.deployed or (dis.prefill.load, dis.decode.load)
        first = p  # TTFT p95 with the wait for a decode slot (queueing.with_wait_p95)
        if d.slots is not None:
            first = replace(
                p, ttft_p95=lt.with_wait_p95(p.ttft_p50, p.ttft_p95, d.slots), ttft_mean=p.ttft_mean + d.slots.mean
            )
        ttft = first.doc()
        out = {
            "pools": "prefill + decode",
            "ttft_p50_ms": ttft["ttft_p50_ms"],
            "ttft_p95_ms": ttft["ttft_p95_ms"],
            "ttft_mean_ms": ttft["ttft_mean_ms"],
            "tpot_p50_ms": d.doc()["tpot_p50_ms"],
            "tpot_p95_ms": d.doc()["tpot_p95_ms"],
            "kv_transfer_ms": r(dis.transfer_s * 1000, 2),
            "prefill_per_rank": p.doc(),
            "decode_per_rank": d.doc(),
            "efficiency": search.eff_source(s.eff, s.hw),
        }
    else:
        pt = s.deployed or s.chosen.load or s.chosen.full
        doc = pt.doc() if pt else {}
        out = {
            "pools": "serve",
            "ttft_p50_ms": doc.get("ttft_p50_ms"),
            "ttft_p95_ms": doc.get("ttft_p95_ms"),
            "ttft_mean_ms": doc.get("ttft_mean_ms"),
            "tpot_p50_ms": doc.get("tpot_p50_ms"),
            "tpot_p95_ms": doc.get("tpot_p95_ms"),
            "per_rank": doc,
            "efficiency": search.eff_source(s.eff, s.hw),
        }
    missed = _missed(run, o, out)
    out["meets_slo"] = not missed
    if missed:
        out["missed"] = missed  # which SLO, with its figure (slo_gate and the plan summary say it)
    out["calibrated"] = bool(s.eff.calibrated)
    out["queueing_model"] = queueing_model(run.pol.get("router") or "random", run.pol["slot_queue"])
    out["tpot_definition"] = TPOT_DEF
    out["speculative"] = (
        "not credited: the model plans the SLO without speculative tokens (acceptance depends on the traffic)"
        if o.ctx.spec
        else None
    )
    return out


def _missed(run: Run, o: Outcome, lat: dict) -> list[str]:
    """The SLOs the plan misses, each said with its figure (never a figure within its SLO): a latency over its SLO at
    the planned load, or the traffic itself when no layout of the chosen pool carries it (the figures of a full rank
    are then shown, but they are not the plan's load). Empty when the plan meets both."""
    chosen = o.rates.disagg.decode if o.disagg else o.rates.serve.chosen
    if chosen is not None and not chosen.ok and chosen.rejected:
        return [chosen.rejected]  # why the chosen layout carries the traffic with no replica count the search tried
    out = []
    for key, what in (("ttft_p95_ms", "TTFT p95"), ("tpot_p95_ms", "TPOT p95")):
        have, slo = lat.get(key), run.slo[key]
        if have is None:
            out.append(f"{what} unbounded (the queue does not drain), SLO {slo} ms")
        elif have > slo + 1e-9:
            out.append(f"{what} {have} ms, over its SLO of {slo} ms")
    if not out and chosen is not None and not chosen.ok:
        out.append(chosen.rejected or "the traffic: no replica count of the chosen layout carries it")
    return out


def _candidates_doc(run: Run, o: Outcome) -> list[dict]:
    """Every layout the search sized, with its cost for the traffic: the aggregated candidates (the chosen first when
    the plan stays aggregated), then the P/D option's prefill and decode candidates (first when it disaggregates)."""
    out_tokens = run.traffic["output_tokens_mean"]
    agg = o.rates.serve.table(o.rates.lam, out_tokens, chosen=not o.disagg)
    dis = o.rates.disagg
    pd = dis.table(o.rates.lam, out_tokens, chosen=o.disagg) if dis is not None and dis.prefill is not None else []
    return pd + agg if o.disagg else agg + pd


def _estimates_doc(o: Outcome) -> dict:
    ch = o.rates.serve.chosen
    full = ch.full
    return {
        "describes": "the aggregated option, not deployed: the plan disaggregates (see pools, disaggregation_options)"
        if o.disagg
        else "the serve pool",
        "batch_per_rank_at_tpot": ch.batch,
        "batch_limited_by": ch.limit,
        "decode_step_ms_at_batch": r(full.t_decode * 1000, 2) if full else None,
        "mixed_step_ms_at_batch": r(full.t_mixed * 1000, 2) if full else None,
        "requests_in_flight": r(o.rates.inflight, 1),
        "arrival_rate_rps": r(o.rates.lam, 3),
        "replicas_needed": ch.replicas,
        "gpus_needed": ch.gpus,
    }


def _spare_doc(run: Run, o: Outcome) -> dict:
    """GPUs the plan leaves idle at the traffic, and why."""
    pools = [p for p in o.pools.pools.values() if p]
    used: dict = {}
    for p in pools:
        used[p["gpu"]] = used.get(p["gpu"], 0) + p["gpus"]
    have = {run.gpu["id"]: run.total_gpus}
    d = run.n["decode"]
    if d:
        have[d["gpu"]["id"]] = have.get(d["gpu"]["id"], 0) + d["gpus_per_node"] * d["nodes"]
    by_gpu = {g: n - used.get(g, 0) for g, n in have.items() if n - used.get(g, 0) > 0}
    count = sum(by_gpu.values())
    why = []
    main = o.pools.pools["decode"] or o.pools.pools["serve"]
    auto = _max_replicas(run, o)
    if count:
        if auto > main["replicas"]:
            why.append(
                f"the traffic needs {main['replicas']} {main['role']} replica(s); up to {auto} fit the hardware, so "
                f"autoscaling.max_replicas is {auto} (the spare GPUs absorb bursts when autoscaling is on)"
            )
        rest = count - (auto - main["replicas"]) * main["gpus_per_replica"] if auto > main["replicas"] else count
        if rest > 0:
            if d and not o.disagg and by_gpu.get(d["gpu"]["id"]):
                why.append(
                    f"the {d['gpu']['id']} decode GPUs stay unused: the aggregated plan costs less per token "
                    "(disaggregation_options)"
                )
            else:
                why.append(f"{rest} GPU(s) do not make a whole engine of {main['gpus_per_replica']} GPUs")
    return {"count": count, "by_gpu": by_gpu, "why": "; ".join(why) if why else "every GPU is in a pool"}


def _max_replicas(run: Run, o: Outcome) -> int:
    """Engines of the main pool the hardware holds next to the other pool (the autoscaler's ceiling)."""
    main = o.pools.pools["decode"] or o.pools.pools["serve"]
    if o.disagg:
        d = run.n["decode"]
        room = d["gpus_per_node"] * d["nodes"] if d else run.total_gpus - o.pools.pools["prefill"]["gpus"]
    else:
        room = run.total_gpus
    return max(main["replicas"], room // main["gpus_per_replica"])


def _efficiency_doc(run: Run, o: Outcome) -> dict:
    eff = o.rates.serve.eff
    return {
        "gemm": eff.gemm_kind,
        "gemm_compute": eff.gemm_compute,
        "gemm_bandwidth": eff.gemm_bandwidth,
        "moe_compute": eff.moe_compute if run.model["kind"] == "moe" else None,
        "moe_bandwidth": eff.moe_bandwidth if run.model["kind"] == "moe" else None,
        "moe_fit": f"{eff.moe_kind} {eff.moe.fit} / {eff.moe_ep1.fit} / {eff.moe_tp.fit}"
        if run.model["kind"] == "moe"
        else None,
        "source": eff.calibrated or eff.source,
        "calibrated": bool(eff.calibrated),
        "prefill_mfu": run.pol["prefill_mfu"],
        "decode_mbu": run.pol["decode_mbu"],
        "target_utilization": run.pol["target_utilization"],
    }


def _serving_doc(run: Run, o: Outcome) -> dict:
    pol = run.pol
    main_pool = o.pools.pools["decode"] or o.pools.pools["serve"]
    return {
        "disaggregated": o.disagg,
        "pools": o.pools.pools,
        "speculative": o.ctx.spec,
        "kv_connector": o.xfer.connector(),
        "kv_offload": main_pool["kv_offload"],
        "engine_env": main_pool["engine_env"],
        "engine_args": main_pool["engine_args"],
        "autoscaling": {
            "scale_to_zero": pol["scale_to_zero"],
            "min_replicas": 0 if pol["scale_to_zero"] else min(pol["min_replicas"], main_pool["replicas"]),
            "max_replicas": _max_replicas(run, o),
            "target_utilization": pol["target_utilization"],
        },
    }


def plan_document(run: Run, o: Outcome) -> dict:
    """Stage 9: the plan as a plain dict (JSON/YAML serialisable)."""
    n, pol, p = run.n, run.pol, o.pools
    out = {
        "model": _model_doc(run),
        "blueprint": n["blueprint"],
        "policy": pol,
        "policy_source": n["policy_source"],
        "hardware": _hardware_doc(run),
        "weights": _weights_doc(p.main_ctx.wb, o.ctx.weights),
        "memory": _memory_doc(run, p.main_mem),
        "kv": _kv_doc(run.model, p),
        "layout": _layout_doc(o),
    }
    out.update(_serving_doc(run, o))
    out.update(
        {
            "vllm_version": n["vllm_version"],
            "traffic": dict(run.traffic, arrival_rate_rps=r(o.rates.lam, 3), concurrent_sessions=o.rates.sessions),
            "slo": run.slo,
            "latency": _latency_doc(run, o),
            "layout_candidates": _candidates_doc(run, o),
            "spare_gpus": _spare_doc(run, o),
            "disaggregation_options": run.comparison,
            "efficiency": _efficiency_doc(run, o),
            "estimates": _estimates_doc(o),
            "seed_comparison": run.seed,
            "decisions": list(run.dec),
            "warnings": run.warnings,
            "units": units.plan_units(),
        }
    )
    return out
