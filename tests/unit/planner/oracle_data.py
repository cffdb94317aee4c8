# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""The aiconfigurator reference data (oracle/aiconfigurator.json) and the planner's figures for the same points.

Shared by tests/unit/planner/test_oracle.py and tests/bench/test_planner_oracle_bench.py. Nothing here needs
aiconfigurator: the data was produced by tests/bench/planner_oracle.py (commands and version inside the file).
"""

from __future__ import annotations

import copy
import json
import math
import os

import yaml
from ansible_collections.inference.blueprints.plugins.module_utils.planner import latency as lt
from ansible_collections.inference.blueprints.plugins.module_utils.planner import plan, search
from ansible_collections.inference.blueprints.plugins.module_utils.planner.engine import EngineCtx
from ansible_collections.inference.blueprints.plugins.module_utils.planner.inputs import normalize
from ansible_collections.inference.blueprints.plugins.module_utils.planner.structs import Layout, Run

PATH = os.path.join(os.path.dirname(__file__), "oracle", "aiconfigurator.json")
TOLERANCE = 0.25  # issue 9: within +-25 % of aiconfigurator for the same layout and batch
GPU_FACTOR = 1.1  # issue 9: the planner's GPUs <= 1.1 x aiconfigurator's best


def load() -> dict:
    with open(PATH, encoding="utf-8") as fh:
        return json.load(fh)


def points() -> list[dict]:
    return load()["points"]


def planner_run_inputs(inp: dict) -> dict:
    """The planner's inputs of a stored point: an ``architecture_file`` (oracle/architectures/*.yaml, a model outside
    the catalog) is read into ``model_architecture`` as ``blueprints plan --architecture FILE`` reads it."""
    out = copy.deepcopy(inp)
    rel = out.pop("architecture_file", None)
    if rel:
        with open(os.path.join(os.path.dirname(PATH), rel), encoding="utf-8") as fh:
            out["model_architecture"] = yaml.safe_load(fh)
    return out


def plan_for_traffic(inp: dict) -> tuple[dict, dict]:
    """(plan, the inputs it was made from) for a stored point's inputs: the point's own plan, or, when the traffic
    needs more GPUs than the point's hardware has, the plan for the same traffic on as many nodes as hold it.

    aiconfigurator's best (`cli default` without `--total-gpus`) is the fewest GPUs for the traffic whatever the
    cluster's size. On a cluster too small for the traffic the planner answers another question: it plans every GPU
    there is and keeps the option that carries the most of the traffic on them, and says in its warning what the
    traffic needs. The grid compares like with like: the plan a cluster big enough for the traffic gets. The nodes
    added are joined as the planner joins nodes when the point names no interconnect (RDMA, its default over more
    than one node; the plan's `hardware.interconnect` says which); a point with a decode pool on GPUs of its own is
    planned as it is."""
    run_inp = planner_run_inputs(inp)
    p = plan(run_inp)
    if run_inp.get("decode"):
        return p, run_inp
    gpn = run_inp.get("gpus_per_node", 1)
    for _attempt in range(4):
        need = plan_gpus(p)
        if need <= run_inp.get("nodes", 1) * gpn:
            return p, run_inp
        run_inp = dict(run_inp, nodes=math.ceil(need / gpn))
        p = plan(run_inp)
    raise AssertionError(f"no cluster size holds the traffic: the plan on {run_inp['nodes']} nodes needs {need} GPUs")


def planned(pt: dict) -> dict:
    return plan_for_traffic(pt["planner_inputs"])[0]


def plan_gpus(p: dict) -> int:
    """GPUs the plan needs for the traffic (pools as the traffic needs them, not the spare hardware)."""
    if p["disaggregated"]:
        return p["pools"]["prefill"]["required_gpus"] + p["pools"]["decode"]["required_gpus"]
    return p["estimates"]["gpus_needed"]


def _engine(pt: dict, lay: dict) -> tuple[lt.EngineModel, lt.Workload]:
    inp = planner_run_inputs(pt["planner_inputs"])
    run = Run(normalize(inp))
    c = EngineCtx(run.n, run.gpu, inp["weights"], inp["kv_cache_dtype"], None)
    hw = search.Hardware(run.gpu, run.gpn, run.nodes, run.n["interconnect"])
    eff, _why = search.efficiencies(run, c, hw)
    layout = Layout(tp=lay["tp"], pp=lay["pp"], dp=lay["dp"], ep=lay["ep"])  # ep 1 on a MoE: experts split by TP
    return lt.EngineModel(c, layout, eff, hw.topo()), search.workload(run)


def ours(pt: dict, est: dict) -> dict:
    """The planner's TTFT / TPOT (ms) for one stored aiconfigurator estimate, same mode, layout and batch.

    agg: closed loop at the batch (aiconfigurator's model: ``batch`` requests, each replaced when it finishes); TPOT is
    the mean step time, TTFT the mean. static_gen: decode steps only. static_ctx: one prompt's prefill step."""
    em, w = _engine(pt, est["layout"])
    # aiconfigurator's batch with pipeline parallelism is one micro-batch of PP in flight: the engine runs PP x it
    mode = est["mode"]
    b = float(est["aic_batch"] * est["layout"]["pp"] if "aic_batch" in est else est["batch"])
    if mode == "agg":
        p = lt.aggregated(em, b, w)
        return {"ttft_ms": p.ttft_mean * 1000, "tpot_ms": p.tpot_p50 * 1000}
    if mode == "static_gen":
        return {"ttft_ms": None, "tpot_ms": lt.decode_only(em, b, w).tpot_p50 * 1000}
    return {"ttft_ms": em.step(0.0, w.prompt_mean, 0.0, w.prompt_mean / 2) * 1000, "tpot_ms": None}


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not b:
        return None
    return a / b


def comparisons(pt: dict) -> list[dict]:
    """Every stored estimate of a point next to the planner's figure for it."""
    out = []
    for est in pt["estimates"]:
        if est.get("tpot_ms") is None and est.get("ttft_ms") is None:
            continue
        mine = ours(pt, est)
        out.append(
            {
                "mode": est["mode"],
                "layout": est["layout"],
                "batch": est["batch"],
                "aic_ttft_ms": est.get("ttft_ms"),
                "aic_tpot_ms": est.get("tpot_ms"),
                "ttft_ms": mine["ttft_ms"],
                "tpot_ms": mine["tpot_ms"],
                "ttft_ratio": ratio(mine["ttft_ms"], est.get("ttft_ms") if est["mode"] != "static_gen" else None),
                "tpot_ratio": ratio(mine["tpot_ms"], est.get("tpot_ms") if est["mode"] != "static_ctx" else None),
            }
        )
    return out


def interpolate(pt: dict, mode: str, lay: dict, batch: float, key: str) -> float | None:
    """aiconfigurator's figure at ``batch`` for a stored layout: exact, or log-log between the nearest batches."""
    rows = sorted(
        (e["batch"], e[key])
        for e in pt["estimates"]
        if e["mode"] == mode and e["layout"] == lay and e.get(key) is not None
    )
    if not rows:
        return None
    for b, v in rows:
        if b == batch:
            return v
    lo = [x for x in rows if x[0] < batch]
    hi = [x for x in rows if x[0] > batch]
    if not lo or not hi:
        return None
    (b0, v0), (b1, v1) = lo[-1], hi[0]
    f = math.log(batch / b0) / math.log(b1 / b0)
    return math.exp(math.log(v0) + f * (math.log(v1) - math.log(v0)))


def chosen(p: dict) -> tuple[str, dict, int]:
    """The (aiconfigurator mode, layout, batch per rank) whose TPOT the plan relies on."""
    if p["disaggregated"]:
        d = p["pools"]["decode"]
        return "static_gen", {k: d[k] for k in ("tp", "pp", "dp", "ep")}, d["max_num_seqs"]
    c = p["layout_candidates"][0]
    return "agg", c["layout"], c["batch_per_rank"]
