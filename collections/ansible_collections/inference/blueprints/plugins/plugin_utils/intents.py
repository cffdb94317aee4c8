# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deployment intents inside action plugins: computed from the hosts' inventory variables (the one
function, intent/build.py) or taken from the ``site_intents`` fact an earlier task set.

Actions that work on many clusters at once (the render actions of a fleet) compute the intents
they lack themselves, in one process, instead of asking every host to carry every other host's
intent as a fact (that copying grows with the square of the fleet).
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.vars.reserved import get_reserved_names
from ansible_collections.inference.blueprints.plugins.module_utils.intent import build, gitops, keys, schema, slo_gate
from ansible_collections.inference.blueprints.plugins.module_utils.intent import names as names_mod

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


def ansible_names() -> frozenset[str]:
    """Names Ansible defines or reserves, which the misspelled-variable check leaves alone; except the aliases the
    site schema declares (``namespace`` is a reserved name and what users write for serving_namespace)."""
    return MAGIC | (frozenset(get_reserved_names()) - frozenset(keys.aliases()))


def blueprint_dirs(task_vars: dict, explicit: str | None = None) -> list[str]:
    """Where to look for blueprint files: explicit, next to the playbooks, next to the inventory, the cwd."""
    dirs = [explicit] if explicit else []
    playbook_dir = task_vars.get("playbook_dir")
    inventory_dir = task_vars.get("inventory_dir")
    if playbook_dir:
        dirs += [os.path.join(playbook_dir, "..", "blueprints"), os.path.join(playbook_dir, "..", "..", "blueprints")]
    if inventory_dir:
        dirs += [os.path.join(inventory_dir, "..", "..", "blueprints"), os.path.join(inventory_dir, "..", "blueprints")]
    dirs.append(os.path.join(os.getcwd(), "blueprints"))
    return [d for d in dirs if d]


def runtime_names(variable_manager, host: str) -> frozenset[str]:
    """Names a run set on the host (registered results, set_fact, facts): not inventory variables,
    so the misspelled-variable check leaves them alone."""
    names: set[str] = set()
    for cache_name in ("_nonpersistent_fact_cache", "_fact_cache"):
        cache = getattr(variable_manager, cache_name, None)
        try:
            names.update((cache or {}).get(host) or {})
        except (TypeError, KeyError, AttributeError):
            continue
    return frozenset(names)


def compute(
    task_vars: dict, hosts, blueprints_dir: str | None = None, variable_manager=None, stop_missed_slo: bool = True
) -> dict[str, dict]:
    """{host: intent} from each host's variables. Raises SchemaError on bad input, and MissedSLO (a SchemaError)
    when a cluster that applies has plans that miss their SLOs and its site does not accept it (``stop_missed_slo``
    false: plan.yml, which only prints the plan)."""
    ignore = ansible_names()
    candidates = blueprint_dirs(task_vars, blueprints_dir)
    hostvars = task_vars["hostvars"]
    wanted = build.variable_names()
    out = {}
    for host in hosts:
        if host not in hostvars:
            raise AnsibleActionFail(f"unknown host {host!r}")
        hv = hostvars[host]
        names = [to_text(n) for n in hv]
        # the raw values' size first: templating an alias bomb alone would take minutes
        raw = hostvars.raw_get(host) if hasattr(hostvars, "raw_get") else hv
        schema.check_sizes({n: raw[n] for n in names if n in wanted and n in raw})
        values = {n: hv[n] for n in names if n in wanted}
        values["inventory_dir"] = hv.get("inventory_dir")  # where a model's config.json path is relative to
        set_by_run = runtime_names(variable_manager, host) if variable_manager is not None else frozenset()
        inventory_dirs = names_mod.inventory_dirs_of(task_vars, {"inventory_dir": hv.get("inventory_dir")})
        out[host] = build.site_intent(
            host, values, names, candidates, ignore=ignore | set_by_run, inventory_dirs=inventory_dirs
        )
    gitops.check_destinations(out)  # between the clusters: one destination per GitOps cluster
    if stop_missed_slo:
        slo_gate.stop(out)  # before anything is applied or written (intent/slo_gate.py)
    return out


def known(task_vars: dict, host: str) -> dict | None:
    """The intent the ``site_intents`` fact holds for host (this task's own facts first), or None."""
    mine = (task_vars.get("ansible_facts") or {}).get("site_intents") or {}
    if host in mine:
        return mine[host]
    hostvars = task_vars["hostvars"]
    raw = hostvars.raw_get(host) if hasattr(hostvars, "raw_get") else hostvars[host]
    return ((raw.get("ansible_facts") or {}).get("site_intents") or {}).get(host)


def get(task_vars: dict, hosts, variable_manager=None) -> dict[str, dict]:
    """{host: intent}: the known ones, the others computed here. Raises SchemaError on bad input."""
    out = {h: known(task_vars, h) for h in hosts}
    missing = [h for h, i in out.items() if i is None]
    if missing:
        out.update(compute(task_vars, missing, variable_manager=variable_manager))
    return out


class IntentAction(ActionBase):
    """Base of the actions that work from deployment intents: they run on the controller only,
    need no connection, are check-mode safe, take ``hosts`` (default: the task's host) and turn a
    SchemaError into a failed result that lists every problem by path."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _supports_async = False
    ARGUMENT_SPEC: dict = {}

    def _args(self, **rules) -> dict:
        return self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC, **rules)[1]

    @staticmethod
    def _hosts(args: dict, task_vars: dict) -> list[str]:
        return args.get("hosts") or [task_vars["inventory_hostname"]]

    def _intents(self, task_vars: dict, hosts) -> dict[str, dict]:
        """{host: intent}: the site_intents fact where a host has one, else computed here."""
        return get(task_vars, hosts, variable_manager=self._task.get_variable_manager())

    @staticmethod
    def _schema_failure(result: dict, error) -> dict:
        result.update(failed=True, msg=str(error), errors=[{"path": p, "msg": m} for p, m in error.errors])
        result.update(slo_gate.failure_fields(error))
        return result
