# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The AI grid (blueprint ai_grid, seed 002 section 7.4): tenants, tiers, the model cascade and the
front door on Envoy AI Gateway, decided once from the validated site and the plans.

* ``validate(site)``: the rules between variables (a tenant's tier is one of the site's tiers, its
  models are the site's, the cascade names models, ...), every problem with its path.
* ``flow_control(site, plan)``: the llm-d flow-control priority bands of one model's scheduler and
  the per-tier KEDA thresholds (the tier's ``queue_seconds`` times what the plan serves).
* ``build(site, intent)``: ``intent["gateway"]``, everything the ``ai_gateway`` role renders, and the
  grid's plan report (GPUs per class, cost share per tier, what the cascade saves).

Facts about the upstream objects (sources: github.com/envoyproxy/ai-gateway v1.0.0 api/v1beta1,
github.com/envoyproxy/gateway v1.8.1 and v1.9.0 api/v1alpha1, llm-d-router v0.9.0 pkg/epp):

* Envoy AI Gateway fills ``x-ai-eg-model`` from the request body's ``model`` before routing and
  records the response's token usage in dynamic metadata namespace ``io.envoy.ai_gateway``
  (``llmRequestCosts``); an AIGatewayRoute holds at most 15 rules and generates an HTTPRoute of
  the same name, which Envoy Gateway policies target.
* Envoy Gateway's ``apiKeyAuth`` takes client ids from the keys of the credential Secrets and sets
  ``forwardClientIDHeader`` to the verified id; its HTTP filters run api_key_auth, then lua, then
  ext_proc (internal/xds/translator/httpfilters.go), so the Lua filter sees the verified tenant
  and the endpoint picker (an ext_proc) sees the headers the Lua filter sets.
* The EPP selects an InferenceObjective by the ``x-llm-d-inference-objective`` header and a
  fairness flow by ``x-llm-d-inference-fairness-id``; with flow control a full priority band
  refuses at once (429, ResourceExhausted; pkg/epp/requestcontrol/admission.go).
"""

from __future__ import annotations

import math

from ..planner import data as catalog
from . import burst_exposure, front_door_tls, inventory, limits, scheduler
from .schema import SchemaError, suggest

COMPONENT = "ai_gateway"
MODEL_HEADER = "x-ai-eg-model"
FAIRNESS_HEADER = "x-llm-d-inference-fairness-id"
# Headers a client must never set itself: identity, tier and every header the scheduler reads.
SCHEDULER_HEADERS = (*scheduler.ROUTER_HEADERS, MODEL_HEADER)
COST_NAMESPACE = "io.envoy.ai_gateway"
COST_KEY = "llm_total_token"
MAX_ROUTE_RULES = 15  # AIGatewayRoute spec.rules MaxItems (v1beta1)


# ------------------------------------------------------------------------------------------ checks
def validate(site: dict) -> None:
    """Raise SchemaError with every cross-variable problem of the AI grid variables."""
    errors: list[tuple[str, str]] = []
    tenants = site.get("tenants") or []
    tiers = site.get("tiers") or {}
    cascade = site.get("cascade") or {}
    has_gateway = COMPONENT in site["components"]
    if tenants and not has_gateway:
        errors.append(("tenants", f"blueprint {site['blueprint']!r} has no {COMPONENT} component: nothing reads them"))
    if has_gateway and not tenants:
        errors.append(("tenants", f"required by the {COMPONENT} component: at least one tenant"))
    classes = [c["name"] for c in site.get("priority_classes") or []]
    for tier in tiers:
        if tier not in classes:
            errors.append(
                (f"tiers.{tier}", f"is not a priority class{suggest(tier, classes)}; the classes: {', '.join(classes)}")
            )
    _check_tenants(site, tenants, tiers, errors)
    _check_cascade(site, cascade, errors)
    if errors:
        raise SchemaError(errors, f"host {site['host']}")


def _check_tenants(site: dict, tenants: list, tiers: dict, errors: list) -> None:
    models = [m["name"] for m in site["models"]]
    secrets: dict[str, str] = {}
    for i, t in enumerate(tenants):
        if t["tier"] not in tiers:
            errors.append(
                (
                    f"tenants[{i}].tier",
                    f"unknown tier {t['tier']!r}{suggest(t['tier'], tiers)}; the blueprint's classes: "
                    f"{', '.join(tiers) or '(none: set tiers)'}",
                )
            )
        for j, name in enumerate(t["models"]):
            if name not in models:
                errors.append(
                    (
                        f"tenants[{i}].models[{j}]",
                        f"unknown model {name!r}{suggest(name, models)}; the site's models: {', '.join(models)}",
                    )
                )
        secret = t["credential"]["secret"]
        if secret in secrets:
            errors.append((f"tenants[{i}].credential", f"Secret {secret!r} is already tenant {secrets[secret]!r}'s"))
        secrets.setdefault(secret, t["name"])


def _check_cascade(site: dict, cascade: dict, errors: list) -> None:
    if not cascade.get("enabled"):
        return
    models = [m["name"] for m in site["models"]]
    order = cascade.get("order") or []
    if len(order) < 2:
        errors.append(("cascade.order", "needs at least two models[].name, smallest first"))
    for j, name in enumerate(order):
        if name not in models:
            errors.append((f"cascade.order[{j}]", f"unknown model {name!r}{suggest(name, models)}"))
    if len(set(order)) != len(order):
        errors.append(("cascade.order", "a model is listed twice"))
    served = {inventory.served_name(m) for m in site["models"]}
    if cascade["model"] in served or cascade["model"] in models:
        errors.append(("cascade.model", f"{cascade['model']!r} is a real model's name; pick a name of its own"))
    if cascade.get("easy_fraction") is None:
        errors.append(("cascade.easy_fraction", "required: the share of cascade requests the first class answers"))
    elif cascade["easy_fraction"] + (cascade.get("hard_fraction") or 0) > 1:
        errors.append(("cascade.hard_fraction", "easy_fraction + hard_fraction must be <= 1"))


def enabled(site: dict) -> bool:
    return COMPONENT in site["components"] and bool(site.get("tenants"))


# ------------------------------------------------------------------------------------------ scheduler
def _tiers(site: dict) -> list[dict]:
    """The site's tiers with their priority, highest priority first."""
    prio = {c["name"]: int(c["priority"]) for c in site.get("priority_classes") or []}
    tiers = [{"name": n, "priority": prio[n], **v} for n, v in (site.get("tiers") or {}).items() if n in prio]
    return sorted(tiers, key=lambda t: -t["priority"])


def _planned_rate(plan: dict) -> float:
    return float((plan.get("traffic") or {}).get("arrival_rate_rps") or 0.0)


def _main_replicas(plan: dict) -> int:
    pools = plan.get("pools") or {}
    main = pools.get("decode") or pools.get("serve") or {}
    return max(1, int(main.get("replicas") or 1))


def flow_control(site: dict, plan: dict) -> dict | None:
    """Priority bands of the model's EPP and the per-tier KEDA thresholds, or None without tiers.

    A band holds what arrives, at the planned rate, within the tier's queue_seconds: a request
    beyond it is refused at once (429) instead of waiting past what its tier tolerates. A tier's
    KEDA threshold is what one replica serves in the tier's queue_seconds: a gold queue that long
    adds a replica, a bronze queue must be longer first."""
    if not enabled(site):
        return None
    rate = _planned_rate(plan)
    per_replica = rate / _main_replicas(plan)
    bands, scale = [], []
    for t in _tiers(site):
        depth = max(1, math.ceil(rate * t["queue_seconds"]))
        bands.append(
            {
                "tier": t["name"],
                "priority": t["priority"],
                "max_requests": depth,
                "why": f"{rate:.3g} req/s planned x {t['queue_seconds']:g} s the {t['name']} tier may queue",
            }
        )
        threshold = max(1, round(per_replica * t["queue_seconds"]))
        scale.append(
            {
                "tier": t["name"],
                "priority": t["priority"],
                "threshold": threshold,
                "why": f"{per_replica:.3g} req/s per replica x {t['queue_seconds']:g} s: a {t['name']} queue that one "
                "replica cannot drain within the tier's wait adds a replica",
            }
        )
    # A request that waits longer than the most patient tier allows is dropped from the queue
    # (router flowControl.defaultRequestTTL; without it a queued request waits for the client).
    ttl = max(t["queue_seconds"] for t in _tiers(site))
    return {
        "bands": bands,
        "scale": scale,
        "request_ttl": f"{ttl:g}s",
        "request_ttl_why": f"the longest queue_seconds of any tier ({ttl:g} s): no request waits past what its tier "
        "tolerates",
    }


# ------------------------------------------------------------------------------------------ routes
def at_least_regex(n: int) -> str:
    """An RE2 pattern that fully matches the decimal integers >= n (no leading zeros)."""
    s = str(int(n))
    width = len(s)
    alts = [f"[1-9][0-9]{{{width},}}"]
    for i, ch in enumerate(s):
        d = int(ch)
        if d < 9:
            rest = width - i - 1
            alts.append(f"{s[:i]}[{d + 1}-9]" + (f"[0-9]{{{rest}}}" if rest else ""))
    alts.append(s)
    return "^(" + "|".join(alts) + ")$"


def _exact(name: str, value: str) -> dict:
    return {"type": "Exact", "name": name, "value": value}


def _tenant_routes(site: dict, t: dict, models: dict, headers: dict, cascade: dict | None) -> list[dict]:
    rules = []
    who = _exact(headers["tenant"], t["name"])
    if cascade:
        levels = t["cascade"]
        entry = _exact(MODEL_HEADER, cascade["model"])
        for k in range(1, len(cascade["order"])):
            target = levels[min(k, len(levels) - 1)]
            rules.append(
                {
                    "kind": "escalate",
                    "level": k,
                    "headers": [entry, who, _exact(headers["escalate"], str(k))],
                    "model": target,
                }
            )
        if cascade.get("escalate_prompt_bytes") and len(levels) > 1:
            rules.append(
                {
                    "kind": "large_prompt",
                    "level": 1,
                    "headers": [
                        entry,
                        who,
                        {
                            "type": "RegularExpression",
                            "name": "content-length",
                            "value": at_least_regex(cascade["escalate_prompt_bytes"]),
                        },
                    ],
                    "model": levels[1],
                }
            )
        rules.append({"kind": "cascade_entry", "level": 0, "headers": [entry, who], "model": levels[0]})
    for name in t["models"]:
        rules.append(
            {
                "kind": "direct",
                "level": None,
                "headers": [_exact(MODEL_HEADER, models[name]["served_name"]), who],
                "model": name,
            }
        )
    for r in rules:
        m = models[r["model"]]
        r["pool"] = m["names"]["pool"]
        # a cascade request names the virtual model: the class's endpoint picker rewrites it (model_rewrites)
        r["objective"] = m["objectives"][t["tier"]]
    if len(rules) > MAX_ROUTE_RULES:
        raise SchemaError(
            [(f"tenants.{t['name']}", f"needs {len(rules)} route rules; an AIGatewayRoute holds {MAX_ROUTE_RULES}")]
        )
    return rules


def build(site: dict, intent: dict) -> dict | None:
    """intent["gateway"]: the AI grid front door and its plan report, or None without tenants."""
    if not enabled(site):
        return None
    opts = site["options"][COMPONENT]
    ns = site["serving_namespace"]
    tiers = {t["name"]: t for t in _tiers(site)}
    headers = {
        "api_key": opts["ai_gateway_api_key_header"],
        "tenant": opts["ai_gateway_tenant_header"],
        "tier": opts["ai_gateway_tier_header"],
        "escalate": opts["ai_gateway_escalate_header"],
        "objective": scheduler.OBJECTIVE_HEADER,
        "fairness": FAIRNESS_HEADER,
        "model": MODEL_HEADER,
    }
    headers["strip"] = [headers["tenant"], headers["tier"], *SCHEDULER_HEADERS]
    models = {}
    for m in intent["serving"]["models"]:
        objectives = {o["class"]: o["name"] for o in (m["scheduler"] or {}).get("objectives") or []}
        models[m["name"]] = {**m, "objectives": objectives}
    for name, m in models.items():
        missing = [t for t in tiers if t not in m["objectives"]]
        if missing:
            raise SchemaError([(f"models.{name}", f"no InferenceObjective for tier(s) {missing}: needs a scheduler")])
    cascade = dict(site["cascade"]) if (site.get("cascade") or {}).get("enabled") else None
    tenants = []
    for t in site["tenants"]:
        tier = tiers[t["tier"]]
        budget = t.get("tokens_per_minute")
        out = {
            "name": t["name"],
            "tier": t["tier"],
            "priority": tier["priority"],
            "max_tokens": tier["max_tokens"],
            "tokens_per_minute": budget or tier["tokens_per_minute"],
            "budget_from": "the tenant" if budget else f"its tier {t['tier']}",
            "secret": t["credential"]["secret"],
            "models": list(t["models"]),
            "route": f"tenant-{t['name']}",
            "rate_limit": f"tenant-{t['name']}-tokens",
            "labels": {"inference.blueprints/tenant": t["name"], "inference.blueprints/tier": t["tier"]},
        }
        out["cascade"] = [c for c in cascade["order"] if c in t["models"]] if cascade else []
        out["rules"] = _tenant_routes(site, out, models, headers, cascade if out["cascade"] else None)
        for r in out["rules"]:
            # the class's p95 answer after the longest the tenant's tier may queue (at least the site's timeout)
            r["timeout"] = limits.timeout(
                intent["plans"], [r["model"]], float(tier["queue_seconds"]), floor=opts["ai_gateway_request_timeout"]
            )
        # what the Lua filter needs: the objective of every model name the tenant may send
        out["objectives"] = {models[n]["served_name"]: models[n]["objectives"][t["tier"]] for n in t["models"]}
        out["cascade_objectives"] = [models[n]["objectives"][t["tier"]] for n in out["cascade"]]
        tenants.append(out)
    # tenant API keys cross the front door: TLS unless the site says plaintext (intent/front_door_tls.py)
    door = {"gateway": opts["ai_gateway_gateway_name"], "namespace": ns, "port": opts["ai_gateway_listener_port"]}
    door.update(carries="tenant API keys", eg_namespace=burst_exposure.ENVOY_GATEWAY_NAMESPACE)
    tls = front_door_tls.build(site, door)
    gw = {
        "namespace": ns,
        "name": opts["ai_gateway_gateway_name"],
        "class": opts["ai_gateway_gateway_class"],
        "create_class": opts["ai_gateway_create_gateway_class"],
        "controller_name": opts["ai_gateway_controller_name"],
        "port": tls["listener"]["port"],
        "tls": tls,
        # every class's p95 prompt through the tier Lua's body() and the AI Gateway's ext_proc (intent/limits.py)
        "buffer": limits.buffer(intent["plans"], list(models)),
        "headers": headers,
        # callers outside the cluster (edge sites escalating here) reach the front door over TLS: this name,
        # served with the certificate of a Secret the inventory names
        "ingress": (
            {
                "listener": "https",
                "hostname": site["ingress"]["hostname"],
                "port": site["ingress"]["port"],
                "certificate": site["ingress"]["certificate"]["secret"],
            }
            if site.get("ingress")
            else None
        ),
        "cost": {"namespace": COST_NAMESPACE, "key": COST_KEY, "type": "TotalToken"},
        "tiers": list(tiers.values()),
        "tenants": tenants,
        "cascade": (
            {
                "model": cascade["model"],
                "order": cascade["order"],
                "escalations": len(cascade["order"]) - 1,
                "escalate_prompt_bytes": cascade.get("escalate_prompt_bytes"),
            }
            if cascade
            else None
        ),
    }
    gw["model_rewrites"] = model_rewrites(cascade, models)
    gw["report"] = report(site, intent, tenants, cascade)
    return gw


def model_rewrites(cascade: dict | None, models: dict) -> list[dict]:
    """One InferenceModelRewrite per cascade class: its endpoint picker turns the virtual model into the class's
    served name in the body. Envoy AI Gateway v1.0.0 ignores ``modelNameOverride`` (and header/body mutations) on
    an InferencePool backend (api/v1beta1 ai_gateway_route.go), so without this the engine and every metric
    would see ``auto``. The picker applies the first rule matching the body's model of the rewrites whose
    poolRef is its pool, sets the body's model to the target and counts the decision in
    ``llm_d_epp_model_rewrite_decisions_total{model_rewrite_name, model_name, target_model}`` (llm-d-router
    v0.9.0 pkg/epp/requestcontrol/director.go applyWeightedModelRewrite, pkg/epp/metrics)."""
    if not cascade:
        return []
    out = []
    for name in cascade["order"]:
        m = models[name]
        out.append(
            {
                "name": f"{m['names']['pool']}-{cascade['model']}"[:253],
                # the same group and version as the InferenceObjectives (KServe v0.20.0 installs both kinds)
                "api_version": scheduler.OBJECTIVE_API_VERSION,
                "pool": m["names"]["pool"],
                "pool_group": scheduler.POOL_GROUP,
                "match": cascade["model"],
                "target": m["served_name"],
                "labels": {"inference.blueprints/model": name},
            }
        )
    return out


# ------------------------------------------------------------------------------------------ report
def _class_cost(entry: dict) -> dict:
    """GPUs, relative GPU-hour cost and cost per request of one class, from its plan."""
    plan = entry["plan"]
    gpus, by_gpu = 0, {}
    for pool in (plan.get("pools") or {}).values():
        if not isinstance(pool, dict):
            continue
        n = int(pool.get("gpus") or 0) or int(pool.get("replicas") or 1) * int(pool.get("gpus_per_replica") or 1)
        gpu = pool.get("gpu") or plan["hardware"]["gpu"]
        by_gpu[gpu] = by_gpu.get(gpu, 0) + n
        gpus += n
    unit = {g: float(catalog.gpus()[g]["cost_class"]) for g in by_gpu}
    cost = sum(n * unit[g] for g, n in by_gpu.items())
    rate = _planned_rate(plan)
    per_request = cost / (rate * 3600) if rate else None
    return {
        "model": entry["model"]["name"],
        "model_id": entry["model"]["id"],
        "gpus": gpus,
        "by_gpu": by_gpu,
        "gpu_hour_cost": round(cost, 3),
        "arrival_rate_rps": rate,
        "cost_per_1k_requests": round(per_request * 1000, 4) if per_request is not None else None,
        "why": " + ".join(f"{n} {g} x {unit[g]:g}" for g, n in by_gpu.items())
        + f" (GPU-hours at the catalog's cost_class, H100 = 1) for {rate:.3g} req/s planned",
    }


def report(site: dict, intent: dict, tenants: list[dict], cascade: dict | None) -> dict:
    classes = [_class_cost(e) for e in intent["plans"]]
    by_name = {c["model"]: c for c in classes}
    total = sum(c["gpu_hour_cost"] for c in classes) or 1.0
    # each class's cost is shared by the tenants allowed on it, in proportion to their token budgets
    tier_cost: dict[str, float] = {t["name"]: 0.0 for t in _tiers(site)}
    for c in classes:
        users = [t for t in tenants if c["model"] in t["models"]]
        budget = sum(t["tokens_per_minute"] for t in users)
        for t in users:
            tier_cost[t["tier"]] += c["gpu_hour_cost"] * t["tokens_per_minute"] / budget
    tiers = [
        {
            "tier": name,
            "tenants": [t["name"] for t in tenants if t["tier"] == name],
            "gpu_hour_cost": round(cost, 3),
            "share": round(cost / total, 4),
        }
        for name, cost in tier_cost.items()
    ]
    out = {
        "classes": classes,
        "gpus": sum(c["gpus"] for c in classes),
        "gpu_hour_cost": round(total, 3),
        "tiers": tiers,
        "tiers_why": "each class's GPU-hour cost split over the tenants allowed on it by their token budgets per "
        "minute, summed per tier",
        "cascade": None,
    }
    if cascade:
        order = cascade["order"]
        costs = [by_name[n]["cost_per_1k_requests"] for n in order]
        easy, hard = float(cascade["easy_fraction"]), float(cascade.get("hard_fraction") or 0.0)
        if len(order) == 2:
            shares = [easy, 1 - easy]
        else:
            middle = max(0.0, 1 - easy - hard)
            shares = [easy] + [middle / (len(order) - 2)] * (len(order) - 2) + [hard]
        flagship = costs[-1]
        upfront = sum(s * c for s, c in zip(shares, costs, strict=True))
        # escalated after an answer of the smaller class: every class below was paid for too
        retried = sum(s * sum(costs[: i + 1]) for i, s in enumerate(shares))
        out["cascade"] = {
            "order": order,
            "answered_share": [round(s, 4) for s in shares],
            "cost_per_1k_requests": costs,
            "all_on_flagship": flagship,
            "decided_at_the_gateway": round(upfront, 4),
            "after_a_smaller_answer": round(retried, 4),
            "saves": round(1 - upfront / flagship, 4) if flagship else None,
            "saves_with_retries": round(1 - retried / flagship, 4) if flagship else None,
            "why": f"easy_fraction {easy:g} answered by {order[0]}, hard_fraction {hard:g} by {order[-1]}, the rest "
            "by the classes between; each class at its plan's cost per request; against sending every cascade "
            "request to the last class",
        }
    return out
