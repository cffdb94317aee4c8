#!/usr/bin/env python3
"""Local control plane manager (test-side).

Starts ``kcp run`` (kube-apiserver, kube-controller-manager with the workload controllers,
kube-scheduler and an embedded etcd, built by ``make controlplane`` into ``.cache/bin/kcp``), waits
until every upstream CRD is Established and the PackageManifest API is available, seeds what an
OpenShift cluster of the chosen site profile has (ClusterVersion, Infrastructure, ``openshift-*``
namespaces, catalog sources, MachineConfigPools, GPU/NIC nodes, storage classes), then starts side
by side the upstream components that run on such a cluster:

* kwok (``kwok_agent.py``): the node agent of every seeded Node; pods bound by kube-scheduler
  become Running and Ready through kwok's own Stages, with loopback pod IPs;
* the LeaderWorkerSet controller with its webhooks (``lws_controller.py``);
* the KServe LLMInferenceService controller (``kserve_controller.py``; switch ``KCP_KSERVE``, on
  by default);

and the status simulator (``tests/simulator``) for what has no runnable upstream here: OLM, the
operators' status, the Gateway controller, HPA/KEDA status, Argo CD, the MachineConfig pools.

Python API (what the pytest fixtures in ``tests/conftest.py`` hand out)::

    cp = ControlPlane("h100-8x2-rdma").start()
    cp.kubeconfig            # admin kubeconfig path (system:masters)
    cp.api_client            # kubernetes.client.ApiClient for it
    cp.dynamic               # kubernetes.dynamic.DynamicClient
    cp.profile               # the site profile (dict, profiles/<name>.yaml)
    cp.mint_sa_kubeconfig("ns", "sa")   # kubeconfig of a ServiceAccount (token request)
    cp.set_never_ready("ClusterPolicy", "gpu-cluster-policy")   # what the simulator plays
    cp.clear_never_ready()
    with cp.hold_scheduling(): ...      # workloads: nodes cordoned, new pods stay Pending
    cp.kubectl("get", "crd")            # kubectl of the same Kubernetes version
    cp.kserve                           # KServeController when the switch is on, else None
    cp.kwok, cp.lws                     # the node agent and the LeaderWorkerSet controller
    cp.pod_network                      # the loopback /16 the instance's pod IPs come from
    cp.stop()

Command line (what ``make cluster-up`` / ``make cluster-down`` run)::

    cluster.py up --profile h100-8x2-rdma --dir .cluster   # background; prints usage
    cluster.py up --kserve ...                             # with the real KServe controller
    cluster.py down --dir .cluster                         # stops it; nothing left running
    cluster.py serve ...                                   # foreground (used by up)
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from pathlib import Path
from typing import Any

import yaml


def _read_whole_json(path: Path, timeout: float = 10) -> dict:
    """A JSON file another process may still be writing (kcp writes ready.json in place): read until it parses."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return json.loads(path.read_text())
        except ValueError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


_CLIENT_LOCK = threading.RLock()  # kubeconfig loads and the shared client (see new_api_client)
# Instances whose kcp had exited on its own when they were stopped: what it said last (its work directory goes
# with the stop). A test that fails on a dropped connection then names the cause (tests/conftest.py).
DEATHS: list[str] = []
STARTS: list[tuple[str, str, float]] = []  # every start of this process: (test file, profile, seconds to ready)
LIVE: weakref.WeakSet = weakref.WeakSet()  # instances started and not stopped


def dead_since(seen: int) -> list[str]:
    """Deaths recorded after the first ``seen``, and those of instances still held whose kcp has exited."""
    return DEATHS[seen:] + [cp.death() for cp in list(LIVE) if cp.proc and cp.proc.poll() is not None]


HERE = Path(__file__).resolve().parent
# A run that starts a detached plane (molecule scenarios, from mk/molecule.mk) names itself here; the
# plane stops when that process is gone, so an interrupted `make test` leaves no control plane behind.
OWNER_ENV = "CLUSTER_OWNER_PID"
REPO = HERE.parents[1]
if str(HERE.parent) not in sys.path:  # make tests/simulator importable when run as a script
    sys.path.insert(0, str(HERE.parent))
if str(HERE) not in sys.path:  # and kserve_controller beside this file
    sys.path.insert(0, str(HERE))

try:  # imported as controlplane.cluster (pytest) or run as a script
    from . import kserve_controller, kserve_rhoai, kwok_agent, lws_controller, scc_admission
    from .component import ComponentError
    from .procutil import LoopbackNet, die_with_parent, free_port, process_tree_rss
    from .procutil import alive as _alive
except ImportError:
    import kserve_controller  # type: ignore[no-redef]
    import kserve_rhoai  # type: ignore[no-redef]
    import kwok_agent  # type: ignore[no-redef]
    import lws_controller  # type: ignore[no-redef]
    import scc_admission  # type: ignore[no-redef]
    from component import ComponentError  # type: ignore[no-redef]
    from procutil import LoopbackNet, die_with_parent, free_port, process_tree_rss  # type: ignore[no-redef]
    from procutil import alive as _alive  # type: ignore[no-redef]

__all__ = ["ControlPlane", "ControlPlaneError", "_alive", "free_port", "merged_kubeconfig", "process_tree_rss"]

CACHE = Path(os.environ.get("KCP_CACHE", REPO / ".cache"))
BINARY = Path(os.environ.get("KCP_BIN", CACHE / "bin" / "kcp"))
CRDS = Path(os.environ.get("KCP_CRDS", CACHE / "crds" / "crds.json"))
# etcd snapshots taken right after a plane's CRDs are Established, keyed by kcp's Go build ID and the CRD bundle
# (kcp run --snapshot-cache): kept outside the clone, so a fresh clone of the same sources restores instead of
# creating every CRD on its first starts (KCP_SNAPSHOTS moves them)
SNAPSHOTS = Path(
    os.environ.get("KCP_SNAPSHOTS")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "inference-blueprints" / "etcd-snapshots"
)
CATALOG = HERE / "catalog" / "packages.yaml"
PROFILES = HERE / "profiles"
DEFAULT_PROFILE = "h100-8x2-rdma"

# Namespaces an OpenShift 4.x cluster has before anything is installed (the subset that
# preflight and the roles touch, plus the usual platform ones).
OPENSHIFT_NAMESPACES = [
    "openshift-apiserver",
    "openshift-cluster-version",
    "openshift-config",
    "openshift-config-managed",
    "openshift-console",
    "openshift-dns",
    "openshift-image-registry",
    "openshift-infra",
    "openshift-ingress",
    "openshift-ingress-operator",
    "openshift-kube-apiserver",
    "openshift-machine-config-operator",
    "openshift-marketplace",
    "openshift-monitoring",
    "openshift-network-operator",
    "openshift-node",
    "openshift-operators",
    "openshift-user-workload-monitoring",
]
# Namespaces of the prerequisites the plane stands in for by serving their CRDs: Envoy Gateway's controller
# namespace (its Helm chart's default), where it creates each proxy's Service and a burst cluster's Route points
PREREQUISITE_NAMESPACES = ["envoy-gateway-system"]


class ControlPlaneError(RuntimeError):
    """The control plane could not be built, started or seeded (tests must fail, not skip)."""


def load_profile(name: str) -> dict:
    path = PROFILES / f"{name}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in PROFILES.glob("*.yaml"))
        raise ControlPlaneError(f"unknown site profile {name!r}; known: {', '.join(known)}")
    return yaml.safe_load(path.read_text())


class ControlPlane:
    """One local control plane instance on free loopback ports."""

    def __init__(
        self,
        profile: str = DEFAULT_PROFILE,
        *,
        workdir: str | Path | None = None,
        simulate: bool = True,
        sim_delay: float | None = None,
        binary: Path = BINARY,
        crds: Path = CRDS,
        kserve: bool | None = None,
        kserve_flavor: str | None = None,
        scc: bool | None = None,
        hpa: bool = False,
    ):
        self.profile_name = profile
        # kube-controller-manager's HPA controller (tests/autoscaling); else the simulator plays HPA status
        self.hpa = hpa
        self.profile = load_profile(profile)
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix=f"kcp-{profile}-"))
        self.simulate = simulate
        self.sim_delay = sim_delay
        self.binary = Path(binary)
        self.crds = Path(crds)
        # The real KServe controller (None: the KCP_KSERVE environment variable decides).
        self.kserve_enabled = kserve_controller.enabled_by_default() if kserve is None else kserve
        self.kserve_webhook_port = 0  # chosen at start (_conversions_file)
        self.conversions_set: set[str] = set()  # CRDs whose conversion kcp set in etcd
        self.restored = False  # kcp restored its etcd from a snapshot of the CRD bundle
        self.kserve: kserve_controller.KServeController | None = None
        # Which KServe (rhoai | upstream; None: KCP_KSERVE_FLAVOR, else kserve_controller.DEFAULT_FLAVOR).
        self.kserve_flavor = kserve_controller.flavor(kserve_flavor)
        if self.kserve_enabled and self.kserve_flavor == "rhoai" and self.crds == CRDS and self.crds.exists():
            # the bundle with OpenShift AI's own LLMInferenceService CRDs (and Istio's DestinationRule) in it
            self.crds = kserve_rhoai.crd_bundle(self.crds)
        # OpenShift's SCC admission (None: KCP_SCC decides, on when built; scc_admission.py).
        self.scc_enabled = scc_admission.enabled_by_default() if scc is None else scc
        self.scc: scc_admission.SCCAdmission | None = None
        self.kwok: kwok_agent.KwokAgent | None = None
        self.lws: lws_controller.LWSController | None = None
        self.pod_network: LoopbackNet | None = None
        self.proc: subprocess.Popen | None = None
        self.simulator = None
        self.kubeconfig = str(self.workdir / "kubeconfig")
        self.server = ""
        self.ready_seconds: float | None = None
        self.timings: dict[str, float] = {}
        self._api_client = None
        self._dynamic = None
        self._batch: list | None = None
        self._executor = None

    # ------------------------------------------------------------------ lifecycle
    def _conversions_file(self) -> Path:
        """The KServe CRDs' conversion webhooks, for kcp to set in the CRDs its etcd snapshot restores before
        kube-apiserver starts (cmd/kcp/conversions.go: a PATCH of these ~800 kB CRDs once it runs cost a start about
        a tenth of its CPU); the controller's webhook port is chosen here for it, the caBundle left for kcp (the
        plane's CA). What kcp did not set (the first start of a bundle) the controller PATCHes as before."""
        self.kserve_webhook_port = free_port()
        rhoai = self.kserve_flavor == "rhoai"
        patches = (kserve_rhoai.conversion_patches if rhoai else kserve_controller.conversion_patches)(
            self.kserve_webhook_port, ""
        )
        path = self.workdir / "crd-conversions.json"
        path.write_text(json.dumps({name: patch["spec"]["conversion"] for name, patch in patches.items()}))
        return path

    def start(self, timeout: float = 300) -> ControlPlane:
        if not self.binary.exists():
            raise ControlPlaneError(
                f"{self.binary} is missing: run `make controlplane` (builds it from the Kubernetes Go modules)"
            )
        if not self.crds.exists():
            raise ControlPlaneError(f"{self.crds} is missing: run `make controlplane` (collects the upstream CRDs)")
        for path, how in (
            (kwok_agent.BINARY, "builds kwok, the node agent"),
            (lws_controller.BINARY, "builds the LeaderWorkerSet controller"),
            *(
                [(kserve_controller.binary(self.kserve_flavor), "builds the KServe controller")]
                if self.kserve_enabled
                else []
            ),
            *([(scc_admission.BINARY, "builds the SCC admission: make scc")] if self.scc_enabled else []),
        ):
            if not path.exists():
                target = "kserve-rhoai" if path == kserve_controller.binary("rhoai") else "controlplane"
                raise ControlPlaneError(f"{path} is missing: run `make {target}` ({how})")
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "ready.json").unlink(missing_ok=True)
        t0 = time.monotonic()
        self.port = free_port()
        self.scheduler_port = free_port()
        conversions = self._conversions_file() if self.kserve_enabled else None
        args = [
            str(self.binary),
            "run",
            f"--dir={self.workdir}",
            f"--port={self.port}",
            f"--etcd-port={free_port()}",
            f"--etcd-peer-port={free_port()}",
            f"--packages-port={free_port()}",
            f"--scheduler-port={self.scheduler_port}",
            f"--crds={self.crds}",
            f"--catalog={CATALOG}",
            f"--snapshot-cache={SNAPSHOTS}",
            f"--ready-timeout={int(timeout)}s",
            *(["--hpa"] if self.hpa else []),
            *([f"--crd-conversions={conversions}"] if conversions else []),
        ]
        log = open(self.workdir / "kcp.log", "w")  # noqa: SIM115 - handed to the child
        env = {k: v for k, v in os.environ.items() if k not in ("GOEXPERIMENT", "KUBECONFIG")}
        # kcp dies with the thread that starts it, even on SIGKILL (its own children die with it).
        self.proc = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            preexec_fn=die_with_parent(),  # noqa: PLW1509 - prctl only
        )
        log.close()
        ready = self.workdir / "ready.json"
        while not ready.exists():
            if self.proc.poll() is not None:
                raise ControlPlaneError(f"kcp exited with {self.proc.returncode}:\n{self._log_tail()}")
            if time.monotonic() - t0 > timeout:
                self.stop()
                raise ControlPlaneError(f"control plane not ready after {timeout}s:\n{self._log_tail()}")
            time.sleep(0.05)
        info = _read_whole_json(ready)
        self.server = info["server"]
        self.conversions_set = set(info.get("conversions") or ())
        self.restored = bool(info.get("restored"))
        self.timings["kcp_ready"] = time.monotonic() - t0
        try:
            self.pod_network = LoopbackNet()
            self.seed()
            self.timings["seeded"] = time.monotonic() - t0
            if self.simulate:
                self.start_simulator()
            self._start_components(t0, timeout)
        except Exception as e:
            self.stop()
            if isinstance(e, ComponentError):
                raise ControlPlaneError(str(e)) from e
            raise
        self.ready_seconds = time.monotonic() - t0
        LIVE.add(self)
        # (test file, profile, seconds to ready): tests/conftest.py prints the starts of a pytest session by
        # file; each costs the machine about half a minute of CPU (kube-apiserver loading every CRD)
        where = (os.environ.get("PYTEST_CURRENT_TEST") or "outside a test").split("::", 1)[0]
        STARTS.append((where, self.profile_name, self.ready_seconds))
        return self

    def _start_components(self, t0: float, timeout: float) -> None:
        """kwok, the LeaderWorkerSet controller and KServe, side by side: each process is launched from
        this thread (they die with it), their readiness is awaited in parallel."""
        from concurrent.futures import ThreadPoolExecutor

        self.kwok = kwok_agent.KwokAgent(self)
        self.lws = lws_controller.LWSController(self)
        if self.kserve_enabled:
            self.kserve = kserve_controller.KServeController(self, flavor_=self.kserve_flavor)
        if self.scc_enabled:
            self.scc = scc_admission.SCCAdmission(self)
        parts = {"kwok": self.kwok, "lws": self.lws, "kserve": self.kserve, "scc": self.scc}
        parts = {k: v for k, v in parts.items() if v is not None}
        for part in parts.values():
            part.launch()

        def ready(key: str) -> None:
            parts[key].ready(timeout)
            self.timings[f"{key}_ready"] = time.monotonic() - t0

        with ThreadPoolExecutor(len(parts)) as pool:
            for f in [pool.submit(ready, k) for k in parts]:
                f.result()

    def stop_apiserver(self, timeout: float = 30) -> None:
        """Crash the kube-apiserver (SIGKILL; kcp keeps it down until :meth:`start_apiserver`). etcd, the
        controller manager, the scheduler and the components beside kcp stay up and reconnect later."""
        self._signal_kcp(signal.SIGUSR1, "kube-apiserver killed", timeout)

    def start_apiserver(self, timeout: float = 120) -> float:
        """Start the kube-apiserver again with its flags; seconds until its /readyz answered 200."""
        return self._signal_kcp(signal.SIGUSR2, "kube-apiserver restarted", timeout)

    def _signal_kcp(self, sig: int, said: str, timeout: float) -> float:
        log = self.workdir / "kcp.log"
        before = log.read_text(errors="replace").count(said)
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        while log.read_text(errors="replace").count(said) == before:
            if self.proc.poll() is not None:
                raise ControlPlaneError(self.death())
            if time.monotonic() - t0 > timeout:
                raise ControlPlaneError(f"kcp did not log {said!r} within {timeout:.0f} s:\n{self._log_tail()}")
            time.sleep(0.05)
        return time.monotonic() - t0

    def death(self) -> str:
        """What kcp said before it exited on its own: its first lines name the child that stopped it."""
        log = self.workdir / "kcp.log"
        kcp = log.read_text(errors="replace").splitlines() if log.exists() else []
        why = next((line.split("kcp: ", 1)[-1] for line in reversed(kcp) if "kcp: error" in line), "no reason logged")
        return (
            f"control plane {self.profile_name} had died, kcp exited with {self.proc.returncode if self.proc else '?'} "
            f"({why}; {self.workdir.name})\n" + self._log_tail(15)
        )

    def _log_tail(self, n: int = 40) -> str:
        lines = []
        for name in (
            "kcp.log",
            "apiserver.log",
            "controller-manager.log",
            "scheduler.log",
            "kwok.log",
            "lws.log",
            "llmisvc.log",
            "sccwebhook.log",
        ):
            p = self.workdir / name
            if p.exists():
                lines += [f"--- {p}"] + p.read_text(errors="replace").splitlines()[-n:]
        return "\n".join(lines)

    def start_simulator(self) -> None:
        from simulator import Simulator

        # With the real KServe controller, LLMInferenceService status is KServe's to write.
        self.simulator = Simulator(self.new_api_client(), delay=self.sim_delay).start()

    def stop(self) -> None:
        if self in LIVE and self.proc.poll() is not None:  # once: a second stop finds it gone from LIVE
            DEATHS.append(self.death())
        LIVE.discard(self)
        if self.simulator:
            self.simulator.stop()
            self.simulator = None
        for part in (self.kserve, self.lws, self.kwok, self.scc):
            if part:
                part.stop()
        if self._api_client:
            with contextlib.suppress(Exception):
                self._api_client.close()
            self._api_client = None
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.pod_network:
            self.pod_network.release()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def rss_bytes(self) -> int:
        """Resident memory of the instance: kcp and its children, kwok, LWS and the KServe controller."""
        return (process_tree_rss(self.pid) if self.pid else 0) + sum(self.component_rss().values())

    def component_rss(self) -> dict[str, int]:
        """Resident memory of each component process beside kcp (bytes)."""
        return {k: p.rss_bytes() for k, p in (("kwok", self.kwok), ("lws", self.lws), ("kserve", self.kserve)) if p}

    def kserve_rss_bytes(self) -> int:
        return self.kserve.rss_bytes() if self.kserve else 0

    # ------------------------------------------------------------------ clients
    def new_api_client(self, kubeconfig: str | None = None, pool: int = 64):
        """A new ApiClient for the admin (or the given) kubeconfig, with room for many watches.

        Loads are serialised: the kubernetes client names its certificate temp file (kept per
        content) before it writes it, so a second thread loading the same kubeconfig meanwhile gets
        an empty file ("[SSL] PEM lib", seen in CI when seeding threads built their first client)."""
        from ansible_collections.inference.blueprints.plugins.module_utils import k8s_client
        from kubernetes import client, config

        cfg = client.Configuration()
        with _CLIENT_LOCK:
            config.load_kube_config(config_file=kubeconfig or self.kubeconfig, client_configuration=cfg)
        cfg.connection_pool_maxsize = pool
        cfg.retries = k8s_client.closed_connection_retries()  # as the collection's own client does
        return client.ApiClient(cfg)

    @property
    def api_client(self):
        with _CLIENT_LOCK:  # one client, even when the seeding threads ask for it at once
            if self._api_client is None:
                self._api_client = self.new_api_client()
            return self._api_client

    @property
    def dynamic(self):
        if self._dynamic is None:
            from kubernetes import dynamic

            self._dynamic = dynamic.DynamicClient(self.api_client)
        return self._dynamic

    def kubectl(
        self, *args: str, kubeconfig: str | None = None, check: bool = False, input: str | None = None
    ) -> subprocess.CompletedProcess:
        """Run the kubectl built into kcp (same Kubernetes version as the server)."""
        cmd = [str(self.binary), "kubectl", f"--kubeconfig={kubeconfig or self.kubeconfig}", *args]
        return subprocess.run(cmd, capture_output=True, text=True, input=input, check=check, timeout=120)

    # ------------------------------------------------------------------ helpers
    def _call(self, method: str, path: str, body: Any = None, patch: bool = False) -> Any:
        from kubernetes.client.rest import ApiException
        from simulator.kube import request

        ctype = "application/merge-patch+json" if patch else None
        for attempt in range(4):
            try:
                return request(self.api_client, method, path, body=body, content_type=ctype, timeout=120)
            except ApiException as e:
                if method == "POST" and e.status == 409:
                    return None
                # a busy machine (several planes and builds at once): the API server gives up on a large CRD's
                # write with 504 Timeout, or sheds load with 429/503; the write is idempotent, so try again
                if e.status in (429, 503, 504) and attempt < 3:
                    time.sleep(2 * (attempt + 1))
                    continue
                raise ControlPlaneError(f"{method} {path}: {e.status} {e.body}") from e
        raise AssertionError("unreachable")

    def apply(self, obj: dict, status: dict | None = None) -> None:
        """Create obj (no-op when it exists); then set its status through the status subresource."""
        if self._batch is not None:  # seeding: requests go out in parallel
            self._batch.append(self._executor.submit(self._apply, obj, status))
            return
        self._apply(obj, status)

    def _flush(self) -> None:
        futures, self._batch = self._batch, []
        for f in futures:
            f.result()

    def _apply(self, obj: dict, status: dict | None = None) -> None:
        api_version, kind = obj["apiVersion"], obj["kind"]
        plural = _PLURALS[kind]
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        ns = obj["metadata"].get("namespace")
        coll = f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}"
        created = self._call("POST", coll, obj)
        if status is None:
            return
        # PUT, not a merge patch: some status fields are required but may be null. A controller may
        # change the object meanwhile (kube-controller-manager's node-lifecycle controller taints a new
        # Node): read it again and retry on a conflict.
        name = obj["metadata"]["name"]
        current = created or self._call("GET", f"{coll}/{name}")
        for _ in range(10):
            current["status"] = status
            try:
                self._call("PUT", f"{coll}/{name}/status", current)
                return
            except ControlPlaneError as e:
                if ": 409 " not in str(e):
                    raise
            current = self._call("GET", f"{coll}/{name}")
        raise ControlPlaneError(f"PUT {coll}/{name}/status: still conflicting after 10 tries")

    def _sim_config(self, data: dict) -> None:
        from simulator import CONFIG_NAME, CONFIG_NAMESPACE

        path = f"/api/v1/namespaces/{CONFIG_NAMESPACE}/configmaps/{CONFIG_NAME}"
        self._call("PATCH", path, {"data": data}, patch=True)

    def _read_sim_config(self) -> dict:
        from simulator import CONFIG_NAME, CONFIG_NAMESPACE

        return self._call("GET", f"/api/v1/namespaces/{CONFIG_NAMESPACE}/configmaps/{CONFIG_NAME}").get("data") or {}

    def set_never_ready(self, kind: str, name: str, namespace: str | None = None) -> None:
        """Tell the simulator never to make this object ready (for timeout tests).

        Stored in ConfigMap sim-system/sim-config (key neverReady, one Kind/[ns/]name a line),
        so simulators in other processes honour it too.
        """
        entry = f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"
        lines = [x for x in self._read_sim_config().get("neverReady", "").splitlines() if x.strip()]
        if entry not in lines:
            lines.append(entry)
        self._sim_config({"neverReady": "\n".join(lines)})
        self._wait_simulator(lambda s: entry in s.never_ready)

    def set_real_controller(self, kind: str) -> None:
        """A real controller of ``kind`` runs on this plane (tests/gitops: Argo CD's Application): the simulator
        stops playing it (sim-config key realControllers)."""
        lines = [x for x in self._read_sim_config().get("realControllers", "").splitlines() if x.strip()]
        if kind not in lines:
            self._sim_config({"realControllers": "\n".join([*lines, kind])})
        self._wait_simulator(lambda s: kind in s.real_controllers)

    def clear_never_ready(self) -> None:
        """Forget every never-ready entry; held objects become ready after the delay."""
        self._sim_config({"neverReady": ""})
        self._wait_simulator(lambda s: not s.never_ready)

    def set_sim_delay(self, seconds: float) -> None:
        """Seconds the simulator waits before writing a status (default 0.2)."""
        self._sim_config({"delay": str(seconds)})
        self._wait_simulator(lambda s: s.delay == float(seconds))

    def _wait_simulator(self, pred, timeout: float = 10) -> None:
        if not self.simulator:
            return
        end = time.monotonic() + timeout
        while not pred(self.simulator):
            if time.monotonic() > end:
                raise ControlPlaneError("the simulator did not pick up sim-config")
            time.sleep(0.02)

    @contextlib.contextmanager
    def hold_scheduling(self):
        """Every node cordoned (``spec.unschedulable``, as ``kubectl cordon`` sets it) for the block:
        kube-scheduler leaves the pods created meanwhile Pending, so their workloads stay unavailable
        (the workload equivalent of the simulator's ``neverReady``); uncordoned afterwards, they bind."""
        names = [n["metadata"]["name"] for n in self._call("GET", "/api/v1/nodes")["items"]]
        for name in names:
            self._call("PATCH", f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True}}, patch=True)
        try:
            yield names
        finally:
            for name in names:
                self._call("PATCH", f"/api/v1/nodes/{name}", {"spec": {"unschedulable": None}}, patch=True)

    def set_openshift_version(self, version: str) -> None:
        """Set ClusterVersion 'version' to report the given OpenShift version."""
        cv = self._call("GET", "/apis/config.openshift.io/v1/clusterversions/version")
        status = cv["status"]
        status["desired"]["version"] = version
        status["desired"]["image"] = _release_image(version)
        status["history"][0]["version"] = version
        status["history"][0]["image"] = _release_image(version)
        self._call("PUT", "/apis/config.openshift.io/v1/clusterversions/version/status", cv)

    def mint_sa_kubeconfig(
        self, namespace: str, name: str, path: str | Path | None = None, expiration: int = 3600
    ) -> str:
        """Create ServiceAccount namespace/name if needed and write a kubeconfig for it.

        The token comes from the TokenRequest API. The ServiceAccount has no rights beyond
        what RBAC bindings grant it: use it for least-privilege tests. Returns the path.
        """
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        self.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}})
        tr = self._call(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": expiration},
            },
        )
        admin = yaml.safe_load(Path(self.kubeconfig).read_text())
        cluster = admin["clusters"][0]["cluster"]
        user = f"system:serviceaccount:{namespace}:{name}"
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kcp", "cluster": cluster}],
            "users": [{"name": user, "user": {"token": tr["status"]["token"]}}],
            "contexts": [{"name": "kcp", "context": {"cluster": "kcp", "user": user, "namespace": namespace}}],
            "current-context": "kcp",
        }
        out = Path(path) if path else self.workdir / f"sa-{namespace}-{name}.kubeconfig"
        out.write_text(yaml.safe_dump(cfg))
        out.chmod(0o600)
        return str(out)

    # ------------------------------------------------------------------ seeding
    def seed(self) -> None:
        """Seed what an OpenShift cluster of this profile has before we install anything."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(8) as self._executor:
            self._batch = []
            try:
                self._seed()
                self._flush()
            finally:
                self._batch = None
                self._executor = None

    def _seed(self) -> None:
        p = self.profile
        osh = p["openshift"]
        from simulator import CONFIG_NAME, CONFIG_NAMESPACE

        for ns in [*OPENSHIFT_NAMESPACES, *PREREQUISITE_NAMESPACES, CONFIG_NAMESPACE]:
            self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        self._flush()  # namespaces first
        self.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": CONFIG_NAME, "namespace": CONFIG_NAMESPACE},
                "data": {"delay": str(self.sim_delay if self.sim_delay is not None else 0.2), "neverReady": ""},
            }
        )
        version = str(osh.get("version", "4.22.0"))
        self.apply(
            {
                "apiVersion": "config.openshift.io/v1",
                "kind": "ClusterVersion",
                "metadata": {"name": "version"},
                "spec": {"clusterID": str(uuid.uuid4()), "channel": "stable-" + ".".join(version.split(".")[:2])},
            },
            status=_clusterversion_status(version),
        )
        self.apply(
            {
                "apiVersion": "config.openshift.io/v1",
                "kind": "Infrastructure",
                "metadata": {"name": "cluster"},
                "spec": {"platformSpec": {"type": osh.get("platform", "BareMetal")}},
            },
            status={
                "infrastructureName": f"{p['name']}-x7k2q",
                "platform": osh.get("platform", "BareMetal"),
                "platformStatus": {"type": osh.get("platform", "BareMetal")},
                "controlPlaneTopology": osh["controlPlaneTopology"],
                "infrastructureTopology": osh.get("infrastructureTopology", osh["controlPlaneTopology"]),
                "cpuPartitioning": "None",
                "etcdDiscoveryDomain": "",
                "apiServerURL": f"https://api.{osh['ingressDomain'].split('.', 1)[1]}:6443",
                "apiServerInternalURI": f"https://api-int.{osh['ingressDomain'].split('.', 1)[1]}:6443",
            },
        )
        self.apply(
            {
                "apiVersion": "config.openshift.io/v1",
                "kind": "Ingress",
                "metadata": {"name": "cluster"},
                "spec": {"domain": osh["ingressDomain"]},
            }
        )
        self.apply(
            {"apiVersion": "config.openshift.io/v1", "kind": "OperatorHub", "metadata": {"name": "cluster"}, "spec": {}}
        )
        # OLM: the global OperatorGroup and the default catalog sources.
        self.apply(
            {
                "apiVersion": "operators.coreos.com/v1",
                "kind": "OperatorGroup",
                "metadata": {"name": "global-operators", "namespace": "openshift-operators"},
                "spec": {},
            }
        )
        catalogs = yaml.safe_load(CATALOG.read_text())["catalogs"]
        minor = ".".join(version.split(".")[:2])
        for name, cat in catalogs.items():
            self.apply(
                {
                    "apiVersion": "operators.coreos.com/v1alpha1",
                    "kind": "CatalogSource",
                    "metadata": {"name": name, "namespace": "openshift-marketplace"},
                    "spec": {
                        "sourceType": "grpc",
                        "image": f"registry.redhat.io/redhat/{name.replace('-operators', '-operator')}-index:v{minor}",
                        "displayName": cat["displayName"],
                        "publisher": cat["publisher"],
                        "updateStrategy": {"registryPoll": {"interval": "10m"}},
                    },
                },
                status={
                    "connectionState": {
                        "lastObservedState": "READY",
                        "address": f"{name}.openshift-marketplace.svc:50051",
                    }
                },
            )
        # Storage classes: ODF on multi-node bare metal, LVM Storage on single node.
        single = osh["controlPlaneTopology"] == "SingleReplica"
        for sc in p.get("storageClasses") or (
            [{"name": "lvms-vg1", "provisioner": "topolvm.io", "default": True}]
            if single
            else [
                {
                    "name": "ocs-storagecluster-ceph-rbd",
                    "provisioner": "openshift-storage.rbd.csi.ceph.com",
                    "default": True,
                },
                {"name": "ocs-storagecluster-cephfs", "provisioner": "openshift-storage.cephfs.csi.ceph.com"},
            ]
        ):
            ann = {"storageclass.kubernetes.io/is-default-class": "true"} if sc.get("default") else {}
            self.apply(
                {
                    "apiVersion": "storage.k8s.io/v1",
                    "kind": "StorageClass",
                    "metadata": {"name": sc["name"], "annotations": ann},
                    "provisioner": sc["provisioner"],
                    "reclaimPolicy": "Delete",
                    "volumeBindingMode": "WaitForFirstConsumer" if single else "Immediate",
                    "allowVolumeExpansion": True,
                }
            )
        # Nodes, MachineConfigNodes and the master/worker pools.
        pools: dict[str, list[str]] = {"master": [], "worker": []}
        for pool in p["nodePools"]:
            for i in range(pool["count"]):
                node = f"{pool['name']}-{i}"
                mcp = "master" if "master" in pool["roles"] else "worker"
                pools[mcp].append(node)
                self._seed_node(node, pool, len([n for v in pools.values() for n in v]))
                self.apply(
                    {
                        "apiVersion": "machineconfiguration.openshift.io/v1",
                        "kind": "MachineConfigNode",
                        "metadata": {"name": node},
                        "spec": {
                            "node": {"name": node},
                            "pool": {"name": mcp},
                            "configVersion": {"desired": f"rendered-{mcp}-{_hash(mcp)}"},
                        },
                    }
                )
        for mcp, nodes in pools.items():
            rendered = f"rendered-{mcp}-{_hash(mcp)}"
            n = len(nodes)
            self.apply(
                {
                    "apiVersion": "machineconfiguration.openshift.io/v1",
                    "kind": "MachineConfigPool",
                    "metadata": {
                        "name": mcp,
                        "labels": {f"pools.operator.machineconfiguration.openshift.io/{mcp}": ""},
                    },
                    "spec": {
                        "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": mcp}},
                        "nodeSelector": {"matchLabels": {f"node-role.kubernetes.io/{mcp}": ""}},
                        "configuration": {"name": rendered},
                        "paused": False,
                    },
                },
                status={
                    "observedGeneration": 1,
                    "configuration": {"name": rendered},
                    "machineCount": n,
                    "readyMachineCount": n,
                    "updatedMachineCount": n,
                    "unavailableMachineCount": 0,
                    "degradedMachineCount": 0,
                    "conditions": [
                        {
                            "type": "Updated",
                            "status": "True",
                            "lastTransitionTime": _now(),
                            "reason": "",
                            "message": f"All nodes are updated with {rendered}",
                        },
                        {
                            "type": "Updating",
                            "status": "False",
                            "lastTransitionTime": _now(),
                            "reason": "",
                            "message": "",
                        },
                        {
                            "type": "Degraded",
                            "status": "False",
                            "lastTransitionTime": _now(),
                            "reason": "",
                            "message": "",
                        },
                    ],
                },
            )

    def _seed_node(self, name: str, pool: dict, index: int) -> None:
        version = str(self.profile["openshift"].get("version", "4.22.0"))
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
            "node.openshift.io/os_id": "rhel",
            "feature.node.kubernetes.io/system-os_release.ID": "rhel",
            "feature.node.kubernetes.io/kernel-version.full": "5.14.0-570.62.1.el9_6.x86_64",
            "feature.node.kubernetes.io/cpu-model.vendor_id": "Intel",
        }
        for role in pool["roles"]:
            labels[f"node-role.kubernetes.io/{role}"] = ""
        capacity = {
            "cpu": str(pool["cpu"]),
            "memory": pool["memory"],
            "pods": "250",
            "ephemeral-storage": "1873322764Ki",
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
        }
        gpu = pool.get("gpu")
        if gpu:
            labels |= {
                "feature.node.kubernetes.io/pci-10de.present": "true",
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": gpu["product"],
                "nvidia.com/gpu.count": str(gpu["count"]),
                "nvidia.com/gpu.memory": str(gpu["memoryMiB"]),
                "nvidia.com/gpu.family": gpu["family"],
                "nvidia.com/gpu.compute.major": str(gpu["computeMajor"]),
                "nvidia.com/gpu.compute.minor": str(gpu["computeMinor"]),
                "nvidia.com/gpu.machine": gpu.get("machine", "unknown"),
                "nvidia.com/gpu.replicas": "1",
                "nvidia.com/gpu.sharing-strategy": "none",
                "nvidia.com/mig.capable": str(
                    gpu.get("migCapable", gpu["family"] in ("hopper", "ampere", "blackwell-dc"))
                ).lower(),
                "nvidia.com/cuda.driver.major": "595",
                "nvidia.com/cuda.driver.minor": "91",
                "nvidia.com/cuda.driver.rev": "07",
                "nvidia.com/cuda.runtime.major": "13",
                "nvidia.com/cuda.runtime.minor": "2",
                "nvidia.com/gfd.timestamp": str(int(time.time())),
            }
            for operand in (
                "driver",
                "container-toolkit",
                "device-plugin",
                "gpu-feature-discovery",
                "dcgm",
                "dcgm-exporter",
                "operator-validator",
                "node-status-exporter",
            ):
                labels[f"nvidia.com/gpu.deploy.{operand}"] = "true"
            capacity["nvidia.com/gpu"] = str(gpu["count"])
        nic = pool.get("nic")
        if nic:
            labels["feature.node.kubernetes.io/pci-15b3.present"] = "true"
            labels["network.nvidia.com/operator.mofed.wait"] = "false"
            if nic.get("rdmaResource"):
                capacity[nic["rdmaResource"]] = str(nic.get("rdmaCapacity", 1000))
        ip = f"10.0.{index // 250}.{10 + index % 250}"
        rhcos = version.replace(".", "", 1)[:3]
        pod_cidr = self.pod_network.node_cidr(index - 1)
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {
                    "machineconfiguration.openshift.io/state": "Done",
                    # kwok, the node agent, runs the nodes that carry its annotation (kwok_agent.py)
                    kwok_agent.NODE_ANNOTATION[0]: kwok_agent.NODE_ANNOTATION[1],
                },
            },
            # the pods' IPs: a loopback range of the instance's own (kwok gives pods addresses from it)
            "spec": {
                "providerID": f"baremetalhost:///openshift-machine-api/{name}",
                "podCIDR": pod_cidr,
                "podCIDRs": [pod_cidr],
            },
        }
        taints = [dict(t) for t in pool.get("taints") or []]
        if "master" in pool["roles"] and "worker" not in pool["roles"]:
            taints.insert(0, {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"})
        if taints:
            node["spec"]["taints"] = taints
        # What the hardware, the kubelet's registration and the operators put there; no conditions:
        # kwok's node-initialize Stage reports the node Ready, its heartbeat keeps it so.
        status = {
            "capacity": capacity,
            "allocatable": capacity,
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": str(uuid.uuid4()),
                "containerRuntimeVersion": "cri-o://1.35.2-2.rhaos4.22.git0d7b3a1.el9",
                "kernelVersion": "5.14.0-570.62.1.el9_6.x86_64",
                "kubeProxyVersion": "",
                "kubeletVersion": "v1.35.3",
                "machineID": uuid.uuid4().hex,
                "operatingSystem": "linux",
                "osImage": f"Red Hat Enterprise Linux CoreOS {rhcos}.9.6.202606040000-0 (Plow)",
                "systemUUID": str(uuid.uuid4()),
            },
        }
        self.apply(node, status=status)


def merged_kubeconfig(planes: dict[str, ControlPlane], path: str | Path) -> str:
    """One kubeconfig with a context (and cluster and user) per plane, named after its key: several
    clusters of one site, each its own plane (as molecule/shared/create.yml merges them)."""
    merged: dict = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    for key, cp in planes.items():
        name = str(key)  # plain str: inventory host names may come as Ansible's own str subclass
        kc = yaml.safe_load(Path(cp.kubeconfig).read_text())
        merged["clusters"].append({"name": name, "cluster": kc["clusters"][0]["cluster"]})
        merged["users"].append({"name": name, "user": kc["users"][0]["user"]})
        merged["contexts"].append({"name": name, "context": {"cluster": name, "user": name}})
    merged["current-context"] = str(next(iter(planes)))
    Path(path).write_text(yaml.safe_dump(merged))
    Path(path).chmod(0o600)
    return str(path)


_PLURALS = {
    "Namespace": "namespaces",
    "ConfigMap": "configmaps",
    "ServiceAccount": "serviceaccounts",
    "Node": "nodes",
    "StorageClass": "storageclasses",
    "ClusterVersion": "clusterversions",
    "Infrastructure": "infrastructures",
    "Ingress": "ingresses",
    "OperatorHub": "operatorhubs",
    "OperatorGroup": "operatorgroups",
    "CatalogSource": "catalogsources",
    "MachineConfigPool": "machineconfigpools",
    "MachineConfigNode": "machineconfignodes",
    "LLMInferenceServiceConfig": "llminferenceserviceconfigs",
}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _hash(s: str) -> str:
    import hashlib

    return hashlib.sha256(s.encode()).hexdigest()[:32]


def _release_image(version: str) -> str:
    # Illustrative digest (deterministic per version), in the form the real payload uses.
    import hashlib

    return f"quay.io/openshift-release-dev/ocp-release@sha256:{hashlib.sha256(version.encode()).hexdigest()}"


def _clusterversion_status(version: str) -> dict:
    caps = [
        "Build", "CSISnapshot", "CloudControllerManager", "CloudCredential", "Console", "DeploymentConfig",
        "ImageRegistry", "Ingress", "Insights", "MachineAPI", "NodeTuning", "OperatorLifecycleManager",
        "OperatorLifecycleManagerV1", "Storage", "baremetal", "marketplace", "openshift-samples",
    ]  # fmt: skip
    return {
        "desired": {
            "version": version,
            "image": _release_image(version),
            "channels": ["stable-" + ".".join(version.split(".")[:2])],
        },
        "history": [
            {
                "state": "Completed",
                "version": version,
                "image": _release_image(version),
                "startedTime": _now(),
                "completionTime": _now(),
                "verified": False,
            }
        ],
        "observedGeneration": 1,
        "versionHash": base64.urlsafe_b64encode(version.encode()).decode()[:11],
        "availableUpdates": None,
        "capabilities": {"enabledCapabilities": caps, "knownCapabilities": caps},
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "lastTransitionTime": _now(),
                "message": f"Done applying {version}",
            },
            {"type": "Failing", "status": "False", "lastTransitionTime": _now()},
            {
                "type": "Progressing",
                "status": "False",
                "lastTransitionTime": _now(),
                "message": f"Cluster version is {version}",
            },
            {"type": "RetrievedUpdates", "status": "False", "lastTransitionTime": _now(), "reason": "NoChannel"},
        ],
    }


# ---------------------------------------------------------------------- command line
def _usage(state: dict) -> str:
    kc = state["kubeconfig"]
    return (
        f"local control plane up: profile {state['profile']}, {state['server']}"
        f" (ready in {state['ready_seconds']:.1f}s)\n"
        f"  export KUBECONFIG={kc}        # or K8S_AUTH_KUBECONFIG for kubernetes.core\n"
        f"  {BINARY} kubectl get nodes -L nvidia.com/gpu.product   # kubectl of the same version\n"
        f"  kubectl --kubeconfig {kc} get crd\n"
        f"  status simulator: ConfigMap sim-system/sim-config (delay, neverReady)\n"
        + (
            f"  kube-scheduler (log scheduler.log); kwok {state['kwok']['version']} runs the nodes"
            f" (log {state['kwok']['log']}), pod IPs from {state['pod_network']}\n"
            f"  LeaderWorkerSet controller {state['lws']['version']} (log {state['lws']['log']})\n"
            if state.get("kwok")
            else ""
        )
        + (
            f"  KServe controller {state['kserve']['version']} (real, log {state['kserve']['log']});"
            f" presets in {state['kserve']['namespace']}\n"
            if state.get("kserve")
            else "  KServe controller: off (nothing reconciles LLMInferenceServices; --kserve or KCP_KSERVE=1)\n"
        )
        + "  make cluster-down             # stop it\n"
    )


def cmd_serve(args: argparse.Namespace) -> int:
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    wd = Path(args.dir).resolve()
    wd.mkdir(parents=True, exist_ok=True)
    (wd / "manager.pid").write_text(str(os.getpid()))
    cp = ControlPlane(args.profile, workdir=wd, sim_delay=args.sim_delay, kserve=args.kserve)
    stop = {"now": False}

    def on_signal(*_):
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        cp.start()
    except Exception as e:
        (wd / "error.txt").write_text(str(e))
        print(e, file=sys.stderr)
        return 1
    state = {
        "profile": args.profile,
        "kubeconfig": cp.kubeconfig,
        "server": cp.server,
        "manager_pid": os.getpid(),
        "kcp_pid": cp.pid,
        "ready_seconds": cp.ready_seconds,
        "rss_bytes": cp.rss_bytes(),
        "kserve": kserve_controller.state(cp.kserve),
        "kwok": kwok_agent.state(cp.kwok),
        "lws": lws_controller.state(cp.lws),
        "scc": scc_admission.state(cp.scc),
        "pod_network": cp.pod_network.cidr,
    }
    # written whole, then renamed: `up` polls for the file and reads it as soon as it exists
    # (a plain write_text let it read an empty file when two planes started at once, in CI)
    tmp = wd / "state.json.tmp"
    tmp.write_text(json.dumps(state, indent=2))
    os.replace(tmp, wd / "state.json")
    owner = args.owner_pid
    while not stop["now"] and cp.proc.poll() is None:
        if owner and not _alive(owner):
            # the run that started this plane is gone (make test or molecule interrupted): stop with it
            print(f"owner process {owner} is gone: stopping", file=sys.stderr)
            break
        gone = [p for p in (cp.kserve, cp.lws, cp.kwok, cp.scc) if p and p.proc.poll() is not None]
        if gone:
            (wd / "error.txt").write_text(f"{gone[0].name} exited:\n{gone[0].log_tail()}")
            print(f"{gone[0].name} exited; see {gone[0].log}", file=sys.stderr)
            break
        time.sleep(0.2)
    cp.stop()
    for f in ("state.json", "manager.pid"):
        (wd / f).unlink(missing_ok=True)
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    wd = Path(args.dir).resolve()
    pidf = wd / "manager.pid"
    if pidf.exists() and _alive(int(pidf.read_text() or 0)):
        state = wd / "state.json"
        print(f"already running (pid {pidf.read_text()})")
        if state.exists():
            print(_usage(json.loads(state.read_text())))
        return 0
    wd.mkdir(parents=True, exist_ok=True)
    for f in ("state.json", "error.txt", "manager.pid"):
        (wd / f).unlink(missing_ok=True)
    load_profile(args.profile)
    log = open(wd / "manager.log", "w")  # noqa: SIM115
    cmd = [sys.executable, str(Path(__file__).resolve()), "serve", "--profile", args.profile, "--dir", str(wd)]
    if args.sim_delay is not None:
        cmd += ["--sim-delay", str(args.sim_delay)]
    if args.kserve is not None:
        cmd += ["--kserve" if args.kserve else "--no-kserve"]
    if args.owner_pid:
        cmd += ["--owner-pid", str(args.owner_pid)]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    t0 = time.monotonic()
    while not (wd / "state.json").exists():
        if proc.poll() is not None:
            print(f"cluster-up failed:\n{(wd / 'manager.log').read_text()[-4000:]}", file=sys.stderr)
            # the supervisor's own log says which child (kube-apiserver, etcd, ...) exited and how: a destroy that
            # follows removes the directory
            kcp_log = wd / "kcp.log"
            if kcp_log.exists():
                print(f"kcp.log (last lines):\n{kcp_log.read_text(errors='replace')[-3000:]}", file=sys.stderr)
            return 1
        if time.monotonic() - t0 > args.timeout:
            proc.terminate()
            print(f"cluster-up: not ready after {args.timeout}s; see {wd}/manager.log", file=sys.stderr)
            return 1
        time.sleep(0.1)
    print(_usage(json.loads((wd / "state.json").read_text())))
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    wd = Path(args.dir).resolve()
    pids = []
    for f, key in (("manager.pid", None), ("state.json", "kcp_pid"), ("ready.json", "pid")):
        p = wd / f
        if p.exists():
            with contextlib.suppress(ValueError, KeyError, json.JSONDecodeError):
                pids.append(int(p.read_text()) if key is None else int(json.loads(p.read_text())[key]))
    for part in ("kserve", "kwok", "lws"):
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError, json.JSONDecodeError):
            pids.append(int(json.loads((wd / "state.json").read_text())[part]["pid"]))
    pids = [p for p in dict.fromkeys(pids) if _alive(p) and _is_ours(p)]
    if not pids:
        print("cluster-down: nothing running")
        return 0
    for p in pids[:1]:  # the manager stops kcp, which stops its children
        os.kill(p, signal.SIGTERM)
    end = time.monotonic() + 30
    while any(_alive(p) for p in pids) and time.monotonic() < end:
        time.sleep(0.1)
    for p in pids:
        if _alive(p):
            os.kill(p, signal.SIGKILL)
    for f in ("state.json", "manager.pid", "ready.json"):
        (wd / f).unlink(missing_ok=True)
    print("cluster-down: stopped")
    return 0


def _is_ours(pid: int) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    return any(name in cmd for name in ("cluster.py", "kcp", "llmisvc", "kwok", "/lws"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="local control plane (kube-apiserver + upstream CRDs + status simulator)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("up", "serve"):
        sp = sub.add_parser(name)
        sp.add_argument("--profile", default=DEFAULT_PROFILE)
        sp.add_argument("--dir", default=str(REPO / ".cluster"))
        sp.add_argument("--sim-delay", type=float, default=None)
        sp.add_argument("--timeout", type=float, default=360)
        sp.add_argument(
            "--kserve",
            action=argparse.BooleanOptionalAction,
            default=None,
            help=f"run the real KServe LLMInferenceService controller (default: ${kserve_controller.ENV_SWITCH}, off)",
        )
        sp.add_argument(
            "--owner-pid",
            type=int,
            default=int(os.environ.get(OWNER_ENV) or 0) or None,
            help=f"stop the plane when this process is gone (default: ${OWNER_ENV}; unset: run until `down`)",
        )
    sp = sub.add_parser("down")
    sp.add_argument("--dir", default=str(REPO / ".cluster"))
    args = ap.parse_args(argv)
    return {"up": cmd_up, "serve": cmd_serve, "down": cmd_down}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
