"""One upstream component process of a local control plane instance (TEST-SIDE ONLY).

The KServe controller, kwok and the LeaderWorkerSet controller run beside ``kcp run`` the same way:
a binary built by ``make controlplane`` into ``.cache/bin``, the instance's admin kubeconfig, a log
in the instance directory, ports on loopback, ``PR_SET_PDEATHSIG`` = SIGKILL (the process dies with
the thread that launched it, even when that is SIGKILLed: launch from a long-lived thread, such as
pytest's or ``cluster.py serve``'s main thread, and only *wait* in other threads).

A component starts in two steps so that an instance starts its components side by side:
:meth:`Component.launch` (quick, main thread) and :meth:`Component.ready` (waits; any thread).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

try:  # imported as controlplane.component (pytest) or beside cluster.py as a script
    from .procutil import die_with_parent, process_tree_rss
except ImportError:
    from procutil import die_with_parent, process_tree_rss  # type: ignore[no-redef]

if TYPE_CHECKING:
    from .cluster import ControlPlane

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CACHE = Path(os.environ.get("KCP_CACHE", REPO / ".cache"))


class ComponentError(RuntimeError):
    """A component could not be started (the control plane start fails with this)."""


class Component:
    """A child process of one control plane instance."""

    name = "component"  # the log file is <instance>/<name>.log
    error = ComponentError

    def __init__(self, cp: ControlPlane, binary: Path):
        self.cp = cp
        self.binary = Path(binary)
        self.proc: subprocess.Popen | None = None
        self.log = cp.workdir / f"{self.name}.log"
        self.timings: dict[str, float] = {}
        self.t0 = 0.0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def rss_bytes(self) -> int:
        return process_tree_rss(self.pid) if self.pid and self.proc.poll() is None else 0

    def log_tail(self, n: int = 40) -> str:
        if not self.log.exists():
            return ""
        return "\n".join([f"--- {self.log}", *self.log.read_text(errors="replace").splitlines()[-n:]])

    def missing(self, how: str) -> None:
        if not self.binary.exists():
            raise self.error(f"{self.binary} is missing: run `make controlplane` ({how})")

    # ------------------------------------------------------------------ lifecycle
    def spawn(self, args: list[str], env: dict[str, str] | None = None, wrap: list[str] | None = None) -> None:
        """Start the binary with the instance's kubeconfig (no other KUBECONFIG, no GOEXPERIMENT); ``wrap`` is a
        command that runs it (its argv before the binary's)."""
        self.t0 = self.t0 or time.monotonic()
        base = {k: v for k, v in os.environ.items() if k not in ("GOEXPERIMENT", "KUBECONFIG", "POD_NAMESPACE")}
        base |= {"KUBECONFIG": self.cp.kubeconfig, "GOGC": "50"}  # GOGC as for the control plane's children
        log = open(self.log, "w")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            [*(wrap or []), str(self.binary), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=base | (env or {}),
            preexec_fn=die_with_parent(),  # noqa: PLW1509 - prctl only, no locks
        )
        log.close()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def wait(self, ready: Callable[[], bool], what: str, timeout: float) -> None:
        """Poll ``ready`` until true; raise with the log's tail when the process exits or time runs out."""
        while not ready():
            if self.proc.poll() is not None:
                raise self.error(f"{self.name} exited with {self.proc.returncode} before {what}:\n{self.log_tail()}")
            if time.monotonic() - self.t0 > timeout:
                raise self.error(f"{self.name}: no {what} after {timeout:.0f}s:\n{self.log_tail()}")
            time.sleep(0.1)
        self.timings[what] = time.monotonic() - self.t0

    @staticmethod
    def http_ok(url: str) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:  # noqa: S310 - loopback http
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False
