# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Edge escalation (blueprint edge_sno, seed 002 section 7.6): a request with ``x-llm-escalate: true`` leaves
the edge site for the regional AI grid, in a form the grid accepts.

The grid (intent/grid.py, an Envoy AI Gateway front door) refuses a request without a tenant's API key (401,
its SecurityPolicy ``apiKeyAuth``) and routes by the body's ``model`` (Envoy AI Gateway fills
``x-ai-eg-model`` from it): the edge must send the regional class's served name in the body and its own
tenant key in the grid's API-key header. Gateway API alone can do neither (a RequestHeaderModifier takes a
literal value, nothing rewrites a body), so the edge site's escalation runs on Envoy Gateway:

* an ``HTTPRouteFilter`` ``credentialInjection`` puts the key from a Secret (key ``credential``) in the
  grid's API-key header, overwriting one the client sent (github.com/envoyproxy/gateway v1.9.0
  api/v1alpha1 httproutefilter_types.go, ``InjectedCredentialKey``);
* an ``EnvoyExtensionPolicy`` Lua filter on the escalation routes rewrites the body's ``model`` to the
  regional class and sets ``content-length`` to the new body's size;
* the route's ``URLRewrite`` sets the grid's hostname as Host and the path the grid serves; the Backend
  originates TLS to the grid (SNI = its hostname, system CAs).

Requests without the header go to the site's own inference gateway (where KServe's route is), so the site's
clients use one address. ``build`` decides every name and value; the model_service template shapes them.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from . import limits
from .schema import SchemaError

# KServe's route preset (config-llm-router-route.yaml) serves these OpenAI-compatible endpoints
# under /<namespace>/<service>/v1/<endpoint>.
OPENAI_ENDPOINTS = ("completions", "chat/completions", "responses", "messages")
HEADER = "x-llm-escalate"
FROM_HEADER = "x-llm-escalated-from"
BACKEND_GROUP = "gateway.envoyproxy.io"


def _name(site: dict, suffix: str) -> str:
    return f"{site['site_name']}-{suffix}"[:63].rstrip("-")


def build(site: dict, models: list[dict], plans: list[dict]) -> dict | None:
    """intent["serving"]["escalation"]: the edge's escalation path, or None when it is off.
    Raises SchemaError (before anything is applied) when it has no credential."""
    esc = site.get("escalation") or {}
    if not esc.get("enabled"):
        return None
    cred = esc.get("credential") or {}
    if not cred.get("secret"):
        raise SchemaError(
            [
                (
                    "escalation.credential",
                    "required when escalation.enabled is true: {secret: <name>}, a Secret in the serving namespace "
                    "whose key 'credential' holds this site's API key of the regional grid (the grid refuses a "
                    "request without one: 401); create it with oc create secret generic <name> "
                    "--from-literal=credential=<key>",
                )
            ],
            f"host {site['host']}",
        )
    if not esc.get("model"):
        raise SchemaError(
            [("escalation.model", "required when escalation.enabled is true: the regional class's served name")],
            f"host {site['host']}",
        )
    url = urlsplit(esc["endpoint"])
    base = (url.path or "/v1").rstrip("/") or "/v1"
    ns = site["serving_namespace"]
    gw = site["options"]["model_service"]["model_service_escalation_gateway"]
    local_gw = site["options"]["model_service"]["model_service_gateway"]
    routes = []
    for m in models:
        rules = [{"path": f"/{ns}/{m['name']}/v1/{ep}", "rewrite": f"{base}/{ep}"} for ep in OPENAI_ENDPOINTS]
        # the regional class answers it: ESCALATION_FACTOR times this class's p95 answer (intent/limits.py)
        timeout = limits.timeout(plans, [m["name"]], factor=limits.ESCALATION_FACTOR)
        routes.append({"model": m["name"], "name": m["names"]["escalation"], "rules": rules, "timeout": timeout})
    names = [m["name"] for m in models]
    return {
        "host": url.hostname,
        "port": url.port or 443,
        "model": esc["model"],
        "header": HEADER,
        "from_header": FROM_HEADER,
        "gateway": {
            "name": gw["name"],
            "class": gw["class"],
            "create_class": gw["create_class"],
            "controller_name": gw["controller_name"],
            "port": gw["port"],
        },
        "local": {
            "name": _name(site, "local"),
            # OpenShift's Gateway API implementation names a Gateway's Service <gateway>-<gatewayclass>
            "hostname": f"{local_gw['name']}-{gw['local_gateway_class']}.{local_gw['namespace']}.svc",
            "port": gw["local_gateway_port"],
            "route": _name(site, "local"),
            "paths": [f"/{ns}/{m['name']}/" for m in models],
            "timeout": limits.timeout(plans, names),
        },
        # the escalation Lua reads the whole body (handle:body()): the listener holds the p95 prompt
        "client": {"name": _name(site, "edge-limits"), "buffer": limits.buffer(plans, names)},
        "regional": {"name": _name(site, "regional"), "sni": url.hostname},
        "credential": {
            "filter": _name(site, "escalation-credential"),
            "secret": cred["secret"],
            "header": cred.get("header") or "x-api-key",
        },
        "body": {"policy": _name(site, "escalation-model"), "model": esc["model"]},
        "routes": routes,
    }
