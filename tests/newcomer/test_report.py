"""The sizing report does not contradict itself, and its engine arguments and charts can be used as they are.

Checked on a plan whose pools meet the traffic (the example chat site) and on a disaggregated one
that is short of GPUs (prefill and decode pools, required above planned):

* the Pools table's "required" column is in GPUs, like the GPUs column beside it;
* the layout row names every pool with the replicas, GPUs per replica and engine layout the Pools
  table shows;
* a shell reads the engine arguments back as exactly the plan's arguments (JSON values quoted);
* the pool chart has a capacity line per pool and totals per GPU type, and draws "required" red
  only when the planned GPUs fall short; the memory chart has the GPU's capacity and each total.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLUEPRINTS = Path(sys.executable).parent / "blueprints"
ENV = {
    **os.environ,
    "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".cache/collections"),
    "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
}
SVG = "{http://www.w3.org/2000/svg}"
CASES = {
    "site-met": ["--site", str(ROOT / "inventories/example-chat")],
    "pd-short": [
        "--model",
        "Qwen3.5-397B-A17B",
        "--gpu",
        "h100",
        "--gpus-per-node",
        "8",
        "--nodes",
        "4",
        "--blueprint",
        "chat",
        "--concurrent-sessions",
        "20000",
        "--arrival-rate",
        "200",
    ],
}


@pytest.fixture(scope="module", params=sorted(CASES))
def report(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    proc = subprocess.run(
        [BLUEPRINTS, "plan", *CASES[request.param], "--format", "json", "--report", str(out)],
        capture_output=True,
        text=True,
        check=True,
        env=ENV,
        cwd=ROOT,
    )
    data = json.loads(proc.stdout)
    plan = data[0]["plan"] if isinstance(data, list) else data
    return request.param, plan, (out / "report.md").read_text(), out


def _required(pool):
    if pool.get("required_gpus") is not None:
        return pool["required_gpus"]
    return pool["required_replicas"] * pool["gpus_per_replica"]


def _pools(plan):
    return [(k, v) for k, v in plan["pools"].items() if v]


def _section_table(md: str, heading: str) -> list[list[str]]:
    body = md.split(heading, 1)[1]
    rows = []
    for line in body.splitlines()[1:]:
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows:
            break
    return rows


def test_pools_required_column_is_gpus_and_layout_row_agrees(report):
    case, plan, md, _out = report
    rows = _section_table(md, "### Pools")
    header, body = rows[0], rows[2:]
    assert header[5] == "required GPUs"
    layout_row = next(r for r in _section_table(md, "| item | value |") if r and r[0] == "layout")[1]
    for (role, pool), row in zip(_pools(plan), body, strict=True):
        assert row[0] == role and int(row[4]) == pool["gpus"]
        assert int(row[5]) == _required(pool), f"{case}: required should be GPUs like the GPUs column"
        assert int(row[2]) * int(row[3]) == int(row[4])
        said = re.search(rf"{role}: (\d+) replica\(s\) of (\d+) GPUs \(([^)]*)\)", layout_row)
        assert said, layout_row
        assert (int(said[1]), int(said[2]), said[3]) == (int(row[2]), int(row[3]), row[6]), (layout_row, row)


def test_engine_arguments_read_back_by_a_shell_are_the_plans(report):
    _case, plan, md, _out = report
    blocks = re.findall(r"^(\w+):\n\n```\n(.*?)\n```", md.split("### Engine arguments", 1)[1], re.S | re.M)
    assert [b[0] for b in blocks] == [r for r, _p in _pools(plan)]
    for (role, text), (_r, pool) in zip(blocks, _pools(plan), strict=True):
        words = shlex.split(text.replace("\\\n", " "))
        assert words[:2] == ["vllm", "serve"]
        assert words[3:] == pool["engine_args"], role
        assert any("{" in a for a in pool["engine_args"]), "the case should carry JSON values"


def test_pool_chart_has_capacity_totals_and_required_red_only_when_short(report):
    case, plan, _md, out = report
    (svg,) = out.glob("*-pools.svg")
    root = ET.parse(svg).getroot()
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    lines = [ln for ln in root.iter(f"{SVG}line") if ln.get("stroke-dasharray")]
    pools = _pools(plan)
    assert len(lines) == len(pools), "one capacity line per pool"
    capacity = plan["hardware"]["gpus_total"]
    assert sum(f"capacity {capacity}" == t for t in texts) == len(pools)
    total = next(t for t in texts if t.startswith("total "))
    assert total.startswith(f"total h100: {sum(p['gpus'] for _r, p in pools)} planned of {capacity}")
    required_bars = [r for r in root.iter(f"{SVG}rect") if r.get("fill") in ("#e15759", "#59a14f")]
    for (_role, pool), bar in zip(pools, required_bars, strict=True):
        short = pool["gpus"] < _required(pool)
        assert (bar.get("fill") == "#e15759") == short, (case, pool["gpus"], _required(pool), bar.get("fill"))
    if case == "pd-short":
        assert any("short by" in t for t in texts)
    else:
        assert not any("short by" in t for t in texts)


def test_memory_chart_has_the_gpu_capacity_and_totals(report):
    _case, plan, _md, out = report
    (svg,) = out.glob("*-memory.svg")
    root = ET.parse(svg).getroot()
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    assert [ln for ln in root.iter(f"{SVG}line") if ln.get("stroke-dasharray")]
    gib = plan["memory"]["gpu_memory_gib"]
    assert any(t.endswith(f"of {gib:.1f} GiB") for t in texts), texts
