"""The SLO benchmark's and the canary's rules without servers (issue 13)."""

from __future__ import annotations

import copy
import math
import random

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils.slo import analyze, calib
from ansible_collections.inference.blueprints.plugins.module_utils.slo import canary as rules
from ansible_collections.inference.blueprints.plugins.plugin_utils.slo import runner

# vLLM's Prometheus text for its cache configuration gauge (vllm/v1/metrics/loggers.py, cache_config info)
METRICS = (
    "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
    "# TYPE vllm:cache_config_info gauge\n"
    'vllm:cache_config_info{block_size="16",cache_dtype="fp8",enable_prefix_caching="True",'
    'gpu_memory_utilization="0.92",num_cpu_blocks="None",num_gpu_blocks="18432"} 1.0\n'
)


def test_kv_blocks_come_from_vllms_cache_config_gauge():
    assert calib.kv_blocks(METRICS) == 18432
    assert calib.kv_blocks("vllm:num_requests_running 3\n") is None


def test_lengths_follow_the_traffics_mean_and_p95():
    shape = {"prompt_tokens_mean": 800, "prompt_tokens_p95": 2000, "output_tokens_mean": 200,
             "output_tokens_p95": 600, "max_prompt_tokens": 100000, "max_output_tokens": 100000}  # fmt: skip
    pairs = runner.sample_lengths(shape, 4000, seed=3)
    prompts = sorted(p for p, _ in pairs)
    assert sum(prompts) / len(prompts) == pytest.approx(800, rel=0.08)
    assert prompts[int(0.95 * len(prompts))] == pytest.approx(2000, rel=0.1)
    capped = runner.sample_lengths({**shape, "max_output_tokens": 300}, 500, seed=3)
    assert max(o for _, o in capped) == 300


def test_percentiles_and_goodput():
    assert analyze.percentile([1, 2, 3, 4], 50) == 2.5 and analyze.percentile([], 95) is None
    rng = random.Random(1)
    records = [
        {
            "i": i,
            "endpoint": 0,
            "status": "completed",
            "start": i * 0.1,
            "end": i * 0.1 + 1,
            "error": None,
            "ttft_ms": 100 + rng.random() * 50 + (900 if i % 10 == 0 else 0),
            "tpot_ms": 20.0,
            "prompt_tokens": 500,
            "output_tokens": 50,
        }  # fmt: skip
        for i in range(100)
    ]
    run = {"spec": {"model": "m", "pool": "serve", "endpoints": ["u"], "measures": ["ttft", "tpot"], "rate": 10,
                    "max_concurrency": 8, "max_requests": 100, "max_seconds": 60}, "records": records}  # fmt: skip
    slo = {"ttft_p95_ms": 500, "tpot_p95_ms": 50}
    stats = analyze.run_stats(run, slo)
    assert stats["goodput"]["fraction"] == 0.9  # every tenth request misses the TTFT SLO
    verdict = analyze.model_verdict("m", slo, [stats], 0.01)
    (miss,) = verdict["findings"]
    assert (miss["metric"], miss["percentile"]) == ("TTFT", "p95") and miss["value_ms"] > 500
    assert verdict["figures"]["tpot"]["p95"] == 20.0
    fig = analyze.calibration_figures(stats)
    assert fig["decode_tokens_per_s_per_seq"] == 50.0 and fig["prompt_tokens"] == 500
    assert math.isclose(fig["prefill_tokens_per_s"], 500 / 0.1125, rel_tol=0.1)


SERVICE = {
    "apiVersion": "serving.kserve.io/v1alpha2",
    "kind": "LLMInferenceService",
    "metadata": {"name": "m", "namespace": "ns", "labels": {"a": "b"}, "resourceVersion": "7", "generation": 3},
    "spec": {
        "model": {"uri": "oci://r/m@sha256:" + "0" * 64},
        "template": {
            "containers": [{"name": "main", "env": [{"name": "VLLM_ADDITIONAL_ARGS", "value": "--max-num-seqs=8 --x"}]}]
        },
        "prefill": {"template": {"containers": [{"name": "main", "env": []}]}},
    },
    "status": {"observedGeneration": 3},
}


def test_steps_go_prefill_then_decode_then_the_model():
    change = {
        "engine_args": ["--max-num-seqs=4"],
        "image": "q/v@sha256:" + "1" * 64,
        "model_uri": "oci://r/n@sha256:" + "2" * 64,
    }
    steps = rules.steps(SERVICE, change)
    assert [s["role"] for s in steps] == ["prefill", "decode", "model"]
    first = rules.apply_step(SERVICE, steps[0])
    assert first["spec"]["template"] == SERVICE["spec"]["template"]  # the decode pool is untouched
    main = first["spec"]["prefill"]["template"]["containers"][0]
    assert main["image"] == change["image"] and main["env"][0]["value"] == "--max-num-seqs=4"
    second = rules.apply_step(first, steps[1])
    assert second["spec"]["prefill"] == first["spec"]["prefill"]  # the promoted prefill change stays
    assert second["spec"]["template"]["containers"][0]["env"][0]["value"] == "--x --max-num-seqs=4"
    single = copy.deepcopy(SERVICE)
    del single["spec"]["prefill"]
    assert [s["role"] for s in rules.steps(single, {"engine_args": ["--y"]})] == ["serve"]


def test_restorable_is_spec_and_our_metadata():
    body = rules.restorable(SERVICE)
    assert "status" not in body and "resourceVersion" not in body["metadata"]
    assert rules.same(SERVICE, {**SERVICE, "status": {}, "metadata": {**SERVICE["metadata"], "generation": 9}})
    assert not rules.same(SERVICE, rules.apply_step(SERVICE, rules.steps(SERVICE, {"engine_args": ["--z"]})[0]))


def _run(pool, ttft, tpot, errors=0.0):
    out = {"model": "m", "pool": pool, "runner_error": None, "completed": 10, "error_rate": errors}
    return out | {"error_samples": [], "ttft": {"p95": ttft} if ttft else None, "tpot": {"p95": tpot} if tpot else None}


def test_gates_name_the_metric_pool_and_gate():
    can = {"percentile": "p95", "ttft_regression_pct": 10, "tpot_regression_pct": 20, "max_error_rate": 0.01}
    base = {"runs": [_run("prefill", 100, None), _run("decode", None, 20)]}
    assert rules.gates(base, {"runs": [_run("prefill", 109, None), _run("decode", None, 23.9)]}, can) == []
    (ttft,) = rules.gates(base, {"runs": [_run("prefill", 111, None), _run("decode", None, 20)]}, can)
    assert ttft["gate"] == "ttft_regression_pct" and ttft["pool"] == "prefill"
    (tpot,) = rules.gates(base, {"runs": [_run("prefill", 100, None), _run("decode", None, 24.1)]}, can)
    assert tpot["gate"] == "tpot_regression_pct" and "decode: TPOT p95 24.1 ms" in tpot["msg"]
    (err,) = rules.gates(base, {"runs": [_run("prefill", 100, None, 0.5), _run("decode", None, 20)]}, can)
    assert err["gate"] == "max_error_rate"


def test_engine_args_replace_the_same_flag():
    assert rules.set_engine_args("--a=1 --b --c='x y'", ["--a=2", "--d"]) == "--b '--c=x y' --a=2 --d"


def test_an_endpoint_on_another_vllm_than_the_plan_is_named_with_the_fix():
    """vLLM's /version (0.24.0+rhaiv.9 in OpenShift AI 3.5.0's image) against the plan's vllm_version."""
    plan = {"vllm_version": "0.33.0"}
    msg = calib.engine_mismatch("qwen-chat", plan, "0.24.0+rhaiv.9")
    assert msg.startswith("qwen-chat: the endpoint runs vLLM 0.24.0+rhaiv.9 (its /version) but the plan was written")
    assert "filed under 0.24, which plans for 0.33 do not read" in msg and 'set vllm_version: "0.24.0"' in msg
    assert calib.engine_mismatch("qwen-chat", plan, "0.33.2") is None  # same minor
    assert calib.engine_mismatch("qwen-chat", plan, None) is None  # the endpoint does not say
    assert calib.engine_mismatch("qwen-chat", {"vllm_version": "0.24.0"}, "0.24.0+rhaiv.9") is None


def test_engine_facts_read_vllms_version_and_cache_gauge_over_http():
    import http.server
    import json
    import threading

    from ansible_collections.inference.blueprints.plugins.plugin_utils.slo import bench

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            body = {"/version": json.dumps({"version": "0.24.0+rhaiv.9"}), "/metrics": METRICS}.get(self.path)
            self.send_response(200 if body else 404)
            self.end_headers()
            if body:
                self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        facts = bench.engine_facts(f"http://127.0.0.1:{server.server_address[1]}/")
    finally:
        server.shutdown()
    assert facts == {"version": "0.24.0+rhaiv.9", "kv_blocks": 18432}
