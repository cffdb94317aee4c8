# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Blueprint data files (``blueprints/<name>.yml``): the only source of a blueprint's
components, planner policy and variable defaults. The collection ships them in its own
``blueprints/`` directory; a site may point ``blueprints_dir`` at a directory of its own."""

from __future__ import annotations

import os

from ..planner import inputs as planner_inputs
from ..planner.errors import PlanError
from . import inventory
from .schema import Field, SchemaError, suggest, validate

_CACHE: dict[tuple[str, float], dict] = {}


def _components_check(items: list) -> str | None:
    known = inventory.component_names()
    bad = [c for c in items if c not in known]
    if bad:
        hint = suggest(bad[0], known)
        return f"unknown component(s) {', '.join(bad)}{hint}; components are the collection's roles: {', '.join(known)}"
    if len(set(items)) != len(items):
        return "a component is listed twice"
    return None


def blueprint_schema() -> Field:
    defaults = {k: f for k, f in inventory.all_variables().items() if k not in inventory.SITE_ONLY}
    return Field(
        "dict",
        options={
            "name": Field("str", required=True),
            "description": Field("str", required=True),
            "components": Field("list", required=True, elements=Field("str"), min_items=1, check=_components_check),
            "policy": Field("dict", default={}),
            "defaults": Field("dict", default={}, options=defaults),
        },
    )


# The blueprints the collection ships (<collection>/blueprints/), found wherever the collection is installed.
SHIPPED_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "blueprints"))


def find_dir(candidates: list[str]) -> str | None:
    """The first candidate directory that holds blueprint files, else the collection's own."""
    for cand in [*candidates, SHIPPED_DIR]:
        if cand and os.path.isdir(cand) and any(f.endswith(".yml") for f in os.listdir(cand)):
            return os.path.abspath(cand)
    return None


def names(bdir: str) -> list[str]:
    return sorted(f[: -len(".yml")] for f in os.listdir(bdir) if f.endswith(".yml"))


def load(name: str, bdir: str | None) -> dict:
    """The validated blueprint ``name`` from ``bdir``. Raises SchemaError naming the file and key."""
    if not bdir:
        raise SchemaError(
            [
                (
                    "blueprint",
                    f"no blueprints directory found for {name!r}; "
                    "set blueprints_dir to the directory of <name>.yml files",
                )
            ]
        )
    valid = names(bdir)
    path = os.path.join(bdir, f"{name}.yml")
    if name not in valid:
        raise SchemaError(
            [
                (
                    "blueprint",
                    f"unknown blueprint {name!r}{suggest(name, valid)}; valid: {', '.join(valid)} (files in {bdir})",
                )
            ]
        )
    key = (path, os.path.getmtime(path))
    if key not in _CACHE:
        _CACHE[key] = _load_file(name, path)
    return _CACHE[key]


def _load_file(name: str, path: str) -> dict:
    import yaml  # lazy

    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 or {}
    except yaml.YAMLError as e:
        raise SchemaError([("", f"YAML syntax error: {e}")], where=path) from None
    bp = validate(doc, blueprint_schema(), where=path)
    if bp["name"] != name:
        raise SchemaError([("name", f"is {bp['name']!r} but the file is {name}.yml; they must agree")], where=path)
    try:  # the planner owns the policy keys; check them here so the file, not a model, is named
        planner_inputs.resolve_policy(bp["policy"])
    except PlanError as e:
        raise SchemaError([(e.field, e.message)], where=path) from None
    bp["path"] = path
    return bp
