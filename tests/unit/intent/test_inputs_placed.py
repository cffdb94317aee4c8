"""Inputs that were silently ignored or accepted (issue 31, items 8, 9 and 11), refused or stopped with a message
that says where the value belongs, which models clash, or which SLO a plan misses and how many GPUs would meet it.

No cluster: the intent is built from the example inventories as the site action builds it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils.intent import build, inventory, summary
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import SchemaError
from ansible_collections.inference.blueprints.plugins.module_utils.planner import inputs as planner_inputs
from ansible_collections.inference.blueprints.plugins.module_utils.planner import plan

ROOT = Path(__file__).resolve().parents[3]
INVENTORIES = ROOT / "inventories"
BDIR = [str(ROOT / "blueprints")]
EXAMPLES = sorted(p.name for p in INVENTORIES.iterdir() if (p / "hosts.yml").exists())


def _values(site: str = "example-chat", host: str = "chat-east-1", **changes):
    values, names = cli.load_site_vars(str(INVENTORIES / site))[host]
    values, names = json.loads(json.dumps(values)), list(names)
    for key, value in changes.items():
        values[key] = value
        names.append(key)
    return values, names


def _intent(site: str = "example-chat", host: str = "chat-east-1", **changes) -> dict:
    values, names = _values(site, host, **changes)
    return build.site_intent(host, values, names, BDIR)


def _errors(site: str = "example-chat", host: str = "chat-east-1", **changes) -> dict[str, str]:
    with pytest.raises(SchemaError) as err:
        _intent(site, host, **changes)
    return dict(err.value.errors)


def _models(**changes) -> list[dict]:
    values, _ = _values()
    model = copy.deepcopy(values["models"][0])
    model.update(changes)
    return [model]


# ------------------------------------------------------------------ item 8: keys at the wrong level, near misses
@pytest.mark.parametrize(
    ("name", "value", "place"),
    [
        ("max_model_len", 8192, "models[<i>].max_model_len"),
        ("arrival_rate_rps", 50, "models[<i>].traffic.arrival_rate_rps or traffic.arrival_rate_rps"),
        ("ttft_p95_ms", 500, "models[<i>].slo.ttft_p95_ms or slo.ttft_p95_ms"),
        ("gpus_per_node", 4, "hardware.gpus_per_node or models[<i>].hardware.gpus_per_node"),
        ("served_name", "chat", "models[<i>].served_name"),
    ],
)
def test_a_nested_key_at_the_top_level_is_refused_naming_where_it_belongs(name, value, place):
    errors = _errors(**{name: value})
    assert "not a site variable" in errors[name] and f"give it at {place}" in errors[name], errors


def test_every_traffic_and_slo_key_of_the_planner_is_claimed_at_the_top_level():
    """The claimed keys come from the schema (the planner's own key lists), not from a hand list."""
    from ansible_collections.inference.blueprints.plugins.module_utils.intent import site as site_mod

    names = [*planner_inputs.TRAFFIC_KEYS, *planner_inputs.SLO_KEYS]
    found = dict(site_mod.misspelled_variables(names))
    assert set(found) == set(names), found


@pytest.mark.parametrize(("name", "meant"), [("serving_ns", "serving_namespace"), ("namespace", "serving_namespace")])
def test_a_near_miss_or_alias_of_a_site_variable_is_refused_with_the_suggestion(name, meant):
    errors = _errors(**{name: "llm-chat"})
    assert f"did you mean {meant!r}?" in errors[name], errors


def test_the_alias_is_declared_by_the_schema():
    assert "namespace" in inventory.SITE_FIELDS["serving_namespace"].aliases


def test_unrelated_variables_of_other_playbooks_stay_allowed():
    other = {
        "name": "web",
        "port": 8080,
        "path": "/srv",
        "image": "nginx",
        "gpu": "h100",
        "nodes": 3,
        "my_app_timeout": 30,
        "backup_bucket": "s3://b",
        "ansible_user": "core",
        "environment_name": "prod",
    }
    intent = _intent(**other)
    assert intent["site"]["name"] == "example-chat"


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("serving_namespace", "llm-chat", "'serving_namespace' is a site variable: give it at the top level"),
        ("namespace", "llm-chat", "did you mean 'serving_namespace'? a site variable, at the top level"),
        ("gpu", "h100", "give it at hardware.gpu or models[0].hardware.gpu"),
        ("arrival_rate_rps", 5, "give it at models[0].traffic.arrival_rate_rps"),
    ],
)
def test_a_key_given_inside_a_model_that_belongs_elsewhere_says_where(key, value, fragment):
    errors = _errors(models=_models(**{key: value}))
    assert fragment in errors[f"models[0].{key}"], errors


# ------------------------------------------------------------------ item 9: one served name, one model
def test_two_models_with_the_same_default_served_name_are_refused_naming_both():
    first = _models()[0]
    second = {**copy.deepcopy(first), "name": "qwen-chat-2"}
    errors = _errors(models=[first, second])
    msg = errors["models[1].served_name"]
    assert "models[0] (qwen-chat; models[0].id" in msg and "models[1] (qwen-chat-2; models[1].id" in msg, msg
    assert "could not tell them apart" in msg


def test_an_explicit_served_name_equal_to_another_models_id_is_refused():
    first = _models()[0]
    second = {**copy.deepcopy(first), "name": "other", "served_name": first["id"]}
    first = {**first, "served_name": None}
    errors = _errors(models=[first, second])
    assert "models[1].served_name" in errors["models[1].served_name"]


def test_the_ai_grid_classes_may_not_share_a_served_name():
    values, _ = _values("example-ai-grid", "grid-central-1")
    models = copy.deepcopy(values["models"])
    models[1]["served_name"] = models[0]["id"]
    errors = _errors("example-ai-grid", "grid-central-1", models=models)
    msg = errors["models[1].served_name"]
    assert "models[0] (qwen-27b" in msg and "models[1] (qwen-35b-a3b; models[1].served_name)" in msg, msg


def test_distinct_served_names_for_one_model_id_are_accepted():
    first = _models(served_name="chat-a")[0]
    second = {**copy.deepcopy(first), "name": "qwen-chat-2", "served_name": "chat-b"}
    intent = _intent(models=[first, second])
    assert [m["served_name"] for m in intent["serving"]["models"]] == ["chat-a", "chat-b"]


# ------------------------------------------------------------------ item 11: plans that miss their SLOs
def _flood(rate: float = 100000) -> list[dict]:
    models = _models()
    models[0]["traffic"] = {**models[0]["traffic"], "arrival_rate_rps": rate}
    return models


@pytest.fixture(scope="module")
def flooded() -> dict:
    return _intent(models=_flood())


def test_the_planner_says_a_plan_that_carries_no_replica_count_misses_its_slo(flooded):
    p = flooded["plans"][0]["plan"]
    assert p["latency"]["meets_slo"] is False
    assert any("throughput" in m for m in p["latency"]["missed"]), p["latency"]["missed"]


def test_no_planner_warning_calls_a_figure_under_its_slo_too_slow(flooded):
    for w in flooded["plans"][0]["plan"]["warnings"]:
        assert "alone is too slow" not in w, w


def test_the_warning_says_the_prefill_is_too_slow_only_over_the_ttft_slo():
    values, _ = _values()
    m = values["models"][0]
    inp = {
        "model": m["id"],
        "gpu": "h100",
        "gpus_per_node": 8,
        "nodes": 2,
        "weights": "fp8",
        "kv_cache_dtype": "fp8",
        "max_model_len": 32768,
        "traffic": {**m["traffic"], "arrival_rate_rps": 100000},
        "slo": m["slo"],
    }
    warnings = " ".join(plan(inp)["warnings"])
    assert "even 64 engine(s)" in warnings and "do not carry 100000 req/s" in warnings, warnings


def test_a_missed_slo_is_recorded_with_the_gpus_that_would_meet_it(flooded):
    (miss,) = flooded["slo_misses"]
    assert miss["model"] == "qwen-chat" and miss["path"] == "models[0]" and miss["gpus"] == 16
    assert miss["meets_with"]["gpus"] > 1000 and miss["meets_with"]["gpu"] == "h100"
    lines = [ln for ln in summary.lines(flooded) if "SLO MISSED" in ln]
    assert lines and "would meet it" in lines[0] and "a converge stops before applying anything" in lines[0]


def test_a_converge_stops_on_a_missed_slo_naming_model_slo_and_gpus(flooded):
    from ansible_collections.inference.blueprints.plugins.module_utils.intent import slo_gate

    with pytest.raises(slo_gate.MissedSLO) as err:
        slo_gate.stop({"chat-east-1": flooded})
    ((path, msg),) = err.value.errors
    assert path == "host chat-east-1: models[0].slo"
    assert "models[0] (qwen-chat) misses its SLO (TTFT p95 1000 ms, TPOT p95 30 ms) on 16 x h100" in msg
    assert "would meet it; nothing was applied" in msg and "accept_missed_slo: true" in msg
    assert slo_gate.failure_fields(err.value)["missed_slo"]["chat-east-1"]


def test_accept_missed_slo_applies_and_says_so():
    from ansible_collections.inference.blueprints.plugins.module_utils.intent import slo_gate

    intent = _intent(models=_flood(), accept_missed_slo=True)
    slo_gate.stop({"chat-east-1": intent})  # no stop
    assert any("accept_missed_slo is true: the plan is applied anyway" in ln for ln in summary.lines(intent))


def test_a_render_is_not_stopped_and_says_so():
    from ansible_collections.inference.blueprints.plugins.module_utils.intent import slo_gate

    intent = _intent(models=_flood(), delivery="render")
    slo_gate.stop({"chat-east-1": intent})
    assert any("rendered for review anyway" in ln for ln in summary.lines(intent))


@pytest.mark.parametrize("site", EXAMPLES)
def test_every_example_converges_its_plans_meet_their_slos_or_say_why_not(site):
    from ansible_collections.inference.blueprints.plugins.module_utils.intent import slo_gate

    intents = cli.site_intents(str(INVENTORIES / site), None)
    slo_gate.stop(intents)  # raises for a plan that misses without accept_missed_slo
    for intent in intents.values():
        if intent["site"]["accept_missed_slo"]:
            text = (INVENTORIES / site / "group_vars" / "all" / "site.yml").read_text()
            assert "misses its TTFT SLO here, knowingly" in text, "an example that accepts a miss says why"


def test_the_converge_exit_code_of_a_missed_slo():
    from ansible_collections.inference.blueprints.plugins.plugin_utils import converge

    tracker = converge.Tracker(plays=[converge.Play("platform", "platform", 1)], stages=["platform"])
    tracker.on_event({"event": "playbook_on_play_start", "event_data": {"play": "platform"}})
    tracker.on_event(
        {
            "event": "runner_on_failed",
            "event_data": {
                "task": "preflight",
                "resolved_action": "inference.blueprints.cluster_facts",
                "res": {"msg": "the plan misses its SLOs", "missed_slo": {"chat-east-1": ["..."]}},
            },
        }
    )
    assert tracker.exit_hint == converge.EXIT_MISSED_SLO == 6
    assert "nothing was applied" in converge.EXIT_CODES[6]


def test_an_alias_that_ansible_reserves_is_still_checked_in_a_playbook_run():
    """`namespace` is one of Ansible's reserved names, which the action's check leaves alone: not an alias."""
    from ansible_collections.inference.blueprints.plugins.plugin_utils import intents

    names = intents.ansible_names()
    assert "namespace" not in names and "environment" in names and "inventory_hostname" in names


def test_the_converge_summary_shows_an_accepted_miss_first():
    from ansible_collections.inference.blueprints.plugins.plugin_utils import converge

    intent = _intent(models=_flood(), accept_missed_slo=True)
    lines = summary.fleet_lines({"chat-east-1": intent})
    shown = converge.key_choices(lines)
    assert "SLO MISSED" in shown[0] and "applied anyway" in shown[0], shown
