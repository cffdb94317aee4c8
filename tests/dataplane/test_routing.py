"""Cache-aware routing and the metrics our autoscaling and alerts read, through the real llm-d router.

For every model of every example site that runs the router (chat, rag, batch, the AI grid's three
classes, both sovereign-burst clusters) the router runs with the model's rendered scheduler config,
unchanged, over four llm-d-inference-sim engines:

* conversations that share a long prefix land on the endpoint that served their first turn (the
  share is compared with the same traffic under a random picker, and the share collapses when the
  prefix scorer is taken out of the config: ``test_affinity_needs_the_prefix_scorer``);
* every metric name and label the site's ScaledObjects and PrometheusRules query for that model is
  on the router's or the engines' /metrics with the values the queries filter on.
"""

from __future__ import annotations

import asyncio
import copy

import pytest

from .conftest import routed_models
from .harness import DataPlane
from .promql import SCRAPE_LABELS, Selector, parse_exposition, selectors
from .traffic import CHAT_PATH, chat_body, prefix_affinity

SITES = ("example-chat", "example-rag", "example-batch", "example-ai-grid", "example-sovereign-burst")
MODELS = [(site, host, m, objs) for site in SITES for host, m, objs in routed_models(site)]
IDS = [f"{site}/{host}/{m['name']}" for site, host, m, _ in MODELS]
ENGINES = 4


def roles(model: dict) -> dict:
    """The endpoints a model's pool has: aggregated engines, or for a P/D plan (the chat example, the grid's 27B)
    prefill engines beside its decode engines, which the router's decode profile scores by prefix."""
    return {"prefill": 2, "decode": ENGINES} if model["disaggregated"] else {"both": ENGINES}


FAST_ENGINE = ["--time-to-first-token", "20ms", "--inter-token-latency", "2ms", "--max-num-seqs", "16"]
AFFINITY_MIN = 0.8  # rendered config: at least this share of follow-ups on the holding endpoint
RANDOM_MAX = 0.5  # a random picker over 4 endpoints lands ~25 % there

# Engine metrics our rules query that llm-d-inference-sim v0.10.2 does not publish (it plays no
# speculative decoding and no NIXL transfer; docs/metrics.md of the simulator lists what it
# publishes). They are vLLM 0.33 metric names; this tier cannot show them, and the test fails when
# the set of missing names differs from this one (a rule gained an unplayed metric, or the
# simulator started publishing one).
NOT_PLAYED_BY_THE_SIMULATOR = {
    # vLLM registers the counters vllm:prefix_cache_hits/queries with Python's prometheus_client, which
    # exposes them with the _total suffix; the simulator registers them with Go's client (no suffix
    # added) and only counts them with its KV-cache simulation on.
    "vllm:prefix_cache_hits_total": "the simulator names it vllm:prefix_cache_hits (no _total)",
    "vllm:prefix_cache_queries_total": "the simulator names it vllm:prefix_cache_queries (no _total)",
    "vllm:spec_decode_num_accepted_tokens_total": "speculative decoding is not simulated",
    "vllm:spec_decode_num_draft_tokens_total": "speculative decoding is not simulated",
    "vllm:nixl_xfer_time_seconds_bucket": "NIXL transfers are not simulated",
    "vllm:nixl_bytes_transferred_sum": "NIXL transfers are not simulated",
}


def remove_prefix_scorer(config: dict) -> dict:
    cfg = copy.deepcopy(config)
    cfg["plugins"] = [p for p in cfg["plugins"] if p["type"] != "prefix-cache-scorer"]
    for prof in cfg["schedulingProfiles"]:
        prof["plugins"] = [p for p in prof["plugins"] if p["pluginRef"] != "prefix-cache-scorer"]
    return cfg


def random_picker(config: dict) -> dict:
    """The same config with every scorer and the max-score picker replaced by llm-d's random picker."""
    cfg = copy.deepcopy(config)
    cfg["plugins"] = [{"type": "random-picker"}, {"type": "single-profile-handler"}]
    cfg["schedulingProfiles"] = [{"name": "default", "plugins": [{"pluginRef": "random-picker"}]}]
    return cfg


def _run(dp: DataPlane, objectives: list[str]) -> dict:
    async def go():
        figures = await prefix_affinity(dp)
        # one request per objective, so that every per-priority series the triggers read exists
        async with dp.gateway() as gw:
            for name in objectives:
                r = await gw.post(
                    CHAT_PATH,
                    chat_body(dp.model["served_name"], "objective probe", name),
                    {dp.model["scheduler"]["objective_header"]: name},
                )
                assert r.status == 200, (name, r.status, r.body[:200])
        return figures

    figures = asyncio.run(go())
    figures["epp"] = parse_exposition(dp.epp_metrics())
    figures["engines"] = [parse_exposition(ep.metrics()) for ep in dp.endpoints]
    return figures


@pytest.fixture(scope="module", params=range(len(MODELS)), ids=IDS)
def routed(request, dp_cluster, tmp_path_factory):
    site, host, model, objects = MODELS[request.param]
    work = tmp_path_factory.mktemp(f"dp-{model['name']}")
    with DataPlane(dp_cluster, work, model, objects, roles(model), sim_args=FAST_ENGINE) as dp:
        figures = _run(dp, [o["name"] for o in model["scheduler"]["objectives"]])
        figures["namespace"] = dp.namespace
    return site, host, model, objects, figures


@pytest.fixture(scope="module")
def random_share(dp_cluster, tmp_path_factory):
    site, host, model, objects = MODELS[0]
    work = tmp_path_factory.mktemp("dp-random")
    cfg = random_picker(model["scheduler"]["config"])
    with DataPlane(dp_cluster, work, model, objects, roles(model), config=cfg, sim_args=FAST_ENGINE) as dp:
        return asyncio.run(prefix_affinity(dp))["share"]


def test_conversations_stay_on_the_endpoint_that_holds_their_prefix(routed, random_share):
    site, host, model, _, figures = routed
    assert figures["statuses"] == {200: figures["requests"]}, figures["statuses"]
    assert random_share <= RANDOM_MAX, (
        f"a random picker kept {random_share:.0%} on the holder: the traffic is not spread"
    )
    assert figures["share"] >= AFFINITY_MIN, (
        f"{site}/{model['name']}: {figures['share']:.0%} of follow-up turns on the endpoint holding the prefix "
        f"(random picker: {random_share:.0%})"
    )


def test_affinity_needs_the_prefix_scorer(dp_cluster, tmp_path_factory):
    """The affinity above is the prefix scorer's doing: without it the same traffic spreads."""
    site, host, model, objects = MODELS[0]
    cfg = remove_prefix_scorer(model["scheduler"]["config"])
    work = tmp_path_factory.mktemp("dp-noprefix")
    with DataPlane(dp_cluster, work, model, objects, roles(model), config=cfg, sim_args=FAST_ENGINE) as dp:
        share = asyncio.run(prefix_affinity(dp))["share"]
    assert share < AFFINITY_MIN, f"{share:.0%} stayed on the holder without the prefix scorer"


def _queries(model: dict, objects: list[dict]) -> list[tuple[str, str]]:
    """(where, PromQL) of every ScaledObject trigger and PrometheusRule rule of this model."""
    out = []
    for o in objects:
        labels = o["metadata"].get("labels") or {}
        if labels.get("inference.blueprints/model") != model["name"]:
            continue
        if o["kind"] == "ScaledObject":
            out += [
                (f"ScaledObject {o['metadata']['name']}/{t['name']}", t["metadata"]["query"])
                for t in o["spec"]["triggers"]
            ]
        if o["kind"] == "PrometheusRule":
            out += [
                (f"PrometheusRule {o['metadata']['name']}/{r['alert']}", r["expr"])
                for g in o["spec"]["groups"]
                for r in g["rules"]
            ]
    return out


def test_every_queried_metric_and_label_is_published(routed):
    site, host, model, objects, figures = routed
    queries = _queries(model, objects)
    assert queries, f"{model['name']}: no ScaledObject or PrometheusRule found"
    scrape = {"namespace": figures["namespace"]}
    missing, unplayed = [], set()
    for where, expr in queries:
        for sel in selectors(expr):
            names = {sel.metric}
            pages = figures["engines"] if sel.metric.startswith("vllm:") else [figures["epp"]]
            found = any(sel.matches(s, scrape) for page in pages for s in page if s.name in names)
            if found:
                continue
            if sel.metric in NOT_PLAYED_BY_THE_SIMULATOR:
                unplayed.add(sel.metric)
                continue
            have = sorted(
                {
                    tuple(sorted(k for k in s.labels if k not in SCRAPE_LABELS))
                    for p in pages
                    for s in p
                    if s.name == sel.metric
                }
            )
            missing.append(f"{where}: {sel} not published (series of that name carry labels {have or 'none'})")
    assert not missing, "\n".join(missing)
    # the check can fail: the first router selector with a label value nobody publishes is not found
    sel = next(s for _, e in queries for s in selectors(e) if s.metric.startswith("llm_d_epp_") and s.matchers)
    wrong = Selector(sel.metric, ((sel.matchers[0][0], "=", "no-such-value"), *sel.matchers[1:]))
    assert not any(wrong.matches(s, scrape) for s in figures["epp"]), wrong
    queried = {sel.metric for _, expr in queries for sel in selectors(expr)}
    assert unplayed == queried & set(NOT_PLAYED_BY_THE_SIMULATOR), unplayed
