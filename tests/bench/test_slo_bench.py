"""The SLO benchmark's own overhead: the client CPU (guidellm's scheduler, its worker process and our
runner) per 1,000 requests, printed so that the load generator never becomes the bottleneck it measures
(issue 13). Not a timed assertion: the machine is shared. Run with ``make bench`` (pytest -s).

Two runs against two guidellm mock servers: short requests (16 output tokens) in a closed loop of 32
sessions, and the chat shape (200 output tokens) in Poisson arrivals, each bounded to 400 requests.
"""

from __future__ import annotations

import pytest
from ansible_collections.inference.blueprints.plugins.plugin_utils.slo import bench

from tests.slo.mockservers import MockFleet

REQUESTS = 400


def _spec(urls, rate, output_mean):
    return {
        "model": "bench",
        "pool": "model",
        "measures": ["ttft", "tpot"],
        "served_name": "bench",
        "endpoints": urls,
        "shape": {
            "prompt_tokens_mean": 256,
            "prompt_tokens_p95": 512,
            "output_tokens_mean": output_mean,
            "output_tokens_p95": output_mean * 2,
            "shared_prefix_fraction": 0.0,
            "max_prompt_tokens": 4096,
            "max_output_tokens": 1024,
        },
        "rate": rate,
        "max_concurrency": 32,
        "prefill_only": False,
        "max_requests": REQUESTS,
        "max_seconds": 120,
        "request_timeout": 60,
        "worker_processes": 1,
        "seed": 7,
        "tokens_per_word": 1.0,
    }


@pytest.mark.parametrize(
    ("label", "rate", "output_mean"),
    [("closed loop, 16 tokens", None, 16), ("Poisson 20 req/s, 200 tokens", 20.0, 200)],
)
def test_client_cpu_per_thousand_requests(tmp_path, label, rate, output_mean):
    fleet = MockFleet(tmp_path)
    try:
        urls = fleet.start("bench", "serve", "bench", 2, (20, 2))
        out = bench.run_one(_spec(urls, rate, output_mean))
    finally:
        fleet.stop()
    done = [r for r in out["records"] if r["status"] == "completed"]
    assert out["error"] is None and len(done) > REQUESTS * 0.9, out["error"]
    per_k = out["client_cpu_s"] / len(out["records"]) * 1000
    tokens = sum(r["output_tokens"] or 0 for r in done)
    print(
        f"\nSLO benchmark client ({label}): {len(out['records'])} requests, {tokens} output tokens in "
        f"{out['wall_s']:.1f} s; client CPU {out['client_cpu_s']:.1f} s = {per_k:.1f} CPU-s per 1k requests "
        f"({out['client_cpu_s'] / max(tokens, 1) * 1e6:.0f} CPU-us per output token; includes ~3 s of imports)"
    )
