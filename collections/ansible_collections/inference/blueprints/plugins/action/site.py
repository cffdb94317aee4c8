# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for inference.blueprints.site: validate, plan and compute the deployment intent
of one or many clusters on the controller, from the hosts' inventory variables."""

from __future__ import annotations

from ansible_collections.inference.blueprints.plugins.module_utils import inventory_files
from ansible_collections.inference.blueprints.plugins.module_utils.intent import schema, summary
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import SchemaError
from ansible_collections.inference.blueprints.plugins.plugin_utils import intents as intents_mod

ARGUMENT_SPEC = {
    "hosts": {"type": "list", "elements": "str"},
    "blueprints_dir": {"type": "path"},
    "report": {"type": "bool", "default": False},
    "set_facts": {"type": "bool", "default": True},
    "stop_on_missed_slo": {"type": "bool", "default": False},
}


class ActionModule(intents_mod.IntentAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = self._args()
        task_vars = task_vars or {}
        hosts = self._hosts(args, task_vars)
        try:
            # a key given twice in an inventory file: Ansible deployed the last value after a warning
            dups = inventory_files.duplicate_key_errors(task_vars.get("ansible_inventory_sources"))
            if dups:
                raise SchemaError(dups)
            intents = intents_mod.compute(
                task_vars,
                hosts,
                args["blueprints_dir"],
                variable_manager=self._task.get_variable_manager(),
                stop_missed_slo=args["stop_on_missed_slo"],
            )
        except SchemaError as e:
            return self._schema_failure(result, e)
        result["changed"] = False
        if args["set_facts"]:
            result["ansible_facts"] = {"site_intents": intents}
        result["hosts"] = sorted(intents)
        result["deliveries"] = {h: i["site"]["delivery"] for h, i in intents.items()}
        result["summary"] = summary.fleet_lines(intents)
        if args["report"] and not self._task.check_mode:
            unwritable = [
                ("report_dir", f"host {h}: {why}; valid: a directory this user can create and write "
                 "(default reports/<site_name> under the working directory)")
                for h, i in sorted(intents.items())
                if (why := schema.unwritable_dir(i["site"]["report_dir"]))
            ]  # fmt: skip
            if unwritable:
                return self._schema_failure(result, SchemaError(unwritable))
            result["reports"] = self._write_reports(intents)
        return result

    @staticmethod
    def _write_reports(intents: dict) -> list[str]:
        """One sizing report per site (report_dir), with every cluster's plans."""
        by_dir: dict[str, dict] = {}
        for host, intent in intents.items():
            by_dir.setdefault(intent["site"]["report_dir"], {})[host] = intent
        return [summary.write_site_report(group, directory)[0] for directory, group in sorted(by_dir.items())]
