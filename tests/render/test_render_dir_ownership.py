"""A render_dir the user owns too: delivery gitops and render write into a real git clone that already holds
the user's own files, and the render touches only what it wrote (issue 31 item 2).

The clone holds what docs/gitops.md's quick start suggested before: the user's own Argo CD Application and
kustomization under argocd/, a directory of another team under clusters/, and, for delivery=render, a file
of the user's in the directory of the serving namespace. Before the manifest the gitops run deleted
argocd/team-b-app.yaml and argocd/kustomization.yaml and said only "changed".
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.serving_helpers import INVENTORIES, PLAYBOOKS, ROOT

CHAT = INVENTORIES / "example-chat"
REPO_URL = "https://git.example.com/platform/llm-sites.git"
USER_FILES = {
    "README.md": "# llm-sites\n",
    "argocd/team-b-app.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: team-b\n",
    "argocd/kustomization.yaml": "resources:\n  - team-b-app.yaml\n",
    "clusters/team-b/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: team-b\n",
    "chat-east-1/llm-chat/configmap.core-my-notes.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mine\n",
}
MANIFEST = ".inference-blueprints-manifest"


def _git(*args, cwd) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}  # fmt: skip
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def clone(tmp_path) -> Path:
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    _git("init", "-q", cwd=upstream)
    for rel, text in USER_FILES.items():
        (upstream / rel).parent.mkdir(parents=True, exist_ok=True)
        (upstream / rel).write_text(text)
    _git("add", "-A", cwd=upstream)
    _git("commit", "-qm", "the user's own files", cwd=upstream)
    _git("clone", "-q", str(upstream), str(tmp_path / "clone"), cwd=tmp_path)
    return tmp_path / "clone"


def _two_models() -> list[dict]:
    """example-chat's model and a second one (example-rag's model with chat's traffic shape)."""
    chat = yaml.safe_load((CHAT / "group_vars" / "all" / "site.yml").read_text())["models"][0]
    rag = next(
        d["models"][0]
        for f in sorted((INVENTORIES / "example-rag" / "group_vars" / "all").glob("*.yml"))
        if (d := yaml.safe_load(f.read_text())) and "models" in d
    )
    extra = {"name": "qwen-rag", "id": rag["id"], "artifact": rag["artifact"], "max_model_len": 32768,
             "contexts": [8192, 32768], "slo": {"ttft_p95_ms": 2000, "tpot_p95_ms": 50},
             "traffic": {**chat["traffic"], "concurrent_sessions": 200, "arrival_rate_rps": 5}}  # fmt: skip
    return [chat, extra]


def _run(playbook: str, render_dir: Path, tmp_path: Path, **variables) -> subprocess.CompletedProcess:
    extra = tmp_path / "extra.yml"
    extra.write_text(yaml.safe_dump({"render_dir": str(render_dir), **variables}))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".cache" / "collections")}  # fmt: skip
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(CHAT),
           str(PLAYBOOKS / playbook), "-e", f"@{extra}"]  # fmt: skip
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)


def _gitops(clone: Path, tmp_path: Path, models=None) -> subprocess.CompletedProcess:
    more = {"models": models} if models else {}
    return _run("gitops.yml", clone, tmp_path, delivery="gitops", gitops={"repo_url": REPO_URL}, **more)


def _user_files_intact(clone: Path) -> None:
    for rel, text in USER_FILES.items():
        assert (clone / rel).read_text() == text, rel
    # git agrees: no tracked file was modified or deleted
    assert not [ln for ln in _git("status", "--porcelain", cwd=clone).splitlines() if not ln.startswith("??")]


def _listed(out: str, action: str) -> list[str]:
    return [ln.split(None, 1)[1] for ln in out.splitlines() if ln.strip().startswith(f"{action} ")]


def test_gitops_into_a_clone_with_the_users_files_owns_only_its_own(clone, tmp_path):
    first = _gitops(clone, tmp_path, _two_models())
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    _user_files_intact(clone)
    added = _listed(first.stdout, "added")
    assert str(clone / "clusters/chat-east-1/apps/kustomization.yaml") in added
    assert any("qwen-rag" in p for p in added)
    manifest = (clone / MANIFEST).read_text()
    assert "team-b" not in manifest and "README" not in manifest

    second = _gitops(clone, tmp_path, _two_models())
    assert second.returncode == 0, second.stdout[-3000:]
    assert "0 added, 0 changed, 0 removed" in second.stdout
    assert "changed=0" in second.stdout
    _user_files_intact(clone)

    # the second model leaves the site: its files are removed and listed, the user's stay
    third = _gitops(clone, tmp_path)
    assert third.returncode == 0, third.stdout[-3000:]
    removed = _listed(third.stdout, "removed")
    assert removed and all("qwen-rag" in p for p in removed)
    assert not [p for p in (clone / "clusters" / "chat-east-1").rglob("*") if "qwen-rag" in p.name]
    _user_files_intact(clone)


def test_a_path_of_the_tree_taken_by_a_users_file_is_refused_before_anything_is_written(clone, tmp_path):
    mine = clone / "clusters" / "chat-east-1" / "apps" / "kustomization.yaml"
    mine.parent.mkdir(parents=True)
    mine.write_text("resources: [my-own-app.yaml]\n")
    run = _gitops(clone, tmp_path)
    assert run.returncode != 0
    assert str(mine) in run.stdout and "not its own" in run.stdout and "Move or rename them" in run.stdout
    assert "Traceback" not in run.stdout + run.stderr
    assert mine.read_text() == "resources: [my-own-app.yaml]\n"
    assert not (clone / MANIFEST).exists() and not (clone / "argocd" / "chat-east-1").exists()
    _user_files_intact(clone)


def test_a_file_the_render_wrote_and_the_user_edited_is_refused_not_overwritten(clone, tmp_path):
    assert _gitops(clone, tmp_path).returncode == 0
    app = clone / "clusters" / "chat-east-1" / "apps" / "10-model-service.yaml"
    edited = app.read_text().replace("selfHeal: true", "selfHeal: false")
    app.write_text(edited)
    run = _gitops(clone, tmp_path, _two_models())  # would change other files too: none is written
    assert run.returncode != 0
    assert str(app) in run.stdout and "edited since" in run.stdout
    assert app.read_text() == edited
    assert not [p for p in (clone / "clusters").rglob("*") if "qwen-rag" in p.name]


def test_render_delivery_into_a_directory_with_the_users_files(clone, tmp_path):
    first = _run("serving.yml", clone, tmp_path, delivery="render", models=_two_models())
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    _user_files_intact(clone)
    assert any("qwen-rag" in p for p in _listed(first.stdout, "added"))
    second = _run("serving.yml", clone, tmp_path, delivery="render", models=_two_models())
    assert second.returncode == 0 and "0 added, 0 changed, 0 removed" in second.stdout
    third = _run("serving.yml", clone, tmp_path, delivery="render")
    assert third.returncode == 0, third.stdout[-3000:]
    removed = _listed(third.stdout, "removed")
    assert removed and all("qwen-rag" in p for p in removed)
    assert not [p for p in (clone / "chat-east-1").rglob("*") if "qwen-rag" in p.name]
    _user_files_intact(clone)
    # a file of the user's where the render writes one of its objects: refused, naming it
    theirs = clone / "chat-east-1" / "llm-chat" / "llminferenceservice.serving.kserve.io-qwen-chat.yaml"
    (clone / "chat-east-1" / MANIFEST).write_text("")  # as if the render had never written it
    theirs.write_text("kind: Mine\n")
    run = _run("serving.yml", clone, tmp_path, delivery="render")
    assert run.returncode != 0 and str(theirs) in run.stdout and theirs.read_text() == "kind: Mine\n"
