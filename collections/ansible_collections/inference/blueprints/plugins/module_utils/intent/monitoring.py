# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Monitoring and autoscaling triggers of the serving intent (the edge escalation is intent/escalation.py).

Metric names: vLLM 0.33 (``vllm:*``) and llm-d-router v0.9.0's EPP (``llm_d_epp_*``,
pkg/epp/metrics/llm_d_router_metrics.go; the EPP protects /metrics with a TokenReview and a
SubjectAccessReview for ``get`` on the non-resource URL ``/metrics``).
"""

from __future__ import annotations

from . import scaling

# Seed 002, section 8 troubleshooting recipes, in our words: one runbook text per alert family.
RUNBOOKS = {
    "triage": "First read the metrics, change nothing: vLLM (queue time, prefill and decode time, KV-cache usage) "
    "and the llm-d EPP (routing decisions, per-worker queue depth) tell whether the regression is in routing, "
    "prefill, decode or the KV transfer between them.",
    "tpot_kv": "TPOT rising while KV-cache usage climbs usually means KV-cache fragmentation or over-eager "
    "preemption: tune the preemption threshold (max-num-seqs / KV headroom) and check that chunked prefill is on "
    "so long prompts do not starve short decodes.",
    "kv_transfer": "TTFT fine but TPOT spikes that follow prompt arrivals in a disaggregated fleet mean the NIXL "
    "queue is growing and decode workers wait for KV: check RDMA driver and NIC health (UCX transports, rdma "
    "device plugin) and that the NIXL metadata/side channel is not a single point.",
    "spec": "Speculative decoding on but throughput flat or worse: the draft acceptance rate has decayed. Inspect "
    "per-request acceptance; the model or the traffic may have drifted from what the draft head was trained on. "
    "Retrain or switch the draft, or turn speculation off.",
    "moe": "MoE throughput degraded with one or two experts far busier than the rest is hot-expert imbalance: "
    "enable EPLB, and if it persists consider expert replication.",
    "rollout": "Roll changes out by canary, gate on both TTFT and TPOT, and never change two scheduler parameters "
    "at once.",
}

# KServe's route preset (config-llm-router-route.yaml) serves these OpenAI-compatible endpoints
# under /<namespace>/<service>/v1/<endpoint>.
OPENAI_ENDPOINTS = ("completions", "chat/completions", "responses", "messages")
METRICS_READER_ROLE = "inference-blueprints-metrics-reader"


def _percent(x) -> int:
    return int(round(float(x) * 100))


def model_rules(m: dict, site: dict, obs: dict) -> dict:
    """PrometheusRule rules and the scrape targets of one model."""
    ns = site["serving_namespace"]
    sel = f'namespace="{ns}",model_name="{m["served_name"]}"'
    w = obs["observability_rate_window"]
    slo = m["slo"]
    ttft_ms, tpot_ms = slo.get("ttft_p95_ms"), slo.get("tpot_p95_ms")
    rules = []

    def rule(alert, expr, summary, description, runbook, severity="warning", extra=None):
        labels = {"severity": severity, **(extra or {}), "model": m["name"], "blueprint": site["blueprint"]}
        rules.append(
            {
                "alert": alert,
                "expr": expr,
                "for": obs["observability_for"],
                "labels": labels,
                "annotations": {"summary": f"{m['name']}: {summary}", "description": description, "runbook": runbook},
            }
        )

    if ttft_ms:
        rule(
            "LLMTTFTP95AboveSLO",
            f"histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{{{sel}}}[{w}]))) "
            f"> {float(ttft_ms) / 1000:g}",
            f"TTFT p95 above the {ttft_ms:g} ms SLO",
            f"TTFT p95 is {{{{ $value | humanizeDuration }}}} for {m['served_name']} in {ns}.",
            RUNBOOKS["triage"],
            extra={"slo": "ttft"},
        )
    if tpot_ms:
        rule(
            "LLMTPOTP95AboveSLO",
            f"histogram_quantile(0.95, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket{{{sel}}}[{w}]))) "
            f"> {float(tpot_ms) / 1000:g}",
            f"TPOT p95 above the {tpot_ms:g} ms SLO",
            f"Inter-token latency p95 is {{{{ $value | humanizeDuration }}}} for {m['served_name']}.",
            RUNBOOKS["tpot_kv"],
            extra={"slo": "tpot"},
        )
    kv_max = obs["observability_kv_cache_usage_max"]
    rule(
        "LLMKVCacheNearlyFull",
        f"max(vllm:kv_cache_usage_perc{{{sel}}}) > {kv_max:g}",
        f"KV cache above {_percent(kv_max)}% on some worker",
        "KV-cache usage {{ $value | humanizePercentage }}; preemptions follow.",
        RUNBOOKS["tpot_kv"],
    )
    qmax = obs["observability_queue_waiting_max"]
    rule(
        "LLMQueueGrowing",
        f"sum(vllm:num_requests_waiting{{{sel}}}) > {qmax} and "
        f"deriv(sum(vllm:num_requests_waiting{{{sel}}})[10m:1m]) > 0",
        "requests queue up and the queue keeps growing",
        f"{{{{ $value }}}} requests waiting for {m['served_name']}.",
        RUNBOOKS["triage"] + " " + RUNBOOKS["rollout"],
    )
    if m["scheduler"]:
        pool = m["names"]["pool"]
        rule(
            "LLMSchedulerQueueGrowing",
            f'max(llm_d_epp_average_queue_size{{name="{pool}"}}) > {qmax}',
            "the EPP reports a long average queue on the pool",
            f"Average queue {{{{ $value }}}} on {pool}.",
            RUNBOOKS["triage"],
        )
    if m["policy"].get("prefix_caching", True):
        hit_min = obs["observability_prefix_hit_rate_min"]
        rule(
            "LLMPrefixCacheHitRateLow",
            f"sum(rate(vllm:prefix_cache_hits_total{{{sel}}}[15m])) / "
            f"sum(rate(vllm:prefix_cache_queries_total{{{sel}}}[15m])) "
            f"< {hit_min:g}",
            f"prefix-cache hit rate below {_percent(hit_min)}%",
            "Hit rate {{ $value | humanizePercentage }}: cache-aware routing or the KV tiers are not keeping "
            "warm prefixes.",
            RUNBOOKS["triage"],
            severity="info",
        )
    if m["nixl"]:
        rule(
            "LLMKVTransferSlow",
            "histogram_quantile(0.95, sum by (le) "
            f'(rate(vllm:nixl_xfer_time_seconds_bucket{{namespace="{ns}"}}[{w}]))) '
            f"> {obs['observability_kv_transfer_p95_max_seconds']:g}",
            "NIXL KV transfers from prefill to decode are slow",
            "KV transfer p95 {{ $value | humanizeDuration }}.",
            RUNBOOKS["kv_transfer"],
        )
        rule(
            "LLMKVTransferStalled",
            f"sum(rate(vllm:prompt_tokens_total{{{sel}}}[{w}])) > 0 and "
            f'sum(rate(vllm:nixl_bytes_transferred_sum{{namespace="{ns}"}}[{w}])) == 0',
            "prompts arrive but no KV moves between prefill and decode",
            "NIXL transferred no bytes while prompts were being served.",
            RUNBOOKS["kv_transfer"],
            severity="critical",
        )
    if m["speculative"]:
        acc = obs["observability_spec_acceptance_min"]
        rule(
            "LLMSpecDecodeAcceptanceLow",
            f"sum(rate(vllm:spec_decode_num_accepted_tokens_total{{{sel}}}[15m])) / "
            f"sum(rate(vllm:spec_decode_num_draft_tokens_total{{{sel}}}[15m])) < {acc:g}",
            f"speculative draft acceptance below {_percent(acc)}%",
            f"Acceptance rate {{{{ $value | humanizePercentage }}}} ({m['speculative'].get('method')}).",
            RUNBOOKS["spec"],
        )
    if m["expert_parallel"]:
        rule(
            "LLMThroughputDroppedMoE",
            f"sum(rate(vllm:generation_tokens_total{{{sel}}}[15m])) < 0.5 * "
            f"sum(rate(vllm:generation_tokens_total{{{sel}}}[15m] offset 1d))",
            "generation throughput halved against the same time yesterday",
            "Check expert load balance.",
            RUNBOOKS["moe"],
            severity="info",
        )
    targets = [
        {
            "name": f"{m['name']}-vllm-{w['role']}",
            "role": {"serve": "both"}.get(w["role"], w["role"]),
            "port": w["vllm_port"],
        }
        for w in (m["prefill"], m["main"])
        if w
    ]
    return {"rules": rules, "vllm_targets": targets}


def metrics_reader(site: dict, models: list[dict]) -> dict | None:
    """A ServiceAccount whose token Prometheus (EPP /metrics) and KEDA (Thanos) present."""
    needed = any(m["scheduler"] for m in models) or any(m["autoscaling"] for m in models)
    if not needed:
        return None
    sa = site["options"]["serving_autoscaling"]["serving_autoscaling_service_account"]
    # rendered by observability, or by serving_autoscaling in a blueprint without observability
    owner = "observability" if "observability" in site["components"] else "serving_autoscaling"
    return {
        "owner": owner,
        "service_account": sa,
        "token_secret": f"{sa}-token",
        # per serving namespace, like its binding: two sites on one cluster each own theirs (one shared name made
        # the second site's converge stop on the first one's ClusterRole, and its teardown would delete it)
        "cluster_role": f"{METRICS_READER_ROLE}-{site['serving_namespace']}",
        "cluster_role_binding": f"{METRICS_READER_ROLE}-{site['serving_namespace']}",
        "epp": any(m["scheduler"] for m in models),
    }


def autoscaling_common(site: dict, models: list[dict]) -> dict | None:
    """KEDA ScaledObjects per autoscaled model (intent/scaling.py), on EPP metrics that exist at zero replicas."""
    sa_opts = site["options"]["serving_autoscaling"]
    settings = scaling.trigger_settings(site)
    queue_threshold, cooldown = settings["queue_threshold"], settings["cooldown_seconds"]
    out = []
    for m in models:
        if not m["autoscaling"]:
            continue
        triggers = scaling.main_triggers(site, m, queue_threshold, sa_opts["serving_autoscaling_rate_window"])
        if triggers:
            out.extend(scaling.scaled_objects(m, triggers, cooldown))
    return {"scaled_objects": out} if out else None
