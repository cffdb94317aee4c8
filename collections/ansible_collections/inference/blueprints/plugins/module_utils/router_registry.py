# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What each targeted llm-d router (endpoint picker, EPP) version accepts in its configuration.

One place that records, per router release, the EndpointPickerConfig apiVersions, feature gates,
plugin types (with their kind and JSON parameters), the loader's structural rules, the
InferenceObjective API the EPP watches and the metrics endpoint facts, each with the upstream
file it was read from (repository llm-d/llm-d-router unless said otherwise). The facts are
restated in our own words; no upstream code is copied.

``check_epp_config(config, router_version)`` returns every problem the router would refuse (or
silently ignore) in a config, each message starting with the path inside the config.

Parameter type words used below:
  string, int, number, bool, quantity (Kubernetes quantity: int or string), duration (Go duration
  string such as "60s"), string-list, string-map, object (opaque JSON object), list (opaque JSON
  list), pluginref (string naming an entry of ``plugins``); a dict is a nested object whose keys
  are decoded strictly like the parameters themselves.
"""

from __future__ import annotations

import copy
import re

REPO = "llm-d/llm-d-router"
PLUGINS_DIR = "pkg/epp/framework/plugins/"

# Kinds of plugin (the framework interface the plugin implements).
FILTER = "filter"
SCORER = "scorer"
PICKER = "picker"
PROFILE_HANDLER = "profile-handler"
DECIDER = "disagg-decider"
PRE_REQUEST = "pre-request"  # request-control hook, e.g. sets headers after scheduling
DATA_PRODUCER = "data-producer"
DATA_SOURCE = "data-source"
DATA_EXTRACTOR = "data-extractor"
DISCOVERY = "endpoint-discovery"
FAIRNESS = "fairness-policy"
ORDERING = "ordering-policy"
USAGE_LIMIT = "usage-limit-policy"
SATURATION = "saturation-detector"
ADMITTER = "admitter"
PRE_ADMITTER = "pre-admitter"
PARSER = "parser"
RESPONSE_PROCESSOR = "response-processor"
EVICTION_FILTER = "eviction-filter"
EVICTION_ORDERING = "eviction-ordering"
SCREENER = "screener"
SYNCER = "cross-replica-syncer"
TEST_ONLY = "test-only"

# Kinds a scheduling profile makes use of; anything else listed in a profile is skipped by it.
PROFILE_KINDS = (FILTER, SCORER, PICKER)


def _plugin(kinds, src, params=None, *, alias_of=None, deprecated=None, defaults=None, alt_params=None, note=""):
    """One registered plugin type.

    params None means the factory ignores its parameters (anything given is silently dropped);
    a dict is decoded strictly (unknown fields refused). alt_params is a second accepted
    (deprecated) parameter shape.
    """
    return {
        "kinds": tuple(kinds) if isinstance(kinds, (list, tuple)) else (kinds,),
        "params": params,
        "alt_params": alt_params,
        "alias_of": alias_of,
        "deprecated": deprecated,
        "defaults": defaults or {},
        "note": note,
        "source": PLUGINS_DIR + src,
    }


_LABEL_SELECTOR = {"matchLabels": "string-map", "matchExpressions": "list"}
_PICKER_PARAMS = {"maxNumOfEndpoints": "int"}
_METRICS_SOURCE = {"scheme": "string", "path": "string", "insecureSkipVerify": "bool"}
_ENGINE_CONFIG = "list"  # list of {name, queuedRequestsSpec, runningRequestsSpec, kvUsageSpec, ...}
_PRECISE_PREFIX = {
    "tokenProcessorConfig": "object",
    "indexerConfig": "object",
    "kvEventsConfig": "object",
    "speculativeIndexing": "bool",
    "speculativeTTL": "string",
}

# --- llm-d router v0.9.0 (the endpoint picker image KServe v0.20.0's scheduler preset runs) ---
# Registration: cmd/epp/runner/runner.go registerInTreePlugins (tag v0.9.0).
_PLUGINS_V0_9_0 = {
    # scheduling filters
    "label-selector-filter": _plugin(FILTER, "scheduling/filter/bylabel/selector.go", _LABEL_SELECTOR),
    "by-label-selector": _plugin(
        FILTER,
        "scheduling/filter/bylabel/selector.go",
        _LABEL_SELECTOR,
        alias_of="label-selector-filter",
        deprecated="deprecated in v0.9.0, removal planned for v0.11.0",
    ),
    "by-label": _plugin(
        FILTER,
        "scheduling/filter/bylabel/filter.go",
        {"label": "string", "validValues": "string-list", "allowsNoLabel": "bool"},
        deprecated="deprecated in v0.9.0 in favour of label-selector-filter, removal planned for v0.11.0",
    ),
    "decode-filter": _plugin(
        FILTER,
        "scheduling/filter/bylabel/roles.go",
        note="keeps pods whose llm-d.ai/role is decode, prefill-decode, both or encode-prefill-decode, "
        "and pods without the label",
    ),
    "prefill-filter": _plugin(
        FILTER,
        "scheduling/filter/bylabel/roles.go",
        note="keeps pods whose llm-d.ai/role is prefill, encode-prefill, prefill-decode, both or "
        "encode-prefill-decode; pods without the label are dropped",
    ),
    "encode-filter": _plugin(
        FILTER,
        "scheduling/filter/bylabel/roles.go",
        note="keeps pods whose llm-d.ai/role is encode, encode-prefill or encode-prefill-decode",
    ),
    "session-affinity-filter": _plugin(
        (FILTER, RESPONSE_PROCESSOR),
        "scheduling/filter/sessionaffinity/session_affinity.go",
        {"headerName": "string", "profileName": "string"},
    ),
    "prefix-cache-affinity-filter": _plugin(
        FILTER,
        "scheduling/filter/prefixcacheaffinity/plugin.go",
        {
            "affinityThreshold": "number",
            "explorationProbability": "number",
            "maxTTFTPenaltyMs": "number",
            "ttftSource": "string",
            "peakPrefillThroughput": "number",
            "prefixMatchInfoProducerName": "string",
            "latencyPredictionInfoProducerName": "string",
            "inFlightLoadProducerName": "string",
        },
    ),
    "slo-headroom-tier-filter": _plugin(
        FILTER,
        "scheduling/filter/sloheadroomtier/plugin.go",
        {"epsilonExploreNeg": "number", "latencyPredictionInfoProducerName": "string"},
    ),
    "header-based-testing-filter": _plugin(
        (FILTER, TEST_ONLY), "scheduling/test/filter/request_header_based_filter.go"
    ),
    # scorers
    "prefix-cache-scorer": _plugin(
        SCORER,
        "scheduling/scorer/prefix/plugin.go",
        {"prefixMatchInfoProducerName": "string"},
        note="reads the prefix match data produced by approx-prefix-cache-producer (configured by default); "
        "block size and LRU capacity are parameters of that producer, not of the scorer",
    ),
    "queue-scorer": _plugin(SCORER, "scheduling/scorer/queuedepth/queue.go"),
    "kv-cache-utilization-scorer": _plugin(SCORER, "scheduling/scorer/kvcacheutilization/kvcache_utilization.go"),
    "running-requests-size-scorer": _plugin(SCORER, "scheduling/scorer/runningrequests/runningrequest.go"),
    "lora-affinity-scorer": _plugin(SCORER, "scheduling/scorer/loraaffinity/lora_affinity.go"),
    "token-load-scorer": _plugin(
        SCORER,
        "scheduling/scorer/tokenload/token_load.go",
        {"queueThresholdTokens": "int", "inFlightLoadProducerName": "string"},
    ),
    "no-hit-lru-scorer": _plugin(
        (SCORER, PRE_REQUEST),
        "scheduling/scorer/nohitlru/no_hit_lru.go",
        {
            "prefixPluginType": "string",
            "prefixPluginName": "string",
            "lruSize": "int",
            "prefixMatchInfoProducerName": "string",
        },
    ),
    "active-request-scorer": _plugin(
        SCORER,
        "scheduling/scorer/activerequest/active_request.go",
        {
            "requestTimeout": "string",
            "idleThreshold": "int",
            "maxBusyScore": "number",
            "inFlightLoadProducerName": "string",
        },
    ),
    "load-aware-scorer": _plugin(SCORER, "scheduling/scorer/loadaware/load_aware.go", {"threshold": "int"}),
    "session-affinity-scorer": _plugin(
        (SCORER, RESPONSE_PROCESSOR),
        "scheduling/scorer/sessionaffinity/session_affinity.go",
        {"headerName": "string", "profileName": "string"},
    ),
    "context-length-aware": _plugin(
        (SCORER, FILTER),
        "scheduling/scorer/contextlengthaware/context_length_aware.go",
        {"label": "string", "enableFiltering": "bool"},
    ),
    "precise-prefix-cache-scorer": _plugin(
        (SCORER, DATA_PRODUCER, PRE_REQUEST, DATA_EXTRACTOR),
        "scheduling/scorer/preciseprefixcache/precise_prefix_cache.go",
        _PRECISE_PREFIX,
    ),
    "mm-embeddings-cache-scorer": _plugin(
        SCORER, "scheduling/scorer/mmcacheaffinity/scorer.go", {"producerName": "string"}
    ),
    "latency-scorer": _plugin(
        SCORER,
        "scheduling/scorer/latency/plugin.go",
        {
            "ttftWeight": "number",
            "tpotWeight": "number",
            "headroomSelectionStrategy": "string",
            "compositeKVWeight": "number",
            "compositeQueueWeight": "number",
            "compositePrefixWeight": "number",
            "latencyPredictionInfoProducerName": "string",
            "prefixMatchInfoProducerName": "string",
        },
    ),
    # pickers
    "max-score-picker": _plugin(
        PICKER, "scheduling/picker/maxscore/picker.go", _PICKER_PARAMS, defaults={"maxNumOfEndpoints": 1}
    ),
    "random-picker": _plugin(
        PICKER, "scheduling/picker/random/picker.go", _PICKER_PARAMS, defaults={"maxNumOfEndpoints": 1}
    ),
    "weighted-random-picker": _plugin(
        PICKER, "scheduling/picker/weightedrandom/picker.go", _PICKER_PARAMS, defaults={"maxNumOfEndpoints": 1}
    ),
    # profile handlers and P/D deciders
    "single-profile-handler": _plugin(PROFILE_HANDLER, "scheduling/profilehandler/single/single_profile_handler.go"),
    "disagg-profile-handler": _plugin(
        (PROFILE_HANDLER, PRE_REQUEST),
        "scheduling/profilehandler/disagg/disagg_profile_handler.go",
        {
            "profiles": {"decode": "string", "prefill": "string", "encode": "string"},
            "deciders": {"prefill": "pluginref", "encode": "pluginref"},
        },
        alt_params={
            "decodeProfile": "string",
            "prefillProfile": "string",
            "encodeProfile": "string",
            "prefillDeciderPluginName": "pluginref",
            "encodeDeciderPluginName": "pluginref",
            "deciderPluginName": "pluginref",
        },
        defaults={"profiles": {"decode": "decode", "prefill": "prefill", "encode": "encode"}},
        note="runs the decode profile first, then encode and prefill when their decider says so; without "
        "deciders.prefill no request is ever prefilled remotely",
    ),
    "pd-profile-handler": _plugin(
        PROFILE_HANDLER,
        "scheduling/profilehandler/disagg/pd_profile_handler.go",
        {
            "decodeProfile": "string",
            "prefillProfile": "string",
            "prefixPluginType": "string",
            "prefixPluginName": "string",
            "primaryPort": "int",
            "deciderPluginName": "pluginref",
            "prefixMatchInfoProducerName": "string",
        },
        deprecated="deprecated since v0.7.0 in favour of disagg-profile-handler",
    ),
    "disagg-headers-handler": _plugin(
        PRE_REQUEST,
        "scheduling/profilehandler/disagg/disagg_headers_handler.go",
        {"prefillProfile": "string", "encodeProfile": "string"},
        deprecated="deprecated in v0.9.0: disagg-profile-handler sets the routing headers itself",
        note="not a profile handler: a pre-request hook that writes the prefill/encode target headers",
    ),
    "prefill-header-handler": _plugin(
        PRE_REQUEST,
        "scheduling/profilehandler/disagg/disagg_headers_handler.go",
        {"prefillProfile": "string", "encodeProfile": "string"},
        alias_of="disagg-headers-handler",
        deprecated="deprecated in v0.9.0",
    ),
    "data-parallel-profile-handler": _plugin(
        PROFILE_HANDLER, "scheduling/profilehandler/dataparallel/dp_profile_handler.go", {"primaryPort": "int"}
    ),
    "always-disagg-pd-decider": _plugin(DECIDER, "scheduling/profilehandler/disagg/always_disagg_pd_decider.go"),
    "prefix-based-pd-decider": _plugin(
        DECIDER,
        "scheduling/profilehandler/disagg/prefix_based_pd_decider.go",
        {"nonCachedTokens": "int"},
        defaults={"nonCachedTokens": 0},
        note="nonCachedTokens 0 (the default) never disaggregates; negative is refused",
    ),
    "always-disagg-multimodal-decider": _plugin(
        DECIDER, "scheduling/profilehandler/disagg/always_disagg_mm_decider.go"
    ),
    # request data producers (the ones marked default are added automatically when a consumer needs them)
    "approx-prefix-cache-producer": _plugin(
        (DATA_PRODUCER, PRE_REQUEST),
        "requestcontrol/dataproducer/approximateprefix/types.go",
        {
            "autoTune": "bool",
            "blockSizeTokens": "int",
            "blockSize": "int",
            "maxPrefixBlocksToMatch": "int",
            "maxPrefixTokensToMatch": "int",
            "lruCapacityPerServer": "int",
        },
        defaults={
            "autoTune": True,
            "blockSizeTokens": 16,
            "maxPrefixBlocksToMatch": 2048,
            "maxPrefixTokensToMatch": 131072,
            "lruCapacityPerServer": 31250,
        },
        note="default producer of prefix match info",
    ),
    "inflight-load-producer": _plugin(
        (DATA_PRODUCER, PRE_REQUEST, DATA_EXTRACTOR),
        "requestcontrol/dataproducer/inflightload/producer.go",
        {"addEstimatedOutputTokens": "bool", "prefixMatchInfoProducerName": "string"},
        note="default producer of in-flight load",
    ),
    "mm-embeddings-cache-producer": _plugin(
        (DATA_PRODUCER, PRE_REQUEST, DATA_EXTRACTOR),
        "requestcontrol/dataproducer/multimodal/producer.go",
        {"cacheSizeInMBPerServer": "int"},
    ),
    "predicted-latency-producer": _plugin(
        (DATA_PRODUCER, PRE_REQUEST, RESPONSE_PROCESSOR),
        "requestcontrol/dataproducer/predictedlatency/plugin.go",
        {
            "samplingMean": "number",
            "maxDecodeTokenSamplesForPrediction": "int",
            "sloBufferFactor": "number",
            "contextTTL": "int",  # a Go time.Duration field: JSON nanoseconds, not "60s"
            "streamingMode": "bool",
            "endpointRoleLabel": "string",
            "predictInProduce": "bool",
            "prefixMatchInfoProducerName": "string",
        },
    ),
    "token-producer": _plugin(
        DATA_PRODUCER,
        "requestcontrol/dataproducer/tokenizer/tokenizer.go",
        {"udsTokenizerConfig": "object", "vllm": "object", "estimate": "object", "modelName": "string"},
        note="default producer of the tokenized prompt",
    ),
    "tokenizer": _plugin(
        DATA_PRODUCER,
        "requestcontrol/dataproducer/tokenizer/tokenizer.go",
        {"udsTokenizerConfig": "object", "vllm": "object", "estimate": "object", "modelName": "string"},
        alias_of="token-producer",
        deprecated="deprecated in v0.9.0, removal planned for v0.11.0",
    ),
    "session-id-producer": _plugin(
        DATA_PRODUCER,
        "requestcontrol/dataproducer/sessionid/producer.go",
        {"headerName": "string", "cookieName": "string"},
    ),
    "precise-prefix-cache-producer": _plugin(
        (DATA_PRODUCER, PRE_REQUEST, DATA_EXTRACTOR),
        "requestcontrol/dataproducer/preciseprefixcache/producer.go",
        _PRECISE_PREFIX,
    ),
    # admission
    "latency-slo-admitter": _plugin(
        ADMITTER,
        "requestcontrol/admitter/latencyslo/plugin.go",
        {"latencyPredictionInfoProducerName": "string"},
    ),
    "probabilistic-admitter": _plugin(
        ADMITTER,
        "requestcontrol/admitter/probabilisticadmitter/plugin.go",
        {"queueDepthThreshold": "int", "kvCacheUtilThreshold": "number", "power": "number", "k": "number"},
    ),
    "agent-identity": _plugin(
        PRE_ADMITTER,
        "requestcontrol/preadmitter/agentidentity/agent_identity.go",
        {"additionalSessionHeaders": "string-list"},
    ),
    "request-attribute-reporter": _plugin(
        RESPONSE_PROCESSOR,
        "requestcontrol/requestattributereporter/plugin.go",
        {"attributes": "list"},
    ),
    "destination-endpoint-served-verifier": _plugin(
        (RESPONSE_PROCESSOR, TEST_ONLY),
        "requestcontrol/test/responsereceived/destination_endpoint_served_verifier.go",
    ),
    # data layer
    "metrics-data-source": _plugin(DATA_SOURCE, "datalayer/source/metrics/datasource.go", _METRICS_SOURCE),
    "core-metrics-extractor": _plugin(
        DATA_EXTRACTOR,
        "datalayer/extractor/metrics/factories.go",
        {"engineLabelKey": "string", "defaultEngine": "string", "engineConfigs": _ENGINE_CONFIG},
    ),
    "models-data-source": _plugin(DATA_SOURCE, "datalayer/source/models/datasource.go", _METRICS_SOURCE),
    "models-data-extractor": _plugin(DATA_EXTRACTOR, "datalayer/extractor/models/extractor.go"),
    "k8s-notification-source": _plugin(
        DATA_SOURCE,
        "datalayer/source/notifications/factory.go",
        {"group": "string", "version": "string", "kind": "string"},
    ),
    "endpoint-notification-source": _plugin(DATA_SOURCE, "datalayer/source/notifications/endpoint_datasource.go"),
    "file-discovery": _plugin(DISCOVERY, "datalayer/discovery/file/plugin.go", {"path": "string", "watchFile": "bool"}),
    # flow control
    "global-strict-fairness-policy": _plugin(FAIRNESS, "flowcontrol/fairness/globalstrict/global_strict.go"),
    "round-robin-fairness-policy": _plugin(FAIRNESS, "flowcontrol/fairness/roundrobin/roundrobin.go"),
    "program-aware-fairness": _plugin(
        (FAIRNESS, PRE_REQUEST, RESPONSE_PROCESSOR),
        "flowcontrol/fairness/program-aware/plugin.go",
        {
            "strategy": "string",
            "evictionTtlSeconds": "number",
            "evictionSweepSeconds": "number",
            "lasWeightService": "number",
            "lasWeightHeadWait": "number",
            "lasDecayFactor": "number",
            "lasHalfLifeSeconds": "number",
        },
    ),
    "fcfs-ordering-policy": _plugin(ORDERING, "flowcontrol/ordering/fcfs/fcfs.go"),
    "edf-ordering-policy": _plugin(ORDERING, "flowcontrol/ordering/edf/edf.go"),
    "slo-deadline-ordering-policy": _plugin(ORDERING, "flowcontrol/ordering/slodeadline/slo_deadline.go"),
    "static-usage-limit-policy": _plugin(
        USAGE_LIMIT, "flowcontrol/usagelimits/usagelimitpolicy.go", {"threshold": "number"}, defaults={"threshold": 1.0}
    ),
    "utilization-detector": _plugin(
        (SATURATION, FILTER),
        "flowcontrol/saturationdetector/utilization/config.go",
        {
            "queueDepthThreshold": "int",
            "kvCacheUtilThreshold": "number",
            "metricsStalenessThreshold": "duration",
            "headroom": "number",
        },
        defaults={
            "queueDepthThreshold": 5,
            "kvCacheUtilThreshold": 0.8,
            "metricsStalenessThreshold": "200ms",
            "headroom": 0.0,
        },
    ),
    "concurrency-detector": _plugin(
        (SATURATION, FILTER),
        "flowcontrol/saturationdetector/concurrency/config.go",
        {
            "maxConcurrency": "int",
            "headroom": "number",
            "concurrencyMode": "string",
            "maxTokenConcurrency": "int",
            "inFlightLoadProducerName": "string",
        },
    ),
    # request parsers
    "openai-parser": _plugin(PARSER, "requesthandling/parsers/openai/openai.go"),
    "anthropic-parser": _plugin(PARSER, "requesthandling/parsers/anthropic/anthropic.go"),
    "vllmgrpc-parser": _plugin(PARSER, "requesthandling/parsers/vllmgrpc/vllmgrpc.go"),
    "vllmhttp-parser": _plugin(PARSER, "requesthandling/parsers/vllmhttp/vllmhttp.go"),
    "passthrough-parser": _plugin(PARSER, "requesthandling/parsers/passthrough/passthrough.go"),
    "vertexai-parser": _plugin(PARSER, "requesthandling/parsers/vertexai/vertexai.go"),
}


def _v0_10_0_plugins():
    plugins = copy.deepcopy(_PLUGINS_V0_9_0)
    # Parameters added in v0.10.0.
    plugins["prefix-cache-scorer"]["params"].update({"matchLengthScaleTokens": "int", "matchLengthWeight": "number"})
    plugins["prefix-based-pd-decider"]["params"]["promptTokens"] = "int"
    plugins["disagg-profile-handler"]["params"]["stageOrder"] = "string"  # decode-first | prefill-first
    plugins["disagg-profile-handler"]["alt_params"]["stageOrder"] = "string"
    plugins["metrics-data-source"]["params"] = dict(
        _METRICS_SOURCE,
        port="int",
        interval="string",
        caCertPath="string",
        clientCertPath="string",
        clientKeyPath="string",
    )
    plugins["models-data-source"]["params"] = dict(
        _METRICS_SOURCE, interval="string", caCertPath="string", clientCertPath="string", clientKeyPath="string"
    )
    plugins["inflight-load-producer"]["params"].update(
        {"maxEstimatedOutputTokens": "int", "outputRatio": "number", "syncCrossReplicaState": "bool"}
    )
    plugins["predicted-latency-producer"]["params"].update(
        {
            "encoderCacheMatchInfoProducerName": "string",
            "inFlightLoadProducerName": "string",
            "minTpotSlo": "number",
            "useEncoderCacheFeatures": "bool",
        }
    )
    plugins["precise-prefix-cache-producer"]["params"]["blockSizeTokens"] = "int"
    session = {"encodedEndpointHeaderConfig": "object", "sessionIdConfig": "object", "strategy": "string"}
    plugins["session-affinity-filter"]["params"] = dict(session, profileName="string")
    plugins["session-affinity-scorer"]["params"] = dict(session, profileName="string")
    plugins["agent-identity"]["source"] = PLUGINS_DIR + "requestcontrol/requestheader/agentidentity/agent_identity.go"
    plugins["pd-profile-handler"]["deprecated"] = (
        "deprecated since v0.7.0 (registration metadata names v0.9.0 for removal; still registered)"
    )
    plugins["disagg-headers-handler"]["deprecated"] = "deprecated in v0.9.0, removal planned for v0.11.0"
    plugins["prefill-header-handler"]["deprecated"] = "deprecated in v0.9.0, removal planned for v0.11.0"
    # Types registered for the first time in v0.10.0 (parameters not modelled: None means "not checked").
    new = {
        "disaggregatedset-rollout-screener": (SCREENER, "requestcontrol/screener/disaggregatedsetrollout/plugin.go"),
        "endpoint-attribute-filter": (FILTER, "scheduling/filter/endpointattribute/filter.go"),
        "topology-affinity-filter": (FILTER, "scheduling/filter/topologyaffinity/filter.go"),
        "utilization-filter": (FILTER, "scheduling/filter/utilization/filter.go"),
        "header-label-affinity-scorer": (SCORER, "scheduling/scorer/headerlabelaffinity/plugin.go"),
        "topology-extractor": (DATA_EXTRACTOR, "datalayer/attribute/topology/data_types.go"),
        "dcgm-data-source": (DATA_SOURCE, "datalayer/source/dcgm/datasource.go"),
        "dcgm-extractor": (DATA_EXTRACTOR, "datalayer/attribute/gpu/data_types.go"),
        "header-profile-handler": (
            PROFILE_HANDLER,
            "scheduling/profilehandler/headerprofile/header_profile_handler.go",
        ),
        "endpoint-attribute-scorer": (SCORER, "scheduling/scorer/endpointattribute/endpointattribute.go"),
        "topology-affinity-scorer": (SCORER, "scheduling/scorer/topologyaffinity/scorer.go"),
        "burst-prefix-cache-producer": (DATA_PRODUCER, "requestcontrol/dataproducer/burstprefix/types.go"),
        "p2p-source-producer": (DATA_PRODUCER, "requestcontrol/dataproducer/p2psource/producer.go"),
        "multicluster-session-affinity-filter": (FILTER, "scheduling/filter/sessionaffinity/multicluster.go"),
        "multicluster-queue-scorer": (SCORER, "scheduling/scorer/queuedepth/multicluster.go"),
        "multicluster-kv-cache-utilization-scorer": (SCORER, "scheduling/scorer/kvcacheutilization/multicluster.go"),
        "multicluster-prefix-cache-scorer": (SCORER, "scheduling/scorer/prefix/multicluster.go"),
        "multicluster-approx-prefix-cache-producer": (
            DATA_PRODUCER,
            "requestcontrol/dataproducer/approximateprefix/multicluster.go",
        ),
        "sheddable-eviction-filter": (EVICTION_FILTER, "flowcontrol/eviction/filtering/sheddable.go"),
        "priority-then-time-eviction-order-policy": (
            EVICTION_ORDERING,
            "flowcontrol/eviction/ordering/priority_time.go",
        ),
        "priority-holdback-policy": (USAGE_LIMIT, "flowcontrol/usagelimits/priorityholdback/priority_holdback.go"),
        "soft-reflective-ceiling-policy": (USAGE_LIMIT, "flowcontrol/usagelimits/softreflectiveceiling/policy.go"),
        "multicluster-metrics-data-source": (DATA_SOURCE, "datalayer/source/metrics/multicluster.go"),
        "multicluster-metrics-extractor": (DATA_EXTRACTOR, "datalayer/extractor/metrics/multicluster.go"),
        "multicluster-file-discovery": (DISCOVERY, "datalayer/discovery/file/multicluster.go"),
    }
    for name, (kind, src) in new.items():
        plugins[name] = _plugin(kind, src, note="parameters not modelled here; not checked")
        plugins[name]["params"] = "unchecked"
    plugins["header-profile-handler"]["params"] = {"headerName": "string", "defaultProfile": "string"}
    return plugins


_TOP_LEVEL_V0_9_0 = {
    "apiVersion": "string",
    "kind": "string",
    "featureGates": "string-list",
    "plugins": "list",
    "schedulingProfiles": "list",
    "dataLayer": "object",
    "flowControl": "object",
    "requestHandler": "object",
    "saturationDetector": "object",  # deprecated: use flowControl.saturationDetector
    "parser": "object",  # deprecated: use requestHandler.parsers
}

_FLOW_CONTROL_V0_9_0 = {
    "maxBytes": "quantity",
    "maxRequests": "quantity",
    "defaultRequestTTL": "duration",
    "defaultPriorityBand": "object",
    "defaultNegativePriorityBand": "object",
    "priorityBands": "list",
    "usageLimitPolicyPluginRef": "string",
    "saturationDetector": "object",
}
_PRIORITY_BAND = {
    "priority": "int",
    "maxBytes": "quantity",
    "maxRequests": "quantity",
    "fairnessPolicyRef": "string",
    "orderingPolicyRef": "string",
}
_DATA_LAYER_V0_9_0 = {"injectDefaults": "bool", "sources": "list", "discovery": "object"}

_METRICS = {
    "port": 9090,
    "path": "/metrics",
    "scheme": "http",
    "auth_flag": "--metrics-endpoint-auth",
    "auth_default": True,
    "auth": "bearer token checked by TokenReview, then a SubjectAccessReview for the non-resource URL "
    "/metrics with verb get (controller-runtime filters.WithAuthenticationAndAuthorization); the scraper's "
    "ServiceAccount needs a ClusterRole with nonResourceURLs [/metrics] verbs [get], and the EPP's own "
    "ServiceAccount needs system:auth-delegator (KServe v0.20.0 binds it: <ns>-<name>-epp-auth-rb)",
    "source": "pkg/epp/server/options.go (MetricsPort 9090, MetricsEndpointAuth true); cmd/epp/runner/runner.go "
    "(metricsserver.Options FilterProvider)",
}

ROUTER_VERSIONS = {
    "v0.9.0": {
        "source": f"{REPO} tag v0.9.0 (commit 5f4e762f341a5196393ce79f8a57c3e1900c4a6b)",
        "gaie_module": "sigs.k8s.io/gateway-api-inference-extension v1.5.0 (go.mod)",
        "config_api_versions": {
            "llm-d.ai/v1alpha1": None,
            "inference.networking.x-k8s.io/v1alpha1": "deprecated; the loader logs a deprecation and accepts it",
        },
        "config_api_source": "apix/config/v1alpha1/zz_generated.register.go; pkg/epp/config/loader/configloader.go",
        "config_kind": "EndpointPickerConfig",
        "feature_gates": {"dataLayer": False, "flowControl": False},
        "feature_gate_values": False,  # only bare names; "name=false" is refused as unknown
        "feature_gates_source": "cmd/epp/runner/runner.go (loader.RegisterFeatureGate); "
        "pkg/epp/datalayer/factory.go; pkg/epp/flowcontrol/config.go",
        "plugins": _PLUGINS_V0_9_0,
        "plugins_source": "cmd/epp/runner/runner.go registerInTreePlugins",
        "top_level": _TOP_LEVEL_V0_9_0,
        "flow_control": _FLOW_CONTROL_V0_9_0,
        "data_layer": _DATA_LAYER_V0_9_0,
        "plugin_order_matters": True,  # plugins are built in list order; a decider must precede its handler
        "rules_source": "pkg/epp/config/loader/{configloader.go,validation.go,defaults.go,flowcontrol.go}; "
        "pkg/epp/scheduling/scheduler_profile.go (AddPlugins)",
        "inference_objective": {
            "api_version": "llm-d.ai/v1alpha2",
            "legacy_api_version": "inference.networking.x-k8s.io/v1alpha2",
            "selection": "API discovery at start: llm-d.ai/v1alpha2 when served, else the legacy group; when both are "
            "served the legacy objects are ignored. No flag chooses the group. CRD reconcilers run only when "
            "--endpoint-selector is empty (pool mode).",
            "header": "x-llm-d-inference-objective",
            "header_deprecated": "x-gateway-inference-objective",
            "lookup": "the header value is the InferenceObjective metadata.name (namespace of the EPP's pool)",
            "default_priority": 0,
            "fairness_header": "x-llm-d-inference-fairness-id",
            "model_rewrite_kind": "InferenceModelRewrite (same group/version)",
            "pool_ref_default_group": "inference.networking.k8s.io",
            "source": "pkg/epp/server/controller_config.go; pkg/epp/metadata/consts.go; "
            "pkg/epp/requestcontrol/director.go; pkg/epp/datastore/datastore.go; config/crd/bases/",
            "crd_channel": "kserve Go module github.com/kserve/kserve v0.20.0, file "
            "config/llmisvc/gateway-inference-extension.yaml (llm-d.ai/bundle-version v0.9.0; spec identical to "
            "llm-d-router v0.9.0 config/crd/bases)",
        },
        "metrics": _METRICS,
    },
}

ROUTER_VERSIONS["v0.10.0"] = {
    **copy.deepcopy(ROUTER_VERSIONS["v0.9.0"]),
    "source": f"{REPO} tag v0.10.0 (commit 71f4f0999f95b96c49a9d0c4afbd18dfdb943c26)",
    "feature_gates": {"flowControl": False, "haPopulateNonLeaderDatastore": True},
    "feature_gate_values": True,  # "name", "name=true" or "name=false"
    "feature_gates_source": "cmd/epp/runner/runner.go (loader.RegisterFeatureGate with defaults); "
    "pkg/epp/server/controller_config.go",
    "plugins": _v0_10_0_plugins(),
    "flow_control": dict(_FLOW_CONTROL_V0_9_0, enableEviction="bool"),
    "data_layer": dict(_DATA_LAYER_V0_9_0, crossReplicaSyncerPluginRef="string", crossReplicaSyncInterval="duration"),
    "plugin_order_matters": False,  # plugins are built in dependency order (pluginRef-tagged parameters)
}
ROUTER_VERSIONS["v0.10.0"]["metrics"] = dict(
    _METRICS,
    extra_flags="--metrics-cert-dir (TLS on /metrics), --metrics-client-ca-file (mTLS; needs --metrics-cert-dir)",
)

# The router version each KServe release's scheduler preset runs.
KSERVE_ROUTER = {
    "v0.20.0": {
        "router": "v0.9.0",
        "image": "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.9.0",
        "sidecar_image": "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0",
        "source": "kserve/kserve v0.20.0 config/llmisvcconfig/config-llm-scheduler.yaml, "
        "config/llmisvcconfig/config-llm-decode-template.yaml",
    }
}

# P/D sidecar (cmd/pd-sidecar, pkg/sidecar/proxy/options.go at v0.9.0).
PD_SIDECAR_V0_9_0 = {
    "flags": [
        "port",
        "vllm-port",
        "data-parallel-size",
        "kv-connector",
        "ec-connector",
        "mooncake-bootstrap-port",
        "secure-proxy",
        "cert-path",
        "enable-ssrf-protection",
        "enable-prefiller-sampling",
        "pool-group",
        "inference-pool",
        "decode-chunk-size",
        "tracing",
        "enable-tls",
        "tls-insecure-skip-verify",
        "max-idle-conns-per-host",
        "prefill-max-retries",
        "prefill-retry-backoff",
        "configuration",
        "configuration-file",
    ],
    "deprecated_flags": [
        "connector",
        "prefiller-use-tls",
        "decoder-use-tls",
        "prefiller-tls-insecure-skip-verify",
        "decoder-tls-insecure-skip-verify",
    ],
    "kv_connectors": ["nixlv2", "shared-storage", "sglang", "mooncake"],
    "ec_connectors": ["ec-example", "ec-nixl"],
    "defaults": {"port": "8000", "vllm-port": "8001", "pool-group": "inference.networking.k8s.io"},
    "env": {"INFERENCE_POOL": "same as --inference-pool", "INFERENCE_POOL_NAMESPACE": "namespace when pool has none"},
    "source": "pkg/sidecar/proxy/options.go, pkg/common/routing/common.go (tag v0.9.0)",
}


def router_version_info(router_version: str) -> dict:
    """The registry entry of one router version (accepts '0.9.0' or 'v0.9.0')."""
    key = router_version if router_version.startswith("v") else "v" + router_version
    if key not in ROUTER_VERSIONS:
        raise KeyError(
            f"router version {router_version!r} is not described; known: {', '.join(sorted(ROUTER_VERSIONS))}"
        )
    return ROUTER_VERSIONS[key]


# --------------------------------------------------------------------------------------------
# Checking a config
# --------------------------------------------------------------------------------------------

_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$|^0$")
_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _type_problem(value, kind):
    """None when value decodes as kind, else a short reason."""
    if value is None:
        return None  # JSON null leaves the Go field at its zero value
    if kind in ("string", "pluginref"):
        ok = isinstance(value, str)
    elif kind == "int":
        ok = _is_int(value) or (isinstance(value, float) and value.is_integer())
    elif kind == "number":
        ok = _is_number(value)
    elif kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "duration":
        ok = isinstance(value, str) and bool(_DURATION.match(value))
    elif kind == "quantity":
        ok = _is_number(value) or (isinstance(value, str) and bool(_QUANTITY.match(value)))
    elif kind == "string-list":
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    elif kind == "string-map":
        ok = isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    elif kind in ("object",) or isinstance(kind, dict):
        ok = isinstance(value, dict)
    elif kind == "list":
        ok = isinstance(value, list)
    else:
        ok = True
    return (
        None if ok else f"expected {kind if isinstance(kind, str) else 'object'}, got {type(value).__name__} {value!r}"
    )


def _check_fields(value, schema, path, problems, refs=None):
    """Strict decode of a dict against schema (unknown keys refused, types checked)."""
    if not isinstance(value, dict):
        problems.append(f"{path}: expected an object, got {type(value).__name__}")
        return
    for key, item in value.items():
        if key not in schema:
            problems.append(f"{path}.{key}: unknown field (valid: {', '.join(sorted(schema))})")
            continue
        kind = schema[key]
        reason = _type_problem(item, kind)
        if reason:
            problems.append(f"{path}.{key}: {reason}")
            continue
        if isinstance(kind, dict) and item is not None:
            _check_fields(item, kind, f"{path}.{key}", problems, refs)
        if kind == "pluginref" and item and refs is not None:
            refs.append((f"{path}.{key}", item))


def _fields_ok(value, schema):
    found = []
    _check_fields(value, schema, "", found)
    return not found


def check_epp_config(config: dict, router_version: str) -> list[str]:
    """Every problem router_version's config loader has with config (an EndpointPickerConfig dict).

    Each message starts with the path inside the config. Besides what the loader refuses, it
    reports what the router silently ignores (parameters of a plugin that takes none, a
    flowControl section without the flowControl gate, a non-scheduling plugin in a profile, a
    disagg handler whose profiles or decider are missing) since such a config does not do what it
    says.
    """
    info = router_version_info(router_version)
    registry = info["plugins"]
    problems: list[str] = []
    if not isinstance(config, dict):
        return [f"config: expected a mapping, got {type(config).__name__}"]

    # Top level: apiVersion/kind and strict field names.
    api = config.get("apiVersion")
    if api not in info["config_api_versions"]:
        problems.append(
            f"apiVersion: {api!r} is not accepted by router {router_version} "
            f"(accepted: {', '.join(info['config_api_versions'])})"
        )
    elif info["config_api_versions"][api]:
        problems.append(f"apiVersion: {api} is {info['config_api_versions'][api]}; use llm-d.ai/v1alpha1")
    if config.get("kind") != info["config_kind"]:
        problems.append(f"kind: expected {info['config_kind']}, got {config.get('kind')!r}")
    for key, value in config.items():
        if key not in info["top_level"]:
            problems.append(f"{key}: unknown field (strict decoding refuses it)")
            continue
        reason = _type_problem(value, info["top_level"][key])
        if reason:
            problems.append(f"{key}: {reason}")
    for key in ("saturationDetector", "parser"):
        if key in config:
            problems.append(
                f"{key}: deprecated top-level field; use flowControl.saturationDetector / requestHandler.parsers"
            )

    # Feature gates.
    gates_enabled = dict(info["feature_gates"])
    gates = config.get("featureGates") or []
    for i, gate in enumerate(gates if isinstance(gates, list) else []):
        if not isinstance(gate, str):
            problems.append(f"featureGates[{i}]: expected a string, got {gate!r}")
            continue
        name, dummy, value = gate.partition("=")
        if "=" in gate and not info["feature_gate_values"]:
            problems.append(
                f"featureGates[{i}]: feature gate '{gate}' is unknown or unregistered (this version takes bare names)"
            )
            continue
        if name not in info["feature_gates"]:
            problems.append(
                f"featureGates[{i}]: feature gate '{name}' is unknown or unregistered in router {router_version} "
                f"(registered: {', '.join(sorted(info['feature_gates']))})"
            )
            continue
        if value:
            if value.strip().lower() not in ("1", "t", "true", "0", "f", "false"):
                problems.append(f"featureGates[{i}]: {value!r} is not a boolean for gate {name}")
                continue
            gates_enabled[name] = value.strip().lower() in ("1", "t", "true")
        else:
            gates_enabled[name] = True

    # Plugins.
    plugins = config.get("plugins") if isinstance(config.get("plugins"), list) else []
    defined: dict[str, tuple[int, str]] = {}  # name -> (index, type)
    refs: list[tuple[str, str, int]] = []  # (path, referenced name, index of referencing plugin)
    for i, spec in enumerate(plugins):
        path = f"plugins[{i}]"
        if not isinstance(spec, dict):
            problems.append(f"{path}: expected an object")
            continue
        for key in spec:
            if key not in ("name", "type", "parameters"):
                problems.append(f"{path}.{key}: unknown field (valid: name, type, parameters)")
        ptype = spec.get("type")
        name = spec.get("name") or ptype
        if not ptype:
            problems.append(f"{path}: plugin '{name}' is missing a type")
            continue
        if name in defined:
            problems.append(f"{path}: duplicate plugin name '{name}'")
        defined.setdefault(name, (i, ptype))
        entry = registry.get(ptype)
        if entry is None:
            problems.append(f"{path}.type: plugin type '{ptype}' is not registered in router {router_version}")
            continue
        if entry["deprecated"]:
            target = f"; use {entry['alias_of']}" if entry["alias_of"] else ""
            problems.append(f"{path}.type: plugin type '{ptype}' is {entry['deprecated']}{target}")
        params = spec.get("parameters")
        if params is None:
            continue
        schema = entry["params"]
        if schema == "unchecked":
            continue
        if schema is None:
            problems.append(f"{path}.parameters: plugin type '{ptype}' takes no parameters (the router ignores them)")
            continue
        local: list[str] = []
        plugin_refs: list[tuple[str, str]] = []
        _check_fields(params, schema, f"{path}.parameters", local, plugin_refs)
        if local and entry["alt_params"] and isinstance(params, dict) and _fields_ok(params, entry["alt_params"]):
            local, plugin_refs = [], []
            _check_fields(params, entry["alt_params"], f"{path}.parameters", local, plugin_refs)
            problems.append(f"{path}.parameters: deprecated flat parameter form of '{ptype}'; use the nested form")
        problems.extend(local)
        refs.extend((p, ref, i) for p, ref in plugin_refs)

    def kinds_of(name):
        if name in defined:
            entry = registry.get(defined[name][1])
            return entry["kinds"] if entry else ()
        return ()

    # Plugin-to-plugin references in parameters (deciders and the like).
    for path, ref, index in refs:
        if ref not in defined:
            problems.append(f"{path}: references plugin '{ref}', which is not defined in plugins")
            continue
        if info["plugin_order_matters"] and defined[ref][0] > index:
            problems.append(
                f"{path}: plugin '{ref}' is listed after the plugin that references it; router {router_version} "
                "builds plugins in list order and the reference fails"
            )
        decider_keys = (".deciders.prefill", ".deciders.encode", "DeciderPluginName", "deciderPluginName")
        if path.endswith(decider_keys) and DECIDER not in kinds_of(ref):
            problems.append(f"{path}: plugin '{ref}' is not a disaggregation decider")

    # Scheduling profiles.
    profiles = config.get("schedulingProfiles") if isinstance(config.get("schedulingProfiles"), list) else []
    profile_names: list[str] = []
    for i, profile in enumerate(profiles):
        path = f"schedulingProfiles[{i}]"
        if not isinstance(profile, dict):
            problems.append(f"{path}: expected an object")
            continue
        for key in profile:
            if key not in ("name", "plugins"):
                problems.append(f"{path}.{key}: unknown field (valid: name, plugins)")
        pname = profile.get("name")
        if not pname:
            problems.append(f"{path}: profile is missing a name")
        elif pname in profile_names:
            problems.append(f"{path}: duplicate profile name '{pname}'")
        else:
            profile_names.append(pname)
        pickers = []
        for j, ref in enumerate(profile.get("plugins") or []):
            rpath = f"{path}.plugins[{j}]"
            if not isinstance(ref, dict):
                problems.append(f"{rpath}: expected an object")
                continue
            for key in ref:
                if key not in ("pluginRef", "weight"):
                    problems.append(f"{rpath}.{key}: unknown field (valid: pluginRef, weight)")
            target = ref.get("pluginRef")
            if not target:
                problems.append(f"{rpath}: missing 'pluginRef'")
                continue
            if "weight" in ref and _type_problem(ref["weight"], "number"):
                problems.append(f"{rpath}.weight: {_type_problem(ref['weight'], 'number')}")
            if target not in defined:
                problems.append(f"{rpath}.pluginRef: profile '{pname}' references undefined plugin '{target}'")
                continue
            kinds = kinds_of(target)
            if not kinds:
                continue
            if PICKER in kinds:
                pickers.append(target)
            if not set(kinds) & set(PROFILE_KINDS):
                problems.append(
                    f"{rpath}.pluginRef: plugin '{target}' ({defined[target][1]}) is not a filter, scorer or picker; "
                    "the profile ignores it"
                )
            elif "weight" in ref and SCORER not in kinds:
                problems.append(f"{rpath}.weight: plugin '{target}' is not a scorer; its weight is ignored")
        if len(pickers) > 1:
            problems.append(
                f"{path}: profile '{pname}' has more than one picker ({', '.join(pickers)}); only one is allowed"
            )

    # Profile handler: exactly one (the loader adds single-profile-handler only for a lone profile).
    handlers = [n for n in defined if PROFILE_HANDLER in kinds_of(n)]
    if len(handlers) > 1:
        problems.append(f"plugins: multiple profile handlers ({', '.join(handlers)}); only one is allowed")
    elif not handlers and len(profiles) > 1:
        problems.append(
            "plugins: no profile handler configured (required when there is more than one scheduling profile)"
        )
    for handler in handlers:
        htype = defined[handler][1]
        hpath = f"plugins[{defined[handler][0]}]"
        if htype == "single-profile-handler" and len(profiles) > 1:
            problems.append(f"{hpath}: single-profile-handler cannot serve {len(profiles)} scheduling profiles")
        if htype == "disagg-profile-handler":
            params = plugins[defined[handler][0]].get("parameters") or {}
            params = params if isinstance(params, dict) else {}
            names = dict(registry[htype]["defaults"]["profiles"])
            names.update({k: v for k, v in (params.get("profiles") or {}).items() if v})
            for legacy, stage in (
                ("decodeProfile", "decode"),
                ("prefillProfile", "prefill"),
                ("encodeProfile", "encode"),
            ):
                if params.get(legacy):
                    names[stage] = params[legacy]
            deciders = dict(params.get("deciders") or {})
            prefill_decider = (
                deciders.get("prefill") or params.get("prefillDeciderPluginName") or params.get("deciderPluginName")
            )
            if names["decode"] not in profile_names:
                problems.append(
                    f"{hpath}: disagg-profile-handler needs a scheduling profile named '{names['decode']}' "
                    "(the decode stage); without it every request fails to schedule"
                )
            if prefill_decider and names["prefill"] not in profile_names:
                problems.append(
                    f"{hpath}: deciders.prefill is set but no scheduling profile is named '{names['prefill']}'; "
                    "no request would be prefilled"
                )
            if names["prefill"] in profile_names and not prefill_decider:
                problems.append(
                    f"{hpath}: profile '{names['prefill']}' exists but disagg-profile-handler has no deciders.prefill; "
                    "P/D disaggregation stays off"
                )

    # Flow control.
    flow = config.get("flowControl")
    if isinstance(flow, dict):
        ctx = {"defined": defined, "registry": registry, "problems": problems}
        _check_fields(flow, info["flow_control"], "flowControl", problems)
        settings = [k for k in flow if k != "saturationDetector"]
        if settings and not gates_enabled.get("flowControl"):
            problems.append(
                f"flowControl: {', '.join(settings)} set but the flowControl feature gate is not enabled; "
                "the router ignores them (add 'flowControl' to featureGates)"
            )
        seen = set()
        bands = flow.get("priorityBands") if isinstance(flow.get("priorityBands"), list) else []
        band_list = [(f"flowControl.priorityBands[{i}]", b) for i, b in enumerate(bands)]
        for key in ("defaultPriorityBand", "defaultNegativePriorityBand"):
            if isinstance(flow.get(key), dict):
                band_list.append((f"flowControl.{key}", flow[key]))
        for bpath, band in band_list:
            _check_fields(band, _PRIORITY_BAND, bpath, problems)
            if not isinstance(band, dict):
                continue
            if bpath.startswith("flowControl.priorityBands"):
                if band.get("priority") in seen:
                    problems.append(f"{bpath}.priority: duplicate priority level {band.get('priority')}")
                seen.add(band.get("priority"))
            for key, kind in (("fairnessPolicyRef", FAIRNESS), ("orderingPolicyRef", ORDERING)):
                _check_policy_ref(band.get(key), kind, f"{bpath}.{key}", **ctx)
        _check_policy_ref(
            flow.get("usageLimitPolicyPluginRef"),
            USAGE_LIMIT,
            "flowControl.usageLimitPolicyPluginRef",
            **ctx,
        )
        detector = flow.get("saturationDetector")
        if isinstance(detector, dict):
            _check_fields(detector, {"pluginRef": "string"}, "flowControl.saturationDetector", problems)
            ref = detector.get("pluginRef")
            if ref == "":
                problems.append(
                    "flowControl.saturationDetector.pluginRef: saturation detector plugin reference is empty"
                )
            elif ref:
                _check_policy_ref(ref, SATURATION, "flowControl.saturationDetector.pluginRef", **ctx)

    # Request handler parsers.
    handler_cfg = config.get("requestHandler")
    if isinstance(handler_cfg, dict):
        _check_fields(handler_cfg, {"parsers": "list"}, "requestHandler", problems)
        for i, parser in enumerate(handler_cfg.get("parsers") or []):
            ppath = f"requestHandler.parsers[{i}]"
            if isinstance(parser, dict):
                _check_fields(parser, {"pluginRef": "string"}, ppath, problems)
                ref = parser.get("pluginRef")
                if ref not in defined:
                    problems.append(f"{ppath}.pluginRef: parser references undefined plugin '{ref}'")
                elif PARSER not in kinds_of(ref):
                    problems.append(f"{ppath}.pluginRef: plugin '{ref}' is not a parser")

    # Data layer.
    data = config.get("dataLayer")
    if isinstance(data, dict):
        _check_fields(data, info["data_layer"], "dataLayer", problems)
        for i, source in enumerate(data.get("sources") or []):
            spath = f"dataLayer.sources[{i}]"
            if not isinstance(source, dict):
                problems.append(f"{spath}: expected an object")
                continue
            _check_fields(source, {"pluginRef": "string", "extractors": "list"}, spath, problems)
            ref = source.get("pluginRef")
            if ref not in defined or DATA_SOURCE not in kinds_of(ref):
                problems.append(f"{spath}.pluginRef: '{ref}' is not a data source plugin defined in plugins")
            for j, extractor in enumerate(source.get("extractors") or []):
                epath = f"{spath}.extractors[{j}]"
                if isinstance(extractor, dict):
                    _check_fields(extractor, {"pluginRef": "string"}, epath, problems)
                    if extractor.get("pluginRef") not in defined:
                        problems.append(f"{epath}.pluginRef: the plugin {extractor.get('pluginRef')!r} is not defined")
        discovery = data.get("discovery")
        if isinstance(discovery, dict):
            _check_fields(discovery, {"pluginRef": "string"}, "dataLayer.discovery", problems)
            if discovery.get("pluginRef") not in defined:
                problems.append(f"dataLayer.discovery.pluginRef: {discovery.get('pluginRef')!r} is not defined")
    return problems


def _check_policy_ref(ref, kind, path, *, defined, registry, problems):
    """A flow-control reference: a defined plugin of that kind, or a registered type of that kind
    (the loader adds the default policies and the utilization detector under their type names)."""
    if not ref:
        return
    if ref in defined:
        entry = registry.get(defined[ref][1])
        if entry and kind not in entry["kinds"]:
            problems.append(f"{path}: plugin '{ref}' is not a {kind}")
        return
    defaults = {
        "fcfs-ordering-policy",
        "global-strict-fairness-policy",
        "static-usage-limit-policy",
        "utilization-detector",
    }
    if ref not in defaults:
        problems.append(f"{path}: references undefined plugin '{ref}'")
    elif kind not in registry[ref]["kinds"]:
        problems.append(f"{path}: plugin '{ref}' is not a {kind}")
