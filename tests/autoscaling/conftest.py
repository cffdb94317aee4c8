"""One control plane for tests/autoscaling, with kube-controller-manager's HPA controller (kcp --hpa), the KEDA
operator and KEDA's metrics API server on its aggregation layer running beside it (keda_operator.py). The
operator resolves the Thanos querier's Service name to the loopback address where a test starts Prometheus
(prometheus_server.py); the KEDA binary comes from ``make keda``, Prometheus from ``make prometheus``, both run
first by ``make pytest-integration`` (a missing one fails the test with the command to run, never a skip)."""

from __future__ import annotations

import functools
import json
import os

import pytest
from controlplane.cluster import DEFAULT_PROFILE

from .keda_operator import KedaAdapter, KedaOperator
from .prometheus_server import THANOS, loopback_address

PLANE = "autoscaling"


def site(name: str, extra_vars: dict | None = None) -> dict:
    """{host: {"intent": ..., "objects": rendered serving objects}} of an example inventory, with the user's
    ``extra_vars`` on top (what ``-e`` gives ansible-playbook)."""
    return _site(name, json.dumps(extra_vars or {}, sort_keys=True))


@functools.cache
def _site(name: str, extra_json: str) -> dict:
    from ansible_collections.inference.blueprints.plugins.module_utils import cli
    from ansible_collections.inference.blueprints.plugins.plugin_utils import render

    from tests.serving_helpers import INVENTORIES

    before = os.environ.pop("K8S_AUTH_KUBECONFIG", None)
    try:
        intents = cli.site_intents(str(INVENTORIES / name), None, json.loads(extra_json) or None)
    finally:
        if before is not None:
            os.environ["K8S_AUTH_KUBECONFIG"] = before
    return {
        h: {"intent": i, "objects": list(render.render_components(i["stages"]["serving"], i))}
        for h, i in intents.items()
    }


@pytest.fixture(scope="package")
def autoscaling(cluster_factory):
    cp = cluster_factory(DEFAULT_PROFILE, name=PLANE, kserve=False, hpa=True)
    # KEDA writes the ScaledObjects' status and makes the HPAs: the plane's status simulator leaves both alone
    for kind in ("ScaledObject", "HorizontalPodAutoscaler"):
        cp.set_real_controller(kind)
    address = loopback_address()
    operator = KedaOperator(cp, hosts={THANOS: address}).launch().ready()
    adapter = KedaAdapter(cp, operator).launch().ready()
    yield {"plane": cp, "operator": operator, "prometheus_address": address}
    adapter.stop()
    operator.stop()
    cluster_factory.release(PLANE)
