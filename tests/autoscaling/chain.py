"""The autoscaling chain of one model on the autoscaling plane (TEST-SIDE ONLY): its rendered KEDA objects and
token Secret applied unchanged, a stand-in of its scale target, and Prometheus scraping its router as the
rendered ServiceMonitor says (prometheus_server.py)."""

from __future__ import annotations

import base64
import contextlib

from .conftest import site
from .kube import apply, get, kind, stand_in, until
from .prometheus_server import Prometheus

TOKEN_SECRET = "keda-metrics-reader-token"


def model_and_objects(site_name: str, host: str) -> tuple[dict, list[dict]]:
    cluster = site(site_name)[host]
    model = next(m for m in cluster["intent"]["serving"]["models"] if m["scheduler"])
    return model, cluster["objects"]


def scaled_object(model: dict, objects: list[dict]) -> dict:
    return next(
        o
        for o in kind(objects, "ScaledObject")
        if o["metadata"]["labels"]["inference.blueprints/model"] == model["name"]
    )


def service_monitor(model: dict, objects: list[dict]) -> dict:
    return next(
        o
        for o in kind(objects, "ServiceMonitor")
        if o["spec"]["selector"]["matchLabels"].get("app.kubernetes.io/name") == model["names"]["service"]
    )


@contextlib.contextmanager
def wired(cp, dp, address: str, replicas: int):
    """Apply the model's KEDA objects beside the running data plane ``dp`` (its target at ``replicas``), with
    Prometheus scraping the router; yields (ScaledObject, ServiceMonitor, Prometheus)."""
    model, objects, ns = dp.model, dp.objects, dp.namespace
    scaled = scaled_object(model, objects)
    target = stand_in(scaled["spec"]["scaleTargetRef"], ns)
    target["spec"]["replicas"] = replicas
    secrets = [o for o in kind(objects, "Secret") if o["metadata"]["name"] == TOKEN_SECRET]
    apply(cp, [target, *secrets, *kind(objects, "TriggerAuthentication")])
    token = until(
        lambda: (get(cp, "-n", ns, "get", "secret", TOKEN_SECRET).get("data") or {}).get("token"),
        60,
        "the token controller to fill the rendered metrics-reader token Secret",
    )
    monitor = service_monitor(model, objects)
    prom = Prometheus(cp, address)
    prom.scrape_service_monitor(monitor, f"127.0.0.1:{dp.metrics_port}", base64.b64decode(token).decode())
    prom.launch().ready()
    try:
        apply(cp, [scaled])
        yield scaled, monitor, prom
    finally:
        prom.stop()
        cp.kubectl("-n", ns, "delete", "scaledobject", scaled["metadata"]["name"], "--wait=true", "--timeout=60s")
        cp.kubectl("-n", ns, "delete", "deployment", target["metadata"]["name"], "--ignore-not-found")
