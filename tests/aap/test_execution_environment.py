"""execution-environment.yml: ansible-builder makes a build context of it, from generated inputs.

``scripts/ee_context.py --create`` builds the collection tarball, writes the Python and galaxy
requirements from their one source each and runs ``ansible-builder create``. Then the Python
requirements the image build would collect (``ansible-builder introspect`` over the installed
tarball and its collection dependencies, with ours as the user file) install into a clean venv,
and the collection's controller code imports there.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
EE = yaml.safe_load((ROOT / "execution-environment.yml").read_text())


@pytest.fixture(scope="module")
def context():
    start = time.monotonic()
    subprocess.run([sys.executable, str(ROOT / "scripts" / "ee_context.py"), "--create"], check=True, cwd=ROOT)
    print(f"ee_context.py --create (collection build + ansible-builder create): {time.monotonic() - start:.1f} s")
    return ROOT / "build" / "ee"


def test_base_image_is_pinned_by_digest_with_its_source():
    name = EE["images"]["base_image"]["name"]
    assert re.fullmatch(r"[^@\s]+@sha256:[0-9a-f]{64}", name), name
    text = (ROOT / "execution-environment.yml").read_text()
    assert "github.com/ansible-community/images" in text  # where the digest was published
    assert EE["version"] == 3


def test_ansible_builder_create_makes_the_context_from_generated_inputs(context):
    containerfile = (context / "context" / "Containerfile").read_text()
    assert EE["images"]["base_image"]["name"] in containerfile
    assert "ansible-galaxy collection install" in containerfile
    build = context / "context" / "_build"
    # Python requirements: exactly pyproject's dependencies
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    lines = [ln for ln in (build / "requirements.txt").read_text().splitlines() if ln and not ln.startswith("#")]
    assert lines == deps
    # galaxy requirements: the tarball (copied into the context) and collections/requirements.yml
    galaxy = yaml.safe_load((build / "requirements.yml").read_text())["collections"]
    tarball = galaxy[0]["name"]
    assert galaxy[0]["type"] == "file" and (build / tarball).is_file()
    wanted = yaml.safe_load((ROOT / "collections" / "requirements.yml").read_text())["collections"]
    assert galaxy[1:] == wanted
    galaxy_yml = yaml.safe_load((ROOT / "collections/ansible_collections/inference/blueprints/galaxy.yml").read_text())
    assert {c["name"]: c["version"] for c in wanted} == galaxy_yml["dependencies"]
    with tarfile.open(build / tarball) as tf:
        names = tf.getnames()
    assert "MANIFEST.json" in names and "plugins/module_utils/planner/__init__.py" in names
    assert not [n for n in names if "__pycache__" in n or n.startswith("tests/output")]


def test_collected_python_requirements_install_into_a_clean_venv(context, tmp_path):
    # what the image's builder stage collects: the installed collections' requirements plus ours
    colls = tmp_path / "collections"
    (tarball,) = (context / "collections").glob("inference-blueprints-*.tar.gz")
    subprocess.run(
        [
            BIN / "ansible-galaxy",
            "collection",
            "install",
            "--offline",
            "--no-deps",
            "--force",
            "-p",
            str(colls),
            str(tarball),
        ],
        check=True,
        capture_output=True,
    )
    for dep in yaml.safe_load((ROOT / "collections" / "requirements.yml").read_text())["collections"]:
        ns, name = dep["name"].split(".")
        src = ROOT / ".cache" / "collections" / "ansible_collections" / ns / name
        shutil.copytree(src, colls / "ansible_collections" / ns / name)
    collected = tmp_path / "requirements.txt"
    subprocess.run(
        [
            BIN / "ansible-builder",
            "introspect",
            "--sanitize",
            "--user-pip",
            str(context / "requirements.txt"),
            "--write-pip",
            str(collected),
            str(colls),
        ],
        check=True,
        capture_output=True,
    )
    text = collected.read_text()
    assert "from collection kubernetes.core" in text and "jsonpatch" in text
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    start = time.monotonic()
    subprocess.run(
        [py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", str(collected)],
        check=True,
        env={**os.environ, "PIP_NO_INPUT": "1"},
    )
    print(f"clean venv install of the collected requirements: {time.monotonic() - start:.1f} s")
    subprocess.run([py, "-m", "pip", "check"], check=True)
    # the controller side of the collection runs there: plan a model from the installed tarball
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import kubernetes, jsonpatch, requests_oauthlib, yaml, ansible_runner;"
        "from ansible_collections.inference.blueprints.plugins.module_utils.planner import plan;"
        "p = plan({'model': 'Qwen3.6-27B', 'gpu': 'h100', 'gpus_per_node': 8, 'nodes': 1});"
        "print(p['model'] if isinstance(p.get('model'), str) else 'planned')"
    )
    out = subprocess.run([py, "-c", probe, str(colls)], check=True, capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.strip()
