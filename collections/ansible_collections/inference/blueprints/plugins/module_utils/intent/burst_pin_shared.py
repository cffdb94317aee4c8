# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The regulated pin on the cluster's shared inference gateway (issue 35 item 2): the routes of other namespaces.

The sovereign front door sends regulated requests to the on-prem Backend, OpenShift AI's shared Gateway
(``model_service_gateway``, ``openshift-ai-inference`` in ``openshift-ingress``), with the Host rewritten to that
gateway's Service name. Its listeners admit routes from every namespace (KServe makes one per model in the
model's namespace), so a route of another namespace attached there could take a regulated request before
KServe's route of the sovereign namespace does, and send it anywhere. Which route takes a request is Gateway API
precedence (sigs.k8s.io/gateway-api v1.6.1 apis/v1 httproute_types.go, HTTPRouteRule): a route whose
``hostnames`` name the request's Host first (Envoy Gateway gives it its own virtual host), then the exact path,
then the longest prefix, then the method, then the most header matches. KServe's routes of the sovereign
namespace (kserve config-llm-router-route.yaml) match ``/<ns>/<model>/``, ``/publishers/<ns>/models/<served>/``
and ``/v1/`` with the ``x-gateway-model-name: publishers/<ns>/...`` header, and name no hostnames.

So a route of another namespace on the shared Gateway is refused when it could win any of those requests:

* ``hostnames`` naming the Host the front door sends (or a wildcard covering it);
* a path under ``/<ns>/`` or ``/publishers/<ns>/`` (a prefix there is at least as long as KServe's);
* a path under ``/v1`` that does not itself require a model header of another namespace's model (a longer prefix
  wins without the header, an equal one with more headers);
* the root prefix ``/`` with a method, a header or a query parameter, unless it requires another model's header:
  it ties with KServe's header-only catch-all rule on the path and wins on the rest;
* a model header naming the sovereign namespace's models, or any regular expression (on a path, on the model
  header, on a gRPC method: what it matches cannot be read at admission);
* a GRPCRoute method of service ``<ns>``, ``publishers`` or ``v1`` (Envoy Gateway matches gRPC by path,
  ``/<service>/``).

The sovereign namespace's own routes are the other policy's (intent/burst_pin.py).
"""

from __future__ import annotations


def _attached(name: str, namespace: str) -> str:
    """The route names the shared Gateway as a parent (a parentRef without a namespace is the route's own)."""
    return (
        "has(object.spec.parentRefs) && object.spec.parentRefs.exists(p, p.name == '" + name + "' && "
        "(!has(p.kind) || p.kind == 'Gateway') && ((has(p.namespace) && p.namespace == '" + namespace + "') || "
        "(!has(p.namespace) && object.metadata.namespace == '" + namespace + "')))"
    )


def _under(v: str, prefix: str) -> str:
    """The path ``v`` is ``prefix`` or below it (Gateway API prefixes match whole path elements)."""
    return f"({v} == '{prefix}' || {v}.startsWith('{prefix}/'))"


def _http_match(ns: str, model_header: str) -> str:
    """One HTTPRoute match (``m``) of another namespace that cannot win a regulated request."""
    mine = f"'publishers/{ns}/'"
    model_headers = (
        f"(!has(m.headers) || m.headers.all(h, h.name.lowerAscii() != '{model_header}' || "
        f"((!has(h.type) || h.type == 'Exact') && !h.value.startsWith({mine}))))"
    )
    names_other_model = (
        f"(has(m.headers) && m.headers.exists(h, h.name.lowerAscii() == '{model_header}' && "
        f"(!has(h.type) || h.type == 'Exact') && !h.value.startsWith({mine})))"
    )
    path = (
        "(!has(m.path) || ((!has(m.path.type) || m.path.type != 'RegularExpression') && "
        f"!{_under('m.path.value', '/' + ns)} && !{_under('m.path.value', '/publishers/' + ns)} && "
        f"(!{_under('m.path.value', '/v1')} || {names_other_model})))"
    )
    # the root prefix ties with KServe's header-only catch-all rule (/, the model header): a method, a header or
    # a query parameter more wins the tie, so only the bare default match or another model's header is safe
    root = "(!has(m.path) || ((!has(m.path.type) || m.path.type == 'PathPrefix') && m.path.value == '/'))"
    bare = (
        "(!has(m.method) && (!has(m.headers) || size(m.headers) == 0) && "
        "(!has(m.queryParams) || size(m.queryParams) == 0))"
    )
    return f"({path} && {model_headers} && (!{root} || {bare} || {names_other_model}))"


def policy(pin: dict, shared: dict, host: str, model_header: str) -> dict:
    """The ValidatingAdmissionPolicy over the routes of every namespace but the sovereign one. ``pin``: name and
    namespace of the site's pin; ``shared``: the shared Gateway (name, namespace); ``host``: the Host the front
    door sends there; ``model_header``: the header KServe's /v1 route names the model by."""
    ns = pin["namespace"]
    attached = _attached(shared["name"], shared["namespace"])
    where = f"the shared inference gateway {shared['namespace']}/{shared['name']}"
    hostnames = (
        f"!has(object.spec.hostnames) || object.spec.hostnames.all(h, h != '{host}' && "
        f"!(h.startsWith('*.') && '{host}'.endsWith(h.substring(1))))"
    )
    http = (
        "request.resource.resource != 'httproutes' || !has(object.spec.rules) || "
        f"object.spec.rules.all(r, !has(r.matches) || r.matches.all(m, {_http_match(ns, model_header)}))"
    )
    grpc = (
        "request.resource.resource != 'grpcroutes' || !has(object.spec.rules) || object.spec.rules.all(r, "
        "!has(r.matches) || r.matches.all(m, !has(m.method) || ((!has(m.method.type) || m.method.type == 'Exact') "
        f"&& (!has(m.method.service) || !(m.method.service in ['{ns}', 'publishers', 'v1'])))))"
    )
    validations = [
        (
            hostnames,
            f"names the Host the sovereign front door sends to {where} ({host}), or a wildcard covering it: it "
            f"would take every regulated request of {ns}",
        ),
        (
            http,
            f"has a match that could win a regulated request of {ns} over KServe's route there: a path under "
            f"/{ns}/ or /publishers/{ns}/, a path under /v1 (or the root path with a method, a header or a query "
            f"parameter) without an exact {model_header} header of another namespace's model, that header naming "
            f"publishers/{ns}/..., or a regular expression",
        ),
        (
            grpc,
            f"has a gRPC method of service {ns}, publishers or v1 (matched as the path /<service>/), or a regular "
            "expression",
        ),
    ]
    return {
        "name": f"{pin['name']}-shared-gateway"[:63],
        "namespace": ns,
        "resources": [{"group": "gateway.networking.k8s.io", "resources": ["httproutes", "grpcroutes"]}],
        "validations": [
            {
                "expression": f"!({attached}) || ({expr})",
                "message": f"regulated pin: a route of another namespace on {where} {why}",
                "reason": "Forbidden",
            }
            for expr, why in validations
        ],
    }
