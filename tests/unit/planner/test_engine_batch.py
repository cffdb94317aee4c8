# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Issue 36 item 1: the engine runs the batch the plan sized.

vLLM admits up to ``--max-num-seqs`` sequences a rank. A serve or decode engine started with more than the batch the
layout search sized (its TPOT p95 meets the SLO when the rank is full) breaks the TPOT the plan promises as soon as a
burst fills the slots: before the fix the blueprints' ``max_num_seqs`` (rag 64, edge_sno 64, batch 512) went to the
engine as it was, or to the KV limit, while the plan's figures described 11, 4 and 145 sequences. Checked for every
example inventory (as the site loader plans it) and every oracle point, against the latency model recomputed for the
pool's own engine: its GPU, precision, layout (DCP included) and the workload.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils.intent import site as site_mod
from ansible_collections.inference.blueprints.plugins.module_utils.planner import latency as lt
from ansible_collections.inference.blueprints.plugins.module_utils.planner import plan, search
from ansible_collections.inference.blueprints.plugins.module_utils.planner.engine import EngineCtx, decode_ctx
from ansible_collections.inference.blueprints.plugins.module_utils.planner.inputs import normalize
from ansible_collections.inference.blueprints.plugins.module_utils.planner.structs import Layout, Run

from tests.unit.planner import oracle_data as od

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted(p.name for p in (ROOT / "inventories").glob("example-*") if p.is_dir())
POINTS = od.points()


def _site_plans(site: str, monkeypatch) -> list[tuple[dict, dict]]:
    """(planner inputs, plan) of every model of every cluster of a site inventory, as the site loader plans them
    (the on-disk plan cache bypassed: its key is the planner's code, which a test's changes leave alone)."""
    seen = []

    def record(inp: dict) -> dict:
        p = plan(copy.deepcopy(inp))
        seen.append((copy.deepcopy(inp), p))
        return p

    monkeypatch.setattr(site_mod, "cached_plan", record)
    cli.site_intents(str(ROOT / "inventories" / site), None)
    assert seen, site
    return seen


def _engine(inp: dict, p: dict, role: str) -> tuple[lt.EngineModel, lt.Workload]:
    """The latency model of one pool's engine as the plan deploys it."""
    run = Run(normalize(copy.deepcopy(inp)))
    pool = p["pools"][role]
    c = EngineCtx(run.n, run.gpu, p["weights"]["precision"], p["kv"]["dtype"], p["speculative"])
    hw = search.Hardware(run.gpu, run.gpn, run.nodes, run.n["interconnect"])
    d = run.n["decode"]
    if role == "decode" and d:
        c = decode_ctx(c)
        hw = search.Hardware(d["gpu"], d["gpus_per_node"], d["nodes"], run.n["interconnect"])
    assert c.gpu["id"] == pool["gpu"]
    eff, _why = search.efficiencies(run, c, hw)
    lay = Layout(tp=pool["tp"], pp=pool["pp"], dp=pool["dp"], ep=pool["ep"], dcp=pool["dcp"])
    return lt.EngineModel(c, lay, eff, hw.topo()), search.workload(run)


def _sized_rows(p: dict, role: str) -> list[dict]:
    return [c for c in p["layout_candidates"] if c.get("chosen") and c["role"] == role]


def check_engine_batch(inp: dict, p: dict) -> None:
    """Every serve / decode pool: --max-num-seqs is the pool's max_num_seqs, the batch the chosen candidate and the
    option table describe, and the latency model's TPOT p95 of a rank full at that batch meets the SLO."""
    slo = p["slo"]["tpot_p95_ms"]
    checked = 0
    for role in ("serve", "decode"):
        pool = p["pools"][role]
        if not pool:
            continue
        args = dict(a.partition("=")[::2] for a in pool["engine_args"])
        mns = pool["max_num_seqs"]
        assert args.get("--max-num-seqs") == str(mns), (role, mns, pool["engine_args"])
        rows = _sized_rows(p, role)
        assert len(rows) == 1, (role, rows)
        assert rows[0]["batch_per_rank"] == mns, (role, "candidate", rows[0]["batch_per_rank"], mns)
        option = p["disaggregation_options"]["disaggregated" if p["disaggregated"] else "aggregated"]
        assert option[role]["batch_per_rank"] == mns, (role, "option", option[role], mns)
        if role == "serve":
            assert p["estimates"]["batch_per_rank_at_tpot"] == mns
        em, w = _engine(inp, p, role)
        full = lt.aggregated(em, mns, w) if role == "serve" else lt.decode_only(em, mns, w)
        assert full.tpot_p95 * 1000 <= slo + 1e-6, f"{role}: TPOT p95 {full.tpot_p95 * 1000:.1f} ms at {mns} > {slo}"
        checked += 1
    assert checked, "no serve or decode pool"


@pytest.mark.parametrize("site", EXAMPLES)
def test_example_engines_run_the_sized_batch(site, monkeypatch):
    for inp, p in _site_plans(site, monkeypatch):
        check_engine_batch(inp, p)


@pytest.mark.parametrize("pt", POINTS, ids=[p["id"] for p in POINTS])
def test_oracle_engines_run_the_sized_batch(pt):
    p, inp = od.plan_for_traffic(pt["planner_inputs"])
    check_engine_batch(inp, p)


@pytest.mark.parametrize("blueprint", ["rag", "edge_sno"])
def test_a_blueprint_number_only_lowers_the_batch(blueprint):
    """A blueprint's max_num_seqs caps the batch: with a larger cap the engine runs what TPOT allows, never the cap."""
    from tests.unit.planner.blueprint_plan import plan as bp_plan

    inp = {"model": "Qwen3.6-27B", "gpu": "rtx-pro-6000", "weights": "fp8", "blueprint": blueprint}
    inp["traffic"] = {"prompt_tokens_mean": 1000, "prompt_tokens_p95": 4000, "output_tokens_mean": 300}
    inp["traffic"].update(output_tokens_p95=1000, concurrent_sessions=20, arrival_rate_rps=0.5)
    inp["slo"] = {"ttft_p95_ms": 4000, "tpot_p95_ms": 30}
    capped = bp_plan(dict(inp, policy={"max_num_seqs": 2}))
    assert capped["pools"]["serve"]["max_num_seqs"] == 2
    assert "--max-num-seqs=2" in capped["engine_args"]
    loose = bp_plan(inp)
    assert loose["policy"]["max_num_seqs"] == 64
    mns = loose["pools"]["serve"]["max_num_seqs"]
    assert 2 <= mns < 64, mns
    assert f"--max-num-seqs={mns}" in loose["engine_args"]


def test_verify_reports_the_batch_the_main_engine_runs():
    """The verify / SLO benchmark report's "batch per rank" is the main pool's engine batch: a P/D plan's decode
    pool, not the aggregated option's estimate the plan did not deploy."""
    from ansible_collections.inference.blueprints.plugins.plugin_utils.slo import bench

    pd = od.plan(od.planner_run_inputs(next(p for p in POINTS if p["id"] == "27b-h200-chat")["planner_inputs"]))
    assert pd["disaggregated"]
    assert pd["estimates"]["batch_per_rank_at_tpot"] != pd["pools"]["decode"]["max_num_seqs"]
    assert bench.plan_row(pd)["batch_per_rank"] == pd["pools"]["decode"]["max_num_seqs"]
