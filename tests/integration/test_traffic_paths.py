"""Every traffic path serving needs, evaluated against the NetworkPolicies present (issue 32 item 3).

The chat site (P/D, a multi-node decode engine) and the AI grid (an Envoy Gateway front door that sends to the
InferencePools itself, P/D and multi-node pools) are rendered as the model_service role renders them, their
LLMInferenceServices and NetworkPolicies applied to the session's KServe plane, and the pods KServe's controller
makes are the ends of the paths (tests/netpol_paths.py). cyclonus's policy matcher decides each path against every
policy on the plane plus one of two that a real cluster may hold:

* deny-by-default in the namespace (OpenShift's documented multitenant project template starts there);
* the policy a later OpenShift AI build puts on workload and router pods (red-hat-data-services/kserve
  monitoring_network_policy_odh.go at 20bd5c6d, read in review): ports 8000 and 9002 admitted only from the ingress
  namespace, monitoring and the same namespace. Written here in our words from that description.

With the site's policies every path is open under both; without them (the render before this issue) the paths are
shut, the AI grid's gateway -> picker among them under the second; and what the site's policies admit is exact: a
pod of another namespace, or a gateway on a port no path uses, stays out.
"""

from __future__ import annotations

import copy
import json
import time

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils.intent import traffic_paths as tp
from ansible_collections.inference.blueprints.plugins.plugin_utils import render
from controlplane import kserve_controller
from controlplane.cluster import DEFAULT_PROFILE

from tests import netpol_paths as npp
from tests.kserve_checks import accounts_for
from tests.serving_helpers import INVENTORIES

pytestmark = pytest.mark.cluster

SITES = {"chat": ("example-chat", "chat-east-1"), "grid": ("example-ai-grid", "grid-central-1")}


@pytest.fixture(scope="module")
def plane(cluster_factory):
    # the session's KServe plane (tests/integration/test_kserve_workloads.py and the controller tests use it too)
    cp = cluster_factory(DEFAULT_PROFILE, name="kserve", kserve=True)
    gateway = kserve_controller.ingress_gateway()
    res = cp.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in gateway))
    assert res.returncode == 0, res.stderr
    return cp


def deny_all(ns: str) -> dict:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "deny-by-default", "namespace": ns},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }


def later_openshift_ai(ns: str) -> dict:
    """Ports 8000/9002 of the workload and router pods from the ingress namespace, monitoring and the same
    namespace only (our words for the later build's policy)."""
    peers = [
        {"namespaceSelector": {"matchLabels": {tp.NS_NAME_LABEL: "openshift-ingress"}}},
        {"namespaceSelector": {"matchLabels": {tp.NS_NAME_LABEL: "openshift-monitoring"}}},
        {"namespaceSelector": {"matchLabels": {tp.NS_NAME_LABEL: tp.USER_WORKLOAD_MONITORING}}},
        {"podSelector": {}},
    ]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "kserve-llmisvc-workloads", "namespace": ns},
        "spec": {
            "podSelector": {"matchLabels": tp.PART_OF},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": peers, "ports": [{"protocol": "TCP", "port": 8000}, {"protocol": "TCP", "port": 9002}]}
            ],
        },
    }


@pytest.fixture(scope="module", params=sorted(SITES))
def site(plane, request):
    """(intent bound to a namespace of this test, the rendered NetworkPolicies, the flows of its paths)."""
    inventory, host = SITES[request.param]
    intent = copy.deepcopy(cli.site_intents(str(INVENTORIES / inventory), None)[host])
    ns = f"paths-{request.param}"
    intent["serving"]["namespace"] = ns
    intent["serving"]["network_policies"] = tp.network_policies(intent)
    objs = render.render_components(intent["stages"]["serving"], intent)
    applied = [o for o in objs if o["kind"] in ("LLMInferenceService", "NetworkPolicy")]
    accounts = [a for o in applied if o["kind"] == "LLMInferenceService" for a in accounts_for(objs, o, ns)]
    policies = [o for o in applied if o["kind"] == "NetworkPolicy"]
    assert policies and all(o["metadata"]["namespace"] == ns for o in applied)
    plane.kubectl("create", "namespace", ns)
    res = plane.kubectl(
        "apply", "--server-side", "-f", "-", input="\n---\n".join(json.dumps(o) for o in [*accounts, *applied])
    )
    assert res.returncode == 0, res.stderr
    paths = tp.paths(intent)
    templates, problems = [], ["KServe made no workloads yet"]
    # the session's KServe plane may be busy with other modules' services: its controller's first reconcile of a
    # P/D, multi-node service took over 90 s in a loaded make test
    end = time.monotonic() + 300
    while problems and time.monotonic() < end:
        time.sleep(0.5)
        templates = npp.pod_templates(plane, ns)
        flows, problems = npp.resolve(paths, ns, templates)
    assert not problems, "\n".join(problems)
    yield {"ns": ns, "intent": intent, "policies": policies, "flows": flows, "name": request.param}
    plane.kubectl("delete", "namespace", ns, "--wait=false")


def _theirs(plane, ns: str) -> list[dict]:
    """Every policy on the plane but the site's own."""
    return [
        p
        for p in npp.live_policies(plane)
        if not p["metadata"]["name"].endswith("-paths") or p["metadata"]["namespace"] != ns
    ]


@pytest.mark.parametrize("baseline", [deny_all, later_openshift_ai], ids=["deny-by-default", "later-openshift-ai"])
def test_every_path_serving_needs_is_open_with_the_sites_policies(plane, site, baseline):
    policies = npp.live_policies(plane) + [baseline(site["ns"])]
    assert any(p["metadata"]["name"].endswith("-paths") for p in policies if p["metadata"]["namespace"] == site["ns"])
    shut = npp.blocked(npp.evaluate(policies, site["flows"]))
    assert not shut, "paths serving needs are blocked:\n" + "\n".join(f"{k}\n{v}" for k, v in shut.items())


def test_without_the_sites_policies_the_paths_are_shut(plane, site):
    """The render before this issue: no policy of the site's. Deny-by-default shuts every path; the later OpenShift
    AI policy shuts the AI grid's Envoy Gateway proxies out of the picker and the engines."""
    theirs = _theirs(plane, site["ns"])
    shut = npp.blocked(npp.evaluate(theirs + [deny_all(site["ns"])], site["flows"]))
    assert set(shut) == {f["name"] for f in site["flows"]}
    shut = npp.blocked(npp.evaluate(theirs + [later_openshift_ai(site["ns"])], site["flows"]))
    if site["name"] == "grid":
        assert any("gateway ai-grid -> picker" in name for name in shut), sorted(shut)
        assert any("gateway ai-grid -> engine" in name for name in shut), sorted(shut)


def test_the_sites_policies_admit_nothing_else(plane, site):
    policies = npp.live_policies(plane)
    engine = next(f for f in site["flows"] if f["name"].endswith("-> engine"))
    stranger = {"namespace": "tenant-x", "namespaceLabels": {tp.NS_NAME_LABEL: "tenant-x"}, "podLabels": {"app": "x"}}
    wrong_port = {**engine, "name": "gateway on the NIXL port", "port": 5600}
    from_stranger = {**engine, "name": "another namespace's pod", "source": stranger}
    verdicts = npp.evaluate(policies, [wrong_port, from_stranger, engine])
    assert [v["allowed"] for v in verdicts] == [False, False, True], [v["explanation"] for v in verdicts]
