"""Fixtures of the data-plane tier: the rendered objects of an example site and its model intents,
and a control plane to hold the pool, the objectives and the endpoint pods the router watches.

The router and engine binaries come from ``make dataplane`` (run first by ``make pytest``,
``make pytest-rest`` and ``make bench``); a missing one fails the test with the command to run
(never a skip).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from .harness import BINARIES, binary

ROOT = Path(__file__).resolve().parents[2]
INVENTORIES = ROOT / "inventories"


@functools.cache
def _site(site: str, extra: str | None = None) -> dict:
    import json

    from ansible_collections.inference.blueprints.plugins.module_utils import cli
    from ansible_collections.inference.blueprints.plugins.plugin_utils import render

    env_before = os.environ.pop("K8S_AUTH_KUBECONFIG", None)
    try:
        intents = cli.site_intents(str(INVENTORIES / site), None, json.loads(extra) if extra else None)
    finally:
        if env_before is not None:
            os.environ["K8S_AUTH_KUBECONFIG"] = env_before
    out = {}
    for host, intent in intents.items():
        objs = list(render.render_components(intent["stages"]["serving"], intent))
        out[host] = {"intent": intent, "objects": objs}
    return out


def site_clusters(site: str, extra_vars: dict | None = None) -> dict:
    """{host: {"intent": ..., "objects": rendered serving objects}} of an example inventory."""
    import json

    return _site(site, json.dumps(extra_vars, sort_keys=True) if extra_vars else None)


def routed_models(site: str, extra_vars: dict | None = None) -> list[tuple[str, dict, list]]:
    """(host, model intent, objects) of every model of the site that runs the llm-d router."""
    out = []
    for host, c in site_clusters(site, extra_vars).items():
        for m in c["intent"]["serving"]["models"]:
            if m["scheduler"]:
                out.append((host, m, c["objects"]))
    return out


def pd_traffic() -> dict:
    """Extra vars that make the planner disaggregate the chat example: its models with 8k-token prompts
    (p95 16k) at 25 req/s (no example site's own traffic needs P/D)."""
    import copy

    import yaml

    base: dict = {}
    for f in sorted((INVENTORIES / "example-chat" / "group_vars" / "all").glob("*.yml")):
        base.update(yaml.safe_load(f.read_text()) or {})
    models = copy.deepcopy(base["models"])
    for m in models:
        m["traffic"].update(prompt_tokens_mean=8000, prompt_tokens_p95=16000, arrival_rate_rps=25)
    return {"models": models}


@pytest.fixture(scope="session")
def dataplane_binaries() -> None:
    for name in BINARIES:
        binary(name)


class RunningCluster:
    """A control plane started by ``make cluster-up`` (its directory: kubeconfig and pki/)."""

    def __init__(self, directory: str):
        from kubernetes import config, dynamic

        self.workdir = Path(directory).resolve()
        self.kubeconfig = str(self.workdir / "kubeconfig")
        self.api_client = config.new_client_from_config(self.kubeconfig)
        self.dynamic = dynamic.DynamicClient(self.api_client)


@pytest.fixture(scope="package")
def dp_cluster(cluster_factory, dataplane_binaries):
    """A control plane of the data-plane tests' own (no KServe controller: they create no
    LLMInferenceService): they put pools, objectives and pods in the examples' serving namespaces, which
    the integration tests converge on the session's shared ``cluster``. With DATAPLANE_CLUSTER_DIR set,
    the one ``make cluster-up`` started there (e.g. .cluster) instead."""
    if os.environ.get("DATAPLANE_CLUSTER_DIR"):
        yield RunningCluster(os.environ["DATAPLANE_CLUSTER_DIR"])
        return
    yield cluster_factory("h100-8x2-rdma", name="dataplane", kserve=False)
    cluster_factory.release("dataplane")  # the package's own plane, stopped when its tests are done
