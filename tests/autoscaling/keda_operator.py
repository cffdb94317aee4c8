"""The KEDA operator beside a local control plane (TEST-SIDE ONLY).

``make keda`` (mk/autoscaling.mk) builds ``cmd/operator`` of ``github.com/kedacore/keda/v2`` at the version
``tests/autoscaling/keda/go.mod`` pins into ``.cache/bin/keda-operator``. It runs here as on a cluster (the
Custom Metrics Autoscaler's operand is the same program), with these differences, all of them plumbing:

* the instance's admin kubeconfig instead of its ServiceAccount (``KUBECONFIG``), watching every namespace,
  ``POD_NAMESPACE`` / ``KEDA_CLUSTER_OBJECT_NAMESPACE`` = ``keda``;
* its gRPC metrics service (what the metrics API server asks) and its probe and metrics ports on loopback, with
  a certificate of the control plane's CA in ``--cert-dir`` (on a cluster: the ``kedaorg-certs`` Secret);
* no certificate rotation, no patching of webhook or APIService objects (none are installed here);
* with ``hosts``, cluster Service names it queries resolve for it alone to loopback addresses: it runs in a
  user and mount namespace of its own (``unshare``) over a copy of /etc/hosts with those names added (its
  scalers dial ``thanos-querier.openshift-monitoring.svc.cluster.local``, prometheus_server.py).

Its CRDs (``keda.sh``, ``eventing.keda.sh``) are in every plane's CRD bundle, from the same module version
(tests/controlplane/crdsources/sources.yaml). What the operator decides is its own: whether a ScaledObject is
Ready, the HorizontalPodAutoscaler it creates for it, and activation (0 <-> 1) of its target.
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

from controlplane import webhooks
from controlplane.component import CACHE, Component, ComponentError
from controlplane.procutil import free_port

BINARY = CACHE / "bin" / "keda-operator"
MODULE = "github.com/kedacore/keda/v2"


def versions() -> tuple[str, str]:
    """(the KEDA version the operator is built from, the version the planes' KEDA CRDs come from): two pins,
    tests/autoscaling/keda/go.mod and tests/controlplane/crdsources/sources.yaml, that must agree."""
    import re

    import yaml

    here = Path(__file__).resolve().parent
    built = re.search(rf"^\s*(?:require\s+)?{re.escape(MODULE)} (v\S+)", (here / "keda" / "go.mod").read_text(), re.M)
    sources = yaml.safe_load((here.parent / "controlplane" / "crdsources" / "sources.yaml").read_text())["sources"]
    crds = next(s["version"] for s in sources if s["module"] == MODULE)
    return (built.group(1) if built else "?"), crds


NAMESPACE = "keda"


class KedaError(ComponentError):
    """The KEDA operator could not be started."""


class KedaOperator(Component):
    name = "keda-operator"
    error = KedaError

    def __init__(self, cp, hosts: dict[str, str] | None = None):
        super().__init__(cp, BINARY)
        self.certs = cp.workdir / "keda-certs"
        self.probe_port = self.grpc_port = 0
        self.hosts = hosts or {}

    def _wrap(self) -> list[str] | None:
        if not self.hosts:
            return None
        unshare = shutil.which("unshare")
        if not unshare:
            raise KedaError("unshare (util-linux) is needed to give the KEDA operator its own /etc/hosts")
        hosts = self.cp.workdir / "keda-hosts"
        lines = [f"{addr} {name}" for name, addr in sorted(self.hosts.items())]
        hosts.write_text(Path("/etc/hosts").read_text() + "\n" + "\n".join(lines) + "\n")
        script = 'mount --bind "$0" /etc/hosts && exec "$@"'
        return [unshare, "--user", "--map-root-user", "--mount", "sh", "-c", script, str(hosts)]

    def launch(self) -> KedaOperator:
        if not self.binary.exists():
            raise KedaError(f"{self.binary} is missing: run `make keda` (builds the KEDA operator, mk/autoscaling.mk)")
        built, crds = versions()
        if built != crds:
            raise KedaError(
                f"the KEDA operator is built from {built} (tests/autoscaling/keda/go.mod) but the planes' KEDA CRDs "
                f"are {crds} (tests/controlplane/crdsources/sources.yaml): pin both to one version"
            )
        self.certs.mkdir(parents=True, exist_ok=True)
        pki = self.cp.workdir / "pki"
        # one certificate for the operator's gRPC server, the metrics server (the aggregator checks the name of the
        # APIService's Service) and the metrics server's client side of the gRPC mTLS, as KEDA's own certificates
        names = (f"keda-operator.{NAMESPACE}.svc", f"keda-metrics-apiserver.{NAMESPACE}.svc")
        webhooks.issue_serving_cert(pki, self.certs, common_name="keda-operator", dns_names=names, client=True)
        shutil.copy(pki / "ca.crt", self.certs / "ca.crt")
        self.cp.kubectl("create", "namespace", NAMESPACE)
        self.probe_port, self.grpc_port = free_port(), free_port()
        self.spawn(
            [
                f"--cert-dir={self.certs}",
                f"--metrics-bind-address=127.0.0.1:{free_port()}",
                f"--health-probe-bind-address=127.0.0.1:{self.probe_port}",
                f"--metrics-service-bind-address=127.0.0.1:{self.grpc_port}",
                "--enable-cert-rotation=false",
                "--enable-webhook-patching=false",
                "--enable-apiservice-patching=false",
                "--leader-elect=false",
            ],
            env={"POD_NAMESPACE": NAMESPACE, "WATCH_NAMESPACE": "", "KEDA_CLUSTER_OBJECT_NAMESPACE": NAMESPACE},
            wrap=self._wrap(),
        )
        return self

    def ready(self, timeout: float = 120) -> KedaOperator:
        self.wait(lambda: self.http_ok(f"http://127.0.0.1:{self.probe_port}/readyz"), "readyz", timeout)
        return self


APISERVICE = "v1beta1.external.metrics.k8s.io"


class KedaAdapter(Component):
    """KEDA's metrics API server (``cmd/adapter``): serves ``external.metrics.k8s.io`` to the HPA controller,
    asking the operator's gRPC metrics service for each ScaledObject's trigger values.

    Registered with the control plane's aggregation layer as KEDA's install does (APIService
    v1beta1.external.metrics.k8s.io, Service keda-metrics-apiserver in ``keda``), except that the Service is
    of type ExternalName ``localhost`` (as kcp registers its PackageManifest API) and its serving certificate
    is one of the control plane's CA. Authentication and authorization of the aggregator's requests are its
    own (the front-proxy headers kube-apiserver publishes, SubjectAccessReview)."""

    name = "keda-adapter"
    error = KedaError

    def __init__(self, cp, operator: KedaOperator):
        super().__init__(cp, CACHE / "bin" / "keda-adapter")
        self.operator = operator
        self.port = 0

    def launch(self) -> KedaAdapter:
        if not self.binary.exists():
            raise KedaError(f"{self.binary} is missing: run `make keda` (mk/autoscaling.mk)")
        certs = self.operator.certs  # tls.crt/tls.key for 127.0.0.1 and localhost, ca.crt: the gRPC client's too
        kubeconfig = self.cp.kubeconfig
        self.port = free_port()
        self.spawn(
            [
                f"--secure-port={self.port}",
                "--bind-address=127.0.0.1",
                f"--cert-dir={certs}",
                f"--tls-cert-file={certs / 'tls.crt'}",
                f"--tls-private-key-file={certs / 'tls.key'}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                f"--lister-kubeconfig={kubeconfig}",
                f"--metrics-service-address=127.0.0.1:{self.operator.grpc_port}",
                f"--port={free_port()}",
            ],
            env={"POD_NAMESPACE": NAMESPACE, "WATCH_NAMESPACE": "", "KEDA_CLUSTER_OBJECT_NAMESPACE": NAMESPACE},
        )
        return self

    def register(self) -> None:
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "keda-metrics-apiserver", "namespace": NAMESPACE},
            "spec": {
                "type": "ExternalName",
                "externalName": "localhost",
                "ports": [{"name": "https", "port": self.port}],
            },
        }
        ca = base64.b64encode((self.cp.workdir / "pki" / "ca.crt").read_bytes()).decode()
        apiservice = {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": APISERVICE},
            "spec": {
                "group": "external.metrics.k8s.io",
                "version": "v1beta1",
                "service": {"name": "keda-metrics-apiserver", "namespace": NAMESPACE, "port": self.port},
                "caBundle": ca,
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
            },
        }
        res = self.cp.kubectl("apply", "-f", "-", input="\n".join(json.dumps(o) for o in (service, apiservice)))
        if res.returncode != 0:
            raise KedaError(f"registering {APISERVICE}: {res.stderr}")

    def available(self) -> bool:
        res = self.cp.kubectl("get", "apiservice", APISERVICE, "-o", "json")
        if res.returncode != 0:
            return False
        conds = (json.loads(res.stdout).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Available" and c["status"] == "True" for c in conds)

    def ready(self, timeout: float = 120) -> KedaAdapter:
        self.register()
        self.wait(self.available, f"APIService {APISERVICE} Available", timeout)
        return self
