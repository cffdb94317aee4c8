# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for inference.blueprints.access: the RBAC each stage needs, from the deployment intent."""

from __future__ import annotations

from ansible_collections.inference.blueprints.plugins.module_utils import k8s_apply as apply_mod
from ansible_collections.inference.blueprints.plugins.module_utils.intent import access as access_mod
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import SchemaError
from ansible_collections.inference.blueprints.plugins.plugin_utils import access as access_render
from ansible_collections.inference.blueprints.plugins.plugin_utils import intents as intents_mod
from ansible_collections.inference.blueprints.plugins.plugin_utils import render as render_mod

ARGUMENT_SPEC = access_mod.ARGUMENT_SPEC


class ActionModule(intents_mod.IntentAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = self._args()
        task_vars = task_vars or {}
        me = task_vars["inventory_hostname"]
        try:
            intent = self._intents(task_vars, [me])[me]
            rendered = access_render.rendered_stages(intent, args["stages"])
        except SchemaError as e:
            return self._schema_failure(result, e)
        except render_mod.RenderError as e:
            result.update(failed=True, msg=f"inference.blueprints.access: {e}")
            return result
        roles = access_mod.access(intent, rendered)
        binds = []
        if args["subject"]:
            s = args["subject"]
            try:
                binds = access_mod.bindings(roles, access_mod.subject_of(s["kind"], s["name"], s.get("namespace")))
            except ValueError as e:
                result.update(failed=True, msg=f"inference.blueprints.access: {e}")
                return result
        namespaces = access_mod.namespaces_needed(roles, rendered)
        objects = namespaces + [r for objs in roles.values() for r in objs] + binds
        files, changed = [], False
        if args["dest"]:
            try:
                written, _diffs, changed = apply_mod.render(objects, args["dest"], None, self._task.check_mode)
            except apply_mod.render_tree_mod.TreeError as e:
                result.update(failed=True, msg=f"inference.blueprints.access: {e}")
                return result
            files = [w["path"] for w in written]
        result.update(
            changed=changed,
            roles=roles,
            bindings=binds,
            namespaces=namespaces,
            objects=objects,
            summary=access_mod.summary(roles),
            files=files,
            msg=f"{sum(len(v) for v in roles.values())} roles, {len(binds)} bindings, {len(namespaces)} namespaces",
        )
        return result
