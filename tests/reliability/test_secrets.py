"""Secrets never leak (docs/reliability.md, "Secrets").

Canary secret values go through every path a secret takes into a run of the AI grid example:
a kubeconfig's bearer token, an API key in K8S_AUTH_API_KEY, the tenants' API keys in the
Secrets their credentials name, and a tenant key written inline by mistake (refused). Then every
place a run writes to is searched for them: the -vvv output, ansible-runner's artifacts, the
rendered and GitOps trees, the plan report, the caches and temporary directories, and every
object on the API server (annotations and all) except the Secrets that hold the keys.
"""

from __future__ import annotations

import base64
import json
import secrets
from pathlib import Path

import ansible_runner
import pytest
import yaml

from tests.reliability import results
from tests.reliability.harness import (
    PLAYBOOKS,
    ROOT,
    ansible_env,
    ansible_playbook,
    apply_edit,
    copy_inventory,
    delete_namespace,
    remove_staged_volumes,
    stage_artifacts,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SITE = "example-ai-grid"
NAMESPACE = "llm-grid"  # the example's serving_namespace
TEST_NS = "reliability-secrets"


def _bind_cluster_admin(plane, name: str) -> None:
    plane.ensure(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{TEST_NS}-{name}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": TEST_NS}],
        }
    )


def _needles(value: str) -> list[str]:
    """The value, base64-encoded (a Secret's or ConfigMap's data), and for a JWT its signature
    (a token cut at a line break still leaks)."""
    parts = value.split(".")
    jwt = [parts[-1]] if len(parts) == 3 and len(parts[-1]) >= 20 else []
    return [value, base64.b64encode(value.encode()).decode(), *jwt]


def _search_files(root: Path, canaries: dict[str, str], skip: tuple[Path, ...] = ()) -> list[str]:
    hits = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if any(path == s or s in path.parents for s in skip):
            continue
        data = path.read_bytes()
        for what, value in canaries.items():
            if any(n.encode() in data for n in _needles(value)):
                hits.append(f"{what} in {path}")
    return hits


def _search_text(name: str, text: str, canaries: dict[str, str]) -> list[str]:
    return [f"{what} in {name}" for what, value in canaries.items() if any(n in text for n in _needles(value))]


def _search_objects(plane, canaries: dict[str, str], ours: set[str]) -> tuple[int, list[str]]:
    """Every object on the API server, whole (annotations, labels, spec, status, managed fields),
    except the user's own Secrets that hold the tenant keys."""
    count, hits = 0, []
    for obj in plane.census.objects(""):
        meta = obj.get("metadata") or {}
        if obj.get("kind") in ("secrets", "Secret") and meta.get("namespace") == NAMESPACE and meta["name"] in ours:
            continue
        count += 1
        ref = f"{obj.get('kind')} {meta.get('namespace', '')}/{meta.get('name')}"
        hits += _search_text(f"API object {ref}", json.dumps(obj), canaries)
    return count, hits


def _canaries(plane, tenants: list[dict]) -> dict[str, str]:
    """Two working credentials (a kubeconfig token, an API key), the tenants' keys in their
    Secrets, and a key a user might write inline."""
    token = plane.service_account_token(TEST_NS, "converger")
    _bind_cluster_admin(plane, "converger")
    api_key = plane.service_account_token(TEST_NS, "api-key-user")
    _bind_cluster_admin(plane, "api-key-user")
    tenant_key = "sk-canary-" + secrets.token_hex(16)
    inline_key = "sk-canary-inline-" + secrets.token_hex(16)
    canaries = {
        "kubeconfig token": token,
        "K8S_AUTH_API_KEY": api_key,
        "tenant API key": tenant_key,
        "inline tenant key": inline_key,
    }
    plane.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    for t in tenants:
        plane.ensure(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": t["credential"]["secret"], "namespace": NAMESPACE},
                "stringData": {t["name"]: tenant_key},
            }
        )
    return canaries


@pytest.fixture
def grid_weights(plane):
    """The grid's pvc:// weights, staged as its storage team would before a converge (kube-scheduler
    leaves pods whose claim is missing Pending); their volumes removed after the test's teardown."""
    staged = stage_artifacts(plane, ROOT / "inventories" / SITE)
    yield staged
    remove_staged_volumes(plane, staged)


def _site_adopting_its_namespace(tmp_path):
    """The example copied; the tenants' Secrets exist before the first converge, so their namespace does: the
    site adopts it. Returns the inventory and its tenants."""
    inventory = copy_inventory(SITE, tmp_path)
    site_file = inventory / "group_vars/all/site.yml"
    site_file.write_text(site_file.read_text() + f"\nadopt: [Namespace/{NAMESPACE}]\n")
    return inventory, yaml.safe_load(site_file.read_text())["tenants"]


def test_no_canary_secret_appears_anywhere(plane, grid_weights, tmp_path):
    inventory, tenants = _site_adopting_its_namespace(tmp_path)
    canaries = _canaries(plane, tenants)
    token, api_key, inline_key = (canaries[k] for k in ("kubeconfig token", "K8S_AUTH_API_KEY", "inline tenant key"))
    kubeconfig = plane.token_kubeconfig(token, tmp_path / "token.kubeconfig")
    ours = {t["credential"]["secret"] for t in tenants}

    written = tmp_path / "written"  # every directory a run may write to
    dirs = {k: written / k for k in ("reports", "render", "gitops", "cache", "local-tmp", "remote-tmp", "runner")}
    for d in dirs.values():
        d.mkdir(parents=True)
    extra = {
        "INFERENCE_BLUEPRINTS_CACHE_DIR": str(dirs["cache"]),
        "ANSIBLE_LOCAL_TEMP": str(dirs["local-tmp"]),
        "ANSIBLE_REMOTE_TEMP": str(dirs["remote-tmp"]),
    }
    common = [f"report_dir={dirs['reports']}", "preflight_fail_on_unmet=false"]
    outputs: dict[str, str] = {}

    # 1. converge through ansible-runner (as AAP runs it), at -vvv, with the token kubeconfig
    env = ansible_env(kubeconfig, **extra)
    runner = ansible_runner.run(
        private_data_dir=str(dirs["runner"]),
        playbook=str(PLAYBOOKS / "site.yml"),
        project_dir=str(ROOT),
        inventory=str(inventory),
        envvars={k: v for k, v in env.items() if k.startswith(("ANSIBLE_", "K8S_", "INFERENCE_", "PATH"))},
        extravars={"report_dir": str(dirs["reports"]), "preflight_fail_on_unmet": False},
        verbosity=3,
        quiet=True,
    )
    outputs["ansible-runner stdout (-vvv)"] = runner.stdout.read()
    assert runner.rc == 0, outputs["ansible-runner stdout (-vvv)"][-3000:]

    # 2. the same site again with the API key in the environment instead of a kubeconfig
    env = ansible_env(
        None, K8S_AUTH_HOST=plane.server, K8S_AUTH_API_KEY=api_key, K8S_AUTH_SSL_CA_CERT=plane.ca_file, **extra
    )
    run = ansible_playbook(PLAYBOOKS / "site.yml", inventory, env=env, extravars=common, verbosity=3)
    outputs["site.yml -vvv with K8S_AUTH_API_KEY"] = run.output
    assert run.rc == 0, run.output[-3000:]

    # 3. the rendered tree and the GitOps tree
    run = ansible_playbook(
        PLAYBOOKS / "site.yml",
        inventory,
        env=ansible_env(kubeconfig, **extra),
        extravars=[*common, "delivery=render", f"render_dir={dirs['render']}"],
        verbosity=3,
    )
    outputs["site.yml -vvv delivery=render"] = run.output
    assert run.rc == 0, run.output[-3000:]
    gitops = {"repo_url": "https://git.example.com/platform/llm-sites.git"}
    run = ansible_playbook(
        PLAYBOOKS / "gitops.yml",
        inventory,
        env=ansible_env(kubeconfig, **extra),
        extravars=[*common, json.dumps({"delivery": "gitops", "render_dir": str(dirs["gitops"]), "gitops": gitops})],
        verbosity=3,
    )
    outputs["gitops.yml -vvv"] = run.output
    assert run.rc == 0, run.output[-3000:]
    assert list(dirs["render"].rglob("*.yaml")) and list(dirs["gitops"].rglob("*.yaml")), "no tree was written"
    assert list(dirs["reports"].rglob("*.md")), "no plan report was written"

    # 4. a tenant key written inline by mistake: refused, and the value is not echoed
    apply_edit(inventory, f"set tenants[0].credential = {inline_key}")
    run = ansible_playbook(PLAYBOOKS / "site.yml", inventory, env=ansible_env(kubeconfig, **extra), verbosity=3)
    outputs["site.yml -vvv with an inline tenant key"] = run.output
    assert run.rc != 0 and "an inline credential" in run.output

    # search every output, every file written, and every object on the API server
    hits = [h for name, text in outputs.items() for h in _search_text(name, text, canaries)]
    hits += _search_files(written, canaries, skip=(dirs["runner"] / "env", dirs["runner"] / "inventory"))
    objects, found = _search_objects(plane, canaries, ours)
    hits += found
    # the search finds what is there: the user's own Secrets and the token's kubeconfig hold canaries
    assert _search_objects(plane, {"tenant API key": canaries["tenant API key"]}, set())[1]
    assert _search_files(tmp_path, {"kubeconfig token": token}, skip=(written,))
    results.record(
        "secrets",
        SITE,
        {
            "canaries": len(canaries),
            "outputs": len(outputs),
            "files": sum(1 for p in written.rglob("*") if p.is_file()),
            "objects": objects,
            "leaked": len(hits),
        },
    )
    try:
        assert not hits, "secret canaries found:\n" + "\n".join(hits)
    finally:
        clean = copy_inventory(SITE, tmp_path / "clean")
        teardown = ansible_playbook(PLAYBOOKS / "teardown.yml", clean, env=ansible_env(plane.kubeconfig))
        assert teardown.rc == 0, teardown.output[-2000:]
        # the namespace was there before the site (the tenants' Secrets): the teardown keeps it, the test removes it
        delete_namespace(plane.census.api, NAMESPACE)
        for name in ("converger", "api-key-user"):
            plane.call("DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{TEST_NS}-{name}")
        delete_namespace(plane.census.api, TEST_NS)
