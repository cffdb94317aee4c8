"""Prometheus in the place of the cluster's Thanos querier (TEST-SIDE ONLY).

``make prometheus`` (mk/autoscaling.mk) builds ``cmd/prometheus`` of ``github.com/prometheus/prometheus`` at the
version ``tests/autoscaling/prometheus/go.mod`` pins into ``.cache/bin/prometheus``. The rendered ScaledObjects
query ``https://thanos-querier.openshift-monitoring.svc.cluster.local:9092``, OpenShift monitoring's tenancy port:
here that name resolves, for the KEDA operator only (keda_operator.py gives it its own /etc/hosts), to a loopback
address where this Prometheus serves its HTTP API on port 9092 with TLS, a certificate of the control plane's CA
for that name (the CA the rendered token Secret's ``ca.crt`` holds, which the TriggerAuthentication hands KEDA).

Played, not run: the Prometheus operator (the scrape job is written from the rendered ServiceMonitor: its path,
interval and bearer token Secret, the ``namespace`` label the operator adds; the target is the endpoint picker's
metrics port on loopback, where the operator would find it through the Service's endpoints) and the tenancy
proxy in front of port 9092 (it would check the token's access to the namespace and add ``namespace=...`` to
each query; Prometheus ignores KEDA's ``namespace`` parameter).
"""

from __future__ import annotations

import random
import ssl
import urllib.error
import urllib.request

import yaml
from controlplane import webhooks
from controlplane.component import CACHE, Component, ComponentError

BINARY = CACHE / "bin" / "prometheus"
THANOS = "thanos-querier.openshift-monitoring.svc.cluster.local"
PORT = 9092


class PrometheusError(ComponentError):
    """Prometheus could not be started."""


def loopback_address() -> str:
    """An address of 127.0.0.0/16 outside the planes' pod ranges (127.<k>.0.0/16, k >= 16) whose port 9092 is free."""
    import socket

    for _ in range(50):
        addr = f"127.0.{random.randint(2, 250)}.{random.randint(2, 250)}"  # noqa: S311 - not crypto
        with socket.socket() as s:
            try:
                s.bind((addr, PORT))
            except OSError:
                continue
        return addr
    raise PrometheusError(f"no free {PORT} port on a loopback address")


class Prometheus(Component):
    name = "prometheus"
    error = PrometheusError

    def __init__(self, cp, address: str):
        super().__init__(cp, BINARY)
        self.address = address
        self.dir = cp.workdir / "prometheus"
        self.jobs: list[dict] = []

    @property
    def url(self) -> str:
        return f"https://{self.address}:{PORT}"

    def scrape_service_monitor(self, monitor: dict, target: str, token: str, scheme: str = "http") -> None:
        """A scrape job as the Prometheus operator writes it for the ServiceMonitor's first endpoint."""
        ep = monitor["spec"]["endpoints"][0]
        meta = monitor["metadata"]
        self.jobs.append(
            {
                "job_name": f"serviceMonitor/{meta['namespace']}/{meta['name']}/0",
                "scrape_interval": ep.get("interval", "30s"),
                "metrics_path": ep.get("path", "/metrics"),
                "scheme": scheme,
                "authorization": {"type": "Bearer", "credentials": token},
                "static_configs": [{"targets": [target], "labels": {"namespace": meta["namespace"]}}],
            }
        )

    def launch(self) -> Prometheus:
        if not self.binary.exists():
            raise PrometheusError(f"{self.binary} is missing: run `make prometheus` (mk/autoscaling.mk)")
        self.dir.mkdir(parents=True, exist_ok=True)
        webhooks.issue_serving_cert(self.cp.workdir / "pki", self.dir, common_name=THANOS, dns_names=(THANOS,))
        (self.dir / "prometheus.yml").write_text(yaml.safe_dump({"scrape_configs": self.jobs}))
        web = {"tls_server_config": {"cert_file": str(self.dir / "tls.crt"), "key_file": str(self.dir / "tls.key")}}
        (self.dir / "web.yml").write_text(yaml.safe_dump(web))
        self.spawn(
            [
                f"--config.file={self.dir / 'prometheus.yml'}",
                f"--web.config.file={self.dir / 'web.yml'}",
                f"--web.listen-address={self.address}:{PORT}",
                f"--storage.tsdb.path={self.dir / 'data'}",
                "--log.level=warn",
            ]
        )
        return self

    def _get(self, path: str) -> int:
        ctx = ssl.create_default_context(cafile=str(self.cp.workdir / "pki" / "ca.crt"))
        ctx.check_hostname = False  # the certificate names THANOS; this request goes to the address
        try:
            with urllib.request.urlopen(self.url + path, context=ctx, timeout=2) as r:  # noqa: S310 - loopback
                return r.status
        except (urllib.error.URLError, OSError):
            return 0

    def ready(self, timeout: float = 60) -> Prometheus:
        self.wait(lambda: self._get("/-/ready") == 200, "/-/ready", timeout)
        return self
