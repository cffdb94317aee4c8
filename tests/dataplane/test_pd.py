"""Prefill/decode disaggregation through the real llm-d router and P/D sidecar.

No example site's traffic makes the planner disaggregate (the chat example runs DP + EP on 2 H100),
so the test plans one: the chat example with 8k-token prompts (p95 16k) at 25 req/s, for which the
planner splits prefill and decode (its decision, asserted below). Its rendered scheduler config
(prefill and decode profiles, the prefix-based P/D decider with the plan's nonCachedTokens) runs
unchanged over two prefill engines and two decode pods; each decode pod is KServe's decode preset:
the llm-d routing sidecar (pd-sidecar, the preset's own command line) in front of the engine.

A request with a long fresh prompt must: be routed by the EPP to a decode pod with the prefill
endpoint it picked in ``x-prefiller-host-port``; be prefilled on that prefill engine (the
simulator counts a request that finished with ``remote_decode``, label finish_reason); be decoded on the decode engine
after the KV transfer (``do_remote_prefill``); and complete with 200.
``test_without_the_decider_nothing_is_prefilled_remotely`` runs the same config without the decider;
``test_the_sidecar_needs_the_v1alpha2_pool`` shows why the platform installs the v1alpha2 pool CRD.
"""

from __future__ import annotations

import asyncio
import copy
import json

import pytest

from .conftest import pd_traffic, routed_models
from .harness import DataPlane
from .promql import parse_exposition
from .traffic import CHAT_PATH, chat_body, conversation_prefix

SITE = "example-chat"
PREFILLER_HEADER = "x-prefiller-host-port"  # llm-d-router v0.9.0 pkg/common/routing/common.go
REQUESTS = 6
ENGINE = ["--time-to-first-token", "30ms", "--inter-token-latency", "2ms", "--kv-cache-transfer-latency", "10ms"]


@pytest.fixture(scope="module")
def pd_model():
    found = [(m, objs) for _, m, objs in routed_models(SITE, pd_traffic()) if m["disaggregated"]]
    assert found, "the planner no longer disaggregates the chat example with 8k prompts at 25 req/s"
    return found[0]


def without_decider(config: dict) -> dict:
    cfg = copy.deepcopy(config)
    for p in cfg["plugins"]:
        if p["type"] == "disagg-profile-handler":
            p.pop("parameters", None)
    cfg["plugins"] = [p for p in cfg["plugins"] if p["type"] != "prefix-based-pd-decider"]
    return cfg


def _finished(ep, reason: str) -> float:
    return sum(
        s.value
        for s in parse_exposition(ep.metrics())
        if s.name == "vllm:request_success_total" and s.labels.get("finish_reason") == reason
    )


async def _requests(dp) -> list:
    model = dp.model["served_name"]
    async with dp.gateway() as gw:
        return [
            await gw.post(CHAT_PATH, chat_body(model, conversation_prefix(100 + i), f"question {i}", max_tokens=16))
            for i in range(REQUESTS)
        ]


def pd_path(dp) -> dict:
    replies = asyncio.run(_requests(dp))
    by_addr = {ep.address: ep for ep in dp.endpoints}
    roles = [(by_addr.get(r.endpoint).role if r.endpoint in by_addr else None) for r in replies]
    prefillers = [r.headers.get(PREFILLER_HEADER) for r in replies]
    prefill_roles = [(by_addr[p].role if p in by_addr else None) for p in prefillers]
    prefilled = {ep.pod: _finished(ep, "remote_decode") for ep in dp.endpoints if ep.role == "prefill"}
    decoded = {ep.pod: sum(_finished(ep, r) for r in ("stop", "length")) for ep in dp.endpoints if ep.role == "decode"}
    contents = []
    for r in replies:
        try:
            contents.append(bool(json.loads(r.body)["choices"][0]["message"]["content"]))
        except (ValueError, KeyError, IndexError, TypeError):
            contents.append(False)
    return {
        "statuses": [r.status for r in replies],
        "routed_to": roles,
        "prefill_picked": prefill_roles,
        "prefilled_remotely": sum(prefilled.values()),
        "decoded": sum(decoded.values()),
        "answered": contents,
    }


def test_prefill_and_decode_endpoints_serve_each_request(dp_cluster, tmp_path, pd_model):
    model, objects = pd_model
    with DataPlane(dp_cluster, tmp_path, model, objects, {"prefill": 2, "decode": 2}, sim_args=ENGINE) as dp:
        figures = pd_path(dp)
    assert figures["statuses"] == [200] * REQUESTS, figures
    assert figures["routed_to"] == ["decode"] * REQUESTS, figures
    assert figures["prefill_picked"] == ["prefill"] * REQUESTS, figures
    assert figures["prefilled_remotely"] == REQUESTS, figures
    assert figures["decoded"] == REQUESTS, figures
    assert all(figures["answered"]), figures


def test_without_the_decider_nothing_is_prefilled_remotely(dp_cluster, tmp_path, pd_model):
    model, objects = pd_model
    cfg = without_decider(model["scheduler"]["config"])
    with DataPlane(
        dp_cluster, tmp_path, model, objects, {"prefill": 2, "decode": 2}, config=cfg, sim_args=ENGINE
    ) as dp:
        figures = pd_path(dp)
    assert figures["prefilled_remotely"] == 0, figures


def test_the_sidecar_needs_the_v1alpha2_pool(dp_cluster, tmp_path, pd_model):
    """KServe v0.20.0's decode preset runs the sidecar with SSRF protection on the
    inference.networking.x-k8s.io pool; without that pool (its CRD absent, so KServe creates none) the
    sidecar refuses every prefill target: the platform must install the v1alpha2 CRD for P/D
    (cluster_facts.SERVING_APIS, docs/platform.md)."""
    model, objects = pd_model
    with DataPlane(
        dp_cluster, tmp_path, model, objects, {"prefill": 1, "decode": 1}, sim_args=ENGINE, v1alpha2_pool=False
    ) as dp:
        figures = pd_path(dp)
    assert set(figures["statuses"]) == {403}, figures
    assert figures["prefilled_remotely"] == 0, figures
