"""Quiet when converged (issue 33 item 3): once a site converged, nothing it or its controllers own may keep
changing. Every object of the site's namespaces (every namespaced kind the API server serves, pods included)
and every cluster-scoped object carrying the site's ``created-by`` annotation is listed twice, ``seconds``
apart; an object whose resourceVersion moved in between is a controller that does not rest (KServe's
certificate loop moved a Secret every ~2 s). Leases and Events move by design and are left out.

A workload pod without an IP is reported too: it is what starts KServe v0.20.0's certificate loop
(docs/upstream.md). Used by tests and runnable on its own:

    python tests/quiet.py --kubeconfig .cluster/kubeconfig --namespace llm-chat --site example-chat --seconds 60
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

EXEMPT = {"Lease", "Event"}
KUBECTL = Path(os.environ.get("KCP_CACHE", Path(__file__).resolve().parents[1] / ".cache")) / "bin" / "kubectl"
ANNOTATION = "inference.blueprints/created-by"


def _kubectl(kubectl: list[str], *args: str) -> str:
    res = subprocess.run([*kubectl, *args], capture_output=True, text=True, check=False, timeout=120)
    if res.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {res.stderr.strip()}")
    return res.stdout


def _kinds(kubectl: list[str], namespaced: bool) -> list[str]:
    out = _kubectl(kubectl, "api-resources", "--verbs=list", f"--namespaced={str(namespaced).lower()}", "-o", "name")
    return sorted(n for n in out.split() if n.split(".")[0] not in ("events", "leases"))


def snapshot(kubectl: list[str], namespaces: list[str], site: str | None) -> dict[str, dict]:
    """``{Kind/namespace/name: object}`` of everything the site's namespaces hold and what it created elsewhere."""
    objs: dict[str, dict] = {}
    kinds = ",".join(_kinds(kubectl, True))
    for ns in namespaces:
        for o in json.loads(_kubectl(kubectl, "-n", ns, "get", kinds, "-o", "json", "--ignore-not-found"))["items"]:
            objs[f"{o['kind']}/{ns}/{o['metadata']['name']}"] = o
    if site:
        cluster_kinds = ",".join(_kinds(kubectl, False))
        for o in json.loads(_kubectl(kubectl, "get", cluster_kinds, "-o", "json"))["items"]:
            if ((o["metadata"].get("annotations") or {}).get(ANNOTATION)) == site:
                objs[f"{o['kind']}/{o['metadata']['name']}"] = o
    # served objects without a resourceVersion (the package server's PackageManifests) are computed, not stored
    return {k: o for k, o in objs.items() if o["kind"] not in EXEMPT and o["metadata"].get("resourceVersion")}


def moved(before: dict[str, dict], after: dict[str, dict]) -> list[str]:
    """What changed between two snapshots: each moved, added or removed object, one line each."""
    lines = []
    for key in sorted(before.keys() | after.keys()):
        a, b = before.get(key), after.get(key)
        if a is None or b is None:
            lines.append(f"{key}: {'appeared' if a is None else 'went away'}")
        elif a["metadata"]["resourceVersion"] != b["metadata"]["resourceVersion"]:
            lines.append(
                f"{key}: resourceVersion {a['metadata']['resourceVersion']} -> {b['metadata']['resourceVersion']}"
            )
    return lines


def pods_without_ip(objs: dict[str, dict]) -> list[str]:
    return [
        f"{key} ({o['status'].get('phase')}) has no IP"
        for key, o in sorted(objs.items())
        if o["kind"] == "Pod" and not (o.get("status") or {}).get("podIP")
    ]


def check(kubectl: list[str], namespaces: list[str], site: str | None, seconds: float) -> list[str]:
    """Every problem: workload pods without an IP, then every object that moved within ``seconds``."""
    before = snapshot(kubectl, namespaces, site)
    time.sleep(seconds)
    after = snapshot(kubectl, namespaces, site)
    return pods_without_ip(after) + moved(before, after)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--kubectl", default=str(KUBECTL))
    ap.add_argument("--context", default="", help="the kubeconfig's context (default: its current one)")
    ap.add_argument("--namespace", action="append", required=True)
    ap.add_argument("--site")
    ap.add_argument("--seconds", type=float, default=60)
    args = ap.parse_args(argv)
    context = [f"--context={args.context}"] if args.context else []
    kubectl = [args.kubectl, f"--kubeconfig={args.kubeconfig}", *context]
    problems = check(kubectl, args.namespace, args.site, args.seconds)
    print("\n".join(problems) or f"quiet for {args.seconds:.0f} s")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
