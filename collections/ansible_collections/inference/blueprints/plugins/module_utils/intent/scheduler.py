# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The llm-d endpoint picker (EPP) configuration of a model, for the router KServe runs.

KServe v0.20.0's scheduler preset runs llm-d-router v0.9.0 and passes
``spec.router.scheduler.config.inline`` to it as ``--config-text``. Before a config is built, its
inputs go through ``router_registry.precheck`` (what the router would refuse, said in terms of
the inventory variable to change). Whether the router loads what is built is decided by the router
itself: tests/dataplane/test_config_loader.py runs its start-up code on every rendered config.
"""

from __future__ import annotations

from .. import router_registry
from .schema import SchemaError

KSERVE_VERSION = "v0.20.0"
ROUTER = router_registry.KSERVE_ROUTER[KSERVE_VERSION]["router"]
CONFIG_API_VERSION = router_registry.router_version_info(ROUTER)["config_api_version"]
OBJECTIVE_API_VERSION = router_registry.router_version_info(ROUTER)["inference_objective"]["api_version"]
OBJECTIVE_HEADER = router_registry.router_version_info(ROUTER)["inference_objective"]["header"]
# Every request header the router reads to schedule, each with its deprecated alias (llm-d-router v0.9.0
# pkg/epp/metadata/consts.go: ObjectiveKey, FlowFairnessIDKey, ModelNameRewriteKey, the SLO keys and their Old*
# names, all still honoured): a front door sets them itself and removes every one a client sent.
ROUTER_HEADERS = (
    "x-llm-d-inference-objective",
    "x-gateway-inference-objective",
    "x-llm-d-inference-fairness-id",
    "x-gateway-inference-fairness-id",
    "x-llm-d-model-name-rewrite",
    "x-gateway-model-name-rewrite",
    "x-llm-d-slo-ttft-ms",
    "x-slo-ttft-ms",
    "x-llm-d-slo-tpot-ms",
    "x-slo-tpot-ms",
)
POOL_GROUP = "inference.networking.k8s.io"


class SchedulerConfigError(SchemaError):
    """Scheduler inputs the router would refuse: bad input, reported like every other (variable, message)."""


def _weight(value):
    number = float(value)
    return int(number) if number.is_integer() else number


def epp_config(
    disaggregated: bool,
    weights: dict,
    non_cached_tokens: int,
    flow: dict | None = None,
    *,
    precheck: bool = True,
) -> dict:
    """The EndpointPickerConfig: prefix-aware and load-aware scoring; with P/D the disagg handler.

    ``weights``: scorer weights {prefix_cache, queue, kv_cache} (0 leaves a scorer out).
    ``flow``: None for the router's default admission, else flow control on with
    {"bands": [{priority, max_requests, tier}] or None, "request_ttl": Go duration or None}: bands
    queue requests by priority (AI grid tiers); without bands each objective's priority gets a band
    of the router's defaults, which is enough for requests to wait in the EPP while the pool has no
    endpoint (a pool that scales to zero). ``request_ttl``: how long a request may wait in the queue.
    ``precheck``: refuse inputs the router would refuse (False only in the tests that show the
    router refusing them too).
    """
    bands = (flow or {}).get("bands")
    request_ttl = (flow or {}).get("request_ttl")
    if precheck:
        problems = router_registry.precheck(weights, bands, request_ttl, non_cached_tokens)
        if problems:
            raise SchedulerConfigError(problems, f"llm-d router {ROUTER} would refuse the scheduler config")
    scorers = [
        (name, _weight(weights[key]))
        for name, key in (
            ("prefix-cache-scorer", "prefix_cache"),
            ("queue-scorer", "queue"),
            ("kv-cache-utilization-scorer", "kv_cache"),
        )
        if float(weights[key]) > 0
    ]
    profile = [{"pluginRef": name, "weight": weight} for name, weight in scorers] + [{"pluginRef": "max-score-picker"}]
    plugins = [{"type": name} for name, dummy in scorers] + [{"type": "max-score-picker"}]
    config: dict = {"apiVersion": CONFIG_API_VERSION, "kind": "EndpointPickerConfig"}
    if flow is not None:
        config["featureGates"] = ["flowControl"]
    if disaggregated:
        # Router v0.9.0 builds plugins in list order: the decider precedes the handler that names it.
        plugins = (
            [{"type": "prefill-filter"}, {"type": "decode-filter"}]
            + plugins
            + [
                {"type": "prefix-based-pd-decider", "parameters": {"nonCachedTokens": int(non_cached_tokens)}},
                {"type": "disagg-profile-handler", "parameters": {"deciders": {"prefill": "prefix-based-pd-decider"}}},
            ]
        )
        profiles = [
            {"name": "prefill", "plugins": [{"pluginRef": "prefill-filter"}, *profile]},
            {"name": "decode", "plugins": [{"pluginRef": "decode-filter"}, *profile]},
        ]
    else:
        plugins.append({"type": "single-profile-handler"})
        profiles = [{"name": "default", "plugins": profile}]
    config["plugins"] = plugins
    config["schedulingProfiles"] = profiles
    if bands:
        config["flowControl"] = {
            "priorityBands": [
                {"priority": int(b["priority"]), "maxRequests": str(int(b["max_requests"]))} for b in bands
            ],
        }
        if request_ttl:
            config["flowControl"]["defaultRequestTTL"] = request_ttl
    return config
