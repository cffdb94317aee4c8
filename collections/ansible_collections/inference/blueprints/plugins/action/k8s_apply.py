# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for inference.blueprints.k8s_apply: server-side apply of many objects, in-process on the controller.

Same arguments, results, check and diff mode as the module (the same module_utils engine);
see plugin_utils/k8s_action.py for when the module runs instead. ``from_intent`` (a stage's
objects rendered from the deployment intent, the platform's two phases) is resolved here:
plugin_utils/stage_apply.py.
"""

from __future__ import annotations

from ansible_collections.inference.blueprints.plugins.module_utils.k8s_apply import (
    ARGUMENT_SPEC,
    MUTUALLY_EXCLUSIVE,
    run,
)
from ansible_collections.inference.blueprints.plugins.plugin_utils import stage_apply
from ansible_collections.inference.blueprints.plugins.plugin_utils.k8s_action import K8sAction


class ActionModule(K8sAction):
    MODULE = "inference.blueprints.k8s_apply"
    ARGUMENT_SPEC = ARGUMENT_SPEC
    MUTUALLY_EXCLUSIVE = MUTUALLY_EXCLUSIVE
    BULKY = ("objects", "claim_objects")
    OWNERSHIP = True
    RUN = staticmethod(run)
    FROM_INTENT = staticmethod(stage_apply.run_apply)
