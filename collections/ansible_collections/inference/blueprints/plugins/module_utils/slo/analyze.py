# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""From the runner's per-request records to the figures the report shows and the SLO verdict.

Per entry point (the model's endpoint or one pool): TTFT and TPOT p50/p95/p99, request and output-token
throughput, goodput (requests meeting both SLOs, where the entry point measures both), the error rate and
the throughput over time. Per model: TTFT from the entry point that measures it (model, serve or prefill),
TPOT likewise (model, serve or decode), each checked against the SLO at the percentile the SLO names (p95).
"""

from __future__ import annotations

import math

PERCENTILES = (50, 95, 99)
# SLO keys -> (metric, percentile)
SLO_KEYS = {"ttft_p95_ms": ("ttft", 95), "tpot_p95_ms": ("tpot", 95)}
METRIC_NAMES = {"ttft": "TTFT", "tpot": "TPOT"}


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), None for no values."""
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    k = (len(v) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def _series(records: list[dict], bucket_s: float) -> list[dict]:
    done = [r for r in records if r["status"] == "completed" and r.get("end")]
    if not done:
        return []
    t0 = min(r["start"] for r in records if r.get("start"))
    n = max(1, math.ceil((max(r["end"] for r in done) - t0) / bucket_s))
    out = [{"t_s": round((i + 1) * bucket_s, 3), "requests": 0, "output_tokens": 0} for i in range(n)]
    for r in done:
        i = min(n - 1, int((r["end"] - t0) / bucket_s))
        out[i]["requests"] += 1
        out[i]["output_tokens"] += r.get("output_tokens") or 0
    for b in out:
        b["requests_per_s"] = round(b["requests"] / bucket_s, 3)
        b["output_tokens_per_s"] = round(b["output_tokens"] / bucket_s, 1)
    return out


def run_stats(run: dict, slo: dict) -> dict:
    """Figures of one entry point's run (runner output + its spec)."""
    spec, records = run["spec"], run.get("records") or []
    done = [r for r in records if r["status"] == "completed"]
    errors = [r for r in records if r["status"] == "errored"]
    measures = spec["measures"]
    out: dict = {
        "model": spec["model"],
        "pool": spec["pool"],
        "endpoints": spec["endpoints"],
        "measures": measures,
        "requests": len(records),
        "completed": len(done),
        "errors": len(errors),
        "error_rate": round(len(errors) / len(records), 4) if records else 1.0,
        "error_samples": sorted({str(r.get("error")) for r in errors})[:3],
        "runner_error": run.get("error"),
        "load": {"rate_rps": spec.get("rate"), "max_concurrency": spec["max_concurrency"]},
        "bounds": {"max_requests": spec["max_requests"], "max_seconds": spec["max_seconds"]},
        "client_cpu_s": run.get("client_cpu_s"),
        "tokens_per_word": run.get("tokens_per_word"),
    }
    starts = [r["start"] for r in records if r.get("start")]
    ends = [r["end"] for r in done if r.get("end")]
    wall = (max(ends) - min(starts)) if starts and ends else 0.0
    out["duration_s"] = round(wall, 3)
    out["throughput"] = {
        "requests_per_s": round(len(done) / wall, 3) if wall else 0.0,
        "output_tokens_per_s": round(sum(r.get("output_tokens") or 0 for r in done) / wall, 1) if wall else 0.0,
    }
    for metric in ("ttft", "tpot"):
        values = [r[f"{metric}_ms"] for r in done if r.get(f"{metric}_ms") is not None]
        out[metric] = (
            {f"p{q}": round(percentile(values, q), 2) for q in PERCENTILES} | {"n": len(values)}
            if metric in measures and values
            else None
        )
        out[f"{metric}_values"] = sorted(values) if metric in measures else []
    out["prompt_tokens_mean"] = _mean([r.get("prompt_tokens") for r in done])
    out["output_tokens_mean"] = _mean([r.get("output_tokens") for r in done])
    if set(measures) >= {"ttft", "tpot"} and records and slo.get("ttft_p95_ms") and slo.get("tpot_p95_ms"):
        good = [
            r
            for r in done
            if (r.get("ttft_ms") or math.inf) <= slo["ttft_p95_ms"]
            and (r.get("tpot_ms") if r.get("tpot_ms") is not None else 0) <= slo["tpot_p95_ms"]
        ]
        out["goodput"] = {
            "requests": len(good),
            "fraction": round(len(good) / len(records), 4),
            "requests_per_s": round(len(good) / wall, 3) if wall else 0.0,
        }
    else:
        out["goodput"] = None
    out["series"] = _series(records, max(1.0, round(wall / 20, 1)) if wall else 1.0)
    out["_done"] = done
    return out


def _mean(values) -> float | None:
    v = [x for x in values if x is not None]
    return round(sum(v) / len(v), 1) if v else None


def model_verdict(model: str, slo: dict, runs: list[dict], max_error_rate: float) -> dict:
    """Model-level figures from its entry points and every SLO miss, each naming model, metric, percentile."""
    findings, figures = [], {}
    for key, (metric, q) in SLO_KEYS.items():
        source = next((r for r in runs if metric in r["measures"] and r.get(metric)), None)
        if source is None:
            continue
        value = source[metric][f"p{q}"]
        figures[metric] = {"pool": source["pool"], **source[metric]}
        target = slo.get(key)
        if target is not None and value > target:
            findings.append(
                {
                    "model": model,
                    "metric": METRIC_NAMES[metric],
                    "percentile": f"p{q}",
                    "value_ms": value,
                    "slo_ms": target,
                    "pool": source["pool"],
                    "msg": f"{model}: {METRIC_NAMES[metric]} p{q} {value:.1f} ms > SLO {target:g} ms "
                    f"({source['pool']}, {source[metric]['n']} requests)",
                }
            )
    for r in runs:
        if r["runner_error"] or r["completed"] == 0:
            findings.append(
                {
                    "model": model,
                    "metric": "requests",
                    "percentile": None,
                    "pool": r["pool"],
                    "msg": f"{model}: no request completed on {r['pool']} ({', '.join(r['endpoints'])}): "
                    f"{r['runner_error'] or '; '.join(r['error_samples']) or 'no answer'}",
                }
            )
        elif r["error_rate"] > max_error_rate:
            findings.append(
                {
                    "model": model,
                    "metric": "error rate",
                    "percentile": None,
                    "value": r["error_rate"],
                    "pool": r["pool"],
                    "msg": f"{model}: error rate {r['error_rate']:.1%} > {max_error_rate:.1%} on {r['pool']} "
                    f"({r['errors']} of {r['requests']}: {'; '.join(r['error_samples'])})",
                }
            )
    goodput = next((r["goodput"] for r in runs if r.get("goodput")), None)
    return {"model": model, "slo": slo, "figures": figures, "goodput": goodput, "findings": findings}


def calibration_figures(stats: dict) -> dict:
    """Measured engine figures of one entry point (the planner's calibration fields; docs/verify.md).

    prefill: prompt tokens / TTFT of the least-queued quarter of the requests (the fastest TTFTs per token);
    decode: 1000 / median TPOT at the batch the run kept per replica (Little's law: decode time in flight
    over the wall time, split over the replicas)."""
    done = stats["_done"]
    out: dict = {}
    if "ttft" in stats["measures"]:
        rows = sorted(
            (r["ttft_ms"] / r["prompt_tokens"], r) for r in done if r.get("ttft_ms") and r.get("prompt_tokens")
        )
        fast = [r for dummy, r in rows[: max(1, len(rows) // 4)]]
        if fast:
            rates = [r["prompt_tokens"] / (r["ttft_ms"] / 1000.0) for r in fast]
            out["prefill_tokens_per_s"] = round(percentile(rates, 50), 1)
            out["prompt_tokens"] = int(round(percentile([r["prompt_tokens"] for r in fast], 50)))
    if "tpot" in stats["measures"]:
        tpots = [r["tpot_ms"] for r in done if r.get("tpot_ms")]
        if tpots and stats["duration_s"]:
            decode_s = sum(
                (r["tpot_ms"] / 1000.0) * max(0, (r.get("output_tokens") or 1) - 1) for r in done if r.get("tpot_ms")
            )
            replicas = max(1, len(stats["endpoints"]))
            out["decode_tokens_per_s_per_seq"] = round(1000.0 / percentile(tpots, 50), 2)
            out["batch"] = max(1, int(round(decode_s / stats["duration_s"] / replicas)))
            ctx = (stats["prompt_tokens_mean"] or 0) + (stats["output_tokens_mean"] or 0) / 2
            out["context_tokens"] = max(1, int(round(ctx)))
    return out
