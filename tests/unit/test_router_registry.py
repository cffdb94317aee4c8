"""The scheduler (EPP) config the intent builds and the pre-check of its inputs.

Whether the llm-d router loads a config is decided by the router: tests/dataplane/test_config_loader.py
runs its start-up code on every rendered config and shows it refusing each case the pre-check refuses.
These tests only pin what the pre-check says (the variable to change) and the shape the intent builds.
"""

from __future__ import annotations

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils.intent.scheduler import (
    SchedulerConfigError,
    epp_config,
)
from ansible_collections.inference.blueprints.plugins.module_utils.router_registry import (
    KSERVE_ROUTER,
    ROUTER_VERSIONS,
    precheck,
    router_version_info,
)

WEIGHTS = {"prefix_cache": 3, "queue": 2, "kv_cache": 2}
BANDS = [{"tier": "gold", "priority": 100, "max_requests": 4}, {"tier": "bronze", "priority": 0, "max_requests": 60}]


def test_kserve_v0_20_runs_router_v0_9_0():
    assert KSERVE_ROUTER["v0.20.0"]["router"] == "v0.9.0"
    assert router_version_info("0.9.0") is ROUTER_VERSIONS["v0.9.0"]
    with pytest.raises(KeyError, match="known: v0.9.0"):
        router_version_info("v0.1.0")


def test_good_inputs_pass():
    assert precheck(WEIGHTS, BANDS, "15s", 256) == []
    assert precheck(WEIGHTS, None, None, 0) == []


@pytest.mark.parametrize(
    ("bands", "ttl", "tokens", "variable"),
    [
        (
            [{"tier": "gold", "priority": 5, "max_requests": 1}, {"tier": "silver", "priority": 5, "max_requests": 2}],
            None,
            0,
            "priority_classes",
        ),
        (BANDS, "1e-05s", 0, "tiers"),
        (BANDS, "15 seconds", 0, "tiers"),
        (None, None, -1, "pd_non_cached_tokens"),
    ],
)
def test_the_precheck_names_the_variable(bands, ttl, tokens, variable):
    problems = precheck(WEIGHTS, bands, ttl, tokens)
    assert [p for p, _ in problems] == [variable], problems
    with pytest.raises(SchedulerConfigError, match=variable):
        epp_config(False, WEIGHTS, tokens, {"bands": bands, "request_ttl": ttl})


def test_disaggregated_config_lists_the_decider_before_its_handler():
    cfg = epp_config(True, WEIGHTS, 256)
    names = [p["type"] for p in cfg["plugins"]]
    # router v0.9.0 builds plugins in list order (the data-plane tests load and run this config)
    assert names.index("prefix-based-pd-decider") < names.index("disagg-profile-handler")
    assert [p["name"] for p in cfg["schedulingProfiles"]] == ["prefill", "decode"]
    assert "featureGates" not in cfg


def test_flow_control_with_and_without_bands():
    tiers = epp_config(False, WEIGHTS, 256, {"bands": BANDS, "request_ttl": "15s"})
    assert tiers["featureGates"] == ["flowControl"]
    assert tiers["flowControl"] == {
        "priorityBands": [{"priority": 100, "maxRequests": "4"}, {"priority": 0, "maxRequests": "60"}],
        "defaultRequestTTL": "15s",
    }
    held = epp_config(False, WEIGHTS, 256, {})
    assert held["featureGates"] == ["flowControl"]
    assert "flowControl" not in held


def test_a_zero_weight_leaves_its_scorer_out():
    cfg = epp_config(False, {"prefix_cache": 3, "queue": 0, "kv_cache": 1.5}, 256)
    refs = [p["pluginRef"] for p in cfg["schedulingProfiles"][0]["plugins"]]
    assert refs == ["prefix-cache-scorer", "kv-cache-utilization-scorer", "max-score-picker"]
    assert cfg["schedulingProfiles"][0]["plugins"][1]["weight"] == 1.5


def test_two_tiers_of_one_priority_stop_the_site_with_the_variable_named():
    """Through the inventory: the intent (before anything is planned onto a cluster) names the variable."""
    from pathlib import Path

    from ansible_collections.inference.blueprints.plugins.module_utils import cli

    site = Path(__file__).resolve().parents[2] / "inventories" / "example-ai-grid"
    classes = [{"name": "gold", "priority": 50}, {"name": "silver", "priority": 50}, {"name": "bronze", "priority": 0}]
    with pytest.raises(cli.CliError) as err:
        cli.site_intents(str(site), None, {"priority_classes": classes})
    text = str(err.value)
    assert text.startswith("host grid-central-1, model "), text
    assert "priority_classes: tiers 'gold' and 'silver' have priority 50" in text
    assert "give each tier's class a priority of its own" in text
