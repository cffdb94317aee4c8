# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Issue 36 item 5: every figure the plan prints has a unit, and none is a 0.0 placeholder.

Before: the report's option table said "cost / hour 1.8" (1.8 what?), its P/D candidate rows showed TTFT p95 0.0 for
decode pools and TPOT p95 0.0 for prefill pools (figures those pools do not have, printed as measured zeros), the
decisions printed "kv block size = 2128" and the JSON had no way to tell what cost_per_hour or slot_utilization count.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils.intent import summary
from ansible_collections.inference.blueprints.plugins.module_utils.planner import plan, report
from ansible_collections.inference.blueprints.plugins.module_utils.planner.structs import Decisions

from tests.unit.planner import oracle_data as od

ROOT = Path(__file__).resolve().parents[3]
# the example chat site's model and traffic on one H100 node: the plan disaggregates (P/D candidate rows on both sides)
PD = {
    "model": "Qwen3.5-35B-A3B",
    "gpu": "h100",
    "gpus_per_node": 8,
    "weights": "fp8",
    "kv_cache_dtype": "fp8",
    "traffic": {
        "prompt_tokens_mean": 800,
        "prompt_tokens_p95": 2000,
        "output_tokens_mean": 200,
        "output_tokens_p95": 600,
        "arrival_rate_rps": 40,
    },
    "slo": {"ttft_p95_ms": 1000, "tpot_p95_ms": 50},
    "policy": {"speculative": "off", "kv_offload": "none", "disaggregation": "always"},
}
# map keys whose children are keyed by a value, not a figure name (context lengths, GPU ids)
KEYED_BY_VALUE = ("max_concurrency", "by_gpu")
NOT_FIGURES = ("decisions", "seed_comparison", "units")
COST_PER_HOUR = "H100-hours per hour"  # GPUs x cost_class (gpus.yaml: an H100 = 1.0), an hour
COST_PER_MTOK = "H100-hours per million output tokens"


def unit_of(p: dict, key: str) -> str | None:
    """A figure's unit as a reader of the plan finds it: ``units[key]``, else the longest ``units["*suffix"]``."""
    table = p.get("units") or {}
    if key in table:
        return table[key]
    suffixes = [k[1:] for k in table if k.startswith("*") and key.endswith(k[1:])]
    return table["*" + max(suffixes, key=len)] if suffixes else None


@pytest.fixture(scope="module")
def pd_plan() -> dict:
    p = plan(PD)
    assert p["disaggregated"]
    return p


def _figures(d, path=""):
    """(path, key, value) of every number in a plan (booleans are flags, not figures)."""
    if isinstance(d, dict):
        for k, v in d.items():
            if k in NOT_FIGURES or (k in KEYED_BY_VALUE and isinstance(v, dict)):
                continue
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                yield f"{path}.{k}", k, v
            else:
                yield from _figures(v, f"{path}.{k}")
    elif isinstance(d, list):
        for i, x in enumerate(d):
            yield from _figures(x, f"{path}[{i}]")


def _plans():
    yield "pd", plan(PD)
    for pt in od.points()[::4]:
        yield pt["id"], od.plan(od.planner_run_inputs(pt["planner_inputs"]))


def test_every_number_in_the_plan_has_a_unit():
    """The plan's ``units`` names the unit of every figure whose key does not (and the suffixes of those that do);
    every numeric decision carries its unit."""
    for label, p in _plans():
        assert p["units"]["cost_per_hour"].startswith(COST_PER_HOUR), label
        bare = sorted({path for path, key, _v in _figures(p) if not unit_of(p, key)})
        assert not bare, (label, bare)
        for d in p["decisions"]:
            if isinstance(d["choice"], (int, float)) and not isinstance(d["choice"], bool):
                assert d.get("unit"), (label, d)


def test_pd_rows_have_no_placeholder_zeros(pd_plan):
    """A P/D prefill rank decodes nothing and a decode rank prefills nothing: those figures are null with the reason,
    in every candidate row and in the plan's latency, never 0.0."""
    lat = pd_plan["latency"]
    assert (
        lat["prefill_per_rank"]["tpot_p95_ms"] is None
        and "decodes no tokens" in lat["prefill_per_rank"]["not_applicable"]
    )
    assert (
        lat["decode_per_rank"]["ttft_p95_ms"] is None and "prefills nothing" in lat["decode_per_rank"]["not_applicable"]
    )
    rows = [c for c in pd_plan["layout_candidates"] if c["role"] in ("prefill", "decode") and c.get("latency")]
    assert {c["role"] for c in rows} == {"prefill", "decode"}
    for c in rows:
        for key in ("ttft_p95_ms", "tpot_p95_ms", "ttft_p50_ms", "tpot_p50_ms"):
            assert c["latency"][key] != 0, (c["role"], key, c["latency"])
        gone = "tpot_p95_ms" if c["role"] == "prefill" else "ttft_p95_ms"
        assert c["latency"][gone] is None and c["latency"]["not_applicable"]
    dis = pd_plan["disaggregation_options"]["disaggregated"]
    assert dis["ttft_p95_ms"] == lat["ttft_p95_ms"] and dis["tpot_p95_ms"] == lat["tpot_p95_ms"]


def _section(md: str, title: str) -> str:
    return md.split(f"### {title}", 1)[1].split("\n### ", 1)[0]


def test_report_prints_units_and_no_placeholders(pd_plan):
    md = report.to_markdown(pd_plan)
    assert "cost / hour" not in md and "cost / M tokens" not in md
    options = _section(md, "Aggregated vs disaggregated")
    assert f"| cost ({COST_PER_HOUR}) |" in options and f"| cost ({COST_PER_MTOK}) |" in options
    assert "| TTFT p95 (ms) |" in options and "| TPOT p95 (ms) |" in options
    cands = _section(md, "Layout candidates")
    assert "TTFT p95 (ms)" in cands and "TPOT p95 (ms)" in cands and "sequences per DP rank" in cands
    assert not re.search(r"\|\s*0\.0\s*\|", cands), "a 0.0 placeholder in the candidate table"
    assert "n/a (prefill pool)" in cands and "n/a (decode pool)" in cands
    assert "a P/D prefill engine decodes no tokens" in cands
    assert f"{COST_PER_HOUR} more than" in cands  # the runner-ups' why: "costs 2.0 ... more than ..."
    estimates = _section(md, "Estimates (step-latency model)")
    for line in estimates.splitlines()[3:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"-?[0-9.]+", cells[1]):
            assert cells[2], f"no unit: {line}"
    decisions = _section(md, "Decisions")
    assert re.search(r"\| kv block size \| \d+ tokens \|", decisions)
    assert re.search(r"\| replicas \| \d+ engines \|", decisions) or "| decode pool |" in decisions


def test_text_printout_says_the_unit():
    """The playbook's and the CLI's text lines (intent summary) print a numeric choice with its unit."""
    dec = Decisions()
    dec.add("kv block size", 2128, "vLLM derives it")
    dec.add("disaggregation", True, "cost rule")
    assert dec[0]["unit"] == "tokens" and "unit" not in dec[1]
    intents = cli.site_intents(str(ROOT / "inventories" / "example-rag"), None)
    text = "\n".join(summary.lines(intents["rag-central-1"]))
    assert re.search(r"qwen-rag: kv block size = \d+ tokens \|", text), text
    assert re.search(r"qwen-rag: replicas = \d+ engines \|", text), text
