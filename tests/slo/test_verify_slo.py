"""playbooks/verify.yml's SLO benchmark against guidellm mock servers standing in for vLLM (issue 13).

The edge site (one RTX PRO 6000, qwen-edge: TTFT p95 <= 1500 ms, TPOT p95 <= 60 ms) is copied into a
temporary inventory; its one serving replica is a guidellm mock server on loopback, reached directly
(no gateway here; docs/verify.md says why). Only the tasks tagged ``slo`` run (the site action is
``always``): the readiness and smoke tasks need a cluster and are covered by the serving tests.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from ansible_collections.inference.blueprints.plugins.module_utils import cli

from tests.ansible_run import run_playbook
from tests.serving_helpers import INVENTORIES, PLAYBOOKS, ROOT

pytestmark = [pytest.mark.slow]

HOST = "store-berlin-001"
MODEL = "qwen-edge"
SERVED = "Qwen3.5-35B-A3B"  # what the intent says clients send (models[].served_name, default the id)
# bounded load: at most 24 requests or 40 s, 6 x the planned 0.5 req/s
BENCH = {"max_requests": 24, "max_seconds": 40, "rate_scale": 6}
EXAMPLE_SLO = {"ttft_p95_ms": 1500, "tpot_p95_ms": 60}


def _inventory(tmp_path: Path, slo: dict | None = None) -> Path:
    """The edge example's inventory; ``slo``: SLO figures (ms) to write over the example's."""
    inv = tmp_path / "inventory"
    shutil.copytree(INVENTORIES / "example-edge-fleet", inv)
    fleet = inv / "group_vars" / "edge_fleet" / "fleet.yml"
    text = fleet.read_text()
    for key, ms in (slo or {}).items():
        old = f"{key}: {EXAMPLE_SLO[key]}"
        assert text.count(old) == 1, old
        text = text.replace(old, f"{key}: {ms}")
    fleet.write_text(text)
    return inv


def _verify(inv: Path, endpoints, tmp_path: Path, **extra):
    return run_playbook(
        PLAYBOOKS / "verify.yml",
        inv,
        tags="slo",
        limit=HOST,
        extravars={
            "verify_slo_endpoints": {MODEL: endpoints},
            "slo_benchmark": BENCH,
            "report_dir": str(tmp_path / "reports"),
            "serving_namespace": "llm-edge-slo",
            **extra,
        },
    )


def test_inside_the_slo_verify_passes_writes_the_report_and_the_calibration(mocks, tmp_path):
    # make test's load stretches the mock's figures: a CI run measured a 514-token TTFT above 300 ms (read as a
    # prefill rate and carried to the site's 3000-token p95 prompts, no layout meets 1500 ms: the outside test below
    # shows that warning), an emulation TPOT p95 164 ms against the mock's 8 ms and one connect timeout in 24. So this
    # test sets SLOs of 12 s and 400 ms and allows 10 % errors: it checks the report, the calibration and the refit,
    # and the outside test checks that a missed SLO fails.
    inv = _inventory(tmp_path, {"ttft_p95_ms": 12000, "tpot_p95_ms": 400})
    urls = mocks.start(MODEL, "serve", SERVED, 1, latency=(60, 8))
    run = _verify(inv, urls, tmp_path, slo_benchmark={**BENCH, "max_error_rate": 0.1})
    assert run.rc == 0, run.failure_messages() or run.stdout[-3000:]
    res = run.results_of("inference.blueprints.slo_benchmark")[0]
    assert res["passed"] is True and res["findings"] == []
    figures = res["models"][MODEL]["figures"]
    assert 60 <= figures["ttft"]["p95"] < 12000 and 8 <= figures["tpot"]["p95"] < 400, figures
    assert res["models"][MODEL]["goodput"]["fraction"] > 0.9

    report = json.loads(Path(res["report_json"]).read_text())
    run_ = report["models"][0]["runs"][0]
    assert run_["requests"] <= BENCH["max_requests"] and run_["duration_s"] <= BENCH["max_seconds"] + 30
    assert run_["load"]["rate_rps"] == pytest.approx(3.0)
    md = Path(res["report"]).read_text()
    assert "TTFT p50 / p95 / p99" in md and "qwen-edge-ttft-cdf.svg" in md
    svg = (Path(res["report"]).parent / "qwen-edge-ttft-cdf.svg").read_text()
    assert "<svg" in svg and "SLO 12000 ms" in svg
    assert (Path(res["report"]).parent / "qwen-edge-throughput.svg").is_file()

    # calibration: host_vars/<cluster>.yml moved into host_vars/<cluster>/ (Ansible would read only the directory)
    cal_file = inv / "host_vars" / HOST / "calibration.yml"
    assert (inv / "host_vars" / HOST / "main.yml").is_file() and not (inv / "host_vars" / f"{HOST}.yml").exists()
    entries = yaml.safe_load(cal_file.read_text())["calibration"]
    (entry,) = entries
    assert entry["model"] == "Qwen3.5-35B-A3B" and entry["gpu"] == "rtx-pro-6000"
    assert entry["vllm_version"] == "0.33.0" and entry["layout"] == {"tp": 1, "pp": 1, "dp": 1, "ep": 1}
    # the mock decodes one token per ~8 ms: ~125 tokens/s per sequence at most (and the TPOT SLO's 2.5 at least)
    assert 2.5 < entry["decode_tokens_per_s_per_seq"] <= 125, entry
    assert entry["prefill_tokens_per_s"] > 0 and entry["prompt_tokens"] > 0 and entry["batch"] >= 1
    assert "verify run example-edge-fleet/store-berlin-001" in entry["source"]
    # the plan before and after: the mock is far slower than an RTX PRO 6000, so the refit needs more
    (row,) = res["calibration"]["before_after"]
    assert row["before"]["efficiency"] == "catalog" and row["after"]["efficiency"] == "calibrated"
    assert row["after"]["tpot_p95_ms"] > row["before"]["tpot_p95_ms"]
    assert any("calibrated from measurements (verify run example-edge-fleet" in w for w in row["why"]), row
    assert "The plan before and after calibration" in md

    # the next run plans with it: the site loader reads host_vars/<cluster>/calibration.yml (the CLI's too)
    plans = {h: i["plans"][0]["plan"] for h, i in cli.site_intents(str(inv), str(ROOT / "blueprints")).items()}
    assert plans[HOST]["latency"]["calibrated"] is True
    assert plans["clinic-lyon-002"]["latency"]["calibrated"] is False  # another cluster: not its measurement
    again = run_playbook(
        PLAYBOOKS / "plan.yml",
        inv,
        limit=HOST,
        extravars={"report_dir": str(tmp_path / "plan"), "serving_namespace": "llm-edge-slo"},
    )
    assert again.rc == 0, again.failure_messages()
    sizing = "".join(p.read_text() for p in (tmp_path / "plan").rglob("*.md"))
    assert "calibrated from measurements (verify run example-edge-fleet/store-berlin-001" in sizing


def test_outside_the_slo_verify_fails_naming_model_percentile_and_figure(mocks, tmp_path):
    # the TTFT SLO is the example's (the mock's 2 s misses it whatever the load); the TPOT SLO and the error rate are
    # the inside test's, which make test's load does not break (a loaded machine only makes TTFT later)
    inv = _inventory(tmp_path, {"tpot_p95_ms": 400})
    urls = mocks.start(MODEL, "serve", SERVED, 1, latency=(2000, 8))
    bench = {**BENCH, "max_requests": 12, "max_error_rate": 0.1}
    run = _verify(inv, urls, tmp_path, slo_benchmark=bench, verify_slo_calibrate=False)
    assert run.rc != 0
    msg = run.failure_messages()
    assert "qwen-edge: TTFT p95" in msg and "> SLO 1500 ms" in msg, msg
    assert "TPOT" not in msg.split("(report")[0], msg  # TPOT was met and is not blamed
    assert not (inv / "host_vars" / HOST).exists()  # calibrate: false writes nothing

    # not enforced: the same figures are a warning and the run passes. It calibrates: 2 s for a 514-token prompt is
    # read as a prefill too slow for the site's 3000-token p95 prompts within 1.5 s on its one GPU, so the refit
    # finds no layout and the task warns naming the file it wrote and why, before the next plan run fails on it
    lenient = _verify(inv, urls, tmp_path, slo_benchmark=bench, verify_slo_enforce=False)
    assert lenient.rc == 0, lenient.failure_messages()
    res = lenient.results_of("inference.blueprints.slo_benchmark")[0]
    assert res["passed"] is False and res["findings"][0]["percentile"] == "p95"
    assert res["findings"][0]["metric"] == "TTFT" and res["findings"][0]["value_ms"] > 1500
    cal_file = inv / "host_vars" / HOST / "calibration.yml"
    (row,) = res["calibration"]["before_after"]
    assert "cannot be met by any layout" in row["error"] and "ttft_p95_ms" in row["error"], row
    (warn,) = [w for w in res["warnings"] if "leaves no plan" in w]
    assert f"the calibration written to {cal_file} leaves no plan for this cluster" in warn, warn
    assert "not re-planned" in Path(res["report"]).read_text()


def test_bad_benchmark_options_name_their_path(tmp_path):
    inv = _inventory(tmp_path)
    run = _verify(inv, "http://127.0.0.1:9", tmp_path, slo_benchmark={"max_requests": 0, "max_secnds": 5})
    assert run.rc != 0
    msg = run.failure_messages()
    assert "slo_benchmark.max_requests" in msg and "slo_benchmark.max_secnds" in msg, msg
