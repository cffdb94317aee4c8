# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where each key of the site schema lives, for the errors of a key given in the wrong place or nearly right.

Everything here is derived from the one schema (``inventory.SITE_FIELDS`` and the component options): the
places of every nested key (``max_model_len`` -> ``models[].max_model_len``), the aliases a Field declares
(``serving_namespace`` has ``namespace``). Three mistakes are told apart:

* a key the collection knows given at the wrong level: a nested key at the top level (``max_model_len``), a site
  variable inside a mapping (``models[0].serving_namespace``), a key of another block (``models[0].gpu``);
* a near miss of a known name: edit distance, an abbreviation part by part (``serving_ns``), or an alias;
* anything else at the top level is another playbook's variable and left alone (inventories are shared).

Nested keys claimed at the top level are the compound ones (``max_model_len``, ``arrival_rate_rps``): single words
(``name``, ``id``, ``gpu``, ``port``, ``path``, ``image``, ...) are everyday variable names of other roles, and the
keys of mappings passed through to Kubernetes as they are (``drop_unset``: tolerations) are Kubernetes' words.
"""

from __future__ import annotations

import difflib
import functools

from . import inventory
from .schema import Field


def _walk(rule: Field, path: str, out: dict[str, list[str]]) -> None:
    if rule.options and not rule.drop_unset:
        for key, sub in rule.options.items():
            out.setdefault(key, []).append(f"{path}.{key}")
            _walk(sub, f"{path}.{key}", out)
    if rule.elements is not None:
        _walk(rule.elements, f"{path}[]", out)
    if rule.values is not None:
        _walk(rule.values, f"{path}.<name>", out)


@functools.cache
def nested_places() -> dict[str, tuple[str, ...]]:
    """Every key of a mapping inside a site variable, with the paths it is valid at (``[]``: any list index)."""
    out: dict[str, list[str]] = {}
    for name, rule in inventory.SITE_FIELDS.items():
        _walk(rule, name, out)
    return {k: tuple(v) for k, v in out.items()}


@functools.cache
def aliases() -> dict[str, tuple[str, ...]]:
    """alias -> the variables or keys (by path) that declare it, from the Fields' ``aliases``."""
    out: dict[str, list[str]] = {}

    def walk(rule: Field, path: str) -> None:
        for alias in rule.aliases:
            out.setdefault(alias, []).append(path)
        if rule.options:
            for key, sub in rule.options.items():
                walk(sub, f"{path}.{key}")
        if rule.elements is not None:
            walk(rule.elements, f"{path}[]")

    for name, rule in inventory.SITE_FIELDS.items():
        walk(rule, name)
    return {k: tuple(v) for k, v in out.items()}


def _abbreviates(short: str, word: str) -> bool:
    """``short`` is ``word`` shortened: a prefix, or its letters in order starting with the same one (ns, namespace)."""
    if not short or short[0] != word[0] or len(short) >= len(word):
        return False
    rest = iter(word)
    return all(ch in rest for ch in short)


def abbreviation_of(name: str, valid) -> str | None:
    """The valid name ``name`` abbreviates part by part (``serving_ns`` -> ``serving_namespace``): as many
    ``_``-separated parts, at least one the same and at least one shortened, the others equal; None when none or
    several do."""
    parts = name.split("_")
    if len(parts) < 2:
        return None
    found = []
    for cand in valid:
        cparts = str(cand).split("_")
        if len(cparts) != len(parts) or cand == name:
            continue
        same = sum(a == b for a, b in zip(parts, cparts, strict=True))
        short = sum(_abbreviates(a, b) for a, b in zip(parts, cparts, strict=True))
        if same and short and same + short == len(parts):
            found.append(str(cand))
    return found[0] if len(found) == 1 else None


def near_miss(name: str, valid, cutoff: float | None = 0.8) -> str | None:
    """The valid name ``name`` nearly is: an alias it names, an abbreviation, or within edit distance (``cutoff``:
    difflib's ratio; None: no edit distance)."""
    valid = [str(v) for v in valid]
    for target in aliases().get(name, ()):
        leaf = target.rsplit(".", 1)[-1]
        if leaf in valid:
            return leaf
    close = difflib.get_close_matches(name, valid, n=1, cutoff=cutoff) if cutoff is not None else []
    return close[0] if close else abbreviation_of(name, valid)


def _fill(place: str, here: str) -> str:
    """``models[].traffic.x`` said for ``models[2]``: ``models[2].traffic.x`` (the indices of where it was given)."""
    head, _sep, rest = here.partition("[")
    if place.startswith(head + "[]") and rest:
        return f"{head}[{rest.split(']', 1)[0]}]{place[len(head) + 2 :]}"
    return place


def top_level_places(name: str) -> tuple[str, ...]:
    """The nested places of a top-level variable that is not a site variable, when the name is one the site claims
    (compound): ``max_model_len`` -> ``("models[].max_model_len",)``."""
    if "_" not in name.strip("_"):
        return ()
    return nested_places().get(name, ())


def wrong_level_variable(name: str) -> str | None:
    """The error of a top-level variable that is a nested key of the schema, or None."""
    places = top_level_places(name)
    if not places:
        return None
    shown = [p.replace("[]", "[<i>]") for p in places]
    return (
        f"not a site variable: {name!r} is a key of {_owners(places)}; give it at {' or '.join(shown)} "
        f"(nothing of this site reads {name!r} at the top level)"
    )


def _owners(places) -> str:
    return " and ".join(dict.fromkeys(p.rsplit(".", 1)[0] for p in places))


def unknown_key_hint(key: str, path: str, valid: dict) -> str | None:
    """The error of an unknown key of the mapping at ``path`` whose valid keys are ``valid``, when the collection
    knows better than 'unknown key': a site variable given inside a mapping, a key of another block, an alias or
    abbreviation of a key valid here or elsewhere. None: the validator's own message (its did-you-mean)."""
    key = str(key)
    if path.split(".", 1)[0].split("[", 1)[0] not in inventory.SITE_FIELDS:
        return None  # a component option's mapping (its role's argument spec): its own words
    places = [_fill(p, path) for p in nested_places().get(key, ())]
    if key in inventory.SITE_FIELDS or key in inventory.all_variables():
        also = f" (or at {' or '.join(places)})" if places else ""
        return f"{key!r} is a site variable: give it at the top level of the inventory{also}, not in {path}"
    if places:
        return f"unknown key here: {key!r} is a key of {_owners(places)}; give it at {' or '.join(places)}"
    near = near_miss(key, valid, cutoff=None)  # an alias or abbreviation of a key valid here
    if near:
        return f"unknown key (did you mean {near!r}?); valid keys: {', '.join(valid)}"
    for target in aliases().get(key, ()):  # an alias of a key of another level
        where = _fill(target, path)
        what = "a site variable, at the top level" if "." not in where else f"at {where}"
        return f"unknown key here (did you mean {where.rsplit('.', 1)[-1]!r}? {what})"
    return None
