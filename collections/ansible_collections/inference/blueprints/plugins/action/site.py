# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for inference.blueprints.site: validate, plan and compute the deployment intent
of one or many clusters on the controller, from the hosts' inventory variables."""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.vars.reserved import get_reserved_names
from ansible_collections.inference.blueprints.plugins.module_utils.intent import build
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import SchemaError
from ansible_collections.inference.blueprints.plugins.module_utils.planner import report

# Variables Ansible defines for every host; never site variables.
MAGIC = frozenset(
    (
        "hostvars",
        "groups",
        "group_names",
        "inventory_hostname",
        "inventory_hostname_short",
        "inventory_dir",
        "inventory_file",
        "playbook_dir",
        "play_hosts",
        "role_names",
        "role_name",
        "role_path",
        "role_uuid",
        "omit",
        "environment",
        "vars",
    )
)

ARGUMENT_SPEC = {
    "hosts": {"type": "list", "elements": "str"},
    "blueprints_dir": {"type": "path"},
    "report": {"type": "bool", "default": False},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _supports_async = False

    def _candidates(self, task_vars: dict, explicit: str | None) -> list[str]:
        dirs = [explicit] if explicit else []
        playbook_dir = task_vars.get("playbook_dir")
        inventory_dir = task_vars.get("inventory_dir")
        if playbook_dir:
            dirs += [
                os.path.join(playbook_dir, "..", "blueprints"),
                os.path.join(playbook_dir, "..", "..", "blueprints"),
            ]
        if inventory_dir:
            dirs += [
                os.path.join(inventory_dir, "..", "..", "blueprints"),
                os.path.join(inventory_dir, "..", "blueprints"),
            ]
        dirs.append(os.path.join(os.getcwd(), "blueprints"))
        return [d for d in dirs if d]

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        task_vars = task_vars or {}
        hosts = args["hosts"] or [task_vars["inventory_hostname"]]
        ignore = MAGIC | frozenset(get_reserved_names())
        candidates = self._candidates(task_vars, args["blueprints_dir"])
        hostvars = task_vars["hostvars"]
        intents = {}
        try:
            for host in hosts:
                if host not in hostvars:
                    raise AnsibleActionFail(f"inference.blueprints.site: unknown host {host!r}")
                hv = hostvars[host]
                names = [to_text(n) for n in hv]
                wanted = build.variable_names()
                values = {n: hv[n] for n in names if n in wanted}
                intents[host] = build.site_intent(host, values, names, candidates, ignore=ignore)
        except SchemaError as e:
            result.update(failed=True, msg=str(e), errors=[{"path": p, "msg": m} for p, m in e.errors])
            return result
        result["changed"] = False
        result["ansible_facts"] = {"site_intents": intents}
        result["hosts"] = sorted(intents)
        if args["report"] and not self._task.check_mode:
            result["reports"] = self._write_reports(intents)
        return result

    @staticmethod
    def _write_reports(intents: dict) -> list[str]:
        """One sizing report per site (report_dir), with every cluster's plans."""
        by_dir: dict[str, list] = {}
        for host, intent in intents.items():
            entries = by_dir.setdefault(intent["site"]["report_dir"], [])
            entries.extend((f"{host}/{p['model']['name']}", p["plan"]) for p in intent["plans"])
        return [report.write_report(entries, directory)[0] for directory, entries in sorted(by_dir.items())]
