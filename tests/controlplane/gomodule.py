"""The upstream Go modules the local control plane builds its components from (TEST-SIDE ONLY).

Each component has a ``go.mod`` of its own beside this file (``kserve/``, ``kwok/``, ``lws/``) that
requires the upstream module at one version; ``make controlplane`` builds the component's command
from it. What a component needs at run time besides its binary (KServe's presets and webhooks,
kwok's Stages, LWS's webhook configuration) is read from the same module in GOMODCACHE, located
with ``go mod download -json`` (which checks it against that go.sum): nothing upstream is copied
into the repository.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from pathlib import Path


class ModuleError(RuntimeError):
    """The module is not pinned, or Go cannot locate it."""


def version(go_mod_dir: Path, module: str) -> str:
    """The version of ``module`` that ``go_mod_dir/go.mod`` requires (the one source of it)."""
    text = (Path(go_mod_dir) / "go.mod").read_text()
    m = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.M)
    if not m:
        raise ModuleError(f"no {module} requirement in {Path(go_mod_dir) / 'go.mod'}")
    return m.group(1)


@functools.cache
def directory(go_mod_dir: Path, module: str) -> Path:
    """``module`` in GOMODCACHE at the version go.mod pins (downloaded and checked against go.sum)."""
    env = {k: v for k, v in os.environ.items() if k != "GOEXPERIMENT"} | {"GOTOOLCHAIN": "local", "GOFLAGS": ""}
    try:
        res = subprocess.run(
            ["go", "mod", "download", "-json", module],
            cwd=go_mod_dir,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
    except FileNotFoundError:
        raise ModuleError(f"Go is needed to locate {module} (make controlplane)") from None
    try:
        info = json.loads(res.stdout)
    except json.JSONDecodeError:
        raise ModuleError(f"go mod download {module} failed: {res.stderr.strip()}") from None
    if info.get("Error"):
        raise ModuleError(f"go mod download {module}: {info['Error']}")
    return Path(info["Dir"])


def read(go_mod_dir: Path, module: str, rel: str) -> str:
    """A file of the module, by its path inside the module."""
    return (directory(Path(go_mod_dir), module) / rel).read_text()
