"""Body and time limits of every front door, read from Envoy Gateway's own translator (issue 35 item 1).

For every host of every example inventory that renders an Envoy Gateway front door (the AI grid, the sovereign
front door and a burst cluster's listener, an edge site's escalation), the rendered objects go through
`egctl x translate` (github.com/envoyproxy/gateway v1.9.0, .cache/bin/egctl) and the xDS it would send Envoy is
checked against the host's plans, computed here on their own:

* every listener's per-connection buffer holds the largest p95 prompt (prompt_tokens_p95 x 4 bytes) of the
  classes behind it; Envoy Gateway's default is 32768 bytes, so a 12k-token prompt of the AI grid's 397B class
  (48000 B) was refused 413;
* every route's timeout (and its idle timeout) is at least the p95 end-to-end time (TTFT p95 + output_tokens_p95
  x TPOT p95, the larger of SLO and plan) of each class it reaches; without a timeout Envoy cuts at 15 s, so the
  edge's 800-token answer at 60 ms (about 48 s) was cut with 504.

An AIGatewayRoute is not Envoy Gateway's input: Envoy AI Gateway generates an HTTPRoute of the same name with
the rules' matches and timeouts; the test writes that HTTPRoute (a Service of the pool's name stands for the
InferencePool) and feeds it to egctl.
"""

from __future__ import annotations

import json

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.plugin_utils import render

from tests.integration.test_egctl_translate import (
    EG_KINDS,
    _certificates,
    _egctl,
    _listeners,
    _opaque,
    _routes,
    _walk,
)
from tests.serving_helpers import INVENTORIES

EXAMPLES = sorted(p.name for p in INVENTORIES.iterdir() if p.name.startswith("example-") and (p / "hosts.yml").exists())
BYTES_PER_TOKEN = 4


def _front_doors():
    for site in EXAMPLES:
        for host, intent in cli.site_intents(str(INVENTORIES / site), None).items():
            objs = render.render_components(intent["components"], intent)
            # Envoy Gateway's objects (the cluster's own inference gateway is OpenShift's, not Envoy Gateway's)
            if any(o["apiVersion"].startswith(("gateway.envoyproxy.io/", "aigateway.envoyproxy.io/")) for o in objs):
                yield site, host, intent, objs


FRONT_DOORS = {f"{s}/{h}": (i, o) for s, h, i, o in _front_doors()}


def _answer_s(plan: dict) -> float:
    slo, lat, t = plan["slo"], plan["latency"], plan["traffic"]
    ttft = max(slo["ttft_p95_ms"], lat.get("ttft_p95_ms") or 0)
    tpot = max(slo["tpot_p95_ms"], lat.get("tpot_p95_ms") or 0)
    return (ttft + t["output_tokens_p95"] * tpot) / 1000


def _seconds(d: str | None) -> float:
    return float(d.rstrip("s")) if d else 0.0


def _http_route_of(air: dict) -> dict:
    """The HTTPRoute Envoy AI Gateway generates from an AIGatewayRoute (same name, matches, timeouts)."""
    rules = [
        {
            "matches": r["matches"],
            "backendRefs": [{"name": b["name"], "port": 8000} for b in r["backendRefs"]],
            **({"timeouts": r["timeouts"]} if r.get("timeouts") else {}),
        }
        for r in air["spec"]["rules"]
    ]
    spec = {"parentRefs": air["spec"]["parentRefs"], "rules": rules}
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": air["metadata"],
        "spec": spec,
    }


def _stubs(objs: list[dict]) -> list[dict]:
    """What the rendered objects name but the operator owns: namespaces, certificates, keys, the pools."""
    out, seen = [], set()

    def add(obj):
        key = (obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])
        if key not in seen:
            seen.add(key)
            out.append(obj)

    for o in objs:
        ns = o["metadata"].get("namespace")
        if ns:
            add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for cert in _certificates([o]):
            add(cert)
        if o["kind"] == "SecurityPolicy":
            for ref in (o["spec"].get("apiKeyAuth") or {}).get("credentialRefs") or []:
                add(_opaque(ref["name"], ns, {ref["name"]: f"key-of-{ref['name']}"}))
        if o["kind"] == "HTTPRouteFilter" and o["spec"].get("credentialInjection"):
            ref = o["spec"]["credentialInjection"]["credential"]["valueRef"]
            add(_opaque(ref["name"], ns, {"credential": "key"}))
        if o["kind"] == "AIGatewayRoute":
            for r in o["spec"]["rules"]:
                for b in r["backendRefs"]:
                    svc = {"ports": [{"name": "http", "port": 8000, "protocol": "TCP"}], "clusterIP": "10.0.0.10"}
                    add({"apiVersion": "v1", "kind": "Service", "metadata": {"name": b["name"], "namespace": ns},
                         "spec": svc})  # fmt: skip
    return out


def _models_of_rule(rule: dict, intent: dict) -> list[str]:
    """The classes a rendered route rule reaches: by its InferencePool, else by the model in its paths, else all."""
    models = intent["serving"]["models"]
    pools = {m["names"]["pool"]: m["name"] for m in models}
    hit = [pools[b["name"]] for b in rule.get("backendRefs") or [] if b["name"] in pools]
    if hit:
        return hit
    paths = json.dumps(rule.get("matches") or [])
    hit = [m["name"] for m in models if f"/{m['name']}/" in paths]
    return hit or [m["name"] for m in models]


@pytest.fixture(scope="module", params=sorted(FRONT_DOORS))
def translated(request, tmp_path_factory):
    intent, objs = FRONT_DOORS[request.param]
    routes = [_http_route_of(o) for o in objs if o["kind"] == "AIGatewayRoute"]
    # the token budgets target the generated HTTPRoutes' rate limits: not what is checked here
    eg = [o for o in objs if o["kind"] in EG_KINDS and o["kind"] != "BackendTrafficPolicy"] + routes
    out = _egctl([*_stubs(objs), *eg], tmp_path_factory.mktemp("limits"))
    return intent, eg, out


def test_every_example_has_a_front_door_checked():
    hosts = {k.split("/")[0] for k in FRONT_DOORS}
    assert {"example-ai-grid", "example-edge-fleet", "example-sovereign-burst"} <= hosts, sorted(FRONT_DOORS)


def test_every_listener_holds_the_p95_prompt(translated):
    intent, _, out = translated
    need = max(p["plan"]["traffic"]["prompt_tokens_p95"] * BYTES_PER_TOKEN for p in intent["plans"])
    listeners = [ls for ls in _listeners(out) if "/" in ls["name"]]
    assert listeners
    for ls in listeners:
        have = ls.get("perConnectionBufferLimitBytes", 32768)
        assert have >= need, f"{ls['name']}: buffer {have} B, the p95 prompt is {need} B"


def test_every_route_waits_for_the_p95_answer(translated):
    intent, objs, out = translated
    answers = {p["model"]["name"]: _answer_s(p["plan"]) for p in intent["plans"]}
    rules = {
        (o["metadata"]["namespace"], o["metadata"]["name"], i): r
        for o in objs
        if o["kind"] == "HTTPRoute"
        for i, r in enumerate(o["spec"]["rules"])
    }
    checked = 0
    for r in _routes(out):
        name = r.get("name") or ""
        if not name.startswith("httproute/"):
            continue
        _, ns, route, _, idx, *_ = name.split("/")
        models = [m for m in _models_of_rule(rules[(ns, route, int(idx))], intent) if m in answers]
        need = max((answers[m] for m in models), default=0.0)
        timeout = _seconds(r["route"].get("timeout")) or 15.0  # absent: Envoy's route default
        idle = _seconds(r["route"].get("idleTimeout")) or 300.0  # absent: the HCM's 5 min stream idle timeout
        assert timeout >= need and idle >= need, f"{name}: timeout {timeout} s, idle {idle} s; p95 answer {need} s"
        checked += 1
    assert checked, "the front door has routes"


def test_the_figures_of_the_issue(translated):
    """A 12k-token prompt through the AI grid's listener, a 48 s answer through the edge's routes."""
    intent, _, out = translated
    if intent.get("gateway"):
        big = max(p["plan"]["traffic"]["prompt_tokens_p95"] for p in intent["plans"])
        assert big >= 12000
        for ls in [ls for ls in _listeners(out) if "/" in ls["name"]]:
            assert ls["perConnectionBufferLimitBytes"] >= big * BYTES_PER_TOKEN
    if (intent["serving"].get("escalation") or {}).get("routes"):
        timeouts = [
            _seconds(r["route"].get("timeout")) for r in _routes(out) if (r.get("name") or "").startswith("httproute/")
        ]
        assert timeouts and min(timeouts) >= 48, timeouts
    assert [n for n in _walk(out["xds"]) if "perConnectionBufferLimitBytes" in n]
