"""The regulated pin on the cluster: the sovereign cluster's rendered front door and its
ValidatingAdmissionPolicy applied to the local control plane's real kube-apiserver (with the upstream
Gateway API and Envoy Gateway CRDs). The API server accepts the rendered route and refuses every edit
that could send a regulated, unclassified or unknown-class request to the burst backend, and any move
of the on-prem Backend. Its render-time half is tests/unit/intent/test_burst.py.

The engine image: the real KServe controller (KCP_KSERVE, on by default) turns the sovereign cluster's
rendered LLMInferenceService into workloads whose container main runs ``sovereign_burst.engine_image``
(its strategic merge over the preset keeps the preset's command), on a Deployment and, for a
data-parallel pool, on the LeaderWorkerSet's leader and worker pods.
"""

from __future__ import annotations

import copy
import json
import time

import pytest
import yaml
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils.intent import build
from ansible_collections.inference.blueprints.plugins.plugin_utils import render

from tests.serving_helpers import INVENTORIES, kubectl_apply

pytestmark = [pytest.mark.cluster]

SITE = INVENTORIES / "example-sovereign-burst"
SOV = "onprem-fra-1"
BDIR = [str(INVENTORIES.parent / "blueprints")]
KSERVE_NAMESPACE = "redhat-ods-applications"  # where the plane's KServe controller keeps its presets


def _apply(cluster, objs: list[dict], dry_run: bool = False):
    return kubectl_apply(cluster, objs, "test-sovereign-burst", dry_run)


@pytest.fixture(scope="module")
def front_door(cluster):
    intent = cli.site_intents(str(SITE), None)[SOV]
    objs = render.render_component("burst_routing", intent)
    ns = intent["burst"]["namespace"]
    made = _apply(cluster, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}])
    assert made.returncode == 0, made.stderr
    done = _apply(cluster, objs)
    assert done.returncode == 0, done.stderr
    by_kind = {}
    for o in objs:
        by_kind.setdefault(o["kind"], []).append(o)
    (route,) = by_kind["HTTPRoute"]
    # the policy is in force once the API server refuses a catch-all rule to the burst backend (its
    # informer takes a moment after the policy and binding are created)
    bad = _catch_all_to_burst(route)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if _apply(cluster, [bad], dry_run=True).returncode != 0:
            break
        time.sleep(1)
    else:
        pytest.fail("the ValidatingAdmissionPolicy never came into force")
    yield intent, by_kind
    cluster.kubectl("delete", "--ignore-not-found", "-f", "-", input=yaml.safe_dump_all(objs))


def _burst_ref(route: dict) -> dict:
    return next(b for r in route["spec"]["rules"] for b in r["backendRefs"] if "-to-" in b["name"])


def _catch_all_to_burst(route: dict) -> dict:
    bad = copy.deepcopy(route)
    bad["spec"]["rules"][-1]["backendRefs"].append(_burst_ref(route))
    return bad


def test_the_rendered_front_door_is_accepted_with_the_policy_in_force(cluster, front_door):
    _intent, by_kind = front_door
    (route,) = by_kind["HTTPRoute"]
    again = _apply(cluster, [route, *by_kind["Backend"]], dry_run=True)
    assert again.returncode == 0, again.stderr
    live = json.loads(
        cluster.kubectl(
            "get", "httproute", "-n", route["metadata"]["namespace"], route["metadata"]["name"], "-o", "json"
        ).stdout
    )
    assert [b["name"] for b in live["spec"]["rules"][0]["backendRefs"]][-1] == _burst_ref(route)["name"]


def _edits(route: dict) -> dict[str, dict]:
    out = {"catch-all rule to the burst backend": _catch_all_to_burst(route)}
    r = copy.deepcopy(route)
    r["spec"]["rules"][0]["matches"][0]["headers"][0]["value"] = "regulated"
    out["burstable rule now matching the regulated class"] = r
    r = copy.deepcopy(route)
    del r["spec"]["rules"][0]["matches"][0]["headers"]
    out["burstable rule without its class header"] = r
    r = copy.deepcopy(route)
    r["spec"]["rules"][0]["matches"][0]["headers"][0].update(type="RegularExpression", value=".*")
    out["class header as a regular expression"] = r
    r = copy.deepcopy(route)
    r["spec"]["rules"][0]["matches"].append({"path": {"type": "PathPrefix", "value": "/"}})
    out["a second match without a class on the burstable rule"] = r
    r = copy.deepcopy(route)
    r["metadata"]["name"] = "side-door"
    r["spec"]["rules"] = [{"backendRefs": [_burst_ref(route)]}]
    out["a new route on the front door straight to the burst backend"] = r
    return out


@pytest.mark.parametrize(
    "edit",
    [
        "catch-all rule to the burst backend",
        "burstable rule now matching the regulated class",
        "burstable rule without its class header",
        "class header as a regular expression",
        "a second match without a class on the burstable rule",
        "a new route on the front door straight to the burst backend",
    ],
)
def test_the_api_server_refuses_a_route_that_can_send_regulated_traffic_to_the_burst_cluster(cluster, front_door, edit):
    _intent, by_kind = front_door
    (route,) = by_kind["HTTPRoute"]
    refused = _apply(cluster, [_edits(route)[edit]], dry_run=True)
    assert refused.returncode != 0, f"{edit}: accepted"
    assert "regulated pin" in refused.stderr and "denied request" in refused.stderr.lower(), refused.stderr


def test_the_api_server_refuses_moving_the_on_prem_backend(cluster, front_door):
    intent, by_kind = front_door
    onprem = next(
        b for b in by_kind["Backend"] if b["metadata"]["name"] == intent["burst"]["front_door"]["onprem"]["name"]
    )
    moved = copy.deepcopy(onprem)
    moved["spec"]["endpoints"][0]["fqdn"]["hostname"] = "inference.apps.burst-aws-1.example.com"
    refused = _apply(cluster, [moved], dry_run=True)
    assert refused.returncode != 0 and "regulated pin" in refused.stderr, refused.stderr
    fallback = copy.deepcopy(onprem)
    fallback["spec"]["fallback"] = True
    assert _apply(cluster, [fallback], dry_run=True).returncode != 0


# ------------------------------------------------------------------ the engine image, through KServe
@pytest.fixture(scope="module")
def kserve_plane(cluster, cluster_factory):
    """The session's plane when it runs the real KServe controller, else a plane of its own that does."""
    if cluster.kserve_enabled:
        yield cluster
        return
    yield cluster_factory(cluster.profile_name, name="sovereign-burst-kserve", kserve=True)
    cluster_factory.release("sovereign-burst-kserve")  # this module's own


def _get(plane, *args) -> dict | None:
    res = plane.kubectl("get", *args, "-o", "json")
    return json.loads(res.stdout) if res.returncode == 0 else None


def _wait_get(plane, *args, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        obj = _get(plane, *args)
        if obj:
            return obj
        time.sleep(0.5)
    pytest.fail(f"KServe created no {' '.join(args)} within {timeout:g} s")


def _main(pod_spec: dict) -> dict:
    return next(c for c in pod_spec["containers"] if c["name"] == "main")


def _serve(plane, intent: dict, namespace: str) -> list[dict]:
    """Apply the model_service objects of an intent (its Namespace and LLMInferenceServices) to namespace."""
    objs = render.render_component("model_service", intent)
    for o in objs:
        if o["kind"] == "Namespace":
            o["metadata"]["name"] = namespace
        else:
            o["metadata"]["namespace"] = namespace
    done = _apply(plane, objs)
    assert done.returncode == 0, done.stderr
    return [o for o in objs if o["kind"] == "LLMInferenceService"]


def _delete(plane, objs: list[dict]) -> None:
    plane.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", input=yaml.safe_dump_all(objs))


def test_kserve_runs_the_engine_image_on_the_sovereign_models_deployment(kserve_plane):
    engine = cli.load_site_vars(str(SITE))[SOV][0]["sovereign_burst"]["engine_image"]
    intent = cli.site_intents(str(SITE), None)[SOV]
    (m,) = intent["serving"]["models"]
    assert m["names"]["main_workload_kind"] == "Deployment"
    preset = _get(kserve_plane, "llminferenceserviceconfig", "kserve-config-llm-template", "-n", KSERVE_NAMESPACE)
    assert preset, "the KServe controller installs its presets at start"
    assert _main(preset["spec"]["template"])["image"] != engine  # the image below is ours, not the preset's
    # OpenShift AI's inference Gateway (its DSC creates it on a cluster): KServe writes its route only once the
    # Gateway its route template names exists
    gw = intent["options"]["model_service"]["model_service_gateway"]
    ocp = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": gw["namespace"]}},
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "openshift-default"},
            "spec": {"controllerName": "openshift.io/gateway-controller/v1"},
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": gw,
            "spec": {
                "gatewayClassName": "openshift-default",
                "listeners": [
                    {"name": "http", "protocol": "HTTP", "port": 80, "allowedRoutes": {"namespaces": {"from": "All"}}}
                ],
            },
        },
    ]
    # only what the plane lacks, and removed again: the plane is the session's, and a converge of a site there
    # must not find a Gateway it did not create (it would refuse to take it over)
    ours = [
        o
        for o in ocp
        if o["kind"] != "Namespace"
        and not _get(
            kserve_plane,
            o["kind"].lower(),
            *(["-n", o["metadata"]["namespace"]] if o["metadata"].get("namespace") else []),
            o["metadata"]["name"],
        )
    ]
    made = _apply(kserve_plane, [o for o in ocp if o["kind"] == "Namespace"] + ours)
    assert made.returncode == 0, made.stderr
    svcs = _serve(kserve_plane, intent, intent["serving"]["namespace"])
    try:
        dep = _wait_get(kserve_plane, "deployment", m["names"]["main_workload"], "-n", intent["serving"]["namespace"])
        main = _main(dep["spec"]["template"]["spec"])
        assert main["image"] == engine
        # merged by container name: the preset's command and our engine arguments stay on the container
        assert "vllm serve" in " ".join(main.get("command") or []), main.get("command")
        env = {e["name"]: e.get("value") for e in main.get("env") or []}
        assert env["VLLM_ADDITIONAL_ARGS"] == _main(m["main"]["template"])["env"][0]["value"]
        # KServe's own route matches the model's path on any Host: the Host the front door sends (its own
        # Service name on-prem, the public name on a burst cluster, whose gateway forwards it) reaches it
        route = _wait_get(kserve_plane, "httproute", f"{m['name']}-kserve-route", "-n", intent["serving"]["namespace"])
        assert not route["spec"].get("hostnames"), route["spec"].get("hostnames")
        prefixes = [
            mt["path"]["value"] for r in route["spec"]["rules"] for mt in r.get("matches") or [] if "path" in mt
        ]
        assert any(p.startswith(f"/{intent['serving']['namespace']}/{m['name']}/") for p in prefixes), prefixes
    finally:
        _delete(kserve_plane, svcs + ours)


def test_kserve_runs_the_engine_image_on_the_leader_and_worker_pods_of_a_data_parallel_pool(kserve_plane):
    """The sovereign model at a higher load plans data parallelism: KServe's data-parallel preset, whose
    worker pods run the engine image too (spec.worker's container main)."""
    values, names = cli.load_site_vars(str(SITE))[SOV]
    values = copy.deepcopy(values)
    engine = values["sovereign_burst"]["engine_image"]
    values["models"][0]["traffic"].update(concurrent_sessions=5000, arrival_rate_rps=25)
    intent = build.site_intent(SOV, values, list(names), BDIR)
    (m,) = intent["serving"]["models"]
    assert m["names"]["main_workload_kind"] == "LeaderWorkerSet", m["main"]["parallelism"]
    ns = "llm-sovereign-dp"
    svcs = _serve(kserve_plane, intent, ns)
    try:
        lws = _wait_get(kserve_plane, "leaderworkerset", m["names"]["main_workload"], "-n", ns)
        tmpl = lws["spec"]["leaderWorkerTemplate"]
        for role in ("leaderTemplate", "workerTemplate"):
            main = _main(tmpl[role]["spec"])
            assert main["image"] == engine, role
            assert "--data-parallel-size" in " ".join((main.get("command") or []) + (main.get("args") or [])), role
    finally:
        _delete(kserve_plane, svcs)
        kserve_plane.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false")
