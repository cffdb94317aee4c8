# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Platform objects several sites share: each site's claim, the merge of their claims, the last one out.

Some objects of a site are the cluster's, not the site's: the operators (their Namespace, OperatorGroup and
Subscription), their operands (ClusterPolicy, NodeFeatureDiscovery, DSCInitialization, DataScienceCluster,
KedaController...), the GatewayClass and the shared Gateway, the PinnedImageSet of a pool, the cluster monitoring
config. Every site of this collection on the cluster needs them; none of them may take them from another. Which
objects are shared by design is decided once, by the platform intent (``intent/platform.py``: ``sharing``); the
site's ownership policy lists them (``own["shared"]``: ``[{"ref": "Kind/ns/name", "merge": {path: rule}}]``).

The record is on the object itself, one annotation per site:

``inference.blueprints/claimed-by.<site>``  the site's claim; its value (JSON) names the site and holds what the
    site contributes to the object's merged fields (``{"site": ..., "merge": {"spec.pinnedImages": [...]}}``).

A per-site annotation, not a claims ConfigMap: the claim lives and dies with what it claims (no second object to
keep in step, none left behind by a deleted object, nothing to create in a namespace nobody owns), it is read with
the object in the same request, ``kubectl get -o yaml`` shows who holds an object, and one apply writes the
object's content and its claims together, so they cannot disagree.

``created-by`` (module_utils/ownership.py) keeps naming the site that created a shared object: it says the
collection created it, so the last claimant deletes it. An object a user created or adopted carries neither
annotation: it is never claimed, never deleted (the existing ``adopt`` rules apply to it).

Apply (``prepared``): a shared object that does not exist is created with ``created-by`` and the site's claim; one
that exists with the collection's annotations (any site's) is claimed, no ``adopt`` needed: the object applied is
the site's rendered one with every merged field the combination of every claim's contribution (``union`` of list
items, ``any`` of booleans), and every claim annotation kept. Every other field must be what the object already
holds when another site claims it: a difference is a conflict (``conflicts``), refused before anything is applied,
naming both sites and the field.

Removal (``removal``): the site's claim is dropped and the merge recomputed from the claims left (``released``);
the last claimant deletes the object; an object the site does not claim is kept.

Pure Python over plain data.
"""

from __future__ import annotations

import hashlib
import json

from . import ownership

PREFIX = "inference.blueprints/claimed-by."
RULES = ("union", "any")
# what an object a site claims with others becomes on a removal: released (others hold it), deleted (last one)
RELEASED = "released"


def key(site: str) -> str:
    """The annotation key of a site's claim (a name part is at most 63 characters: long names are hashed)."""
    name = f"claimed-by.{site}"
    if len(name) > 63:
        name = f"{name[:52]}-{hashlib.sha256(site.encode()).hexdigest()[:10]}"
    return "inference.blueprints/" + name


def entry(obj: dict, own: dict | None) -> dict | None:
    """The policy's shared entry of ``obj`` (``{"ref", "merge"}``), or None: the object is the site's alone."""
    ref = ownership.ref(obj)
    return next((e for e in (own or {}).get("shared") or [] if e.get("ref") == ref), None)


def _annotations(obj: dict | None) -> dict:
    return ((obj or {}).get("metadata") or {}).get("annotations") or {}


def claims(live: dict | None) -> dict:
    """``{site: contribution}`` of the claims on ``live``. An object created before claims existed (``created-by``
    and no claim) is claimed by its creator, with what it holds now."""
    out = {}
    for k, v in _annotations(live).items():
        if not k.startswith(PREFIX):
            continue
        try:
            parsed = json.loads(v)
        except (TypeError, ValueError):
            parsed = None
        if not isinstance(parsed, dict):
            parsed = {}
        out[parsed.get("site") or k[len(PREFIX) :]] = parsed.get("merge") or {}
    return out


def marked(live: dict | None) -> bool:
    """The object carries the collection's annotations: some site created or claims it."""
    notes = _annotations(live)
    return ownership.ANNOTATION in notes or any(k.startswith(PREFIX) for k in notes)


def lookup(obj, path):
    """The value at ``path`` (dotted, or a tuple of keys when a key holds a dot: ``data``/``config.yaml``)."""
    cur = obj
    for part in path.split(".") if isinstance(path, str) else path:
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _put(obj: dict, path: str, value) -> dict:
    """``obj`` with ``path`` set to ``value`` (None: removed); nested mappings copied on the way."""
    head, _sep, rest = path.partition(".")
    out = dict(obj)
    if not rest:
        if value is None:
            out.pop(head, None)
        else:
            out[head] = value
        return out
    out[head] = _put(dict(out.get(head) or {}), rest, value)
    return out


def contribution(obj: dict, merge: dict) -> dict:
    """What ``obj`` (one site's rendered object) puts into each merged field."""
    return {path: lookup(obj, path) for path in sorted(merge) if lookup(obj, path) is not None}


def combine(rule: str, values: list):
    if rule == "any":
        return any(bool(v) for v in values)
    out, seen = [], set()
    for value in values:
        for item in value or []:
            mark = json.dumps(item, sort_keys=True)
            if mark not in seen:
                seen.add(mark)
                out.append(item)
    return out


def merged(obj: dict, merge: dict, by_site: dict) -> dict:
    """``obj`` with every merged field the combination of the claims' contributions (sites in name order, so that
    whichever site applies, the object is the same)."""
    out = obj
    for path, rule in sorted(merge.items()):
        values = [c[path] for _site, c in sorted(by_site.items()) if path in c]
        out = _put(out, path, combine(rule, values) if values else None)
    return out


def _annotated(obj: dict, creator: str, by_site: dict) -> dict:
    meta = dict(obj.get("metadata") or {})
    notes = {k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith(PREFIX)}
    notes[ownership.ANNOTATION] = creator
    for site, merge in sorted(by_site.items()):
        notes[key(site)] = json.dumps({"site": site, "merge": merge}, sort_keys=True, separators=(",", ":"))
    meta["annotations"] = notes
    return {**obj, "metadata": meta}


def _with_creator(live: dict | None, merge: dict) -> dict:
    """The claims on ``live``, with an unclaimed creator (an object of an earlier release) counted as a claimant."""
    by_site = claims(live)
    creator = _annotations(live).get(ownership.ANNOTATION)
    if not by_site and creator:
        by_site[creator] = contribution(live, merge)
    return by_site


def prepared(obj: dict, live: dict | None, own: dict, shared: dict) -> dict:
    """The object a site applies to claim a shared object: its rendered ``obj`` merged with the other claims on
    ``live`` (None: it does not exist, the site creates it), every claim annotation kept."""
    merge = shared.get("merge") or {}
    by_site = {**_with_creator(live, merge), own["value"]: contribution(obj, merge)}
    creator = _annotations(live).get(ownership.ANNOTATION) or own["value"]
    return _annotated(merged(obj, merge, by_site), creator, by_site)


def released(obj: dict, live: dict, own: dict, shared: dict) -> dict | None:
    """What a removal applies to give a shared object back to the other sites that claim it: the merge of their
    claims, without this site's; None when no other site claims it (the last claimant deletes it)."""
    merge = shared.get("merge") or {}
    others = {s: c for s, c in _with_creator(live, merge).items() if s != own["value"]}
    if not others:
        return None
    return _annotated(merged(obj, merge, others), _annotations(live).get(ownership.ANNOTATION), others)


def claimants(live: dict | None) -> list[str]:
    return sorted(_with_creator(live, {}))


def _leaves(value, path=()):
    """``(path as a tuple of keys, value)`` of every value that is not a mapping (an empty mapping sets nothing)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    else:
        yield path, value


def _unset(node: dict, desired, path: tuple = ()):
    """Paths the field set ``node`` (fieldsV1 of the collection's field manager) holds and ``desired`` does not."""
    for k, sub in (node or {}).items():
        if not k.startswith("f:"):
            continue
        name = k[2:]
        if not isinstance(desired, dict) or desired.get(name) is None:
            yield (*path, name)
        elif isinstance(desired[name], dict):
            yield from _unset(sub, desired[name], (*path, name))


def conflicts(obj: dict, live: dict | None, own: dict, contains, owned: dict | None = None) -> list:
    """Fields of ``obj`` that the shared object ``live`` holds otherwise while another site claims it: the sites'
    settings of a shared object differ and cannot be merged. ``contains(want, have)``: the apply engine's test that
    a live value holds a desired one; ``owned``: the fields the collection's field manager set on ``live`` (one the
    site leaves unset would be dropped by its apply). Each is a sentence naming the object, the field, both sites."""
    others = [s for s in claimants(live) if s != own["value"]]
    if live is None or not others:
        return []
    merge = (entry(obj, own) or {}).get("merge") or {}
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}
    found = [(p, w, lookup(live, p)) for p, w in _leaves(body) if not contains(w, lookup(live, p))]
    found += [
        (p, None, lookup(live, p)) for p in _unset({k: v for k, v in (owned or {}).items() if k != "f:metadata"}, body)
    ]
    out = []
    for keys, want, have in found:
        path = ".".join(keys)
        if any(path == m or path.startswith(m + ".") for m in merge):
            continue
        sets = "leaves it unset" if want is None else f"sets {json.dumps(want)}"
        out.append(
            f"{ownership.ref(obj)} {path}: site {own['value']!r} {sets}, "
            f"site(s) {', '.join(repr(s) for s in others)} set {json.dumps(have)}"
        )
    return out


def refusal(found: list[str], own: dict) -> str:
    lines = "\n".join(f"  - {c}" for c in found)
    return (
        f"site {own['value']!r} and other sites of this cluster set {len(found)} field(s) of shared platform "
        f"objects differently, and those fields cannot be merged; nothing was applied:\n{lines}\n"
        "Shared platform objects (operators, their operands, the gateway, pinned images) hold one value for every "
        "site: set the same value in every site's inventory (or leave it to the default in all of them)"
    )


def removal(obj: dict, live: dict | None, own: dict, shared: dict) -> tuple[str, str | None, dict | None]:
    """What a site's removal does with a shared object: ``(action, why, object to apply)`` with action
    ``delete`` (this site is its last claimant), ``released`` (others claim it: apply the object given) or
    ``keep`` (this site does not claim it)."""
    holders = claimants(live)
    if own["value"] not in holders:
        return "keep", f"shared: claimed by site(s) {', '.join(holders)}, not by {own['value']!r}", None
    rest = released(obj, live, own, shared)
    if rest is None:
        return "delete", None, None
    left = [s for s in holders if s != own["value"]]
    return RELEASED, f"shared: still claimed by site(s) {', '.join(left)}; this site's claim removed", rest
