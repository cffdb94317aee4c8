"""The real KServe LLMInferenceService controller on the local control plane (TEST-SIDE ONLY).

``make controlplane`` builds ``cmd/llmisvc`` of the Go module ``github.com/kserve/kserve``
(version pinned in ``kserve/go.mod`` beside this file) into ``.cache/bin/llmisvc``.
:class:`KServeController` runs that binary against one :class:`~cluster.ControlPlane`
instance, the way KServe is installed on a cluster, with everything read at start time from
the same KServe module in the Go module cache (nothing of KServe is copied into the repo):

* the ``inferenceservice-config`` ConfigMap (``config/configmap/inferenceservice.yaml``),
  with the ingress gateway OpenShift AI points it at;
* the Mutating/ValidatingWebhookConfigurations (``config/webhook/llmisvc/manifests.yaml``),
  rewritten from the in-cluster Service to ``url: https://127.0.0.1:<port>/<path>`` with the
  control plane's CA as ``caBundle``, so the API server calls KServe's own defaulter and
  validator; the CRDs' conversion webhook (``config/crd/full/llmisvc/*conversion*``) likewise;
* the well-known LLMInferenceServiceConfig presets (``config/llmisvcconfig/``, the resources
  its kustomization lists), created in the KServe namespace through KServe's own validator.

The webhook serving certificate is issued by the control plane's CA (``pki/ca.{crt,key}``)
for 127.0.0.1 and put where controller-runtime looks by default
(``$TMPDIR/k8s-webhook-server/serving-certs/tls.{crt,key}``), with a TMPDIR per instance so
that several instances run at once. Webhook, metrics and probe ports are free loopback ports.

The process is a :class:`~component.Component`: it dies with the thread that launched it, and
starts in two steps (``launch`` in the main thread, ``ready`` anywhere) beside the instance's other
components.
"""

from __future__ import annotations

import base64
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

try:  # imported as controlplane.kserve_controller (pytest) or beside cluster.py as a script
    from . import gomodule, kserve_rhoai, webhooks
    from .component import CACHE, Component, ComponentError
    from .procutil import free_port
except ImportError:
    import gomodule  # type: ignore[no-redef]
    import kserve_rhoai  # type: ignore[no-redef]
    import webhooks  # type: ignore[no-redef]
    from component import CACHE, Component, ComponentError  # type: ignore[no-redef]
    from procutil import free_port  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
BINARY = Path(os.environ.get("KCP_KSERVE_BIN", CACHE / "bin" / "llmisvc"))
GO_MODULE_DIR = HERE / "kserve"
MODULE = "github.com/kserve/kserve"

# The real controller runs by default: it alone decides LLMInferenceService readiness (the
# simulator plays only the Gateway controller and the operators). KCP_KSERVE=0 (cluster.py up
# --no-kserve, ControlPlane(kserve=False)) starts a control plane without it, for tests of
# other components; nothing then reconciles LLMInferenceServices.
ENV_SWITCH = "KCP_KSERVE"
DEFAULT_ENABLED = True

# Which KServe: "rhoai" is OpenShift AI 3.5's build (red-hat-data-services/kserve rhoai-3.5, build
# tag distro; kserve_rhoai.py), what the collection's users run; "upstream" is kserve v0.20.0 from
# kserve/go.mod. OpenShift AI's build is the default (make demo and the serving tests run it);
# tests/controlplane/test_kserve_controller.py names upstream for the upstream-only path.
# KCP_KSERVE_FLAVOR switches the default for a session; ControlPlane(kserve_flavor=...) /
# cluster_factory(..., kserve_flavor=...) pick per instance.
FLAVOR_SWITCH = "KCP_KSERVE_FLAVOR"
FLAVORS = ("rhoai", "upstream")
DEFAULT_FLAVOR = "rhoai"

# OpenShift AI runs the KServe controllers in its applications namespace (POD_NAMESPACE is
# what KServe's constants.KServeNamespace resolves to; kserve v0.20.0 pkg/constants) and
# patches inferenceservice-config so that kserveIngressGateway is
# openshift-ingress/openshift-ai-inference (rhods-operator rhoai-3.4,
# prefetched-manifests/kserve/overlays/odh/patches/inferenceservice-config-patch.yaml).
NAMESPACE = "redhat-ods-applications"
INGRESS_GATEWAY = "openshift-ingress/openshift-ai-inference"


def ingress_gateway() -> list[dict]:
    """The platform's Gateway that KServe's inferenceservice-config names (kserveIngressGateway), as the
    openshift_ai role creates it: GatewayClass openshift-default of the OpenShift ingress operator's
    openshift.io/gateway-controller/v1 (red-hat-data-services ods-ci, configure_gateway.sh)."""
    ns, name = INGRESS_GATEWAY.split("/")
    return [
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "openshift-default"},
            "spec": {"controllerName": "openshift.io/gateway-controller/v1"},
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": {"serving.kserve.io/gateway": "kserve-ingress-gateway"},
            },
            "spec": {
                "gatewayClassName": "openshift-default",
                "listeners": [
                    {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}}
                ],
            },
        },
    ]


# Paths inside the KServe module (kserve v0.20.0).
CONFIGMAP_FILE = "config/configmap/inferenceservice.yaml"
WEBHOOKS_FILE = "config/webhook/llmisvc/manifests.yaml"
PRESETS_DIR = "config/llmisvcconfig"
CONVERSION_PATCHES = {
    "llminferenceservices.serving.kserve.io": "config/crd/full/llmisvc/llmisvc_conversion_webhook_patch.yaml",
    "llminferenceserviceconfigs.serving.kserve.io": (
        "config/crd/full/llmisvc/llmisvcconfig_conversion_webhook_patch.yaml"
    ),
}


class KServeError(ComponentError):
    """The controller could not be started (the control plane start fails with this)."""


def enabled_by_default() -> bool:
    """The switch's value from the environment (KCP_KSERVE=1/true/yes/on), else the default."""
    value = os.environ.get(ENV_SWITCH, "").strip().lower()
    if not value:
        return DEFAULT_ENABLED
    return value in ("1", "true", "yes", "on")


def flavor(value: str | None = None) -> str:
    """The KServe flavor: value if given, else $KCP_KSERVE_FLAVOR, else DEFAULT_FLAVOR."""
    chosen = (value or os.environ.get(FLAVOR_SWITCH, "") or DEFAULT_FLAVOR).strip().lower()
    if chosen not in FLAVORS:
        raise KServeError(f"{FLAVOR_SWITCH}={chosen!r}: valid flavors are {', '.join(FLAVORS)}")
    return chosen


def binary(flavor_: str) -> Path:
    """The controller binary of a flavor (KCP_KSERVE_BIN overrides the upstream one)."""
    return kserve_rhoai.BINARY if flavor_ == "rhoai" else BINARY


def module_version() -> str:
    """The KServe version pinned in kserve/go.mod (the one source of it)."""
    try:
        return gomodule.version(GO_MODULE_DIR, MODULE)
    except gomodule.ModuleError as e:
        raise KServeError(str(e)) from None


def module_dir() -> Path:
    """The KServe module in GOMODCACHE (downloaded and checked against kserve/go.sum if missing)."""
    try:
        return gomodule.directory(GO_MODULE_DIR, MODULE)
    except gomodule.ModuleError as e:
        raise KServeError(str(e)) from None


def _read(rel: str) -> str:
    return (module_dir() / rel).read_text()


def inferenceservice_config() -> dict:
    """KServe's inferenceservice-config ConfigMap, in NAMESPACE, ingress gateway as on OpenShift AI."""
    cm = yaml.safe_load(_read(CONFIGMAP_FILE))
    cm["metadata"] = {"name": cm["metadata"]["name"], "namespace": NAMESPACE}
    ingress = json.loads(cm["data"]["ingress"])
    ingress["kserveIngressGateway"] = INGRESS_GATEWAY
    cm["data"]["ingress"] = json.dumps(ingress, indent=2)
    return cm


def presets() -> list[dict]:
    """The well-known LLMInferenceServiceConfigs (the resources of KServe's kustomization), in NAMESPACE."""
    kustomization = yaml.safe_load(_read(f"{PRESETS_DIR}/kustomization.yaml"))
    out = []
    for rel in kustomization["resources"]:
        for doc in yaml.safe_load_all(_read(f"{PRESETS_DIR}/{rel}")):
            if doc:
                doc["metadata"]["namespace"] = NAMESPACE
                out.append(doc)
    return out


def webhook_configurations(port: int, ca_bundle: str) -> list[dict]:
    """KServe's llmisvc webhook configurations, pointed at https://127.0.0.1:<port><path>."""
    return [webhooks.pointed(doc, port, ca_bundle) for doc in yaml.safe_load_all(_read(WEBHOOKS_FILE)) if doc]


def conversion_patches(port: int, ca_bundle: str) -> dict[str, dict]:
    """CRD name -> merge patch that sends conversions to KServe's /convert on 127.0.0.1:<port>."""
    out = {}
    for crd, rel in CONVERSION_PATCHES.items():
        conv = yaml.safe_load(_read(rel))["spec"]["conversion"]
        path = conv["webhook"]["clientConfig"]["service"]["path"]
        conv["webhook"]["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
        out[crd] = {"spec": {"conversion": conv}}
    return out


class KServeController(Component):
    """One llmisvc controller process for one control plane instance."""

    name = "llmisvc"
    error = KServeError

    def __init__(self, cp, binary: Path | None = None, flavor_: str | None = None):
        self.flavor = flavor(flavor_)
        super().__init__(cp, binary or globals()["binary"](self.flavor))
        self.dir = cp.workdir / "kserve"
        self.webhook_port = self.metrics_port = self.probe_port = 0
        self._conversions: list = []
        self._ca_bundle = ""

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 180) -> KServeController:
        self.launch()
        return self.ready(timeout)

    def launch(self) -> None:
        """What the install has before the controller runs, then the process (main thread)."""
        rhoai = self.flavor == "rhoai"
        if rhoai:
            self.missing(
                "builds OpenShift AI's KServe (make kserve-rhoai: cmd/llmisvc of the rhoai-3.5 snapshot, -tags distro)"
            )
        else:
            self.missing(f"builds {MODULE}/cmd/llmisvc {module_version()} from the Go module")
        cp = self.cp
        self.t0 = time.monotonic()
        self._ca_bundle = base64.b64encode((cp.workdir / "pki" / "ca.crt").read_bytes()).decode()
        cp.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        try:
            cp.apply(kserve_rhoai.inferenceservice_config(NAMESPACE) if rhoai else inferenceservice_config())
            if rhoai:
                kserve_rhoai.prepare(cp, self.wait)
        except kserve_rhoai.RhoaiError as e:
            raise KServeError(str(e)) from None
        tmp = self.dir / "tmp"
        webhooks.issue_serving_cert(
            cp.workdir / "pki", tmp / "k8s-webhook-server" / "serving-certs", "llmisvc-webhook-server"
        )
        # the webhook port the plane chose before kcp set the CRDs' conversion in etcd (cluster.py), else a free one
        chosen = getattr(cp, "kserve_webhook_port", 0)
        self.webhook_port = chosen or free_port()
        self.metrics_port, self.probe_port = free_port(), free_port()
        # The CRD updates take seconds (kube-apiserver re-validates these large schemas):
        # send them while the controller starts.
        pool = ThreadPoolExecutor(2)
        # the fork's own CRDs (its schema differs) are in the plane's bundle (kserve_rhoai.crd_bundle)
        patches = (kserve_rhoai.conversion_patches if rhoai else conversion_patches)(self.webhook_port, self._ca_bundle)
        done = getattr(cp, "conversions_set", ()) if chosen else ()
        self._conversions = [
            pool.submit(
                cp._call, "PATCH", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}", patch, patch=True
            )
            for crd, patch in patches.items()
            if crd not in done  # kcp set it in etcd before kube-apiserver started (cmd/kcp/conversions.go)
        ]
        pool.shutdown(wait=False)
        self.spawn(
            [
                f"--webhook-port={self.webhook_port}",
                f"--metrics-addr=127.0.0.1:{self.metrics_port}",
                "--metrics-secure=false",
                f"--health-probe-addr=127.0.0.1:{self.probe_port}",
            ],
            {
                "POD_NAMESPACE": NAMESPACE,  # -> constants.KServeNamespace
                "TMPDIR": str(tmp),  # -> controller-runtime's default webhook CertDir
            },
        )

    def ready(self, timeout: float = 180) -> KServeController:
        """Readiness, webhooks answering through the API server, presets, conversion (any thread)."""
        try:
            self.wait(lambda: self.http_ok(f"http://127.0.0.1:{self.probe_port}/readyz"), "readyz", timeout)
            rhoai = self.flavor == "rhoai"
            hooks = (kserve_rhoai.webhook_configurations if rhoai else webhook_configurations)(
                self.webhook_port, self._ca_bundle
            )
            for hook in hooks:
                webhooks.put(self.cp, hook)
            self.wait(self._webhook_denies, "webhooks", timeout)
            # each preset passes KServe's validating webhook: sent side by side (OpenShift AI's overlay has dozens)
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(self.cp.apply, kserve_rhoai.presets(NAMESPACE) if rhoai else presets()))
            self.timings["presets"] = time.monotonic() - self.t0
            for f in self._conversions:
                f.result()
            self.timings["conversion"] = time.monotonic() - self.t0
        except BaseException:
            for f in self._conversions:
                f.cancel()
            self.stop()
            raise
        return self

    def _webhook_denies(self) -> bool:
        """True once the API server sends LLMInferenceServices to KServe's validator and it answers.

        The probe (dry run) sets parallelism.data without dataLocal, which only KServe's
        validating webhook refuses (the CRD schema has no rule for it).
        """
        from kubernetes.client.rest import ApiException
        from simulator.kube import request

        probe = {
            "apiVersion": "serving.kserve.io/v1alpha2",
            "kind": "LLMInferenceService",
            "metadata": {"name": "webhook-probe", "namespace": NAMESPACE},
            "spec": {"model": {"uri": "hf://probe/probe"}, "parallelism": {"data": 2}},
        }
        try:
            request(
                self.cp.api_client,
                "POST",
                f"/apis/serving.kserve.io/v1alpha2/namespaces/{NAMESPACE}/llminferenceservices",
                query=[("dryRun", "All")],
                body=probe,
                timeout=30,
            )
        except ApiException as e:
            return "denied the request" in (e.body or "") and "dataLocal" in (e.body or "")
        return False  # accepted: the API server does not call the webhook yet


def state(ctl: KServeController | None) -> dict | None:
    """What `cluster.py up` records about the controller in state.json."""
    if ctl is None:
        return None
    return {
        "pid": ctl.pid,
        "flavor": ctl.flavor,
        "version": kserve_rhoai.version() if ctl.flavor == "rhoai" else module_version(),
        "namespace": NAMESPACE,
        "log": str(ctl.log),
        "webhook_port": ctl.webhook_port,
        "probe_port": ctl.probe_port,
        "metrics_port": ctl.metrics_port,
    }
