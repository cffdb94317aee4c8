"""One authority for scheduler configs: the llm-d router's own loader.

``eppcheck`` (tests/dataplane/router/cmd/eppcheck) runs the EPP runner's setup of llm-d-router
v0.9.0 on a config file, the start-up path the epp binary takes in pool mode, and says whether the
router loads it. Here it judges:

* every scheduler config every example site renders (and the P/D plan of test_pd.py): loaded;
* each bad-input case of the Python pre-check (``router_registry.precheck``): the pre-check refuses
  it with the inventory variable to change, and the config the intent would have rendered without
  the pre-check is refused by the router too; each case of the same inputs made valid loads.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import router_registry
from ansible_collections.inference.blueprints.plugins.module_utils.intent import scheduler

from .conftest import pd_traffic, routed_models
from .harness import binary

SITES = ("example-chat", "example-rag", "example-batch", "example-ai-grid", "example-sovereign-burst")


def loads(config: dict, tmp_path, cluster) -> tuple[bool, str]:
    """(loaded?, the router's error) for one config, by the router's own start-up code (the control
    plane answers the discovery its controller manager makes when it is built)."""
    path = tmp_path / f"config-{abs(hash(json.dumps(config, sort_keys=True)))}.json"
    path.write_text(json.dumps(config))
    res = subprocess.run(
        [binary("eppcheck"), path],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
    )
    if res.returncode not in (0, 1):
        raise AssertionError(f"eppcheck failed to run ({res.returncode}): {res.stderr[-2000:]}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    return out["loaded"], out.get("error", "")


def _rendered():
    out = []
    for site in SITES:
        out += [(f"{site}/{host}/{m['name']}", m["scheduler"]["config"]) for host, m, _ in routed_models(site)]
    out += [
        (f"example-chat+8k-prompts/{host}/{m['name']}", m["scheduler"]["config"])
        for host, m, _ in routed_models("example-chat", pd_traffic())
    ]
    return out


RENDERED = _rendered()


@pytest.mark.parametrize("config", [c for _, c in RENDERED], ids=[i for i, _ in RENDERED])
def test_every_rendered_config_loads_in_the_router(dp_cluster, tmp_path, config):
    ok, err = loads(config, tmp_path, dp_cluster)
    assert ok, err


# Inputs of scheduler.epp_config: the good case and bad variants of it. Each bad case names the
# inventory variable the pre-check must point at.
GOOD = {
    "disaggregated": True,
    "weights": {"prefix_cache": 3, "queue": 2, "kv_cache": 2},
    "non_cached_tokens": 256,
    "bands": [
        {"tier": "gold", "priority": 100, "max_requests": 4},
        {"tier": "bronze", "priority": 0, "max_requests": 60},
    ],
    "request_ttl": "15s",
}
BAD = {
    "two tiers of one priority": (
        {
            "bands": [
                {"tier": "gold", "priority": 50, "max_requests": 4},
                {"tier": "silver", "priority": 50, "max_requests": 8},
            ]
        },
        "priority_classes",
    ),
    # grid.flow_control writes f"{queue_seconds:g}s": 0.00001 s of queue becomes "1e-05s"
    "a queue_seconds that prints in exponent form": ({"request_ttl": "1e-05s"}, "tiers"),
    "a negative non-cached token count": ({"non_cached_tokens": -1}, "pd_non_cached_tokens"),
}


def _build(inputs: dict, check: bool) -> dict:
    return scheduler.epp_config(
        inputs["disaggregated"],
        inputs["weights"],
        inputs["non_cached_tokens"],
        {"bands": inputs["bands"], "request_ttl": inputs["request_ttl"]},
        precheck=check,
    )


def test_the_good_inputs_pass_both(dp_cluster, tmp_path):
    assert (
        router_registry.precheck(**{k: GOOD[k] for k in ("weights", "bands", "request_ttl", "non_cached_tokens")}) == []
    )
    ok, err = loads(_build(GOOD, check=True), tmp_path, dp_cluster)
    assert ok, err


@pytest.mark.parametrize("case", sorted(BAD))
def test_the_precheck_and_the_router_agree(dp_cluster, tmp_path, case):
    change, variable = BAD[case]
    inputs = {**GOOD, **change}
    problems = router_registry.precheck(
        **{k: inputs[k] for k in ("weights", "bands", "request_ttl", "non_cached_tokens")}
    )
    assert problems, f"{case}: the pre-check lets it through"
    assert all(path.startswith(variable) for path, _ in problems), problems
    with pytest.raises(scheduler.SchedulerConfigError):
        _build(inputs, check=True)
    ok, err = loads(_build(inputs, check=False), tmp_path, dp_cluster)
    assert not ok, f"{case}: the pre-check refuses it but the router loads it"


def test_the_router_needs_the_decider_before_its_handler(dp_cluster, tmp_path):
    """Why scheduler.epp_config lists the P/D decider before the disagg handler: router v0.9.0 builds
    plugins in list order, and the handler looks its decider up when it is built."""
    cfg = _build(GOOD, check=True)
    plugins = cfg["plugins"]
    at = {p["type"]: i for i, p in enumerate(plugins)}
    assert at["prefix-based-pd-decider"] < at["disagg-profile-handler"]
    ok, err = loads(cfg, tmp_path, dp_cluster)
    assert ok, err
    i, j = at["prefix-based-pd-decider"], at["disagg-profile-handler"]
    plugins[i], plugins[j] = plugins[j], plugins[i]
    ok, err = loads(cfg, tmp_path, dp_cluster)
    assert not ok
    assert "prefix-based-pd-decider" in err, err
