"""What OpenShift AI 3.5's KServe (build tag distro) does at run time that upstream KServe does not
(issue 32 item 1), on a control plane of its own (the session default is upstream:
kserve_controller.DEFAULT_FLAVOR); each test
asserts on objects only its *_odh.go code creates or withholds:

* ``workload_permissions_odh.go``: a RoleBinding to ClusterRole ``openshift-ai-llminferenceservice-scc``
  for the ServiceAccounts of a MULTI-NODE workload only; a single-node P/D pool gets none, which is
  issue 32's "SCC refuses the P/D pods" (their ``IPC_LOCK`` is then judged by restricted-v2);
* ``router_platform_networking_odh.go``: with the OpenShift ingress Gateway (GatewayClass of
  ``openshift.io/gateway-controller/v1``, an Istio controller to it) and
  ``enableLLMInferenceServiceTLS``, Istio DestinationRules that originate TLS to the engines and the
  endpoint picker;
* ``router_preconditions_odh.go``: without Red Hat Connectivity Link's AuthPolicy CRD, a service that
  does not opt out of auth (``security.opendatahub.io/enable-auth: "false"``) gets no HTTPRoute;
* ``scheduler.go`` schedulerTransform, with the odh preset's router version 0.10.0: an inline scheduler config
  (the collection's) runs with a metrics-data-source plugin added, every scheduling profile as written
  (tests/kserve_checks.py INJECTED_PLUGINS).

Upstream v0.20.0 does none of these (tests/controlplane/test_kserve_controller.py runs it).
"""

from __future__ import annotations

import json

import pytest
import yaml

from controlplane import kserve_controller, kserve_rhoai
from controlplane.cluster import DEFAULT_PROFILE
from controlplane.test_kserve_controller import (
    EPP_CONFIG,
    ROUTER,
    apply,
    conditions,
    container,
    get,
    llmisvc,
    must_get,
    namespace,
    wait_for,
    wait_ready,
)
from tests.kserve_checks import INJECTED_PLUGINS

pytestmark = pytest.mark.cluster

NO_AUTH = {"security.opendatahub.io/enable-auth": "false"}


@pytest.fixture(scope="module")
def rcluster(cluster_factory):
    # a plane of its own while the session's default flavor is upstream (kserve_controller.DEFAULT_FLAVOR)
    cp = cluster_factory(DEFAULT_PROFILE, name="kserve-rhoai", kserve=True, kserve_flavor="rhoai")
    res = apply(cp, *kserve_controller.ingress_gateway())
    assert res.returncode == 0, res.stderr
    return cp


def opted_out(obj: dict) -> dict:
    obj["metadata"]["annotations"] = dict(NO_AUTH)
    return obj


def scc_binding(cp, ns: str, name: str) -> dict | None:
    return get(cp, "rolebinding", f"{name}-kserve-mn-scc", "-n", ns)


def test_multi_node_workload_gets_the_scc_binding(rcluster):
    ns, name = namespace(rcluster, "rhoai-mn"), "mn"
    obj = llmisvc(
        name,
        ns,
        replicas=1,
        parallelism={"data": 16, "dataLocal": 8},
        template={"containers": [container()]},
        worker={"containers": [container()]},
        router=ROUTER,
    )
    assert apply(rcluster, opted_out(obj)).returncode == 0
    wait_ready(rcluster, ns, name)
    rb = wait_for(lambda: scc_binding(rcluster, ns, name), timeout=30, what="the multi-node SCC RoleBinding")
    assert rb["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": kserve_rhoai.SCC_CLUSTER_ROLE,
    }
    lws = must_get(rcluster, "leaderworkerset", f"{name}-kserve-mn", "-n", ns)
    sa = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["serviceAccountName"]
    assert {"kind": "ServiceAccount", "name": sa} in [{k: s[k] for k in ("kind", "name")} for s in rb["subjects"]]
    # the ClusterRole it names is OpenShift AI's (config/overlays/odh/rbac/llmisvc): use of its SCC
    role = must_get(rcluster, "clusterrole", kserve_rhoai.SCC_CLUSTER_ROLE)
    assert any("securitycontextconstraints" in r.get("resources", []) and "use" in r["verbs"] for r in role["rules"])


def test_single_node_prefill_decode_gets_no_scc_binding(rcluster):
    """Issue 32's SCC defect at its source: the P/D pools are single-node Deployments, and OpenShift AI
    binds its SCC only to multi-node workloads, so their pods keep restricted-v2."""
    ns, name = namespace(rcluster, "rhoai-pd"), "pd"
    obj = llmisvc(
        name,
        ns,
        replicas=1,
        template={"containers": [container()]},
        prefill={"replicas": 1, "template": {"containers": [container()]}},
        router=ROUTER,
    )
    assert apply(rcluster, opted_out(obj)).returncode == 0
    svc = wait_ready(rcluster, ns, name)  # reconciled past reconcileWorkloadPlatformPermissions
    assert conditions(svc)["PrefillWorkloadReady"] == "True"
    assert scc_binding(rcluster, ns, name) is None
    bound = [rb["metadata"]["name"] for rb in get(rcluster, "rolebinding", "-n", ns)["items"]]
    assert not [n for n in bound if n.endswith("-scc")], bound  # (the endpoint picker's own binding stays)


def test_istio_gateway_gets_tls_destination_rules(rcluster):
    ns, name = namespace(rcluster, "rhoai-tls"), "tls"
    obj = llmisvc(name, ns, replicas=1, template={"containers": [container()]}, router=ROUTER)
    assert apply(rcluster, opted_out(obj)).returncode == 0
    wait_ready(rcluster, ns, name)
    workload = must_get(rcluster, "destinationrule.networking.istio.io", f"{name}-kserve-workload-svc", "-n", ns)
    tls = workload["spec"]["trafficPolicy"]["tls"]
    assert tls["mode"] == "SIMPLE" and tls["sni"] == f"{name}-kserve-workload-svc.{ns}.svc.cluster.local"
    sched = must_get(rcluster, "destinationrule.networking.istio.io", f"{name}-kserve-scheduler", "-n", ns)
    assert sched["spec"]["trafficPolicy"]["tls"]["mode"] == "SIMPLE"


def test_without_connectivity_link_a_service_with_auth_gets_no_route(rcluster):
    ns, name = namespace(rcluster, "rhoai-auth"), "auth"
    obj = llmisvc(name, ns, replicas=1, template={"containers": [container()]}, router=ROUTER)
    assert apply(rcluster, obj).returncode == 0  # no enable-auth annotation: auth is on by default

    def refused():
        svc = get(rcluster, "llminferenceservice", name, "-n", ns) or {}
        c = {x["type"]: x for x in (svc.get("status") or {}).get("conditions") or []}
        return "AuthPolicy CRD is not available" in c.get("HTTPRoutesReady", {}).get("message", "")

    wait_for(refused, timeout=60, what="OpenShift AI's refusal to route without an AuthPolicy CRD")
    assert get(rcluster, "httproute", "-n", ns)["items"] == []


def test_an_inline_scheduler_config_runs_with_the_metrics_data_source_added(rcluster):
    ns, name = namespace(rcluster, "rhoai-epp"), "epp"
    router = ROUTER | {"scheduler": {"config": {"inline": EPP_CONFIG}}}
    obj = llmisvc(name, ns, replicas=1, template={"containers": [container()]}, router=router)
    assert apply(rcluster, opted_out(obj)).returncode == 0
    wait_ready(rcluster, ns, name)
    epp = must_get(rcluster, "deployment", f"{name}-kserve-router-scheduler", "-n", ns)
    main = next(c for c in epp["spec"]["template"]["spec"]["containers"] if c["name"] == "main")
    running = yaml.safe_load(main["args"][main["args"].index("--config-text") + 1])
    ours = [p["type"] for p in EPP_CONFIG["plugins"]]
    runs = [p["type"] for p in running["plugins"]]
    added = [t for t in runs if t not in ours]
    assert added == list(INJECTED_PLUGINS), runs
    assert [t for t in runs if t in ours] == ours
    assert running["schedulingProfiles"] == EPP_CONFIG["schedulingProfiles"]


def test_the_forks_crds_convert_through_its_webhook_set_before_the_api_server_started(rcluster):
    """The fork's LLMInferenceService(Config) CRDs send conversions to its webhook on this plane; restored from the
    etcd snapshot, kcp wrote that into them before kube-apiserver started (cmd/kcp/conversions.go): no PATCH of
    spec.conversion went through the API, so no field manager owns it."""
    names = set(kserve_rhoai.conversion_patches(0, ""))
    assert names == {"llminferenceservices.serving.kserve.io", "llminferenceserviceconfigs.serving.kserve.io"}
    for name in names:
        crd = must_get(rcluster, "crd", name)
        hook = crd["spec"]["conversion"]["webhook"]["clientConfig"]
        assert hook["url"].startswith(f"https://127.0.0.1:{rcluster.kserve.webhook_port}/"), hook["url"]
        managed = json.dumps([m.get("fieldsV1", {}) for m in crd["metadata"].get("managedFields") or []])
        assert ("f:conversion" in managed) is not rcluster.restored, (rcluster.restored, managed)
    assert rcluster.conversions_set == (names if rcluster.restored else set())
