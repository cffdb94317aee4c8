"""delivery=gitops: the repository tree and its Argo CD objects (no cluster; tests/render checks
every object of every example's tree with a strict server-side dry run)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils.intent import build, sync_order
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import SchemaError
from ansible_collections.inference.blueprints.plugins.module_utils.ownership import ANNOTATION
from ansible_collections.inference.blueprints.plugins.plugin_utils import gitops
from lupa import lua51  # a test dependency (pyproject [test]); missing means the run fails

ROOT = Path(__file__).resolve().parents[3]
INVENTORIES = ROOT / "inventories"
EXAMPLES = sorted(p.name for p in INVENTORIES.iterdir() if (p / "hosts.yml").exists())
GITOPS = {"delivery": "gitops", "gitops": {"repo_url": "https://git.example.com/platform/sites.git"}}


def _tree(site: str, tmp_path: Path) -> tuple[dict, list[dict], Path]:
    intents = cli.site_intents(str(INVENTORIES / site), None, {**GITOPS, "render_dir": str(tmp_path)})
    files = gitops.site_tree(intents)
    return intents, gitops.write(str(tmp_path), files), tmp_path


@pytest.mark.parametrize("site", EXAMPLES)
def test_tree_is_deterministic_and_a_second_run_writes_nothing(site, tmp_path):
    _, first, root = _tree(site, tmp_path)
    assert first and all(r["action"] == "created" for r in first)
    snapshot = {p: p.read_bytes() for p in root.rglob("*.yaml")}
    _, second, _ = _tree(site, tmp_path)
    assert {r["action"] for r in second} == {"unchanged"}
    assert {p: p.read_bytes() for p in root.rglob("*.yaml")} == snapshot


@pytest.mark.parametrize("site", EXAMPLES)
def test_every_application_points_at_a_directory_of_the_tree_in_component_order(site, tmp_path):
    intents, _, root = _tree(site, tmp_path)
    for host, intent in intents.items():
        apps_dir = root / "clusters" / host / "apps"
        kust = yaml.safe_load((apps_dir / "kustomization.yaml").read_text())
        apps = [yaml.safe_load((apps_dir / f).read_text()) for f in kust["resources"]]
        waves = [int(a["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]) for a in apps]
        assert waves == sorted(waves) and len(set(waves)) == len(waves)
        # the blueprint's order, each component after those it reads (test_gitops_sync_order.py)
        order = sync_order.ordered(intent["stages"]["platform"] + intent["stages"]["serving"], sync_order.needs(intent))
        components = [a["metadata"]["name"].rsplit(f"{host}-", 1)[1].replace("-", "_") for a in apps]
        assert components == [c for c in order if c in components], "sync waves follow the component order"
        for app in apps:
            directory = root / app["spec"]["source"]["path"]
            listed = yaml.safe_load((directory / "kustomization.yaml").read_text())["resources"]
            assert sorted(listed) == sorted(p.name for p in directory.glob("*.yaml") if p.name != "kustomization.yaml")
            assert app["spec"]["project"] == intent["gitops"]["project"]
        root_app = yaml.safe_load((root / "argocd" / host / f"{intent['gitops']['root']['name']}.yaml").read_text())
        assert root_app["spec"]["source"]["path"] == f"clusters/{host}/apps"


@pytest.mark.parametrize("site", EXAMPLES)
def test_the_tree_holds_no_secret_values(site, tmp_path):
    _, _, root = _tree(site, tmp_path)
    for path in root.rglob("*.yaml"):
        doc = yaml.safe_load(path.read_text())
        if doc.get("kind") == "Secret":
            assert not doc.get("data") and not doc.get("stringData"), path


def test_operators_sync_before_their_operands(tmp_path):
    _, _, root = _tree("example-chat", tmp_path)
    gpu = next((root / "clusters" / "chat-east-1").glob("*-gpu-operator"))
    waves = {}
    for path in gpu.glob("*.yaml"):
        doc = yaml.safe_load(path.read_text())
        if doc.get("kind") != "Kustomization":
            waves[doc["kind"]] = (doc["metadata"].get("annotations") or {}).get("argocd.argoproj.io/sync-wave")
    assert waves["Subscription"] == "-1" and waves["ClusterPolicy"] is None


def test_gitops_needs_a_repository():
    with pytest.raises(cli.CliError, match=r"gitops.repo_url: required with delivery=gitops"):
        cli.site_intents(str(INVENTORIES / "example-chat"), None, {"delivery": "gitops"})


def _health(files: dict) -> dict:
    """The ArgoCD CR patch with the health checks (every cluster's root holds the same one)."""
    (health,) = {yaml.safe_dump(o): o for p, o in files.items() if p.endswith("/health-checks.yaml")}.values()
    return health


def _lua_health(check: str, obj: dict) -> dict:
    """Run one health check the way Argo CD does (gopher-lua is Lua 5.1): ``obj`` is the live
    object as a Lua table, the script returns ``{status, message}``."""
    runtime = lua51.LuaRuntime(unpack_returned_tuples=True)
    runtime.globals().obj = runtime.table_from(obj, recursive=True)
    result = runtime.execute(check)
    return {"status": result["status"], "message": result["message"]}


def _set(obj: dict, dotted: str, value) -> dict:
    *parents, last = dotted.split(".")
    node = obj
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return obj


@pytest.mark.parametrize("site", EXAMPLES)
def test_health_checks_are_healthy_exactly_when_the_apply_path_wait_is_met(site, tmp_path):
    """Every Lua health check of the ArgoCD CR, run in Lua 5.1, says Healthy for an object that
    meets the wait the apply path uses, and Progressing (with what it waits for) otherwise."""
    intents = cli.site_intents(str(INVENTORIES / site), None, {**GITOPS, "render_dir": str(tmp_path)})
    checks = _health(gitops.site_tree(intents))["spec"]["resourceHealthChecks"]
    waits = {}
    for intent in intents.values():
        for w in [w for ws in intent["platform"]["waits"].values() for w in ws]:
            group = w["apiVersion"].split("/")[0] if "/" in w["apiVersion"] else ""
            waits.setdefault((group, w["kind"]), w)
    assert checks, "a site with operators has health checks"
    for check in checks:
        wait = waits.get((check["group"], check["kind"]))
        if wait is None:
            continue  # a serving wait: checked by test_serving_health_checks below
        _assert_check(check, wait)


def _assert_check(check: dict, wait: dict) -> None:
    base = {"apiVersion": wait["apiVersion"], "kind": wait["kind"], "metadata": {"name": "x"}}
    assert _lua_health(check["check"], dict(base))["status"] == "Progressing"
    if wait.get("condition"):
        want = str(wait.get("status") or "True")
        other = "False" if want != "False" else "True"
        conds = [{"type": "Other", "status": want}, {"type": wait["condition"], "status": want, "reason": "Done"}]
        ok = _lua_health(check["check"], {**base, "status": {"conditions": conds}})
        assert ok["status"] == "Healthy", (check["kind"], ok)
        bad = [{"type": wait["condition"], "status": other, "reason": "Pending", "message": "not yet"}]
        seen = _lua_health(check["check"], {**base, "status": {"conditions": bad}})
        assert seen["status"] == "Progressing" and "not yet" in seen["message"], (check["kind"], seen)
    else:
        wanted = wait["value"] if isinstance(wait["value"], list) else [wait["value"]]
        for value in wanted:
            ok = _lua_health(check["check"], _set(dict(base), wait["field"], value))
            assert ok["status"] == "Healthy", (check["kind"], value, ok)
        seen = _lua_health(check["check"], _set(dict(base), wait["field"], "SomethingElse"))
        assert seen["status"] == "Progressing" and "SomethingElse" in seen["message"], (check["kind"], seen)


def test_the_app_of_apps_waits_for_each_wave_of_applications_to_be_healthy():
    """Argo CD 1.8+ does not assess an Application's health unless told to (docs/operator-manual/health.md):
    without it the sync waves of the child Applications would not wait for each other."""
    intents = cli.site_intents(str(INVENTORIES / "example-chat"), None, {**GITOPS, "render_dir": "/tmp/unused"})
    checks = _health(gitops.site_tree(intents))["spec"]["resourceHealthChecks"]
    app = next(c for c in checks if (c["group"], c["kind"]) == ("argoproj.io", "Application"))
    base = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "x"}}
    assert _lua_health(app["check"], base)["status"] == "Progressing"
    healthy = _lua_health(app["check"], {**base, "status": {"health": {"status": "Healthy"}}})
    assert healthy["status"] == "Healthy"
    degraded = _lua_health(app["check"], {**base, "status": {"health": {"status": "Degraded"}}})
    assert degraded["status"] == "Degraded", "a Degraded child is not hidden as Progressing"


def test_serving_health_checks_follow_kserve_ready():
    """LLMInferenceService is Healthy on KServe's Ready condition, not before."""
    intents = cli.site_intents(str(INVENTORIES / "example-chat"), None, {**GITOPS, "render_dir": "/tmp/unused"})
    checks = _health(gitops.site_tree(intents))["spec"]["resourceHealthChecks"]
    llmisvc = next(c for c in checks if c["kind"] == "LLMInferenceService")
    assert llmisvc["group"] == "serving.kserve.io"
    _assert_check(
        llmisvc, {"apiVersion": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceService", "condition": "Ready"}
    )


def test_applications_live_where_the_gitops_component_installs_argo_cd(tmp_path):
    """One source of truth: the gitops role's options place Argo CD, and the tree follows them."""
    extra = {
        **GITOPS,
        "render_dir": str(tmp_path),
        "gitops_argocd_namespace": "team-argo",
        "gitops_argocd_name": "argo",
    }
    intents = cli.site_intents(str(INVENTORIES / "example-chat"), None, extra)
    files = gitops.site_tree(intents)
    apps = [o for o in files.values() if o["kind"] in ("Application", "AppProject", "ArgoCD")]
    assert apps and {o["metadata"]["namespace"] for o in apps} == {"team-argo"}
    assert _health(files)["metadata"]["name"] == "argo"


# ------------------------------------------------------------------ one root per cluster
def _resources(root: Path, directory: str) -> list[dict]:
    """The objects `oc apply -k <directory>` applies (our kustomizations only list files)."""
    kust = yaml.safe_load((root / directory / "kustomization.yaml").read_text())
    return [yaml.safe_load((root / directory / f).read_text()) for f in kust["resources"]]


def _key(obj: dict) -> tuple:
    group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
    return (group, obj["kind"], obj["metadata"].get("namespace") or "", obj["metadata"]["name"])


def _argo_cd(root: Path, runs_on: str, bootstraps: list[str]) -> dict[tuple, set[str]]:
    """What one Argo CD deploys once `oc apply -k` of each bootstrap directory was run on its cluster
    (``runs_on``): every Application it holds syncs its source path to its destination, the app-of-apps'
    Applications included (Argo CD's controller loop, played here without a cluster).
    {(destination, group, kind, namespace, name): {Applications whose manifests hold it}}."""
    apps = {}
    for directory in bootstraps:
        apps.update({o["metadata"]["name"]: o for o in _resources(root, directory) if o["kind"] == "Application"})
    owners: dict[tuple, set[str]] = {}
    done: set[str] = set()
    while set(apps) - done:
        name = sorted(set(apps) - done)[0]
        done.add(name)
        app = apps[name]
        server = app["spec"]["destination"]["server"]
        dest = runs_on if server == "https://kubernetes.default.svc" else server
        for obj in _resources(root, app["spec"]["source"]["path"]):
            owners.setdefault((dest, *_key(obj)), set()).add(name)
            if obj["kind"] == "Application" and dest == runs_on:
                apps.setdefault(obj["metadata"]["name"], obj)
    return owners


def _shared(owners: dict[tuple, set[str]]) -> list[tuple]:
    return sorted((k, sorted(v)) for k, v in owners.items() if len(v) > 1)


def test_each_cluster_has_a_root_of_its_own_and_no_object_belongs_to_two_applications(tmp_path):
    """Sovereign burst, delivery=gitops: `oc apply -k argocd/<cluster>` on each cluster; each cluster's Argo CD
    syncs only that cluster's tree, and no object (the LLMInferenceService and ScaledObject both clusters name
    alike among them) is part of two Applications."""
    intents, _, root = _tree("example-sovereign-burst", tmp_path)
    assert not (root / "argocd" / "kustomization.yaml").exists(), "no root that bootstraps every cluster"
    owners: dict[tuple, set[str]] = {}
    for host, intent in intents.items():
        bootstrap = intent["gitops"]["root"]["directory"]
        assert bootstrap == f"argocd/{host}"
        roots = [o for o in _resources(root, bootstrap) if o["kind"] == "Application"]
        assert [r["spec"]["source"]["path"] for r in roots] == [f"clusters/{host}/apps"]
        for key, apps in _argo_cd(root, host, [bootstrap]).items():
            owners.setdefault(key, set()).update(apps)
    assert not _shared(owners), _shared(owners)
    # each cluster converges to its own tree: exactly the objects of clusters/<cluster>/, nothing of the other
    for host in intents:
        mine = {
            _key(yaml.safe_load(p.read_text()))
            for p in (root / "clusters" / host).rglob("*.yaml")
            if p.name != "kustomization.yaml" and p.parent.name != "apps"
        }
        deployed = {k[1:] for k in owners if k[0] == host and k[2] != "Application"}
        assert deployed == mine, host
    # the two clusters render the same-named service and scaler with different desired states
    services = [k for k in owners if k[2] == "LLMInferenceService"]
    assert len(services) == 2 and {k[0] for k in services} == set(intents)


def test_the_tree_of_earlier_releases_shared_every_object_between_the_clusters(tmp_path):
    """The check above fails on the layout this replaces (one argocd/ kustomization with every cluster's
    root, bootstrapped on each cluster, every Application on https://kubernetes.default.svc)."""
    intents, _, root = _tree("example-sovereign-burst", tmp_path)
    (root / "argocd" / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": [f"{h}/{i['gitops']['root']['name']}.yaml" for h, i in intents.items()]})
    )
    owners: dict[tuple, set[str]] = {}
    for host in intents:
        for key, apps in _argo_cd(root, host, ["argocd"]).items():
            owners.setdefault(key, set()).update(apps)
    kinds = {k[2] for k, _ in _shared(owners)}
    assert {"LLMInferenceService", "ScaledObject"} <= kinds


def _burst_intents(tmp_path: Path, servers: dict[str, str]) -> dict[str, dict]:
    """The sovereign burst site's intents with delivery=gitops and a destination_server per cluster (host_vars),
    computed one host at a time (the site-wide check is what the tests call themselves)."""
    site = str(INVENTORIES / "example-sovereign-burst")
    out = {}
    for host, (values, names) in cli.load_site_vars(site, {**GITOPS, "render_dir": str(tmp_path)}).items():
        values["gitops"] = {**values["gitops"], "destination_server": servers[host]}
        out[host] = build.site_intent(host, values, names, cli.blueprint_dir_candidates(site, None), cli.MAGIC_VARS)
    return out


def test_one_argo_cd_for_every_cluster_still_deploys_each_tree_once(tmp_path):
    """A hub: every root bootstrapped on one Argo CD, each cluster's destination_server its registered API."""
    servers = {"onprem-fra-1": "https://api.onprem-fra-1.example.com:6443", "burst-aws-1": "https://api.b.example:6443"}
    intents = _burst_intents(tmp_path, servers)
    gitops.write(str(tmp_path), gitops.site_tree(intents))
    owners = _argo_cd(tmp_path, "hub", [i["gitops"]["root"]["directory"] for i in intents.values()])
    assert not _shared(owners)
    assert {k[0] for k in owners if k[2] == "LLMInferenceService"} == set(servers.values())


def test_two_clusters_with_one_destination_are_refused_before_anything_is_written(tmp_path):
    one = {**GITOPS, "gitops": {**GITOPS["gitops"], "destination_server": "https://api.shared.example.com:6443"}}
    with pytest.raises(cli.CliError) as e:
        cli.site_intents(str(INVENTORIES / "example-sovereign-burst"), None, {**one, "render_dir": str(tmp_path)})
    msg = str(e.value)
    assert "gitops.destination_server: clusters 'burst-aws-1' and 'onprem-fra-1' both deliver to" in msg, msg
    # the tree writer checks it too, before it writes a file
    intents = _burst_intents(
        tmp_path, dict.fromkeys(("onprem-fra-1", "burst-aws-1"), "https://api.shared.example.com:6443")
    )
    with pytest.raises(SchemaError) as e:
        gitops.write(str(tmp_path), gitops.site_tree(intents))
    assert [p for p, _ in e.value.errors] == ["gitops.destination_server"]
    assert not list(tmp_path.iterdir())


def test_a_rewrite_keeps_an_argocd_kustomization_it_did_not_write_and_names_an_old_combined_root(tmp_path):
    """Earlier releases wrote one argocd/kustomization.yaml for every cluster and a rewrite removed it; the file may
    be the user's own (issue 31 item 2): kept, and named when it lists a cluster of the site."""
    intents, _, root = _tree("example-sovereign-burst", tmp_path)
    combined = root / "argocd" / "kustomization.yaml"
    combined.write_text("resources: [onprem-fra-1, burst-aws-1]\n")
    _, results, _ = _tree("example-sovereign-burst", tmp_path)
    assert combined.read_text() == "resources: [onprem-fra-1, burst-aws-1]\n"
    assert {r["action"] for r in results} == {"unchanged"}
    warning = gitops.legacy_root_warning(str(root), intents)
    assert str(combined) in warning and "burst-aws-1, onprem-fra-1" in warning
    combined.write_text("resources: [team-b-app.yaml]\n")
    assert gitops.legacy_root_warning(str(root), intents) is None


@pytest.mark.parametrize("site", EXAMPLES)
def test_a_namespace_the_tree_creates_syncs_before_every_object_in_it(site, tmp_path):
    """A namespaced object fails its sync while its namespace does not exist (Argo CD retries, the wave waits):
    every namespace the tree creates is in an Application of an earlier wave than each object in it, or in the
    same Application at the same or an earlier inner wave."""
    intents, _, root = _tree(site, tmp_path)
    for host in intents:
        apps = _resources(root, f"clusters/{host}/apps")
        created, uses = {}, []
        for app in apps:
            wave = int(app["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"])
            for obj in _resources(root, app["spec"]["source"]["path"]):
                inner = int((obj["metadata"].get("annotations") or {}).get("argocd.argoproj.io/sync-wave", "0"))
                at = (wave, app["metadata"]["name"], inner)
                if obj["kind"] == "Namespace":
                    created[obj["metadata"]["name"]] = at
                elif obj["metadata"].get("namespace"):
                    uses.append((obj["metadata"]["namespace"], at, f"{obj['kind']}/{obj['metadata']['name']}"))
        # an earlier Application wave (the app-of-apps waits for it: Application health is restored), or the
        # same Application at the same or an earlier inner wave (Argo CD applies a wave's Namespaces first)
        late = [
            (ns, what)
            for ns, (wave, app, inner), what in uses
            if ns in created and not (created[ns][0] < wave or (created[ns][1] == app and created[ns][2] <= inner))
        ]
        assert not late, (host, late)


def test_the_tree_marks_what_the_site_creates_and_not_what_it_adopts(tmp_path):
    """Argo CD applies the tree as it is: its objects carry the site's creation annotation the apply path writes
    (module_utils/ownership.py), except the ones the site adopts, which keep their owner's marks."""
    extra = {**GITOPS, "render_dir": str(tmp_path), "adopt": ["Namespace/llm-chat"]}
    intents = cli.site_intents(str(INVENTORIES / "example-chat"), None, extra)
    files = gitops.site_tree(intents)
    objs = [
        o for p, o in files.items() if p.startswith("clusters/") and "/apps/" not in p and o["kind"] != "Kustomization"
    ]
    marks = {(o["kind"], o["metadata"]["name"]): (o["metadata"].get("annotations") or {}).get(ANNOTATION) for o in objs}
    assert marks.pop(("Namespace", "llm-chat")) is None
    assert set(marks.values()) == {intents["chat-east-1"]["ownership"]["value"]}
