"""The AI grid example converges on the local control plane with the real KServe controller.

``site.yml`` converges inventories/example-ai-grid (three model classes, five tenants over three
tiers) on profile grid-h100: every object, the Envoy Gateway and Envoy AI Gateway ones included,
is accepted by the API server under strict field validation against the upstream CRDs; a second
run changes nothing; KServe's controller reconciles the three services to Ready with their
schedulers, pools and LeaderWorkerSets as the intent says (tests/kserve_checks.py); the tenant
routes point at the pools KServe created and the ScaledObjects at the workloads it created.
Bad grid input stops the run before anything is applied.
"""

from __future__ import annotations

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from controlplane import artifacts
from kubernetes import dynamic
from kubernetes.client.rest import ApiException

from tests.ansible_run import run_playbook
from tests.kserve_checks import check_intent
from tests.serving_helpers import INVENTORIES, PLAYBOOKS

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SITE = "example-ai-grid"
PROFILE = "grid-h100"


ADOPT = artifacts.adopted(cli.site_intents(str(INVENTORIES / SITE), None).values())


def _converge(cluster, tmp_path, **extra):
    return run_playbook(
        PLAYBOOKS / "site.yml",
        INVENTORIES / SITE,
        kubeconfig=cluster.kubeconfig,
        # the namespace of the staged pvc:// weights exists before the first converge: the site adopts it
        extravars={"report_dir": str(tmp_path / "reports"), "adopt": ADOPT, **extra},
    )


def _list(dyn, api_version, kind, ns):
    return [o.to_dict() for o in dyn.resources.get(api_version=api_version, kind=kind).get(namespace=ns).items]


@pytest.fixture(scope="module")
def grid(cluster_factory, tmp_path_factory):
    cluster = cluster_factory(PROFILE)
    tmp = tmp_path_factory.mktemp("grid")
    # the site's pvc:// weights, staged before the converge as its storage team would (else the pods
    # that mount them stay Pending: kube-scheduler runs here)
    for intent in cli.site_intents(str(INVENTORIES / SITE), None).values():
        artifacts.stage(cluster.new_api_client(), intent)
    first = _converge(cluster, tmp)
    assert first.rc == 0, first.failure_messages() or first.stdout[-4000:]
    yield cluster, tmp, first
    # this module's own (no other test of the integration session runs this profile): an idle plane costs CPU
    # for the rest of the session, which runs this module first
    cluster_factory.release(PROFILE)


def test_the_grid_converges_and_a_second_run_changes_nothing(grid):
    cluster, tmp, first = grid
    applied = [o for r in first.results_of("inference.blueprints.k8s_apply") for o in r.get("objects", [])]
    kinds = {o.get("kind") for o in applied}
    for k in (
        "LLMInferenceService",
        "AIGatewayRoute",
        "BackendTrafficPolicy",
        "SecurityPolicy",
        "ClientTrafficPolicy",
        "EnvoyExtensionPolicy",
        "Gateway",
        "InferenceObjective",
        "ScaledObject",
    ):
        assert k in kinds, f"{k} was not applied"
    second = _converge(cluster, tmp)
    assert second.rc == 0, second.failure_messages() or second.stdout[-4000:]
    changed = [
        (
            r[1],
            [
                (o.get("kind"), o.get("name"), o.get("action"))
                for o in r[4].get("objects", [])
                if o.get("action") != "unchanged"
            ],
        )
        for r in second.results
        if r[3] == "ok" and r[4].get("changed")
    ]
    assert second.changed == 0, f"second run changed: {changed}"


def test_kserve_made_what_the_intent_says(grid):
    cluster, _tmp, _first = grid
    dyn = dynamic.DynamicClient(cluster.new_api_client())
    for host, intent in cli.site_intents(str(INVENTORIES / SITE), None).items():
        problems = check_intent(dyn, intent)
        assert not problems, f"{host}: what KServe made of the grid differs from its intent:\n" + "\n".join(problems)
        ns = intent["serving"]["namespace"]
        # the flagship runs across nodes: KServe created a LeaderWorkerSet with groups over one node
        lws = _list(dyn, "leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", ns)
        assert any(o["spec"]["leaderWorkerTemplate"]["size"] > 1 for o in lws), [o["metadata"]["name"] for o in lws]
        # the tenant routes send traffic to the pools KServe created, never to one it did not
        pools = {o["metadata"]["name"] for o in _list(dyn, "inference.networking.k8s.io/v1", "InferencePool", ns)}
        assert len(pools) == 3
        routes = _list(dyn, "aigateway.envoyproxy.io/v1beta1", "AIGatewayRoute", ns)
        assert len(routes) == len(intent["gateway"]["tenants"])
        targets = {b["name"] for r in routes for rule in r["spec"]["rules"] for b in rule["backendRefs"]}
        assert targets <= pools, targets - pools
        # the objectives the gateway names exist for the pools they route to
        objectives = {
            o["metadata"]["name"]: o["spec"]["poolRef"]["name"]
            for o in _list(dyn, "llm-d.ai/v1alpha2", "InferenceObjective", ns)
        }
        for t in intent["gateway"]["tenants"]:
            for rule in t["rules"]:
                assert objectives.get(rule["objective"]) == rule["pool"], (t["name"], rule)


@pytest.mark.parametrize(
    ("index", "change", "expected"),
    [
        (0, {"credential": "sk-live-abcdef"}, "tenants[0].credential: an inline credential"),
        (1, {"tier": "platinum"}, "tenants[1].tier: unknown tier 'platinum'"),
        (2, {"models": ["qwen-27b", "qwen-70b"]}, "tenants[2].models[1]: unknown model 'qwen-70b'"),
        (3, {"tokens_per_minute": 0}, "tenants[3].tokens_per_minute: must be > 0, got 0"),
    ],
)
def test_bad_grid_input_applies_nothing(grid, index, change, expected):
    cluster, tmp, _first = grid
    values, _ = cli.load_site_vars(str(INVENTORIES / SITE))["grid-central-1"]
    tenants = [dict(t) for t in values["tenants"]]
    tenants[index].update(change)
    run = _converge(cluster, tmp, tenants=tenants, serving_namespace="grid-bad-input")
    assert run.rc != 0
    msg = " ".join(str(r[4].get("msg", "")) for r in run.failures())
    assert expected in msg, msg
    assert "sk-live-abcdef" not in run.stdout
    assert run.results_of("inference.blueprints.k8s_apply") == [], "objects were applied before validation failed"
    core = dynamic.DynamicClient(cluster.new_api_client()).resources.get(api_version="v1", kind="Namespace")
    with pytest.raises(ApiException) as err:
        core.get(name="grid-bad-input")
    assert err.value.status == 404
