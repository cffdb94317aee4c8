"""What Galaxy and Automation Hub run on an uploaded collection, on the tarball `ansible-galaxy collection build`
makes: galaxy-importer (its checks of the layout, docs, README files and its ansible-lint run) must import it
with no error and no warning, and antsibull-docs' collection docs linter must find nothing in the plugin docs.
Issue 23: galaxy-importer 0.4.44 refused the collection ("Could not find file README.md", "No role readme
found")."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.collection.conftest import BIN, COLLECTION

IMPORTER_CONFIG = """[galaxy-importer]
LOG_LEVEL_MAIN = INFO
RUN_ANSIBLE_TEST = False
RUN_ANSIBLE_LINT = True
"""


def _env(tmp_path):
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(tmp_path)}


def test_galaxy_importer_accepts_the_tarball_without_a_warning(tarball, tmp_path):
    config = tmp_path / "galaxy-importer.cfg"
    config.write_text(IMPORTER_CONFIG + f"ANSIBLE_LOCAL_TMP = {tmp_path / 'ansible-tmp'}\n")
    run = subprocess.run(
        [BIN / "python", "-m", "galaxy_importer.main", str(tarball)],
        capture_output=True,
        text=True,
        env={**_env(tmp_path), "GALAXY_IMPORTER_CONFIG": str(config)},
        cwd=tmp_path,
        check=False,
        timeout=900,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    assert "Importer processing completed successfully" in out, out[-4000:]
    # the importer skips (with a warning) what it cannot run: ansible-lint and ansible-doc must have run
    assert "Linting collection via ansible-lint" in out, out[-4000:]
    problems = [line for line in out.splitlines() if re.search(r"\b(WARNING|ERROR)\b", line)]
    assert not problems, "\n".join(problems)


def _lint_docs(collection_root, tmp_path):
    return subprocess.run(
        [BIN / "antsibull-docs", "lint-collection-docs", "--plugin-docs", str(collection_root)],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        check=False,
        timeout=600,
    )


def test_antsibull_docs_finds_nothing_in_the_plugin_docs(tmp_path):
    run = _lint_docs(COLLECTION, tmp_path)
    assert run.returncode == 0 and not run.stdout.strip(), run.stdout[-4000:] + run.stderr[-2000:]


@pytest.mark.parametrize(
    ("module", "old", "new", "expect"),
    [
        ("k8s_apply", "O(field_manager)", "O(field_manger)", "field_manger"),
        ("k8s_wait", "type: list", "type: lst", "k8s_wait.py:0:0: 1 validation error"),
    ],
)
def test_the_docs_linter_sees_a_broken_doc(tmp_path, module, old, new, expect):
    """The check above can fail: a misspelled option reference or type in a copy of the collection is reported."""
    copy = tmp_path / "ansible_collections" / "inference" / "blueprints"
    shutil.copytree(COLLECTION, copy, ignore=shutil.ignore_patterns("__pycache__", "tests"))
    doc = copy / "plugins" / "modules" / f"{module}.py"
    text = doc.read_text()
    assert old in text
    doc.write_text(text.replace(old, new, 1))
    run = _lint_docs(copy, tmp_path)
    assert run.returncode != 0 and expect in run.stdout, run.stdout[-3000:] + run.stderr[-2000:]
