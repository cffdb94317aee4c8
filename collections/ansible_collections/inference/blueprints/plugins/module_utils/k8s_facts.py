# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The task of inference.blueprints.cluster_facts (action plugin and module share it).

Reading and evaluating live in ``cluster_facts``; this file connects them to the shared
client (:mod:`k8s_client`) and turns the outcome into the task result.
"""

from __future__ import annotations

from ansible_collections.inference.blueprints.plugins.module_utils import k8s_client as kc
from ansible_collections.inference.blueprints.plugins.module_utils.cluster_facts import (
    DEFAULT_GROUPS,
    evaluate,
    facts_from_inventory,
    gather,
    gather_api,
    requirements_from_plans,
)

ARGUMENT_SPEC = dict(
    source=dict(type="str", choices=["cluster", "inventory"], default="cluster"),
    gather_subset=dict(type="str", choices=["all", "api"], default="all"),
    hardware=dict(type="dict", default={}),
    openshift_version=dict(type="str"),
    groups=dict(type="list", elements="str"),
    packages=dict(type="list", elements="str", default=[]),
    plans=dict(type="list", elements="dict", default=[]),
    components=dict(type="list", elements="str", default=[]),
    requirements=dict(type="dict", default={}),
    fail_on_unmet=dict(type="bool", default=True),
    **kc.AUTH_ARG_SPEC,
)


def reader(client):
    """``get(path) -> dict | None`` over the client: None for 404 (absent), 403 (not ours to
    read) and 503 (an aggregated API such as packagemanifests that is down)."""

    def get(path):
        try:
            return client.request("GET", path)
        except kc.ApiError as exc:
            if exc.status in (403, 404, 503):
                return None
            raise kc.ClientError(f"GET {path}: {exc.message}") from exc

    return get


def run(params, check_mode=False, diff=False, env=None):
    """The cluster_facts task: a result dict (``failed``/``msg`` on failure). Never writes."""
    del check_mode, diff
    p = params
    if p["source"] == "inventory":
        facts = facts_from_inventory(p["hardware"], p["openshift_version"])
    else:
        if not kc.HAS_KUBERNETES:
            return {
                "failed": True,
                "msg": f"cluster_facts needs the kubernetes Python package: {kc.KUBERNETES_IMPORT_ERROR}",
            }
        try:
            get = reader(kc.get_client(p, env))
            if p["gather_subset"] == "api":
                return {"changed": False, "cluster_facts": gather_api(get), "requirements": {}, "unmet": []}
            groups = tuple(p["groups"]) if p["groups"] else DEFAULT_GROUPS
            facts = gather(get, groups=groups, packages=p["packages"])
        except kc.ClientError as exc:
            return {"failed": True, "msg": f"could not read cluster facts: {exc}"}

    requirements = requirements_from_plans(p["plans"], p["hardware"], p["components"], p["requirements"])
    unmet = evaluate(facts, requirements)
    result = {"changed": False, "cluster_facts": facts, "requirements": requirements, "unmet": unmet}
    if unmet and p["fail_on_unmet"]:
        lines = "\n".join(f"  - {u}" for u in unmet)
        result.update(failed=True, msg=f"preflight: {len(unmet)} requirement(s) not met; nothing was changed:\n{lines}")
    return result
