# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a site created, and what it only found: the rule that keeps a teardown from destroying
what it did not create.

Every object a converge creates carries the annotation ``inference.blueprints/created-by`` with
the site's name, written with the object's first apply and kept by every later apply (the apply
engine's field manager owns it). Labels do not prove ownership: they are ours to set on any
object we apply, and a taken-over namespace carried them.

For each object of an apply, against its live copy (``classify``):

``new``      no live copy: created now, annotated (``stamp``);
``ours``     the live copy carries this site's annotation: applied, annotation kept;
``adopted``  it exists without it, and the site lists it in ``adopt``: applied as it is,
             never annotated, so never deleted;
``foreign``  it exists without it (or with another site's) and is not adopted: the whole apply
             stops before its first write, naming each such object and the ``adopt`` entry
             that would take it over.

A removal deletes only ``ours``; the rest is reported as kept. What a controller made of our
objects goes with them: pods of a Deployment through their owner references, and the CSV OLM
installed for one of our Subscriptions, which no garbage collector removes, because the removal
names it in the policy's ``derived`` list (``Kind/namespace/name``).

``adopt`` entries name objects as ``Kind/name`` (cluster-scoped) or ``Kind/namespace/name``; a
whole part may be ``*`` (``*/team-a/*``: every object in namespace team-a).

Pure Python: the apply and drift engines, the intent and the inventory check share it.
"""

from __future__ import annotations

import re

ANNOTATION = "inference.blueprints/created-by"
NEW, OURS, ADOPTED, FOREIGN = "new", "ours", "adopted", "foreign"

_PART = r"(\*|[A-Za-z0-9][-A-Za-z0-9_.:]*)"
ADOPT_ENTRY = re.compile(rf"^{_PART}/({_PART}/)?{_PART}$")
ADOPT_DOC = "Kind/name or Kind/namespace/name, '*' for a whole part (e.g. Namespace/team-a, */team-a/*)"


def check_entry(value: str) -> str | None:
    """An inventory check: None when ``value`` is a valid ``adopt`` entry, else what is wrong."""
    if not ADOPT_ENTRY.match(str(value)):
        return f"{value!r} does not name objects; valid: {ADOPT_DOC}"
    return None


def policy(site_name: str, adopt=()) -> dict:
    """The ownership policy of one site: what the apply, drift and removal engines take as ``ownership``."""
    return {"annotation": ANNOTATION, "value": site_name, "adopt": list(adopt or [])}


def of_intent(intent: dict) -> dict:
    """The policy of a cluster's deployment intent: the site's (its name, its ``adopt``) with what the platform
    decided from the cluster read (``intent.platform.ownership``): objects an operator the site installs makes
    itself (``derived``: OpenShift AI's DSCInitialization) and objects the platform merges into by design
    (``adopt``: an existing cluster-monitoring-config)."""
    own = intent["ownership"]
    extra = (intent.get("platform") or {}).get("ownership") or {}
    return {
        **own,
        "adopt": list(dict.fromkeys([*own.get("adopt", []), *extra.get("adopt", [])])),
        "derived": list(dict.fromkeys([*own.get("derived", []), *extra.get("derived", [])])),
    }


def ref(obj: dict) -> str:
    """``Kind/name`` or ``Kind/namespace/name``: the form of ``adopt`` entries and of our messages."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{obj.get('kind')}/{ns}/{meta.get('name')}" if ns else f"{obj.get('kind')}/{meta.get('name')}"


def adopted(obj: dict, entries) -> bool:
    kind = obj.get("kind")
    meta = obj.get("metadata") or {}
    name, ns = meta.get("name"), meta.get("namespace")
    for entry in entries or []:
        parts = str(entry).split("/")
        if len(parts) == 2:
            k, n, nm = parts[0], None, parts[1]
        elif len(parts) == 3:
            k, n, nm = parts
        else:
            continue
        if k not in ("*", kind) or nm not in ("*", name):
            continue
        if (n is None and not ns) or (n is not None and ns and n in ("*", ns)):
            return True
    return False


def creator(live: dict | None) -> str | None:
    return (((live or {}).get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)


def classify(obj: dict, live: dict | None, own: dict) -> str:
    if live is None:
        return NEW
    if creator(live) == own["value"] or ref(obj) in (own.get("derived") or ()):
        return OURS
    return ADOPTED if adopted(obj, own.get("adopt")) else FOREIGN


def stamp(obj: dict, own: dict) -> dict:
    """``obj`` with the site's creation annotation (a new mapping; ``obj`` is not changed)."""
    meta = dict(obj.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), own["annotation"]: own["value"]}
    return {**obj, "metadata": meta}


def prepared(obj: dict, live: dict | None, own: dict) -> tuple[str, dict]:
    """``(class, the object to apply)``: annotated when new or ours, as rendered when adopted."""
    cls = classify(obj, live, own)
    return cls, (stamp(obj, own) if cls in (NEW, OURS) else obj)


def refusal(foreign: list[tuple[dict, dict]], own: dict) -> str:
    """The message of an apply that stops on objects it did not create: ``[(obj, live)]``."""
    lines = []
    for obj, live in foreign:
        other = creator(live)
        whose = f"created by site {other!r}" if other else "not created by inference.blueprints"
        lines.append(f"{ref(obj)} ({whose})")
    entries = ", ".join(f'"{ref(o)}"' for o, _live in foreign)
    return (
        f"{len(foreign)} object(s) already exist and were not created by site {own['value']!r}: "
        + "; ".join(lines)
        + f". Nothing was applied. To deploy into them, list them in the site variable `adopt` (adopt: [{entries}]): "
        "an adopted object is updated by the converge and never deleted by a teardown"
    )
