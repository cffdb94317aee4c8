#!/usr/bin/env python3
"""Install the collections inference.blueprints depends on, without Galaxy.

Galaxy is often unreachable from build machines and air-gapped sites, but PyPI's
``ansible`` wheel bundles the community collections. We download that one wheel
(no dependencies), extract only the collections named in
``collections/requirements.yml`` and check that each one meets the declared
version range. Real users with Galaxy access can instead run
``ansible-galaxy collection install -r collections/requirements.yml``.
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from pathlib import Path

import yaml
from _wheels import CACHE, cached_wheel

ROOT = Path(__file__).resolve().parent.parent
# The newest `ansible` release that installs on the running interpreter
# (ansible 13+ needs Python >= 3.12).
ANSIBLE_WHEEL = "14.5.0" if sys.version_info >= (3, 12) else "12.3.0"


def _version_ok(version: str, spec: str) -> bool:
    from packaging.specifiers import SpecifierSet  # shipped with pip/setuptools deps

    return version in SpecifierSet(spec.replace(" ", ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dest", required=True, help="collections path to populate")
    parser.add_argument(
        "--wheel-cache",
        default=CACHE,
    )
    args = parser.parse_args()

    reqs = yaml.safe_load((ROOT / "collections" / "requirements.yml").read_text())["collections"]
    wanted = {r["name"]: r.get("version", "*") for r in reqs}

    wheel = cached_wheel("ansible", ANSIBLE_WHEEL, args.wheel_cache)
    prefixes = tuple(f"ansible_collections/{n.replace('.', '/')}/" for n in wanted)
    dest = Path(args.dest)
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(dest, [n for n in zf.namelist() if n.startswith(prefixes)])

    failed = False
    for name, spec in wanted.items():
        manifest = dest / "ansible_collections" / name.replace(".", "/") / "MANIFEST.json"
        if not manifest.exists():
            print(f"{name}: not in ansible {ANSIBLE_WHEEL}", file=sys.stderr)
            failed = True
            continue
        version = json.loads(manifest.read_text())["collection_info"]["version"]
        ok = spec in ("*", "") or _version_ok(version, spec)
        print(f"{name} {version} (wants {spec}) from ansible {ANSIBLE_WHEEL}: {'ok' if ok else 'TOO OLD'}")
        failed |= not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
