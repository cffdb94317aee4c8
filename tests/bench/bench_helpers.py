"""Timing helpers for the serving benchmarks (figures are printed, never asserted)."""

from __future__ import annotations

import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ansible_runner
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _wait_interval(data: dict, seconds: float) -> tuple[float, float]:
    """(start, end) in epoch seconds of a wait that ended when its task did."""
    end = data.get("end")
    stop = datetime.datetime.fromisoformat(end).timestamp() if end else time.time()
    return (stop - seconds, stop)


def _union(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by the intervals: waits of clusters run side by side (forks) overlap, and the
    time they share is subtracted from the wall time once, not once per cluster."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def timed_playbook(playbook, inventory, *, kubeconfig=None, extravars=None, forks=10) -> dict:
    """Run a playbook; return wall seconds, seconds spent in readiness waits, rc and changed count."""
    pdd = tempfile.mkdtemp(prefix="ib-bench-")
    waits = []
    applied = []  # (kubeconfig context, apiVersion, kind, namespace, name) in apply order

    def on_event(ev):
        data = ev.get("event_data", {})
        action = data.get("resolved_action") or data.get("task_action", "")
        res = data.get("res") or {}
        if ev.get("event") == "runner_on_ok" and action.endswith("k8s_wait"):
            waits.append(_wait_interval(data, float(res.get("elapsed") or data.get("duration") or 0.0)))
        elif ev.get("event") == "runner_on_ok" and action.endswith("k8s_apply"):
            waits.append(_wait_interval(data, float(res.get("wait_elapsed") or 0.0)))
            for o in res.get("objects") or []:
                if o.get("action") in ("created", "configured", "unchanged"):
                    applied.append((data.get("host"), o["apiVersion"], o["kind"], o.get("namespace") or "", o["name"]))
        return True

    env = {
        "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".cache" / "collections"),
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_CALLBACK_PLUGINS": str(ROOT / "plugins" / "callback"),
        "ANSIBLE_FORKS": str(forks),
        "ANSIBLE_NOCOLOR": "1",
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
    }
    if kubeconfig:
        env["K8S_AUTH_KUBECONFIG"] = str(kubeconfig)
    try:
        start = time.monotonic()
        r = ansible_runner.run(
            private_data_dir=pdd,
            playbook=str(Path(playbook).resolve()),
            project_dir=str(Path(playbook).resolve().parent),
            inventory=str(Path(inventory).resolve()),
            extravars=extravars or {},
            envvars=env,
            event_handler=on_event,
            quiet=True,
        )
        wall = time.monotonic() - start
        changed = sum((r.stats or {}).get("changed", {}).values())
        out = r.stdout.read()[-3000:] if r.rc and r.stdout else ""
        return {
            "wall": wall,
            "waits": _union(waits),
            "rc": r.rc,
            "changed": changed,
            "tail": out,
            "applied": list(dict.fromkeys(applied)),
        }
    finally:
        shutil.rmtree(pdd, ignore_errors=True)


def timed_cli_playbook(playbook, inventory, *, kubeconfig=None, extravars=None, forks=10) -> dict:
    """Run a playbook the way the README tells a user to (``ansible-playbook -i <site> <playbook>``,
    no ansible-runner in between); return wall seconds (readiness checks included), rc and the
    recap's changed count."""
    env = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".cache" / "collections"),
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_FORKS": str(forks),
        "ANSIBLE_NOCOLOR": "1",
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
    }
    if kubeconfig:
        env["K8S_AUTH_KUBECONFIG"] = str(kubeconfig)
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory), str(playbook)]
    for key, value in (extravars or {}).items():
        cmd += ["-e", f"{key}={value}"]
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=False)  # noqa: S603
    wall = time.monotonic() - start
    changed = sum(int(n) for n in re.findall(r"\bchanged=(\d+)", proc.stdout))
    return {"wall": wall, "rc": proc.returncode, "changed": changed, "tail": proc.stdout[-3000:] + proc.stderr[-2000:]}


SERVER_FIELDS = ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation", "selfLink")


def export_applied(cluster, applied, out_dir: Path) -> Path:
    """The live objects a run applied to ``cluster`` (``applied``: timed_playbook's refs), as a user
    would write them (no status, no server-set metadata), one file each in apply order: the identical
    object set for ``kubectl apply --server-side`` (render-mode files are not bound to the cluster's
    API versions and schemas, so kubectl would be handed objects the playbook never applies)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    refs = list(dict.fromkeys(ref[1:] for ref in applied))  # an object two clusters' runs both applied, once
    for i, (api_version, kind, ns, name) in enumerate(refs):
        live = cluster.dynamic.resources.get(api_version=api_version, kind=kind).get(name=name, namespace=ns or None)
        obj = live.to_dict()
        obj.pop("status", None)
        for f in SERVER_FIELDS:
            obj["metadata"].pop(f, None)
        (obj["metadata"].get("annotations") or {}).pop("kubectl.kubernetes.io/last-applied-configuration", None)
        prefix = "namespace.core-" if kind == "Namespace" and api_version == "v1" else ""
        (out_dir / f"{prefix}{i:04d}.yaml").write_text(yaml.safe_dump(obj, sort_keys=False))
    return out_dir


def timed_kubectl_apply(cluster, render_dir: Path) -> dict:
    """One `kubectl apply --server-side` of every rendered file (namespaces first, then the rest)."""
    files = sorted(Path(render_dir).rglob("*.yaml"))
    ns_files = [f for f in files if f.name.startswith("namespace.core-")]
    rest = [f for f in files if f not in ns_files]
    start = time.monotonic()
    rcs = []
    for batch in (ns_files, rest):
        if not batch:
            continue
        args = ["apply", "--server-side", "--force-conflicts", "--field-manager=bench-kubectl"]
        for f in batch:
            args += ["-f", str(f)]
        proc = cluster.kubectl(*args)
        rcs.append((proc.returncode, proc.stderr[-2000:] if proc.returncode else ""))
    return {"wall": time.monotonic() - start, "rcs": rcs, "objects": len(files)}


def generate_fleet(n: int, out: Path, source: Path) -> Path:
    """A fleet inventory of n sites: the example fleet's group vars, generated hosts and host vars."""
    import yaml

    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(source / "group_vars", out / "group_vars")
    (out / "host_vars").mkdir(parents=True)
    hosts = {f"site-{i:04d}": {} for i in range(n)}
    (out / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"edge_fleet": {"hosts": hosts}}}}))
    for i, host in enumerate(hosts):
        esc = {
            "enabled": i % 2 == 0,
            "endpoint": f"https://grid.region{i % 5}.example.com/v1" if i % 2 == 0 else "",
            "model": "Qwen3.5-397B-A17B",
        }
        (out / "host_vars" / f"{host}.yml").write_text(
            yaml.safe_dump({"edge_site_region": f"region{i % 5}", "escalation": esc})
        )
    return out


def count_files(path: Path) -> int:
    return sum(1 for _ in Path(path).rglob("*.yaml"))


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
