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

The controller process gets ``PR_SET_PDEATHSIG`` = SIGKILL: it dies with the thread that
started it (the pytest or ``cluster.py serve`` main thread), even when that is SIGKILLed.
"""

from __future__ import annotations

import base64
import copy
import datetime
import functools
import ipaddress
import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

try:  # imported as controlplane.kserve_controller (pytest) or beside cluster.py as a script
    from .procutil import die_with_parent, free_port, process_tree_rss
except ImportError:
    from procutil import die_with_parent, free_port, process_tree_rss  # type: ignore[no-redef]

if TYPE_CHECKING:
    from .cluster import ControlPlane

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CACHE = Path(os.environ.get("KCP_CACHE", REPO / ".cache"))
BINARY = Path(os.environ.get("KCP_KSERVE_BIN", CACHE / "bin" / "llmisvc"))
GO_MODULE_DIR = HERE / "kserve"
MODULE = "github.com/kserve/kserve"

# The real controller runs by default: it alone decides LLMInferenceService readiness (the
# simulator plays only kubelets and the gateway controller). KCP_KSERVE=0 (cluster.py up
# --no-kserve, ControlPlane(kserve=False)) starts a control plane without it, for tests of
# other components; nothing then reconciles LLMInferenceServices.
ENV_SWITCH = "KCP_KSERVE"
DEFAULT_ENABLED = True

# OpenShift AI runs the KServe controllers in its applications namespace (POD_NAMESPACE is
# what KServe's constants.KServeNamespace resolves to; kserve v0.20.0 pkg/constants) and
# patches inferenceservice-config so that kserveIngressGateway is
# openshift-ingress/openshift-ai-inference (rhods-operator rhoai-3.4,
# prefetched-manifests/kserve/overlays/odh/patches/inferenceservice-config-patch.yaml).
NAMESPACE = "redhat-ods-applications"
INGRESS_GATEWAY = "openshift-ingress/openshift-ai-inference"

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


class KServeError(RuntimeError):
    """The controller could not be started (the control plane start fails with this)."""


def enabled_by_default() -> bool:
    """The switch's value from the environment (KCP_KSERVE=1/true/yes/on), else the default."""
    value = os.environ.get(ENV_SWITCH, "").strip().lower()
    if not value:
        return DEFAULT_ENABLED
    return value in ("1", "true", "yes", "on")


def module_version() -> str:
    """The KServe version pinned in kserve/go.mod (the one source of it)."""
    m = re.search(r"^\s*github\.com/kserve/kserve\s+(v\S+)", (GO_MODULE_DIR / "go.mod").read_text(), re.M)
    if not m:
        raise KServeError(f"no {MODULE} requirement in {GO_MODULE_DIR / 'go.mod'}")
    return m.group(1)


@functools.cache
def module_dir() -> Path:
    """The KServe module in GOMODCACHE (downloaded and checked against kserve/go.sum if missing)."""
    env = {k: v for k, v in os.environ.items() if k != "GOEXPERIMENT"} | {"GOTOOLCHAIN": "local", "GOFLAGS": ""}
    try:
        res = subprocess.run(
            ["go", "mod", "download", "-json", MODULE],
            cwd=GO_MODULE_DIR,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
    except FileNotFoundError:
        raise KServeError("Go is needed to locate the KServe module (make controlplane)") from None
    try:
        info = json.loads(res.stdout)
    except json.JSONDecodeError:
        raise KServeError(f"go mod download {MODULE} failed: {res.stderr.strip()}") from None
    if info.get("Error"):
        raise KServeError(f"go mod download {MODULE}: {info['Error']}")
    return Path(info["Dir"])


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
    out = []
    for doc in yaml.safe_load_all(_read(WEBHOOKS_FILE)):
        if not doc:
            continue
        doc = copy.deepcopy(doc)
        doc["metadata"] = {"name": doc["metadata"]["name"]}
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
        out.append(doc)
    return out


def conversion_patches(port: int, ca_bundle: str) -> dict[str, dict]:
    """CRD name -> merge patch that sends conversions to KServe's /convert on 127.0.0.1:<port>."""
    out = {}
    for crd, rel in CONVERSION_PATCHES.items():
        conv = yaml.safe_load(_read(rel))["spec"]["conversion"]
        path = conv["webhook"]["clientConfig"]["service"]["path"]
        conv["webhook"]["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
        out[crd] = {"spec": {"conversion": conv}}
    return out


def issue_serving_cert(pki: Path, out_dir: Path) -> None:
    """tls.crt/tls.key for 127.0.0.1, signed by the control plane's CA (pki/ca.crt, ca.key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_cert = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "llmisvc-webhook-server")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file = out_dir / "tls.key"
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_file.chmod(0o600)


class KServeController:
    """One llmisvc controller process for one control plane instance."""

    def __init__(self, cp: ControlPlane, binary: Path | None = None):
        self.cp = cp
        self.binary = Path(binary or BINARY)
        self.proc: subprocess.Popen | None = None
        self.dir = cp.workdir / "kserve"
        self.log = cp.workdir / "llmisvc.log"
        self.webhook_port = self.metrics_port = self.probe_port = 0
        self.timings: dict[str, float] = {}

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def rss_bytes(self) -> int:
        return process_tree_rss(self.pid) if self.pid and self.proc.poll() is None else 0

    def log_tail(self, n: int = 40) -> str:
        if not self.log.exists():
            return ""
        return "\n".join([f"--- {self.log}", *self.log.read_text(errors="replace").splitlines()[-n:]])

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 180) -> KServeController:
        if not self.binary.exists():
            raise KServeError(
                f"{self.binary} is missing: run `make controlplane` (builds {MODULE}/cmd/llmisvc "
                f"{module_version()} from the Go module)"
            )
        t0 = time.monotonic()
        cp = self.cp
        ca = (cp.workdir / "pki" / "ca.crt").read_bytes()
        ca_bundle = base64.b64encode(ca).decode()
        # What the install has before the controller runs: its namespace and global config.
        cp.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        cp.apply(inferenceservice_config())
        tmp = self.dir / "tmp"
        issue_serving_cert(cp.workdir / "pki", tmp / "k8s-webhook-server" / "serving-certs")
        self.webhook_port, self.metrics_port, self.probe_port = free_port(), free_port(), free_port()
        args = [
            str(self.binary),
            f"--webhook-port={self.webhook_port}",
            f"--metrics-addr=127.0.0.1:{self.metrics_port}",
            "--metrics-secure=false",
            f"--health-probe-addr=127.0.0.1:{self.probe_port}",
        ]
        env = {k: v for k, v in os.environ.items() if k not in ("GOEXPERIMENT", "KUBECONFIG", "POD_NAMESPACE")}
        env |= {
            "KUBECONFIG": cp.kubeconfig,
            "POD_NAMESPACE": NAMESPACE,  # -> constants.KServeNamespace
            "TMPDIR": str(tmp),  # -> controller-runtime's default webhook CertDir
            "GOGC": "50",  # as for the control plane's own children
        }
        # The CRD updates take seconds (kube-apiserver re-validates these large schemas):
        # send them while the controller starts.
        pool = ThreadPoolExecutor(2)
        conversions = [
            pool.submit(
                cp._call, "PATCH", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}", patch, patch=True
            )
            for crd, patch in conversion_patches(self.webhook_port, ca_bundle).items()
        ]
        pool.shutdown(wait=False)
        log = open(self.log, "w")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            preexec_fn=die_with_parent(),  # noqa: PLW1509 - prctl only, no locks
        )
        log.close()
        try:
            self._wait(lambda: self._http_ok(f"http://127.0.0.1:{self.probe_port}/readyz"), "readyz", t0, timeout)
            self.timings["readyz"] = time.monotonic() - t0
            for hook in webhook_configurations(self.webhook_port, ca_bundle):
                self._put(hook)
            self._wait(self._webhook_denies, "webhooks answering through the API server", t0, timeout)
            self.timings["webhooks"] = time.monotonic() - t0
            for preset in presets():
                cp.apply(preset)
            self.timings["presets"] = time.monotonic() - t0
            for f in conversions:
                f.result()
            self.timings["conversion"] = time.monotonic() - t0
        except BaseException:
            for f in conversions:
                f.cancel()
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    # ------------------------------------------------------------------ helpers
    def _wait(self, ready, what: str, t0: float, timeout: float) -> None:
        while not ready():
            if self.proc.poll() is not None:
                raise KServeError(f"llmisvc exited with {self.proc.returncode} before {what}:\n{self.log_tail()}")
            if time.monotonic() - t0 > timeout:
                raise KServeError(f"llmisvc: no {what} after {timeout:.0f}s:\n{self.log_tail()}")
            time.sleep(0.1)

    @staticmethod
    def _http_ok(url: str) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:  # noqa: S310 - loopback http
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def _put(self, obj: dict) -> None:
        """Create or replace a cluster-scoped admissionregistration object."""
        base = f"/apis/{obj['apiVersion']}/{obj['kind'].lower()}s"
        name = obj["metadata"]["name"]
        if self.cp._call("POST", base, obj) is None:  # exists: replace it
            current = self.cp._call("GET", f"{base}/{name}")
            obj = obj | {"metadata": obj["metadata"] | {"resourceVersion": current["metadata"]["resourceVersion"]}}
            self.cp._call("PUT", f"{base}/{name}", obj)

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
        "version": module_version(),
        "namespace": NAMESPACE,
        "log": str(ctl.log),
        "webhook_port": ctl.webhook_port,
        "probe_port": ctl.probe_port,
        "metrics_port": ctl.metrics_port,
    }
