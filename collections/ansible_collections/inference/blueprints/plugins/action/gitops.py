# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for inference.blueprints.gitops: write the GitOps repository tree of the play's
clusters whose delivery is gitops, in one task."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import SchemaError
from ansible_collections.inference.blueprints.plugins.plugin_utils import gitops as gitops_mod
from ansible_collections.inference.blueprints.plugins.plugin_utils import intents as intents_mod
from ansible_collections.inference.blueprints.plugins.plugin_utils import render as render_mod

ARGUMENT_SPEC = {"hosts": {"type": "list", "elements": "str"}}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        task_vars = task_vars or {}
        hosts = args["hosts"] or [task_vars["inventory_hostname"]]
        try:
            intents = intents_mod.get(task_vars, hosts, variable_manager=self._task.get_variable_manager())
            sites: dict[str, dict] = {}
            for host, intent in intents.items():
                if intent["site"]["delivery"] == "gitops":
                    sites.setdefault(intent["site"]["render_dir"], {})[host] = intent
            files = []
            for root, members in sorted(sites.items()):
                files += gitops_mod.write(root, gitops_mod.site_tree(members), bool(self._task.check_mode))
        except SchemaError as e:
            result.update(failed=True, msg=str(e), errors=[{"path": p, "msg": m} for p, m in e.errors])
            return result
        except render_mod.RenderError as e:
            result.update(failed=True, msg=f"inference.blueprints.gitops: {e}")
            return result
        changed = [f for f in files if f["action"] != "unchanged"]
        result.update(
            changed=bool(changed),
            files=files,
            trees=sorted(sites),
            msg=f"{len(files)} files in {', '.join(sorted(sites)) or 'no tree'} ({len(changed)} written or removed)",
        )
        return result
