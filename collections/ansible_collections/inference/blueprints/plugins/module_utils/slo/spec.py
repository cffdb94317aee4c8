# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the SLO benchmark sends, decided once from the deployment intent.

``intent_section(site, intent)`` is the intent's ``verify`` key (intent/build.py): the benchmark bounds and
the canary gates of the site (``slo_benchmark`` and ``canary`` in SITE_FIELDS, validated there). The
traffic shape and the SLOs are the plan's (``intent.plans[].plan.traffic`` / ``.slo``: the inventory's,
with the blueprint's defaults filled by the planner), never re-read from the inventory.

``run_specs(intent, model, endpoints)`` turns one model and its endpoints into the runner specs
(``slo/runner.py``), one per entry point: the model's endpoint (a gateway: full requests), or each pool's
own replicas when they are reached directly:

* ``serve`` pool: full requests; TTFT, TPOT, goodput;
* ``prefill`` pool: prefill-only requests (one output token); TTFT and the prefill rate;
* ``decode`` pool: full requests; TPOT and the decode rate (its TTFT is not the model's: the prefill
  pool does the prefill in a disaggregated service).
"""

from __future__ import annotations

# What each entry point measures for the model (docs/verify.md, "Per pool").
MEASURES = {"model": ("ttft", "tpot"), "serve": ("ttft", "tpot"), "prefill": ("ttft",), "decode": ("tpot",)}
POOL_ORDER = ("model", "prefill", "decode", "serve")


def intent_section(site: dict, intent: dict) -> dict:
    """The intent's ``verify`` key: benchmark bounds and canary gates, with the schema's defaults filled."""
    from ..intent import inventory
    from ..intent.schema import validate

    del intent
    return {
        key: validate(site.get(var) or {}, inventory.SITE_FIELDS[var], path=var)
        for key, var in (("benchmark", "slo_benchmark"), ("canary", "canary"))
    }


def model_entry(intent: dict, name: str) -> tuple[dict, dict]:
    """(serving model, plan) of the model ``name`` in the intent."""
    served = next((m for m in intent["serving"]["models"] if m["name"] == name), None)
    planned = next((p for p in intent["plans"] if p["model"]["name"] == name), None)
    if served is None or planned is None:
        known = ", ".join(m["name"] for m in intent["serving"]["models"])
        raise ValueError(f"unknown model {name!r}; the site serves: {known}")
    return served, planned["plan"]


def pools_of(served: dict) -> dict:
    """{role: workload} of a serving model: prefill + decode, or serve."""
    out = {}
    if served.get("prefill"):
        out["prefill"] = served["prefill"]
    out[served["main"]["role"]] = served["main"]
    return out


def normalize_endpoints(raw) -> dict[str, list[str]]:
    """A model's endpoints: a URL, a list of URLs (the model's entry point) or {pool role: URL(s)}."""
    if isinstance(raw, str):
        raw = [raw]
    if isinstance(raw, list):
        raw = {"model": raw}
    if not isinstance(raw, dict):
        raise ValueError(f"endpoints must be a URL, a list of URLs or a mapping of pool to URLs, got {raw!r}")
    out = {}
    for pool, urls in raw.items():
        if pool not in MEASURES:
            raise ValueError(f"unknown pool {pool!r}; valid: {', '.join(MEASURES)}")
        urls = [urls] if isinstance(urls, str) else list(urls or [])
        if urls:
            out[pool] = [str(u).rstrip("/") for u in urls]
    return out


def shape(plan: dict, bench: dict) -> dict:
    """The traffic shape the runner samples from: the plan's traffic, bounded by the model's window and the
    output cap, and the shared-prefix fraction of the benchmark options."""
    t = plan.get("traffic") or {}
    window = int((plan.get("kv") or {}).get("max_model_len") or plan.get("max_model_len") or 32768)
    cap = (plan.get("policy") or {}).get("output_token_cap") or window
    out_mean = int(t.get("output_tokens_mean") or 128)
    out = {
        "prompt_tokens_mean": int(t.get("prompt_tokens_mean") or 512),
        "prompt_tokens_p95": int(t.get("prompt_tokens_p95") or t.get("prompt_tokens_mean") or 512),
        "output_tokens_mean": out_mean,
        "output_tokens_p95": int(t.get("output_tokens_p95") or out_mean),
        "shared_prefix_fraction": float(bench["shared_prefix_fraction"]),
    }
    out["max_output_tokens"] = int(min(cap, window // 2))
    out["max_prompt_tokens"] = int(max(1, window - out["max_output_tokens"]))
    return out


def load(plan: dict, bench: dict) -> dict:
    """Arrival rate (open load) or concurrency (closed load) from the plan's traffic, bounded by the options."""
    t = plan.get("traffic") or {}
    cap = int(bench["max_concurrency"])
    rate = t.get("arrival_rate_rps")
    sessions = t.get("concurrent_sessions")
    if rate:
        rate = float(rate) * float(bench["rate_scale"])
        return {"rate": rate, "max_concurrency": int(min(cap, sessions or cap))}
    return {"rate": None, "max_concurrency": int(min(cap, sessions or 1))}


def run_specs(intent: dict, name: str, endpoints, bench: dict, seed: int = 13) -> list[dict]:
    """One runner spec per entry point of the model ``name`` (docs/verify.md)."""
    served, plan = model_entry(intent, name)
    eps = normalize_endpoints(endpoints)
    pools = pools_of(served)
    specs = []
    for pool in sorted(eps, key=POOL_ORDER.index):
        if pool != "model" and pool not in pools:
            raise ValueError(f"{name}: endpoints for pool {pool!r}, but the model's pools are {', '.join(pools)}")
        specs.append(
            {
                "model": name,
                "pool": pool,
                "measures": list(MEASURES[pool]),
                "served_name": served["served_name"],
                "endpoints": eps[pool],
                "shape": shape(plan, bench),
                **load(plan, bench),
                "prefill_only": pool == "prefill",
                "max_requests": int(bench["max_requests"]),
                "max_seconds": float(bench["max_seconds"]),
                "request_timeout": float(bench["request_timeout"]),
                "worker_processes": int(bench["worker_processes"]),
                "seed": seed,
            }
        )
    return specs
