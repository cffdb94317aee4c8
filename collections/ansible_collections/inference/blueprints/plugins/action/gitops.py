# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for inference.blueprints.gitops: write the GitOps repository tree of the play's
clusters whose delivery is gitops, in one task."""

from __future__ import annotations

from ansible_collections.inference.blueprints.plugins.module_utils import render_tree as tree_mod
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import SchemaError
from ansible_collections.inference.blueprints.plugins.plugin_utils import gitops as gitops_mod
from ansible_collections.inference.blueprints.plugins.plugin_utils import intents as intents_mod
from ansible_collections.inference.blueprints.plugins.plugin_utils import render as render_mod

ARGUMENT_SPEC = {
    "hosts": {"type": "list", "elements": "str"},
    "write": {"type": "bool", "default": True},
    "stages": {"type": "list", "elements": "str", "choices": ["platform", "serving"], "default": ["serving"]},
}


class ActionModule(intents_mod.IntentAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = self._args()
        task_vars = task_vars or {}
        try:
            intents = self._intents(task_vars, self._hosts(args, task_vars))
            if not args["write"]:
                return self._tracked(result, intents, args["stages"])
            sites: dict[str, dict] = {}
            for host, intent in intents.items():
                if intent["site"]["delivery"] == "gitops":
                    sites.setdefault(intent["site"]["render_dir"], {})[host] = intent
            # every tree is checked before the first is written: a refusal leaves all of them as they were
            plans = [gitops_mod.plan(root, gitops_mod.site_tree(members)) for root, members in sorted(sites.items())]
            files = [f for p in plans for f in tree_mod.apply(p, bool(self._task.check_mode))]
        except SchemaError as e:
            return self._schema_failure(result, e)
        except (render_mod.RenderError, tree_mod.TreeError) as e:
            result.update(failed=True, msg=f"inference.blueprints.gitops: {e}")
            return result
        changed = [f for f in files if f["action"] != "unchanged"]
        lines = tree_mod.summary(files)
        warnings = [w for root, hosts in sorted(sites.items()) if (w := gitops_mod.legacy_root_warning(root, hosts))]
        if warnings:
            result["warnings"] = warnings
        result.update(
            changed=bool(changed),
            files=files,
            trees=sorted(sites),
            file_changes=changed,
            msg=f"{len(files)} files in {', '.join(sorted(sites)) or 'no tree'} ({len(changed)} added, changed or "
            "removed)" + "".join(f"\n  {line}" for line in lines[:200]),
        )
        return result

    @staticmethod
    def _tracked(result: dict, intents: dict, stages: list[str]) -> dict:
        """write=false: what each GitOps cluster's Applications deploy, as Argo CD tracks it (drift.yml)."""
        objects = {}
        for host, intent in intents.items():
            if intent["site"]["delivery"] != "gitops":
                continue
            components = [c for stage in stages for c in intent["stages"][stage]]
            objects[host] = gitops_mod.tracked(intent, components)
        result.update(
            changed=False,
            objects=objects,
            msg=f"{sum(len(v) for v in objects.values())} objects of {len(objects)} GitOps cluster(s)",
        )
        return result
