# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Issue 36 item 4: the expert-routing skew (skew.py, policy ``expert_routing_skew``, calibration can set it)."""

from __future__ import annotations

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils.planner import plan
from ansible_collections.inference.blueprints.plugins.module_utils.planner import skew as sk
from ansible_collections.inference.blueprints.plugins.module_utils.planner.errors import PlanError


def test_skew_touches_fewer_experts_at_small_batches():
    """Uniform routing is the old formula; a power-law router touches fewer experts at small token counts (never
    more than uniform, never fewer than one token's k), and every expert at large ones."""
    for tokens in (1, 4, 16, 64, 512):
        assert sk.touched_share(128, 8, tokens, 0.0) == pytest.approx(1 - (1 - 8 / 128) ** tokens)
        for alpha in (1.01, 1.2):
            share = sk.touched_share(128, 8, tokens, alpha)
            assert 8 / 128 <= share <= sk.touched_share(128, 8, tokens, 0.0) + 1e-12
    assert sk.touched_share(128, 8, 8, 1.01) < 0.8 * sk.touched_share(128, 8, 8, 0.0)
    assert sk.touched_share(128, 8, 4096, 1.01) > 0.9
    assert sk.alpha_of("auto") == sk.AUTO_ALPHA == 1.01 and sk.alpha_of("uniform") == 0.0


def _edge(skew=None, calibration=None) -> dict:
    """A small-batch edge MoE: Qwen3-30B-A3B on one RTX PRO 6000 at a light rate."""
    pol = {"disaggregation": "never", "speculative": "off"}
    if skew is not None:
        pol["expert_routing_skew"] = skew
    inp = {
        "model": "Qwen3-30B-A3B",
        "gpu": "rtx-pro-6000",
        "gpus_per_node": 1,
        "weights": "fp8",
        "kv_cache_dtype": "fp8",
        "max_model_len": 8192,
        "policy": pol,
        "slo": {"ttft_p95_ms": 2000, "tpot_p95_ms": 30},
        "traffic": {"arrival_rate_rps": 1, "prompt_tokens_mean": 500, "output_tokens_mean": 200},
    }
    if calibration:
        inp["calibration"] = calibration
    return inp


def _step(p: dict) -> float:
    return p["layout_candidates"][0]["latency"]["decode_step_ms"]


def test_the_measured_skew_makes_small_batch_moe_decode_faster_than_uniform():
    """The issue's edge case: uniform routing priced a small-batch MoE decode step 1.4x slower than aiconfigurator
    (whose kernels are measured under power-law routing). ``auto`` (alpha 1.01) reads fewer experts a step;
    ``uniform`` (the default for now) keeps the old, conservative figure."""
    auto, uniform = plan(_edge("auto")), plan(_edge())
    assert uniform["policy"]["expert_routing_skew"] == "uniform"  # the default until the oracle grid is regenerated
    assert _step(auto) < 0.95 * _step(uniform)
    assert _step(plan(_edge(1.2))) <= _step(auto) * 1.02


def test_calibration_sets_the_skew():
    """A calibration entry's measured skew replaces the policy's for its model and GPU, and the plan says so."""
    entry = {
        "model": "Qwen3-30B-A3B",
        "gpu": "rtx-pro-6000",
        "vllm_version": "0.33.0",
        "decode_tokens_per_s_per_seq": 60.0,
        "batch": 4,
        "expert_routing_skew": 1.2,
    }
    p = plan(_edge(calibration=[entry]))
    notes = " ".join(str(d) for d in p["decisions"])
    assert "expert routing skew 1.2 (measured)" in notes


@pytest.mark.parametrize("bad", [0.5, 1.0, 7, "zipf", True])
def test_a_bad_skew_is_refused(bad):
    with pytest.raises(PlanError) as e:
        plan(_edge(bad))
    assert "policy.expert_routing_skew" in str(e.value) and "uniform" in str(e.value)
