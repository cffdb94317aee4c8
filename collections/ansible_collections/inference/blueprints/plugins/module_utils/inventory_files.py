# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The YAML files of a site inventory, and the mistakes in them that Ansible lets through.

A key given twice in one mapping: ansible-core's YAML loader keeps the last value and, with its
default ``duplicate_dict_key = warn``, only warns (lib/ansible/parsing/yaml/constructor.py), so the
second value is deployed. ``duplicate_keys`` finds them from the YAML node tree (composed, not
constructed: no tag such as ``!vault`` needs a constructor, and an aliased node is walked once),
so the site check can refuse them whatever the user's Ansible configuration says.

Pure Python (PyYAML only); the site action plugin, the ``blueprints`` CLI and the
``inventory_syntax`` callback share it.
"""

from __future__ import annotations

import os

INVENTORY_EXTENSIONS = (".yml", ".yaml", ".json")
VAR_EXTENSIONS = ("",) + INVENTORY_EXTENSIONS


def var_files(directory: str):
    """The files of ``directory``'s ``group_vars`` and ``host_vars`` that Ansible loads, in a stable order."""
    for sub in ("group_vars", "host_vars"):
        root = os.path.join(directory, sub)
        if not os.path.isdir(root):
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if not name.startswith(".") and os.path.splitext(name)[1] in VAR_EXTENSIONS:
                    yield os.path.join(dirpath, name)


def inventory_files(sources) -> list[str]:
    """Every YAML file of the inventory sources: a directory's own inventory files and its group_vars and
    host_vars; a file and the group_vars and host_vars beside it."""
    out: list[str] = []
    for source in sources or []:
        path = os.path.realpath(str(source))
        if os.path.isdir(path):
            directory = path
            out.extend(
                os.path.join(path, n)
                for n in sorted(os.listdir(path))
                if os.path.splitext(n)[1] in INVENTORY_EXTENSIONS and os.path.isfile(os.path.join(path, n))
            )
        elif os.path.isfile(path):
            directory = os.path.dirname(path)
            if os.path.splitext(path)[1] in INVENTORY_EXTENSIONS:
                out.append(path)
        else:
            continue
        out.extend(var_files(directory))
    return list(dict.fromkeys(out))


def duplicate_keys(path: str) -> list[dict]:
    """The keys given twice in one mapping of the YAML file ``path``: ``{file, line, key, first_line}`` each
    (lines from 1). A file that does not parse has none here (its syntax error is reported elsewhere)."""
    import yaml  # lazy: only a site check reads inventory files

    try:
        with open(path, encoding="utf-8") as fh:
            nodes = list(yaml.compose_all(fh, Loader=yaml.SafeLoader))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return []
    found: list[dict] = []
    seen: set[int] = set()
    stack = [n for n in nodes if n is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value != "<<":
                    line = key.start_mark.line + 1
                    if key.value in first:
                        found.append({"file": path, "line": line, "key": key.value, "first_line": first[key.value]})
                    else:
                        first[key.value] = line
                stack.extend((key, value))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return sorted(found, key=lambda d: d["line"])


def duplicate_key_errors(sources) -> list[tuple[str, str]]:
    """``(path, message)`` for every key given twice in the inventory's YAML files (SchemaError's shape)."""
    errors = []
    for path in inventory_files(sources):
        for d in duplicate_keys(path):
            errors.append(
                (
                    f"{d['file']}:{d['line']}",
                    f"key {d['key']!r} is given twice in one mapping (first at line {d['first_line']}); Ansible "
                    "would keep only the last value; valid: each key once per mapping (remove or merge one of them)",
                )
            )
    return errors
