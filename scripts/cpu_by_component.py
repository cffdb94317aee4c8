#!/usr/bin/env python3
"""Run a command and say where its CPU went, by component and by make test's tier (docs/ci-time.md).

    python scripts/cpu_by_component.py [--json out.json] [--every 1.0] -- make test

Every ``--every`` seconds the processes under the command are read from /proc (utime + stime, the command line,
the parent); at the end each process's last reading is summed by component (kube-apiserver, etcd and kcp, the
KServe controller, ansible-playbook, pytest, ...) and by the tier its nearest pytest or molecule ancestor runs.
The total comes from the kernel: the resource usage of every process reaped, the command's descendants and the
orphans they leave (a control plane that ``cluster.py up`` leaves running), which this process adopts as a
subreaper and reaps. So the part no reading saw (processes shorter than the interval: ansible's forked workers,
short kubectl calls) is printed too, not guessed. Each kube-apiserver is listed with its CPU in its first 60 s
(the start) and after (idle and work), and how long it lived. Linux only; nothing outside the tree is read.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
TIERS = (  # (marker in an ancestor's command line, tier): the make test targets (Makefile, mk/molecule.mk)
    ("--ignore=tests/reliability", "rest"),
    ("tests/integration", "integration"),
    ("tests/reliability", "reliability"),
    ("molecule", "molecule"),
    ("ansible-lint", "lint"),
    ("ansible_test_offline", "sanity"),
)
START = 60.0  # seconds counted as a control plane's start


def component(argv: list[str]) -> str:
    """The component a process is, from its program (a Python program by its script or ``-m`` module)."""
    if not argv:
        return "?"
    base = Path(argv[0]).name
    if base == "kcp":  # tests/controlplane/cmd/kcp: one binary, its children named by their first argument
        role = argv[1] if len(argv) > 1 else ""
        return {"apiserver": "kube-apiserver", "run": "kcp (etcd, packages)"}.get(role, f"kcp {role}")
    if base.startswith("python") and len(argv) > 1:
        if argv[1] == "-m" and len(argv) > 2:
            return argv[2].split(".")[0]
        if argv[1].startswith("-"):
            return f"python {argv[1]}"
        return Path(argv[1]).name
    return base


def read(pid: int) -> tuple[int, float, int] | None:
    """(parent, CPU seconds of the process itself, start time in ticks) from /proc/<pid>/stat."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK, int(fields[19])


def become_subreaper() -> bool:
    """Adopt the command's orphans (a control plane that ``cluster.py up`` starts and leaves running is one): they
    stay in the tree read here, and their CPU reaches the kernel's count when this process reaps them."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


class Sampler:
    def __init__(self, command: int, every: float):
        self.root, self.command, self.every, self.t0 = os.getpid(), command, every, time.monotonic()
        self.procs: dict = {}  # (pid, start ticks) -> record
        self.stop = threading.Event()

    def _tree(self) -> dict:
        """{pid: (parent, CPU, start)} of every process under this one (the command, and orphans adopted)."""
        stats = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (got := read(int(entry))):
                stats[int(entry)] = got
        children: dict = {}
        for pid, (ppid, _cpu, _st) in stats.items():
            children.setdefault(ppid, []).append(pid)
        inside, frontier = {}, list(children.get(self.root, []))
        while frontier:
            pid = frontier.pop()
            inside[pid] = stats[pid]
            frontier.extend(children.get(pid, []))
        return inside, stats

    def sample(self) -> None:
        now = time.monotonic() - self.t0
        tree, stats = self._tree()
        for pid, (ppid, cpu, started) in tree.items():
            rec = self.procs.get((pid, started))
            if rec is None:
                try:
                    argv = [a for a in Path(f"/proc/{pid}/cmdline").read_text().split("\0") if a]
                except OSError:
                    continue
                parent = (ppid, stats[ppid][2]) if ppid in stats else None
                rec = self.procs[(pid, started)] = {
                    "pid": pid, "parent": parent, "argv": argv, "component": component(argv),
                    "first": now, "last": now, "cpu": 0.0, "cpu_at_start": None,
                }  # fmt: skip
            rec["cpu"], rec["last"] = max(rec["cpu"], cpu), now
            if rec["cpu_at_start"] is None and now - rec["first"] >= START:
                rec["cpu_at_start"] = rec["cpu"]
            if ppid == self.root and pid != self.command:
                with contextlib.suppress(ChildProcessError):  # an adopted orphan that exited: reaped (read above)
                    os.waitpid(pid, os.WNOHANG)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.sample()
            except Exception as exc:  # noqa: BLE001 - a reading that fails is skipped; the command runs on
                print(f"== cpu_by_component: a reading failed: {exc!r}", file=sys.stderr)
            self.stop.wait(self.every)

    def tiers(self) -> dict:
        """{(pid, start): tier}: the tier of each process's nearest pytest, molecule, lint or sanity ancestor (its
        parent as first read, so an orphan adopted here keeps its tier when it was read before its parent left)."""
        out: dict = {}
        for key, rec in self.procs.items():
            name, seen, cur = "other", 0, rec
            while cur is not None and seen < 64:
                line = " ".join(cur["argv"])
                if Path(cur["argv"][0]).name != "make" and any(m in line for m, _ in TIERS):
                    name = next(t for m, t in TIERS if m in line)
                    break
                cur, seen = self.procs.get(cur["parent"]), seen + 1
            out[key] = name
        return out


def report(sampler: Sampler, total: float, wall: float) -> dict:
    by_component, by_tier = Counter(), Counter()
    tiers = sampler.tiers()
    for key, rec in sampler.procs.items():
        by_component[rec["component"]] += rec["cpu"]
        by_tier[tiers[key]] += rec["cpu"]
    seen = sum(by_component.values())
    planes = [
        {
            "tier": tiers[key],
            "pid": r["pid"],
            "lived_s": round(r["last"] - r["first"]),
            "start_cpu_s": round(r["cpu_at_start"] if r["cpu_at_start"] is not None else r["cpu"], 1),
            "after_start_cpu_s": round(r["cpu"] - (r["cpu_at_start"] or r["cpu"]), 1),
        }  # fmt: skip
        for key, r in sampler.procs.items()
        if r["component"] == "kube-apiserver"
    ]
    return {
        "wall_s": round(wall), "cpu_s": round(total), "seen_cpu_s": round(seen), "unseen_cpu_s": round(total - seen),
        "by_component": {k: round(v) for k, v in by_component.most_common()},
        "by_tier": {k: round(v) for k, v in by_tier.most_common()},
        "kube_apiservers": sorted(planes, key=lambda p: -p["lived_s"]),
    }  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="write the figures here too")
    ap.add_argument("--every", type=float, default=1.0, help="seconds between readings of /proc")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("no command given (after --)")
    become_subreaper()
    t0 = time.monotonic()
    child = subprocess.Popen(command)  # noqa: S603 - the user's own command
    sampler = Sampler(child.pid, args.every)
    thread = threading.Thread(target=sampler.run, daemon=True)
    thread.start()
    _pid, status, _usage = os.wait4(child.pid, 0)
    sampler.stop.set()
    thread.join()
    sampler.sample()  # reaps the orphans that exited since the last reading
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # every process reaped: the command's and adopted ones'

    try:  # the command's own exit status is what this returns, whatever the accounting meets
        figures = report(sampler, usage.ru_utime + usage.ru_stime, time.monotonic() - t0)
        print(f"== CPU: {figures['cpu_s']} CPU-s in {figures['wall_s']} s ({figures['unseen_cpu_s']} in processes no "
              f"reading saw)", file=sys.stderr)  # fmt: skip
        for name in ("by_component", "by_tier"):
            print(
                f"== {name.replace('_', ' ')}: " + ", ".join(f"{k} {v}" for k, v in figures[name].items()),
                file=sys.stderr,
            )
        lived = figures["kube_apiservers"]
        print(f"== kube-apiservers: {len(lived)}, {sum(p['start_cpu_s'] for p in lived):.0f} CPU-s in their first "
              f"{START:.0f} s, {sum(p['after_start_cpu_s'] for p in lived):.0f} after; "
              f"{sum(p['lived_s'] for p in lived) / 60:.0f} plane-minutes", file=sys.stderr)  # fmt: skip
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1) + "\n")
    except Exception as exc:  # noqa: BLE001 - a figure we could not make is reported, never fatal
        print(f"== CPU accounting failed: {exc!r}", file=sys.stderr)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
