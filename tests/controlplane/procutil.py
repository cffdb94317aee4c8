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
