"""The rows of the site-variable reference (scripts/site_reference.py): one per variable path, from the validator's
schema, with examples and the blueprints that use each variable taken from the blueprint files and the example
inventories."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import yaml
from ansible_collections.inference.blueprints.plugins.module_utils.intent import inventory
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import MISSING, Field

EXAMPLE_MAX = 100  # longer example values are left out (the example inventory holds them)


@dataclasses.dataclass
class Row:
    path: str
    top: str
    role: str | None
    type: str
    required: bool
    default: str
    valid: str
    doc: str
    example: str = ""
    example_from: str = ""
    blueprints: list[str] = dataclasses.field(default_factory=list)


def _flow(value) -> str:
    if isinstance(value, str):
        return json.dumps(value) if value == "" or value.strip() != value or ":" in value else value
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000, sort_keys=False).strip()
    return text.removesuffix("\n...").strip()


def _type(f: Field) -> str:
    if f.type == "list" and f.elements is not None:
        return f"list of {f.elements.type}"
    if f.type == "dict" and f.values is not None:
        return f"dict of {f.values.type}"
    return "any" if f.type == "raw" else f.type


def _number(x: float) -> str:
    return f"{x:g}"


def _valid(f: Field) -> str:
    parts = []
    if f.choices:
        parts.append("one of " + ", ".join(map(str, f.choices)))
    if f.minimum is not None:
        parts.append(("> " if f.exclusive_minimum else ">= ") + _number(f.minimum))
    if f.maximum is not None:
        parts.append("<= " + _number(f.maximum))
    if f.pattern_doc:
        parts.append(f.pattern_doc)
    if f.max_length is not None:
        parts.append(f"at most {f.max_length} characters")
    if f.min_items:
        parts.append(f"at least {f.min_items} item(s)")
    if f.check is not None and f.check.__doc__:
        parts.append(f.check.__doc__.strip().splitlines()[0].rstrip("."))
    return "; ".join(parts)


def _doc(f: Field) -> str:
    doc = f.doc() if callable(f.doc) else f.doc
    return " ".join(str(doc or "").split())


def _walk_schema(f: Field, path: str, top: str, role: str | None, out: list[Row]) -> None:
    default = "" if f.default is MISSING or f.default in ([], {}, "", None) else _flow(f.default)
    out.append(Row(path, top, role, _type(f), f.required, default, _valid(f), _doc(f)))
    if f.type == "dict" and f.options:
        for key, sub in f.options.items():
            _walk_schema(sub, f"{path}.{key}", top, role, out)
    elif f.type == "dict" and f.values is not None:
        _walk_children(f.values, f"{path}.<name>", top, role, out)
    elif f.type == "list" and f.elements is not None:
        _walk_children(f.elements, f"{path}[]", top, role, out)


def _walk_children(f: Field, path: str, top: str, role: str | None, out: list[Row]) -> None:
    """The fields inside a list's items or a mapping's values (the items themselves are the parent's row)."""
    if f.type == "dict" and f.options:
        for key, sub in f.options.items():
            _walk_schema(sub, f"{path}.{key}", top, role, out)


def _paths_of_value(value, f: Field | None, path: str, out: dict[str, object]) -> None:
    """Every schema path a value sets, with the value (guided by the schema: a free mapping's keys are <name>)."""
    out.setdefault(path, value)
    if f is None:
        return
    if isinstance(value, dict) and f.options:
        for key, sub in value.items():
            _paths_of_value(sub, f.options.get(key), f"{path}.{key}", out)
    elif isinstance(value, dict) and f.values is not None:
        for sub in value.values():
            _paths_of_value(sub, f.values, f"{path}.<name>", out)
    elif isinstance(value, list) and f.elements is not None:
        for item in value:
            _paths_of_value(item, f.elements, f"{path}[]", out)


def _load_yaml_files(paths) -> dict:
    merged: dict = {}
    for p in sorted(paths):
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        if isinstance(data, dict):
            for key, value in data.items():
                merged.setdefault(key, value)
    return merged


@dataclasses.dataclass
class Source:
    name: str  # where an example comes from, as the reference shows it
    blueprint: str
    values: dict[str, object]  # schema path -> value


def _sources(root: Path, schema: dict[str, Field]) -> list[Source]:
    """The example inventories (their group_vars and host_vars), then the blueprint files' defaults."""
    out = []
    for inv in sorted((root / "inventories").glob("example-*")):
        files = [*inv.glob("group_vars/**/*.yml"), *inv.glob("host_vars/**/*.yml")]
        merged = _load_yaml_files(files)
        paths: dict[str, object] = {}
        for key, value in merged.items():
            if key in schema:
                _paths_of_value(value, schema[key], key, paths)
        out.append(Source(f"inventories/{inv.name}", str(merged.get("blueprint", "")), paths))
    for bp in _blueprints(root):
        paths = {}
        for key, value in (bp.get("defaults") or {}).items():
            if key in schema:
                _paths_of_value(value, schema[key], key, paths)
        out.append(Source(f"blueprints/{bp['name']}.yml", bp["name"], paths))
    return out


def _blueprints(root: Path) -> list[dict]:
    shipped = root / "collections" / "ansible_collections" / "inference" / "blueprints" / "blueprints"
    return [yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(shipped.glob("*.yml"))]


def _set_example(row: Row, sources: list[Source]) -> None:
    for src in sources:
        if src.values.get(row.path) in (None, "", [], {}):
            continue
        text = _flow(src.values[row.path])
        if len(text) <= EXAMPLE_MAX:
            row.example, row.example_from = text, src.name
            return


def rows(root: Path) -> list[Row]:
    schema = inventory.all_variables()
    out: list[Row] = []
    for name, f in inventory.SITE_FIELDS.items():
        _walk_schema(f, name, name, None, out)
    blueprints = _blueprints(root)
    for role in inventory.component_names():
        users = sorted(bp["name"] for bp in blueprints if role in (bp.get("components") or []))
        start = len(out)
        for name, f in inventory.component_options(role).items():
            _walk_schema(f, name, name, role, out)
        for r in out[start:]:
            r.blueprints = users
    sources = _sources(root, schema)
    by_path: dict[str, Row] = {}
    for r in out:
        _set_example(r, sources)
        if r.role is None:
            r.blueprints = _site_blueprints(r, by_path, sources, blueprints)
            by_path[r.path] = r
    return out


def _parent(path: str) -> str:
    """models[].traffic.x -> models[].traffic; models[].name -> models; tiers.<name>.x -> tiers"""
    head = path.rsplit(".", 1)[0] if "." in path else ""
    return head.removesuffix("[]").removesuffix(".<name>")


def _site_blueprints(r: Row, by_path: dict[str, Row], sources: list[Source], blueprints: list[dict]) -> list[str]:
    """Every blueprint for a variable every site must give; else the blueprints whose defaults or example
    inventory set it; else its parent's; a top-level variable nobody sets: any."""
    parent = by_path.get(_parent(r.path))
    if r.required and (parent is None or parent.blueprints == ["every"]):
        return ["every"]
    setting = sorted({s.blueprint for s in sources if r.path in s.values})
    if setting:
        return setting
    if parent is None or parent.blueprints == ["every"]:
        return ["any"]
    return parent.blueprints
