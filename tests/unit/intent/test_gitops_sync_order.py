"""The GitOps tree's sync waves put every object after the objects it reads, and its health checks and sync
timeout let a wave that cannot become healthy show as such (issue 34: the sync deadlocked)."""

from __future__ import annotations

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils.intent import gitops as gitops_mod
from ansible_collections.inference.blueprints.plugins.module_utils.intent import sync_order
from ansible_collections.inference.blueprints.plugins.plugin_utils import gitops
from test_gitops import EXAMPLES, GITOPS, INVENTORIES, _health, _lua_health, _resources, _tree

WAVE = "argocd.argoproj.io/sync-wave"


def _reads(obj: dict) -> list[tuple[str, str]]:
    """(kind, name) of the objects in its namespace that ``obj`` reads, by what KEDA and the token controller
    read: a TriggerAuthentication's Secrets, a ScaledObject's TriggerAuthentications, a token Secret's
    ServiceAccount, a monitor's credentials Secret."""
    spec, kind = obj.get("spec") or {}, obj["kind"]
    if kind == "TriggerAuthentication":
        return [("Secret", r["name"]) for r in spec.get("secretTargetRef") or []]
    if kind == "ScaledObject":
        refs = [t.get("authenticationRef") for t in spec.get("triggers") or []]
        return [(r.get("kind") or "TriggerAuthentication", r["name"]) for r in refs if r]
    if kind == "Secret" and obj.get("type") == "kubernetes.io/service-account-token":
        return [("ServiceAccount", obj["metadata"]["annotations"]["kubernetes.io/service-account.name"])]
    if kind in ("ServiceMonitor", "PodMonitor"):
        ends = spec.get("endpoints") or spec.get("podMetricsEndpoints") or []
        creds = [((e.get("authorization") or {}).get("credentials") or {}) for e in ends]
        return [("Secret", c["name"]) for c in creds if c.get("name")]
    return []


@pytest.mark.parametrize("site", EXAMPLES)
def test_every_object_syncs_after_the_objects_it_reads(site, tmp_path):
    """Argo CD applies one wave and waits for it to be healthy before the next: a ScaledObject whose
    TriggerAuthentication's Secret comes in a later wave is never Ready (KEDA cannot build its scaler), so the
    wave holding it never ends. Every object the tree holds that another reads is in an earlier Application
    wave, or in the same Application (Argo CD applies ServiceAccounts and Secrets before custom kinds)."""
    intents, _, root = _tree(site, tmp_path)
    for host in intents:
        where, uses = {}, []
        for app in _resources(root, f"clusters/{host}/apps"):
            at = (int(app["metadata"]["annotations"][WAVE]), app["metadata"]["name"])
            for obj in _resources(root, app["spec"]["source"]["path"]):
                ns = obj["metadata"].get("namespace")
                where[(obj["kind"], ns, obj["metadata"]["name"])] = at
                uses += [((k, ns, n), at, f"{obj['kind']}/{obj['metadata']['name']}") for k, n in _reads(obj)]
        assert uses or site == "example-edge-fleet", "the examples with autoscaling read the metrics reader"
        late = [
            (what, key, where[key])
            for key, at, what in uses
            if key in where and not (where[key][0] < at[0] or where[key][1] == at[1])
        ]
        assert not late, (host, late)


def test_the_order_keeps_the_blueprint_order_where_nothing_is_read():
    order = ["a", "b", "c", "d"]
    assert sync_order.ordered(order, {}) == order
    assert sync_order.ordered(order, {"b": {"d"}}) == ["a", "c", "d", "b"]
    assert sync_order.ordered(order, {"b": {"x"}}) == order, "a component not in the tree orders nothing"
    with pytest.raises(ValueError, match="need each other"):
        sync_order.ordered(order, {"a": {"b"}, "b": {"a"}})


def test_an_application_health_check_passes_a_degraded_child_on():
    """The app-of-apps waits for a child Application to be Healthy; a Degraded child mapped to Progressing kept
    the root Progressing forever (no sync ends a Progressing wave), hiding the failure."""
    intents = cli.site_intents(str(INVENTORIES / "example-chat"), None, {**GITOPS, "render_dir": "/tmp/unused"})
    checks = _health(gitops.site_tree(intents))["spec"]["resourceHealthChecks"]
    app = next(c for c in checks if (c["group"], c["kind"]) == ("argoproj.io", "Application"))
    base = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "x"}}
    assert _lua_health(app["check"], base)["status"] == "Progressing"
    for status in ("Healthy", "Progressing", "Degraded", "Suspended", "Missing"):
        seen = _lua_health(app["check"], {**base, "status": {"health": {"status": status, "message": "why"}}})
        assert seen == {"status": status, "message": "why"}


@pytest.mark.parametrize("site", EXAMPLES)
def test_a_sync_that_cannot_end_is_ended_by_the_controller(site, tmp_path):
    """The tree's Argo CD configuration sets the application controller's sync timeout (Argo CD's default is
    none): at least the apply path's longest wait, so a healthy sync is never cut short."""
    intents = cli.site_intents(str(INVENTORIES / site), None, {**GITOPS, "render_dir": str(tmp_path)})
    env = {e["name"]: e["value"] for e in _health(gitops.site_tree(intents))["spec"]["controller"]["env"]}
    waits = [w for i in intents.values() for ws in i["platform"]["waits"].values() for w in ws]
    assert int(env[gitops_mod.SYNC_TIMEOUT_ENV]) >= max([w.get("timeout", 600) for w in waits] + [600])
    apps = [o for p, o in gitops.site_tree(intents).items() if p.startswith(("clusters/", "argocd/"))]
    for app in (o for o in apps if o["kind"] == "Application"):
        assert app["spec"]["syncPolicy"]["retry"]["limit"] > 0, "an ended sync is retried a bounded number of times"
