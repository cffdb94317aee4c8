"""The collection as Galaxy, Automation Hub and a user get it: the tarball `ansible-galaxy collection build`
makes of collections/ansible_collections/inference/blueprints (built once per session)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COLLECTION = ROOT / "collections" / "ansible_collections" / "inference" / "blueprints"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def tarball(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    run = subprocess.run(
        [BIN / "ansible-galaxy", "collection", "build", str(COLLECTION), "--output-path", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (built,) = out.glob("inference-blueprints-*.tar.gz")
    return built
