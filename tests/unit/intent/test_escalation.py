"""Edge escalation the regional AI grid accepts (issue 26, finding 5): a request an edge site escalates is
walked through the edge's rendered objects and then the grid's.

At the edge (inventories/example-edge-fleet, store-berlin-001): Gateway API rule choice picks the escalation
route, its URLRewrite sets the grid's Host and path, the HTTPRouteFilter's credentialInjection puts the value
of the Secret's key ``credential`` in the grid's API-key header (Envoy Gateway v1.9), and the rendered Lua
filter (run in Lua 5.1 with a stand-in for Envoy's stream handle, tests/envoy_lua.py) rewrites the body's
model. At the grid (inventories/example-ai-grid): its HTTPS listener serves that Host and SNI, the walker of
test_grid.py plays API-key authentication and Envoy AI Gateway's routing by the body's model, and the grid's
own tier filter (Lua, rendered) runs on the request. Before this change the edge sent its own model name and
no key: 401 at the grid, and with a key a model outside the edge tenant's plan.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils.intent import build
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import SchemaError
from ansible_collections.inference.blueprints.plugins.plugin_utils import render
from test_grid import Gateway  # the grid's request walker

from tests.envoy_lua import run_on_request

ROOT = Path(__file__).resolve().parents[3]
EDGE = ROOT / "inventories" / "example-edge-fleet"
GRID = ROOT / "inventories" / "example-ai-grid"
STORE, CLINIC, GRID_HOST = "store-berlin-001", "clinic-lyon-002", "grid-central-1"
BDIR = [str(ROOT / "blueprints")]
EDGE_KEY = "key-of-edge-fleet"  # what the Secret regional-grid-key holds under "credential" in this test


def _values(site: Path, host: str):
    values, names = cli.load_site_vars(str(site))[host]
    return json.loads(json.dumps(values)), list(names)


def _intent(site: Path, host: str, mutate=None):
    values, names = _values(site, host)
    if mutate:
        mutate(values)
    return build.site_intent(host, values, names, BDIR)


@pytest.fixture(scope="module")
def edge():
    intent = _intent(EDGE, STORE)
    return intent, render.render_components(intent["stages"]["serving"], intent)


@pytest.fixture(scope="module")
def grid_side():
    intent = _intent(GRID, GRID_HOST)
    return intent, render.render_components(intent["stages"]["serving"], intent)


def kind(objs, k):
    return [o for o in objs if o["kind"] == k]


def _rule_for(routes, gateway: str, path: str, headers: dict):
    best, key = None, None
    for route in routes:
        if not any(p["name"] == gateway for p in route["spec"]["parentRefs"]):
            continue
        for r in route["spec"]["rules"]:
            for m in r["matches"]:
                if not path.startswith(m["path"]["value"]):
                    continue
                hs = m.get("headers") or []
                if all(headers.get(h["name"].lower()) == h["value"] for h in hs):
                    k = (len(m["path"]["value"]), len(hs))
                    if key is None or k > key:
                        best, key = (route, r), k
    return best


def _escalate(objs, secrets: dict[str, dict[str, str]], path: str, headers: dict, body: dict) -> dict:
    """What leaves the edge for a request: the backend, Host, path, headers and body, per the rendered objects."""
    (gw,) = kind(objs, "Gateway")
    route, rule = _rule_for(kind(objs, "HTTPRoute"), gw["metadata"]["name"], path, headers)
    filters = {f["metadata"]["name"]: f for f in kind(objs, "HTTPRouteFilter")}
    out = {"headers": {k.lower(): v for k, v in headers.items()}, "body": json.dumps(body), "path": path}
    out["backend"] = rule["backendRefs"][0]["name"]
    for f in rule.get("filters") or []:
        if f["type"] == "URLRewrite":
            rw = f["urlRewrite"]
            out["headers"]["host"] = rw.get("hostname", out["headers"].get("host"))
            prefix = next(m["path"]["value"] for m in rule["matches"])
            out["path"] = rw["path"]["replacePrefixMatch"] + path[len(prefix) :]
        elif f["type"] == "RequestHeaderModifier":
            for h in f["requestHeaderModifier"].get("set") or []:
                out["headers"][h["name"].lower()] = h["value"]
        elif f["type"] == "ExtensionRef":
            inj = filters[f["extensionRef"]["name"]]["spec"]["credentialInjection"]
            name = (inj.get("header") or "Authorization").lower()
            if inj.get("overwrite") or name not in out["headers"]:
                out["headers"][name] = secrets[inj["credential"]["valueRef"]["name"]]["credential"]
    for policy in kind(objs, "EnvoyExtensionPolicy"):
        if any(
            t["kind"] == "HTTPRoute" and t["name"] == route["metadata"]["name"] for t in policy["spec"]["targetRefs"]
        ):
            ran = run_on_request(policy["spec"]["lua"][0]["inline"], out["headers"], out["body"])
            out["headers"], out["body"] = ran["headers"], ran["body"]
    (backend,) = [b for b in kind(objs, "Backend") if b["metadata"]["name"] == out["backend"]]
    out["address"] = backend["spec"]["endpoints"][0]["fqdn"]
    out["sni"] = (backend["spec"].get("tls") or {}).get("sni")
    return out


def _grid_accepts(grid_intent, grid_objs, sent: dict):
    """The grid's answer: its HTTPS listener for the Host and SNI, API-key auth, its tier filter, the route."""
    (gw,) = kind(grid_objs, "Gateway")
    listener = next(
        (ls for ls in gw["spec"]["listeners"] if ls["protocol"] == "HTTPS" and ls.get("hostname") == sent["sni"]),
        None,
    )
    assert listener and listener["hostname"] == sent["headers"]["host"] and listener["port"] == sent["address"]["port"]
    keys = {t["secret"]: {t["name"]: f"key-of-{t['name']}"} for t in grid_intent["gateway"]["tenants"]}
    model = json.loads(sent["body"])["model"]
    status, backend, headers = Gateway(grid_objs, keys).handle(dict(sent["headers"]), model, len(sent["body"]))
    if status != 200:
        return status, None
    (eep,) = kind(grid_objs, "EnvoyExtensionPolicy")
    tiers = run_on_request(eep["spec"]["lua"][0]["inline"], headers, sent["body"])
    if tiers["status"]:
        return tiers["status"], tiers["response"]
    return 200, backend


BODY = {"model": "Qwen3.5-35B-A3B", "messages": [{"role": "user", "content": "a hard question"}], "max_tokens": 512}
PATH = "/llm-edge-store-berlin-001/qwen-edge/v1/chat/completions"


def test_an_escalated_request_reaches_the_regional_class_with_the_sites_key(edge, grid_side):
    intent, objs = edge
    sent = _escalate(objs, {"regional-grid-key": {"credential": EDGE_KEY}}, PATH, {"x-llm-escalate": "true"}, BODY)
    # the body's model is the regional class, its size is what content-length says, the key is in x-api-key
    assert json.loads(sent["body"])["model"] == "Qwen3.5-397B-A17B"
    assert json.loads(sent["body"])["messages"] == BODY["messages"]
    assert sent["headers"]["content-length"] == str(len(sent["body"]))
    assert sent["headers"]["x-api-key"] == EDGE_KEY and sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["host"] == sent["sni"] == sent["address"]["hostname"] == "grid.eu-central.example.com"
    grid_intent, grid_objs = grid_side
    status, backend = _grid_accepts(grid_intent, grid_objs, sent)
    pool = next(m["names"]["pool"] for m in grid_intent["serving"]["models"] if m["name"] == "qwen-397b-a17b")
    assert status == 200 and backend["name"] == pool


def test_what_the_edge_sent_before_was_refused_by_the_grid(edge, grid_side):
    """The same request without the edge's key is refused (401); with the key but the edge's own model name, the
    grid's tier filter refuses a model outside the edge tenant's plan (403)."""
    grid_intent, grid_objs = grid_side
    sent = _escalate(edge[1], {"regional-grid-key": {"credential": EDGE_KEY}}, PATH, {"x-llm-escalate": "true"}, BODY)
    no_key = {**sent, "headers": {k: v for k, v in sent["headers"].items() if k != "x-api-key"}}
    assert _grid_accepts(grid_intent, grid_objs, no_key)[0] == 401
    own_model = {**sent, "body": json.dumps(BODY)}
    status, answer = _grid_accepts(grid_intent, grid_objs, own_model)
    assert status in (403, 404) and (status == 404 or "model_not_allowed" in answer), (status, answer)


def test_a_request_without_the_header_stays_on_the_site(edge):
    _, objs = edge
    sent = _escalate(objs, {"regional-grid-key": {"credential": EDGE_KEY}}, PATH, {}, BODY)
    assert sent["address"]["hostname"] == "openshift-ai-inference-openshift-default.openshift-ingress.svc"
    assert json.loads(sent["body"]) == BODY and "x-api-key" not in sent["headers"]


def test_a_key_the_client_sent_is_overwritten(edge):
    _, objs = edge
    hdrs = {"x-llm-escalate": "true", "x-api-key": "someone-elses"}
    sent = _escalate(objs, {"regional-grid-key": {"credential": EDGE_KEY}}, PATH, hdrs, BODY)
    assert sent["headers"]["x-api-key"] == EDGE_KEY


@pytest.mark.parametrize(
    ("body", "model"),
    [
        ('{"messages":[],"model":"x"}', "Qwen3.5-397B-A17B"),
        ('{"messages":[{"role":"user","content":"say \\"model\\": \\"y\\""}]}', "Qwen3.5-397B-A17B"),
        ("{}", "Qwen3.5-397B-A17B"),
    ],
)
def test_the_body_rewrite_handles_any_key_order_and_a_missing_model(edge, body, model):
    _, objs = edge
    (policy,) = kind(objs, "EnvoyExtensionPolicy")
    ran = run_on_request(policy["spec"]["lua"][0]["inline"], {"content-length": str(len(body))}, body)
    out = json.loads(ran["body"])
    assert out["model"] == model and ran["headers"]["content-length"] == str(len(ran["body"]))
    assert {k: v for k, v in out.items() if k != "model"} == {k: v for k, v in json.loads(body).items() if k != "model"}


def test_an_escalation_without_a_credential_is_refused_by_path():
    def no_credential(v):
        v["escalation"] = {k: x for k, x in v["escalation"].items() if k != "credential"}

    with pytest.raises(SchemaError) as e:
        _intent(EDGE, STORE, no_credential)
    msg = dict(e.value.errors)["escalation.credential"]
    assert "required when escalation.enabled is true" in msg and "--from-literal=credential=" in msg

    def inline(v):
        v["escalation"] = {**v["escalation"], "credential": "sk-live-123"}

    with pytest.raises(SchemaError) as e:
        _intent(EDGE, STORE, inline)
    assert "escalation.credential" in dict(e.value.errors) and "sk-live-123" not in str(e.value)


def test_a_site_without_escalation_renders_no_front_door():
    intent = _intent(EDGE, CLINIC)
    objs = render.render_components(intent["stages"]["serving"], intent)
    assert not kind(objs, "Gateway") and not kind(objs, "HTTPRouteFilter")


def test_the_grid_serves_its_ingress_name_with_a_certificate_by_reference(grid_side):
    _, objs = grid_side
    (gw,) = kind(objs, "Gateway")
    https = next(ls for ls in gw["spec"]["listeners"] if ls.get("hostname") == "grid.eu-central.example.com")
    assert https["tls"]["certificateRefs"] == [{"group": "", "kind": "Secret", "name": "grid-ingress-tls"}]

    def no_cert(v):
        v["ingress"] = {"hostname": "grid.example.com"}

    with pytest.raises(SchemaError) as e:
        _intent(GRID, GRID_HOST, copy.deepcopy(no_cert))
    assert "ingress.certificate" in dict(e.value.errors)
