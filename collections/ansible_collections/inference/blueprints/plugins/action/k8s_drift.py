# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for inference.blueprints.k8s_drift: out-of-band changes, in-process on the controller."""

from __future__ import annotations

from ansible_collections.inference.blueprints.plugins.module_utils.k8s_drift import ARGUMENT_SPEC, run
from ansible_collections.inference.blueprints.plugins.plugin_utils.k8s_action import K8sAction


class ActionModule(K8sAction):
    MODULE = "inference.blueprints.k8s_drift"
    ARGUMENT_SPEC = ARGUMENT_SPEC
    BULKY = ("objects",)
    OWNERSHIP = True

    RUN = staticmethod(run)
