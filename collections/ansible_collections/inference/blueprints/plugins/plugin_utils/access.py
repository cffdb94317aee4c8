# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What each stage applies, waits for and removes, rendered for ``module_utils/intent/access.py``."""

from __future__ import annotations

from ansible_collections.inference.blueprints.plugins.module_utils.intent import platform as platform_mod
from ansible_collections.inference.blueprints.plugins.module_utils.intent import waits as waits_mod
from ansible_collections.inference.blueprints.plugins.plugin_utils import platform as render_platform
from ansible_collections.inference.blueprints.plugins.plugin_utils import render as render_mod


def _union(lists) -> list:
    out = []
    for items in lists:
        out.extend(i for i in items if i not in out)
    return out


def rendered_stages(intent: dict, stages) -> dict:
    """``{stage: {objects, waits, removal}}``.

    The platform stage's objects and waits depend on the cluster it is bound to (API versions, which
    MachineConfigPools exist, whether it is a single node). Its rights are the union over the intent
    as given (bound to a cluster read when ``access.yml`` applies the roles), unbound (every operand,
    at the newest API versions) and bound to a cluster where everything a wait depends on exists.
    """
    out = {}
    if "platform" in stages:
        variants = [
            intent,
            platform_mod.bind(intent, None),
            platform_mod.bind(intent, {"source": "assumed", "assume_present": True}),
        ]
        present = [render_platform.render_phase(v, "all") for v in variants]
        # teardown removes the operands of every component the blueprint has (platform.available, as
        # roles/deploy/tasks/platform_absent.yml does), deployed now or not: a component turned off since an
        # earlier converge (the network operator once no traffic crosses nodes) may still have objects there
        removal = [render_platform.render_phase(v, "all", v["platform"]["available"], state="absent") for v in variants]
        out["platform"] = {
            "objects": _union(p["objects"] for p in present),
            "waits": _union(p["waits"] for p in present),
            "removal": _union(r["objects"] for r in removal),
        }
    if "serving" in stages:
        roles = intent["stages"]["serving"]
        out["serving"] = {
            "objects": render_mod.render_components(roles, intent),
            "waits": waits_mod.for_components(intent, roles),
            "references": waits_mod.references(intent, roles),
        }
    return out
