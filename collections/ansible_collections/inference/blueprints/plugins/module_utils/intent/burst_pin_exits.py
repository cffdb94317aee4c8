# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The regulated pin's other exits (issue 35 item 2): ways a request, a copy of it or its client leaves the
sovereign cluster without a route's backendRef, each refused by the ValidatingAdmissionPolicy of
intent/burst_pin.py. Sources: sigs.k8s.io/gateway-api v1.6.1 (HTTPRequestRedirectFilter, ReferenceGrant),
github.com/envoyproxy/gateway v1.9.0 api/v1alpha1 (envoyextensionpolicy_types.go ExtProc/Lua/Wasm,
ext_auth_types.go HTTP/GRPC ExtAuth with BackendCluster backendRef(s)).

* A ``RequestRedirect`` with a ``hostname`` sends the client (and its next request, body and all) to that
  host: refused on a rule that is not guarded to burstable classes.
* An ``EnvoyExtensionPolicy`` ``extProc`` gets the request's headers and, with a body mode, its body: its
  backends must be in the cluster. A Lua filter can ``httpCall`` any Envoy cluster (the burst rule's
  included) and a Wasm filter can dispatch HTTP calls: Lua only inline and without ``httpCall`` (a
  ValueRef's code is not visible to the API server), no Wasm.
* A ``SecurityPolicy`` ``extAuth`` gets every request's headers (and, with ``bodyToExtAuth``, its body): its
  backends must be in the cluster.
* A ``ReferenceGrant`` in this namespace that lets another namespace's routes reference a gateway Backend
  (the burst one) would put the Backend behind routes the policy does not see: only the on-prem Backend may
  be granted.
"""

from __future__ import annotations

EXTENSION_RESOURCES = ("envoyextensionpolicies", "securitypolicies")


def _refs_in_cluster(c, v: str) -> str:
    """Every backendRef of an Envoy Gateway BackendCluster (``backendRef`` and ``backendRefs``) is in the cluster."""
    return (
        f"((!has({v}.backendRef) || {c.in_cluster(v + '.backendRef')}) && "
        f"(!has({v}.backendRefs) || {v}.backendRefs.all(b, {c.in_cluster('b')})))"
    )


def validations(c, kinds: str, on: str, guarded: str, backend_group: str) -> list[dict]:
    """CEL validations of the exits; ``c`` is burst_pin._Cel, ``kinds`` the header-route resource test."""
    redirect = "!has(r.filters) || r.filters.all(f, f.type != 'RequestRedirect' || !has(f.requestRedirect.hostname))"
    ext_auth = " && ".join(
        f"(!has(object.spec.extAuth.{p}) || {_refs_in_cluster(c, 'object.spec.extAuth.' + p)})"
        for p in ("http", "grpc")
    )
    return [
        {
            "expression": f"!({kinds}) || " + c.rule(redirect),
            "message": f"regulated pin: a RequestRedirect with a hostname sends the client and its request to that "
            f"host; a rule with one {guarded}",
        },
        {
            "expression": "request.resource.resource != 'envoyextensionpolicies' || ("
            f"(!has(object.spec.extProc) || object.spec.extProc.all(e, {_refs_in_cluster(c, 'e')})) && "
            "(!has(object.spec.lua) || object.spec.lua.all(l, has(l.inline) && !l.inline.contains('httpCall'))) && "
            "!has(object.spec.wasm))",
            "message": f"regulated pin: an EnvoyExtensionPolicy's extProc gets the requests (and their bodies) of "
            f"what it targets, so its backends must be in the cluster ({on}, an InferencePool or a Service of this "
            "namespace), never a gateway Backend off-prem; a Lua filter must be inline and never httpCall (it can "
            "call any Envoy cluster, the burst one included); no Wasm filter (it can dispatch HTTP calls)",
        },
        {
            "expression": "request.resource.resource != 'securitypolicies' || !has(object.spec.extAuth) || "
            f"({ext_auth})",
            "message": f"regulated pin: a SecurityPolicy's extAuth gets every request's headers (and with "
            f"bodyToExtAuth its body), so its backends must be in the cluster ({on}, an InferencePool or a "
            "Service of this namespace), never a gateway Backend off-prem",
        },
        {
            "expression": "request.resource.resource != 'referencegrants' || !has(object.spec.to) || "
            f"object.spec.to.all(t, t.group != '{backend_group}' || t.kind != 'Backend' || "
            f"(has(t.name) && t.name == '{on}'))",
            "message": f"regulated pin: a ReferenceGrant of this namespace may let other namespaces' routes reach "
            f"the on-prem Backend ({on}) only, never the burst Backends or all Backends",
        },
    ]
