"""Sovereign burst, the path between the clusters (issue 26): a request walked through both clusters'
rendered gateway objects the way Envoy Gateway v1.9 and Gateway API v1.6 process them.

* The burst cluster is reachable: the Host the front door sends (Envoy Gateway forwards the client's Host
  unless a URL rewrite filter changes it) is a name the burst cluster's TLS listener and route serve, with
  the SNI the front door sends and a certificate Secret by reference; a burst cluster without a
  certificate is refused by path.
* Spill-over on overload: the sovereign endpoint picker's flow control refuses a burstable request beyond
  its band's bound (429), the front door's burstable rules retry a 429 on the next priority (the burst
  Backend), regulated requests are in another band and on rules that never retry off-prem; the burst
  cluster starts warming before the spill bound is reached.
* The render-time pin sees RequestMirror filters at rule and backendRef level.

What is played here: Gateway API rule choice, Envoy Gateway's Host rewrite and its retry-priority rule (the
facts are cited in intent/burst_routes.py). tests/integration/test_sovereign_burst.py runs the admission
half on a real kube-apiserver, and the egctl tier (tests/integration/test_egctl_translate.py) runs Envoy
Gateway's own translator over these objects.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils.intent import build, burst_pin, burst_routes
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import SchemaError
from ansible_collections.inference.blueprints.plugins.plugin_utils import render

ROOT = Path(__file__).resolve().parents[3]
SITE = ROOT / "inventories" / "example-sovereign-burst"
SOV, BURST = "onprem-fra-1", "burst-aws-1"
BDIR = [str(ROOT / "blueprints")]
PATH = "/llm-sovereign/qwen-35b-a3b/v1/chat/completions"


@pytest.fixture(scope="module")
def site_vars():
    return {h: (json.loads(json.dumps(v)), list(n)) for h, (v, n) in cli.load_site_vars(str(SITE)).items()}


def _intent(site_vars, host, mutate=None):
    values, names = copy.deepcopy(site_vars[host])
    if mutate:
        mutate(values)
    return build.site_intent(host, values, names, BDIR)


@pytest.fixture(scope="module")
def intents(site_vars):
    return {h: _intent(site_vars, h) for h in (SOV, BURST)}


@pytest.fixture(scope="module")
def objects(intents):
    return {h: render.render_components(i["stages"]["serving"], i) for h, i in intents.items()}


def kind(objs, k):
    return [o for o in objs if o["kind"] == k]


def one(objs, k, name=None):
    found = [o for o in kind(objs, k) if name is None or o["metadata"]["name"] == name]
    assert len(found) == 1, (k, name, [o["metadata"]["name"] for o in kind(objs, k)])
    return found[0]


# ------------------------------------------------------------------ a model of the gateway's decisions
def _rule_for(routes: list[dict], path: str, headers: dict[str, str], host: str | None = None) -> dict | None:
    """The rule Gateway API picks among routes: hostname first (a route with hostnames matches only them),
    then the longest path prefix, then the most header matches (Exact; header names case-insensitive)."""
    best, key = None, None
    for route in routes:
        names = route["spec"].get("hostnames")
        if names and host not in names:
            continue
        for r in route["spec"]["rules"]:
            for m in r.get("matches") or [{"path": {"type": "PathPrefix", "value": "/"}}]:
                prefix = m["path"]["value"]
                if not path.startswith(prefix):
                    continue
                hs = m.get("headers") or []
                if not all(
                    headers.get(h["name"].lower()) == h["value"] for h in hs if h.get("type", "Exact") == "Exact"
                ):
                    continue
                k = (len(prefix), len(hs))
                if key is None or k > key:
                    best, key = r, k
    return best


def _host_upstream(rule: dict, client_host: str, backend: dict, filters: dict[str, dict]) -> str:
    """The Host Envoy Gateway sends to the chosen backend: the client's, unless a URLRewrite hostname (literal)
    or an HTTPRouteFilter urlRewrite.hostname of type Backend (the endpoint's hostname) rewrites it."""
    host = client_host
    for f in rule.get("filters") or []:
        if f["type"] == "URLRewrite" and (f["urlRewrite"].get("hostname")):
            host = f["urlRewrite"]["hostname"]
        if f["type"] == "ExtensionRef" and f["extensionRef"]["kind"] == "HTTPRouteFilter":
            spec = filters[f["extensionRef"]["name"]]["spec"]
            if ((spec.get("urlRewrite") or {}).get("hostname") or {}).get("type") == "Backend":
                ep = backend["spec"]["endpoints"][0]
                host = ep.get("hostname") or ep["fqdn"]["hostname"]
    return host


def _listener_takes(gateway: dict, host: str, sni: str | None) -> dict | None:
    """The HTTPS listener of a Gateway that takes a TLS connection for sni and a request for host."""
    for ls in gateway["spec"]["listeners"]:
        if ls["protocol"] == "HTTPS" and ls.get("hostname") in (host, None) and ls.get("hostname") in (sni, None):
            return ls
    return None


# ------------------------------------------------------------------ finding 2: the burst cluster is reachable
def test_a_burstable_request_reaches_a_route_of_the_burst_cluster_with_the_host_and_sni_it_serves(objects):
    sov, bst = objects[SOV], objects[BURST]
    front = one(sov, "HTTPRoute")
    backends = {b["metadata"]["name"]: b for b in kind(sov, "Backend")}
    filters = {f["metadata"]["name"]: f for f in kind(sov, "HTTPRouteFilter")}
    rule = _rule_for([front], PATH, {"x-inference-class": "public"}, "api.front.example.com")
    burst_be = next(backends[r["name"]] for r in rule["backendRefs"] if backends[r["name"]]["spec"].get("fallback"))
    host = _host_upstream(rule, "api.front.example.com", burst_be, filters)
    sni = burst_be["spec"]["tls"]["sni"]
    assert (
        host == sni == burst_be["spec"]["endpoints"][0]["fqdn"]["hostname"] == "inference.apps.burst-aws-1.example.com"
    )
    # the burst cluster: a TLS listener for that name with the certificate Secret named in the inventory
    gw = one(bst, "Gateway")
    listener = _listener_takes(gw, host, sni)
    assert listener and listener["port"] == burst_be["spec"]["endpoints"][0]["fqdn"]["port"] == 443
    assert listener["tls"] == {
        "mode": "Terminate",
        "certificateRefs": [{"group": "", "kind": "Secret", "name": "burst-inference-tls"}],
    }
    routes = [
        r for r in kind(bst, "HTTPRoute") if any(p["name"] == gw["metadata"]["name"] for p in r["spec"]["parentRefs"])
    ]
    there = _rule_for(routes, PATH, {"x-inference-class": "public"}, host)
    assert there, "the burst cluster has a route for the host the front door sends"
    (local,) = [b for b in kind(bst, "Backend") if b["metadata"]["name"] == there["backendRefs"][0]["name"]]
    # and it forwards into the burst cluster's own inference gateway, where KServe's route takes any Host
    assert (
        local["spec"]["endpoints"][0]["fqdn"]["hostname"]
        == "openshift-ai-inference-openshift-default.openshift-ingress.svc"
    )
    # the on-prem backend of the same rule gets its own name, not the burst cluster's
    onprem = next(backends[r["name"]] for r in rule["backendRefs"] if not backends[r["name"]]["spec"].get("fallback"))
    assert (
        _host_upstream(rule, "api.front.example.com", onprem, filters)
        == onprem["spec"]["endpoints"][0]["fqdn"]["hostname"]
    )


def test_without_the_host_rewrite_the_burst_cluster_has_no_route_for_the_request(objects):
    """Envoy Gateway forwards the client's Host unchanged: the check above fails if the rewrite goes."""
    sov, bst = objects[SOV], objects[BURST]
    rule = _rule_for([one(sov, "HTTPRoute")], PATH, {"x-inference-class": "public"}, "api.front.example.com")
    bare = {k: v for k, v in rule.items() if k != "filters"}
    burst_be = next(b for b in kind(sov, "Backend") if b["spec"].get("fallback"))
    host = _host_upstream(bare, "api.front.example.com", burst_be, {})
    assert host == "api.front.example.com"
    assert _rule_for(kind(bst, "HTTPRoute"), PATH, {"x-inference-class": "public"}, host) is None


def test_the_burst_cluster_takes_burstable_classes_only(objects):
    bst = objects[BURST]
    routes = kind(bst, "HTTPRoute")
    host = "inference.apps.burst-aws-1.example.com"
    assert _rule_for(routes, PATH, {"x-inference-class": "public"}, host)
    for headers in ({"x-inference-class": "regulated"}, {}, {"x-inference-class": "Public"}):
        assert _rule_for(routes, PATH, headers, host) is None, headers


def test_a_burst_cluster_without_a_certificate_is_refused_by_path(site_vars):
    def no_cert(v):
        del v["sovereign_burst"]["clusters"][1]["gateway"]["certificate"]

    for host in (SOV, BURST):
        with pytest.raises(SchemaError) as e:
            _intent(site_vars, host, no_cert)
        errors = dict(e.value.errors)
        msg = errors["sovereign_burst.clusters[1].gateway.certificate"]
        assert "kubernetes.io/tls Secret" in msg and "inference.apps.burst-aws-1.example.com" in msg


# ------------------------------------------------------------------ finding 3: spill-over on overload
def _epp(svc: dict) -> dict:
    return svc["spec"]["router"]["scheduler"]["config"]["inline"]


def test_a_full_burstable_band_on_prem_is_retried_on_the_burst_cluster(intents, objects):
    sov = objects[SOV]
    (svc,) = kind(sov, "LLMInferenceService")
    cfg = _epp(svc)
    assert "flowControl" in cfg["featureGates"]
    bands = {b["priority"]: int(b["maxRequests"]) for b in cfg["flowControl"]["priorityBands"]}
    objectives = {o["metadata"]["name"]: o["spec"]["priority"] for o in kind(sov, "InferenceObjective")}
    front = one(sov, "HTTPRoute")
    public = _rule_for([front], PATH, {"x-inference-class": "public"})
    regulated = _rule_for([front], PATH, {"x-inference-class": "regulated"})

    def objective(rule):
        (f,) = [f for f in rule["filters"] if f["type"] == "RequestHeaderModifier"]
        (h,) = f["requestHeaderModifier"]["set"]
        assert h["name"] == "x-llm-d-inference-objective"
        return objectives[h["value"]]

    # the front door puts burstable requests in the low band, regulated ones in the high band
    low, high = objective(public), objective(regulated)
    assert low < high and set(bands) == {low, high}
    # 8 req/s planned x 2 s: beyond 16 queued burstable requests the router answers 429 (RejectedCapacity)
    assert bands[low] == 16 and bands[high] == 240
    # the front door retries a 429 of the burstable rule once, on the next priority: the burst Backend
    spill = one(sov, "BackendTrafficPolicy")
    assert [t["sectionName"] for t in spill["spec"]["targetRefs"]] == [public["name"]]
    retry = spill["spec"]["retry"]
    assert retry["numRetries"] >= 1 and retry["numAttemptsPerPriority"] == 1
    assert 429 in retry["retryOn"]["httpStatusCodes"] and "retriable-status-codes" in retry["retryOn"]["triggers"]
    backends = {b["metadata"]["name"]: b for b in kind(sov, "Backend")}
    priorities = [1 if backends[r["name"]]["spec"].get("fallback") else 0 for r in public["backendRefs"]]
    assert sorted(priorities) == [0, 1]
    # a regulated request is on a rule with the on-prem backend alone, which no retry policy targets
    assert [backends[r["name"]]["spec"].get("fallback") for r in regulated["backendRefs"]] == [None]
    assert regulated["name"] not in [t["sectionName"] for t in spill["spec"]["targetRefs"]]


def _attempts(rule: dict, backends: dict, policy: dict | None, first_status: int) -> list[int]:
    """The priorities Envoy tries for one request (Envoy Gateway v1.9 buildRetryPolicy): the first attempt on
    priority 0; a retriable status is retried numRetries times, each on the next priority when
    numAttemptsPerPriority is set (previous_priorities), else on the same one."""
    prios = sorted({1 if backends[r["name"]]["spec"].get("fallback") else 0 for r in rule["backendRefs"]})
    tried = [prios[0]]
    if not policy or first_status not in policy["spec"]["retry"]["retryOn"]["httpStatusCodes"]:
        return tried
    retry = policy["spec"]["retry"]
    for _ in range(retry["numRetries"]):
        if retry.get("numAttemptsPerPriority"):
            left = [p for p in prios if p not in tried] or prios
            tried.append(left[0])
        else:
            tried.append(prios[0])
    return tried


def test_the_old_front_door_never_reached_the_burst_cluster_on_a_429(objects):
    """The same walk without the spill policy (the front door before issue 26: passive health check only):
    every attempt stays on-prem, whatever the on-prem side answers short of ejection."""
    sov = objects[SOV]
    backends = {b["metadata"]["name"]: b for b in kind(sov, "Backend")}
    public = _rule_for([one(sov, "HTTPRoute")], PATH, {"x-inference-class": "public"})
    policy = one(sov, "BackendTrafficPolicy")
    assert _attempts(public, backends, policy, 429) == [0, 1]
    assert _attempts(public, backends, None, 429) == [0]
    no_priority = copy.deepcopy(policy)
    del no_priority["spec"]["retry"]["numAttemptsPerPriority"]
    assert _attempts(public, backends, no_priority, 429) == [0, 0]


def test_the_burst_cluster_warms_before_the_spill_bound_and_the_plan_says_both(intents, objects):
    (so,) = kind(objects[BURST], "ScaledObject")
    remote = next(t for t in so["spec"]["triggers"] if t["name"] == "sovereign-queue")["metadata"]
    assert remote["query"] == 'sum(llm_d_epp_flow_control_queue_size{inference_pool="qwen-35b-a3b-inference-pool"})'
    (spill,) = intents[SOV]["burst"]["spill"]
    assert float(remote["activationThreshold"]) < spill["bound"]
    from ansible_collections.inference.blueprints.plugins.module_utils.intent import summary

    text = "\n".join(summary.lines(intents[SOV]))
    warm = f"warming at a queue of {float(remote['activationThreshold']):g}"
    assert "spill-over beyond 16 queued burstable requests" in text and warm in text, text


def test_clients_cannot_set_the_scheduler_headers_and_large_bodies_can_be_retried(objects):
    ctp = one(objects[SOV], "ClientTrafficPolicy")
    assert {"x-llm-d-inference-objective", "x-gateway-inference-objective"} <= set(
        ctp["spec"]["headers"]["earlyRequestHeaders"]["remove"]
    )
    assert ctp["spec"]["connection"]["bufferLimit"] == "1Mi"


def test_flow_control_needs_two_priority_classes(site_vars):
    def one_class(v):
        v["priority_classes"] = [{"name": "only", "priority": 1}]

    with pytest.raises(SchemaError) as e:
        _intent(site_vars, SOV, one_class)
    assert "priority_classes" in dict(e.value.errors)


def test_the_burst_cluster_runs_no_flow_control_and_the_sovereign_does(intents):
    assert burst_routes.flow_control({**intents[BURST]["site"], "components": []}, {}) is None
    sov = {m["name"]: m for m in intents[SOV]["serving"]["models"]}
    bst = {m["name"]: m for m in intents[BURST]["serving"]["models"]}
    assert sov["qwen-35b-a3b"]["scheduler"]["flow_control"]["spill_bound"] == 16
    assert bst["qwen-35b-a3b"]["scheduler"]["flow_control"] is None


# ------------------------------------------------------------------ finding 4: mirrors, at render time
@pytest.mark.parametrize("where", ["rule", "backendRef"])
def test_the_render_time_pin_sees_a_mirror_to_the_burst_backend(objects, where):
    front = one(objects[SOV], "HTTPRoute")
    rules = copy.deepcopy(front["spec"]["rules"])
    burst_ref = next(b for r in rules for b in r["backendRefs"] if "-to-" in b["name"])
    onprem = rules[-1]["backendRefs"][0]["name"]
    mirror = {"type": "RequestMirror", "requestMirror": {"backendRef": burst_ref}}
    regulated = next(r for r in rules if r["name"].startswith("onprem-"))
    assert burst_pin.pin_violations(rules, onprem, "x-inference-class", ["public"], "llm-sovereign") == []
    if where == "rule":
        regulated.setdefault("filters", []).append(mirror)
    else:
        regulated["backendRefs"][0]["filters"] = [mirror]
    problems = burst_pin.pin_violations(rules, onprem, "x-inference-class", ["public"], "llm-sovereign")
    assert problems and "or a copy of it" in problems[0]


def test_the_render_time_pin_sees_an_on_prem_name_in_another_namespace(objects):
    front = one(objects[SOV], "HTTPRoute")
    rules = copy.deepcopy(front["spec"]["rules"])
    onprem = rules[-1]["backendRefs"][0]["name"]
    rules[-1]["backendRefs"][0]["namespace"] = "elsewhere"
    assert burst_pin.pin_violations(rules, onprem, "x-inference-class", ["public"], "llm-sovereign")
