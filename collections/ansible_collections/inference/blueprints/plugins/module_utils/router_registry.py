# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The llm-d router (endpoint picker, EPP) each KServe release runs, the few facts of it the intent
renders, and the checks of scheduler inputs a user must hear before anything is applied.

Which EndpointPickerConfig the router accepts is decided by the router: the data-plane tests run
llm-d-router v0.9.0's own start-up code on every config the examples render and on each case this
pre-check refuses (tests/dataplane/test_config_loader.py, ``eppcheck``), and they fail when the two
disagree. Nothing here restates the router's plugin registry or loader rules.

Sources (repository llm-d/llm-d-router unless said otherwise): kserve/kserve v0.20.0
config/llmisvcconfig/config-llm-scheduler.yaml (image), pkg/epp/server/controller_config.go and
pkg/epp/metadata/consts.go (InferenceObjective API and header), pkg/epp/config/loader/flowcontrol.go
and pkg/epp/flowcontrol/registry/config.go (priority bands), pkg/epp/flowcontrol/controller/config.go
(request TTL).
"""

from __future__ import annotations

import re

REPO = "llm-d/llm-d-router"

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

# What the intent renders for a router version (the data-plane tests send requests with this header
# to objectives of this API and see their priorities applied: tests/dataplane/test_priority.py).
ROUTER_VERSIONS = {
    "v0.9.0": {
        "source": f"{REPO} tag v0.9.0 (commit 5f4e762f341a5196393ce79f8a57c3e1900c4a6b)",
        "config_api_version": "llm-d.ai/v1alpha1",
        "inference_objective": {
            "api_version": "llm-d.ai/v1alpha2",
            "header": "x-llm-d-inference-objective",
            "source": "pkg/epp/server/controller_config.go; pkg/epp/metadata/consts.go",
        },
    },
}


def router_version_info(router_version: str) -> dict:
    """The facts of one router version (accepts '0.9.0' or 'v0.9.0')."""
    key = router_version if router_version.startswith("v") else "v" + router_version
    if key not in ROUTER_VERSIONS:
        raise KeyError(
            f"router version {router_version!r} is not described; known: {', '.join(sorted(ROUTER_VERSIONS))}"
        )
    return ROUTER_VERSIONS[key]


# A Go time.Duration as metav1.Duration decodes it (strict JSON: a string such as "15s" or "1m30s").
_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")


def precheck(weights: dict, bands: list[dict] | None, request_ttl: str | None, non_cached_tokens: int) -> list:
    """What the router would refuse in the scheduler config these inputs make, as (variable, message).

    ``weights``: {prefix_cache, queue, kv_cache} (inventory ``scorer_weights``; the inventory schema
    already holds them to numbers >= 0, and the router loads any such weights); ``bands``: the
    flow-control bands [{tier, priority, max_requests}] (``priority_classes`` and ``tiers``);
    ``request_ttl``: the flow-control request TTL (the longest ``tiers.*.queue_seconds``);
    ``non_cached_tokens``: the P/D decider's threshold (plan or ``inference_scheduler_pd_non_cached_tokens``).
    Each case is one the router refuses (tests/dataplane/test_config_loader.py shows it does).
    """
    del weights  # any weights >= 0 load; kept in the signature so every input passes through here
    problems = []
    seen: dict[int, str] = {}
    for band in bands or []:
        prio = int(band["priority"])
        tier = band.get("tier", f"priority {prio}")
        if prio in seen:
            problems.append(
                (
                    "priority_classes",
                    f"tiers {seen[prio]!r} and {tier!r} have priority {prio}: the router takes one flow-control band "
                    "per priority and refuses two; give each tier's class a priority of its own",
                )
            )
        seen.setdefault(prio, tier)
    if request_ttl is not None and not (isinstance(request_ttl, str) and _DURATION.match(request_ttl)):
        problems.append(
            (
                "tiers",
                f"the request TTL {request_ttl!r} (the longest queue_seconds, in seconds) is not a Go duration the "
                "router reads; write queue_seconds as a plain decimal number of seconds, e.g. 15 or 0.5",
            )
        )
    if int(non_cached_tokens) < 0:
        problems.append(
            (
                "pd_non_cached_tokens",
                f"{non_cached_tokens} is negative; the P/D decider takes 0 or more non-cached tokens",
            )
        )
    return problems
