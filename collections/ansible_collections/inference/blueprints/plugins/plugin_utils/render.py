# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render a component's objects from a cluster's deployment intent.

Each component role holds one shape-only Jinja2 template, ``templates/objects.yml.j2``,
over the intent: it places values, it does not compute them. This module renders it with
plain Jinja2 (strict undefined: a missing intent key is an error, not an empty string), so
the render action plugin, the ``blueprints`` CLI and the golden-file tests render the same
objects the same way, without a playbook run.
"""

from __future__ import annotations

import functools
import json
import os

import jinja2
import jinja2.meta
import yaml

COLLECTION_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES_DIR = os.path.join(COLLECTION_DIR, "roles")
TEMPLATE = "objects.yml.j2"


# libyaml when PyYAML has it: rendering a fleet is mostly YAML parsing
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class RenderError(Exception):
    pass


def _to_json(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def _to_yaml_block(value, indent: int = 0) -> str:
    """A YAML block of ``value`` indented by ``indent`` spaces after the first line."""
    text = yaml.safe_dump(value, sort_keys=False, default_flow_style=False, width=1000).rstrip("\n")
    pad = " " * indent
    return "\n".join(line if i == 0 else pad + line for i, line in enumerate(text.splitlines()))


@functools.cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(ROLES_DIR),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # YAML, not HTML  # noqa: S701
    )
    env.filters["to_json"] = _to_json
    env.filters["to_yaml_block"] = _to_yaml_block
    # before the first object is rendered, so before anything is written: an incomplete installation (a
    # package that left out a file type) fails here, not after one stage's files are written
    missing = missing_files(ROLES_DIR)
    if missing:
        raise RenderError(
            f"the collection at {COLLECTION_DIR} is incomplete, nothing was rendered or written: "
            + "; ".join(missing)
            + "; reinstall it from a complete build (pip install, ansible-galaxy collection install)"
        )
    return env


def missing_files(roles_dir: str) -> list[str]:
    """Every file a role template reads (include, import, extends) that is not there, as 'roles/<template>
    reads <file>, which is missing'; a reference that is not a literal name is one too (it cannot be checked)."""
    problems = []
    seen: set[str] = set()
    todo = sorted(
        f"{role}/templates/{name}"
        for role in os.listdir(roles_dir)
        if os.path.isdir(os.path.join(roles_dir, role, "templates"))
        for name in os.listdir(os.path.join(roles_dir, role, "templates"))
        if name.endswith(".j2")
    )
    while todo:
        template = todo.pop()
        if template in seen:
            continue
        seen.add(template)
        with open(os.path.join(roles_dir, template), encoding="utf-8") as fh:
            ast = jinja2.Environment(autoescape=False).parse(fh.read())  # noqa: S701 (YAML, not HTML)
        for ref in jinja2.meta.find_referenced_templates(ast):
            if ref is None:
                problems.append(f"roles/{template} reads a file named by an expression (a literal name is checkable)")
            elif not os.path.isfile(os.path.join(roles_dir, ref)):
                problems.append(f"roles/{template} reads roles/{ref}, which is missing")
            else:
                todo.append(ref)
    return problems


def has_template(role: str) -> bool:
    return os.path.isfile(os.path.join(ROLES_DIR, role, "templates", TEMPLATE))


def render_text(role: str, intent: dict) -> str:
    variables = {"intent": intent, **(intent.get("options", {}).get(role) or {})}
    try:
        return _env().get_template(f"{role}/templates/{TEMPLATE}").render(**variables)
    except jinja2.UndefinedError as e:
        raise RenderError(f"{role}/templates/{TEMPLATE}: {e.message} (the intent lacks it)") from None
    except jinja2.TemplateError as e:
        raise RenderError(f"{role}/templates/{TEMPLATE}: {e}") from None


def render_component(role: str, intent: dict) -> list[dict]:
    """The objects of one component, in template order, with the intent's common labels."""
    if not has_template(role):
        return []
    text = render_text(role, intent)
    try:
        docs = [d for d in yaml.load_all(text, Loader=_LOADER) if d]
    except yaml.YAMLError as e:
        raise RenderError(f"{role}/templates/{TEMPLATE} rendered invalid YAML: {e}") from None
    labels = intent.get("labels") or {}
    for doc in docs:
        meta = doc.setdefault("metadata", {})
        meta["labels"] = {**labels, **(meta.get("labels") or {})}
        meta.setdefault("annotations", None)
        if meta["annotations"] is None:
            del meta["annotations"]
    return docs


def render_components(roles, intent: dict) -> list[dict]:
    out = []
    for role in roles:
        out.extend(render_component(role, intent))
    return out
