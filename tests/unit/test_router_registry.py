"""Scheduler (EPP) configs against what the targeted llm-d router version registers and enforces."""

from __future__ import annotations

import copy

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils.intent.scheduler import (
    SchedulerConfigError,
    epp_config,
)
from ansible_collections.inference.blueprints.plugins.module_utils.router_registry import (
    KSERVE_ROUTER,
    ROUTER_VERSIONS,
    check_epp_config,
    router_version_info,
)

KSERVE_ROUTER_VERSION = KSERVE_ROUTER["v0.20.0"]["router"]


def single_profile():
    """A single-pool config as llm-d's sample configs describe it (prefix + load scorers, one profile)."""
    return {
        "apiVersion": "llm-d.ai/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": [
            {"type": "single-profile-handler"},
            {"type": "prefix-cache-scorer"},
            {"type": "queue-scorer"},
            {"type": "kv-cache-utilization-scorer"},
            {"type": "max-score-picker"},
        ],
        "schedulingProfiles": [
            {
                "name": "default",
                "plugins": [
                    {"pluginRef": "prefix-cache-scorer", "weight": 3},
                    {"pluginRef": "queue-scorer", "weight": 2},
                    {"pluginRef": "kv-cache-utilization-scorer", "weight": 2},
                    {"pluginRef": "max-score-picker"},
                ],
            }
        ],
    }


def disagg():
    """A P/D config: decider before the handler, prefill and decode profiles told apart by role filters."""
    scoring = [
        {"pluginRef": "prefix-cache-scorer", "weight": 2},
        {"pluginRef": "queue-scorer", "weight": 1},
        {"pluginRef": "max-score-picker"},
    ]
    return {
        "apiVersion": "llm-d.ai/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": [
            {"type": "approx-prefix-cache-producer", "parameters": {"blockSizeTokens": 64, "autoTune": False}},
            {"type": "prefix-cache-scorer"},
            {"type": "queue-scorer"},
            {"type": "prefill-filter"},
            {"type": "decode-filter"},
            {"type": "max-score-picker"},
            {"type": "prefix-based-pd-decider", "parameters": {"nonCachedTokens": 256}},
            {"type": "disagg-profile-handler", "parameters": {"deciders": {"prefill": "prefix-based-pd-decider"}}},
        ],
        "schedulingProfiles": [
            {"name": "prefill", "plugins": [{"pluginRef": "prefill-filter"}, *scoring]},
            {"name": "decode", "plugins": [{"pluginRef": "decode-filter"}, *copy.deepcopy(scoring)]},
        ],
    }


def tiers():
    """Flow control with one priority band per tier (gold/silver/bronze objectives)."""
    config = single_profile()
    config["featureGates"] = ["flowControl"]
    config["flowControl"] = {
        "maxRequests": "2000",
        "defaultRequestTTL": "60s",
        "priorityBands": [
            {"priority": 100, "maxRequests": "1000"},
            {"priority": 50, "maxRequests": "600", "orderingPolicyRef": "edf-ordering-policy"},
            {"priority": -10, "maxRequests": "400"},
        ],
    }
    config["plugins"].append({"type": "edf-ordering-policy"})
    return config


def only(problems, needle):
    matching = [p for p in problems if needle in p]
    assert matching, f"no problem mentions {needle!r}: {problems}"
    return matching


def test_kserve_v0_20_router_is_described():
    assert KSERVE_ROUTER_VERSION == "v0.9.0"
    assert router_version_info("0.9.0") is ROUTER_VERSIONS["v0.9.0"]
    with pytest.raises(KeyError):
        router_version_info("v0.1.0")


@pytest.mark.parametrize("version", sorted(ROUTER_VERSIONS))
def test_valid_samples_pass(version):
    assert check_epp_config(single_profile(), version) == []
    assert check_epp_config(disagg(), version) == []
    assert check_epp_config(tiers(), version) == []


WEIGHTS = {"prefix_cache": 3, "queue": 2, "kv_cache": 2}


def test_the_old_chat_feature_gate_is_refused():
    chat = epp_config(True, WEIGHTS, 256)
    chat["featureGates"] = ["prepareDataPlugins"]  # what the tranche-1 renderer wrote (issue 8, defect 2)
    gate = only(check_epp_config(chat, KSERVE_ROUTER_VERSION), "prepareDataPlugins")
    assert gate[0].startswith("featureGates[0]: feature gate 'prepareDataPlugins' is unknown or unregistered")


@pytest.mark.parametrize("disaggregated", [True, False])
@pytest.mark.parametrize(
    "flow_control", [None, [{"priority": 100, "max_requests": 500}, {"priority": -10, "max_requests": 100}]]
)
def test_the_renderers_configs_load(disaggregated, flow_control):
    cfg = epp_config(disaggregated, WEIGHTS, 256, flow_control)
    assert check_epp_config(cfg, KSERVE_ROUTER_VERSION) == []
    names = [p["type"] for p in cfg["plugins"]]
    if disaggregated:  # router v0.9.0 builds plugins in list order
        assert names.index("prefix-based-pd-decider") < names.index("disagg-profile-handler")


def test_the_renderer_refuses_a_config_the_router_would():
    with pytest.raises(SchedulerConfigError, match="would refuse"):
        epp_config(False, {"prefix_cache": 0, "queue": 0, "kv_cache": 0}, 256, [{"priority": 1, "max_requests": 1}] * 2)


def test_unknown_plugin_type_is_refused():
    config = single_profile()
    config["plugins"].append({"type": "prefix-cache-aware-scorer"})
    problems = check_epp_config(config, "v0.9.0")
    assert problems == ["plugins[5].type: plugin type 'prefix-cache-aware-scorer' is not registered in router v0.9.0"]


def test_parameter_of_another_plugin_is_refused():
    # blockSizeTokens belongs to approx-prefix-cache-producer, not to the scorer.
    config = single_profile()
    config["plugins"][1]["parameters"] = {"blockSizeTokens": 64}
    problems = check_epp_config(config, "v0.9.0")
    assert len(problems) == 1
    assert problems[0].startswith("plugins[1].parameters.blockSizeTokens: unknown field")


def test_parameter_added_later_is_refused_by_the_older_router():
    config = disagg()
    config["plugins"][6]["parameters"]["promptTokens"] = 512
    assert check_epp_config(config, "v0.10.0") == []
    only(check_epp_config(config, "v0.9.0"), "plugins[6].parameters.promptTokens: unknown field")


def test_wrong_parameter_type_is_refused():
    config = disagg()
    config["plugins"][6]["parameters"]["nonCachedTokens"] = "256"
    only(check_epp_config(config, "v0.9.0"), "plugins[6].parameters.nonCachedTokens: expected int")


def test_parameters_on_a_plugin_that_takes_none_are_reported():
    config = single_profile()
    config["plugins"][2]["parameters"] = {"threshold": 5}
    only(check_epp_config(config, "v0.9.0"), "plugins[2].parameters: plugin type 'queue-scorer' takes no parameters")


def test_decider_must_precede_handler_in_v0_9_only():
    config = disagg()
    decider = config["plugins"].pop(6)
    config["plugins"].append(decider)
    only(check_epp_config(config, "v0.9.0"), "plugins[6].parameters.deciders.prefill: plugin 'prefix-based-pd-decider'")
    assert check_epp_config(config, "v0.10.0") == []


def test_disagg_handler_rules():
    missing_decider = disagg()
    missing_decider["plugins"][7]["parameters"]["deciders"]["prefill"] = "no-such-decider"
    only(check_epp_config(missing_decider, "v0.9.0"), "references plugin 'no-such-decider', which is not defined")

    not_a_decider = disagg()
    not_a_decider["plugins"][7]["parameters"]["deciders"]["prefill"] = "queue-scorer"
    problems = check_epp_config(not_a_decider, "v0.9.0")
    only(problems, "plugin 'queue-scorer' is not a disaggregation decider")

    no_decode = disagg()
    no_decode["schedulingProfiles"][1]["name"] = "generate"
    only(check_epp_config(no_decode, "v0.9.0"), "needs a scheduling profile named 'decode'")

    renamed = copy.deepcopy(no_decode)
    renamed["plugins"][7]["parameters"]["profiles"] = {"decode": "generate"}
    assert check_epp_config(renamed, "v0.9.0") == []

    no_decider = disagg()
    no_decider["plugins"][7]["parameters"] = {}
    only(check_epp_config(no_decider, "v0.9.0"), "P/D disaggregation stays off")


def test_profile_handler_count_and_pickers():
    two_handlers = disagg()
    two_handlers["plugins"].append({"type": "single-profile-handler"})
    problems = check_epp_config(two_handlers, "v0.9.0")
    only(problems, "multiple profile handlers")
    only(problems, "single-profile-handler cannot serve 2 scheduling profiles")

    no_handler = disagg()
    del no_handler["plugins"][7]
    only(check_epp_config(no_handler, "v0.9.0"), "no profile handler configured")

    # A lone profile without a handler or picker is completed by the loader itself.
    implicit = single_profile()
    del implicit["plugins"][0]
    implicit["plugins"].pop()
    implicit["schedulingProfiles"][0]["plugins"].pop()
    assert check_epp_config(implicit, "v0.9.0") == []

    two_pickers = single_profile()
    two_pickers["plugins"].append({"type": "random-picker"})
    two_pickers["schedulingProfiles"][0]["plugins"].append({"pluginRef": "random-picker"})
    only(check_epp_config(two_pickers, "v0.9.0"), "has more than one picker (max-score-picker, random-picker)")


def test_dangling_and_duplicate_references():
    config = single_profile()
    config["schedulingProfiles"][0]["plugins"].append({"pluginRef": "lora-affinity-scorer", "weight": 1})
    config["plugins"].append({"type": "queue-scorer"})
    problems = check_epp_config(config, "v0.9.0")
    only(problems, "schedulingProfiles[0].plugins[4].pluginRef: profile 'default' references undefined plugin")
    only(problems, "plugins[5]: duplicate plugin name 'queue-scorer'")


def test_non_scheduling_plugin_in_profile_is_reported():
    config = disagg()
    config["schedulingProfiles"][0]["plugins"].append({"pluginRef": "prefix-based-pd-decider"})
    only(check_epp_config(config, "v0.9.0"), "is not a filter, scorer or picker")


def test_flow_control_needs_its_gate_and_unique_bands():
    config = tiers()
    config["featureGates"] = []
    only(check_epp_config(config, "v0.9.0"), "flowControl feature gate is not enabled")

    duplicate = tiers()
    duplicate["flowControl"]["priorityBands"][1]["priority"] = 100
    only(check_epp_config(duplicate, "v0.9.0"), "priorityBands[1].priority: duplicate priority level 100")

    bad_ref = tiers()
    bad_ref["flowControl"]["priorityBands"][0]["fairnessPolicyRef"] = "fcfs-ordering-policy"
    only(check_epp_config(bad_ref, "v0.9.0"), "is not a fairness-policy")

    bad_field = tiers()
    bad_field["flowControl"]["priorityBands"][0]["name"] = "gold"
    only(check_epp_config(bad_field, "v0.9.0"), "priorityBands[0].name: unknown field")

    eviction = tiers()
    eviction["flowControl"]["enableEviction"] = True
    assert check_epp_config(eviction, "v0.10.0") == []
    only(check_epp_config(eviction, "v0.9.0"), "flowControl.enableEviction: unknown field")


def test_feature_gate_sets_differ_between_versions():
    config = single_profile()
    config["featureGates"] = ["flowControl=true"]
    assert check_epp_config(config, "v0.10.0") == []
    only(check_epp_config(config, "v0.9.0"), "feature gate 'flowControl=true' is unknown")

    config["featureGates"] = ["dataLayer"]
    assert check_epp_config(config, "v0.9.0") == []
    only(check_epp_config(config, "v0.10.0"), "feature gate 'dataLayer' is unknown or unregistered")


def test_api_version_kind_and_top_level_fields():
    config = single_profile()
    config["apiVersion"] = "inference.networking.x-k8s.io/v1alpha1"
    only(check_epp_config(config, "v0.9.0"), "apiVersion: inference.networking.x-k8s.io/v1alpha1 is deprecated")
    config["apiVersion"] = "llm-d.ai/v1alpha2"
    only(check_epp_config(config, "v0.9.0"), "apiVersion: 'llm-d.ai/v1alpha2' is not accepted")
    config = single_profile()
    config["metadata"] = {"name": "x"}
    only(check_epp_config(config, "v0.9.0"), "metadata: unknown field")


def test_deprecated_aliases_are_named():
    config = single_profile()
    config["plugins"].append({"type": "by-label-selector", "parameters": {"matchLabels": {"llm-d.ai/role": "decode"}}})
    only(check_epp_config(config, "v0.9.0"), "use label-selector-filter")


def test_every_plugin_entry_names_its_source_and_kind():
    for version, info in ROUTER_VERSIONS.items():
        assert info["source"].startswith("llm-d/llm-d-router tag " + version)
        for name, entry in info["plugins"].items():
            assert entry["source"].startswith("pkg/epp/framework/plugins/") and entry["source"].endswith(".go"), name
            assert entry["kinds"], name
            if entry["alias_of"]:
                assert entry["alias_of"] in info["plugins"], name
    assert set(ROUTER_VERSIONS["v0.9.0"]["plugins"]) <= set(ROUTER_VERSIONS["v0.10.0"]["plugins"])
    assert ROUTER_VERSIONS["v0.9.0"]["inference_objective"]["api_version"] == "llm-d.ai/v1alpha2"
