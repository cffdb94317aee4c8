# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The task of inference.blueprints.cluster_facts (action plugin and module share it).

Reading and evaluating live in ``cluster_facts``; this file connects them to the shared
client (:mod:`k8s_client`) and turns the outcome into the task result.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.inference.blueprints.plugins.module_utils import k8s_client as kc
from ansible_collections.inference.blueprints.plugins.module_utils import serving_preflight
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
    # what to read and check comes from the host's deployment intent, which is then bound to the read
    # (controller only: plugin_utils/stage_apply.py)
    from_intent=dict(type="dict", options=dict(checks=dict(type="bool", default=True))),
    **kc.AUTH_ARG_SPEC,
)
FROM_INTENT_ONLY = (
    "from_intent is resolved by the action plugin on the controller, where the deployment intent is; "
    "the module takes source, hardware, packages and requirements"
)


_NOT_FROM_DISCOVERY = object()
_GROUP_VERSION_PATH = re.compile(r"/apis/([^/]+)/([^/]+)")


def from_discovery(data, path):
    """Answer ``GET /apis`` and ``GET /apis/<group>/<version>`` from aggregated discovery.

    ``data`` is the discovery document of :class:`k8s_client.Discovery`. Returns the
    APIGroupList / APIResourceList the path would return, None where that path would be
    404 or 503 (a group/version not served, or one the server could not refresh), or
    ``_NOT_FROM_DISCOVERY`` for any other path (read from the server).
    """
    if not data or not data.get("aggregated"):
        return _NOT_FROM_DISCOVERY
    if path == "/apis":
        groups = [
            {
                "name": name,
                "versions": [{"groupVersion": f"{name}/{v}", "version": v} for v in versions],
                "preferredVersion": {"groupVersion": f"{name}/{versions[0]}", "version": versions[0]},
            }
            for name, versions in data["groups"].items()
            if name and versions
        ]
        return {"kind": "APIGroupList", "groups": groups}
    match = _GROUP_VERSION_PATH.fullmatch(path)
    if not match:
        return _NOT_FROM_DISCOVERY
    gv = f"{match.group(1)}/{match.group(2)}"
    kinds = data["resources"].get(gv)
    if kinds is None or gv in data.get("stale", []):
        return None
    resources = [
        {"name": plural, "kind": kind, "namespaced": bool(namespaced), "verbs": list(verbs)}
        for kind, (plural, namespaced, verbs, _subresources) in sorted(kinds.items())
    ]
    return {"kind": "APIResourceList", "groupVersion": gv, "resources": resources}


def reader(client):
    """``get(path) -> dict | None`` over the client: None for 404 (absent), 403 (not ours to
    read) and 503 (an aggregated API such as packagemanifests that is down).

    The served groups and their resources come from one fresh aggregated discovery (two
    requests instead of one per group/version), which also refreshes the discovery cache
    the later tasks of the run read.

    ``get.prefetch(paths)`` reads paths the facts will need concurrently (PREFETCH_WORKERS at a
    time) and keeps each answer, or its error, for the one ``get`` that asks for it: the reads
    then cost about one round trip instead of one each.
    """
    data = client.discovery.refresh()
    fetched = {}

    def read(path):
        answer = from_discovery(data, path)
        if answer is not _NOT_FROM_DISCOVERY:
            return answer
        try:
            return client.request("GET", path)
        except kc.ApiError as exc:
            if exc.status in (403, 404, 503):
                return None
            raise kc.ClientError(f"GET {path}: {exc.message}") from exc

    def outcome(path):
        try:
            return read(path), None
        except kc.ClientError as exc:
            return None, exc

    def prefetch(paths):
        wanted = [p for p in dict.fromkeys(paths) if p not in fetched]
        if len(wanted) < 2:
            return
        with ThreadPoolExecutor(max_workers=min(PREFETCH_WORKERS, len(wanted))) as pool:
            for i, answer in enumerate(pool.map(outcome, wanted)):
                fetched[wanted[i]] = answer

    def get(path):
        if path not in fetched:
            return read(path)
        answer, error = fetched.pop(path)
        if error is not None:
            raise error
        return answer

    get.prefetch = prefetch
    return get


PREFETCH_WORKERS = 8


def run(params, check_mode=False, diff=False, env=None):
    """The cluster_facts task: a result dict (``failed``/``msg`` on failure). Never writes."""
    del check_mode, diff
    if params.get("from_intent"):
        return {"failed": True, "msg": FROM_INTENT_ONLY}
    p = params
    requirements = requirements_from_plans(p["plans"], p["hardware"], p["components"], p["requirements"])
    serving = None
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
            if requirements.get("serving") or requirements.get("pods"):
                # what serving reads when its pods start: claims, Secrets, the GPUs other pods hold
                serving = serving_preflight.gather(get, requirements.get("serving") or {})
        except kc.ClientError as exc:
            return {"failed": True, "msg": f"could not read cluster facts: {exc}"}

    unmet = evaluate(facts, requirements)
    if serving is not None:
        unmet += serving_preflight.evaluate(facts, serving, requirements, unmet)
    result = {"changed": False, "cluster_facts": facts, "requirements": requirements, "unmet": unmet}
    if unmet and p["fail_on_unmet"]:
        lines = "\n".join(f"  - {u}" for u in unmet)
        result.update(failed=True, msg=f"preflight: {len(unmet)} requirement(s) not met; nothing was changed:\n{lines}")
    return result
