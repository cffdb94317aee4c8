"""TLS on the front doors that carry API keys and regulated bodies (issue 35 item 4; intent/front_door_tls.py),
through Envoy Gateway v1.9.0's own translator (`egctl x translate`, as tests/integration/test_egctl_translate.py).

For the AI grid's Gateway and the sovereign front door, as each example renders them (the default source,
OpenShift's service CA): the front-door listener is HTTPS and Programmed with the certificate the service CA
writes beside the proxy's Service (made up here: a self-signed one of that name, in Envoy Gateway's namespace),
because the rendered ReferenceGrant permits it; without that grant Envoy Gateway refuses the reference; no
Envoy filter chain of the Gateway serves plaintext. A site that chooses cert-manager gets a Certificate whose
Secret the listener serves; one that asks for plaintext gets an HTTP listener and a warning in the plan summary;
a source without what it needs is a clear error before anything is rendered.
"""

from __future__ import annotations

import shutil

import pytest
import yaml
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils.intent import front_door_tls, summary
from ansible_collections.inference.blueprints.plugins.plugin_utils import render

from tests.integration.test_egctl_translate import EG_KINDS, _certificates, _egctl, _listeners, _opaque, _walk
from tests.serving_helpers import INVENTORIES

# (inventory, host, component, what the intent's gateway is under)
FRONT_DOORS = {
    "ai-grid": ("example-ai-grid", "grid-central-1", "ai_gateway"),
    "sovereign": ("example-sovereign-burst", "onprem-fra-1", "burst_routing"),
}


def _gateway(intent: dict) -> dict:
    return intent.get("gateway") or intent["burst"]["front_door"]["gateway"]


def _intent(tmp_path, which: str, tls: dict | None = None) -> tuple[dict, list[dict]]:
    inventory, host, component = FRONT_DOORS[which]
    inv = INVENTORIES / inventory
    if tls is not None:
        inv = tmp_path / "inventory"
        shutil.copytree(INVENTORIES / inventory, inv)
        site_file = inv / "group_vars" / "all" / "site.yml"
        data = yaml.safe_load(site_file.read_text())
        data["front_door_tls"] = tls
        site_file.write_text(yaml.safe_dump(data))
    intent = cli.site_intents(str(inv), None)[host]
    return intent, render.render_components([component], intent)


def _inputs(intent: dict, objs: list[dict], grant: bool = True) -> list[dict]:
    """What egctl reads: the rendered Envoy Gateway objects, their namespaces and the Secrets they name (the
    operator's or the user's; made up here), with or without the rendered ReferenceGrant."""
    gw = _gateway(intent)
    ns = next(o["metadata"]["namespace"] for o in objs if o["kind"] == "Gateway")
    out = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, *_certificates(objs)]
    for t in gw.get("tenants") or []:
        out.append(_opaque(t["secret"], ns, {t["name"]: f"key-of-{t['name']}"}))
    keep = [o for o in objs if o["kind"] in EG_KINDS and o["kind"] != "BackendTrafficPolicy"]
    if not grant:
        keep = [o for o in keep if o["kind"] != "ReferenceGrant"]
    return out + keep


def _listener_status(out: dict, gateway: str, listener: str) -> dict[str, str]:
    (gw,) = [o for o in out["gateways"] if o["metadata"]["name"] == gateway]
    (ls,) = [s for s in gw["status"]["listeners"] if s["name"] == listener]
    return {c["type"]: c["status"] for c in ls["conditions"]}


@pytest.mark.parametrize("which", sorted(FRONT_DOORS))
def test_the_front_door_serves_tls_with_the_service_cas_certificate(which, tmp_path):
    intent, objs = _intent(tmp_path, which)
    tls = _gateway(intent)["tls"]
    assert tls["source"] == "service-ca" and tls["listener"]["protocol"] == "HTTPS" and tls["listener"]["port"] == 443
    proxy = next(o for o in objs if o["kind"] == "EnvoyProxy" and o["metadata"]["name"] == tls["envoy_proxy"]["name"])
    service = proxy["spec"]["provider"]["kubernetes"]["envoyService"]
    secret = tls["reference_grant"]["secret"]
    assert service["annotations"] == {front_door_tls.SERVING_CERT_ANNOTATION: secret}
    gateway = next(o for o in objs if o["kind"] == "Gateway" and o["metadata"]["name"] == _gateway(intent)["name"])
    assert gateway["spec"]["infrastructure"]["parametersRef"]["name"] == proxy["metadata"]["name"]

    out = _egctl(_inputs(intent, objs), tmp_path)
    status = _listener_status(out, gateway["metadata"]["name"], front_door_tls.LISTENER)
    assert status.get("Programmed") == "True" and status.get("ResolvedRefs") == "True", status
    # every filter chain Envoy would run for the Gateway terminates TLS: none reads a plaintext request
    listeners = [ls for ls in _listeners(out) if "/" in ls["name"]]
    assert listeners
    for ls in listeners:
        for chain in ls.get("filterChains") or []:
            sock = (chain.get("transportSocket") or {}).get("typedConfig") or {}
            assert sock.get("@type", "").endswith("DownstreamTlsContext"), (ls["name"], chain.get("name"))
        assert not ls.get("defaultFilterChain"), ls["name"]
    certs = [n for ls in listeners for n in _walk(ls) if "tlsCertificateSdsSecretConfigs" in n]
    assert any(secret in str(c) for c in certs), certs


@pytest.mark.parametrize("which", sorted(FRONT_DOORS))
def test_without_the_reference_grant_envoy_gateway_refuses_the_certificate(which, tmp_path):
    intent, objs = _intent(tmp_path, which)
    out = _egctl(_inputs(intent, objs, grant=False), tmp_path)
    status = _listener_status(out, _gateway(intent)["name"], front_door_tls.LISTENER)
    assert status.get("ResolvedRefs") == "False", status


def test_cert_manager_issues_the_certificate_the_listener_serves(tmp_path):
    tls_in = {"source": "cert-manager", "issuer": {"name": "acme"}, "hostnames": ["grid.internal.example.com"]}
    intent, objs = _intent(tmp_path, "ai-grid", tls_in)
    (cert,) = [o for o in objs if o["kind"] == "Certificate"]
    assert cert["apiVersion"] == "cert-manager.io/v1"
    assert cert["spec"]["dnsNames"] == ["grid.internal.example.com"]
    assert cert["spec"]["issuerRef"] == {"group": "cert-manager.io", "kind": "ClusterIssuer", "name": "acme"}
    assert not [o for o in objs if o["kind"] in ("ReferenceGrant", "EnvoyProxy")]
    out = _egctl(_inputs(intent, objs), tmp_path)
    status = _listener_status(out, intent["gateway"]["name"], front_door_tls.LISTENER)
    assert status.get("Programmed") == "True", status
    gateway = next(o for o in objs if o["kind"] == "Gateway")
    (ls,) = [x for x in gateway["spec"]["listeners"] if x["name"] == front_door_tls.LISTENER]
    assert ls["tls"]["certificateRefs"][0]["name"] == cert["spec"]["secretName"]


def test_plaintext_only_when_asked_and_the_summary_warns(tmp_path):
    intent, objs = _intent(tmp_path, "sovereign", {"source": "plaintext"})
    gateway = next(o for o in objs if o["kind"] == "Gateway")
    (ls,) = gateway["spec"]["listeners"]
    assert ls["protocol"] == "HTTP" and ls["port"] == 80 and "tls" not in ls
    warned = [line for line in summary.lines(intent) if "WARNING" in line and "plaintext" in line]
    assert warned and "regulated request bodies" in warned[0], summary.lines(intent)
    default, _ = _intent(tmp_path / "d", "sovereign")
    assert not [line for line in summary.lines(default) if "plaintext" in line]


@pytest.mark.parametrize(
    ("tls", "expect"),
    [
        ({"source": "cert-manager", "hostnames": ["a.example.com"]}, "issuer.name"),
        ({"source": "secret"}, "source secret needs secret"),
        ({"source": "service-ca", "secret": "mine"}, "not read with source service-ca"),
        ({"source": "letsencrypt"}, "front_door_tls.source"),
    ],
)
def test_a_source_without_what_it_needs_is_a_clear_error(tmp_path, tls, expect):
    with pytest.raises(cli.CliError) as err:
        _intent(tmp_path, "ai-grid", tls)
    assert expect in str(err.value) and "front_door_tls" in str(err.value), str(err.value)
