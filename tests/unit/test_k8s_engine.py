"""Pure parts of the fast apply path: apply order, the no-write no-op proof, discovery parsing
and caching, retries and error messages (module_utils k8s_client / k8s_apply)."""

from __future__ import annotations

import json
import os
import time

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_apply as ka
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_client as kc
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_facts as kf

# ---------------------------------------------------------------------------- apply order


def _o(kind, name="x", api_version="v1"):
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}


def test_waves_put_namespaces_and_crds_first_bindings_after_roles_webhooks_last():
    objs = [
        _o("LLMInferenceService", "m", "serving.kserve.io/v1alpha2"),
        _o("RoleBinding", "rb", "rbac.authorization.k8s.io/v1"),
        _o("ValidatingWebhookConfiguration", "w", "admissionregistration.k8s.io/v1"),
        _o("Role", "r", "rbac.authorization.k8s.io/v1"),
        _o("Namespace", "ns"),
        _o("CustomResourceDefinition", "c", "apiextensions.k8s.io/v1"),
        _o("Deployment", "d", "apps/v1"),
        _o("LLMInferenceService", "m2", "serving.kserve.io/v1alpha2"),
        _o("ConfigMap", "cm"),
    ]
    kinds = [[objs[i]["kind"] + "/" + objs[i]["metadata"]["name"] for i in wave] for wave in ka.waves(objs)]
    assert kinds == [
        ["Namespace/ns"],
        ["CustomResourceDefinition/c"],
        ["Role/r", "ConfigMap/cm"],
        ["RoleBinding/rb"],
        # other kinds keep the order of their first appearance; one kind is one wave
        ["LLMInferenceService/m", "LLMInferenceService/m2"],
        ["Deployment/d"],
        ["ValidatingWebhookConfiguration/w"],
    ]


def test_objects_failing_for_one_reason_share_one_line():
    items = [ka._Item(i, {**_o("Widget", f"w{i}", "example.com/v1")}) for i in range(3)]
    err = kc.KindNotServed("the API server does not serve Widget in example.com/v1")
    msg = str(ka._fail([(i, err) for i in items], "resolved", []))
    assert msg == (
        "3 objects could not be resolved: Widget w0 (example.com/v1), Widget w1 (example.com/v1), "
        "Widget w2 (example.com/v1): the API server does not serve Widget in example.com/v1"
    )
    assert str(ka._fail([(items[0], err)], "resolved", [])) == f"Widget w0 (example.com/v1): {err}"


def test_crd_kinds_lists_served_versions_of_batch_crds():
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [{"name": "v1", "served": True}, {"name": "v0", "served": False}],
        },
    }
    assert ka.crd_kinds([crd, _o("ConfigMap")]) == {("example.com/v1", "Widget"): "widgets.example.com"}


# ---------------------------------------------------------------------------- no-op proof

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "d1", "namespace": "exp1", "labels": {"a": "b"}},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "d1"}},
        "template": {
            "metadata": {"labels": {"app": "d1"}},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "busybox",
                        "args": ["a", "b"],
                        "resources": {"requests": {"cpu": "0.5", "memory": "1Gi"}},
                        "ports": [{"containerPort": 80}],
                    }
                ],
                "tolerations": [{"key": "x", "operator": "Exists"}],
            },
        },
    },
}
# What kube-apiserver v1.36 recorded for `kubectl apply --server-side --field-manager=fm` of
# DEPLOYMENT (ports[].protocol defaulted into the key, cpu canonicalised to 500m).
OWNED = {
    "f:metadata": {"f:labels": {"f:a": {}}},
    "f:spec": {
        "f:replicas": {},
        "f:selector": {},
        "f:template": {
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:containers": {
                    'k:{"name":"c"}': {
                        ".": {},
                        "f:args": {},
                        "f:image": {},
                        "f:name": {},
                        "f:ports": {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}},
                        "f:resources": {"f:requests": {"f:cpu": {}, "f:memory": {}}},
                    }
                },
                "f:tolerations": {},
            },
        },
    },
}


def _live(obj=DEPLOYMENT, owned=OWNED, manager="fm", api_version="apps/v1"):
    live = json.loads(json.dumps(obj))
    live["metadata"].update(
        resourceVersion="7",
        uid="u",
        managedFields=[
            {
                "manager": manager,
                "operation": "Apply",
                "apiVersion": api_version,
                "fieldsType": "FieldsV1",
                "fieldsV1": owned,
            },
            {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status", "fieldsV1": {}},
        ],
    )
    c = live["spec"]["template"]["spec"]["containers"][0]
    c["resources"]["requests"]["cpu"] = "500m"  # the server's canonical form
    c["ports"][0]["protocol"] = "TCP"  # defaulted
    c["imagePullPolicy"] = "Always"  # defaulted
    live["spec"]["strategy"] = {"type": "RollingUpdate"}
    live["status"] = {"replicas": 0}
    return live


def test_live_object_with_our_fields_and_values_needs_no_write():
    assert ka.unchanged_without_write(DEPLOYMENT, _live(), "fm")


def test_a_changed_value_needs_a_write():
    want = json.loads(json.dumps(DEPLOYMENT))
    want["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:2"
    assert not ka.unchanged_without_write(want, _live(), "fm")
    want = json.loads(json.dumps(DEPLOYMENT))
    want["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
    assert not ka.unchanged_without_write(want, _live(), "fm")


def test_a_field_we_no_longer_set_needs_a_write_to_release_it():
    want = json.loads(json.dumps(DEPLOYMENT))
    del want["metadata"]["labels"]
    assert not ka.unchanged_without_write(want, _live(), "fm")


def test_a_new_field_equal_to_the_live_value_but_not_ours_needs_a_write():
    want = json.loads(json.dumps(DEPLOYMENT))
    want["spec"]["strategy"] = {"type": "RollingUpdate"}  # live has it, owned by nobody of ours
    assert not ka.unchanged_without_write(want, _live(), "fm")


def test_other_manager_or_api_version_or_deletion_needs_a_write():
    assert not ka.unchanged_without_write(DEPLOYMENT, _live(manager="kubectl"), "fm")
    assert not ka.unchanged_without_write(DEPLOYMENT, _live(api_version="apps/v1beta2"), "fm")
    live = _live()
    live["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert not ka.unchanged_without_write(DEPLOYMENT, live, "fm")
    assert not ka.unchanged_without_write(DEPLOYMENT, None, "fm")


def test_object_without_fields_is_unchanged_when_we_own_none():
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}
    live = {**ns, "metadata": {"name": "a", "labels": {"kubernetes.io/metadata.name": "a"}}, "spec": {}}
    assert ka.unchanged_without_write(ns, live, "fm")
    labelled = {**ns, "metadata": {"name": "a", "labels": {"x": "y"}}}
    assert not ka.unchanged_without_write(labelled, live, "fm")


def test_secret_string_data_compares_with_the_stored_base64_data():
    want = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}}
    owned = {"f:stringData": {"f:k": {}}}
    live = {
        **want,
        "metadata": {
            "name": "s",
            "managedFields": [{"manager": "fm", "operation": "Apply", "apiVersion": "v1", "fieldsV1": owned}],
        },
    }
    del live["stringData"]
    assert ka.unchanged_without_write(want, {**live, "data": {"k": "dg=="}}, "fm")
    assert not ka.unchanged_without_write(want, {**live, "data": {"k": "dw=="}}, "fm")


def test_contains_compares_types_and_quantities_strictly():
    assert ka.contains({"a": True}, {"a": True, "b": 1})
    assert not ka.contains({"a": True}, {"a": 1})  # a bool is not an int
    assert not ka.contains({"a": 1}, {"a": "1"})
    assert ka.contains({"limits": {"memory": "1Gi"}}, {"limits": {"memory": "1073741824"}})
    assert not ka.contains({"name": "1Gi"}, {"name": "1073741824"})  # not a quantity field
    assert ka.contains({"finalizers": ["a"]}, {"finalizers": ["x", "a"]})  # others may add set items
    assert not ka.contains({"args": ["a", "b"]}, {"args": ["b", "a"]})


def test_same_fieldset_matches_set_and_associative_list_items():
    assert ka.same_fieldset({"finalizers": ["a", "b"]}, {"f:finalizers": {'v:"a"': {}, 'v:"b"': {}}})
    assert not ka.same_fieldset({"finalizers": ["a"]}, {"f:finalizers": {'v:"a"': {}, 'v:"b"': {}}})
    env = {"env": [{"name": "A", "value": "1"}]}
    assert ka.same_fieldset(env, {"f:env": {'k:{"name":"A"}': {".": {}, "f:name": {}, "f:value": {}}}})
    assert not ka.same_fieldset(env, {"f:env": {'k:{"name":"B"}': {".": {}, "f:name": {}, "f:value": {}}}})


# ---------------------------------------------------------------------------- discovery


AGGREGATED = {
    "kind": "APIGroupDiscoveryList",
    "apiVersion": "apidiscovery.k8s.io/v2",
    "items": [
        {
            "metadata": {"name": "apps"},
            "versions": [
                {
                    "version": "v1",
                    "freshness": "Current",
                    "resources": [
                        {
                            "resource": "deployments",
                            "responseKind": {"group": "", "version": "", "kind": "Deployment"},
                            "scope": "Namespaced",
                            "verbs": ["get", "patch"],
                            "subresources": [{"subresource": "status"}, {"subresource": "scale"}],
                        }
                    ],
                }
            ],
        },
        {
            "metadata": {"name": "packages.operators.coreos.com"},
            "versions": [{"version": "v1", "freshness": "Stale"}],
        },
    ],
}


def test_parse_aggregated_discovery():
    groups, resources, stale = kc.parse_aggregated(AGGREGATED)
    assert groups == {"apps": ["v1"], "packages.operators.coreos.com": ["v1"]}
    assert resources["apps/v1"] == {"Deployment": ["deployments", True, ["get", "patch"], ["scale", "status"]]}
    assert stale == ["packages.operators.coreos.com/v1"]


def test_parse_legacy_lists():
    listing = {
        "resources": [
            {"name": "configmaps", "kind": "ConfigMap", "namespaced": True, "verbs": ["get"]},
            {"name": "nodes", "kind": "Node", "namespaced": False, "verbs": ["list"]},
            {"name": "nodes/status", "kind": "Node", "namespaced": False},
        ]
    }
    assert kc.parse_resource_list(listing) == {
        "ConfigMap": ["configmaps", True, ["get"], []],
        "Node": ["nodes", False, ["list"], ["status"]],
    }
    groups = {
        "groups": [
            {"name": "g", "versions": [{"version": "v1"}, {"version": "v2"}], "preferredVersion": {"version": "v2"}}
        ]
    }
    assert kc.parse_group_list(groups) == {"g": ["v2", "v1"]}


class FakeServer:
    """Stands in for Client: answers discovery paths from dicts and records every request."""

    server = "https://127.0.0.1:6443"

    def __init__(self, core=None, apis=None):
        configmaps = {"resource": "configmaps", "responseKind": {"kind": "ConfigMap"}, "scope": "Namespaced"}
        self.core = core or {
            "kind": "APIGroupDiscoveryList",
            "items": [{"metadata": {"name": ""}, "versions": [{"version": "v1", "resources": [configmaps]}]}],
        }
        self.apis = apis or AGGREGATED
        self.requests = []
        self.events = []

    def identity(self):
        return "id0"

    def trace(self, **event):
        self.events.append(event)

    def request(self, method, path, **kw):
        self.requests.append(path)
        return {"/api": self.core, "/apis": self.apis}[path]


def test_discovery_is_fetched_once_then_read_from_the_cache_file(tmp_path):
    server = FakeServer()
    first = kc.Discovery(server, str(tmp_path), ttl=60)
    assert first.resource("apps/v1", "Deployment").plural == "deployments"
    assert server.requests == ["/api", "/apis"]
    cache = tmp_path / "127.0.0.1_6443" / "id0.json"
    assert oct(cache.stat().st_mode & 0o777) == "0o600"
    # another task (another process): no request at all
    other = FakeServer()
    second = kc.Discovery(other, str(tmp_path), ttl=60)
    res = second.resource("v1", "ConfigMap")
    assert (res.plural, res.namespaced, res.group) == ("configmaps", True, "")
    assert other.requests == []
    assert [e["event"] for e in other.events] == ["discovery-cache-read"]


def test_expired_cache_is_fetched_again(tmp_path):
    kc.Discovery(FakeServer(), str(tmp_path), ttl=60).resource("apps/v1", "Deployment")
    cache = tmp_path / "127.0.0.1_6443" / "id0.json"
    data = json.loads(cache.read_text())
    data["fetched"] = time.time() - 120
    cache.write_text(json.dumps(data))
    server = FakeServer()
    kc.Discovery(server, str(tmp_path), ttl=60).resource("apps/v1", "Deployment")
    assert server.requests == ["/api", "/apis"]


def test_missing_kind_refreshes_once_then_names_kind_and_group(tmp_path):
    kc.Discovery(FakeServer(), str(tmp_path), ttl=60).resource("apps/v1", "Deployment")
    server = FakeServer()
    disco = kc.Discovery(server, str(tmp_path), ttl=60)
    with pytest.raises(kc.KindNotServed) as err:
        disco.resource("example.com/v1", "Widget")
    assert server.requests == ["/api", "/apis"]  # one refresh
    assert "Widget in example.com/v1" in str(err.value)
    assert "nothing on this cluster provides API group example.com" in str(err.value)
    with pytest.raises(kc.KindNotServed):
        disco.resource("example.com/v1", "Gadget")
    assert server.requests == ["/api", "/apis"]  # not again in the same process


def test_refresh_finds_a_kind_installed_after_the_cache_was_written(tmp_path):
    kc.Discovery(FakeServer(), str(tmp_path), ttl=60).resource("apps/v1", "Deployment")
    grown = json.loads(json.dumps(AGGREGATED))
    widgets = {"resource": "widgets", "responseKind": {"kind": "Widget"}, "scope": "Cluster"}
    grown["items"].append(
        {"metadata": {"name": "example.com"}, "versions": [{"version": "v1", "resources": [widgets]}]}
    )
    server = FakeServer(apis=grown)
    res = kc.Discovery(server, str(tmp_path), ttl=60).resource("example.com/v1", "Widget")
    assert (res.plural, res.namespaced) == ("widgets", False)
    assert kc.resource_path(res, "w1") == "/apis/example.com/v1/widgets/w1"


def test_cluster_facts_reads_groups_and_resources_from_aggregated_discovery():
    groups, resources, stale = kc.parse_aggregated(AGGREGATED)
    data = {"aggregated": True, "groups": {"": ["v1"], **groups}, "resources": resources, "stale": stale}
    listing = kf.from_discovery(data, "/apis")
    assert [g["name"] for g in listing["groups"]] == ["apps", "packages.operators.coreos.com"]
    assert listing["groups"][0]["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}
    assert kf.from_discovery(data, "/apis/apps/v1")["resources"] == [
        {"name": "deployments", "kind": "Deployment", "namespaced": True, "verbs": ["get", "patch"]}
    ]
    assert kf.from_discovery(data, "/apis/packages.operators.coreos.com/v1") is None  # stale: like a 503
    assert kf.from_discovery(data, "/apis/example.com/v1") is None  # not served: like a 404
    assert kf.from_discovery(data, "/api/v1/nodes") is kf._NOT_FROM_DISCOVERY  # read from the server
    assert kf.from_discovery({**data, "aggregated": False}, "/apis") is kf._NOT_FROM_DISCOVERY


def test_not_served_messages():
    assert "served only in version(s) v1alpha1" in kc.not_served_message(
        "LLMInferenceService", "serving.kserve.io/v1alpha2", ["v1alpha1"]
    )
    msg = kc.not_served_message("LLMInferenceService", "serving.kserve.io/v1alpha2", None)
    assert "nothing on this cluster provides API group serving.kserve.io" in msg
    assert "openshift_ai" in msg  # who installs it, from cluster_facts.SERVING_APIS
    assert "has no kind Widget" in kc.not_served_message("Widget", "apps/v1", ["v1"], {"Deployment": []})


def test_safe_host_and_cache_dir():
    assert kc.safe_host("https://api.example.com:6443") == "api.example.com_6443"
    assert kc.default_cache_dir({"INFERENCE_BLUEPRINTS_CACHE_DIR": "/c"}) == "/c/discovery"
    assert kc.default_cache_dir({"XDG_CACHE_HOME": "/x"}) == "/x/inference-blueprints/discovery"


# ---------------------------------------------------------------------------- requests, errors


def test_retry_delay_honours_retry_after_and_caps_it():
    assert kc.retry_delay(0, "3") == 3.0
    assert kc.retry_delay(5, "1") == 1.0
    assert kc.retry_delay(0, "3600") == kc.MAX_RETRY_WAIT
    assert 0.3 <= kc.retry_delay(0, None) <= 0.7
    assert kc.retry_delay(10, None) <= 8.0 * 1.25
    assert kc.retryable(429, {}) and kc.retryable(503, {"Retry-After": "1"})
    assert not kc.retryable(503, {}) and not kc.retryable(409, {"Retry-After": "1"})


class _Resp:
    def __init__(self, status, body, headers=None):
        self.status, self.data, self.headers = status, json.dumps(body).encode(), headers or {}


class _Pool:
    def __init__(self, answers):
        self.answers = list(answers)
        self.calls = 0

    def request(self, *a, **kw):
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _client(tmp_path, answers, monkeypatch):
    from kubernetes import client as k8s

    cfg = k8s.Configuration()
    cfg.host = "https://127.0.0.1:1"
    client = kc.Client(cfg, {"INFERENCE_BLUEPRINTS_CACHE_DIR": str(tmp_path)})
    client._http = _Pool(answers)
    slept = []
    monkeypatch.setattr(kc.time, "sleep", slept.append)
    return client, slept


def test_throttled_requests_are_retried_after_the_servers_delay(tmp_path, monkeypatch):
    throttled = _Resp(
        429, {"kind": "Status", "reason": "TooManyRequests", "message": "slow down"}, {"Retry-After": "2"}
    )
    client, slept = _client(tmp_path, [throttled, throttled, _Resp(200, {"ok": 1})], monkeypatch)
    assert client.request("GET", "/api/v1/namespaces") == {"ok": 1}
    assert slept == [2.0, 2.0]


def _refused():
    import urllib3

    return urllib3.exceptions.MaxRetryError(
        None, "/api", urllib3.exceptions.NewConnectionError(None, "[Errno 111] Connection refused")
    )


def test_a_server_that_never_answered_this_host_fails_at_once_when_refused(tmp_path, monkeypatch):
    client, slept = _client(tmp_path, [_refused(), _Resp(200, {"ok": 1})], monkeypatch)
    with pytest.raises(kc.ClientError, match="cannot reach the API server .*Connection refused;"):
        client.request("GET", "/api/v1/namespaces")
    assert client._http.calls == 1 and slept == []


def test_a_server_that_answered_before_is_sent_the_request_again_while_it_restarts(tmp_path, monkeypatch):
    # the discovery cache on disk is the evidence: this host reached the server in an earlier run or task
    client, slept = _client(tmp_path, [_refused(), _refused(), _Resp(200, {"ok": 1})], monkeypatch)
    os.makedirs(os.path.dirname(client.discovery.path))
    open(client.discovery.path, "w").close()
    assert client.request("PATCH", "/api/v1/namespaces/x", body={}) == {"ok": 1}
    assert client._http.calls == 3 and len(slept) == 2


def test_a_server_down_longer_than_the_budget_fails_saying_how_long_it_was_tried(tmp_path, monkeypatch):
    clock = iter(range(0, 1000, 7))
    client, slept = _client(tmp_path, [_Resp(200, {}), *[_refused()] * 20], monkeypatch)
    monkeypatch.setattr(kc.time, "monotonic", lambda: float(next(clock)))
    client.request("GET", "/api")  # answered once in this process
    with pytest.raises(kc.ClientError, match=r"it answered before; sent again for \d+ s"):
        client.request("GET", "/api/v1/namespaces")
    assert client._http.calls < 21


def _own_pool(tmp_path):
    return kc.Configuration().pool_manager()


def _kubernetes_package_pool(tmp_path):  # exec plugins, auth providers: the kubernetes package's Configuration
    from kubernetes import client as k8s

    return kc.Client(k8s.Configuration(), {"INFERENCE_BLUEPRINTS_CACHE_DIR": str(tmp_path)})._http


@pytest.mark.parametrize("pool", [_own_pool, _kubernetes_package_pool])
def test_a_post_on_a_connection_the_server_closed_is_resent(pool, tmp_path):
    """A request the server closed its kept-alive connection on without answering is sent again, a POST too
    (urllib3 alone raises ProtocolError for it: a create after a wait past the server's idle timeout)."""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def serve() -> None:
        first, _ = srv.accept()
        first.recv(65536)
        first.close()  # read, no answer
        second, _ = srv.accept()
        second.recv(65536)
        second.sendall(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
        second.close()

    threading.Thread(target=serve, daemon=True).start()
    url = f"http://127.0.0.1:{srv.getsockname()[1]}/api/v1/namespaces"
    try:
        assert pool(tmp_path).request("POST", url, body=b"{}").status == 201
    finally:
        srv.close()


def test_throttling_that_does_not_end_is_a_clear_error(tmp_path, monkeypatch):
    throttled = _Resp(
        429, {"kind": "Status", "reason": "TooManyRequests", "message": "slow down"}, {"Retry-After": "1"}
    )
    client, slept = _client(tmp_path, [throttled] * (kc.MAX_RETRIES + 1), monkeypatch)
    with pytest.raises(kc.ApiError) as err:
        client.request("PATCH", "/api/v1/namespaces/a/configmaps/b", body={})
    assert len(slept) == kc.MAX_RETRIES
    assert "kept throttling patch of ConfigMap a/b (v1) (HTTP 429)" in kc.explain(
        err.value, "patch", "ConfigMap a/b (v1)"
    )


def _status(code, message, reason="", details=None):
    return kc.ApiError(
        "PATCH",
        "/x",
        code,
        json.dumps({"kind": "Status", "message": message, "reason": reason, "details": details or {}}).encode(),
    )


def test_forbidden_names_verb_resource_and_namespace_from_the_authorizer():
    err = _status(
        403,
        'configmaps "cfg" is forbidden: User "system:serviceaccount:a:b" cannot patch resource "configmaps" '
        'in API group "" in the namespace "team"',
        "Forbidden",
    )
    msg = kc.explain(err, "apply", "ConfigMap team/cfg (v1)")
    assert msg.startswith("forbidden: the credentials in use may not patch configmaps in namespace team")
    err = _status(
        403,
        'User "u" cannot create resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope',
    )
    assert "may not create clusterroles.rbac.authorization.k8s.io at cluster scope" in kc.explain(
        err, "apply", "ClusterRole x"
    )


def test_admission_denials_quote_the_reason():
    err = _status(400, 'admission webhook "vllm.example.com" denied the request: GPU count must be even')
    assert kc.explain(err, "apply", "LLMInferenceService a/m") == (
        "admission webhook vllm.example.com denied apply of LLMInferenceService a/m: GPU count must be even"
    )
    err = _status(
        403, "configmaps \"x\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'pb' denied request: no"
    )
    assert (
        kc.explain(err, "apply", "ConfigMap a/x") == "admission policy p (binding pb) denied apply of ConfigMap a/x: no"
    )


def test_conflict_names_fields_and_says_how_to_resolve():
    err = _status(
        409,
        'Apply failed with 1 conflict: conflict with "helm" using v1: .data.key',
        "Conflict",
        {"causes": [{"reason": "FieldManagerConflict", "message": 'conflict with "helm"', "field": ".data.key"}]},
    )
    msg = kc.explain(err, "apply", "ConfigMap a/x (v1)")
    assert ".data.key" in msg and 'conflict with "helm"' in msg and "force_conflicts: true" in msg


def test_object_not_found_is_told_apart_from_a_path_not_served():
    assert _status(404, 'configmaps "x" not found', "NotFound", {"name": "x", "kind": "configmaps"}).object_not_found(
        "x"
    )
    assert not _status(404, "the server could not find the requested resource", "NotFound").object_not_found("x")
    assert not kc.ApiError("GET", "/x", 404, b"404 page not found").object_not_found("x")


def test_connection_key_follows_the_kubeconfig_file(tmp_path):
    cfg = tmp_path / "kubeconfig"
    cfg.write_text("a")
    env = {}
    first = kc._connection_key({"kubeconfig": str(cfg)}, env)
    os.utime(cfg, (1, 1))
    assert kc._connection_key({"kubeconfig": str(cfg)}, env) != first
    assert kc._connection_key({"api_key": "t1"}, env) != kc._connection_key({"api_key": "t2"}, env)
    assert "t1" not in kc._connection_key({"api_key": "t1"}, env)


# ---------------------------------------------------------------------------- from_intent


@pytest.mark.parametrize(
    "run",
    [
        lambda p: ka.run({**p, "delivery": "apply", "state": "present"}),
        lambda p: kf.run({**p, "source": "cluster"}),
    ],
)
def test_the_modules_refuse_from_intent_which_only_the_controller_can_resolve(run):
    """The intent lives in the controller's facts: a module on a remote host cannot render it."""
    out = run({"from_intent": {"stage": "serving", "checks": True}, "objects": None, "definition": None})
    assert out["failed"] and "resolved by the action plugin on the controller" in out["msg"]
