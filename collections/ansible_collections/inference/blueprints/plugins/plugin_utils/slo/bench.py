# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SLO benchmark of a cluster's models: run guidellm per entry point (``runner.py``, its own process),
analyse, decide. Shared by the verify action (``slo_benchmark``) and the canary action; controller-side
(plugin_utils): it starts processes and opens the endpoints itself, which modules never do."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from urllib.error import HTTPError

from ansible.module_utils.urls import open_url
from ansible_collections.inference.blueprints.plugins.module_utils.slo import analyze, spec

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner.py")
STARTUP_S = 60  # guidellm's imports and worker start, on top of the run's own bound


class BenchmarkError(RuntimeError):
    pass


def run_one(run_spec: dict, python: str | None = None) -> dict:
    """Run guidellm for one entry point in its own process group; the group dies with a timeout."""
    with tempfile.TemporaryDirectory(prefix="ib-slo-") as tmp:
        spec_path, out_path = os.path.join(tmp, "spec.json"), os.path.join(tmp, "out.json")
        with open(spec_path, "w", encoding="utf-8") as fh:
            json.dump(run_spec, fh)
        limit = run_spec["max_seconds"] + run_spec["request_timeout"] + STARTUP_S
        proc = subprocess.Popen(  # noqa: S603 - our runner, our interpreter
            [python or sys.executable, RUNNER, spec_path, out_path],
            cwd=tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        try:
            log, dummy = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise BenchmarkError(
                f"{run_spec['model']}/{run_spec['pool']}: the benchmark ran over {limit:.0f} s"
            ) from None
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        if not os.path.isfile(out_path):
            tail = (log or b"").decode(errors="replace")[-1500:]
            if "No module named 'guidellm'" in tail:
                raise BenchmarkError(
                    "guidellm is not installed in the controller's Python; install it as docs/verify.md says "
                    "(pip install --no-deps guidellm==0.8.1 plus its light dependencies, or "
                    "'inference-blueprints[guidellm]')"
                )
            raise BenchmarkError(f"{run_spec['model']}/{run_spec['pool']}: the benchmark process failed: {tail}")
        with open(out_path, encoding="utf-8") as fh:
            return json.load(fh)


def run_model(intent: dict, name: str, endpoints, bench: dict, python: str | None = None) -> dict:
    """Benchmark one model at every entry point given; its verdict against the plan's SLO."""
    _served, plan = spec.model_entry(intent, name)
    slo = plan.get("slo") or {}
    stats = [analyze.run_stats(run_one(s, python), slo) for s in spec.run_specs(intent, name, endpoints, bench)]
    verdict = analyze.model_verdict(name, slo, stats, float(bench["max_error_rate"]))
    return {"model": name, "runs": stats, "verdict": verdict}


def _get(url: str, timeout: float = 3.0) -> str | None:
    try:
        with open_url(url, timeout=timeout) as r:  # the site's own endpoint (its proxy settings apply)
            return r.read().decode("utf-8", errors="replace")
    except (OSError, ValueError, HTTPError):
        return None


def engine_facts(url: str) -> dict:
    """vLLM's /version and the KV blocks of /metrics (``vllm:cache_config_info``) when the endpoint serves them."""
    from ansible_collections.inference.blueprints.plugins.module_utils.slo import calib

    out: dict = {"version": None, "kv_blocks": None}
    text = _get(url.rstrip("/") + "/version")
    if text:
        with contextlib.suppress(ValueError, AttributeError):
            out["version"] = json.loads(text).get("version")
    out["kv_blocks"] = calib.kv_blocks(_get(url.rstrip("/") + "/metrics") or "")
    return out


def plan_row(plan: dict) -> dict:
    """What the before/after table shows of a plan."""
    est, lat = plan.get("estimates") or {}, plan.get("latency") or {}
    pools = plan.get("pools") or {}
    main = pools.get("decode") if plan.get("disaggregated") else pools.get("serve") or pools.get("decode") or {}
    return {
        "gpus_needed": est.get("gpus_needed"),
        "replicas": (main or {}).get("replicas"),
        # the main pool's engine batch (a P/D plan's estimates are of the aggregated option it did not deploy)
        "batch_per_rank": (main or {}).get("max_num_seqs") or est.get("batch_per_rank_at_tpot"),
        "ttft_p95_ms": lat.get("ttft_p95_ms"),
        "tpot_p95_ms": lat.get("tpot_p95_ms"),
        "efficiency": "calibrated" if lat.get("calibrated") else "catalog",
    }
