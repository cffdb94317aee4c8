"""guidellm's own mock OpenAI server (``guidellm mock-server``) as stand-ins for vLLM replicas.

Each replica is one process on loopback in its own process group, started by the test and killed with
it (``stop``), SIGKILLed by the kernel if the test process dies first (PR_SET_PDEATHSIG, as the control
plane's processes). The mock answers /v1/models, /v1/chat/completions (streaming, with usage) after
``ttft_ms`` and then one token per ``itl_ms``; its output length is the request's max tokens.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.controlplane.procutil import die_with_parent, free_port

GUIDELLM = str(Path(sys.executable).parent / "guidellm")


@dataclass
class Replica:
    port: int
    ttft_ms: float
    itl_ms: float
    model: str
    proc: subprocess.Popen | None = None
    log: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class MockFleet:
    """Mock replicas by (model, pool); ``restart`` gives a pool new latencies on the same ports."""

    workdir: Path
    replicas: dict = field(default_factory=dict)  # (model, pool) -> [Replica]

    def start(self, model: str, pool: str, served_name: str, count: int, latency: tuple[float, float]) -> list[str]:
        """``count`` replicas answering as ``served_name`` with latency (TTFT ms, ITL ms)."""
        reps = [Replica(free_port(), *latency, served_name) for _ in range(count)]
        for r in reps:
            self._spawn(r)
        for r in reps:
            self._wait(r)
        self.replicas[(model, pool)] = reps
        return [r.url for r in reps]

    def restart(self, model: str, pool: str, latency: tuple[float, float]) -> None:
        for r in self.replicas[(model, pool)]:
            self._kill(r)
            r.ttft_ms, r.itl_ms = latency
            self._spawn(r)
        for r in self.replicas[(model, pool)]:
            self._wait(r)

    def urls(self, model: str, pool: str) -> list[str]:
        return [r.url for r in self.replicas[(model, pool)]]

    def _spawn(self, r: Replica) -> None:
        r.log = self.workdir / f"mock-{r.port}.log"
        cmd = [GUIDELLM, "mock-server", "--host", "127.0.0.1", "--port", str(r.port), "--model", r.model,
               "--ttft-ms", str(r.ttft_ms), "--itl-ms", str(r.itl_ms), "--output-tokens", "100000"]  # fmt: skip
        with open(r.log, "ab") as log:
            r.proc = subprocess.Popen(  # noqa: S603
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent(),  # noqa: PLW1509 - prctl only
            )

    def _wait(self, r: Replica, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if r.proc.poll() is not None:
                raise RuntimeError(f"mock server on {r.port} exited: {r.log.read_text()[-2000:]}")
            with contextlib.suppress(OSError), urllib.request.urlopen(r.url + "/v1/models", timeout=2):  # noqa: S310
                MockFleet._warm(r)
                return
            time.sleep(0.2)
        raise RuntimeError(f"mock server on {r.port} not up in {timeout} s: {r.log.read_text()[-2000:]}")

    @staticmethod
    def _warm(r: Replica) -> None:
        """One streamed completion before the replica counts as up, as vLLM warms up before it reports Ready: a
        fresh process's first request (imports, first event-loop work) took 568 ms on a 100 ms TTFT in a CI run,
        and a p95 over a canary's 10 requests is nearly their maximum."""
        body = json.dumps({"model": r.model, "messages": [{"role": "user", "content": "warm up"}], "max_tokens": 2,
                           "stream": True}).encode()  # fmt: skip
        req = urllib.request.Request(r.url + "/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})  # fmt: skip
        with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 - loopback
            resp.read()

    @staticmethod
    def _kill(r: Replica) -> None:
        if r.proc and r.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(r.proc.pid, signal.SIGKILL)
            r.proc.wait(timeout=10)

    def stop(self) -> None:
        for reps in self.replicas.values():
            for r in reps:
                self._kill(r)
