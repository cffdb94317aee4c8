"""scripts/go_build_linked.sh: the test tiers' Go binaries are linked outside the clone, so a fresh clone of the same
sources copies them instead of relinking (a CI run relinked kcp, both KServe controllers, KEDA, Argo CD, ... every
time: minutes of CPU), and a changed source still relinks."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "go_build_linked.sh"


def _module(where: Path, says: str) -> Path:
    where.mkdir(parents=True)
    (where / "go.mod").write_text("module example.com/hello\n\ngo 1.22\n")
    (where / "main.go").write_text(f'package main\n\nimport "fmt"\n\nfunc main() {{ fmt.Println("{says}") }}\n')
    return where


def _build(src: Path, out: Path, links: Path) -> int:
    """Build ``src`` into ``out`` through the script; the number of link commands Go ran (go build -x)."""
    env = {**os.environ, "GO_LINKS": str(links), "GOFLAGS": "", "GOTOOLCHAIN": "local"}
    cmd = [str(SCRIPT), str(out), "--", "go", "build", "-x", "-trimpath", "-o", "@OUT@", "."]
    run = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True, check=True)
    return sum(1 for line in run.stderr.splitlines() if "/link " in line)


def _says(binary: Path) -> str:
    return subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout.strip()


def test_a_second_clone_copies_the_binary_and_a_change_relinks(tmp_path):
    links = tmp_path / "links"
    first, second = _module(tmp_path / "clone1" / "src", "one"), _module(tmp_path / "clone2" / "src", "one")
    assert _build(first, tmp_path / "clone1" / "bin" / "hello", links) == 1
    # the same sources in another directory (a fresh clone): Go finds the linked file current and does not link
    assert _build(second, tmp_path / "clone2" / "bin" / "hello", links) == 0
    assert _says(tmp_path / "clone2" / "bin" / "hello") == "one"
    # a copy, not a link to the shared file: a later relink for another clone leaves this clone's binary alone
    assert not (tmp_path / "clone2" / "bin" / "hello").samefile(links / "hello")
    (second / "main.go").write_text((second / "main.go").read_text().replace('"one"', '"two"'))
    assert _build(second, tmp_path / "clone2" / "bin" / "hello", links) == 1
    assert _says(tmp_path / "clone2" / "bin" / "hello") == "two"
    assert _says(tmp_path / "clone1" / "bin" / "hello") == "one"


@pytest.mark.parametrize("args", [[], ["go", "build", "-o", "x", "."]], ids=["no-command", "no-placeholder"])
def test_a_command_without_the_placeholder_is_refused(tmp_path, args):
    run = subprocess.run(
        [str(SCRIPT), str(tmp_path / "x"), *(["--", *args] if args else [])],
        check=False,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "usage" in run.stderr, run.stderr
    assert not (tmp_path / "x").exists()
