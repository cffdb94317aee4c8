#!/usr/bin/env python3
"""Collect the upstream CRDs named in sources.yaml from the Go module cache.

For every source: ``go mod download -json <module>@<version>`` (Go module proxy, cached in
GOMODCACHE outside the repository), check the module's h1: hash against go.sum beside this
file, read the CRD YAML at the listed paths *inside the downloaded module* (only the CRDs
named in ``crds:`` when a source has that list) and write one JSON bundle (``--out``,
default ``.cache/crds/crds.json``) that the cluster manager installs.

Nothing is copied into the repository. ``--update-sums`` rewrites go.sum from what the
proxy served (run it once after changing a version in sources.yaml, then commit go.sum).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "sources.yaml"
GOSUM = HERE / "go.sum"

try:  # the C loader is ~10x faster on these large schemas
    _Loader = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env["GOTOOLCHAIN"] = "local"
    env["GOFLAGS"] = "-mod=mod"
    env.pop("GOEXPERIMENT", None)
    # Several pinned commits are not in the public checksum database (pseudo-versions of
    # branches); their hashes are pinned in our go.sum instead and checked below.
    env["GONOSUMDB"] = "*"
    env["GONOSUMCHECK"] = "1"
    return env


def download(module: str, version: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        res = subprocess.run(
            ["go", "mod", "download", "-json", f"{module}@{version}"],
            cwd=tmp,
            env=go_env(),
            capture_output=True,
            text=True,
            check=False,
        )
    try:
        info = json.loads(res.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"go mod download {module}@{version} failed: {res.stderr.strip()}") from None
    if info.get("Error"):
        raise SystemExit(f"go mod download {module}@{version}: {info['Error']}")
    return info


def read_sums() -> dict[tuple[str, str], str]:
    sums: dict[tuple[str, str], str] = {}
    if GOSUM.exists():
        for line in GOSUM.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3 and not parts[1].endswith("/go.mod"):
                sums[(parts[0], parts[1])] = parts[2]
    return sums


def crd_files(moddir: Path, src: dict) -> list[Path]:
    files: list[Path] = []
    exclude = set(src.get("exclude", []))
    for rel in src["paths"]:
        p = moddir / rel
        if p.is_dir():
            files += sorted(f for f in p.iterdir() if f.suffix in (".yaml", ".yml") and f.name not in exclude)
        elif p.is_file():
            files.append(p)
        else:
            raise SystemExit(f"{src['module']}@{src['version']}: no {rel} in the module")
    return files


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(HERE.parents[2] / ".cache" / "crds" / "crds.json"))
    ap.add_argument("--update-sums", action="store_true", help="rewrite go.sum from what the proxy served")
    args = ap.parse_args()

    sources = yaml.load(SOURCES.read_text(), Loader=_Loader)["sources"]
    sums = read_sums()
    new_sums: dict[tuple[str, str], tuple[str, str]] = {}
    crds: list[dict] = []
    index: list[dict] = []
    seen: dict[str, str] = {}
    for src in sources:
        mod, ver = src["module"], src["version"]
        info = download(mod, ver)
        new_sums[(mod, ver)] = (info["Sum"], info.get("GoModSum", ""))
        if not args.update_sums:
            want = sums.get((mod, ver))
            if want is None:
                raise SystemExit(f"{mod}@{ver} is not pinned in {GOSUM} (run collect.py --update-sums)")
            if want != info["Sum"]:
                raise SystemExit(f"{mod}@{ver}: checksum mismatch: go.sum {want}, downloaded {info['Sum']}")
        moddir = Path(info["Dir"])
        for f in crd_files(moddir, src):
            for doc in yaml.load_all(f.read_text(), Loader=_Loader):
                if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                    continue
                name = doc["metadata"]["name"]
                if "crds" in src and name not in src["crds"]:
                    continue
                if name in seen:
                    raise SystemExit(f"CRD {name} from {src['name']} already came from {seen[name]}")
                seen[name] = src["name"]
                crds.append(doc)
                index.append(
                    {
                        "crd": name,
                        "source": src["name"],
                        "module": mod,
                        "version": ver,
                        "path": str(f.relative_to(moddir)),
                    }
                )

    for src in sources:
        for name in src.get("crds", []):
            if seen.get(name) != src["name"]:
                raise SystemExit(f"{src['name']}: CRD {name} is not in {src['module']}@{src['version']} {src['paths']}")

    if args.update_sums:
        lines = []
        for (mod, ver), (h1, gomod) in sorted(new_sums.items()):
            lines.append(f"{mod} {ver} {h1}")
            if gomod:
                lines.append(f"{mod} {ver}/go.mod {gomod}")
        GOSUM.write_text("\n".join(lines) + "\n")
        print(f"wrote {GOSUM} ({len(new_sums)} modules)")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"crds": crds, "index": index}))
    tmp.replace(out)
    print(f"collected {len(crds)} CRDs from {len(sources)} module versions into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
