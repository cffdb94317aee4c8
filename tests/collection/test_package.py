"""The collection as pip and Galaxy install it (issue 31, item 12): `pip install .` left out roles/*/files/*.lua, and
the first site rendered 38-72 platform files before it stopped on 'ai_gateway/files/tiers.lua' not found.

* The wheel (`pip wheel` of a copy of the working tree, offline) and the Galaxy tarball (`ansible-galaxy collection
  build`) hold exactly the collection's files: what `git ls-files` lists under it, less galaxy.yml's build_ignore.
  A new kind of file a role reads cannot be forgotten by one of them.
* Installed (the wheel into an empty virtual environment, the tarball onto an empty collections path; the project's
  editable install out of sight), each renders both stages of every example inventory, the same objects as the
  clone.
* A collection that lacks a file a template reads fails before the first object is rendered, so before anything
  is written, and says which file.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.collection import render_examples
from tests.collection.conftest import BIN, COLLECTION, ROOT

INVENTORIES = sorted(str(p) for p in (ROOT / "inventories").glob("example-*") if (p / "hosts.yml").exists())
PREFIX = "ansible_collections/inference/blueprints/"


def _run(args, **kw):
    run = subprocess.run(args, capture_output=True, text=True, check=False, timeout=kw.pop("timeout", 600), **kw)
    return run


def _git_files(*paths: str) -> list[str]:
    run = _run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", *paths], cwd=ROOT)
    assert run.returncode == 0, run.stderr
    return [p for p in run.stdout.split("\0") if p and (ROOT / p).is_file()]


def collection_files() -> set[str]:
    """The collection's files as the repository holds them, less what galaxy.yml's build_ignore leaves out."""
    ignore = yaml.safe_load((COLLECTION / "galaxy.yml").read_text())["build_ignore"]
    rel = [str(Path(p).relative_to(COLLECTION.relative_to(ROOT))) for p in _git_files(str(COLLECTION))]
    return {p for p in rel if not any(fnmatch.fnmatch(p, pat) or p.startswith(pat.rstrip("/") + "/") for pat in ignore)}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """`pip wheel` of a copy of the working tree (no stale build/ directory), offline: no index, no build isolation."""
    src = tmp_path_factory.mktemp("src")
    for rel in _git_files("pyproject.toml", "README.md", "collections"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)
    out = tmp_path_factory.mktemp("wheel")
    run = _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index", "--no-build-isolation", "-w", out, src]
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (built,) = out.glob("inference_blueprints-*.whl")
    return built


def _bare_python(where: Path, *paths: Path) -> Path:
    """A virtual environment whose site-packages sees the test environment's packages (ansible-core, PyYAML,
    Jinja2, ...) but not its editable install of the collection, and then ``paths``."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", where], check=True)
    python = where / "bin" / "python"
    purelib = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    deps = sysconfig.get_paths()["purelib"]  # a path in a .pth file: its own .pth files (the editable one) are not read
    Path(purelib, "test_deps.pth").write_text("\n".join([*map(str, paths), deps]) + "\n")
    return python


def test_the_tarballs_playbooks_import_each_other_by_a_file_beside_them(tarball):
    """galaxy-importer extracts the tarball under ansible_collections/placeholder_namespace/placeholder_name and
    lints it there, where an import by FQCN (inference.blueprints.clusters) finds nothing: 12 warnings 'Failed to
    find inference.blueprints.<playbook> playbook' (issue 35 item 5; test_galaxy.py runs the importer itself). An
    import by file name resolves beside the importing playbook, wherever the collection is installed."""
    with tarfile.open(tarball) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    playbooks = {n: yaml.safe_load(t) for n, t in files.items() if n.startswith("playbooks/") and n.count("/") == 1}
    imports = [
        (name, play[key])
        for name, plays in playbooks.items()
        for play in plays or []
        for key in ("ansible.builtin.import_playbook", "import_playbook")
        if isinstance(play, dict) and key in play
    ]
    assert imports, "the site playbook imports the stage playbooks"
    unresolved = [f"{name}: {target}" for name, target in imports if f"playbooks/{target}" not in playbooks]
    assert not unresolved, "imports that name no playbook file beside them:\n" + "\n".join(unresolved)


@pytest.fixture(scope="module")
def installed(wheel, tarball, tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """{kind: (python, where the collection was installed)} for the wheel and the Galaxy tarball."""
    base = tmp_path_factory.mktemp("installed")
    wheel_python = _bare_python(base / "wheel-venv")
    pip = [sys.executable, "-m", "pip", "--python", wheel_python, "install", "-q", "--no-deps", "--no-index"]
    run = _run([*pip, wheel])
    assert run.returncode == 0, run.stdout + run.stderr
    collections = base / "collections"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false")
    galaxy = [BIN / "ansible-galaxy", "collection", "install", tarball, "-p", collections, "--no-deps", "--force"]
    run = _run(galaxy, env=env, cwd=base)
    assert run.returncode == 0 and (collections / PREFIX / "galaxy.yml").exists() is False, run.stdout + run.stderr
    assert (collections / PREFIX / "MANIFEST.json").is_file(), run.stdout + run.stderr
    galaxy_python = _bare_python(base / "galaxy-venv", collections)
    return {"wheel": (wheel_python, base / "wheel-venv"), "galaxy": (galaxy_python, collections)}


def test_the_wheel_holds_every_file_of_the_collection(wheel):
    names = {n[len(PREFIX) :] for n in zipfile.ZipFile(wheel).namelist() if n.startswith(PREFIX)}
    expected = collection_files()
    assert not expected - names, f"left out of the wheel: {sorted(expected - names)}"
    assert not names - expected, f"in the wheel, not in the collection: {sorted(names - expected)}"


def test_the_galaxy_tarball_holds_every_file_of_the_collection(tarball):
    with tarfile.open(tarball) as tar:
        names = {m.name for m in tar.getmembers() if m.isfile()} - {"MANIFEST.json", "FILES.json"}
    expected = collection_files() - {"galaxy.yml"}  # the build turns it into MANIFEST.json
    assert not expected - names, f"left out of the tarball: {sorted(expected - names)}"
    assert not names - expected, f"in the tarball, not in the collection: {sorted(names - expected)}"


@pytest.fixture(scope="module")
def clone_render() -> dict:
    return {inv: render_examples.render_site(inv) for inv in INVENTORIES}


@pytest.mark.parametrize("kind", ["wheel", "galaxy"])
def test_every_example_renders_from_the_installed_collection(installed, clone_render, kind):
    python, where = installed[kind]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PYTHON"))}
    run = _run([python, Path(render_examples.__file__), *INVENTORIES], env=env, cwd=where)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = json.loads(run.stdout)
    # the collection rendered is the installed one, not the clone's
    assert out["collection"] and all(p.startswith(str(where)) for p in out["collection"]), out["collection"]
    assert out["sites"] == clone_render


# the site playbook with delivery=render, from each install: the playbooks, the action plugins and the Lua files
# they read (the wheel: every example, the path `pip install .` broke; the tarball: the AI grid, whose gateway reads
# tiers.lua; tests/collection/test_installed.py converges another example from it on a cluster)
PLAYBOOK_RENDERS = [("wheel", Path(i).name) for i in INVENTORIES] + [("galaxy", "example-ai-grid")]


@pytest.mark.parametrize(("kind", "example"), PLAYBOOK_RENDERS)
def test_the_site_playbook_renders_an_example_from_the_installed_collection(installed, kind, example, tmp_path):
    python, _where = installed[kind]
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PYTHON")) and k != "K8S_AUTH_KUBECONFIG"
    }
    env.update(
        ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".cache" / "collections"),  # kubernetes.core; this collection: sys.path
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
    )
    render_dir = tmp_path / "render"
    site = [python, "-m", "ansible", "playbook", "-i", ROOT / "inventories" / example, "inference.blueprints.site"]
    extra = ["-e", f"delivery=render render_dir={render_dir} report_dir={tmp_path / 'reports'}"]
    run = _run([*site, *extra], env=env, cwd=tmp_path, timeout=900)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "failed=0" in run.stdout
    assert any(render_dir.rglob("*.yaml")), "nothing rendered"


def test_an_incomplete_collection_fails_before_a_file_is_written(tmp_path):
    """The render of a site whose collection lacks a file a template reads (the ai_gateway role's Lua filter, as
    the old wheel did) stops before its platform stage renders anything, and names the file."""
    copy = tmp_path / "collections" / "ansible_collections" / "inference" / "blueprints"
    shutil.copytree(COLLECTION, copy, ignore=shutil.ignore_patterns("__pycache__", "tests"))
    (copy / "roles" / "ai_gateway" / "files" / "tiers.lua").unlink()
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_") and k != "K8S_AUTH_KUBECONFIG"}
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=f"{tmp_path / 'collections'}{os.pathsep}{ROOT / '.cache' / 'collections'}",
        ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
    )
    render_dir = tmp_path / "render"
    site = [
        BIN / "ansible-playbook",
        "-i",
        ROOT / "inventories" / "example-ai-grid",
        "inference.blueprints.site",
        "-e",
        f"delivery=render render_dir={render_dir} report_dir={tmp_path / 'reports'}",
    ]
    run = _run(site, env=env, cwd=tmp_path, timeout=900)
    out = run.stdout + run.stderr
    assert run.returncode != 0, out[-4000:]
    assert "roles/ai_gateway/templates/objects.yml.j2 reads roles/ai_gateway/files/tiers.lua, which is missing" in out
    written = [p for p in render_dir.rglob("*") if p.is_file()] if render_dir.exists() else []
    assert not written, f"{len(written)} file(s) written before the error: {written[:5]}"
