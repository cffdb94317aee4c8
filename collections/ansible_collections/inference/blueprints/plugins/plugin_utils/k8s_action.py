# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Base of the controller-side action plugins k8s_apply, k8s_wait and cluster_facts.

Each runs its task in-process on the controller, through the same module_utils engine as the
module of the same name: no AnsiballZ transfer or interpreter start per task, the
client code imported once by the controller (before Ansible forks its workers), one client
per connection and the discovery cache of ``module_utils.k8s_client``.

The module runs instead (on the target, as before) when the host's connection is not
``local`` (the kubeconfig then lives on that host), when the controller's Python lacks
urllib3, or when ``INFERENCE_BLUEPRINTS_K8S_EXECUTION=module`` is set (for
comparisons and debugging).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_client as kc
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_wait, ownership
from ansible_collections.inference.blueprints.plugins.plugin_utils import intents as intents_mod

ENV_EXECUTION = "INFERENCE_BLUEPRINTS_K8S_EXECUTION"

display = Display()


class K8sAction(ActionBase):
    """Validate the arguments like the module would, then run ``RUN`` in-process."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    MODULE = ""  # FQCN of the module of the same name (the fallback)
    ARGUMENT_SPEC: dict = {}
    MUTUALLY_EXCLUSIVE: list | None = None
    REQUIRED_ONE_OF: list | None = None
    # Options of type list/elements dict that can be large (all the objects of a stage):
    # the argument spec validator deep-copies every value, which costs more than applying a
    # hundred objects, so these are checked here (a list of mappings) and passed through.
    BULKY: tuple = ()

    # The module takes ``ownership`` (k8s_apply, k8s_drift): a task that gives none gets the policy of its host's
    # deployment intent when one is known, so that no playbook can forget it and delete what the site did not create
    OWNERSHIP = False

    @staticmethod
    def RUN(params, check_mode=False, diff=False, env=None):  # noqa: N802 - set by subclasses
        raise NotImplementedError

    # ``from_intent`` (k8s_apply, k8s_wait): resolved here, on the controller, where the deployment
    # intent is; fn(action, task_vars, validated_args, env, in_process) -> result (stage_apply.py)
    FROM_INTENT = None

    def _environment(self):
        """The controller's environment plus the task's ``environment:`` keyword."""
        env = dict(os.environ)
        task_env = {}
        self._compute_environment_string(raw_environment_out=task_env)
        env.update({k: str(v) for k, v in task_env.items()})
        return env

    def _in_process(self, env):
        if env.get(ENV_EXECUTION, "").lower() == "module":
            return False
        if getattr(self._connection, "transport", "local") != "local":
            return False
        return kc.HAS_KUBERNETES

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        env = self._environment()
        if self.FROM_INTENT is not None and self._task.args.get("from_intent") is not None:
            args = self._validated()
            try:
                with k8s_wait.reporting(self._progress(task_vars or {})):
                    outcome = type(self).FROM_INTENT(self, task_vars or {}, args, env, self._in_process(env))
            finally:
                kc.release()
            result.update(outcome)
            return result
        own = self._site_ownership(task_vars or {})
        if not self._in_process(env):
            module_args = {**self._task.args, **({"ownership": own} if own else {})}
            result.update(self._execute_module(module_name=self.MODULE, module_args=module_args, task_vars=task_vars))
            return result
        args = self._validated()
        if own:
            args["ownership"] = own
        try:
            with k8s_wait.reporting(self._progress(task_vars or {})):
                outcome = type(self).RUN(
                    args, check_mode=bool(self._task.check_mode), diff=bool(self._task.diff), env=env
                )
        finally:
            kc.release()  # the worker exits with os._exit: no atexit clean-up of credential files
        result.update(outcome)
        return result

    @staticmethod
    def _progress(task_vars: dict):
        """Where a wait's progress lines go while the task runs on the controller: the play's output."""
        host = task_vars.get("inventory_hostname") or "localhost"
        return lambda line: display.display(f"{host}: {line}")

    def _site_ownership(self, task_vars: dict) -> dict | None:
        """The ownership policy of the host's deployment intent, for a task that gives none."""
        if not self.OWNERSHIP or "ownership" in self._task.args:
            return None
        intent = (
            intents_mod.known(task_vars, task_vars.get("inventory_hostname")) if task_vars.get("hostvars") else None
        )
        return ownership.of_intent(intent) if intent and intent.get("ownership") else None

    def _validated(self):
        bulky = {k: self._task.args[k] for k in self.BULKY if self._task.args.get(k) is not None}
        for key, value in bulky.items():
            if not isinstance(value, list):
                raise AnsibleActionFail(f"{key} must be a list of mappings, got {type(value).__name__}")
            for index, item in enumerate(value):
                if not isinstance(item, Mapping):
                    raise AnsibleActionFail(f"{key}[{index}] must be a mapping, got {type(item).__name__}")
        full_args = self._task.args
        try:
            self._task.args = {**full_args, **dict.fromkeys(bulky, [])}
            _validation, args = self.validate_argument_spec(
                argument_spec=self.ARGUMENT_SPEC,
                mutually_exclusive=self.MUTUALLY_EXCLUSIVE,
                required_one_of=self.REQUIRED_ONE_OF,
            )
        finally:
            self._task.args = full_args
        args.update(bulky)
        return args
