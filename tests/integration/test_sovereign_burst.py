"""The regulated pin on the cluster: the sovereign cluster's rendered front door and its
ValidatingAdmissionPolicy applied to the local control plane's real kube-apiserver (with the upstream
Gateway API and Envoy Gateway CRDs). The API server accepts the rendered route and refuses every edit
that could send a regulated, unclassified or unknown-class request to the burst backend, and any move
of the on-prem Backend. Its render-time half is tests/unit/intent/test_burst.py.
"""

from __future__ import annotations

import copy
import json
import time

import pytest
import yaml
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.plugin_utils import render

from tests.serving_helpers import INVENTORIES

pytestmark = [pytest.mark.cluster]

SITE = INVENTORIES / "example-sovereign-burst"
SOV = "onprem-fra-1"


def _apply(cluster, objs: list[dict], dry_run: bool = False):
    text = yaml.safe_dump_all(objs, sort_keys=False)
    args = ["apply", "--server-side", "--field-manager=test-sovereign-burst", "--force-conflicts", "-f", "-"]
    if dry_run:
        args.append("--dry-run=server")
    return cluster.kubectl(*args, input=text)


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
