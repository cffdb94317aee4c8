"""The canary's gates (module_utils/slo/canary.py): a step whose benchmark finished no request says so, not an
error rate of 0.0 % above the limit (what stop 41's canary run printed when a slowed pool finished nothing in time)."""

from __future__ import annotations

from ansible_collections.inference.blueprints.plugins.module_utils.slo import canary

GATES = {"ttft_regression_pct": 300, "tpot_regression_pct": 300, "percentile": "p95", "max_error_rate": 0.01}


def _run(pool: str, completed: int, error_rate: float, tpot: float = 20.0) -> dict:
    return {
        "model": "qwen-chat",
        "pool": pool,
        "runner_error": "",
        "completed": completed,
        "error_rate": error_rate,
        "error_samples": [],
        "ttft": {"p95": 100.0},
        "tpot": {"p95": tpot},
    }


def test_nothing_completed_is_named_as_such():
    (gate,) = canary.gates({"runs": [_run("decode", 10, 0.0)]}, {"runs": [_run("decode", 0, 0.0)]}, GATES)
    assert gate["gate"] == "max_error_rate"
    assert "no request completed within the benchmark" in gate["msg"] and "0.0%" not in gate["msg"], gate["msg"]


def test_an_error_rate_above_the_limit_gives_both_figures():
    (gate,) = canary.gates({"runs": [_run("decode", 10, 0.0)]}, {"runs": [_run("decode", 9, 0.1)]}, GATES)
    assert "error rate 10.0% > 1.0%" in gate["msg"], gate["msg"]


def test_a_tpot_regression_above_the_gate_trips_it_and_one_below_does_not():
    base = {"runs": [_run("decode", 10, 0.0, tpot=20.0)]}
    assert canary.gates(base, {"runs": [_run("decode", 10, 0.0, tpot=79.0)]}, GATES) == []
    (gate,) = canary.gates(base, {"runs": [_run("decode", 10, 0.0, tpot=81.0)]}, GATES)
    assert gate["gate"] == "tpot_regression_pct", gate
