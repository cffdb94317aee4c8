# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render the platform stage from a cluster's deployment intent, in its two phases.

Phase ``operators``: the OLM objects of every selected component (Namespace, OperatorGroup,
Subscription; ``roles/olm_operator/templates/objects.yml.j2``). Phase ``operands``: the custom
resources of those operators (``roles/<component>/templates/objects.yml.j2``). Both come from
``intent.platform`` (``module_utils/intent/platform.py``) through ``render.py``, like the serving
stage. An operand whose API the bound cluster does not serve is left out, with the reason
(``platform.unserved``), and so is its wait. The action plugin ``inference.blueprints.platform``
and the golden-file tests call these.
"""

from __future__ import annotations

from ansible_collections.inference.blueprints.plugins.module_utils import ownership
from ansible_collections.inference.blueprints.plugins.module_utils.intent import platform as platform_mod
from ansible_collections.inference.blueprints.plugins.plugin_utils import render

OPERATORS_TEMPLATE = "olm_operator"
PHASES = ("operators", "operands")


def view(intent: dict, components: list[str], removal: bool = False) -> dict:
    """The intent as the templates of ``components`` see it: only their operators; for a removal
    only the operators we created, with their installed CSVs."""
    p = intent["platform"]
    ops = [o for o in p["operators"] if o["component"] in components and (o["ours"] or not removal)]
    return {**intent, "platform": {**p, "operators": ops, "removal": removal}}


def _waits(platform: dict, phase: str, components: list[str]) -> list[dict]:
    return [
        w
        for w in platform["waits"][phase]
        if w["component"] in components
        and not platform_mod.unserved(platform, w["component"], w["apiVersion"], w["kind"])
    ]


def render_phase(intent: dict, phase: str, components=None, state: str = "present") -> dict:
    """``{objects, waits, dropped, components}`` of one phase (``operators``, ``operands`` or ``all``).

    ``waits`` keep their ``timeout`` and ``component`` (see ``intent/waits.py`` for the k8s_wait
    specs); there are none for a removal. ``dropped``: operands left out, each with why.
    """
    p = intent["platform"]
    comps = platform_mod.selected(p, components)
    removal = state == "absent"
    v = view(intent, comps, removal)
    phases = PHASES if phase == "all" else (phase,)
    objects, waits, dropped = [], [], []
    if "operators" in phases and v["platform"]["operators"]:
        objects.extend(render.render_component(OPERATORS_TEMPLATE, v))
        if not removal:
            waits.extend(_waits(p, "operators", comps))
    if "operands" in phases:
        for comp in comps:
            for obj in render.render_component(comp, v):
                why = None if removal else platform_mod.unserved(p, comp, obj["apiVersion"], obj["kind"])
                if why:
                    meta = obj["metadata"]
                    ref = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
                    dropped.append(
                        {
                            "component": comp,
                            "apiVersion": obj["apiVersion"],
                            "kind": obj["kind"],
                            "name": meta["name"],
                            "namespace": meta.get("namespace"),
                            "why": why,
                            "message": f"{obj['kind']} {ref} ({why})",
                        }
                    )
                else:
                    objects.append(obj)
        if not removal:
            waits.extend(_waits(p, "operands", comps))
    timeout = max([intent["options"][c][f"{c}_timeout"] for c in comps] or [0])
    # a removal deletes the CSVs OLM installed for the site's Subscriptions with them (they carry no annotation)
    derived = [ownership.ref(o) for o in objects if o["kind"] == "ClusterServiceVersion"] if removal else []
    own = ownership.of_intent(intent)
    return {
        "objects": objects,
        "waits": waits,
        "dropped": dropped,
        "components": comps,
        "timeout": timeout,
        # the objects every site of the collection on the cluster shares, each site's claim recorded on them
        "ownership": {
            **own,
            "derived": own["derived"] + derived,
            "shared": platform_mod.shared_objects(intent, objects),
        },
    }


def policy(*phases: dict) -> dict:
    """One ownership policy for an apply of several phases' objects (their shared and derived entries joined)."""
    own = dict(phases[0]["ownership"])
    for key in ("shared", "derived"):
        own[key] = [e for p in phases for e in p["ownership"][key]]
    return own
