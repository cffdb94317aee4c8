#!/usr/bin/env python3
"""Run ``ansible-test`` on the collection without internet access beyond PyPI.

ansible-test bootstraps pip in each of its sanity virtualenvs by downloading a
``get-pip`` script from a host that build machines often cannot reach. We seed
its cache with a small stand-in that installs pip from a wheel fetched from
PyPI instead; everything else ansible-test installs comes from PyPI as usual.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from _wheels import cached_wheel

ROOT = Path(__file__).resolve().parent.parent
COLLECTION = ROOT / "collections" / "ansible_collections" / "inference" / "blueprints"


def wanted_pip_version() -> str:
    """The pip release this ansible-test bootstraps (it names its cached script after it)."""
    from types import SimpleNamespace

    from ansible_test._internal.python_requirements import get_venv_packages

    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    return get_venv_packages(SimpleNamespace(version=py))["pip"]


STUB = """\
import os, runpy, sys
WHEEL = {wheel!r}
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.path.insert(0, WHEEL)
sys.argv = ["pip", "install", "--no-index", "--find-links", os.path.dirname(WHEEL)] + args
runpy.run_module("pip", run_name="__main__", alter_sys=True)
"""


def seed_get_pip() -> None:
    pip_version = wanted_pip_version()
    wheel = cached_wheel("pip", pip_version)
    cache = Path.home() / ".ansible" / "test" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    stub = cache / f"get_pip_{pip_version.replace('.', '_')}.py"
    stub.write_text(STUB.format(wheel=wheel))


def main() -> int:
    seed_get_pip()
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    args = sys.argv[1:] or ["sanity"]
    if args[0] == "sanity":
        args = ["sanity", "--python", py, "--venv", "--color", "no", *args[1:]]
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return subprocess.call(
        [os.path.join(os.path.dirname(sys.executable), "ansible-test"), *args], cwd=COLLECTION, env=env
    )


if __name__ == "__main__":
    sys.exit(main())
