"""Names that become paths, URIs with a credential and render_dir inside the inventory are refused when the
site is validated, before anything is written (issue 31 items 4, 5 and 10; intent/names.py). The bad-input
catalogue of docs/reliability.md runs the same cases as playbooks on the local control plane."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli

INVENTORIES = Path(__file__).resolve().parents[3] / "inventories"
GITOPS = {"delivery": "gitops", "gitops": {"repo_url": "https://git.example.com/platform/sites.git"}}
TOKEN = "ghp_s3cr3tT0ken"


def _refused(site, extra: dict) -> str:
    with pytest.raises(cli.CliError) as e:
        cli.site_intents(str(site), None, extra)
    return str(e.value)


def test_a_host_name_that_climbs_out_of_render_dir_is_refused(tmp_path):
    site = tmp_path / "example-chat"
    shutil.copytree(INVENTORIES / "example-chat", site)
    hosts = site / "hosts.yml"
    hosts.write_text(hosts.read_text().replace("chat-east-1: {}", "../../../tmp/escaped: {}"))
    msg = _refused(site, {**GITOPS, "render_dir": str(tmp_path / "render")})
    assert "inventory_hostname: '../../../tmp/escaped' is not a DNS-1123 subdomain" in msg
    assert "valid: lower case letters" in msg
    assert not (tmp_path / "render").exists()


@pytest.mark.parametrize(
    ("site", "extra", "path", "home"),
    [
        (
            "example-chat",
            {"gitops": {"repo_url": f"https://user:{TOKEN}@git.example.com/platform/sites.git"}, "delivery": "gitops"},
            "gitops.repo_url",
            "Argo CD's repository Secret",
        ),
        (
            "example-chat",
            {
                "gitops": {
                    "repo_url": "https://git.example.com/s.git",
                    "destination_server": f"https://{TOKEN}@api:6443",
                }
            },
            "gitops.destination_server",
            "Argo CD's cluster Secret",
        ),
        (
            "example-chat",
            {"canary": {"change": {"model_uri": f"https://user:{TOKEN}@models.example.com/qwen"}}},
            "canary.change.model_uri",
            "KServe's storage initializer",
        ),
        (
            "example-edge-fleet",
            {"escalation": {"enabled": True, "endpoint": f"https://edge:{TOKEN}@grid.example.com/v1"}},
            "escalation.endpoint",
            "escalation.credential.secret",
        ),
    ],
)
def test_a_uri_with_a_credential_is_refused_without_showing_it(site, extra, path, home):
    msg = _refused(INVENTORIES / site, extra)
    assert f"{path}: https://***@" in msg and home in msg
    assert TOKEN not in msg


def test_a_model_artifact_with_a_credential_is_refused_without_showing_it(tmp_path):
    import yaml

    models = yaml.safe_load((INVENTORIES / "example-chat" / "group_vars" / "all" / "site.yml").read_text())["models"]
    models[0]["artifact"] = {"uri": f"ftp://user:{TOKEN}@models.example.com/qwen"}  # a bad scheme too: no echo
    msg = _refused(INVENTORIES / "example-chat", {"models": models})
    assert "models[0].artifact.uri: ftp://***@models.example.com/..." in msg and TOKEN not in msg


@pytest.mark.parametrize("inside", ["", "render", "group_vars/all/render"])
def test_render_dir_inside_the_inventory_is_refused(tmp_path, inside):
    site = tmp_path / "example-chat"
    shutil.copytree(INVENTORIES / "example-chat", site)
    render_dir = site / inside if inside else site
    msg = _refused(site, {**GITOPS, "render_dir": str(render_dir)})
    assert f"render_dir: {render_dir} is inside the inventory directory {site}" in msg
    assert "valid: a directory outside every inventory directory" in msg
    assert sorted(p.name for p in site.rglob("*")) == sorted(p.name for p in (INVENTORIES / "example-chat").rglob("*"))


def test_a_gitops_path_that_leaves_the_repository_is_refused(tmp_path):
    extra = {**GITOPS, "render_dir": str(tmp_path), "gitops": {**GITOPS["gitops"], "path": "../other-repo"}}
    msg = _refused(INVENTORIES / "example-chat", extra)
    assert "gitops.path: '../other-repo' leaves the repository" in msg


def test_report_dir_inside_the_inventory_is_refused(tmp_path):
    site = tmp_path / "example-chat"
    shutil.copytree(INVENTORIES / "example-chat", site)
    msg = _refused(site, {"report_dir": str(site / "reports")})
    assert f"report_dir: {site / 'reports'} is inside the inventory directory {site}" in msg
