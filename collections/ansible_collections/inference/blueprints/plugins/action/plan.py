# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Action plugin for inference.blueprints.plan: the planner runs on the controller, next to its catalogs."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.inference.blueprints.plugins.module_utils.planner import PlanError, plan
from ansible_collections.inference.blueprints.plugins.module_utils.planner.spec import ARGUMENT_SPEC, REQUIRED_ONE_OF


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC, required_one_of=REQUIRED_ONE_OF)
        del validation
        inputs = {k: v for k, v in args.items() if v is not None}
        if inputs.get("policy") == {}:
            inputs.pop("policy")
        try:
            result["plan"] = plan(inputs)
        except PlanError as e:
            result.update(failed=True, msg=str(e), field=e.field)
            return result
        except (TypeError, ValueError) as e:  # a malformed nested value the planner did not anticipate
            raise AnsibleActionFail(f"inference.blueprints.plan: {e}") from e
        result["changed"] = False
        return result
