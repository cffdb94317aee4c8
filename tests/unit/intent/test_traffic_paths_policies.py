"""The site's NetworkPolicies read back from the API server as written (intent/traffic_paths.py).

The API server stores an empty ``matchLabels`` as absent: a peer written with ``podSelector: {matchLabels: {}}``
came back without it, and drift.yml reported every site's policies as changed out of band on every run (the
reliability catalogue's teardown test caught it). Every selector the policies carry is therefore non-empty.
"""

from __future__ import annotations

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli

from tests.serving_helpers import EXAMPLES, INVENTORIES


def _selectors(policy: dict):
    yield policy["pod_selector"]
    for rule in policy["ingress"]:
        for peer in rule["from"]:
            for key in ("podSelector", "namespaceSelector"):
                if key in peer:
                    yield peer[key]["matchLabels"]


@pytest.mark.parametrize("inventory", EXAMPLES)
def test_no_policy_carries_an_empty_selector(inventory):
    for intent in cli.site_intents(str(INVENTORIES / inventory), None).values():
        policies = intent["serving"]["network_policies"]
        assert policies, f"{inventory}: no NetworkPolicy rendered"
        for p in policies:
            assert all(_selectors(p)), f"{p['name']}: an empty selector would read back as absent (drift)"
