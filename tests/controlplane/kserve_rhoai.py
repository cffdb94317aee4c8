"""OpenShift AI 3.5's KServe on the local control plane: what its install provides (TEST-SIDE ONLY).

``make kserve-rhoai`` (mk/kserve-rhoai.mk) unpacks ``../shared/upstream/kserve-rhoai-3.5.tar.gz``
(red-hat-data-services/kserve, branch rhoai-3.5, module path ``github.com/kserve/kserve``) under
``.cache/upstream``, builds its ``cmd/llmisvc`` with the build tag ``distro`` into
``.cache/bin/llmisvc-rhoai`` and writes the unpacked tree's path to ``.cache/kserve-rhoai/source``:
that file is the one place the snapshot is named; everything below is read from that tree.

What OpenShift AI installs (its kustomize overlay ``config/overlays/odh``, rendered here with the
control plane's own ``kubectl kustomize``) and this module takes from it:

* the ``inferenceservice-config`` ConfigMap as the overlay patches it (``kserveIngressGateway``
  ``openshift-ingress/openshift-ai-inference``, ``enableLLMInferenceServiceTLS: true``);
* every LLMInferenceServiceConfig of the overlay (the well-known presets and the accelerator ones,
  images as its ``params.env`` sets them);
* the llmisvc Mutating/ValidatingWebhookConfigurations;
* ClusterRole ``openshift-ai-llminferenceservice-scc`` (what the controller's multi-node RoleBinding
  names, ``workload_permissions_odh.go``) and, when the API serves ``security.openshift.io``, the
  SecurityContextConstraints of the overlay;
* the CRDs of ``config/crd/full/llmisvc`` (the fork's schema: e.g. ``router.scheduler.tokenizer``).

What OpenShift itself provides and the controller reads at start (``*_odh.go``):

* Istio's ``DestinationRule`` CRD (``networking.istio.io``; from the ``istio.io/api`` module the fork's
  go.mod requires, ``kubernetes/customresourcedefinitions.gen.yaml``): the controller owns
  DestinationRules only when the CRD is served (``controller_setup_odh.go``);
* the service CA's signing Secret ``openshift-service-ca/signing-key`` (``workload_tls_cert_odh.go``:
  the workloads' serving certificates are signed with it): here an RSA CA made per instance.

The Route CRD (``route.openshift.io``) is already in the bundle (crdsources).
"""

from __future__ import annotations

import base64
import copy
import datetime
import functools
import json
import os
import subprocess
from pathlib import Path

import yaml

try:
    from . import gomodule, webhooks
    from .component import CACHE
except ImportError:
    import gomodule  # type: ignore[no-redef]
    import webhooks  # type: ignore[no-redef]
    from component import CACHE  # type: ignore[no-redef]

SOURCE_FILE = CACHE / "kserve-rhoai" / "source"
BINARY = CACHE / "bin" / "llmisvc-rhoai"
OVERLAY = "config/overlays/odh"
CRD_FILES = (
    "config/crd/full/llmisvc/serving.kserve.io_llminferenceservices.yaml",
    "config/crd/full/llmisvc/serving.kserve.io_llminferenceserviceconfigs.yaml",
)
ISTIO_MODULE = "istio.io/api"
ISTIO_CRDS = "kubernetes/customresourcedefinitions.gen.yaml"
ISTIO_KINDS = ("DestinationRule",)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser where PyYAML was built with it
SCC_CLUSTER_ROLE = "openshift-ai-llminferenceservice-scc"
SERVICE_CA = ("openshift-service-ca", "signing-key")  # workload_tls_cert_odh.go defaults
WEBHOOK_NAMES = ("llminferenceservice.serving.kserve.io", "llminferenceserviceconfig.serving.kserve.io")


class RhoaiError(RuntimeError):
    """The snapshot is not unpacked or its overlay does not render."""


def source_dir() -> Path:
    """The unpacked fork (written by mk/kserve-rhoai.mk)."""
    if not SOURCE_FILE.is_file():
        raise RhoaiError(
            f"{SOURCE_FILE} is missing: run `make kserve-rhoai` (unpacks and builds OpenShift AI's KServe)"
        )
    src = Path(SOURCE_FILE.read_text().strip())
    if not (src / "go.mod").is_file():
        raise RhoaiError(f"{src} (named by {SOURCE_FILE}) holds no go.mod: run `make kserve-rhoai` again")
    return src


def version() -> str:
    """What the snapshot is, for logs and state.json (its directory name, e.g. kserve-rhoai-3.5)."""
    return source_dir().name


@functools.cache
def overlay() -> tuple[dict, ...]:
    """OpenShift AI's install of KServe: the odh overlay rendered by the control plane's kubectl."""
    cache = CACHE / "kserve-rhoai" / "odh.yaml"
    src = source_dir()
    if not cache.is_file() or cache.stat().st_mtime < SOURCE_FILE.stat().st_mtime:
        res = subprocess.run(
            [str(CACHE / "bin" / "kubectl"), "kustomize", str(src / OVERLAY)],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        if res.returncode:
            raise RhoaiError(f"kubectl kustomize {src / OVERLAY} failed: {res.stderr.strip()[-2000:]}")
        tmp = cache.with_suffix(".tmp")
        tmp.write_text(res.stdout)
        tmp.replace(cache)
    return tuple(d for d in yaml.safe_load_all(cache.read_text()) if d)


def _of(kind: str, names: tuple[str, ...] | None = None) -> list[dict]:
    return [d for d in overlay() if d["kind"] == kind and (names is None or d["metadata"]["name"] in names)]


def inferenceservice_config(namespace: str) -> dict:
    (cm,) = _of("ConfigMap", ("inferenceservice-config",))
    return cm | {"metadata": {"name": cm["metadata"]["name"], "namespace": namespace}}


def presets(namespace: str) -> list[dict]:
    out = []
    for doc in _of("LLMInferenceServiceConfig"):
        meta = {k: v for k, v in doc["metadata"].items() if k in ("name", "labels", "annotations")}
        out.append(doc | {"metadata": meta | {"namespace": namespace}})
    return out


def webhook_configurations(port: int, ca_bundle: str) -> list[dict]:
    hooks = _of("MutatingWebhookConfiguration", WEBHOOK_NAMES) + _of("ValidatingWebhookConfiguration", WEBHOOK_NAMES)
    return [webhooks.pointed(doc, port, ca_bundle) for doc in hooks]


def _fork_crds() -> list[dict]:
    """The fork's LLMInferenceService(Config) CRDs as it ships them, minus their install-time metadata."""
    return copy.deepcopy(_parsed_fork_crds())


@functools.cache
def _parsed_fork_crds() -> list[dict]:
    # parsed once per snapshot into JSON beside the bundle: PyYAML takes seconds of CPU over these files on every
    # plane start otherwise (the LLMInferenceServiceConfig CRD alone is ~49,000 lines)
    cache = CACHE / "kserve-rhoai" / "fork-crds.json"
    src = str(source_dir())
    if cache.is_file():
        held = json.loads(cache.read_text())
        if held.get("source") == src:
            return held["crds"]
    out = []
    for rel in CRD_FILES:
        crd = yaml.load((source_dir() / rel).read_text(), Loader=_LOADER)  # noqa: S506 - a safe loader
        crd["metadata"] = {"name": crd["metadata"]["name"], "annotations": crd["metadata"].get("annotations", {})}
        out.append(crd)
    tmp = cache.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"source": src, "crds": out}))
    tmp.replace(cache)
    return out


def conversion_patches(port: int, ca_bundle: str) -> dict[str, dict]:
    """{CRD name: merge patch} sending the fork's CRDs' conversion to its webhook on loopback."""
    out = {}
    for crd in _fork_crds():
        conv = crd["spec"].get("conversion") or {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"]}}
        path = (conv.get("webhook", {}).get("clientConfig", {}).get("service") or {}).get("path", "/convert")
        conv["webhook"]["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
        out[crd["metadata"]["name"]] = {"spec": {"conversion": conv}}
    return out


# The plane's CRD bundle for this flavor (derived from the upstream bundle, outside the repo): the fork's
# LLMInferenceService(Config) CRDs in place of upstream's and Istio's DestinationRule CRD, loaded by kcp at start (and
# kept in its etcd snapshot cache, which keys on the bundle) instead of two of the largest CRDs being replaced and one
# created on every start (about 20 s of each start on 2 busy cores). The conversion webhook is patched in at start.
BUNDLE = CACHE / "kserve-rhoai" / "crds.json"
BUNDLE_FORMAT = 1  # bump when what the bundle holds changes


def crd_bundle(base: Path) -> Path:
    """``BUNDLE`` for ``base`` (the upstream bundle), written when missing or made from another base or snapshot."""
    stamp = json.dumps([BUNDLE_FORMAT, str(base), base.stat().st_mtime_ns, base.stat().st_size, str(source_dir())])
    stamp_file = BUNDLE.with_suffix(".stamp")
    if BUNDLE.is_file() and stamp_file.is_file() and stamp_file.read_text() == stamp:
        return BUNDLE
    bundle = json.loads(base.read_text())
    fork = {c["metadata"]["name"]: c for c in _fork_crds() + istio_crds()}
    for c in fork.values():
        c["metadata"] = {"name": c["metadata"]["name"], "annotations": c["metadata"].get("annotations") or {}}
    bundle["crds"] = [c for c in bundle["crds"] if c["metadata"]["name"] not in fork] + list(fork.values())
    bundle["index"] = [e for e in bundle["index"] if e.get("crd") not in fork] + [
        {"crd": name, "source": version() if name.endswith(".serving.kserve.io") else ISTIO_MODULE} for name in fork
    ]
    BUNDLE.parent.mkdir(parents=True, exist_ok=True)
    tmp = BUNDLE.with_suffix(f".{os.getpid()}.tmp")  # three sessions may write it at once: each renames its own
    tmp.write_text(json.dumps(bundle))
    tmp.replace(BUNDLE)
    stamp_tmp = stamp_file.with_suffix(f".{os.getpid()}.tmp")
    stamp_tmp.write_text(stamp)
    stamp_tmp.replace(stamp_file)
    return BUNDLE


def istio_crds() -> list[dict]:
    """Istio's CRDs the controller needs (ISTIO_KINDS), from the istio.io/api module the fork pins (a copy: the parse
    of Istio's whole generated CRD file, seconds of CPU, is done once per process)."""
    return copy.deepcopy(_istio_crds())


@functools.cache
def _istio_crds() -> list[dict]:
    try:
        # in the build copy (kserve-rhoai/go.mod + the replace of the fork): the module graph resolves there
        text = gomodule.read(SOURCE_FILE.parent / "mod", ISTIO_MODULE, ISTIO_CRDS)
    except gomodule.ModuleError as e:
        raise RhoaiError(str(e)) from None
    docs = yaml.load_all(text, Loader=_LOADER)  # noqa: S506 - a safe loader
    return [d for d in docs if d and d.get("spec", {}).get("names", {}).get("kind") in ISTIO_KINDS]


def scc_cluster_roles() -> list[dict]:
    return _of("ClusterRole", (SCC_CLUSTER_ROLE,))


def security_context_constraints() -> list[dict]:
    return [d | {"metadata": {"name": d["metadata"]["name"]}} for d in _of("SecurityContextConstraints")]


def service_ca_secret(out_dir: Path) -> list[dict]:
    """The service CA's signing Secret (namespace + Secret): an RSA CA of the instance's own, as OpenShift's
    service-ca operator keeps one (the fork signs with SHA256WithRSA, so an EC key is refused)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "openshift-service-serving-signer")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem_key = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "service-ca.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    ns, secret = SERVICE_CA
    data = {"tls.crt": cert.public_bytes(serialization.Encoding.PEM), "tls.key": pem_key}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {"name": secret, "namespace": ns},
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
        },
    ]


def _create(cp, obj: dict, plural: str) -> None:
    """POST obj (no-op when it exists: cp._call returns None on 409)."""
    api = obj["apiVersion"]
    base = f"/apis/{api}" if "/" in api else f"/api/{api}"
    ns = obj["metadata"].get("namespace")
    cp._call("POST", f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}", obj)


def _served(cp, group_version: str) -> bool:
    from kubernetes.client.rest import ApiException
    from simulator.kube import request

    try:
        request(cp.api_client, "GET", f"/apis/{group_version}", timeout=30)
        return True
    except ApiException:
        return False


def prepare(cp, wait) -> None:
    """What OpenShift and OpenShift AI's install provide before the controller starts (see the module
    docstring). ``wait(pred, what, timeout)`` is the component's wait."""
    for crd in istio_crds():  # in the plane's bundle already (crd_bundle), unless the plane was given another
        if not _served(cp, f"{crd['spec']['group']}/{crd['spec']['versions'][0]['name']}"):
            _create(cp, crd, "customresourcedefinitions")
    ns, secret = service_ca_secret(cp.workdir / "kserve")
    _create(cp, ns, "namespaces")
    _create(cp, secret, "secrets")
    for role in scc_cluster_roles():
        _create(cp, role, "clusterroles")
    if _served(cp, "security.openshift.io/v1"):  # the SCC admission of the local plane, when present
        for scc in security_context_constraints():
            _create(cp, scc, "securitycontextconstraints")
    # the controller decides at start whether to own DestinationRules (discovery): the CRD must be served
    groups = {
        crd["spec"]["group"] + "/" + v["name"] for crd in istio_crds() for v in crd["spec"]["versions"] if v["served"]
    }
    for gv in groups:
        wait(lambda gv=gv: _served(cp, gv), f"{gv} served", 120)
