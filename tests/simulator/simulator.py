"""Status simulator: plays the operators and controllers of a real cluster (TEST-SIDE ONLY).

The local control plane runs the upstream controllers that can be built here: kube-apiserver,
kube-controller-manager (Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs), kube-scheduler,
kwok as the node agent (pods Running/Ready), the LeaderWorkerSet controller and KServe's
LLMInferenceService controller; workload status is theirs. This simulator plays only what has no
runnable upstream here: it watches the objects the collection creates and writes the status their
real controllers would write, following each CRD's status schema:

====================================  =================================================
object                                what the simulator does
====================================  =================================================
Subscription (operators.coreos.com)   InstallPlan (Automatic: Complete at once; Manual:
                                      RequiresApproval until ``spec.approved``), then the
                                      CSV named by the catalog's currentCSV for the
                                      channel, phase Succeeded; Subscription status
                                      installedCSV/currentCSV/state AtLatestKnown
ClusterPolicy (nvidia.com)            ``status.state: ready`` + Ready condition
NicClusterPolicy (mellanox.com)       ``status.state: ready``
MacvlanNetwork (mellanox.com)         ``status.state: ready`` (the network operator's, once it
                                      rendered the NetworkAttachmentDefinition)
NodeFeatureDiscovery                  conditions Available/Upgradeable True
DSCInitialization, DataScienceCluster ``phase: Ready`` + Ready condition
HTTPRoute                             ``parents[]`` as the Gateway controller writes them, for
                                      each parent Gateway that is Accepted and whose
                                      GatewayClass exists (its ``controllerName``): Accepted, and
                                      ResolvedRefs False/BackendNotFound when a Service,
                                      InferencePool or Envoy Gateway Backend is missing
                                      (InvalidKind for others)
InferencePool                         ``parents[]`` for the (Accepted) Gateways of the
                                      HTTPRoutes that reference it: Accepted, and ResolvedRefs
                                      False/InvalidExtensionRef when the endpoint picker
                                      Service (``endpointPickerRef``) does not exist
ScaledObject                          Ready/Active conditions
HorizontalPodAutoscaler               AbleToScale/ScalingActive True, replicas at minReplicas
                                      (kube-controller-manager's HPA controller once its
                                      metrics flow; the local one does not run it)
KedaController                        ``status.phase`` Installation Succeeded
GatewayClass, Gateway                 Accepted (and Programmed, with listener status)
Route (route.openshift.io)            ``status.ingress`` admitted by the ``default`` router (OpenShift's
                                      ingress controller; Argo CD's Route health waits for it)
Argo CD Application                   sync Synced, health Healthy
MachineConfigPool/PinnedImageSet      pool synchronizer PinnedImageSets up to date and
                                      MachineConfigNode pinnedImageSets generations
====================================  =================================================

Configuration lives in the ConfigMap ``sim-config`` of namespace ``sim-system`` so that
other processes (ansible runs) can change it while the simulator runs:

* ``delay``: seconds between an object appearing/changing and its status being written
  (default 0.2).
* ``realControllers``: one kind per line whose real controller runs on this plane (tests/gitops runs
  Argo CD's application controller: ``Application``); the simulator leaves those objects alone.
* ``neverReady``: one entry per line, ``Kind/name`` or ``Kind/namespace/name``; such
  objects are never made ready, so timeouts and their messages can be tested.

For routes the simulator plays what the Gateway controller (on OpenShift: the ingress operator's
``openshift.io/gateway-controller/v1``) would report. Workloads are not its business: a workload
held back in a test is held the way a cluster holds one (e.g. nodes cordoned: its pods stay
Pending), see ``ControlPlane.hold_scheduling``.

Run it in a thread (:class:`Simulator`) or as a process: ``python -m simulator
--kubeconfig K``.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.watch.watch import iter_resp_lines

try:
    from .kube import request
except ImportError:  # run as a plain module
    from kube import request

log = logging.getLogger("simulator")

CONFIG_NAMESPACE = "sim-system"
CONFIG_NAME = "sim-config"
DEFAULT_DELAY = 0.2
CATALOG = Path(__file__).resolve().parents[1] / "controlplane" / "catalog" / "packages.yaml"
# the operator deployment's environment of the CSVs that set one we read (OpenShift AI's preset engine)
CSV_ENV = yaml.safe_load((CATALOG.parent / "csv_env.yaml").read_text()) or {}


def csv_object(ns: str, name: str, version: str, env: dict | None = None) -> dict:
    """A ClusterServiceVersion as OLM installs it: its operator deployment carries ``env`` (when given), as the
    release's CSV sets it."""
    pkg_name = name.split(".v", maxsplit=1)[0] if ".v" in name else name.split(".", maxsplit=1)[0]
    container = {"name": "manager", "env": [{"name": k, "value": v} for k, v in (env or {}).items()]}
    labels = {"name": pkg_name}
    deployment = {
        "name": f"{pkg_name}-controller-manager",
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels},
                                                                   "spec": {"containers": [container]}}},
    }  # fmt: skip
    return {
        "apiVersion": CSV.api_version,
        "kind": "ClusterServiceVersion",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "displayName": pkg_name,
            "version": version,
            "install": {"strategy": "deployment", "spec": {"deployments": [deployment] if env else []}},
        },
    }


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Res:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if sub:
            base += f"/{sub}"
        return base


SUBSCRIPTION = Res("operators.coreos.com", "v1alpha1", "subscriptions", "Subscription")
INSTALLPLAN = Res("operators.coreos.com", "v1alpha1", "installplans", "InstallPlan")
CSV = Res("operators.coreos.com", "v1alpha1", "clusterserviceversions", "ClusterServiceVersion")
CLUSTERPOLICY = Res("nvidia.com", "v1", "clusterpolicies", "ClusterPolicy", False)
NICCLUSTERPOLICY = Res("mellanox.com", "v1alpha1", "nicclusterpolicies", "NicClusterPolicy", False)
MACVLANNETWORK = Res("mellanox.com", "v1alpha1", "macvlannetworks", "MacvlanNetwork", False)
NFD = Res("nfd.openshift.io", "v1", "nodefeaturediscoveries", "NodeFeatureDiscovery")
DSCI = Res("dscinitialization.opendatahub.io", "v1", "dscinitializations", "DSCInitialization", False)
DSC = Res("datasciencecluster.opendatahub.io", "v1", "datascienceclusters", "DataScienceCluster", False)
INFERENCEPOOL = Res("inference.networking.k8s.io", "v1", "inferencepools", "InferencePool")
HTTPROUTE = Res("gateway.networking.k8s.io", "v1", "httproutes", "HTTPRoute")
SERVICE = Res("", "v1", "services", "Service")
# Envoy Gateway's own backend kind: its controller resolves it when the Backend API is enabled (a documented
# prerequisite of the front doors, docs/sovereign-burst.md)
BACKEND = Res("gateway.envoyproxy.io", "v1alpha1", "backends", "Backend")
SCALEDOBJECT = Res("keda.sh", "v1alpha1", "scaledobjects", "ScaledObject")
HPA = Res("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler")
KEDACONTROLLER = Res("keda.sh", "v1alpha1", "kedacontrollers", "KedaController")
GATEWAYCLASS = Res("gateway.networking.k8s.io", "v1", "gatewayclasses", "GatewayClass", False)
GATEWAY = Res("gateway.networking.k8s.io", "v1", "gateways", "Gateway")
APPLICATION = Res("argoproj.io", "v1alpha1", "applications", "Application")
MCP = Res("machineconfiguration.openshift.io", "v1", "machineconfigpools", "MachineConfigPool", False)
ROUTE = Res("route.openshift.io", "v1", "routes", "Route")
MCN = Res("machineconfiguration.openshift.io", "v1", "machineconfignodes", "MachineConfigNode", False)
PINNEDIMAGESET = Res("machineconfiguration.openshift.io", "v1", "pinnedimagesets", "PinnedImageSet", False)
NO_STATUS_SUBRESOURCE = {APPLICATION}
CONFIGMAP = Res("", "v1", "configmaps", "ConfigMap")


def cond(ctype: str, status: str = "True", reason: str = "", message: str = "", **extra: Any) -> dict:
    """A condition with every field metav1.Condition requires (reason non-empty, message present)."""
    c = {
        "type": ctype,
        "status": status,
        "lastTransitionTime": now(),
        "reason": reason or ("AsExpected" if status == "True" else "NotReady" if status == "False" else "Unknown"),
        "message": message,
    }
    c.update(extra)
    return c


def same_conditions(have: list | None, want: list) -> bool:
    """Compare conditions ignoring timestamps (so that re-reconciling writes nothing)."""

    def strip(cs):
        return sorted(
            json.dumps(
                {k: v for k, v in c.items() if k not in ("lastTransitionTime", "lastUpdateTime", "lastProbeTime")},
                sort_keys=True,
            )
            for c in cs or []
        )

    return strip(have) == strip(want)


def _same_parents(have: list, want: list) -> bool:
    """Route/pool parent status lists are equal, ignoring condition timestamps."""
    if len(have) != len(want):
        return False
    for h, w in zip(have, want, strict=True):
        if {k: v for k, v in h.items() if k != "conditions"} != {k: v for k, v in w.items() if k != "conditions"}:
            return False
        if not same_conditions(h.get("conditions"), w["conditions"]):
            return False
    return True


def load_catalog(path: Path = CATALOG) -> dict[str, dict]:
    data = yaml.safe_load(path.read_text())
    return {p["name"]: p for p in data["packages"]}


class Simulator:
    """Watches the cluster and writes status like the real controllers would.

    ``Simulator(api_client).start()`` runs it in daemon threads; ``stop()`` ends them.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        delay: float | None = None,
        catalog: Path = CATALOG,
    ):
        self.api = api_client
        self.catalog = load_catalog(catalog)
        self.default_delay = DEFAULT_DELAY if delay is None else delay
        self.delay = self.default_delay
        self.never_ready: set[str] = set()
        self.real_controllers: set[str] = set()
        self._stop = threading.Event()
        self._queue: list[tuple[float, int, Res, str | None, str]] = []
        self._pending: set[tuple[Res, str | None, str]] = set()
        self._qlock = threading.Condition()
        self._seq = 0
        self._threads: list[threading.Thread] = []
        self._handlers = {
            SUBSCRIPTION: self.on_subscription,
            INSTALLPLAN: self.on_installplan,
            CLUSTERPOLICY: self.on_clusterpolicy,
            NICCLUSTERPOLICY: self.on_nicclusterpolicy,
            MACVLANNETWORK: self.on_macvlannetwork,
            NFD: self.on_nfd,
            DSCI: self.on_dsci,
            DSC: self.on_dsc,
            HTTPROUTE: self.on_httproute,
            INFERENCEPOOL: self.on_inferencepool,
            SCALEDOBJECT: self.on_scaledobject,
            HPA: self.on_hpa,
            KEDACONTROLLER: self.on_kedacontroller,
            GATEWAYCLASS: self.on_gatewayclass,
            GATEWAY: self.on_gateway,
            APPLICATION: self.on_application,
            MCP: self.on_mcp,
            ROUTE: self.on_route,
        }
        # Changes to these re-trigger objects of other kinds: (kind, same namespace only).
        self._triggers: dict[Res, list[tuple[Res, bool]]] = {
            HTTPROUTE: [(INFERENCEPOOL, True)],
            INFERENCEPOOL: [(HTTPROUTE, True)],
            SERVICE: [(HTTPROUTE, True), (INFERENCEPOOL, True)],
            BACKEND: [(HTTPROUTE, True)],
            GATEWAY: [(HTTPROUTE, False)],
            GATEWAYCLASS: [(GATEWAY, False), (HTTPROUTE, False)],
            PINNEDIMAGESET: [(MCP, False)],
        }

    # ------------------------------------------------------------------ plumbing
    def call(self, method: str, path: str, body: Any = None, query: list | None = None, patch: str | None = None):
        return request(self.api, method, path, query=query, body=body, content_type=patch)

    def get(self, res: Res, ns: str | None, name: str) -> dict | None:
        try:
            return self.call("GET", res.path(ns, name))
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def list(self, res: Res, ns: str | None = None, selector: str | None = None) -> list[dict]:
        try:
            q = [("labelSelector", selector)] if selector else []
            return self.call("GET", res.path(ns), query=q).get("items", [])
        except ApiException as e:
            if e.status == 404:
                return []
            raise

    def patch_status(self, res: Res, obj: dict, status: dict) -> None:
        md = obj["metadata"]
        # Argo CD's Application CRD has no status subresource: its controller writes the object.
        sub = None if res in NO_STATUS_SUBRESOURCE else "status"
        try:
            self.call(
                "PATCH",
                res.path(md.get("namespace"), md["name"], sub),
                body={"status": status},
                patch="application/merge-patch+json",
            )
            log.info("%s %s/%s: status %s", res.kind, md.get("namespace", ""), md["name"], sorted(status))
        except ApiException as e:
            if e.status == 404:
                return
            raise

    def create(self, res: Res, ns: str | None, body: dict) -> dict | None:
        try:
            return self.call("POST", res.path(ns), body=body)
        except ApiException as e:
            if e.status == 409:
                return self.get(res, ns, body["metadata"]["name"])
            raise

    def blocked(self, kind: str, ns: str | None, name: str) -> bool:
        return f"{kind}/{name}" in self.never_ready or (ns is not None and f"{kind}/{ns}/{name}" in self.never_ready)

    def schedule(self, res: Res, ns: str | None, name: str, delay: float | None = None) -> None:
        key = (res, ns, name)
        with self._qlock:
            if key in self._pending:
                return
            self._pending.add(key)
            self._seq += 1
            heapq.heappush(
                self._queue, (time.monotonic() + (self.delay if delay is None else delay), self._seq, res, ns, name)
            )
            self._qlock.notify()

    def _worker(self) -> None:
        while not self._stop.is_set():
            with self._qlock:
                while not self._queue and not self._stop.is_set():
                    self._qlock.wait(0.5)
                if self._stop.is_set():
                    return
                due, _, res, ns, name = self._queue[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._qlock.wait(wait)
                    continue
                heapq.heappop(self._queue)
                self._pending.discard((res, ns, name))
            try:
                obj = self.get(res, ns, name)
                if obj is None or obj["metadata"].get("deletionTimestamp"):
                    continue
                if res.kind in self.real_controllers:
                    continue
                if self.blocked(res.kind, ns, name):
                    log.info("%s %s/%s: never ready (sim-config)", res.kind, ns or "", name)
                    continue
                self._handlers[res](obj)
            except Exception as e:  # keep playing; a later event retries
                log.warning("%s %s/%s: %s", res.kind, ns or "", name, e)
                if not isinstance(e, ApiException) or e.status in (409, 429, 500, 503):
                    self.schedule(res, ns, name, delay=0.5)

    def _watch(self, res: Res) -> None:
        """List then watch one resource type; schedule a reconcile on every change."""
        rv = None
        while not self._stop.is_set():
            try:
                if rv is None:
                    data = self.call("GET", res.path())
                    rv = data["metadata"].get("resourceVersion")
                    for it in data.get("items", []):
                        self._on_event(res, it)
                resp = request(
                    self.api,
                    "GET",
                    res.path(),
                    query=[
                        ("watch", "true"),
                        ("resourceVersion", rv),
                        ("allowWatchBookmarks", "true"),
                        ("timeoutSeconds", "60"),
                    ],
                    timeout=(5, 75),
                    stream=True,
                )
                try:
                    for line in iter_resp_lines(resp):
                        if self._stop.is_set():
                            return
                        ev = json.loads(line)
                        obj = ev.get("object", {})
                        if ev.get("type") == "ERROR":
                            rv = None  # 410 Gone: relist
                            break
                        rv = obj.get("metadata", {}).get("resourceVersion", rv)
                        if ev.get("type") in ("ADDED", "MODIFIED"):
                            self._on_event(res, obj)
                finally:
                    resp.release_conn()
            except ApiException as e:
                if e.status == 404:  # CRD not installed (yet): look again later
                    self._stop.wait(2)
                else:
                    rv = None
                    self._stop.wait(0.5)
            except Exception as e:
                if self._stop.is_set():
                    return
                log.debug("watch %s: %s", res.plural, e)
                rv = None
                self._stop.wait(0.5)

    def _on_event(self, res: Res, obj: dict) -> None:
        md = obj.get("metadata", {})
        if res == CONFIGMAP:
            if md.get("name") == CONFIG_NAME:
                self._load_config(obj)
            return
        for target, same_ns in self._triggers.get(res, []):
            for it in self.list(target, md.get("namespace") if same_ns and target.namespaced else None):
                self.schedule(target, it["metadata"].get("namespace"), it["metadata"]["name"])
        if res in self._handlers:
            self.schedule(res, md.get("namespace"), md["name"])

    def _load_config(self, cm: dict) -> None:
        data = cm.get("data") or {}
        try:
            self.delay = float(data.get("delay", self.default_delay))
        except ValueError:
            self.delay = self.default_delay
        self.real_controllers = {line.strip() for line in data.get("realControllers", "").splitlines() if line.strip()}
        old = self.never_ready
        self.never_ready = {line.strip() for line in data.get("neverReady", "").splitlines() if line.strip()}
        log.info("sim-config: delay=%s neverReady=%s", self.delay, sorted(self.never_ready))
        if old - self.never_ready:  # released objects: reconcile everything again
            for res in self._handlers:
                for it in self.list(res):
                    self.schedule(res, it["metadata"].get("namespace"), it["metadata"]["name"])

    def start(self) -> Simulator:
        cm = self.get(CONFIGMAP, CONFIG_NAMESPACE, CONFIG_NAME)
        if cm:
            self._load_config(cm)
        cm_res = Res("", "v1", "configmaps", "ConfigMap")
        watched = list(dict.fromkeys([*self._handlers, *self._triggers]))
        targets = [self._worker] + [lambda r=r: self._watch(r) for r in watched]
        targets.append(lambda: self._watch_config(cm_res))
        for t in targets:
            th = threading.Thread(target=t, daemon=True, name="simulator")
            th.start()
            self._threads.append(th)
        return self

    def _watch_config(self, res: Res) -> None:
        # Watch only the one ConfigMap (field selector), not every ConfigMap of the cluster.
        rv = None
        path = f"/api/v1/namespaces/{CONFIG_NAMESPACE}/configmaps"
        while not self._stop.is_set():
            try:
                q = [("fieldSelector", f"metadata.name={CONFIG_NAME}")]
                if rv is None:
                    data = self.call("GET", path, query=q)
                    rv = data["metadata"].get("resourceVersion")
                    for it in data.get("items", []):
                        self._load_config(it)
                resp = request(
                    self.api,
                    "GET",
                    path,
                    query=[*q, ("watch", "true"), ("resourceVersion", rv), ("timeoutSeconds", "60")],
                    timeout=(5, 75),
                    stream=True,
                )
                try:
                    for line in iter_resp_lines(resp):
                        ev = json.loads(line)
                        if ev.get("type") == "ERROR":
                            rv = None
                            break
                        obj = ev.get("object", {})
                        rv = obj.get("metadata", {}).get("resourceVersion", rv)
                        if ev.get("type") in ("ADDED", "MODIFIED"):
                            self._load_config(obj)
                        elif ev.get("type") == "DELETED":
                            self._load_config({"data": {}})
                finally:
                    resp.release_conn()
            except Exception as e:
                if self._stop.is_set():
                    return
                log.debug("watch sim-config: %s", e)
                rv = None
                self._stop.wait(0.5)

    def stop(self) -> None:
        self._stop.set()
        with self._qlock:
            self._qlock.notify_all()

    # ------------------------------------------------------------------ OLM
    def _channel(self, sub: dict) -> tuple[str, str]:
        spec = sub.get("spec", {})
        pkg = self.catalog.get(spec.get("name", ""))
        if pkg is None:
            return "", f"no package {spec.get('name')!r} in the catalog"
        channel = spec.get("channel") or pkg["defaultChannel"]
        for ch in pkg["channels"]:
            if ch["name"] == channel:
                return spec.get("startingCSV") or ch["currentCSV"], ""
        return "", f"no channel {channel!r} in package {pkg['name']!r}"

    def on_subscription(self, sub: dict) -> None:
        md, spec, st = sub["metadata"], sub.get("spec", {}), sub.get("status") or {}
        ns = md["namespace"]
        csv_name, err = self._channel(sub)
        if err:
            want = [cond("ResolutionFailed", "True", "ConstraintsNotSatisfiable", err)]
            if not same_conditions(st.get("conditions"), want):
                self.patch_status(SUBSCRIPTION, sub, {"conditions": want, "lastUpdated": now()})
            return
        manual = spec.get("installPlanApproval") == "Manual"
        ip_ref = st.get("installPlanRef")
        ip = self.get(INSTALLPLAN, ns, ip_ref["name"]) if ip_ref else None
        generation = int(st.get("installPlanGeneration") or 0)
        upgrade = bool(ip) and (ip.get("spec") or {}).get("clusterServiceVersionNames") != [csv_name]
        if not ip_ref or upgrade:
            # a first install, or (like OLM after a channel change) an upgrade to the new channel's head
            generation += 1
            ip_name = f"install-{md['uid'][:5]}" + (f"-{generation}" if generation > 1 else "")
            self.create(
                INSTALLPLAN,
                ns,
                {
                    "apiVersion": INSTALLPLAN.api_version,
                    "kind": "InstallPlan",
                    "metadata": {
                        "name": ip_name,
                        "namespace": ns,
                        "ownerReferences": [
                            {
                                "apiVersion": SUBSCRIPTION.api_version,
                                "kind": "Subscription",
                                "name": md["name"],
                                "uid": md["uid"],
                            }
                        ],
                    },
                    "spec": {
                        "approval": "Manual" if manual else "Automatic",
                        "approved": not manual,
                        "clusterServiceVersionNames": [csv_name],
                        "generation": generation,
                    },
                },
            )
            ref = {"apiVersion": INSTALLPLAN.api_version, "kind": "InstallPlan", "name": ip_name, "namespace": ns}
            self.patch_status(
                SUBSCRIPTION,
                sub,
                {
                    "currentCSV": csv_name,
                    "installPlanRef": ref,
                    "installplan": {
                        "apiVersion": INSTALLPLAN.api_version,
                        "kind": "InstallPlan",
                        "name": ip_name,
                        "uuid": md["uid"],
                    },
                    "installPlanGeneration": generation,
                    "state": "UpgradePending",
                    "lastUpdated": now(),
                    "conditions": [cond("InstallPlanPending", "True", "RequiresApproval" if manual else "Installing")],
                    "catalogHealth": [],
                },
            )
            self.schedule(INSTALLPLAN, ns, ip_name)
            return
        complete = ip and (ip.get("status") or {}).get("phase") == "Complete"
        if complete and (st.get("state") != "AtLatestKnown" or st.get("installedCSV") != csv_name):
            old = st.get("installedCSV")
            if old and old != csv_name:  # the upgraded CSV replaces the one installed before
                with contextlib.suppress(ApiException):  # already gone
                    self.call("DELETE", CSV.path(ns, old))
            self.patch_status(
                SUBSCRIPTION,
                sub,
                {
                    "installedCSV": csv_name,
                    "currentCSV": csv_name,
                    "state": "AtLatestKnown",
                    "lastUpdated": now(),
                    "conditions": [],
                },
            )

    def on_installplan(self, ip: dict) -> None:
        md, spec, st = ip["metadata"], ip.get("spec", {}), ip.get("status") or {}
        ns = md["namespace"]
        if st.get("phase") == "Complete":
            return
        if not spec.get("approved"):
            if st.get("phase") != "RequiresApproval":
                self.patch_status(
                    INSTALLPLAN, ip, {"phase": "RequiresApproval", "catalogSources": [], "startTime": now()}
                )
            return
        for csv_name in spec.get("clusterServiceVersionNames", []):
            self._install_csv(ns, csv_name)
        self.patch_status(
            INSTALLPLAN,
            ip,
            {
                "phase": "Complete",
                "catalogSources": [],
                "conditions": [cond("Installed", "True")],
                "startTime": st.get("startTime", now()),
            },
        )
        for owner in md.get("ownerReferences", []):
            if owner.get("kind") == "Subscription":
                self.schedule(SUBSCRIPTION, ns, owner["name"], delay=0)

    def _install_csv(self, ns: str, name: str) -> None:
        if self.blocked("ClusterServiceVersion", ns, name):
            return
        version = name.split(".v", 1)[1] if ".v" in name else name.split(".", 1)[-1]
        # the operator deployment's environment as the release's CSV sets it, where the catalog records it
        # (OpenShift AI names its preset vLLM image and version there)
        obj = self.create(CSV, ns, csv_object(ns, name, version, CSV_ENV.get(name)))
        if obj and (obj.get("status") or {}).get("phase") != "Succeeded":
            self.patch_status(
                CSV,
                obj,
                {
                    "phase": "Succeeded",
                    "reason": "InstallSucceeded",
                    "message": "install strategy completed with no errors",
                    "lastUpdateTime": now(),
                    "lastTransitionTime": now(),
                    "conditions": [
                        {
                            "phase": "Succeeded",
                            "reason": "InstallSucceeded",
                            "message": "install strategy completed with no errors",
                            "lastUpdateTime": now(),
                            "lastTransitionTime": now(),
                        }
                    ],
                },
            )

    # ------------------------------------------------------------------ operands
    def on_clusterpolicy(self, obj: dict) -> None:
        st = obj.get("status") or {}
        if st.get("state") != "ready":
            self.patch_status(
                CLUSTERPOLICY,
                obj,
                {
                    "state": "ready",
                    "namespace": "nvidia-gpu-operator",
                    "conditions": [
                        cond(
                            "Ready",
                            "True",
                            "Reconciled",
                            "ClusterPolicy is ready as all resources have been successfully reconciled",
                        ),
                        cond("Error", "False", "Ready"),
                    ],
                },
            )

    def on_nicclusterpolicy(self, obj: dict) -> None:
        if (obj.get("status") or {}).get("state") != "ready":
            self.patch_status(NICCLUSTERPOLICY, obj, {"state": "ready", "appliedStates": []})

    def on_macvlannetwork(self, obj: dict) -> None:
        # network-operator v26.4.1 controllers/macvlannetwork_controller.go updateCrStatus: state of its one state
        if (obj.get("status") or {}).get("state") != "ready":
            self.patch_status(MACVLANNETWORK, obj, {"state": "ready"})

    def on_nfd(self, obj: dict) -> None:
        want = [
            cond("Available", "True", "AsExpected"),
            cond("Upgradeable", "True", "AsExpected"),
            cond("Progressing", "False", "AsExpected"),
            cond("Degraded", "False", "AsExpected"),
        ]
        if not same_conditions((obj.get("status") or {}).get("conditions"), want):
            self.patch_status(NFD, obj, {"conditions": want})

    def _odh_ready(self, res: Res, obj: dict, extra: dict | None = None) -> None:
        st = obj.get("status") or {}
        want = [cond("Ready", "True", "Ready", "Ready"), cond("Available", "True", "Available")]
        if st.get("phase") != "Ready" or not same_conditions(st.get("conditions"), want):
            status = {
                "phase": "Ready",
                "conditions": want,
                "release": {"name": "OpenShift AI Self-Managed", "version": "3.4.0"},
            }
            status.update(extra or {})
            self.patch_status(res, obj, status)

    def on_dsci(self, obj: dict) -> None:
        self._odh_ready(DSCI, obj)

    def on_dsc(self, obj: dict) -> None:
        comps = (obj.get("spec") or {}).get("components") or {}
        installed = {k: (v or {}).get("managementState") == "Managed" for k, v in comps.items()}
        self._odh_ready(
            DSC, obj, {"installedComponents": installed, "observedGeneration": obj["metadata"].get("generation", 1)}
        )

    # ------------------------------------------------------------------ Gateway controller
    def _route_parents(self, route: dict) -> list[tuple[dict, dict, str]]:
        """(parentRef, Gateway, controllerName) for each parent Gateway a controller would serve.

        A Gateway controller reports only for Gateways that exist, whose GatewayClass names
        it and that it has accepted; here every existing GatewayClass is served, with its
        own controllerName (a Gateway held by neverReady is not accepted: no route status).
        """
        ns = route["metadata"]["namespace"]
        out = []
        for ref in (route.get("spec") or {}).get("parentRefs") or []:
            if ref.get("group", GATEWAY.group) != GATEWAY.group or ref.get("kind", "Gateway") != "Gateway":
                continue
            gw = self.get(GATEWAY, ref.get("namespace", ns), ref["name"])
            accepted = [c for c in ((gw or {}).get("status") or {}).get("conditions") or [] if c["type"] == "Accepted"]
            if not accepted or accepted[0]["status"] != "True":
                continue
            gwc = self.get(GATEWAYCLASS, None, (gw.get("spec") or {}).get("gatewayClassName", ""))
            if gwc is None:
                continue
            # the status names the parent as the spec does, with the schema's defaults
            ref = {"group": GATEWAY.group, "kind": "Gateway"} | ref
            out.append((ref, gw, (gwc.get("spec") or {}).get("controllerName", "")))
        return out

    def _backend_missing(self, ns: str, ref: dict) -> tuple[str, str] | None:
        """(reason, message) when a backendRef does not resolve, as Gateway API defines them."""
        group, kind = ref.get("group", ""), ref.get("kind", "Service")
        name, bns = ref["name"], ref.get("namespace", ns)
        if group in ("", "core") and kind == "Service":
            res = SERVICE
        elif group == INFERENCEPOOL.group and kind == "InferencePool":
            res = INFERENCEPOOL
        elif group == BACKEND.group and kind == "Backend":
            res = BACKEND
        else:
            return "InvalidKind", f"backendRef {group}/{kind} {name} is not supported"
        if self.get(res, bns, name) is None:
            return "BackendNotFound", f"backend {kind} {bns}/{name} not found"
        return None

    def on_httproute(self, obj: dict) -> None:
        md = obj["metadata"]
        ns, gen = md["namespace"], md.get("generation", 1)
        rules = (obj.get("spec") or {}).get("rules") or []
        missing = None
        for ref in [b for r in rules for b in (r.get("backendRefs") or [])]:
            missing = self._backend_missing(ns, ref)
            if missing:
                break
        resolved = (
            cond("ResolvedRefs", "False", missing[0], missing[1], observedGeneration=gen)
            if missing
            else cond("ResolvedRefs", "True", "ResolvedRefs", "", observedGeneration=gen)
        )
        parents = [
            {
                "parentRef": ref,
                "controllerName": controller,
                "conditions": [
                    cond("Accepted", "True", "Accepted", "Route was valid", observedGeneration=gen),
                    resolved,
                ],
            }
            for ref, _gw, controller in self._route_parents(obj)
        ]
        have = (obj.get("status") or {}).get("parents") or []
        if _same_parents(have, parents):
            return
        self.patch_status(HTTPROUTE, obj, {"parents": parents})

    def on_inferencepool(self, obj: dict) -> None:
        md, spec = obj["metadata"], obj.get("spec") or {}
        ns, name, gen = md["namespace"], md["name"], md.get("generation", 1)
        epp = spec.get("endpointPickerRef") or {}
        epp_ok = (epp.get("group", "") in ("", "core") and epp.get("kind", "Service") == "Service") and (
            self.get(SERVICE, ns, epp.get("name", "")) is not None
        )
        resolved = (
            cond("ResolvedRefs", "True", "ResolvedRefs", "", observedGeneration=gen)
            if epp_ok
            else cond(
                "ResolvedRefs",
                "False",
                "InvalidExtensionRef",
                f"endpoint picker Service {ns}/{epp.get('name', '')} not found",
                observedGeneration=gen,
            )
        )
        parents: list[dict] = []
        for route in self.list(HTTPROUTE, ns):
            rules = (route.get("spec") or {}).get("rules") or []
            refs = [b for r in rules for b in (r.get("backendRefs") or [])]
            if not any(b.get("kind") == "InferencePool" and b.get("name") == name for b in refs):
                continue
            for _ref, gw, controller in self._route_parents(route):
                ref = {
                    "group": GATEWAY.group,
                    "kind": "Gateway",
                    "name": gw["metadata"]["name"],
                    "namespace": gw["metadata"]["namespace"],
                }
                if ref in [x["parentRef"] for x in parents]:
                    continue
                parents.append(
                    {
                        "parentRef": ref,
                        "controllerName": controller,
                        "conditions": [
                            cond(
                                "Accepted",
                                "True",
                                "Accepted",
                                "InferencePool has been accepted",
                                observedGeneration=gen,
                            ),
                            resolved,
                        ],
                    }
                )
        have = (obj.get("status") or {}).get("parents") or []
        if _same_parents(have, parents):
            return
        self.patch_status(INFERENCEPOOL, obj, {"parents": parents})

    def on_hpa(self, obj: dict) -> None:
        spec, st = obj.get("spec") or {}, obj.get("status") or {}
        want = [
            cond("AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size"),
            cond(
                "ScalingActive",
                "True",
                "ValidMetricFound",
                "the HPA was able to successfully calculate a replica count",
            ),
            cond("ScalingLimited", "False", "DesiredWithinRange", "the desired count is within the acceptable range"),
        ]
        n = spec.get("minReplicas", 1)
        if same_conditions(st.get("conditions"), want) and st.get("desiredReplicas") == n:
            return
        self.patch_status(
            HPA,
            obj,
            {
                "observedGeneration": obj["metadata"].get("generation", 1),
                "currentReplicas": n,
                "desiredReplicas": n,
                "conditions": want,
            },
        )

    def on_scaledobject(self, obj: dict) -> None:
        spec, st = obj.get("spec") or {}, obj.get("status") or {}
        want = [
            cond("Ready", "True", "ScaledObjectReady", "ScaledObject is defined correctly and is ready for scaling"),
            cond("Active", "True", "ScalerActive", "Scaling is performed because triggers are active"),
            cond("Fallback", "False", "NoFallbackFound", "No fallbacks are active on this scaled object"),
        ]
        if same_conditions(st.get("conditions"), want):
            return
        target = spec.get("scaleTargetRef") or {}
        self.patch_status(
            SCALEDOBJECT,
            obj,
            {
                "conditions": want,
                "scaleTargetKind": f"{target.get('apiVersion', 'apps/v1')}.{target.get('kind', 'Deployment')}",
                "hpaName": f"keda-hpa-{obj['metadata']['name']}",
                "originalReplicaCount": 1,
            },
        )

    def on_kedacontroller(self, obj: dict) -> None:
        # keda-olm-operator reports its install in status.phase (and the KEDA version it runs).
        st = obj.get("status") or {}
        if st.get("phase") != "Installation Succeeded":
            self.patch_status(KEDACONTROLLER, obj, {"phase": "Installation Succeeded", "reason": "KEDA is installed"})

    def on_route(self, obj: dict) -> None:
        """The default ingress controller (OpenShift's router) admits the route: status.ingress as it writes it."""
        spec = obj.get("spec") or {}
        have = (obj.get("status") or {}).get("ingress") or []
        if any(i.get("routerName") == "default" and i.get("host") == spec.get("host") for i in have):
            return
        ingress = {
            "host": spec.get("host", ""),
            "routerName": "default",
            "wildcardPolicy": spec.get("wildcardPolicy", "None"),
            "conditions": [{"type": "Admitted", "status": "True", "lastTransitionTime": now()}],
        }
        self.patch_status(ROUTE, obj, {"ingress": [ingress]})

    def on_gatewayclass(self, obj: dict) -> None:
        want = [cond("Accepted", "True", "Accepted", observedGeneration=obj["metadata"].get("generation", 1))]
        if not same_conditions((obj.get("status") or {}).get("conditions"), want):
            self.patch_status(GATEWAYCLASS, obj, {"conditions": want})

    def on_gateway(self, obj: dict) -> None:
        gen = obj["metadata"].get("generation", 1)
        want = [
            cond("Accepted", "True", "Accepted", observedGeneration=gen),
            cond("Programmed", "True", "Programmed", observedGeneration=gen),
        ]
        if same_conditions((obj.get("status") or {}).get("conditions"), want):
            return
        listeners = [
            {
                "name": ln["name"],
                "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}],
                "attachedRoutes": 0,
                "conditions": [
                    cond("Accepted", "True", "Accepted", observedGeneration=gen),
                    cond("Programmed", "True", "Programmed", observedGeneration=gen),
                    cond("ResolvedRefs", "True", "ResolvedRefs", observedGeneration=gen),
                ],
            }
            for ln in (obj.get("spec") or {}).get("listeners") or []
        ]
        ns = obj["metadata"].get("namespace", "")
        status = {
            "conditions": want,
            "addresses": [{"type": "Hostname", "value": f"{obj['metadata']['name']}.{ns}.svc.cluster.local"}],
            "listeners": listeners,
        }
        self.patch_status(GATEWAY, obj, status)

    def on_application(self, obj: dict) -> None:
        st = obj.get("status") or {}
        if (st.get("sync") or {}).get("status") == "Synced" and (st.get("health") or {}).get("status") == "Healthy":
            return
        src = (obj.get("spec") or {}).get("source") or {}
        self.patch_status(
            APPLICATION,
            obj,
            {
                "sync": {"status": "Synced", "revision": src.get("targetRevision", "HEAD")},
                "health": {"status": "Healthy"},
                "reconciledAt": now(),
                "operationState": {
                    "phase": "Succeeded",
                    "message": "successfully synced",
                    "startedAt": now(),
                    "finishedAt": now(),
                    "operation": {"sync": {"revision": src.get("targetRevision", "HEAD")}},
                },
            },
        )

    def on_mcp(self, pool: dict) -> None:
        name = pool["metadata"]["name"]
        refs = [r["name"] for r in (pool.get("spec") or {}).get("pinnedImageSets") or []]
        for pis in self.list(PINNEDIMAGESET):
            if (pis["metadata"].get("labels") or {}).get("machineconfiguration.openshift.io/role") == name and pis[
                "metadata"
            ]["name"] not in refs:
                refs.append(pis["metadata"]["name"])
        sets = [p for p in (self.get(PINNEDIMAGESET, None, r) for r in refs) if p]
        blocked = [p for p in sets if self.blocked("PinnedImageSet", None, p["metadata"]["name"])]
        mcns = [m for m in self.list(MCN) if ((m.get("spec") or {}).get("pool") or {}).get("name") == name]
        count = len(mcns)
        if sets:
            for m in mcns:
                want = [
                    {
                        "name": p["metadata"]["name"],
                        "currentGeneration": p["metadata"].get("generation", 1),
                        "desiredGeneration": p["metadata"].get("generation", 1),
                    }
                    for p in sets
                    if p not in blocked
                ] + [
                    {"name": p["metadata"]["name"], "desiredGeneration": p["metadata"].get("generation", 1)}
                    for p in blocked
                ]
                if ((m.get("status") or {}).get("pinnedImageSets")) != want:
                    self.patch_status(
                        MCN, m, {"pinnedImageSets": want, "observedGeneration": m["metadata"].get("generation", 1)}
                    )
        updated = 0 if blocked else count
        sync = {
            "poolSynchronizerType": "PinnedImageSets",
            "machineCount": count,
            "updatedMachineCount": updated,
            "readyMachineCount": updated,
            "availableMachineCount": updated,
            "unavailableMachineCount": count - updated,
            "observedGeneration": pool["metadata"].get("generation", 1),
        }
        have = (pool.get("status") or {}).get("poolSynchronizersStatus") or []
        if not sets or [h for h in have if h.get("poolSynchronizerType") == "PinnedImageSets"] == [sync]:
            return
        others = [h for h in have if h.get("poolSynchronizerType") != "PinnedImageSets"]
        self.patch_status(MCP, pool, {"poolSynchronizersStatus": [*others, sync]})


def main(argv: list[str] | None = None) -> int:
    import argparse
    import signal

    ap = argparse.ArgumentParser(description="status simulator for the local control plane (test-side)")
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--delay", type=float, default=None)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(name)s %(message)s"
    )
    api = config.new_client_from_config(config_file=args.kubeconfig)
    sim = Simulator(api, delay=args.delay).start()
    done = threading.Event()
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda *_: done.set())
    done.wait()
    sim.stop()
    with contextlib.suppress(Exception):
        api.close()
    return 0
