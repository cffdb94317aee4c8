"""delivery=gitops: the repository tree and its Argo CD objects (no cluster; tests/render checks
every object of every example's tree with a strict server-side dry run)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible_collections.inference.blueprints.plugins.module_utils import cli
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
        order = intent["stages"]["platform"] + intent["stages"]["serving"]
        components = [a["metadata"]["name"].rsplit(f"{host}-", 1)[1].replace("-", "_") for a in apps]
        assert components == [c for c in order if c in components], "sync waves follow the component order"
        for app in apps:
            directory = root / app["spec"]["source"]["path"]
            listed = yaml.safe_load((directory / "kustomization.yaml").read_text())["resources"]
            assert sorted(listed) == sorted(p.name for p in directory.glob("*.yaml") if p.name != "kustomization.yaml")
            assert app["spec"]["project"] == intent["gitops"]["project"]
        root_app = yaml.safe_load((root / "argocd" / f"{intent['gitops']['root']['name']}.yaml").read_text())
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
    checks = gitops.site_tree(intents)["argocd/health-checks.yaml"]["spec"]["resourceHealthChecks"]
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


def test_serving_health_checks_follow_kserve_ready():
    """LLMInferenceService is Healthy on KServe's Ready condition, not before."""
    intents = cli.site_intents(str(INVENTORIES / "example-chat"), None, {**GITOPS, "render_dir": "/tmp/unused"})
    checks = gitops.site_tree(intents)["argocd/health-checks.yaml"]["spec"]["resourceHealthChecks"]
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
    assert files["argocd/health-checks.yaml"]["metadata"]["name"] == "argo"
