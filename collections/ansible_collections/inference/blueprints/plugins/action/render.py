# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for inference.blueprints.render: a stage's objects from the deployment intent."""

from __future__ import annotations

import os

from ansible_collections.inference.blueprints.plugins.module_utils import k8s_apply as apply_mod
from ansible_collections.inference.blueprints.plugins.module_utils import render_tree as tree_mod
from ansible_collections.inference.blueprints.plugins.module_utils.intent import waits as waits_mod
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import SchemaError
from ansible_collections.inference.blueprints.plugins.plugin_utils import intents as intents_mod
from ansible_collections.inference.blueprints.plugins.plugin_utils import render as render_mod

ARGUMENT_SPEC = {
    "stage": {"type": "str", "choices": ["platform", "serving"]},
    "components": {"type": "list", "elements": "str"},
    "hosts": {"type": "list", "elements": "str"},
    "write": {"type": "bool", "default": True},
    "deliveries": {"type": "list", "elements": "str", "choices": ["apply", "render", "gitops"]},
}


class ActionModule(intents_mod.IntentAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = self._args(required_one_of=[["stage", "components"]], mutually_exclusive=[["stage", "components"]])
        task_vars = task_vars or {}
        hosts = self._hosts(args, task_vars)
        per_host, changed, files, apply_hosts, file_changes = {}, False, [], [], []
        try:
            intents = self._intents(task_vars, hosts)
        except SchemaError as e:
            return self._schema_failure(result, e)
        try:
            for host in hosts:
                intent = intents[host]
                if intent["site"]["delivery"] == "apply":
                    apply_hosts.append(host)
                if args["deliveries"] and intent["site"]["delivery"] not in args["deliveries"]:
                    continue
                roles = args["components"] or intent["stages"][args["stage"]]
                objects = render_mod.render_components(roles, intent)
                waits = waits_mod.for_components(intent, roles)
                per_host[host] = {
                    "objects": objects,
                    "waits": waits_mod.specs(waits),
                    "wait_timeout": waits_mod.timeout_of(waits),
                    "delivery": intent["site"]["delivery"],
                }
                if args["write"] and intent["site"]["delivery"] in ("render", "gitops"):
                    # one directory per cluster under the site's render_dir
                    # the tree writer owns only what it wrote (module_utils/render_tree.py); the whole serving
                    # stage is written in full, so its files of objects no longer rendered are removed (the
                    # platform stage's files are the platform action's, scope "platform")
                    whole = args["stage"] == "serving"
                    written, results, _diffs, host_changed = apply_mod.render_tree(
                        objects,
                        os.path.join(intent["site"]["render_dir"], host),
                        intent["serving"]["namespace"],
                        self._task.check_mode,
                        scope="serving" if whole else "components",
                        prune=whole,
                    )
                    changed |= host_changed
                    files.extend(r["path"] for r in written if r["action"] != "removed")
                    file_changes.extend(r for r in written if r["action"] != "unchanged")
                    per_host[host]["objects_written"] = results
        except (render_mod.RenderError, tree_mod.TreeError) as e:
            result.update(failed=True, msg=f"inference.blueprints.render: {e}")
            return result
        mine = per_host.get(task_vars["inventory_hostname"]) or {"objects": [], "waits": [], "wait_timeout": 0}
        result.update(
            changed=changed,
            objects=mine["objects"],
            waits=mine["waits"],
            wait_timeout=mine["wait_timeout"],
            files=files,
            file_changes=file_changes,
            hosts=sorted(per_host),
            counts={h: len(v["objects"]) for h, v in per_host.items()},
            apply_hosts=apply_hosts,
            msg=(
                ", ".join(f"{h}: {len(v['objects'])} objects" for h, v in sorted(per_host.items()))
                or "nothing rendered"
            )
            + "".join(f"\n  {line}" for line in tree_mod.summary(file_changes)[:200]),
        )
        return result
