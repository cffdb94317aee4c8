"""Process helpers of the local control plane (test-side): ports, memory, lifetimes."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
from collections.abc import Callable
from pathlib import Path

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_LIBC = ctypes.CDLL(None, use_errno=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_tree_rss(pid: int) -> int:
    """Resident memory (bytes) of pid and all its descendants."""
    total, todo, seen = 0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
            for task in Path(f"/proc/{p}").glob("task/*/children"):
                todo += [int(c) for c in task.read_text().split()]
    return total


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
            return False
    return True


def die_with_parent() -> Callable[[], None]:
    """A Popen preexec_fn: the child is SIGKILLed when the thread that started it dies.

    Linux PR_SET_PDEATHSIG fires on the death of the creating *thread*, so start children
    from a long-lived thread (pytest's and ``cluster.py serve``'s main thread do).
    """
    parent = os.getpid()

    def preexec() -> None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


# ---------------------------------------------------------------------- process groups
# PR_SET_PDEATHSIG reaches one process; a run such as ansible-playbook forks workers of its own,
# which would outlive it. Process groups the tests start are therefore also handed to a reaper: a
# small process in its own session that holds the read end of a pipe only this process writes.
# When this process ends in any way (SIGKILL included) the pipe closes and the reaper SIGKILLs
# every group still registered, then exits.
_REAPER_CODE = r"""
import os, signal, sys
groups = set()
for line in sys.stdin:
    line = line.strip()
    if line[:1] == "+":
        groups.add(int(line[1:]))
    elif line[:1] == "-":
        groups.discard(int(line[1:]))
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""
_reaper: dict = {}


def _reaper_pipe():
    import subprocess
    import sys

    proc = _reaper.get("proc")
    if proc is None or proc.poll() is not None or _reaper.get("pid") != os.getpid():
        proc = subprocess.Popen(  # noqa: S603
            [sys.executable, "-c", _REAPER_CODE],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # a signal to our process group must not take it first
        )
        _reaper.update(proc=proc, pid=os.getpid())
    return proc.stdin


def track_group(pgid: int) -> None:
    """SIGKILL process group ``pgid`` when this process ends, however it ends (see above)."""
    pipe = _reaper_pipe()
    pipe.write(f"+{pgid}\n")
    pipe.flush()


def untrack_group(pgid: int) -> None:
    """The group ended or was stopped: the reaper forgets it."""
    proc = _reaper.get("proc")
    if proc is None or proc.poll() is not None or _reaper.get("pid") != os.getpid():
        return
    with contextlib.suppress(OSError, ValueError):
        proc.stdin.write(f"-{pgid}\n")
        proc.stdin.flush()
