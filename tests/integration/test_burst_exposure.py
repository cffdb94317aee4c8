"""The burst cluster's hostname reaches its front door on OpenShift (issue 32 item 4).

The hostname sits under ``*.apps.<cluster>``, which resolves to the OpenShift router; the render makes the router
pass it through to Envoy Gateway's proxy: Route (TLS passthrough, that host) -> the proxy's Service (a fixed name,
through the Gateway's EnvoyProxy) -> the Gateway's HTTPS listener for that host. The chain is walked on what the
local control plane's API server holds: the rendered Route, EnvoyProxy and Gateway, validated against their
upstream CRDs (github.com/openshift/api route/v1, Envoy Gateway v1.9.0, Gateway API v1.6.1), and the Service as
Envoy Gateway would create it, taken from its own translator's infrastructure IR (`egctl x translate --to ir`:
the Service name from the EnvoyProxy, the port names and numbers of the listener).

What this does not run: the OpenShift router and Envoy Gateway's controller (neither runs on the local plane).
"""

from __future__ import annotations

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.plugin_utils import render

from tests.integration.test_egctl_translate import EG_KINDS, _accepted, _egctl, _listeners, _tls_secret, _walk
from tests.serving_helpers import INVENTORIES, kubectl_apply

pytestmark = [pytest.mark.cluster]


def _namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _service_as_envoy_gateway_makes_it(infra: dict, namespace: str) -> dict:
    """The proxy Service of one Gateway from the translator's infrastructure IR: what Envoy Gateway's Kubernetes
    provider creates (internal/infrastructure/kubernetes/proxy/resource_provider.go Service) in its namespace."""
    spec = infra["config"]["spec"]["provider"]["kubernetes"]["envoyService"]
    ports = [p for listener in infra["listeners"] for p in listener["ports"]]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": spec["name"], "namespace": namespace, "labels": infra["metadata"]["labels"]},
        "spec": {
            "type": spec["type"],
            "selector": infra["metadata"]["labels"],
            "ports": [
                {"name": p["name"], "port": p["servicePort"], "targetPort": p["containerPort"], "protocol": "TCP"}
                for p in ports
            ],
        },
    }


def test_the_burst_hostname_reaches_the_gateway_listener_through_an_openshift_route(cluster, tmp_path):
    intent = cli.site_intents(str(INVENTORIES / "example-sovereign-burst"), None)["burst-aws-1"]
    objs = render.render_components(["burst_routing"], intent)
    ns, ingress = intent["burst"]["namespace"], intent["burst"]["ingress"]
    host = ingress["gateway"]["hostname"]
    routes = [o for o in objs if o["kind"] == "Route"]
    assert [r["spec"]["host"] for r in routes] == [host], "one OpenShift Route, for the burst listener's hostname"
    (route,) = routes
    (gateway,) = [o for o in objs if o["kind"] == "Gateway"]

    # Envoy Gateway's translator: the Gateway and its EnvoyProxy accepted, and the proxy it would run for them
    secret = _tls_secret(ingress["gateway"]["certificate"], ns, host)
    eg_objs = [o for o in objs if o["kind"] in EG_KINDS]
    out = _egctl([_namespace(ns), secret, *eg_objs], tmp_path, to="gateway-api,xds,ir")
    _accepted(out, "gateways", gateway["metadata"]["name"])
    infra = out["infraIR"][f"{ns}/{gateway['metadata']['name']}"]["proxy"]
    eg_namespace = route["metadata"]["namespace"]  # Envoy Gateway's controller namespace, where its Services are
    service = _service_as_envoy_gateway_makes_it(infra, eg_namespace)

    # onto the API server: the rendered objects of the chain (each validated against its upstream CRD) and the
    # Service Envoy Gateway would create
    chain = [o for o in objs if o["kind"] in ("GatewayClass", "EnvoyProxy", "Gateway", "Route")]
    run = kubectl_apply(cluster, [_namespace(ns), _namespace(eg_namespace), service, *chain], "test-burst-exposure")
    assert run.returncode == 0, run.stderr

    # the chain as the router follows it, on what the API server holds
    dyn = cluster.dynamic
    live = dyn.resources.get(api_version="route.openshift.io/v1", kind="Route").get(
        name=route["metadata"]["name"], namespace=eg_namespace
    )
    assert live.spec.host == host
    # passthrough: the router forwards by SNI, the Gateway's listener terminates TLS with the site's certificate
    assert live.spec.tls.termination == "passthrough"
    assert live.spec.to.kind == "Service"
    svc = dyn.resources.get(api_version="v1", kind="Service").get(name=live.spec.to.name, namespace=eg_namespace)
    ports = [p for p in svc.spec.ports if p.name == live.spec.port.targetPort]
    assert len(ports) == 1, (live.spec.port.targetPort, [p.name for p in svc.spec.ports])
    (listener,) = [ls for ls in gateway["spec"]["listeners"] if ls.get("hostname") == host]
    assert ports[0].port == listener["port"]
    assert listener["protocol"] == "HTTPS" and listener["tls"]["mode"] == "Terminate"
    # and the proxy behind that port serves the Route's host with a certificate (the xDS Envoy would get)
    names = [n["serverNames"] for ls in _listeners(out) for n in _walk(ls) if "serverNames" in n]
    assert names == [[host]], names
