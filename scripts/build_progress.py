#!/usr/bin/env python3
"""Run a long, quiet build and say every so often how far it got.

``go build`` prints nothing while it compiles (the cold build of the local control plane and of
KServe's controller takes tens of minutes on 2 cores). This runs the command, passes its output
through, and every ``--every`` seconds prints one line: elapsed time and how much the Go build
cache and module cache grew, against the growth a cold build is known to need (``--expect-gb``,
measured; see mk/demo.mk).

    python scripts/build_progress.py --expect-gb 4.4 -- make controlplane
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import threading
import time


def go_env(name: str) -> str:
    try:
        return subprocess.run(["go", "env", name], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def tree_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, f)).st_size
    return total


def clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}:{s:02d}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--expect-gb", type=float, default=0.0, help="build cache growth of a cold build (GB)")
    ap.add_argument("--every", type=float, default=30.0, help="seconds between progress lines")
    ap.add_argument("--label", default="go build")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("give the command after --")
    cache, mods = go_env("GOCACHE"), go_env("GOMODCACHE")
    start = time.monotonic()
    done = threading.Event()

    def report():
        # measured here, not before the command starts: a warm cache of several GB takes a while to walk
        base_cache = tree_bytes(cache) if cache else 0
        base_mods = tree_bytes(mods) if mods else 0
        while not done.wait(args.every):
            grown = (tree_bytes(cache) - base_cache) / 1e9 if cache else 0.0
            mods_grown = (tree_bytes(mods) - base_mods) / 1e9 if mods else 0.0
            share = (
                f" of ~{args.expect_gb:.1f} GB ({min(99, round(100 * grown / args.expect_gb))} %)"
                if args.expect_gb
                else ""
            )
            line = f"[{args.label} {clock(time.monotonic() - start)}] build cache +{grown:.2f} GB{share}"
            if mods_grown > 0.01:
                line += f", modules downloaded +{mods_grown:.2f} GB"
            print(line, flush=True)

    threading.Thread(target=report, daemon=True).start()
    try:
        rc = subprocess.call(cmd)
    finally:
        done.set()
    print(f"[{args.label} {clock(time.monotonic() - start)}] finished (exit {rc})", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
