"""Every request a front door takes reaches the router with the objective of its class (issue 35 item 3), read
from Envoy Gateway's own translation (`egctl x translate`, v1.9.0) of the rendered objects.

KServe's route of a model answers three forms of a request (kserve config-llm-router-route.yaml): its path
/<ns>/<name>/v1/..., its publisher path /publishers/<ns>/models/<model name>/v1/..., and /v1/... with
`x-gateway-model-name: publishers/<ns>/models/<model name>`. The sovereign front door's routes are walked the
way Envoy does (the first route of the virtual host whose match fits) for each form and each class: a
regulated (or unclassified) request must carry the regulated objective, never none (priority 0, the burstable
band); a burstable one the burstable objective. And every header the router reads, with its deprecated alias
(llm-d-router v0.9.0 pkg/epp/metadata/consts.go), is removed from client requests at both the sovereign front
door and the AI grid.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.integration.test_egctl_translate import _certificates, _egctl, _listeners, _rendered, _routes

ROOT = Path(__file__).resolve().parents[2]


def _router_headers() -> tuple[str, ...]:
    """Every request header llm-d-router v0.9.0 names in pkg/epp/metadata/consts.go (current and Old* names), read
    from the snapshot the data-plane build unpacks, not a copy kept here: the collection's own list
    (intent/scheduler.ROUTER_HEADERS) is checked against the router's. The destination-endpoint headers are the
    picker's answer to the proxy, not a client's input: left out."""
    consts = next((ROOT / ".cache" / "upstream").glob("llm-d-router-*/pkg/epp/metadata/consts.go"), None)
    assert consts is not None, "the llm-d router snapshot is not unpacked: `make dataplane` unpacks it"
    names = set(re.findall(r'"(x-[a-z0-9-]+)"', consts.read_text()))
    return tuple(sorted(n for n in names if not n.startswith("x-gateway-destination-endpoint")))


ROUTER_HEADERS = _router_headers()


def _fits(match: dict, path: str, headers: dict[str, str]) -> bool:
    if "pathSeparatedPrefix" in match:
        p = match["pathSeparatedPrefix"]
        if not (path == p or path.startswith(p + "/")):
            return False
    elif "prefix" in match and not path.startswith(match["prefix"]):
        return False
    return all(headers.get(h["name"].lower()) == h["stringMatch"]["exact"] for h in match.get("headers") or [])


def _objective_of(routes: list[dict], path: str, headers: dict[str, str]) -> str | None:
    route = next(r for r in routes if _fits(r["match"], path, headers))
    for h in route.get("requestHeadersToAdd") or []:
        if h["header"]["key"] == "x-llm-d-inference-objective":
            return h["header"]["value"]
    return None


@pytest.fixture(scope="module")
def sovereign(tmp_path_factory):
    intent, objs = _rendered("example-sovereign-burst", "onprem-fra-1", ["burst_routing"])
    ns = intent["burst"]["namespace"]
    out = _egctl(
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, *_certificates(objs), *objs],
        tmp_path_factory.mktemp("obj"),
    )
    routes = [r for r in _routes(out) if (r.get("name") or "").startswith("httproute/")]
    return intent, out, routes


def _forms(intent: dict, model: dict) -> list[tuple[str, dict]]:
    ns = intent["burst"]["namespace"]
    publisher = f"publishers/{ns}/models/{model['served_name']}"
    return [
        (f"/{ns}/{model['name']}/v1/chat/completions", {}),
        (f"/{publisher}/v1/chat/completions", {}),
        ("/v1/chat/completions", {"x-gateway-model-name": publisher}),
    ]


def test_every_form_of_a_regulated_request_carries_the_regulated_objective(sovereign):
    intent, _, routes = sovereign
    b = intent["burst"]
    header = b["class_header"]
    regulated = [c["name"] for c in b["classes"] if c["regulated"]]
    checked = 0
    for m in intent["serving"]["models"]:
        objs = sorted(m["scheduler"]["objectives"], key=lambda o: -o["priority"])
        for path, headers in _forms(intent, m):
            for cls in [*regulated, None]:
                sent = {**headers, **({header: cls} if cls else {})}
                got = _objective_of(routes, path, sent)
                assert got == objs[0]["name"], f"{path} {sent}: objective {got!r}, want {objs[0]['name']!r}"
                checked += 1
    assert checked


def test_every_form_of_a_burstable_request_carries_the_burstable_objective(sovereign):
    intent, _, routes = sovereign
    b = intent["burst"]
    header = b["class_header"]
    burstable = [c["name"] for c in b["classes"] if not c["regulated"]]
    for m in intent["serving"]["models"]:
        low = min(m["scheduler"]["objectives"], key=lambda o: o["priority"])["name"]
        for path, headers in _forms(intent, m):
            for cls in burstable:
                assert _objective_of(routes, path, {**headers, header: cls}) == low, (path, cls)


def test_the_sovereign_front_door_removes_every_router_header_a_client_sends(sovereign):
    _, out, _ = sovereign
    dumped = json.dumps([ls for ls in _listeners(out) if "/" in ls["name"]])
    missing = [h for h in ROUTER_HEADERS if f'"{h}"' not in dumped]
    assert not missing, missing


def test_the_grid_removes_every_router_header_a_client_sends(tmp_path):
    from tests.integration.test_egctl_translate import _opaque

    intent, objs = _rendered("example-ai-grid", "grid-central-1", ["ai_gateway"])
    g = intent["gateway"]
    ns = g["namespace"]
    extra = _certificates(objs)  # the ingress listener's certificate and the front door's (the service CA's)
    extra += [_opaque(t["secret"], ns, {t["name"]: f"key-of-{t['name']}"}) for t in g["tenants"]]
    objs = [o for o in objs if o["kind"] != "BackendTrafficPolicy"]
    out = _egctl([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, *extra, *objs], tmp_path)
    listeners = [ls for ls in _listeners(out) if "/" in ls["name"]]
    assert listeners
    for ls in listeners:
        dumped = json.dumps(ls)
        missing = [h for h in ROUTER_HEADERS if f'"{h}"' not in dumped]
        assert not missing, (ls["name"], missing)
