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


def model_and_objects(site_name: str, host: str, extra_vars: dict | None = None) -> tuple[dict, list[dict]]:
    cluster = site(site_name, extra_vars)[host]
    model = next(m for m in cluster["intent"]["serving"]["models"] if m["scheduler"])
    return model, cluster["objects"]


def scaled_object(model: dict, objects: list[dict]) -> dict:
    """The model's main ScaledObject."""
    return scaled_objects(model, objects)[0]


def service_monitor(model: dict, objects: list[dict]) -> dict:
    return next(
        o
        for o in kind(objects, "ServiceMonitor")
        if o["spec"]["selector"]["matchLabels"].get("app.kubernetes.io/name") == model["names"]["service"]
    )


def scaled_objects(model: dict, objects: list[dict]) -> list[dict]:
    """The model's ScaledObjects: its main pool's first, then the prefill pool's of a disaggregated model."""
    mine = [
        o
        for o in kind(objects, "ScaledObject")
        if o["metadata"]["labels"]["inference.blueprints/model"] == model["name"]
    ]
    return sorted(mine, key=lambda o: o["metadata"]["name"] != model["names"]["scaledobject"])


def llmisvc_template(model: dict, objects: list[dict]) -> dict:
    svc = next(o for o in kind(objects, "LLMInferenceService") if o["metadata"]["name"] == model["names"]["service"])
    return svc["spec"]["template"]


@contextlib.contextmanager
def wired(cp, dp, address: str, replicas: int | dict, *, placed: bool = False):
    """Apply the model's KEDA objects beside the running data plane ``dp``, each target a stand-in at
    ``replicas`` (one count, or {ScaledObject name: count}), with Prometheus scraping the router; yields (the main
    ScaledObject, ServiceMonitor, Prometheus). ``placed``: the stand-ins' pods ask for what KServe's would
    (resources, tolerations), so the real scheduler places them and kwok starts them."""
    model, objects, ns = dp.model, dp.objects, dp.namespace
    every = scaled_objects(model, objects)
    template = llmisvc_template(model, objects) if placed else None
    targets = []
    for so in every:
        target = stand_in(so["spec"]["scaleTargetRef"], ns, template)
        count = replicas if isinstance(replicas, int) else replicas[so["metadata"]["name"]]
        target["spec"]["replicas"] = count
        targets.append(target)
    secrets = [o for o in kind(objects, "Secret") if o["metadata"]["name"] == TOKEN_SECRET]
    apply(cp, [*targets, *secrets, *kind(objects, "TriggerAuthentication")])
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
        apply(cp, every)
        yield every[0], monitor, prom
    finally:
        prom.stop()
        for so in every:
            cp.kubectl("-n", ns, "delete", "scaledobject", so["metadata"]["name"], "--wait=true", "--timeout=60s")
        for t in targets:
            cp.kubectl("-n", ns, "delete", t["kind"].lower(), t["metadata"]["name"], "--ignore-not-found")
