# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for inference.blueprints.k8s_endpoints: read the services, probe and smoke-test them, in-process.

Same arguments and results as the module (the same module_utils engine); see plugin_utils/k8s_action.py
for when the module runs instead.
"""

from __future__ import annotations

from ansible_collections.inference.blueprints.plugins.module_utils.k8s_endpoints import ARGUMENT_SPEC, run
from ansible_collections.inference.blueprints.plugins.plugin_utils.k8s_action import K8sAction


class ActionModule(K8sAction):
    MODULE = "inference.blueprints.k8s_endpoints"
    ARGUMENT_SPEC = ARGUMENT_SPEC
    BULKY = ("models",)  # the intent's model entries: large, passed through as mappings

    RUN = staticmethod(run)
