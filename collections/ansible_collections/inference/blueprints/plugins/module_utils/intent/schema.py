# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small declarative validator for inventory and blueprint data.

Every error names the value by its path (``models[0].traffic.arrival_rate_rps``), says what
was wrong and what would be valid, and a misspelled key gets the nearest valid name. All
errors of one document are collected, so one run shows every mistake.

Pure Python (no Ansible imports): the site action plugin, the CLI and the tests share it.
"""

from __future__ import annotations

import difflib
import math
import re
import reprlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MISSING = object()

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
IMAGE_BY_DIGEST = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


# Values in messages are shortened: a nested value (or a YAML alias bomb) must not flood the output.
_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 80
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict = 3, 6, 6
# The most values one inventory variable may hold once its YAML aliases are expanded: a site's largest
# variable (the AI grid's models and tenants) holds a few hundred; billions from a few nested aliases
# (an "alias bomb") would take minutes to template and validate.
MAX_EXPANDED_VALUES = 100_000


def expanded_size(value: Any, limit: int = MAX_EXPANDED_VALUES) -> int:
    """How many values ``value`` holds with every shared (aliased) part counted each time it appears,
    computed once per distinct container, so in time linear in what was parsed. Stops counting above
    ``limit`` (returns a number > limit)."""
    memo: dict[int, int] = {}

    def size(v: Any, depth: int) -> int:
        if not isinstance(v, (dict, list, tuple)):
            return 1
        key = id(v)
        if key in memo:
            return memo[key]
        if depth > 200:  # deeper than any inventory: counted as too large rather than recursed
            return limit + 1
        memo[key] = limit + 1  # a container that holds itself (a recursive alias) is too large
        items = v.values() if isinstance(v, dict) else v
        total = 1
        for item in items:
            total += size(item, depth + 1)
            if total > limit:
                break
        memo[key] = total
        return total

    return size(value, 0)


def check_sizes(values: dict, limit: int = MAX_EXPANDED_VALUES) -> None:
    """Refuse (SchemaError naming the variable) any value that expands to more than ``limit`` values."""
    errors = []
    for name in sorted(values):
        if expanded_size(values[name], limit) > limit:
            errors.append(
                (
                    name,
                    f"expands to more than {limit} values once its YAML aliases are expanded (an alias bomb?); "
                    f"valid: a value of at most {limit} values, written out or with aliases",
                )
            )
    if errors:
        raise SchemaError(errors)


class SchemaError(Exception):
    """Invalid data. ``errors`` is a list of ``(path, message)``; ``str()`` joins them."""

    def __init__(self, errors: list[tuple[str, str]], where: str = ""):
        self.errors = list(errors)
        self.where = where
        head = f"{where}: " if where else ""
        lines = [f"{path}: {msg}" if path else msg for path, msg in self.errors]
        if len(lines) == 1:
            text = head + lines[0]
        else:
            text = head + f"{len(lines)} problems:\n" + "\n".join(f"  - {line}" for line in lines)
        super().__init__(text)


def suggest(word: str, valid) -> str:
    """' (did you mean X?)' for the nearest valid name, or ''."""
    close = difflib.get_close_matches(str(word), [str(v) for v in valid], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def join_path(base: str, key) -> str:
    if isinstance(key, int):
        return f"{base}[{key}]"
    return f"{base}.{key}" if base else str(key)


@dataclass(frozen=True)
class Field:
    """One value's rules. ``type``: str, int, float, bool, dict, list, raw, path."""

    type: str = "raw"
    required: bool = False
    default: Any = MISSING
    choices: tuple | None = None
    minimum: float | None = None
    exclusive_minimum: bool = False
    maximum: float | None = None
    pattern: re.Pattern | None = None
    pattern_doc: str = ""
    max_length: int | None = None
    options: dict[str, Field] | None = None  # dict with known keys (unknown keys are errors)
    values: Field | None = None  # dict with free keys: rule for every value
    elements: Field | None = None  # list: rule for every element
    min_items: int = 0
    check: Callable[[Any], str | None] | None = None  # extra rule: returns an error message or None
    doc: str | Callable[[], str] = ""  # a callable is read when a message needs it (e.g. a catalog's list)
    secret: bool = False  # never echo the value in messages
    drop_unset: bool = False  # dict: leave out options that are not given (passed through to Kubernetes)
    aliases: tuple = ()  # names users write for this one (namespace: serving_namespace): an error suggests this one

    def with_default(self, default: Any) -> Field:
        return Field(**{**self.__dict__, "default": default})


@dataclass
class Validator:
    errors: list[tuple[str, str]] = field(default_factory=list)
    # (key, path, valid options) -> a better message for an unknown key (a key of another level, an alias), or None
    unknown_key: Callable[[Any, str, dict], str | None] | None = None

    def fail(self, path: str, msg: str) -> None:
        self.errors.append((path, msg))

    def run(self, value: Any, rule: Field, path: str) -> Any:  # noqa: PLR0911
        if value is None:
            if rule.required:
                self.fail(path, f"required{self._valid_hint(rule)}")
            return None
        coerced = self._coerce(value, rule, path)
        if coerced is MISSING:
            return None
        if rule.type == "dict":
            return self._dict(coerced, rule, path)
        if rule.type == "list":
            return self._list(coerced, rule, path)
        return coerced if self._scalar_rules(coerced, rule, path) else None

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _show(value: Any, rule: Field) -> str:
        return "(hidden)" if rule.secret else _SHORT.repr(value)

    @staticmethod
    def _valid_hint(rule: Field) -> str:
        if rule.choices:
            return f"; valid: {', '.join(map(str, rule.choices))}"
        doc = rule.doc() if callable(rule.doc) else rule.doc
        if doc:
            return f" ({doc})"
        return ""

    def _coerce(self, value: Any, rule: Field, path: str) -> Any:  # noqa: PLR0911, PLR0912
        t = rule.type
        shown = self._show(value, rule)
        if t in ("str", "path"):
            if isinstance(value, (dict, list, bool)):
                self.fail(path, f"must be a string, got {type(value).__name__} {shown}")
                return MISSING
            return str(value)
        if t == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
                return value.strip().lower() in _TRUE
            self.fail(path, f"must be true or false, got {shown}")
            return MISSING
        if t == "int":
            if isinstance(value, bool) or isinstance(value, float) and not value.is_integer():
                self.fail(path, f"must be an integer, got {shown}")
                return MISSING
            if isinstance(value, (int, float)):
                return int(value)
            if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
                return int(value)
            self.fail(path, f"must be an integer, got {shown}")
            return MISSING
        if t == "float":
            if isinstance(value, bool):
                self.fail(path, f"must be a number, got {shown}")
                return MISSING
            if not isinstance(value, (int, float)):
                try:
                    value = float(value)
                except (TypeError, ValueError):
                    self.fail(path, f"must be a number, got {shown}")
                    return MISSING
            if not math.isfinite(value):
                # YAML's .nan/.inf and the strings 'nan'/'inf' parse as floats, and every bound compares false
                self.fail(path, f"must be a finite number, got {shown}")
                return MISSING
            return value
        if t in ("dict", "list") and isinstance(value, str):
            # YAML text, as an AAP survey (text or textarea) or a string -e gives a structure
            value = self._yaml_text(value, rule, path)
            if value is MISSING:
                return MISSING
        if t == "dict":
            if not isinstance(value, dict):
                self.fail(path, f"must be a mapping, got {type(value).__name__} {shown}")
                return MISSING
            return value
        if t == "list":
            if not isinstance(value, (list, tuple)):
                self.fail(path, f"must be a list, got {type(value).__name__} {shown}")
                return MISSING
            return list(value)
        return value

    def _yaml_text(self, text: str, rule: Field, path: str) -> Any:
        import yaml  # lazy: module_utils that only validate need no YAML parser at import

        want = "a mapping" if rule.type == "dict" else "a list"
        try:
            parsed = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(e, "problem", None) or str(e).splitlines()[0]
            self.fail(path, f"must be {want}; the text given is not valid YAML{where}: {problem}")
            return MISSING
        if parsed is None:
            self.fail(path, f"must be {want}, got empty text")
            return MISSING
        return parsed

    def _scalar_rules(self, value: Any, rule: Field, path: str) -> bool:  # noqa: PLR0911
        shown = self._show(value, rule)
        if rule.choices is not None and value not in rule.choices:
            self.fail(
                path, f"unknown value {shown}{suggest(value, rule.choices)}; valid: {', '.join(map(str, rule.choices))}"
            )
            return False
        if rule.minimum is not None and isinstance(value, (int, float)):
            too_small = value <= rule.minimum if rule.exclusive_minimum else value < rule.minimum
            if too_small:
                bound = f"> {rule.minimum:g}" if rule.exclusive_minimum else f">= {rule.minimum:g}"
                self.fail(path, f"must be {bound}, got {shown}")
                return False
        if rule.maximum is not None and isinstance(value, (int, float)) and value > rule.maximum:
            self.fail(path, f"must be <= {rule.maximum:g}, got {shown}")
            return False
        if rule.max_length is not None and isinstance(value, str) and len(value) > rule.max_length:
            self.fail(path, f"must be at most {rule.max_length} characters, got {len(value)} ({shown})")
            return False
        if rule.pattern is not None and isinstance(value, str) and not rule.pattern.match(value):
            self.fail(path, f"{shown} is not {rule.pattern_doc or 'valid'}")
            return False
        if rule.check is not None:
            msg = rule.check(value)
            if msg:
                self.fail(path, msg)
                return False
        return True

    def _dict(self, value: dict, rule: Field, path: str) -> dict:
        out: dict = {}
        errors_before = len(self.errors)
        if rule.options is not None:
            for key in value:
                if key not in rule.options:
                    hint = self.unknown_key(key, path, rule.options) if self.unknown_key else None
                    self.fail(
                        join_path(path, key),
                        hint or f"unknown key{suggest(key, rule.options)}; valid keys: {', '.join(rule.options)}",
                    )
            for key, sub in rule.options.items():
                raw = value.get(key)
                if raw is None and sub.default is not MISSING:
                    out[key] = sub.default
                    continue
                if raw is None and rule.drop_unset and not sub.required:
                    continue
                out[key] = self.run(raw, sub, join_path(path, key))
        else:
            for key, raw in value.items():
                out[key] = self.run(raw, rule.values, join_path(path, key)) if rule.values else raw
        # a whole-mapping rule only speaks when its parts are valid (no second message for one mistake)
        if rule.check is not None and len(self.errors) == errors_before:
            msg = rule.check(out)
            if msg:
                self.fail(path, msg)
        return out

    def _list(self, value: list, rule: Field, path: str) -> list:
        if len(value) < rule.min_items:
            self.fail(path, f"needs at least {rule.min_items} item(s), got {len(value)}")
        out = [
            self.run(item, rule.elements, join_path(path, i)) if rule.elements else item for i, item in enumerate(value)
        ]
        if rule.check is not None:
            msg = rule.check(out)
            if msg:
                self.fail(path, msg)
        return out


def validate(value: Any, rule: Field, path: str = "", where: str = "", unknown_key=None) -> Any:
    """Validate and normalise ``value``; raise :class:`SchemaError` listing every problem. ``unknown_key``: see
    :class:`Validator`."""
    v = Validator(unknown_key=unknown_key)
    out = v.run(value, rule, path)
    if v.errors:
        raise SchemaError(v.errors, where)
    return out


def unwritable_dir(path: str) -> str | None:
    """Why files cannot be written under directory ``path`` (created when missing), or None. Nothing is
    created: the path itself, else its nearest existing parent, must be a directory this user may write."""
    import os  # lazy: only the checks of output directories touch the file system

    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        return f"{probe} is a file, not a directory, so {path} cannot be created"
    if not os.access(probe, os.W_OK | os.X_OK):
        verb = "written" if probe == os.path.abspath(path) else "created"
        return f"{probe} is not writable by this user, so {path} cannot be {verb}"
    return None


def unique_names(key: str = "name") -> Callable[[list], str | None]:
    """A list rule: the items' ``key`` values are unique."""

    def check(items: list) -> str | None:
        seen, dups = set(), []
        for item in items:
            name = item.get(key) if isinstance(item, dict) else None
            if name is None:
                continue
            if name in seen and name not in dups:
                dups.append(name)
            seen.add(name)
        return f"duplicate {key}(s): {', '.join(map(str, dups))}; every {key} must be unique" if dups else None

    return check


def dns_label(doc: str = "a DNS-1123 label (lower case letters, digits and '-', starting and ending alphanumeric)"):
    return {"pattern": DNS_LABEL, "pattern_doc": doc, "max_length": 63}


# Ansible argument spec types -> our types.
_SPEC_TYPES = {
    "str": "str",
    "int": "int",
    "float": "float",
    "bool": "bool",
    "dict": "dict",
    "list": "list",
    "path": "path",
}


def from_argument_spec(option: dict) -> Field:
    """A Field from one option of an Ansible role argument spec (meta/argument_specs.yml)."""
    typ = _SPEC_TYPES.get(option.get("type", "str"), "raw")
    kwargs: dict[str, Any] = {"type": typ, "required": bool(option.get("required", False))}
    if "default" in option:
        kwargs["default"] = option["default"]
    if option.get("choices") is not None:
        kwargs["choices"] = tuple(option["choices"])
    desc = option.get("description")
    if isinstance(desc, list):
        desc = " ".join(desc)
    kwargs["doc"] = str(desc or "")
    kwargs["secret"] = bool(option.get("no_log", False))
    if typ == "dict" and option.get("options"):
        kwargs["options"] = {k: from_argument_spec(v or {}) for k, v in option["options"].items()}
    if typ == "list" and option.get("elements"):
        elem = {"type": option["elements"]}
        if option.get("options"):
            elem["options"] = option["options"]
        kwargs["elements"] = from_argument_spec(elem)
    return Field(**kwargs)
