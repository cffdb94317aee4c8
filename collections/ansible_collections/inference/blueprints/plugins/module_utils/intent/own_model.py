# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A site's model outside the catalog: ``models[].architecture`` names its Hugging Face config.json.

The site gives the config as a path (relative to the inventory directory) or inline; ``load()`` reads
the file once, before anything is planned or written, and the planner converts the fields exactly
as ``blueprints plan --architecture FILE`` does (planner/hf_config.py through inputs.resolve_model).
"""

from __future__ import annotations

import json
import os

from . import inventory

# the inventory directory of the host (Ansible's magic variable, passed along with the site's values)
INVENTORY_DIR = "inventory_dir"
MAX_CONFIG_BYTES = 1 << 20  # a config.json is a few kB; refuse to read a weights file named by mistake
# files an inventory directory holds that Ansible does not parse as inventory: ansible-core's default
# INVENTORY_IGNORE_EXTS (REJECT_EXTS + .orig .ini .cfg .retry); hidden names are always skipped
_ANSIBLE_SKIPS = (".pyc", ".pyo", ".swp", ".bak", "~", ".rpm", ".md", ".txt", ".rst", ".orig", ".ini", ".cfg", ".retry")


def _parsed_as_inventory(path: str, inventory_dir: str | None) -> bool:
    """Whether Ansible reads ``path`` as an inventory source too (a file under the inventory directory that is
    not hidden and not of an extension it skips)."""
    if not inventory_dir:
        return False
    rel = os.path.relpath(path, os.path.abspath(inventory_dir))
    if rel.startswith(os.pardir + os.sep) or rel == os.pardir or os.path.isabs(rel):
        return False
    parts = rel.split(os.sep)
    if any(p.startswith(".") or p in ("host_vars", "group_vars", "vars_plugins") for p in parts):
        return False
    return not parts[-1].endswith(_ANSIBLE_SKIPS)


def _yaml(text: str):
    import yaml  # lazy: only a config given as YAML needs it

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def _read(path: str) -> tuple[dict | None, str | None]:
    valid = "a Hugging Face config.json (a JSON mapping), path relative to the inventory directory"
    try:
        if os.path.getsize(path) > MAX_CONFIG_BYTES:
            return None, f"{path} is larger than {MAX_CONFIG_BYTES} bytes, not a config.json; valid: {valid}"
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as e:
        return None, f"cannot read {path}: {e.strerror}; valid: {valid}"
    try:
        doc = json.loads(text)
    except ValueError as e:
        doc = _yaml(text)  # a YAML file of the same fields is accepted too
        if doc is None:
            return None, f"{path} is not valid JSON: {e}; valid: {valid}"
    if not isinstance(doc, dict):
        return None, f"{path} holds a {type(doc).__name__}, not a mapping; valid: {valid}"
    return doc, None


def load(models: list, inventory_dir: str | None) -> list[tuple[str, str]]:
    """Replace every ``architecture`` path by the config it names (in place); the errors by path."""
    errors = []
    base = inventory_dir or os.getcwd()
    for i, m in enumerate(models or []):
        arch = m.get("architecture") if isinstance(m, dict) else None
        if not isinstance(arch, str):
            continue
        path = arch if os.path.isabs(arch) else os.path.normpath(os.path.join(base, arch))
        if _parsed_as_inventory(path, inventory_dir):
            errors.append(
                (
                    f"models[{i}].architecture",
                    f"{arch} lies inside the inventory directory {inventory_dir}, and Ansible reads every file under "
                    "the inventory directory as inventory (a config.json there turns into groups and warnings); "
                    f"valid: a path outside it (e.g. ../models/{os.path.basename(path)}), under a directory whose "
                    "name starts with '.', or the config's fields inline",
                )
            )
            continue
        doc, err = _read(path)
        if err:
            errors.append((f"models[{i}].architecture", err))
            continue
        m["architecture_file"] = path
        m["architecture"] = json.loads(json.dumps(doc))  # plain data (a cached plan's key is its JSON)
    return errors


def planner_fields(model: dict) -> dict:
    """The planner inputs of a site model that the catalog would otherwise give."""
    out = {}
    if model.get("architecture") is not None:
        out["model_architecture"] = model["architecture"]
        if model.get("quantization") is not None:
            out["model_quantization"] = model["quantization"]
    uri = (model.get("artifact") or {}).get("uri")
    if uri:
        out["artifact"] = uri
    return out


def field_path(field: str, index: int) -> str | None:
    """The inventory path of a planner input this module maps (None: not one of these)."""
    if field == "model_architecture" or field.startswith("model_architecture."):
        return f"models[{index}].architecture" + field[len("model_architecture") :]
    if field in ("model_quantization", "quantization"):
        return f"models[{index}].quantization"
    if field == "artifact":
        return f"models[{index}].artifact.uri"
    return None


def model_errors(models: list, index_base: str = "models") -> list[tuple[str, str]]:
    """The rules between a model's keys: a catalog id, or a model described by its architecture (config.json),
    which then needs the artifact vLLM loads (the catalog knows no repository for it)."""
    errors = []
    for i, m in enumerate(models or []):
        if not isinstance(m, dict):
            continue
        where = f"{index_base}[{i}]"
        if m.get("architecture") is None:
            if isinstance(m.get("id"), str):
                msg = inventory.catalog_id_error(m["id"])
                if msg:
                    errors.append((f"{where}.id", msg + "; or describe the model with architecture: <config.json>"))
            if m.get("quantization") is not None:
                errors.append(
                    (
                        f"{where}.quantization",
                        "applies to a model described by architecture (its config.json); a catalog model's "
                        "checkpoint follows weights and artifact",
                    )
                )
        elif not (m.get("artifact") or {}).get("uri"):
            errors.append(
                (
                    f"{where}.artifact.uri",
                    "required for a model outside the catalog (architecture given): the checkpoint vLLM loads; "
                    "valid: hf://<org>/<name>, pvc://<claim>/<path>, oci://<image>@sha256:<digest>",
                )
            )
    return errors
