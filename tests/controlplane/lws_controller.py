"""The LeaderWorkerSet controller on a local control plane (TEST-SIDE ONLY).

``make controlplane`` builds the manager of the Go module ``sigs.k8s.io/lws`` (``sigs.k8s.io/lws/cmd``,
version pinned in ``lws/go.mod`` beside this file) into ``.cache/bin/lws``. :class:`LWSController`
runs it against one :class:`~cluster.ControlPlane` instance the way its release manifests install
it, with its webhooks:

* the LeaderWorkerSet defaulter/validator and the pod webhooks (``/mutate--v1-pod`` gives each
  group's pods their ``leaderworkerset.sigs.k8s.io/*`` labels and, on workers, the leader's address
  and ``LWS_*`` environment; ``/validate--v1-pod``), read from the module's ``config/webhook``
  (``manifests.yaml`` with the JSON patches its kustomization applies, which restrict the pod
  webhooks to pods labelled ``leaderworkerset.sigs.k8s.io/name``; names with the ``lws-`` prefix of
  ``config/default``), pointed at ``https://127.0.0.1:<port><path>`` with the instance CA;
* its Configuration (``config.lws.x-k8s.io/v1alpha1``) from ``config/manager``, with leader
  election and the internal certificate rotator off (the serving certificate comes from the instance
  CA, as cert-manager would issue it on OpenShift's LWS operator), the webhook on 127.0.0.1 and a
  free port, metrics off.

The controller then creates a StatefulSet of leaders per LeaderWorkerSet and a StatefulSet of workers
per group, and reports LeaderWorkerSet status from the pods kube-scheduler binds and kwok runs.

Version: the CRDs the instance loads are LWS v0.9.0 (crdsources/sources.yaml), and so is this
controller. OpenShift's Leader Worker Set Operator 1.1 ships upstream v0.10.0 (1.0: v0.7.0;
openshift/lws-operator README), which the Go module proxy here does not serve; KServe v0.20.0 is
built against v0.8.0's API types (its go.mod), a subset of v0.9.0's.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import yaml

try:  # imported as controlplane.lws_controller (pytest) or beside cluster.py as a script
    from . import gomodule, webhooks
    from .component import CACHE, Component, ComponentError
    from .procutil import free_port
except ImportError:
    import gomodule  # type: ignore[no-redef]
    import webhooks  # type: ignore[no-redef]
    from component import CACHE, Component, ComponentError  # type: ignore[no-redef]
    from procutil import free_port  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
BINARY = Path(os.environ.get("KCP_LWS_BIN", CACHE / "bin" / "lws"))
GO_MODULE_DIR = HERE / "lws"
MODULE = "sigs.k8s.io/lws"
# Paths inside the LWS module.
CONFIG_FILE = "config/manager/controller_manager_config.yaml"
WEBHOOK_DIR = "config/webhook"
DEFAULT_KUSTOMIZATION = "config/default/kustomization.yaml"


class LWSError(ComponentError):
    """The LeaderWorkerSet controller could not be started."""


def module_version() -> str:
    return gomodule.version(GO_MODULE_DIR, MODULE)


def _read(rel: str) -> str:
    return gomodule.read(GO_MODULE_DIR, MODULE, rel)


def webhook_configurations(port: int, ca_bundle: str) -> list[dict]:
    """LWS's webhook configurations as its kustomization builds them, pointed at 127.0.0.1:<port>."""
    kustomization = yaml.safe_load(_read(f"{WEBHOOK_DIR}/kustomization.yaml"))
    prefix = yaml.safe_load(_read(DEFAULT_KUSTOMIZATION)).get("namePrefix", "")
    docs = [
        d
        for rel in kustomization["resources"]
        for d in yaml.safe_load_all(_read(f"{WEBHOOK_DIR}/{rel}"))
        if d and d["kind"].endswith("WebhookConfiguration")
    ]
    for patch in kustomization.get("patches") or []:
        target = patch["target"]
        ops = yaml.safe_load(_read(f"{WEBHOOK_DIR}/{patch['path']}"))
        docs = [
            webhooks.json_patch(d, ops)
            if d["kind"] == target["kind"] and d["metadata"]["name"] == target["name"]
            else d
            for d in docs
        ]
    return [webhooks.pointed(d, port, ca_bundle, name=prefix + d["metadata"]["name"]) for d in docs]


def configuration(webhook_port: int, probe_port: int, cert_dir: Path) -> dict:
    """LWS's manager Configuration for one instance (see the module docstring)."""
    cfg = yaml.safe_load(_read(CONFIG_FILE))
    cfg["leaderElection"] = {"leaderElect": False}
    cfg["internalCertManagement"] = {"enable": False}
    cfg["webhook"] = {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)}
    cfg["health"] = {"healthProbeBindAddress": f"127.0.0.1:{probe_port}"}
    cfg["metrics"] = {"bindAddress": "0"}  # controller-runtime: "0" serves no metrics
    return cfg


class LWSController(Component):
    """One LeaderWorkerSet controller process for one control plane instance."""

    name = "lws"
    error = LWSError

    def __init__(self, cp, binary: Path | None = None):
        super().__init__(cp, binary or BINARY)
        self.webhook_port = self.probe_port = 0
        self._ca_bundle = ""

    def launch(self) -> None:
        self.missing(f"builds {MODULE}/cmd {module_version()} from the Go module")
        wd = self.cp.workdir / "lws"
        certs = wd / "serving-certs"
        webhooks.issue_serving_cert(self.cp.workdir / "pki", certs, "lws-webhook-service")
        self._ca_bundle = base64.b64encode((self.cp.workdir / "pki" / "ca.crt").read_bytes()).decode()
        self.webhook_port, self.probe_port = free_port(), free_port()
        conf = wd / "config.yaml"
        conf.write_text(yaml.safe_dump(configuration(self.webhook_port, self.probe_port, certs)))
        self.spawn([f"--config={conf}"])

    def ready(self, timeout: float = 120) -> LWSController:
        try:
            self.wait(lambda: self.http_ok(f"http://127.0.0.1:{self.probe_port}/readyz"), "readyz", timeout)
            for hook in webhook_configurations(self.webhook_port, self._ca_bundle):
                webhooks.put(self.cp, hook)
            self.wait(self._webhook_denies, "webhooks", timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _webhook_denies(self) -> bool:
        """True once the API server sends LeaderWorkerSets to LWS's validator and it answers: the probe
        (dry run) asks for subgroups larger than the group, which only the webhook refuses."""
        from kubernetes.client.rest import ApiException
        from simulator.kube import request

        pod = {"spec": {"containers": [{"name": "c", "image": "registry.example/probe@sha256:" + "0" * 64}]}}
        probe = {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "webhook-probe", "namespace": "default"},
            "spec": {"leaderWorkerTemplate": {"size": 2, "subGroupPolicy": {"subGroupSize": 3}, "workerTemplate": pod}},
        }
        try:
            request(
                self.cp.api_client,
                "POST",
                "/apis/leaderworkerset.x-k8s.io/v1/namespaces/default/leaderworkersets",
                query=[("dryRun", "All")],
                body=probe,
                timeout=30,
            )
        except ApiException as e:
            return "denied the request" in (e.body or "") and "subGroupSize" in (e.body or "")
        return False  # accepted: the API server does not call the webhook yet


def state(ctl: LWSController | None) -> dict | None:
    if ctl is None:
        return None
    return {"pid": ctl.pid, "version": module_version(), "log": str(ctl.log), "webhook_port": ctl.webhook_port}
