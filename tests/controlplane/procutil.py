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


# ---------------------------------------------------------------------- process groups and marks
# PR_SET_PDEATHSIG reaches one process; a run such as ansible-playbook forks workers of its own,
# which would outlive it. Worse, each Ansible worker calls setsid() (ansible-core,
# executor/process/worker.py): its own session and process group, so neither PDEATHSIG (not
# inherited across fork) nor a kill of the run's process group reaches it or the module it runs.
# Runs the tests start therefore carry a mark in their environment (MARK_VAR=<unique value>, which
# every descendant inherits: workers, `sh -c`, the module's python) and are handed to a reaper: a
# small process in its own session that holds the read end of a pipe only this process writes.
# When this process ends in any way (SIGKILL included) the pipe closes and the reaper SIGKILLs
# every process group and every marked process still registered, then exits.
MARK_VAR = "INFERENCE_BLUEPRINTS_TEST_RUN"

_REAPER_CODE = r"""
import os, signal, sys, time

def kill_marked(marks):
    needles = {("%s=%s" % (VAR, m)).encode() for m in marks}
    for _ in range(50):
        found = 0
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == os.getpid():
                continue
            try:
                with open("/proc/%s/environ" % d, "rb") as f:
                    env = set(f.read().split(b"\0"))
                with open("/proc/%s/stat" % d, "rb") as f:
                    zombie = f.read().rsplit(b")", 1)[-1].split()[0] == b"Z"
            except OSError:
                continue
            if zombie or not (env & needles):
                continue
            found += 1
            try:
                os.kill(int(d), signal.SIGKILL)
            except OSError:
                pass
        if not found:
            return
        time.sleep(0.05)

VAR = sys.argv[1]
groups, marks = set(), set()
for line in sys.stdin:
    line = line.strip()
    if line[:2] == "+m":
        marks.add(line[2:])
    elif line[:2] == "-m":
        marks.discard(line[2:])
    elif line[:1] == "+":
        groups.add(int(line[1:]))
    elif line[:1] == "-":
        groups.discard(int(line[1:]))
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
if marks:
    kill_marked(marks)
"""
_reaper: dict = {}


def _reaper_pipe():
    import subprocess
    import sys

    proc = _reaper.get("proc")
    if proc is None or proc.poll() is not None or _reaper.get("pid") != os.getpid():
        proc = subprocess.Popen(  # noqa: S603
            [sys.executable, "-c", _REAPER_CODE, MARK_VAR],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # a signal to our process group must not take it first
        )
        _reaper.update(proc=proc, pid=os.getpid())
    return proc.stdin


def _tell_reaper(line: str) -> None:
    proc = _reaper.get("proc")
    if proc is None or proc.poll() is not None or _reaper.get("pid") != os.getpid():
        return
    with contextlib.suppress(OSError, ValueError):
        proc.stdin.write(line + "\n")
        proc.stdin.flush()


def track_group(pgid: int) -> None:
    """SIGKILL process group ``pgid`` when this process ends, however it ends (see above)."""
    pipe = _reaper_pipe()
    pipe.write(f"+{pgid}\n")
    pipe.flush()


def untrack_group(pgid: int) -> None:
    """The group ended or was stopped: the reaper forgets it."""
    _tell_reaper(f"-{pgid}")


def new_mark() -> str:
    """A unique value for ``MARK_VAR`` in one run's environment (tracked until ``untrack_mark``)."""
    mark = f"{os.getpid()}-{os.urandom(8).hex()}"
    pipe = _reaper_pipe()
    pipe.write(f"+m{mark}\n")
    pipe.flush()
    return mark


def untrack_mark(mark: str) -> None:
    _tell_reaper(f"-m{mark}")


def marked(mark: str) -> list[int]:
    """Live processes whose environment carries ``MARK_VAR=mark`` (however far they detached)."""
    needle = f"{MARK_VAR}={mark}".encode()
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{d}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if needle in env and alive(int(d)):
            out.append(int(d))
    return out


def kill_marked(mark: str, timeout: float = 5.0) -> list[int]:
    """SIGKILL every process carrying the mark until none is left (a fork racing the scan is
    caught by the next one); returns the PIDs still alive after ``timeout`` (none expected)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        pids = marked(mark)
        if not pids or time.monotonic() > deadline:
            return pids
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


# ---------------------------------------------------------------------- loopback pod networks
class LoopbackNet:
    """One 127.<k>.0.0/16 of the loopback range, claimed for one control plane instance.

    The pods of an instance get their IPs from it (kwok gives each pod an address of its node's
    ``spec.podCIDR``), so processes on this machine can listen on a pod's address. The claim is an
    exclusive ``flock`` on ``<dir>/<k>.lock``, held until :meth:`release` or the process's end, so
    instances started side by side (other pytest sessions, molecule) never share a range.
    """

    FIRST, LAST = 16, 254  # 127.0-15.x.x left alone (127.0.0.1 and whatever else uses the low ranges)

    def __init__(self, lock_dir: str | Path | None = None):
        import fcntl
        import tempfile

        d = Path(lock_dir or Path(tempfile.gettempdir()) / "kcp-loopback-nets")
        d.mkdir(parents=True, exist_ok=True)
        for k in range(self.FIRST, self.LAST + 1):
            fd = os.open(d / f"{k}.lock", os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            self.octet, self._fd = k, fd
            return
        raise RuntimeError(f"no free 127.<k>.0.0/16 for pod IPs ({self.FIRST}..{self.LAST} all claimed in {d})")

    @property
    def cidr(self) -> str:
        return f"127.{self.octet}.0.0/16"

    @property
    def default_cidr(self) -> str:
        """kwok's --cidr: for a node without spec.podCIDR (none here)."""
        return f"127.{self.octet}.0.0/24"

    def node_cidr(self, index: int) -> str:
        """spec.podCIDR of the instance's node number ``index`` (0-based; up to 254 nodes)."""
        if not 0 <= index < 254:
            raise ValueError(f"node index {index} outside 0..253")
        return f"127.{self.octet}.{index + 1}.0/24"

    def release(self) -> None:
        if getattr(self, "_fd", None) is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
