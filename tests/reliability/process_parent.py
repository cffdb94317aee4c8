"""A parent process for test_processes.py: starts every kind of process the tests start, prints
their PIDs, then waits to be SIGKILLed.

``python -m tests.reliability.process_parent WORKDIR`` starts, as the test package does:

* a local control plane (``controlplane.cluster.ControlPlane``: kcp and the kube-apiserver, etcd and
  kube-controller-manager it runs as children, and the KServe controller when the switch is on);
* one guidellm mock server (``tests/slo/mockservers.py``: its own session);
* ``ansible-playbook`` through ``harness.ansible_playbook`` (its own process group, with forked
  workers running a long ``sleep``), on a thread as the tests' runs are.

When everything is up it writes ``WORKDIR/pids.json`` (every descendant: PID, its command line) and
sleeps. The test kills it with SIGKILL and checks that every one of those PIDs is gone.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from tests.reliability.harness import ROOT, ansible_env, ansible_playbook

PLAYBOOK = """\
- name: A run that is still working when its parent dies
  hosts: all
  gather_facts: false
  tasks:
    - name: Sleep in a worker
      ansible.builtin.command: sleep 600
      changed_when: false
"""


def descendants(pid: int) -> dict[int, str]:
    out: dict[int, str] = {}
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}").glob("task/*/children"):
            try:
                kids = [int(c) for c in task.read_text().split()]
            except OSError:
                continue
            for k in kids:
                if k in out:
                    continue
                try:
                    cmd = Path(f"/proc/{k}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                out[k] = cmd.strip()
                todo.append(k)
    return out


def main(workdir: Path) -> None:
    from controlplane.cluster import ControlPlane

    from tests.slo.mockservers import MockFleet

    cp = ControlPlane("l40s-decode-mix", workdir=workdir / "cp").start()
    fleet = MockFleet(workdir)
    fleet.start("m", "decode", "m", 1, (5, 1))

    (workdir / "play.yml").write_text(PLAYBOOK)
    (workdir / "hosts").write_text("worker ansible_connection=local ansible_python_interpreter=" + sys.executable)
    started = threading.Event()

    def run() -> None:
        started.set()
        ansible_playbook(workdir / "play.yml", workdir / "hosts", env=ansible_env(cp.kubeconfig), timeout=900)

    threading.Thread(target=run, daemon=True).start()
    started.wait()
    # up when the worker's sleep runs (ansible-playbook -> worker fork -> ... -> sleep 600)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        tree = descendants(os.getpid())
        if any(c.startswith("sleep 600") for c in tree.values()):
            break
        time.sleep(0.2)
    tree = descendants(os.getpid())
    (workdir / "pids.json.tmp").write_text(json.dumps({str(k): v for k, v in tree.items()}))
    (workdir / "pids.json.tmp").rename(workdir / "pids.json")
    time.sleep(3600)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "tests"))
    main(Path(sys.argv[1]))
