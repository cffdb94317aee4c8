# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deployment intent of one cluster: everything the templates render, computed once.

``site_intent(host, values, names, ...)`` = validate (``site.resolve``) -> plan every model
(``site.plan_models``) -> intent. The site action plugin, ``playbooks/plan.yml``, the
``blueprints`` CLI and the sizing report all call this one function. docs/contracts.md
describes the intent and its readers.
"""

from __future__ import annotations

import os

from .. import ownership
from ..planner.inputs import plain
from ..slo import spec as slo_spec
from . import burst, gitops, grid, inventory, platform, serving, slo_gate, traffic_paths
from . import site as site_mod

INTENT_VERSION = 1
MANAGED_BY = "inference-blueprints"

# Which stage deploys each component (blueprint files list components in apply order).
SERVING_COMPONENTS = (
    "kv_cache",
    "inference_scheduler",
    "model_service",
    "ai_gateway",
    "burst_routing",
    "serving_autoscaling",
    "observability",
)
CHECK_COMPONENTS = ("preflight",)


def variable_names() -> frozenset[str]:
    """Every inventory variable a site may set (what the action plugin reads from hostvars)."""
    return frozenset(inventory.all_variables())


def common_labels(site: dict) -> dict:
    return {
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "app.kubernetes.io/part-of": site["site_name"],
        "inference.blueprints/blueprint": site["blueprint"],
    }


def site_intent(  # noqa: PLR0913 - the run's inventory directories (render_dir must lie outside them)
    host: str, values: dict, names, bdir_candidates: list[str], ignore=(), *, inventory_dirs=()
) -> dict:
    """Validate, plan and build the intent of one cluster host. Raises SchemaError on bad input."""
    site = site_mod.resolve(
        str(host), values, bdir_candidates, names=names, ignore=ignore, inventory_dirs=inventory_dirs
    )
    grid.validate(site)  # the AI grid's rules between variables, before anything is planned
    burst.validate(site)  # sovereign burst: clusters, classes, digests, kubeconfig context (intent/burst.py)
    site = burst.fit(site)  # this cluster's models, traffic and standing footprint
    plans = site_mod.plan_models(site)
    intent = build(site, plans)
    # plans that miss their SLOs on this hardware, with the GPUs that would meet them (intent/slo_gate.py): the plan
    # summary says them and a converge that applies stops on them unless the site accepts them
    intent["site"]["accept_missed_slo"] = bool(site.get("accept_missed_slo"))
    intent["slo_misses"] = slo_gate.misses(site, plans, site_mod.cached_plan)
    return plain(intent)


def build(site: dict, plans: list[dict]) -> dict:
    labels = common_labels(site)
    components = site["components"]
    intent = {
        "version": INTENT_VERSION,
        "host": site["host"],
        "site": {
            "name": site["site_name"],
            "blueprint": site["blueprint"],
            "blueprint_file": site["blueprint_data"]["path"],
            "description": site["blueprint_data"]["description"],
            "delivery": site["delivery"],
            "render_dir": os.path.abspath(site["render_dir"]),
            "report_dir": os.path.abspath(site["report_dir"]),
            "namespace": site["serving_namespace"],
            "connection": {"kubeconfig": site["k8s_kubeconfig"], "context": site["k8s_context"]},
            # hosts of the site meant to reach this same cluster (preflight refuses any other two on one cluster)
            "same_cluster_as": list(site["same_cluster_as"]),
        },
        "labels": labels,
        # what the site created and what it may take over (module_utils/ownership.py): the apply, drift and
        # teardown engines read it
        "ownership": ownership.policy(site["site_name"], site["adopt"]),
        "components": components,
        "stages": {
            "serving": [c for c in components if c in SERVING_COMPONENTS],
            "platform": [c for c in components if c not in SERVING_COMPONENTS and c not in CHECK_COMPONENTS],
        },
        "options": {role: site["options"][role] for role in inventory.component_names()},
        "hardware": site["hardware"],
        "blueprint": {
            "name": site["blueprint"],
            "components": components,
            "policy": site["blueprint_data"]["policy"],
            "defaults": site["blueprint_data"]["defaults"],
        },
        # [{model: the inventory's model entry (defaults filled), plan: the planner's plan}]
        "plans": plans,
        "decisions": [],
    }
    # the engine the serving pods run: the vLLM version the plans were written for (the site's vllm_version or the
    # planner's default) and the image when the site pins one; preflight checks it against OpenShift AI's presets
    intent["engine"] = {
        "vllm_version": plans[0]["plan"]["vllm_version"] if plans else None,
        "stated": bool(site.get("vllm_version")),
        "image": burst.engine_image(site),
    }
    intent["serving"] = serving.build(site, plans, intent)
    # the AI grid's front door (tenants, tiers, cascade) and its plan report (intent/grid.py)
    intent["gateway"] = grid.build(site, intent)
    # sovereign burst: the front door and its pin, or the burst cluster's scale-from-zero (intent/burst.py)
    intent["burst"] = burst.build(site, intent)
    # the platform the serving stage needs (intent/platform.py), not yet bound to a cluster read:
    # the newest APIs; the preflight step binds it to what the cluster serves
    intent["platform"] = platform.build(intent)
    intent["stages"]["platform"] = intent["platform"]["components"]
    # the NetworkPolicies that admit exactly the paths serving needs, from every front door (intent/traffic_paths.py)
    intent["serving"]["network_policies"] = traffic_paths.network_policies(intent)
    intent["gitops"] = gitops.build(site, intent)
    # verify's SLO benchmark bounds and the canary's gates (slo/spec.py, docs/verify.md)
    intent["verify"] = slo_spec.intent_section(site, intent)
    return intent
