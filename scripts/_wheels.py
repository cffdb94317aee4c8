"""Fetch one wheel from PyPI into a per-user cache, once (shared by the setup scripts)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

CACHE = os.path.join(os.path.expanduser("~"), ".cache", "inference-blueprints", "wheels")


def cached_wheel(name: str, version: str, cache: str = CACHE) -> str:
    """Path of ``name==version``'s wheel in ``cache``, downloading it (no dependencies) if absent."""
    os.makedirs(cache, exist_ok=True)
    pattern = os.path.join(cache, f"{name}-{version}-*.whl")
    if not glob.glob(pattern):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--disable-pip-version-check",
                "--no-deps",
                "--only-binary=:all:",
                "-d",
                cache,
                f"{name}=={version}",
            ],
            check=True,
        )
    return glob.glob(pattern)[0]
