"""OpenShift's SecurityContextConstraints admission on the local control plane (TEST-SIDE ONLY).

``make scc`` (mk/scc.mk) builds ``sccwebhook`` (``scc/`` beside this file): OpenShift's own admission
plugin (``sccadmission`` of github.com/openshift/apiserver-library-go, snapshot in ../shared/upstream)
served as an admission webhook. :class:`SCCAdmission` runs it against one control plane instance the
way OpenShift's kube-apiserver runs the plugin, with:

* the SecurityContextConstraints CRD of ``github.com/openshift/api`` (the version the webhook's go.mod
  pins, read from the Go module cache);
* OpenShift's default SCCs and their ``system:openshift:scc:<name>`` ClusterRoles and the binding of
  restricted-v2 to ``system:authenticated``, read from cluster-kube-apiserver-operator's
  ``bindata/bootkube/scc-manifests`` (pinned commit in mk/scc.mk, extracted under .cache/upstream);
* OpenShift AI's ``openshift-ai-llminferenceservice-scc`` and its ClusterRole, as OpenShift AI 3.5
  installs them (``config/overlays/odh/rbac/llmisvc/llm-svc-scc.yaml`` of its KServe, same folder);
* the plugin's "use" check through the API server's RBAC (SubjectAccessReview);
* the pod webhooks: the mutating one calls the plugin's Admit (SCC chosen, ``openshift.io/scc``
  annotation, defaults injected), the validating one its Validate;
* PLAYED, not OpenShift's code: the namespace annotations ``openshift.io/sa.scc.uid-range``,
  ``supplemental-groups`` and ``mcs`` that OpenShift's namespace SCC allocation controller sets
  (cluster-policy-controller, not available here) come from the webhook program (a namespace
  webhook and a first pass over existing namespaces, with library-go's uid ranges); and the
  controller-manager's pods are checked as created by that controller's service account, as
  OpenShift's kube-controller-manager (service account credentials) creates them.

Switch: ``KCP_SCC=0`` turns it off (on by default, see tests/controlplane/README.md).
"""

from __future__ import annotations

import base64
import os
import time
from pathlib import Path

import yaml

try:  # imported as controlplane.scc_admission (pytest) or beside cluster.py as a script
    from . import gomodule, webhooks
    from .component import CACHE, Component, ComponentError
    from .procutil import free_port
except ImportError:
    import gomodule  # type: ignore[no-redef]
    import webhooks  # type: ignore[no-redef]
    from component import CACHE, Component, ComponentError  # type: ignore[no-redef]
    from procutil import free_port  # type: ignore[no-redef]

BINARY = Path(os.environ.get("KCP_SCC_BIN", CACHE / "bin" / "sccwebhook"))
# mk/scc.mk builds in this copy of scc/go.mod (it adds the snapshot replacements) and extracts the
# operator's SCC manifests here.
BUILD_DIR = CACHE / "scc"
MANIFESTS = CACHE / "upstream" / "scc-manifests"
API_MODULE = "github.com/openshift/api"
CRD_FILE = "security/v1/zz_generated.crd-manifests/0000_03_config-operator_01_securitycontextconstraints.crd.yaml"
ENV_SWITCH = "KCP_SCC"
SCC_ANNOTATION = "openshift.io/scc"


class SCCError(ComponentError):
    """The SCC admission could not be started."""


# On by default: every plane admits pods as OpenShift does (OpenShift AI's KServe, the default controller,
# binds its SCC to the multi-node workloads). KCP_SCC=0 turns it off for a session.
DEFAULT_ENABLED = True


def enabled_by_default() -> bool:
    """$KCP_SCC (1/true/yes/on or 0/false/no/off) if set, else DEFAULT_ENABLED."""
    value = os.environ.get(ENV_SWITCH, "").strip().lower()
    if not value:
        return DEFAULT_ENABLED
    return value in ("1", "true", "yes", "on")


def crd() -> dict:
    try:
        text = gomodule.read(BUILD_DIR, API_MODULE, CRD_FILE)
    except gomodule.ModuleError as e:
        raise SCCError(f"{e} (make scc)") from None
    return yaml.safe_load(text)


def manifests() -> list[dict]:
    """OpenShift's default SCCs, their ClusterRoles and ClusterRoleBindings, as the operator ships them."""
    if not MANIFESTS.is_dir():
        raise SCCError(f"{MANIFESTS} is missing: run `make scc` (extracts OpenShift's SCC manifests)")
    docs = []
    for f in sorted(MANIFESTS.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(f.read_text()) if d]
    return docs


def _collection(doc: dict) -> str:
    group_version = doc["apiVersion"]
    plural = {
        "SecurityContextConstraints": "securitycontextconstraints",
        "ClusterRole": "clusterroles",
        "ClusterRoleBinding": "clusterrolebindings",
    }[doc["kind"]]
    return f"/apis/{group_version}/{plural}"


def webhook_configurations(port: int, ca_bundle: str) -> list[dict]:
    """Pods through Admit (mutating) and Validate (validating); namespaces through the allocation."""
    every = {"namespaceSelector": {}, "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 15}

    def hook(name: str, path: str, resource: str, ops: list[str], group: str = "") -> dict:
        return every | {
            "name": name,
            "failurePolicy": "Fail",
            "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle},
            "rules": [{"apiGroups": [group], "apiVersions": ["v1"], "operations": ops, "resources": [resource]}],
        }

    pods = ["CREATE", "UPDATE"]
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "security.openshift.io-scc"},
            "webhooks": [
                hook("namespace-scc-allocation.security.openshift.io", "/namespace", "namespaces", ["CREATE"]),
                # OpenShift's DefaultSecurityContextConstraints admission (sccdefaults of the same library)
                hook(
                    "scc-defaults.security.openshift.io",
                    "/scc",
                    "securitycontextconstraints",
                    ["CREATE", "UPDATE"],
                    "security.openshift.io",
                ),  # fmt: skip
                hook("scc-admit.security.openshift.io", "/mutate", "pods", pods) | {"reinvocationPolicy": "IfNeeded"},
            ],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "security.openshift.io-scc"},
            "webhooks": [hook("scc-validate.security.openshift.io", "/validate", "pods", pods)],
        },
    ]


class SCCAdmission(Component):
    """One sccwebhook process for one control plane instance."""

    name = "sccwebhook"
    error = SCCError

    def __init__(self, cp, binary: Path | None = None):
        super().__init__(cp, binary or BINARY)
        self.port = 0
        self._ca_bundle = ""
        self.last_probe = ""

    def start(self, timeout: float = 120) -> SCCAdmission:
        self.launch()
        return self.ready(timeout)

    def launch(self) -> None:
        """The CRD, the default SCCs and their RBAC, then the process (main thread)."""
        self.missing("builds OpenShift's SCC admission webhook: make scc")
        cp = self.cp
        self.t0 = time.monotonic()
        self._ca_bundle = base64.b64encode((cp.workdir / "pki" / "ca.crt").read_bytes()).decode()
        cp._call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd())
        end = time.monotonic() + 60
        while not self._crd_served():  # the SCCs need their CRD established (the process is not up yet)
            if time.monotonic() > end:
                raise SCCError("the SecurityContextConstraints CRD is not served after 60s")
            time.sleep(0.2)
        certs = cp.workdir / "scc"
        webhooks.issue_serving_cert(cp.workdir / "pki", certs, "sccwebhook")
        self.port = free_port()
        self.spawn(
            [
                f"--kubeconfig={cp.kubeconfig}",
                f"--listen=127.0.0.1:{self.port}",
                f"--tls-cert={certs / 'tls.crt'}",
                f"--tls-key={certs / 'tls.key'}",
            ]
        )

    def _crd_served(self) -> bool:
        try:
            return self.cp._call("GET", "/apis/security.openshift.io/v1/securitycontextconstraints") is not None
        except ComponentError:
            return False
        except Exception:  # noqa: BLE001 - not served yet (404 until the CRD is established)
            return False

    def ready(self, timeout: float = 120) -> SCCAdmission:
        """Serving, then registered; ready once a dry-run pod comes back with its SCC annotation."""
        try:
            self.wait(self._healthy, "healthz", timeout)
            for hook in webhook_configurations(self.port, self._ca_bundle):
                webhooks.put(self.cp, hook)
            for doc in manifests():  # through the SCC defaulting just registered
                self.cp._call("POST", _collection(doc), doc)
            self.wait(self._admits, "admission", timeout)
        except SCCError as e:
            self.stop()
            raise SCCError(f"{e}\nlast probe: {self.last_probe}") from None
        except BaseException:
            self.stop()
            raise
        return self

    def _healthy(self) -> bool:
        import ssl
        import urllib.request

        ctx = ssl.create_default_context(cafile=str(self.cp.workdir / "pki" / "ca.crt"))
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{self.port}/healthz", timeout=2, context=ctx) as r:  # noqa: S310
                return r.status == 200
        except OSError:
            return False

    def _admits(self) -> bool:
        probe = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "scc-probe", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
        }
        from simulator.kube import request

        try:
            pod = request(
                self.cp.api_client,
                "POST",
                "/api/v1/namespaces/default/pods",
                query=[("dryRun", "All")],
                body=probe,
                timeout=30,
            )
        except Exception as e:  # noqa: BLE001 - webhook not called yet, or SCC cache not synced
            self.last_probe = str(getattr(e, "body", None) or e)[:2000]
            return False
        self.last_probe = f"admitted without {SCC_ANNOTATION}: {pod['metadata'].get('annotations')}"
        return bool(pod and SCC_ANNOTATION in pod["metadata"].get("annotations", {}))


def state(adm: SCCAdmission | None) -> dict | None:
    """What `cluster.py up` records about the admission in state.json."""
    if adm is None:
        return None
    return {"pid": adm.pid, "log": str(adm.log), "port": adm.port, "manifests": str(MANIFESTS)}
