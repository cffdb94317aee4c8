"""The data plane of one model on the local control plane: the real llm-d router (EPP) started as
KServe v0.20.0's scheduler preset starts it, with the model's rendered scheduler config, over
llm-d-inference-sim engines (and the real P/D sidecar in front of decode engines) on loopback
addresses.

How the parts meet (docs/dataplane.md has the picture):

* The control plane holds what the EPP watches in pool mode: the InferencePool KServe creates for
  the service (selector and target port read from KServe's scheduler preset in the kserve module),
  the rendered InferenceObjectives, and one Pod per endpoint with the labels KServe's workload pods
  carry (the pool's selector and the rendered PodMonitor's ``llm-d.ai/role``), marked Ready with a
  pod IP ``127.0.0.x`` through the status subresource (there is no kubelet; the EPP's pod reconciler
  only reads ``status.podIP`` and the Ready condition).
* Every endpoint answers on ``127.0.0.x:8000`` (the pool's target port): ``loopfwd`` listens there and
  forwards to the simulator's (or, on a P/D decode pod, the sidecar's) own port, since neither
  program has a bind-address flag and several cannot share port 8000.
* The EPP runs with the preset's command line (``--pool-name``, ``--pool-namespace``, ``--zap-encoder``,
  the gRPC ports; TLS args as KServe renders them with TLS off), free ports instead of 9002/9003/9090,
  ``--cert-path`` with a certificate of the control plane's CA so the test client can check the
  EPP's TLS, and ``--config-text`` = the rendered ``spec.router.scheduler.config.inline`` as JSON
  (what KServe passes, ``Inline.Raw``). Its /metrics needs a bearer token that may ``get``
  ``/metrics``: the token of the rendered metrics-reader ServiceAccount, bound by the rendered
  ClusterRole.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from controlplane import kserve_controller, webhooks  # noqa: E402
from controlplane.procutil import die_with_parent, free_port  # noqa: E402

BIN = Path(os.environ.get("DATAPLANE_BIN", ROOT / ".cache" / "bin"))
BINARIES = ("epp", "pd-sidecar", "eppcheck", "loopfwd", "loadgen", "llm-d-inference-sim")
TARGET_PORT_FALLBACK = 8000
SCHEDULER_PRESET = "kserve-config-llm-scheduler"
DECODE_PRESET = "kserve-config-llm-decode-template"


class DataPlaneError(RuntimeError):
    pass


def binary(name: str) -> Path:
    path = BIN / name
    if not path.exists():
        raise DataPlaneError(f"{path} is missing: build the data plane first: make dataplane")
    return path


# ------------------------------------------------------------------------------------ KServe presets
def _preset(name: str) -> dict:
    for p in kserve_controller.presets():
        if p["metadata"]["name"] == name:
            return p
    raise DataPlaneError(f"KServe preset {name} not found in {kserve_controller.module_dir()}")


def _render_go_template(text: str, values: dict) -> str:
    """The few template forms KServe's presets use for these fields (TLS off: KServe's default)."""
    text = re.sub(r"\{\{\s*ChildName \.ObjectMeta\.Name `([^`]*)`\s*\}\}", lambda m: values["name"] + m.group(1), text)
    text = re.sub(r"\{\{\s*\.ObjectMeta\.Name\s*\}\}", values["name"], text)
    text = re.sub(r"\{\{\s*\.ObjectMeta\.Namespace\s*\}\}", values["namespace"], text)
    text = re.sub(r"\{\{\s*\.GlobalConfig\.InferencePoolNamespacedName\s*\}\}", values["pool_nn"], text)
    # {{ if .GlobalConfig.EnableTLS }}A{{else}}B{{- end }} -> B ; without else -> ""
    text = re.sub(
        r"\{\{\s*if \.GlobalConfig\.EnableTLS\s*\}\}.*?\{\{-?\s*else\s*-?\}\}(.*?)\{\{-?\s*end\s*\}\}", r"\1", text
    )
    text = re.sub(r"\{\{\s*if \.GlobalConfig\.EnableTLS\s*\}\}.*?\{\{-?\s*end\s*\}\}", "", text)
    if "{{" in text:
        raise DataPlaneError(f"unrendered KServe template left in {text!r}")
    return text.strip()


def kserve_pool_spec(service: str, namespace: str) -> dict:
    """The InferencePool spec KServe v0.20.0 creates for an LLMInferenceService (scheduler preset)."""
    spec = _preset(SCHEDULER_PRESET)["spec"]["router"]["scheduler"]["pool"]["spec"]
    values = {"name": service, "namespace": namespace, "pool_nn": ""}
    labels = {k: _render_go_template(v, values) for k, v in spec["selector"]["matchLabels"].items()}
    return {"selector": {"matchLabels": labels}, "targetPorts": spec["targetPorts"]}


def kserve_epp_args(service: str, namespace: str) -> list[str]:
    """The EPP command line of KServe's scheduler preset (after /app/epp), rendered for TLS off."""
    main = next(
        c
        for c in _preset(SCHEDULER_PRESET)["spec"]["router"]["scheduler"]["template"]["containers"]
        if c["name"] == "main"
    )
    values = {"name": service, "namespace": namespace, "pool_nn": f"{namespace}/{service}-inference-pool"}
    args = [_render_go_template(a, values) for a in main["command"][1:]]
    return [a for a in args if a]


def kserve_sidecar_args(pool_namespace: str, pool: str) -> list[str]:
    """The P/D routing sidecar's command line of KServe's decode preset (after /app/pd-sidecar)."""
    init = _preset(DECODE_PRESET)["spec"]["template"]["initContainers"]
    side = next(c for c in init if c["name"] == "llm-d-routing-sidecar")
    values = {"name": "", "namespace": pool_namespace, "pool_nn": f"{pool_namespace}/{pool}"}
    args = [_render_go_template(a, values) for a in side["command"][1:]]
    return [a for a in args if a]


def _set_flag(args: list[str], flag: str, value: str) -> list[str]:
    """Replace ``--flag V`` / ``--flag=V`` in args (or append it)."""
    out, i, found = [], 0, False
    while i < len(args):
        a = args[i]
        if a == flag:
            out += [flag, value]
            i += 2
            found = True
            continue
        if a.startswith(flag + "="):
            out.append(f"{flag}={value}")
            found = True
        else:
            out.append(a)
        i += 1
    return out if found else out + [flag, value]


# ------------------------------------------------------------------------------------ processes
@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log: Path

    def tail(self, n: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        return ""

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def _spawn(name: str, argv: list, workdir: Path, env: dict | None = None) -> Proc:
    log = workdir / f"{name}.log"
    fh = log.open("wb")
    p = subprocess.Popen(
        [str(a) for a in argv],
        stdout=fh,
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
        preexec_fn=die_with_parent(),  # noqa: PLW1509 - prctl only
        cwd=workdir,
    )
    fh.close()
    return Proc(name, p, log)


def _wait(what: str, ready, procs: list[Proc], timeout: float = 60.0) -> None:
    t0 = time.monotonic()
    last = None
    while time.monotonic() - t0 < timeout:
        for p in procs:
            if p.popen.poll() is not None:
                raise DataPlaneError(f"{p.name} exited ({p.popen.returncode}) while waiting for {what}:\n{p.tail()}")
        try:
            if ready():
                return
        except Exception as e:  # noqa: BLE001 - the last error is reported on timeout
            last = e
        time.sleep(0.1)
    tails = "\n".join(f"--- {p.name}\n{p.tail(15)}" for p in procs)
    raise DataPlaneError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})\n{tails}")


def http_get(url: str, token: str | None = None, timeout: float = 5.0) -> tuple[int, str]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 - loopback test endpoints
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def _grpc_health_serving(port: int, service: str) -> bool:
    """grpc.health.v1 Check over plain gRPC framing (the EPP's health server is not TLS)."""
    import grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        name = service.encode()
        req = b"\x0a" + bytes([len(name)]) + name if name else b""
        resp = ch.unary_unary("/grpc.health.v1.Health/Check")(req, timeout=2)
        return resp == b"\x08\x01"  # status: SERVING


# ------------------------------------------------------------------------------------ endpoints
@dataclass
class Endpoint:
    """One model-server pod: its loopback address and the processes behind it."""

    index: int
    role: str  # KServe's llm-d.ai/role value: both | prefill | decode
    ip: str
    sim_port: int
    front_port: int  # what loopfwd forwards ip:8000 to (the sim, or the decode pod's sidecar)
    pod: str
    procs: list = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"{self.ip}:{TARGET_PORT_FALLBACK}"

    def metrics(self) -> str:
        status, text = http_get(f"http://127.0.0.1:{self.sim_port}/metrics")
        if status != 200:
            raise DataPlaneError(f"{self.pod}: engine /metrics answered {status}")
        return text

    def gauges(self, *names: str) -> float:
        """The sum of the engine's gauges of these names (one read of its /metrics)."""
        from .promql import parse_exposition

        return sum(s.value for s in parse_exposition(self.metrics()) if s.name in names)

    def in_flight(self) -> float:
        """Requests the engine holds, running or waiting."""
        return self.gauges("vllm:num_requests_running", "vllm:num_requests_waiting")


class DataPlane:
    """One model's router, engines and control-plane objects. Use as a context manager.

    ``model``: the model's serving intent (``intent["serving"]["models"][i]``); ``objects``: the site's
    rendered serving objects; ``engines``: {role: count} (roles ``both``, ``prefill``, ``decode``);
    ``config``: the scheduler config to run (default: the rendered one, unchanged); ``sim_args``:
    extra simulator flags (latencies, slots); ``v1alpha2_pool``: also create the v1alpha2 pool, as KServe
    does when that CRD is installed. ``adopt``: the pool and the pods are KServe's, made by its controller for a
    converged service on a plane where kwok runs them at addresses of their nodes' loopback ``podCIDR``: the
    harness creates no object (only a token of the rendered metrics reader) and starts an engine at each pod's
    address; :meth:`stop` leaves KServe's objects alone.
    """

    def __init__(  # noqa: PLR0913, PLR0917 - the parts of one model's data plane
        self,
        cluster,
        workdir: Path,
        model: dict,
        objects: list[dict],
        engines: dict[str, int],
        config: dict | None = None,
        sim_args: list[str] | None = None,
        first_ip: int = 10,
        v1alpha2_pool: bool = True,
        adopt: bool = False,
    ):
        self.cluster = cluster
        self.workdir = Path(workdir)
        self.model = model
        self.objects = objects
        self.engines = engines
        self.namespace = self._rendered_svc()["metadata"]["namespace"]
        self.service = model["names"]["service"]
        self.pool = model["names"]["pool"]
        self.config = (
            config if config is not None else self._rendered_svc()["spec"]["router"]["scheduler"]["config"]["inline"]
        )
        self.sim_args = list(sim_args or [])
        self.first_ip = first_ip
        self.v1alpha2_pool = v1alpha2_pool
        self.adopt = adopt
        self.endpoints: list[Endpoint] = []
        self.procs: list[Proc] = []
        self.epp: Proc | None = None
        self.grpc_port = self.health_port = self.metrics_port = 0
        self.token = ""
        self.ca_pem = b""
        self.forwarder: Proc | None = None

    # -- rendered objects
    def _rendered_svc(self) -> dict:
        for o in self.objects:
            if o["kind"] == "LLMInferenceService" and o["metadata"]["name"] == self.model["names"]["service"]:
                return o
        raise DataPlaneError(f"no rendered LLMInferenceService {self.model['names']['service']}")

    def rendered(self, kind: str) -> list[dict]:
        return [
            o for o in self.objects if o["kind"] == kind and o["metadata"].get("namespace") in (None, self.namespace)
        ]

    def _role_labels(self, role: str) -> dict:
        """Labels of a workload pod of this role: the pool's selector plus the rendered PodMonitor's role label."""
        labels = dict(kserve_pool_spec(self.service, self.namespace)["selector"]["matchLabels"])
        for mon in self.rendered("PodMonitor"):
            sel = mon["spec"]["selector"]["matchLabels"]
            if sel.get("app.kubernetes.io/name") == self.service and sel.get("llm-d.ai/role") == role:
                labels.update(sel)
                return labels
        raise DataPlaneError(f"{self.service}: no rendered PodMonitor selects llm-d.ai/role={role}")

    # -- lifecycle
    def __enter__(self) -> DataPlane:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.adopt:
            self.token = self._reader_token(self._reader_account())
            self._adopt_engines()
        else:
            self._apply_objects()
            self._start_engines()
        self._start_epp()

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.stop()
        self.procs.clear()
        if self.adopt:
            return  # the pods and the pools are KServe's
        core = self._core()
        for ep in self.endpoints:
            with contextlib.suppress(Exception):
                core.delete_namespaced_pod(ep.pod, self.namespace, grace_period_seconds=0)
        for group, version in (("inference.networking.k8s.io", "v1"), ("inference.networking.x-k8s.io", "v1alpha2")):
            with contextlib.suppress(Exception):
                self._custom().delete_namespaced_custom_object(
                    group, version, self.namespace, "inferencepools", self.pool
                )

    # -- control plane objects
    def _core(self):
        from kubernetes import client

        return client.CoreV1Api(self.cluster.api_client)

    def _custom(self):
        from kubernetes import client

        return client.CustomObjectsApi(self.cluster.api_client)

    def _create(self, obj: dict) -> None:
        """Server-side apply (create or update, as the collection applies its objects)."""
        res = self.cluster.dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        ns = obj["metadata"].get("namespace")
        kw = {"namespace": ns} if ns else {}
        res.server_side_apply(body=obj, field_manager="dataplane-tests", force_conflicts=True, **kw)

    def _served(self, api_version: str, kind: str) -> bool:
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        try:
            self.cluster.dynamic.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            return False
        return True

    def _apply_objects(self) -> None:
        from kubernetes.client.rest import ApiException

        with contextlib.suppress(ApiException):
            self._core().create_namespace({"metadata": {"name": self.namespace}})
        # the metrics reader the rendered ScaledObjects/ServiceMonitors use, and its /metrics grant
        for kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding"):
            for o in self.objects:
                if o["kind"] != kind:
                    continue
                if kind == "ClusterRole" and not any("/metrics" in r.get("nonResourceURLs", []) for r in o["rules"]):
                    continue
                if kind == "ServiceAccount" and o["metadata"].get("namespace") != self.namespace:
                    continue
                self._create(json.loads(json.dumps(o)))
        self.token = self._reader_token(self._reader_account())
        pool = {
            "apiVersion": "inference.networking.k8s.io/v1",
            "kind": "InferencePool",
            "metadata": {"name": self.pool, "namespace": self.namespace},
            "spec": {
                **kserve_pool_spec(self.service, self.namespace),
                "endpointPickerRef": {"name": self.model["names"]["epp_service"], "port": {"number": 9002}},
            },
        }
        self._create(pool)
        # KServe also creates the pool in the v1alpha2 group when that CRD is installed (converted from
        # the v1 spec, scheduler.go reconcileV1Alpha2InferencePool): its P/D decode preset starts the
        # routing sidecar with --pool-group=inference.networking.x-k8s.io, whose SSRF allowlist reads
        # the prefill pods of that pool (without it every prefill target is refused with 403).
        if self.v1alpha2_pool and self._served("inference.networking.x-k8s.io/v1alpha2", "InferencePool"):
            spec = pool["spec"]
            self._create(
                {
                    "apiVersion": "inference.networking.x-k8s.io/v1alpha2",
                    "kind": "InferencePool",
                    "metadata": {"name": self.pool, "namespace": self.namespace},
                    "spec": {
                        "selector": spec["selector"]["matchLabels"],
                        "targetPortNumber": spec["targetPorts"][0]["number"],
                        "extensionRef": {"name": spec["endpointPickerRef"]["name"]},
                    },
                }
            )
        for o in self.rendered("InferenceObjective"):
            if o["spec"]["poolRef"]["name"] == self.pool:
                self._create(json.loads(json.dumps(o)))

    def _reader_account(self) -> str:
        """The rendered metrics-reader ServiceAccount: the one a rendered ClusterRoleBinding binds, in the serving
        namespace, to a rendered ClusterRole that may get /metrics."""
        readers = {
            o["metadata"]["name"]
            for o in self.rendered("ClusterRole")
            if any("/metrics" in r.get("nonResourceURLs", []) for r in o["rules"])
        }
        for b in self.rendered("ClusterRoleBinding"):
            if b["roleRef"]["name"] not in readers:
                continue
            for sub in b.get("subjects", []):
                if sub["kind"] == "ServiceAccount" and sub.get("namespace") == self.namespace:
                    return sub["name"]
        raise DataPlaneError(f"{self.namespace}: no rendered ServiceAccount bound to read /metrics")

    def _reader_token(self, sa_name: str) -> str:
        tr = self._core().create_namespaced_service_account_token(
            sa_name, self.namespace, {"spec": {"expirationSeconds": 3600}}
        )
        return tr.status.token

    def add_pod(self, ep: Endpoint) -> None:
        """Create the pod of an endpoint and mark it Ready at its loopback IP (what a kubelet reports)."""
        core = self._core()
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": ep.pod, "namespace": self.namespace, "labels": self._role_labels(ep.role)},
            # no scheduler binds it (a scheduler of that name does not run) and so no node agent (kwok) takes it
            # over: the test itself reports it Running at the loopback address its engine listens on
            "spec": {
                "schedulerName": "played-by-the-data-plane-test",
                "containers": [{"name": "main", "image": "llm-d-inference-sim"}],
            },
        }
        core.create_namespaced_pod(self.namespace, body)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {
            "status": {
                "phase": "Running",
                "podIP": ep.ip,
                "podIPs": [{"ip": ep.ip}],
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
            }
        }
        core.patch_namespaced_pod_status(ep.pod, self.namespace, status)

    # -- engines
    def _sim_argv(self, ep: Endpoint) -> list:
        return [
            binary("llm-d-inference-sim"),
            "--model",
            self.model["served_name"],
            "--port",
            ep.sim_port,
            "--force-dummy-tokenizer",
            "--max-model-len",
            "65536",
            *self.sim_args,
        ]

    def new_endpoint(self, role: str, ip: str | None = None, pod: str | None = None) -> Endpoint:
        i = len(self.endpoints)
        ip = ip or f"127.0.0.{self.first_ip + i}"
        sim_port = free_port()
        ep = Endpoint(i, role, ip, sim_port, sim_port, pod or f"{self.service}-{role}-{i}")
        if role == "decode":
            ep.front_port = free_port()
        self.endpoints.append(ep)
        return ep

    def _start_endpoint(self, ep: Endpoint) -> None:
        sim = _spawn(f"sim-{ep.index}-{ep.role}", self._sim_argv(ep), self.workdir, {"POD_NAME": ep.pod})
        ep.procs.append(sim)
        self.procs.append(sim)
        waits = [sim]
        if ep.role == "decode":
            args = kserve_sidecar_args(self.namespace, self.pool)
            args = _set_flag(args, "--port", str(ep.front_port))
            args = _set_flag(args, "--vllm-port", str(ep.sim_port))
            side = _spawn(
                f"sidecar-{ep.index}",
                [binary("pd-sidecar"), *args],
                self.workdir,
                {"KUBECONFIG": self.cluster.kubeconfig, "INFERENCE_POOL_NAMESPACE": self.namespace},
            )
            ep.procs.append(side)
            self.procs.append(side)
            waits.append(side)
        _wait(
            f"engine {ep.pod} on port {ep.sim_port}",
            lambda: http_get(f"http://127.0.0.1:{ep.sim_port}/health")[0] == 200,
            waits,
        )
        if ep.role == "decode":
            _wait(
                f"P/D sidecar of {ep.pod} on port {ep.front_port}",
                lambda: http_get(f"http://127.0.0.1:{ep.front_port}/health")[0] == 200,
                waits,
            )

    def _restart_forwarder(self) -> None:
        if self.forwarder:
            self.forwarder.stop()
            self.procs.remove(self.forwarder)
        pairs = [f"{ep.ip}:{TARGET_PORT_FALLBACK}=127.0.0.1:{ep.front_port}" for ep in self.endpoints]
        if not pairs:
            self.forwarder = None
            return
        self.forwarder = _spawn("loopfwd", [binary("loopfwd"), *pairs], self.workdir)
        self.procs.append(self.forwarder)
        _wait("loopfwd listeners", lambda: "ready" in self.forwarder.log.read_text(), [self.forwarder], 20)

    def _start_engines(self) -> None:
        target = kserve_pool_spec(self.service, self.namespace)["targetPorts"][0]["number"]
        if target != TARGET_PORT_FALLBACK:
            raise DataPlaneError(f"KServe's pool targets port {target}; the harness serves {TARGET_PORT_FALLBACK}")
        for role in ("prefill", "decode", "both"):
            for _ in range(self.engines.get(role, 0)):
                self.new_endpoint(role)
        for ep in self.endpoints:
            self._start_endpoint(ep)
        self._restart_forwarder()
        for ep in self.endpoints:
            self.add_pod(ep)

    def _adopt_engines(self) -> None:
        """An engine at each address kwok gave the pods KServe's pool selects (role from the pod's llm-d.ai/role
        label, as the picker reads it; a decode pod gets the P/D sidecar in front, as KServe's decode preset)."""
        from kubernetes.client.rest import ApiException

        try:  # the pool as the controller made it (OpenShift AI's preset adds kserve.io/component to the selector)
            spec = self._custom().get_namespaced_custom_object(
                "inference.networking.k8s.io", "v1", self.namespace, "inferencepools", self.pool
            )["spec"]
        except ApiException as e:
            raise DataPlaneError(f"InferencePool {self.namespace}/{self.pool}: {e.status} {e.reason}") from None
        target = spec["targetPorts"][0]["number"]
        if target != TARGET_PORT_FALLBACK:
            raise DataPlaneError(f"KServe's pool targets port {target}; the harness serves {TARGET_PORT_FALLBACK}")
        labels = spec["selector"]["matchLabels"]
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        pods = self._core().list_namespaced_pod(self.namespace, label_selector=selector).items
        live = sorted((p for p in pods if not p.metadata.deletion_timestamp), key=lambda p: p.metadata.name)
        missing = [p.metadata.name for p in live if not p.status.pod_ip]
        if not live or missing:
            raise DataPlaneError(f"{self.namespace}: pods of {selector}: {len(live)}, without an IP: {missing}")
        for p in live:
            self.new_endpoint(p.metadata.labels.get("llm-d.ai/role", "both"), p.status.pod_ip, p.metadata.name)
        for ep in self.endpoints:
            self._start_endpoint(ep)
        self._restart_forwarder()

    def scale_up(self, role: str = "both") -> Endpoint:
        """Add one engine and its pod (what a scale-up from KEDA ends in)."""
        ep = self.new_endpoint(role)
        self._start_endpoint(ep)
        self._restart_forwarder()
        self.add_pod(ep)
        return ep

    # -- the router
    def epp_argv(self) -> list:
        args = kserve_epp_args(self.service, self.namespace)
        args = _set_flag(args, "--grpc-port", str(self.grpc_port))
        args = _set_flag(args, "--grpc-health-port", str(self.health_port))
        args = _set_flag(args, "--metrics-port", str(self.metrics_port))
        args = _set_flag(args, "--cert-path", str(self.workdir / "tls"))
        # KServe passes spec.router.scheduler.config.inline (Inline.Raw: the JSON the API server stored)
        args = _set_flag(args, "--config-text", json.dumps(self.config, separators=(",", ":")))
        return [binary("epp"), *args]

    def _start_epp(self) -> None:
        self.grpc_port, self.health_port, self.metrics_port = free_port(), free_port(), free_port()
        webhooks.issue_serving_cert(Path(self.cluster.workdir) / "pki", self.workdir / "tls")
        self.ca_pem = (Path(self.cluster.workdir) / "pki" / "ca.crt").read_bytes()
        self.epp = _spawn("epp", self.epp_argv(), self.workdir, {"KUBECONFIG": self.cluster.kubeconfig})
        self.procs.append(self.epp)
        _wait("the EPP's gRPC readiness", lambda: _grpc_health_serving(self.health_port, "readiness"), [self.epp], 90)
        self.wait_ready_endpoints(len(self.endpoints))

    def wait_ready_endpoints(self, n: int, timeout: float = 60) -> None:
        def seen():
            return self.pool_gauge("llm_d_epp_ready_endpoints") == n

        _wait(f"the EPP to see {n} ready endpoints of {self.pool}", seen, [self.epp], timeout)

    def epp_metrics(self) -> str:
        status, text = http_get(f"http://127.0.0.1:{self.metrics_port}/metrics", token=self.token)
        if status != 200:
            raise DataPlaneError(f"EPP /metrics answered {status}: {text[:300]}")
        return text

    def pool_gauge(self, name: str) -> float | None:
        from .promql import parse_exposition

        for s in parse_exposition(self.epp_metrics()):
            if s.name == name and s.labels.get("name") == self.pool:
                return s.value
        return None

    def held_by_flow(self) -> dict:
        """Requests inside the router's flow control, not yet dispatched, by fairness id
        (``llm_d_epp_flow_control_queue_size``, pkg/epp/metrics: summed over priorities)."""
        from .promql import parse_exposition

        held: dict = {}
        for s in parse_exposition(self.epp_metrics()):
            if s.name == "llm_d_epp_flow_control_queue_size":
                flow = s.labels.get("fairness_id")
                held[flow] = held.get(flow, 0) + s.value
        return held

    def gateway(self):
        from .gateway import Gateway

        return Gateway(f"127.0.0.1:{self.grpc_port}", self.ca_pem)


def port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def clean_workdir(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path
