# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gateway objects of a sovereign-burst site, decided once per cluster (``intent["burst"]``).

* ``front_door(...)``: the sovereign cluster's front door (Envoy Gateway): the Backends (its own inference
  gateway and each burst cluster's), the route, the Host rewrite, the spill-over retry and the regulated pin.
* ``ingress(...)``: a burst cluster's side: the TLS listener the front door reaches, with the hostname and
  certificate (a Secret by reference), and the route that takes burstable classes only.
* ``flow_control(site, plan)``: the sovereign endpoint picker's flow-control bands: the queue bound beyond
  which a burstable request is refused (429) and spills over.

Facts about the upstream objects and what they do at run time (sources: github.com/envoyproxy/gateway v1.9.0
api/v1alpha1 backend_types.go, retry_types.go, httproutefilter_types.go, connection_types.go;
internal/gatewayapi/route.go processBackendDestinationSetting; internal/xds/translator/route.go
buildRetryPolicy and buildHashPolicy's neighbours; llm-d-router v0.9.0 pkg/epp/flowcontrol,
pkg/epp/requestcontrol/admission.go; sigs.k8s.io/gateway-api v1.6.1; kserve v0.20.0
config/llmisvcconfig/config-llm-router-route.yaml):

* A ``Backend`` with ``fallback: true`` is priority 1 in the rule's one Envoy cluster; a retry with
  ``numAttemptsPerPriority: 1`` sets Envoy's ``previous_priorities`` retry priority, so the retry of a request
  the on-prem gateway refused goes to priority 1: the burst cluster. Without it every retry goes back on-prem.
* Envoy Gateway forwards the client's Host unchanged; an ``HTTPRouteFilter`` ``urlRewrite.hostname.type:
  Backend`` sets Envoy's ``auto_host_rewrite``: the Host becomes the chosen endpoint's hostname (on-prem: the
  inference gateway Service; burst: the name its TLS listener serves). A literal hostname would send the burst
  name to on-prem too.
* Under flow control the endpoint picker queues a request in its priority's band and refuses one that finds
  the band full at once: 429 (``QueueOutcomeRejectedCapacity`` -> ResourceExhausted); one that outlives the
  band's TTL gets 503. A request with no InferenceObjective has priority 0.
* KServe's route of a model matches its path on any Host (its template sets no hostnames), so the Host a
  burst gateway forwards reaches it.
* Envoy retries a request only if its body fits the connection's buffer (ClientTrafficPolicy
  ``connection.bufferLimit``, default 32 KiB); a larger body is answered by the first attempt.
"""

from __future__ import annotations

import math

from . import burst_exposure, burst_pin, burst_pin_shared, front_door_tls, inventory, limits, scaling, scheduler
from .schema import SchemaError

BACKEND_GROUP, BACKEND_KIND = burst_pin.BACKEND_GROUP, burst_pin.BACKEND_KIND
MAX_RULES = 16  # HTTPRoute spec.rules MaxItems (gateway-api v1.6.1)
MAX_MATCHES = 64  # HTTPRouteRule matches MaxItems
# What the on-prem side answers when it will not serve a burstable request now: 429 when the flow-control
# band is full, 503 when it expired in the queue (or the on-prem gateway has no healthy upstream).
SPILL_STATUSES = (429, 503)
# Headers the endpoint picker reads: set by the front door, never taken from a client (intent/scheduler.py).
SCHEDULER_HEADERS = scheduler.ROUTER_HEADERS
OBJECTIVE_HEADER = scheduler.OBJECTIVE_HEADER
# KServe's route of a model also matches /publishers/<namespace>/models/<model name>/v1/... and /v1/... with this
# header naming publishers/<namespace>/models/<model name> (kserve config-llm-router-route.yaml; configmap.go
# DefaultModelBasedRoutingHeaderName): the front door classifies those requests too.
KSERVE_MODEL_HEADER = "x-gateway-model-name"


def backend_name(site: dict, suffix: str) -> str:
    return f"{site['site_name']}-{suffix}"[:63].rstrip("-")


def _local_gateway(site: dict, opts: dict) -> dict:
    """The cluster's own inference gateway (OpenShift AI's, where KServe's routes are), as a Backend address.
    OpenShift's Gateway API implementation names a Gateway's Service <gateway>-<gatewayclass>."""
    gw = site["options"]["model_service"]["model_service_gateway"]
    return {
        "hostname": f"{gw['name']}-{opts['burst_routing_local_gateway_class']}.{gw['namespace']}.svc",
        "port": opts["burst_routing_local_gateway_port"],
    }


def _gateway(opts: dict) -> dict:
    return {
        "name": opts["burst_routing_gateway_name"],
        "class": opts["burst_routing_gateway_class"],
        "create_class": opts["burst_routing_create_gateway_class"],
        "controller_name": opts["burst_routing_controller_name"],
    }


def _ref(name: str) -> dict:
    return {"group": BACKEND_GROUP, "kind": BACKEND_KIND, "name": name}


def _objectives(intent: dict) -> dict[str, tuple[str, str]]:
    """{model: (objective of regulated requests, objective of burstable requests)}: the highest and the lowest
    priority class of the model's InferenceObjectives (the blueprint's regulated 100, burstable 0)."""
    out = {}
    for m in intent["serving"]["models"]:
        objs = sorted((m.get("scheduler") or {}).get("objectives") or [], key=lambda o: -o["priority"])
        if len(objs) >= 2 and objs[0]["priority"] > objs[-1]["priority"]:
            out[m["name"]] = (objs[0]["name"], objs[-1]["name"])
    return out


def _kserve_matches(site: dict, ns: str, model: str) -> list[dict]:
    """Every way a request names a model on KServe's route: its path, its publisher path, /v1 with the model
    header (kserve config-llm-router-route.yaml)."""
    m = next((x for x in site["models"] if x["name"] == model), None)
    served = inventory.served_name(m) if m else model
    publisher = f"publishers/{ns}/models/{served}"
    return [
        {"path": {"type": "PathPrefix", "value": f"/{ns}/{model}/"}},
        {"path": {"type": "PathPrefix", "value": f"/{publisher}/"}},
        {"path": {"type": "PathPrefix", "value": "/v1/"}, "headers": [_exact(KSERVE_MODEL_HEADER, publisher)]},
    ]


def _exact(name: str, value: str) -> dict:
    return {"type": "Exact", "name": name, "value": value}


def _of_class(matches: list[dict], header: str, names: list[str]) -> list[dict]:
    """The matches narrowed to requests of the named classes."""
    return [{**m, "headers": [*m.get("headers", []), _exact(header, c)]} for c in names for m in matches]


def _set_objective(name: str | None) -> list[dict]:
    if not name:
        return []
    return [
        {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": OBJECTIVE_HEADER, "value": name}]}}
    ]


def _timeouts(plans: list[dict], models: list[str], queue_s: float, floor, attempts: int = 1) -> dict:
    """An HTTPRoute rule's timeouts: each attempt waits for the classes' p95 answer after the queue
    (intent/limits.py, at least the site's burst_routing_request_timeout), the request for every attempt."""
    t = limits.timeout(plans, models, queue_s, floor=floor)
    out = {"request": f"{t['seconds'] * attempts}s"}
    if attempts > 1:
        out["backendRequest"] = t["duration"]
    return out


# ------------------------------------------------------------------------------------------ the sovereign's
def front_door(site: dict, intent: dict, out: dict, sov: dict, bursts: list[dict]) -> dict:
    """The sovereign cluster's front door: everything burst_routing renders there, pin checked."""
    opts = site["options"]["burst_routing"]
    ns, served, classes = out["namespace"], site["burst_served"], out["classes"]
    header, burstable = out["class_header"], out["burstable"]
    onprem = {"name": backend_name(site, "onprem"), **_local_gateway(site, opts)}
    backends = [{**onprem, "fallback": False, "tls": None, "cluster": sov["name"]}]
    by_cluster = {}
    for b in bursts:
        name = backend_name(site, f"to-{b['name']}")
        by_cluster[b["name"]] = name
        backends.append(
            {
                "name": name,
                "hostname": b["gateway"]["hostname"],
                "port": b["gateway"]["port"],
                "fallback": True,
                "tls": {"sni": b["gateway"]["hostname"]},
                "cluster": b["name"],
            }
        )
    host_filter = backend_name(site, "backend-host")
    objectives = _objectives(intent)
    plans, floor = intent["plans"], opts["burst_routing_request_timeout"]
    regulated_wait = float(opts["burst_routing_regulated_queue_seconds"])
    on_prem = set(served.get(sov["name"]) or [])
    rules, spill = [], []
    for model in sorted({n for c in classes for n in c["models"]}):
        targets = [by_cluster[b["name"]] for b in bursts if model in served.get(b["name"], [])]
        names = [c["name"] for c in classes if not c["regulated"] and model in c["models"]]
        forms = _kserve_matches(site, ns, model)
        regulated, low = objectives.get(model, (None, None))
        if targets and names:
            rule = f"burst-{model}"[:63]
            spill.append(rule)
            rules.append(
                {
                    "name": rule,
                    "matches": _of_class(forms, header, names),
                    "filters": _set_objective(low)
                    + [
                        {
                            "type": "ExtensionRef",
                            "extensionRef": {"group": BACKEND_GROUP, "kind": "HTTPRouteFilter", "name": host_filter},
                        }
                    ],
                    "backendRefs": ([_ref(onprem["name"])] if model in on_prem else []) + [_ref(t) for t in targets],
                    "timeouts": _timeouts(plans, [model], float(opts["burst_routing_spill_queue_seconds"]), floor, 2),
                }
            )
        if model in on_prem:
            # every other request for the model (regulated, unclassified, unknown): on-prem, at the
            # regulated priority, never refused for a burstable band that is full
            rules.append(
                {
                    "name": f"onprem-{model}"[:63],
                    "matches": forms,
                    "filters": _set_objective(regulated),
                    "backendRefs": [_ref(onprem["name"])],
                    "timeouts": _timeouts(plans, [model], regulated_wait, floor),
                }
            )
    # everything else (other paths): on-prem only
    rules.append(
        {
            "name": "onprem",
            "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
            "backendRefs": [_ref(onprem["name"])],
            "timeouts": _timeouts(plans, sorted(on_prem), regulated_wait, floor),
        }
    )
    for r in rules:
        if not r.get("filters"):
            r.pop("filters", None)
    if len(rules) > MAX_RULES or any(len(r["matches"]) > MAX_MATCHES for r in rules):
        raise SchemaError(
            [
                (
                    "sovereign_burst.request_classes",
                    f"needs {len(rules)} route rules (two per model, one more for other paths); a route holds "
                    f"{MAX_RULES}",
                )
            ]
        )
    problems = burst_pin.pin_violations(rules, onprem["name"], header, burstable, ns)
    if problems:  # the render-time pin: nothing is rendered that could send regulated traffic off-prem
        raise SchemaError([("sovereign_burst.request_classes", p) for p in problems])
    gateway = _gateway(opts)
    # regulated request bodies cross it: TLS unless the site says plaintext (intent/front_door_tls.py)
    door = {"gateway": gateway["name"], "namespace": ns, "port": opts["burst_routing_listener_port"]}
    door.update(carries="regulated request bodies", eg_namespace=opts["burst_routing_envoy_gateway_namespace"])
    gateway["tls"] = front_door_tls.build(site, door)
    gateway["port"] = gateway["tls"]["listener"]["port"]
    route = backend_name(site, "front")
    return {
        "gateway": gateway,
        "onprem": onprem,
        "backends": backends,
        "route": {"name": route, "rules": rules},
        "host_rewrite": {"name": host_filter},
        "client": {
            "name": route,
            "strip": list(SCHEDULER_HEADERS),
            # what a retry replays and a route holds: every class's p95 prompt, at least the site's retry buffer
            "buffer": limits.buffer(
                plans, sorted({n for c in classes for n in c["models"]}), opts["burst_routing_retry_buffer"]
            ),
        },
        "spill": {
            "name": backend_name(site, "spill"),
            "route": route,
            "rules": spill,
            "consecutive_5xx": opts["burst_routing_ejection_errors"],
            "ejection_time": opts["burst_routing_ejection_time"],
            "max_ejection_percent": 100,
            "retry": {
                "numRetries": 1,
                "numAttemptsPerPriority": 1,
                "retryOn": {
                    "triggers": ["retriable-status-codes", "connect-failure"],
                    "httpStatusCodes": list(SPILL_STATUSES),
                },
            },
        },
        "pin": burst_pin.admission_policy(
            onprem,
            backends,
            {
                "name": backend_name(site, "regulated-pin"),
                "namespace": ns,
                "gateway": gateway["name"],
                "header": header,
                "burstable": burstable,
            },
        ),
        # the routes of other namespaces on the shared gateway the on-prem Backend leads to
        "shared_pin": burst_pin_shared.policy(
            {"name": backend_name(site, "regulated-pin"), "namespace": ns},
            site["options"]["model_service"]["model_service_gateway"],
            onprem["hostname"],
            KSERVE_MODEL_HEADER,
        ),
    }


# ------------------------------------------------------------------------------------------ a burst cluster's
def ingress(site: dict, intent: dict, out: dict, me: dict) -> dict:
    """A burst cluster's side of the path: the TLS listener the sovereign front door reaches (its hostname and
    certificate, a Secret by reference) and a route that takes burstable classes only, to the cluster's own
    inference gateway. A regulated or unclassified request that reaches it anyway finds no route (404)."""
    opts = site["options"]["burst_routing"]
    ns, header = out["namespace"], out["class_header"]
    gw = me["gateway"]
    local = {"name": backend_name(site, "local"), **_local_gateway(site, opts)}
    served = site["burst_served"][me["name"]]
    classes = out["classes"]
    rules = []
    for model in served:
        names = [c["name"] for c in classes if not c["regulated"] and model in c["models"]]
        if not names:
            continue
        rules.append(
            {
                "name": f"burst-{model}"[:63],
                "matches": _of_class(_kserve_matches(site, ns, model), header, names),
                "backendRefs": [_ref(local["name"])],
                "timeouts": _timeouts(
                    intent["plans"],
                    [model],
                    float(opts["burst_routing_spill_queue_seconds"]),
                    opts["burst_routing_request_timeout"],
                ),
            }
        )
    gateway = {
        **_gateway(opts),
        "listener": "https",
        "hostname": gw["hostname"],
        "port": gw["port"],
        "certificate": gw["certificate"]["secret"],
    }
    return {
        "gateway": gateway,
        "local": local,
        "route": {"name": backend_name(site, "burst-ingress"), "hostnames": [gw["hostname"]], "rules": rules},
        # the hostname reaches this listener through the OpenShift router (burst_exposure.py)
        "exposure": burst_exposure.build(site, gateway, backend_name(site, "burst-ingress")),
    }


# ------------------------------------------------------------------------------------------ flow control
def flow_control(site: dict, plan: dict) -> dict | None:
    """The sovereign cluster's flow-control bands (None elsewhere): regulated requests wait up to
    ``burst_routing_regulated_queue_seconds``, burstable ones up to ``burst_routing_spill_queue_seconds``; a
    band holds what arrives at the planned rate in that time, and a burstable request beyond it is refused
    (429), which the front door retries on a burst cluster."""
    sb = site.get("sovereign_burst")
    if "burst_routing" not in site["components"] or not sb:
        return None
    me = next((c for c in sb["clusters"] if c["name"] == site["host"]), None)
    if not me or me["role"] != "sovereign":
        return None
    classes = sorted(site.get("priority_classes") or [], key=lambda c: -int(c["priority"]))
    if len(classes) < 2 or int(classes[0]["priority"]) == int(classes[-1]["priority"]):
        raise SchemaError(
            [
                (
                    "priority_classes",
                    "the sovereign cluster queues regulated requests before burstable ones: needs two priority "
                    "classes of different priority (the blueprint's regulated 100 and burstable 0)",
                )
            ]
        )
    opts = site["options"]["burst_routing"]
    rate = float((plan.get("traffic") or {}).get("arrival_rate_rps") or 0.0)
    pools = plan.get("pools") or {}
    replicas = max(1, int((pools.get("decode") or pools.get("serve") or {}).get("replicas") or 1))
    activation = scaling.trigger_settings(site)["queue_threshold"]
    waits = {
        classes[0]["name"]: ("regulated", float(opts["burst_routing_regulated_queue_seconds"])),
        classes[-1]["name"]: ("burstable", float(opts["burst_routing_spill_queue_seconds"])),
    }
    bands, scale = [], []
    for c in (classes[0], classes[-1]):
        kind, seconds = waits[c["name"]]
        depth = max(1, math.ceil(rate * seconds))
        if kind == "burstable":
            # the burst cluster starts warming at the activation queue: spill-over starts later, never before
            depth = max(depth, math.floor(activation) + 1)
        why = f"{rate:.3g} req/s planned x {seconds:g} s a {kind} request may wait on-prem"
        if kind == "burstable":
            why += "; a burstable request beyond it is refused (429) and the front door retries it on a burst cluster"
        bands.append({"tier": c["name"], "priority": int(c["priority"]), "max_requests": depth, "why": why})
        scale.append(
            {
                "tier": c["name"],
                "priority": int(c["priority"]),
                "threshold": max(1, math.floor(activation)),
                "why": f"the queue threshold ({activation:g} queued requests) in either band adds an on-prem replica, "
                f"as without flow control; {replicas} planned stand",
            }
        )
    ttl = float(opts["burst_routing_regulated_queue_seconds"])
    return {
        "bands": bands,
        "scale": scale,
        "request_ttl": f"{ttl:g}s",
        "request_ttl_why": f"a regulated request waits at most {ttl:g} s on-prem "
        "(burst_routing_regulated_queue_seconds)",
        "spill_bound": bands[-1]["max_requests"],
        "activation": activation,
    }
