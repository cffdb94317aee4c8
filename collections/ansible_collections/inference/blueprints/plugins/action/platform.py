# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for inference.blueprints.platform: bind the deployment intent to a cluster read,
and render the platform stage's objects and waits, phase by phase."""

from __future__ import annotations

import os

from ansible_collections.inference.blueprints.plugins.module_utils import cluster_facts as facts_mod
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_apply as apply_mod
from ansible_collections.inference.blueprints.plugins.module_utils import render_tree as tree_mod
from ansible_collections.inference.blueprints.plugins.module_utils.intent import platform as platform_mod
from ansible_collections.inference.blueprints.plugins.module_utils.intent import slo_gate
from ansible_collections.inference.blueprints.plugins.module_utils.intent import waits as waits_mod
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import SchemaError
from ansible_collections.inference.blueprints.plugins.plugin_utils import intents as intents_mod
from ansible_collections.inference.blueprints.plugins.plugin_utils import platform as render_platform
from ansible_collections.inference.blueprints.plugins.plugin_utils import render as render_mod

ARGUMENT_SPEC = {
    "bind": {"type": "dict"},
    "operators_ready": {"type": "bool", "default": False},
    "phase": {"type": "str", "choices": ["operators", "operands", "all"]},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "components": {"type": "list", "elements": "str"},
    "hosts": {"type": "list", "elements": "str"},
    "deliveries": {"type": "list", "elements": "str", "choices": ["apply", "render", "gitops"]},
    "write": {"type": "bool", "default": False},
    "check_inventory": {"type": "bool", "default": False},
}


class ActionModule(intents_mod.IntentAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = self._args(required_one_of=[["bind", "phase"]])
        task_vars = task_vars or {}
        me = task_vars["inventory_hostname"]
        check = bool(self._task.check_mode)
        bound = None
        try:
            if args["bind"] is not None:
                bound = platform_mod.bind(
                    self._intents(task_vars, [me])[me],
                    args["bind"],
                    operators_ready=args["operators_ready"],
                    dry_run=check,
                )
                # only this host's entry: every reader takes a host's intent from that host's facts, and a
                # fleet would otherwise copy every cluster's intent into every host's result
                result["ansible_facts"] = {"site_intents": {me: bound}}
                result["platform"] = platform_mod.summary(bound["platform"])
            if args["phase"]:
                out = self._render(task_vars, args, me, bound, check)
                if out.get("failed"):
                    result.update(out)
                    return result
                result.update(out)
        except (SchemaError, render_mod.RenderError, tree_mod.TreeError) as e:
            result.update(failed=True, msg=f"inference.blueprints.platform: {e}", **slo_gate.failure_fields(e))
            return result
        result.setdefault("changed", False)
        return result

    @staticmethod
    def _inventory_gaps(intent: dict) -> list[str]:
        """The preflight check of a cluster that is rendered, not read: the site's requirements
        (intent.platform.requirements) against what its inventory says the hardware is."""
        if not intent["options"]["preflight"]["preflight_fail_on_unmet"]:
            return []
        pre = intent["platform"]["preflight"]
        facts = facts_mod.facts_from_inventory(intent["hardware"], pre["openshift_version"])
        return facts_mod.evaluate(facts, intent["platform"]["requirements"])

    def _render(self, task_vars: dict, args: dict, me: str, bound: dict | None, check: bool) -> dict:
        hosts = args["hosts"] or [me]
        per_host, files, changed, gaps, file_changes = {}, [], False, [], []
        selected = []
        intents = self._intents(task_vars, [h for h in hosts if not (h == me and bound is not None)])
        for host in hosts:
            intent = bound if (host == me and bound is not None) else intents[host]
            if args["deliveries"] and intent["site"]["delivery"] not in args["deliveries"]:
                continue
            selected.append((host, intent))
            if args["check_inventory"]:
                gaps.extend(f"{host}: {gap}" for gap in self._inventory_gaps(intent))
        if gaps:
            lines = "\n".join(f"  - {g}" for g in gaps)
            return {
                "failed": True,
                "msg": f"preflight: {len(gaps)} requirement(s) not met; nothing was written:\n{lines}",
                "unmet": gaps,
            }
        for host, intent in selected:
            delivery = intent["site"]["delivery"]
            out = render_platform.render_phase(intent, args["phase"], args["components"], args["state"])
            per_host[host] = {**out, "intent": intent}
            if args["write"] and delivery in ("render", "gitops") and args["state"] == "present":
                # one directory per cluster under the site's render_dir; platform objects carry their
                # namespace (or are cluster-scoped): no default namespace is added
                # the one tree writer (module_utils/render_tree.py); the whole stage prunes what it no longer renders
                whole = args["phase"] == "all" and not args["components"]
                written, _results, _diffs, host_changed = apply_mod.render_tree(
                    out["objects"], os.path.join(intent["site"]["render_dir"], host), None, check,
                    scope="platform" if whole else "components", prune=whole,
                )  # fmt: skip
                changed |= host_changed
                files.extend(r["path"] for r in written if r["action"] != "removed")
                file_changes.extend(r for r in written if r["action"] != "unchanged")
        mine = per_host.get(me)
        if mine is None:
            return {"changed": changed, "objects": [], "waits": [], "wait_timeout": 0, "dropped": [], "files": files,
                    "file_changes": file_changes, "hosts": sorted(per_host),
                    "counts": {h: len(v["objects"]) for h, v in per_host.items()},
                    "operators_pending": [], "notes": []}  # fmt: skip
        p = mine["intent"]["platform"]
        return {
            "changed": changed,
            "objects": mine["objects"],
            "waits": waits_mod.specs(mine["waits"]),
            # the longest any component asks for (also the deadline of a removal's deletes)
            "wait_timeout": waits_mod.timeout_of(mine["waits"], mine["timeout"]),
            "dropped": mine["dropped"],
            "components": mine["components"],
            # what the site created (and, for a removal, the CSVs of its Subscriptions): k8s_apply's ownership
            "ownership": mine["ownership"],
            # operators the cluster read did not see installed: after phase 1 the flow reads the
            # cluster again and binds to the APIs they serve
            "operators_pending": [c for c in p["operators_pending"] if c in mine["components"]],
            "notes": p["notes"],
            "files": files,
            "file_changes": file_changes,
            "hosts": sorted(per_host),
            "counts": {h: len(v["objects"]) for h, v in per_host.items()},
        }
