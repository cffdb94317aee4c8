# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The regulated pin of a sovereign-burst site: no request that is not of a burstable class can be sent
off-prem, by any way a Gateway API route or an Envoy Gateway Backend can send traffic.

Two halves, one rule:

* ``pin_violations(rules, ...)``: the render-time check of the front door's HTTPRoute rules, before
  anything is rendered;
* ``admission_policy(...)``: the same rule as a ValidatingAdmissionPolicy (CEL), which the API server of
  the sovereign cluster enforces on every later change.

Every way traffic leaves a route (sources: sigs.k8s.io/gateway-api v1.6.1 apis/v1 httproute_types.go,
grpcroute_types.go, tcproute/tlsroute/udproute_types.go; github.com/envoyproxy/gateway v1.9.0 api/v1alpha1
backend_types.go):

* ``rules[].backendRefs`` (HTTPRoute, GRPCRoute, TCPRoute, TLSRoute, UDPRoute);
* a ``RequestMirror`` filter at rule level (``rules[].filters[].requestMirror.backendRef``) and at
  backendRef level (``rules[].backendRefs[].filters[]``) of an HTTPRoute or a GRPCRoute: a copy of the
  request goes there whatever the rule's backends are;
* a Backend whose address is changed, or a new Backend (a ``DynamicResolver`` sends to whatever the Host
  header names);
* a Service of type ExternalName in the serving namespace (any route could reach it by name).

A target is on-prem when it is the on-prem Backend of the serving namespace, or (outside the front door) an
in-cluster kind: an InferencePool or a Service of the serving namespace (where ExternalName Services are
refused). A rule that can reach
anything else must match only requests whose class header names a burstable class (header names are
case-insensitive, ``Exact`` is the default match type: the API server defaults objects before admission);
a TCPRoute, TLSRoute or UDPRoute cannot match a header, so it may reach nothing but on-prem. The scope is
the serving namespace; traffic that leaves by other means (a selector-less Service with hand-written
EndpointSlices, an EnvoyPatchPolicy, a pod's own egress) is the cluster's egress policy's to stop
(docs/sovereign-burst.md, "What the pin does not cover").
"""

from __future__ import annotations

from . import burst_pin_exits

BACKEND_GROUP, BACKEND_KIND = "gateway.envoyproxy.io", "Backend"
HEADER_ROUTES = ("httproutes", "grpcroutes")  # rules with header matches and RequestMirror filters
PLAIN_ROUTES = ("tcproutes", "tlsroutes", "udproutes")  # rules with backendRefs only


# ------------------------------------------------------------------------------------------ render time
def _targets(rule: dict) -> list[dict]:
    """Every reference a rule sends traffic (or a copy of it) to."""
    out = list(rule.get("backendRefs") or [])
    out += [f["requestMirror"]["backendRef"] for f in rule.get("filters") or [] if f.get("type") == "RequestMirror"]
    for b in rule.get("backendRefs") or []:
        out += [f["requestMirror"]["backendRef"] for f in b.get("filters") or [] if f.get("type") == "RequestMirror"]
    return out


def is_on_prem(ref: dict, onprem: str, namespace: str | None = None) -> bool:
    return (
        ref.get("group") == BACKEND_GROUP
        and ref.get("kind") == BACKEND_KIND
        and ref.get("name") == onprem
        and (not ref.get("namespace") or namespace is None or ref.get("namespace") == namespace)
    )


def pin_violations(rules: list[dict], onprem: str, header: str, burstable, namespace: str | None = None) -> list[str]:
    """Front-door route rules (HTTPRoute ``spec.rules`` shape) that can send a request which is not of a
    burstable class, or a copy of it (RequestMirror at rule or backendRef level), to a backend other than
    the on-prem one. The ValidatingAdmissionPolicy says the same in CEL."""
    out = []
    allowed = set(burstable)
    for i, r in enumerate(rules):
        off = [b.get("name") for b in _targets(r) if not is_on_prem(b, onprem, namespace)]
        if not off:
            continue
        matches = r.get("matches") or []
        if not matches:
            out.append(f"rule {i} matches every request and sends it (or a copy) to {', '.join(off)}")
        for k, m in enumerate(matches):
            guarded = any(
                str(h.get("name", "")).lower() == header.lower()
                and h.get("type", "Exact") == "Exact"
                and h.get("value") in allowed
                for h in m.get("headers") or []
            )
            if not guarded:
                out.append(
                    f"rule {i} match {k} can send a request that is not of a burstable class (regulated, unclassified "
                    f"or unknown), or a copy of it, to {', '.join(off)}"
                )
    return out


# ------------------------------------------------------------------------------------------ admission
def _cel_list(values) -> str:
    return "[" + ", ".join("'" + v + "'" for v in values) + "]"


class _Cel:
    """CEL fragments of one site's pin (names and the class guard decided once)."""

    def __init__(self, onprem: str, ns: str, gateway: str, header: str, burstable):
        self.onprem, self.ns, self.gateway, self.header = onprem, ns, gateway, header
        self.burstable = sorted(burstable)

    def is_onprem(self, v: str) -> str:
        return (
            f"(has({v}.group) && {v}.group == '{BACKEND_GROUP}' && has({v}.kind) && {v}.kind == '{BACKEND_KIND}' && "
            f"{v}.name == '{self.onprem}' && (!has({v}.namespace) || {v}.namespace == '{self.ns}'))"
        )

    def is_backend(self, v: str) -> str:
        return f"(has({v}.group) && {v}.group == '{BACKEND_GROUP}' && has({v}.kind) && {v}.kind == '{BACKEND_KIND}')"

    def in_cluster(self, v: str) -> str:
        """An on-prem target for a route that is not on the front door: the on-prem Backend, an InferencePool, a
        Service of this namespace (kind defaults to Service, group to core; ExternalName Services are refused
        here, and one in another namespace could be one)."""
        return (
            f"({self.is_onprem(v)} || (has({v}.kind) && {v}.kind == 'InferencePool') || "
            f"((!has({v}.group) || {v}.group == '') && (!has({v}.kind) || {v}.kind == 'Service') && "
            f"(!has({v}.namespace) || {v}.namespace == '{self.ns}')))"
        )

    def front(self) -> str:
        """The route is attached to the front door."""
        return (
            f"(has(object.spec.parentRefs) && object.spec.parentRefs.exists(p, p.name == '{self.gateway}' && "
            f"(!has(p.namespace) || p.namespace == '{self.ns}') && (!has(p.kind) || p.kind == 'Gateway')))"
        )

    def ok(self, v: str) -> str:
        """A target a rule may reach without the class guard."""
        return f"({self.is_onprem(v)} || (!{self.front()} && {self.in_cluster(v)}))"

    def guard(self) -> str:
        return (
            f"(has(r.matches) && size(r.matches) > 0 && r.matches.all(m, has(m.headers) && m.headers.exists(h, "
            f"h.name.lowerAscii() == '{self.header.lower()}' && (!has(h.type) || h.type == 'Exact') && "
            f"h.value in {_cel_list(self.burstable)})))"
        )

    def rule(self, reach: str) -> str:
        """Every rule of a header-matching route: what it reaches is fine, or it matches only burstable classes."""
        return f"!has(object.spec.rules) || object.spec.rules.all(r, ({reach}) || {self.guard()})"


def _route_validations(c: _Cel, on: str, header: str, burstable: list[str]) -> list[dict]:
    kinds = " || ".join(f"request.resource.resource == '{k}'" for k in HEADER_ROUTES)
    guarded = (
        f"must match only requests whose {header} header names a burstable class ({', '.join(burstable)}); "
        "regulated, unclassified and unknown classes stay on-prem"
    )
    mirror = "f.type != 'RequestMirror' || " + c.ok("f.requestMirror.backendRef")
    exits = burst_pin_exits.validations(c, kinds, on, guarded, BACKEND_GROUP)
    return [
        {
            "expression": f"!({kinds}) || " + c.rule(f"!has(r.backendRefs) || r.backendRefs.all(b, {c.ok('b')})"),
            "message": f"regulated pin: a route rule that can send a request to a backend other than {on} (any "
            f"backend of a rule on the front door, a gateway Backend elsewhere) {guarded}",
        },
        {
            "expression": f"!({kinds}) || " + c.rule(f"!has(r.filters) || r.filters.all(f, {mirror})"),
            "message": f"regulated pin: a RequestMirror filter of a route rule copies every request it matches; one "
            f"that mirrors to a backend other than {on} (any on the front door, a gateway Backend elsewhere) {guarded}",
        },
        {
            "expression": f"!({kinds}) || "
            + c.rule(f"!has(r.backendRefs) || r.backendRefs.all(b, !has(b.filters) || b.filters.all(f, {mirror}))"),
            "message": f"regulated pin: a RequestMirror filter of a backendRef copies every request sent to it; one "
            f"that mirrors to a backend other than {on} {guarded}",
        },
        {
            "expression": f"!({' || '.join(f'request.resource.resource == {k!r}' for k in PLAIN_ROUTES)}) || "
            f"!has(object.spec.rules) || object.spec.rules.all(r, !has(r.backendRefs) || "
            f"r.backendRefs.all(b, {c.ok('b')}))",
            "message": f"regulated pin: a TCPRoute, TLSRoute or UDPRoute cannot match a request class, so on the "
            f"front door it may reach only {on}, and elsewhere no gateway Backend but {on}",
        },
    ] + exits


def _backend_rule(b: dict) -> str:
    """The Backend named b["name"] has exactly its rendered address, TLS and fallback."""
    tls = b.get("tls")
    parts = [
        "(!has(object.spec.type) || object.spec.type == 'Endpoints')",
        "has(object.spec.endpoints) && size(object.spec.endpoints) == 1",
        f"object.spec.endpoints.all(e, has(e.fqdn) && e.fqdn.hostname == '{b['hostname']}' && "
        f"e.fqdn.port == {b['port']})",
        "has(object.spec.fallback) && object.spec.fallback"
        if b["fallback"]
        else "!(has(object.spec.fallback) && object.spec.fallback)",
    ]
    if tls:
        parts.append(f"has(object.spec.tls) && has(object.spec.tls.sni) && object.spec.tls.sni == '{tls['sni']}'")
    return f"(object.metadata.name == '{b['name']}' && " + " && ".join(parts) + ")"


def admission_policy(onprem: dict, backends: list[dict], pin: dict) -> dict:
    """The regulated pin as the API server enforces it: a ValidatingAdmissionPolicy on the routes, Backends and
    Services of the serving namespace. ``backends``: every Backend the front door renders (name, hostname, port,
    fallback, tls); ``pin``: name, namespace, gateway (the front door's), header (the class header), burstable."""
    name, ns, gateway, header, burstable = (pin[k] for k in ("name", "namespace", "gateway", "header", "burstable"))
    on = onprem["name"]
    c = _Cel(on, ns, gateway, header, burstable)
    validations = _route_validations(c, on, header, sorted(burstable))
    names = sorted(b["name"] for b in backends)
    validations.append(
        {
            "expression": "request.resource.resource != 'backends' || "
            + " || ".join(_backend_rule(b) for b in sorted(backends, key=lambda b: b["name"])),
            "message": f"regulated pin: the Backends of this namespace are the front door's ({', '.join(names)}), "
            f"each at its fixed address, TLS name and fallback flag ({on} is the on-prem inference gateway "
            f"{onprem['hostname']}:{onprem['port']} and never a fallback); no other Backend (a DynamicResolver "
            "sends wherever the Host header says)",
        }
    )
    validations.append(
        {
            "expression": "request.resource.resource != 'services' || !has(object.spec.type) || "
            "object.spec.type != 'ExternalName'",
            "message": "regulated pin: a Service of type ExternalName in this namespace would let any route reach "
            "a host outside the cluster by name",
        }
    )
    for v in validations:
        v["reason"] = "Forbidden"
    return {
        "name": name,
        "namespace": ns,
        "resources": [
            {"group": "gateway.networking.k8s.io", "resources": [*HEADER_ROUTES, *PLAIN_ROUTES, "referencegrants"]},
            {"group": BACKEND_GROUP, "resources": ["backends", *burst_pin_exits.EXTENSION_RESOURCES]},
            {"group": "", "resources": ["services"]},
        ],
        "validations": validations,
    }
