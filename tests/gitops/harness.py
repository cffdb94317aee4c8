"""Argo CD for real on a local control plane: its application controller and repo server (built by
``make gitops`` from github.com/argoproj/argo-cd/v3, mk/gitops.mk), Redis from Debian's package, and the
rendered tree in a Git repository served on loopback by ``git daemon``.

What Argo CD is given is what the tree ships: the Lua health checks and the controller's sync timeout of
``argocd/<cluster>/health-checks.yaml`` (the OpenShift GitOps operator's ``ArgoCD`` CR, whose operator is not
built here, is translated the way that operator does it: ``resource.customizations.health.<group>_<kind>``
keys of ``argocd-cm``, ``spec.controller.env`` on the controller), the AppProject and the app-of-apps applied
as the docs bootstrap them. Two settings are the test's own: the reconciliation period (Argo CD polls Git
every 120 s by default; 5 s here) and ``ARGOCD_FAKE_IN_CLUSTER`` (the controller runs beside the plane, not in
it: Argo CD's in-cluster destination is then the plane of its kubeconfig).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import yaml
from controlplane.procutil import free_port

REPO = Path(__file__).resolve().parents[2]
ARGOCD_BIN = Path(os.environ.get("ARGOCD_BIN", REPO / ".cache" / "bin" / "argocd"))


def binaries() -> None:
    """The binaries this tier runs; a missing one fails with the command that provides it (never a skip)."""
    missing = [str(ARGOCD_BIN)] if not ARGOCD_BIN.exists() else []
    missing += [b for b in ("redis-server", "git") if not shutil.which(b)]
    assert not missing, f"missing {', '.join(missing)}: run `make gitops` (builds Argo CD, installs redis-server)"


def _wait_port(port: int, proc: subprocess.Popen, what: str, log: Path, timeout: float = 120) -> None:
    import socket

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not listen on {port} in {timeout} s:\n{log.read_text()[-3000:]}")


class GitServer:
    """A bare repository served read-only on loopback (git daemon), pushed from a work tree."""

    def __init__(self, root: Path):
        self.root = root
        self.bare = root / "srv" / "llm-sites.git"
        self.work = root / "work"
        self.port = free_port()
        self.url = f"git://127.0.0.1:{self.port}/llm-sites.git"
        self.proc: subprocess.Popen | None = None

    def _git(self, *args: str, cwd: Path | None = None) -> str:
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t"}
        env["GIT_COMMITTER_EMAIL"] = "t@e"
        res = subprocess.run(["git", *args], check=False, cwd=cwd or self.work, env=env, capture_output=True, text=True)
        assert res.returncode == 0, (args, res.stderr)
        return res.stdout

    def start(self) -> GitServer:
        self.bare.parent.mkdir(parents=True)
        self._git("init", "-q", "--bare", "-b", "main", str(self.bare), cwd=self.root)
        self.work.mkdir()
        self._git("init", "-q", "-b", "main")
        self._git("remote", "add", "origin", str(self.bare))
        log = self.root / "git-daemon.log"
        self.proc = subprocess.Popen(
            ["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={self.bare.parent}",
             "--listen=127.0.0.1", f"--port={self.port}", str(self.bare.parent)],
            stdout=log.open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        _wait_port(self.port, self.proc, "git daemon", log)
        return self

    def commit(self, message: str) -> str:
        self._git("add", "-A")
        if self._git("status", "--porcelain"):
            self._git("commit", "-q", "-m", message)
        self._git("push", "-q", "origin", "main")
        return self._git("rev-parse", "HEAD").strip()

    def stop(self) -> None:
        if self.proc:
            self.proc.terminate()
            self.proc.wait(10)


def _kustomize_shim(bindir: Path, plane) -> None:
    """Argo CD's repo server runs ``kustomize build <dir>``: here the kustomize that kubectl embeds (the plane's
    kubectl, same library) answers it."""
    shim = bindir / "kustomize"
    shim.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = version ]; then echo v5.7.1; exit 0; fi\n'
        'if [ "$1" = build ]; then shift; exec ' + f"{plane.binary} kubectl kustomize" + ' "$@"; fi\n'
        'echo "kustomize shim: only build and version" >&2; exit 1\n'
    )
    shim.chmod(0o755)


def _verify_shim(bindir: Path) -> None:
    """Argo CD's repo server runs ``git-verify-wrapper.sh <revision>`` (a script of its image) for every manifest
    generation, and reads its output only as signature information; with GPG off (ARGOCD_GPG_ENABLED=false here)
    there is none: this one reports nothing."""
    shim = bindir / "git-verify-wrapper.sh"
    shim.write_text("#!/bin/sh\n# GPG verification is off: no signature information\nexit 0\n")
    shim.chmod(0o755)


class ArgoCD:
    """Redis, the repo server and the application controller of one Argo CD, for one plane."""

    def __init__(self, plane, namespace: str, health: dict, workdir: Path):
        self.plane, self.namespace, self.health, self.dir = plane, namespace, health, workdir
        self.procs: list[subprocess.Popen] = []
        self.logs: dict[str, Path] = {}

    def _spawn(self, name: str, argv: list[str], env: dict, port: int) -> None:
        log = self.dir / f"{name}.log"
        self.logs[name] = log
        proc = subprocess.Popen(argv, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=self.dir)
        self.procs.append(proc)
        _wait_port(port, proc, name, log)

    def config(self) -> None:
        """argocd-cm from the tree's ArgoCD CR (as the operator writes it) and argocd-secret."""
        self.plane.kubectl("create", "namespace", self.namespace)
        data = {"timeout.reconciliation": "5s", "timeout.reconciliation.jitter": "0s"}
        for c in self.health["spec"]["resourceHealthChecks"]:
            data[f"resource.customizations.health.{c['group']}_{c['kind']}"] = c["check"]
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "argocd-cm", "namespace": self.namespace,
              "labels": {"app.kubernetes.io/part-of": "argocd"}}, "data": data}  # fmt: skip
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "argocd-secret",
                  "namespace": self.namespace, "labels": {"app.kubernetes.io/part-of": "argocd"}},
                  "stringData": {"server.secretkey": secrets.token_hex(16)}}  # fmt: skip
        res = self.plane.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all([cm, secret]))
        assert res.returncode == 0, res.stderr

    def start(self) -> ArgoCD:
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> ArgoCD:
        binaries()
        self.config()
        bindir = self.dir / "bin"
        bindir.mkdir()
        _kustomize_shim(bindir, self.plane)
        _verify_shim(bindir)
        env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "KUBECONFIG": self.plane.kubeconfig,
               "ARGOCD_FAKE_IN_CLUSTER": "true", "ARGOCD_GPG_ENABLED": "false", "HOME": str(self.dir),
               "TMPDIR": tempfile.mkdtemp(dir=self.dir)}  # fmt: skip
        redis = free_port()
        self._spawn("redis", ["redis-server", "--port", str(redis), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no"], env, redis)  # fmt: skip
        repo = free_port()
        self._spawn(
            "repo-server",
            [str(ARGOCD_BIN), "--port", str(repo), "--metrics-port", str(free_port()), "--disable-tls",
             "--client-ca-path=", "--redis", f"127.0.0.1:{redis}", "--loglevel", "info"],
            {**env, "ARGOCD_BINARY_NAME": "argocd-repo-server"}, repo,
        )  # fmt: skip
        # the controller's environment the tree's ArgoCD CR gives it (the sync timeout)
        ctl_env = {e["name"]: e["value"] for e in (self.health["spec"].get("controller") or {}).get("env") or []}
        metrics = free_port()
        self._spawn(
            "application-controller",
            [str(ARGOCD_BIN), "--namespace", self.namespace, "--kubeconfig", self.plane.kubeconfig,
             "--repo-server", f"127.0.0.1:{repo}", "--repo-server-plaintext", "--redis", f"127.0.0.1:{redis}",
             "--metrics-port", str(metrics), "--self-heal-timeout-seconds", "2", "--loglevel", "info"],
            {**env, **ctl_env, "ARGOCD_BINARY_NAME": "argocd-application-controller"}, metrics,
        )  # fmt: skip
        return self

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()

    def tail(self, name: str = "application-controller", n: int = 60) -> str:
        lines = self.logs[name].read_text(errors="replace").splitlines() if name in self.logs else []
        return "\n".join(lines[-n:])

    def applications(self) -> list[dict]:
        res = self.plane.kubectl("get", "applications.argoproj.io", "-n", self.namespace, "-o", "json")
        assert res.returncode == 0, res.stderr
        import json

        return json.loads(res.stdout)["items"]
