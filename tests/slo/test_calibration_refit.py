"""plan -> measure -> refit (issue 13): a calibration file in the inventory changes the plan in the right
direction. The figures the planner assumes for a layout are read back from its own model, then written
as measurements 2x lower or 2x higher, the way verify writes them (slo/calib.py); the site loader hands
them to the planner.
"""

from __future__ import annotations

import shutil

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils.slo import calib

from tests.serving_helpers import INVENTORIES, ROOT

HOST = "chat-east-1"


def _plan(inv) -> dict:
    return cli.site_intents(str(inv), str(ROOT / "blueprints"))[HOST]["plans"][0]["plan"]


@pytest.mark.parametrize(("factor", "direction"), [(0.5, "more"), (2.0, "fewer")])
def test_measured_rates_move_the_plan_the_right_way(tmp_path, factor, direction):
    # two copies: Ansible's host_vars loader caches where it found a host's files for the process
    before = _plan(INVENTORIES / "example-chat")
    inv = tmp_path / "inventory"
    shutil.copytree(INVENTORIES / "example-chat", inv)
    assert before["latency"]["calibrated"] is False
    # the pool whose decode rate the plan models: the aggregated one, or the decode pool of a P/D plan
    pool = before["pools"]["serve"] or before["pools"]["decode"]
    layout = {"tp": pool["tp"], "pp": pool["pp"], "dp": before["layout"]["dp_per_engine"], "ep": pool["ep"]}
    # the planner's own figures for that layout: its modelled decode step at the planned batch and its
    # modelled prefill of a mean prompt (the efficiencies the plan reports), scaled by `factor`
    est = before["estimates"]
    decode_assumed = 1000.0 / est["decode_step_ms_at_batch"]
    entry = {
        "model": before["model"]["id"],
        "gpu": pool["gpu"],
        "vllm_version": before["vllm_version"],
        "weights": before["weights"]["precision"],
        "kv_cache_dtype": before["kv"]["dtype"],
        "layout": layout,
        "decode_tokens_per_s_per_seq": round(decode_assumed * factor, 3),
        "batch": est["batch_per_rank_at_tpot"],
        "context_tokens": before["traffic"]["prompt_tokens_mean"] + before["traffic"]["output_tokens_mean"] // 2,
        "source": f"test: measured {factor}x the assumed decode rate",
    }
    calib.write(str(inv), HOST, [entry])
    after = _plan(inv)
    assert after["latency"]["calibrated"] is True
    why = " ".join(d["why"] for d in after["decisions"])
    assert f"calibrated from measurements (test: measured {factor}x the assumed decode rate" in why
    b, a = before["estimates"], after["estimates"]
    if direction == "more":  # slower than assumed: smaller batches at the TPOT SLO, more GPUs
        assert (
            a["decode_step_ms_at_batch"] > b["decode_step_ms_at_batch"]
            or a["batch_per_rank_at_tpot"] < b["batch_per_rank_at_tpot"]
        )
        assert a["gpus_needed"] >= b["gpus_needed"] and (
            a["gpus_needed"] > b["gpus_needed"] or a["batch_per_rank_at_tpot"] < b["batch_per_rank_at_tpot"]
        ), (b, a)
    else:  # faster: larger batches, no more GPUs
        assert a["gpus_needed"] <= b["gpus_needed"] and (
            a["gpus_needed"] < b["gpus_needed"] or a["batch_per_rank_at_tpot"] > b["batch_per_rank_at_tpot"]
        ), (b, a)
