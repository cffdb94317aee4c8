"""Envoy Gateway's own translator over the rendered gateway objects (issue 26): `egctl x translate` of
github.com/envoyproxy/gateway v1.9.0 (built by mk/egctl.mk into .cache/bin/egctl from the published module),
from Gateway API resources to Envoy Gateway's resource statuses and the xDS it would send Envoy.

Per rendered gateway (the sovereign front door, the burst cluster's TLS listener, an edge site's escalation
front door, the AI grid's Envoy Gateway objects) the objects are fed to egctl as the renderer wrote them, with
the Secrets they name made up here (a self-signed certificate, a credential): egctl validates each against
Envoy Gateway's CRD schemas, runs its translator and reports every object's status. The tests read what
Envoy would be told: the spill-over retry goes to the next priority (previous_priorities) on 429, the Host
follows the chosen backend (auto_host_rewrite), the burst Backend is priority 1 of the rule's cluster with
TLS to its name, the passive health check ejects, the buffer holds what is retried; the burst listener
serves its name with the certificate; the edge injects its key and runs its Lua; the grid's listener serves
its name.

What egctl does not do: run Envoy. No request crosses a proxy here (no Envoy binary can be fetched).
"""

from __future__ import annotations

import base64
import datetime
import json
import subprocess
from pathlib import Path

import pytest
import yaml
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.plugin_utils import render

from tests.serving_helpers import INVENTORIES

ROOT = INVENTORIES.parent
EGCTL = ROOT / ".cache" / "bin" / "egctl"
# the kinds Envoy Gateway's file loader reads (internal/gatewayapi/resource/load.go); others are not its input
EG_KINDS = {
    "GatewayClass", "Gateway", "HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute", "UDPRoute", "Namespace", "Service",
    "ClientTrafficPolicy", "BackendTrafficPolicy", "SecurityPolicy", "EnvoyExtensionPolicy", "HTTPRouteFilter",
    "Backend", "Secret", "ConfigMap", "BackendTLSPolicy", "ReferenceGrant", "EnvoyProxy",
}  # fmt: skip


def _egctl(objs: list[dict], tmp_path: Path, to: str = "gateway-api,xds") -> dict:
    if not EGCTL.exists():
        raise AssertionError(f"{EGCTL} is missing: run `make egctl` (builds Envoy Gateway's egctl from its Go module)")
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    res = subprocess.run(
        [
            str(EGCTL),
            "x",
            "translate",
            "--from",
            "gateway-api",
            "--to",
            to,
            "-o",
            "json",
            "-f",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _walk(node):
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def _conditions(obj: dict) -> dict[str, str]:
    """{type: status} of every condition in an object's status (routes' parents, policies' ancestors)."""
    out = {}
    for node in _walk(obj.get("status") or {}):
        for c in node.get("conditions") or []:
            if c["status"] != "True" or c["type"] not in out:
                out[c["type"]] = c["status"]
    return out


def _accepted(out: dict, field: str, name: str) -> dict:
    (obj,) = [o for o in out.get(field) or [] if o["metadata"]["name"] == name]
    cond = _conditions(obj)
    assert cond.get("Accepted") == "True", (field, name, obj.get("status"))
    assert cond.get("ResolvedRefs", "True") == "True", (field, name, obj.get("status"))
    return obj


def _tls_secret(name: str, namespace: str, hostname: str) -> dict:
    """A self-signed certificate for hostname (the real one is the operator's Secret)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(hostname)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    pem_cert = cert.public_bytes(serialization.Encoding.PEM)
    pem_key = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"tls.crt": base64.b64encode(pem_cert).decode(), "tls.key": base64.b64encode(pem_key).decode()},
    }


def _opaque(name: str, namespace: str, data: dict[str, str]) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def _certificates(objs: list[dict]) -> list[dict]:
    """What the front doors' listeners serve but an operator writes: a made-up certificate for every certificateRef
    of a rendered Gateway (OpenShift's service CA writes the front door's beside the proxy's Service, in Envoy
    Gateway's namespace: intent/front_door_tls.py), with that namespace."""
    out = []
    for o in objs:
        if o["kind"] != "Gateway":
            continue
        for ls in o["spec"]["listeners"]:
            for ref in (ls.get("tls") or {}).get("certificateRefs") or []:
                ns = ref.get("namespace") or o["metadata"]["namespace"]
                if ns != o["metadata"]["namespace"]:
                    out.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
                out.append(_tls_secret(ref["name"], ns, ls.get("hostname") or "front.example"))
    return out


def _rendered(site: str, host: str, components: list[str]) -> tuple[dict, list[dict]]:
    intent = cli.site_intents(str(INVENTORIES / site), None)[host]
    objs = render.render_components(components, intent)
    return intent, [o for o in objs if o["kind"] in EG_KINDS]


def _routes(out: dict) -> list[dict]:
    return [n for n in _walk(out["xds"]) if "match" in n and "route" in n]


def _clusters(out: dict) -> list[dict]:
    return [n for n in _walk(out["xds"]) if n.get("@type", "").endswith("envoy.config.cluster.v3.Cluster")]


def _listeners(out: dict) -> list[dict]:
    return [n for n in _walk(out["xds"]) if n.get("@type", "").endswith("envoy.config.listener.v3.Listener")]


# ------------------------------------------------------------------ the sovereign front door
@pytest.fixture(scope="module")
def sovereign(tmp_path_factory):
    intent, objs = _rendered("example-sovereign-burst", "onprem-fra-1", ["burst_routing"])
    ns = intent["burst"]["namespace"]
    ns_obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    out = _egctl([ns_obj, *_certificates(objs), *objs], tmp_path_factory.mktemp("sov"))
    return intent, out


def test_envoy_gateway_accepts_every_object_of_the_front_door(sovereign):
    intent, out = sovereign
    f = intent["burst"]["front_door"]
    _accepted(out, "httpRoutes", f["route"]["name"])
    for b in f["backends"]:
        _accepted(out, "backends", b["name"])
    _accepted(out, "backendTrafficPolicies", f["spill"]["name"])
    _accepted(out, "clientTrafficPolicies", f["client"]["name"])


def test_the_burstable_rule_retries_a_429_on_the_next_priority_with_the_backends_host(sovereign):
    intent, out = sovereign
    retried = [r for r in _routes(out) if (r["route"].get("retryPolicy") or {}).get("retryPriority")]
    assert retried, "a route with a retry priority"
    for r in retried:
        policy = r["route"]["retryPolicy"]
        assert policy["retryPriority"]["name"] == "envoy.retry_priorities.previous_priorities"
        assert 429 in policy["retriableStatusCodes"] and "retriable-status-codes" in policy["retryOn"]
        assert r["route"].get("autoHostRewrite") is True
        assert any(h.get("name") == "x-inference-class" for h in r["match"].get("headers") or [])
    # the regulated and catch-all rules do not retry anywhere
    plain = [r for r in _routes(out) if not (r["route"].get("retryPolicy") or {}).get("retryPriority")]
    assert plain and not any(r["route"].get("autoHostRewrite") for r in plain)


def test_the_burst_backend_is_priority_one_with_tls_to_its_name_and_the_on_prem_one_is_ejected(sovereign):
    intent, out = sovereign
    burst = next(b for b in intent["burst"]["front_door"]["backends"] if b["fallback"])
    onprem = intent["burst"]["front_door"]["onprem"]
    two = []
    for c in _clusters(out):
        prios = {}
        for loc in (c.get("loadAssignment") or {}).get("endpoints") or []:
            for ep in loc.get("lbEndpoints") or []:
                addr = ep["endpoint"]["address"]["socketAddress"]["address"]
                prios[addr] = (loc.get("priority", 0), ep["endpoint"].get("hostname"))
        if burst["hostname"] in prios:
            two.append((c, prios))
    assert two, "a cluster holds the burst Backend"
    for c, prios in two:
        assert prios[burst["hostname"]] == (1, burst["hostname"])
        assert prios[onprem["hostname"]] == (0, onprem["hostname"])
        sni = [n.get("sni") for n in _walk(c.get("transportSocketMatches") or []) if "sni" in n]
        assert burst["hostname"] in sni
        assert c["outlierDetection"]["consecutive5xx"] == 3


def test_the_front_door_buffers_what_it_may_retry_and_drops_client_scheduler_headers(sovereign):
    _, out = sovereign
    (listener,) = [ls for ls in _listeners(out) if ls.get("perConnectionBufferLimitBytes")]
    assert listener["perConnectionBufferLimitBytes"] == 1024 * 1024
    dumped = json.dumps(listener)
    assert "x-llm-d-inference-objective" in dumped


# ------------------------------------------------------------------ the burst cluster's listener
def test_the_burst_cluster_serves_its_name_over_tls_with_the_certificate(tmp_path):
    intent, objs = _rendered("example-sovereign-burst", "burst-aws-1", ["burst_routing"])
    i = intent["burst"]["ingress"]
    ns = intent["burst"]["namespace"]
    secret = _tls_secret(i["gateway"]["certificate"], ns, i["gateway"]["hostname"])
    out = _egctl([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, secret, *objs], tmp_path)
    gw = _accepted(out, "gateways", i["gateway"]["name"])
    assert all(
        c["status"] == "True" for ls in gw["status"]["listeners"] for c in ls["conditions"] if c["type"] == "Programmed"
    )
    _accepted(out, "httpRoutes", i["route"]["name"])
    names = [n["serverNames"] for ls in _listeners(out) for n in _walk(ls) if "serverNames" in n]
    assert names == [[i["gateway"]["hostname"]]], names
    certs = [n for ls in _listeners(out) for n in _walk(ls) if "tlsCertificateSdsSecretConfigs" in n]
    assert certs, "the HTTPS filter chain serves a certificate"
    domains = [n["domains"] for n in _walk(out["xds"]) if "domains" in n]
    assert any(i["gateway"]["hostname"] in d for d in domains)


# ------------------------------------------------------------------ the edge escalation
def test_the_edge_injects_its_key_rewrites_the_host_and_runs_its_lua(tmp_path):
    intent, objs = _rendered("example-edge-fleet", "store-berlin-001", ["model_service"])
    e = intent["serving"]["escalation"]
    ns = intent["serving"]["namespace"]
    cred = _opaque(e["credential"]["secret"], ns, {"credential": "key-of-edge-fleet"})
    out = _egctl([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, cred, *objs], tmp_path)
    for r in e["routes"]:
        _accepted(out, "httpRoutes", r["name"])
    _accepted(out, "envoyExtensionPolicies", e["body"]["policy"])
    dumped = json.dumps(out["xds"])
    assert "envoy.filters.http.credential_injector" in dumped and '"x-api-key"' in dumped
    assert "envoy.filters.http.lua" in dumped
    rewrites = {r["route"].get("hostRewriteLiteral") for r in _routes(out) if "route" in r}
    assert e["host"] in rewrites


# ------------------------------------------------------------------ the AI grid's listener and filters
def test_the_grid_serves_its_ingress_name_and_accepts_its_policies(tmp_path):
    intent, objs = _rendered("example-ai-grid", "grid-central-1", ["ai_gateway"])
    g = intent["gateway"]
    ns = g["namespace"]
    extra = _certificates(objs)  # the ingress listener's certificate and the front door's (the service CA's)
    extra += [_opaque(t["secret"], ns, {t["name"]: f"key-of-{t['name']}"}) for t in g["tenants"]]
    # the token budgets target the HTTPRoutes Envoy AI Gateway generates from the AIGatewayRoutes: not here
    objs = [o for o in objs if o["kind"] != "BackendTrafficPolicy"]
    out = _egctl([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, *extra, *objs], tmp_path)
    gw = _accepted(out, "gateways", g["name"])
    https = next(ls for ls in gw["status"]["listeners"] if ls["name"] == g["ingress"]["listener"])
    assert {c["type"]: c["status"] for c in https["conditions"]}.get("Programmed") == "True", https
    for field in ("clientTrafficPolicies", "securityPolicies", "envoyExtensionPolicies"):
        for o in out.get(field) or []:
            _accepted(out, field, o["metadata"]["name"])
