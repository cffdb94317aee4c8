"""The regulated pin of a sovereign-burst site against every way a route or a Backend can send traffic, on
the local control plane's real kube-apiserver (its ValidatingAdmissionPolicy, CEL) with the upstream
Gateway API v1.6.1 (HTTPRoute, GRPCRoute, TCPRoute, TLSRoute, UDPRoute) and Envoy Gateway v1.9.0 CRDs.

One test per path (issue 26, finding 4): a RequestMirror at rule level and at backendRef level, a mirror on
a route that is not on the front door, a GRPCRoute, a TCPRoute, a TLSRoute and a UDPRoute, the on-prem
Backend's name in another namespace, every Backend's address, TLS name and fallback flag, a Backend of
another name (a DynamicResolver), and an ExternalName Service. Each is refused with the policy's message;
what stays on-prem (a route like KServe's, to an InferencePool; a guarded GRPCRoute) is accepted. The
render-time half is tests/unit/intent/test_burst_paths.py; the HTTPRoute rule edits of earlier releases are
in tests/integration/test_sovereign_burst.py.
"""

from __future__ import annotations

import copy
import time

import pytest
import yaml
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.plugin_utils import render

from tests.serving_helpers import INVENTORIES, kubectl_apply

pytestmark = [pytest.mark.cluster]

SITE = INVENTORIES / "example-sovereign-burst"
SOV = "onprem-fra-1"
NS = "llm-sovereign"


def _apply(cluster, objs: list[dict], dry_run: bool = False):
    return kubectl_apply(cluster, objs, "test-regulated-pin", dry_run)


@pytest.fixture(scope="module")
def pinned(cluster):
    """The sovereign cluster's rendered burst_routing objects, applied, with the policy in force."""
    intent = cli.site_intents(str(SITE), None)[SOV]
    objs = render.render_component("burst_routing", intent)
    made = _apply(cluster, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    assert made.returncode == 0, made.stderr
    done = _apply(cluster, objs)
    assert done.returncode == 0, done.stderr
    f = intent["burst"]["front_door"]
    names = {
        "gateway": f["gateway"]["name"],
        "onprem": f["onprem"]["name"],
        "burst": next(b["name"] for b in f["backends"] if b["fallback"]),
        "route": next(o for o in objs if o["kind"] == "HTTPRoute"),
        "backends": {o["metadata"]["name"]: o for o in objs if o["kind"] == "Backend"},
    }
    # in force once a catch-all rule to the burst Backend is refused (the informer takes a moment)
    probe = _edit(names, lambda rules: rules[-1]["backendRefs"].append(_ref(names["burst"])))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if _apply(cluster, [probe], dry_run=True).returncode != 0:
            break
        time.sleep(1)
    else:
        pytest.fail("the ValidatingAdmissionPolicy never came into force")
    yield names
    cluster.kubectl("delete", "--ignore-not-found", "-f", "-", input=yaml.safe_dump_all(objs))


def _ref(name: str, **extra) -> dict:
    return {"group": "gateway.envoyproxy.io", "kind": "Backend", "name": name, **extra}


def _mirror(name: str) -> dict:
    return {"type": "RequestMirror", "requestMirror": {"backendRef": _ref(name)}}


def _ext_service(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"type": "ExternalName", "externalName": "inference.apps.burst-aws-1.example.com"},
    }


def _parent(n: dict) -> list[dict]:
    return [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": n["gateway"]}]


def _plain_route(kind: str, n: dict, backend: str, front: bool = True) -> dict:
    spec = {
        "parentRefs": _parent(n) if front else [{"name": "somewhere-else"}],
        "rules": [{"backendRefs": [{**_ref(backend), "port": 443}]}],
    }
    if kind == "TLSRoute":
        spec["hostnames"] = ["inference.example.com"]
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": f"side-{kind.lower()}", "namespace": NS},
        "spec": spec,
    }


def _grpc(n: dict, rule: dict) -> dict:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GRPCRoute",
        "metadata": {"name": "side-grpc", "namespace": NS},
        "spec": {"parentRefs": _parent(n), "rules": [rule]},
    }


def _edit(n: dict, change) -> dict:
    route = copy.deepcopy(n["route"])
    change(route["spec"]["rules"])
    return route


def _onprem_rule(rules: list[dict]) -> dict:
    return next(r for r in rules if r["name"].startswith("onprem-"))


def _backend(n: dict, name: str, change) -> dict:
    obj = copy.deepcopy(n["backends"][name])
    change(obj["spec"])
    return obj


def _cases(n: dict) -> dict[str, dict]:
    burst, onprem = n["burst"], n["onprem"]
    return {
        "a RequestMirror at rule level of the regulated rule": _edit(
            n, lambda rules: _onprem_rule(rules).setdefault("filters", []).append(_mirror(burst))
        ),
        "a RequestMirror at backendRef level of the regulated rule": _edit(
            n, lambda rules: _onprem_rule(rules)["backendRefs"][0].update(filters=[_mirror(burst)])
        ),
        "a RequestMirror on the catch-all rule": _edit(n, lambda rules: rules[-1].update(filters=[_mirror(burst)])),
        "the on-prem Backend's name in another namespace": _edit(
            n, lambda rules: rules[-1]["backendRefs"][0].update(namespace="elsewhere")
        ),
        "a mirror to the burst Backend on a route of another gateway": {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "side-mirror", "namespace": NS},
            "spec": {
                "parentRefs": [{"name": "openshift-ai-inference", "namespace": "openshift-ingress"}],
                "rules": [
                    {
                        "filters": [_mirror(burst)],
                        "backendRefs": [
                            {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "p", "port": 8000}
                        ],
                    }
                ],
            },
        },
        "a route of another gateway to a Service of another namespace": {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "side-service", "namespace": NS},
            "spec": {
                "parentRefs": [{"name": "openshift-ai-inference", "namespace": "openshift-ingress"}],
                "rules": [{"backendRefs": [{"name": "to-burst", "namespace": "elsewhere", "port": 443}]}],
            },
        },
        "a GRPCRoute on the front door to the burst Backend": _grpc(n, {"backendRefs": [{**_ref(burst), "port": 443}]}),
        "a GRPCRoute on the front door mirroring to the burst Backend": _grpc(
            n, {"filters": [_mirror(burst)], "backendRefs": [{**_ref(onprem), "port": 80}]}
        ),
        "a TCPRoute on the front door to the burst Backend": _plain_route("TCPRoute", n, burst),
        "a TLSRoute on the front door to the burst Backend": _plain_route("TLSRoute", n, burst),
        "a UDPRoute to the burst Backend from anywhere": _plain_route("UDPRoute", n, burst, front=False),
        "the burst Backend moved to another host": _backend(
            n, burst, lambda s: s["endpoints"][0]["fqdn"].update(hostname="models.elsewhere.example.com")
        ),
        "the burst Backend no longer a fallback": _backend(n, burst, lambda s: s.pop("fallback")),
        "the burst Backend sending another TLS name": _backend(
            n, burst, lambda s: s["tls"].update(sni="x.example.com")
        ),
        "the on-prem Backend moved to the burst cluster": _backend(
            n, onprem, lambda s: s["endpoints"][0]["fqdn"].update(hostname="inference.apps.burst-aws-1.example.com")
        ),
        "the on-prem Backend made a fallback": _backend(n, onprem, lambda s: s.update(fallback=True)),
        "a new DynamicResolver Backend": {
            "apiVersion": "gateway.envoyproxy.io/v1alpha1",
            "kind": "Backend",
            "metadata": {"name": "anywhere", "namespace": NS},
            "spec": {"type": "DynamicResolver"},
        },
        "an ExternalName Service": _ext_service("to-burst"),
        **_exit_cases(n),
    }


def _policy(kind: str, n: dict, spec: dict) -> dict:
    return {
        "apiVersion": "gateway.envoyproxy.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": f"side-{kind.lower()}", "namespace": NS},
        "spec": {
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": n["gateway"]}],
            **spec,
        },
    }


def _redirect(rules: list[dict], host: str) -> None:
    rule = _onprem_rule(rules)
    rule.pop("backendRefs")  # a redirecting rule has no backends (Gateway API)
    rule.pop("timeouts", None)
    rule["filters"] = [{"type": "RequestRedirect", "requestRedirect": {"hostname": host, "statusCode": 307}}]


def _exit_cases(n: dict) -> dict[str, dict]:
    """Issue 35 item 2: the exits without a route backendRef (intent/burst_pin_exits.py)."""
    burst = n["burst"]
    host = n["backends"][burst]["spec"]["endpoints"][0]["fqdn"]["hostname"]
    to_burst = [{**_ref(burst), "port": 443}]
    return {
        "a RequestRedirect of the regulated rule to the burst host": _edit(n, lambda rules: _redirect(rules, host)),
        "an extProc of the front door at the burst Backend, with the body": _policy(
            "EnvoyExtensionPolicy",
            n,
            {"extProc": [{"backendRefs": to_burst, "processingMode": {"request": {"body": "Buffered"}}}]},
        ),
        "a Lua filter of the front door calling out with httpCall": _policy(
            "EnvoyExtensionPolicy",
            n,
            {
                "lua": [
                    {
                        "type": "Inline",
                        "inline": "function envoy_on_request(h)\n  h:httpCall('c', {}, 'x', 1000)\nend",
                    }
                ]
            },
        ),
        "an extAuth of the front door at the burst Backend, with the body": _policy(
            "SecurityPolicy",
            n,
            {"extAuth": {"http": {"backendRefs": to_burst}, "bodyToExtAuth": {"maxRequestBytes": 1048576}}},
        ),
        "a ReferenceGrant of the Backends to another namespace's routes": {
            "apiVersion": "gateway.networking.k8s.io/v1beta1",
            "kind": "ReferenceGrant",
            "metadata": {"name": "side-grant", "namespace": NS},
            "spec": {
                "from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "elsewhere"}],
                "to": [{"group": "gateway.envoyproxy.io", "kind": "Backend"}],
            },
        },
    }


CASES = [
    "a RequestMirror at rule level of the regulated rule",
    "a RequestMirror at backendRef level of the regulated rule",
    "a RequestMirror on the catch-all rule",
    "the on-prem Backend's name in another namespace",
    "a mirror to the burst Backend on a route of another gateway",
    "a route of another gateway to a Service of another namespace",
    "a GRPCRoute on the front door to the burst Backend",
    "a GRPCRoute on the front door mirroring to the burst Backend",
    "a TCPRoute on the front door to the burst Backend",
    "a TLSRoute on the front door to the burst Backend",
    "a UDPRoute to the burst Backend from anywhere",
    "the burst Backend moved to another host",
    "the burst Backend no longer a fallback",
    "the burst Backend sending another TLS name",
    "the on-prem Backend moved to the burst cluster",
    "the on-prem Backend made a fallback",
    "a new DynamicResolver Backend",
    "an ExternalName Service",
    "a RequestRedirect of the regulated rule to the burst host",
    "an extProc of the front door at the burst Backend, with the body",
    "a Lua filter of the front door calling out with httpCall",
    "an extAuth of the front door at the burst Backend, with the body",
    "a ReferenceGrant of the Backends to another namespace's routes",
]


@pytest.mark.parametrize("case", CASES)
def test_the_api_server_refuses_every_way_regulated_traffic_could_leave(cluster, pinned, case):
    cases = _cases(pinned)
    assert sorted(cases) == sorted(CASES)
    refused = _apply(cluster, [cases[case]], dry_run=True)
    assert refused.returncode != 0, f"{case}: accepted"
    assert "regulated pin" in refused.stderr and "denied request" in refused.stderr.lower(), refused.stderr


def test_what_stays_on_prem_is_accepted(cluster, pinned):
    n = pinned
    kserve_like = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "like-kserve", "namespace": NS},
        "spec": {
            "parentRefs": [{"name": "openshift-ai-inference", "namespace": "openshift-ingress"}],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": f"/{NS}/m/v1/completions"}}],
                    "backendRefs": [
                        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "p", "port": 8000}
                    ],
                },
                {"backendRefs": [{"name": "m-kserve-workload-svc", "port": 8000}]},
            ],
        },
    }
    guarded_grpc = _grpc(
        n,
        {
            "matches": [{"headers": [{"name": "X-Inference-Class", "value": "public"}]}],
            "backendRefs": [{**_ref(n["onprem"]), "port": 80}, {**_ref(n["burst"]), "port": 443}],
        },
    )
    cluster_ip = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "in-cluster", "namespace": NS},
        "spec": {"ports": [{"port": 80}]},
    }
    in_cluster_ext_proc = _policy(
        "EnvoyExtensionPolicy", n, {"extProc": [{"backendRefs": [{"name": "in-cluster", "port": 80}]}]}
    )
    onprem_grant = {
        "apiVersion": "gateway.networking.k8s.io/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": "onprem-grant", "namespace": NS},
        "spec": {
            "from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "elsewhere"}],
            "to": [{"group": "gateway.envoyproxy.io", "kind": "Backend", "name": n["onprem"]}],
        },
    }
    for obj in (
        n["route"],
        *n["backends"].values(),
        kserve_like,
        guarded_grpc,
        cluster_ip,
        in_cluster_ext_proc,
        onprem_grant,
    ):
        res = _apply(cluster, [obj], dry_run=True)
        assert res.returncode == 0, (obj["kind"], obj["metadata"]["name"], res.stderr)


# ------------------------------------------------------------------ the shared gateway (intent/burst_pin_shared.py)
SHARED = {"name": "openshift-ai-inference", "namespace": "openshift-ingress"}
OTHER = "team-b"  # another namespace with routes on the shared gateway, as KServe makes for its models


def _foreign(matches: list[dict] | None = None, hostnames: list[str] | None = None, kind: str = "HTTPRoute") -> dict:
    rule = {"backendRefs": [{"name": "anywhere", "port": 8000}]}
    if matches is not None:
        rule["matches"] = matches
    spec = {"parentRefs": [{**SHARED}], "rules": [rule]}
    if hostnames:
        spec["hostnames"] = hostnames
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": "foreign", "namespace": OTHER},
        "spec": spec,
    }


def _model_header(value: str, kind: str = "Exact") -> dict:
    return {"name": "X-Gateway-Model-Name", "type": kind, "value": value}


def _shared_cases(host: str) -> dict[str, dict]:
    mine = f"publishers/{NS}/models/Qwen3.5-35B-A3B"
    return {
        "the front door's Host as a hostname": _foreign(hostnames=[host]),
        "a wildcard hostname covering the front door's Host": _foreign(hostnames=["*." + host.split(".", 1)[1]]),
        "a longer prefix under the sovereign model's path": _foreign(
            [{"path": {"type": "PathPrefix", "value": f"/{NS}/qwen-chat/v1/chat"}}]
        ),
        "the sovereign namespace's path itself": _foreign([{"path": {"type": "PathPrefix", "value": f"/{NS}"}}]),
        "an exact publisher path of the sovereign namespace": _foreign(
            [{"path": {"type": "Exact", "value": f"/{mine}/v1/chat/completions"}}]
        ),
        "a prefix under /v1 without a model header": _foreign([{"path": {"type": "PathPrefix", "value": "/v1/chat"}}]),
        "/v1 with more headers than KServe's route": _foreign(
            [{"path": {"type": "PathPrefix", "value": "/v1/"}, "headers": [{"name": "a", "value": "1"}]}]
        ),
        "/v1 with the sovereign model's header": _foreign(
            [{"path": {"type": "PathPrefix", "value": "/v1/"}, "headers": [_model_header(mine)]}]
        ),
        "a regular expression path": _foreign([{"path": {"type": "RegularExpression", "value": "/.*"}}]),
        "the root path with a method (beats KServe's header-only catch-all)": _foreign([{"method": "POST"}]),
        "the root path with two headers": _foreign(
            [{"headers": [{"name": "a", "value": "1"}, {"name": "b", "value": "2"}]}]
        ),
        "a regular expression model header": _foreign(
            [{"path": {"type": "PathPrefix", "value": "/v1/"}, "headers": [_model_header(".*", "RegularExpression")]}]
        ),
        # (a namespace with a hyphen is no valid gRPC service name: the CRD refuses it first; v1 is one)
        "a gRPC method of service v1, matched as the path /v1/": {
            **_foreign(kind="GRPCRoute"),
            "spec": {
                "parentRefs": [{**SHARED}],
                "rules": [
                    {
                        "matches": [{"method": {"service": "v1"}, "headers": [{"name": "a", "value": "1"}]}],
                        "backendRefs": [{"name": "x", "port": 8000}],
                    }
                ],
            },
        },
    }


@pytest.fixture(scope="module")
def shared(cluster, pinned):
    made = _apply(cluster, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OTHER}}])
    assert made.returncode == 0, made.stderr
    intent = cli.site_intents(str(SITE), None)[SOV]
    return intent["burst"]["front_door"]["onprem"]["hostname"]


@pytest.mark.parametrize("case", sorted(_shared_cases("gw.openshift-ingress.svc")))
def test_routes_of_other_namespaces_on_the_shared_gateway_cannot_take_regulated_requests(cluster, shared, case):
    refused = _apply(cluster, [_shared_cases(shared)[case]], dry_run=True)
    assert refused.returncode != 0, f"{case}: accepted"
    assert "regulated pin: a route of another namespace" in refused.stderr, refused.stderr


def test_other_namespaces_keep_their_own_routes_on_the_shared_gateway(cluster, shared):
    own = f"publishers/{OTHER}/models/m"
    for obj in (
        # what KServe makes for a model of another namespace: its paths, /v1 with its own model header
        _foreign(
            [
                {"path": {"type": "PathPrefix", "value": f"/{OTHER}/m/"}},
                {"path": {"type": "PathPrefix", "value": f"/{own}/"}},
                {"path": {"type": "PathPrefix", "value": "/v1/"}, "headers": [_model_header(own)]},
            ]
        ),
        _foreign(hostnames=["team-b.apps.example.com"]),  # a Host of its own
        _foreign(),  # the default match (PathPrefix /): shorter than every regulated path, fewer headers
        _foreign([{"method": "POST", "headers": [_model_header(own)]}]),  # root, but only another model's header
    ):
        res = _apply(cluster, [obj], dry_run=True)
        assert res.returncode == 0, res.stderr
    # the sovereign namespace's own routes are the other policy's: a KServe-like route there is accepted
    kserve_like = copy.deepcopy(_foreign([{"path": {"type": "PathPrefix", "value": f"/{NS}/qwen-chat/"}}]))
    kserve_like["metadata"]["namespace"] = NS
    kserve_like["spec"]["rules"][0]["backendRefs"] = [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "p", "port": 8000}
    ]
    res = _apply(cluster, [kserve_like], dry_run=True)
    assert res.returncode == 0, res.stderr
