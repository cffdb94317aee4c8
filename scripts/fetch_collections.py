#!/usr/bin/env python3
"""Install the collections inference.blueprints depends on, without Galaxy.

Galaxy is often unreachable from build machines and air-gapped sites, but PyPI's
``ansible`` wheel bundles the community collections. We download that one wheel
(no dependencies), extract only the collections named in
``collections/requirements.yml`` (what the collection needs at run time) and
``aap/requirements.yml`` (what playbooks/aap_configure.yml needs: awx.awx) and check
that each one meets the declared version range. Real users with Galaxy access can
instead run ``ansible-galaxy collection install -r <file>``.
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
# Collections the newest wheel no longer ships, and the release they come from instead.
# awx.awx (the upstream of ansible.controller) left the `ansible` package in 14.0.0; 12.3.0
# ships awx.awx 24.6.1 (ansible_collections/awx/awx/MANIFEST.json of that wheel) and installs
# on Python 3.11 and 3.12 alike (13.8.0 ships the same 24.6.1 but needs 3.12).
WHEEL_FOR = {"awx.awx": "12.3.0"}
REQUIREMENTS = ("collections/requirements.yml", "aap/requirements.yml")


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
    parser.add_argument(
        "--requirements",
        action="append",
        metavar="FILE",
        help=f"requirements file(s), relative to the repository (default: {', '.join(REQUIREMENTS)})",
    )
    args = parser.parse_args()

    wanted: dict[str, str] = {}
    for rel in args.requirements or REQUIREMENTS:
        reqs = yaml.safe_load((ROOT / rel).read_text())["collections"]
        wanted.update({r["name"]: r.get("version", "*") for r in reqs})

    dest = Path(args.dest)
    dest.mkdir(parents=True, exist_ok=True)
    by_wheel: dict[str, list[str]] = {}
    for name in wanted:
        by_wheel.setdefault(WHEEL_FOR.get(name, ANSIBLE_WHEEL), []).append(name)
    for release, names in by_wheel.items():
        wheel = cached_wheel("ansible", release, args.wheel_cache)
        prefixes = tuple(f"ansible_collections/{n.replace('.', '/')}/" for n in names)
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(dest, [n for n in zf.namelist() if n.startswith(prefixes)])

    failed = False
    for name, spec in wanted.items():
        release = WHEEL_FOR.get(name, ANSIBLE_WHEEL)
        manifest = dest / "ansible_collections" / name.replace(".", "/") / "MANIFEST.json"
        if not manifest.exists():
            print(f"{name}: not in ansible {release}", file=sys.stderr)
            failed = True
            continue
        version = json.loads(manifest.read_text())["collection_info"]["version"]
        ok = spec in ("*", "") or _version_ok(version, spec)
        print(f"{name} {version} (wants {spec}) from ansible {release}: {'ok' if ok else 'TOO OLD'}")
        failed |= not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
