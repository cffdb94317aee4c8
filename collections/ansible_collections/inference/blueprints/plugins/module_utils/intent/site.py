# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""From a cluster's inventory variables to a validated site and its plans.

``resolve()`` validates one cluster host's variables against the inventory definition
(``inventory.py``) and its blueprint file, fills defaults once, and ``plan_models()`` runs the
planner for every model through the one inventory-to-planner mapping (``planner_inputs``).
The site action plugin and the ``blueprints`` CLI both call these, with the same variables.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os

from ..planner import PlanError, plan
from ..planner.inputs import plain
from . import blueprint as bp_mod
from . import inventory, keys, own_model
from . import names as names_mod
from .schema import MISSING, Field, SchemaError, unwritable_dir, validate

# Variable name prefixes that are never ours (Ansible, molecule, connection plugins).
FOREIGN_PREFIXES = ("ansible_", "molecule_", "_")
HARDWARE_FIELDS = (
    "gpu",
    "gpus_per_node",
    "nodes",
    "interconnect",
    "decode_gpu",
    "decode_gpus_per_node",
    "decode_nodes",
)
MODEL_PLANNER_FIELDS = ("weights", "kv_cache_dtype", "max_model_len", "contexts", "gpu_memory_utilization")

PLANNER_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "planner")
_PLAN_CACHE: dict[str, dict] = {}


@functools.cache
def _planner_fingerprint() -> str:
    """A digest of the planner's code and catalogs: a cached plan is reused only by the same planner."""
    digest = hashlib.sha256()
    for root, _dirs, files in sorted(os.walk(PLANNER_DIR)):
        for name in sorted(files):
            if name.endswith((".py", ".yaml", ".yml")):
                with open(os.path.join(root, name), "rb") as fh:
                    digest.update(name.encode() + b"\0" + fh.read())
    return digest.hexdigest()[:16]


def _cache_dir() -> str:
    base = os.environ.get("INFERENCE_BLUEPRINTS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "inference-blueprints"
    )
    return os.path.join(base, "plans")


def cached_plan(inp: dict) -> dict:
    """plan(inp), memoised in this process and on disk (Ansible runs the site action in a fresh
    worker process per host: a fleet of identical sites plans once). Plans are pure functions of
    their inputs and the planner's code and catalogs, which the key includes."""
    key = hashlib.sha256((_planner_fingerprint() + json.dumps(inp, sort_keys=True, default=str)).encode()).hexdigest()
    if key in _PLAN_CACHE:
        return _PLAN_CACHE[key]
    path = os.path.join(_cache_dir(), key[:2], key + ".json")
    try:
        with open(path, encoding="utf-8") as fh:
            _PLAN_CACHE[key] = json.load(fh)
            return _PLAN_CACHE[key]
    except (OSError, ValueError):
        pass
    result = plan(copy.deepcopy(inp))
    _PLAN_CACHE[key] = result
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(result, fh)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written is only slower
    return result


def misspelled_variables(names, ignore=()) -> list[tuple[str, str]]:
    """Errors for variables that are not ours but look like one of ours (a typo must not pass): a key of the site
    schema given at the top level instead of where it belongs (max_model_len), and a near miss of a site variable
    or component option (edit distance, an abbreviation such as serving_ns, an alias such as namespace: keys.py).

    Variables far from every known name are the user's own (inventories are shared) and are left alone.
    """
    known = inventory.all_variables()
    out = []
    for name in sorted(names):
        if name in known or name in ignore or name.startswith(FOREIGN_PREFIXES):
            continue
        wrong = keys.wrong_level_variable(name)
        if wrong:
            out.append((name, wrong))
            continue
        near = keys.near_miss(name, known)
        if near:
            out.append((name, f"unknown variable (did you mean {near!r}?); nothing of this site reads {name!r}"))
    return out


def served_name_clashes(models: list[dict]) -> list[tuple[str, str]]:
    """Errors for models of one cluster that clients would reach by the same name (served_name, else the id): the
    router and the gateway route by that name and cannot tell them apart (every model of an AI grid's classes and
    of a sovereign burst site is in the one models list)."""
    first: dict[str, int] = {}
    out = []
    for j, model in enumerate(models):
        name = inventory.served_name(model)
        if name not in first:
            first[name] = j
            continue
        i = first[name]

        def how(k: int) -> str:
            given = models[k].get("served_name")
            return f"models[{k}].served_name" if given else f"models[{k}].id, its default served name"

        out.append(
            (
                f"models[{j}].served_name",
                f"{name!r} is the served name of both models[{i}] ({models[i]['name']}; {how(i)}) and models[{j}] "
                f"({model['name']}; {how(j)}): the router and the gateway route by the model name clients send and "
                "could not tell them apart; valid: a served_name of its own for each model",
            )
        )
    return out


def _refuse(errors: list, where: str) -> None:
    if errors:
        raise SchemaError(errors, where)


# Mappings of independent knobs: a site that sets one of them keeps the blueprint's others (batch's queue
# threshold of 8 stays when a site only shortens the cooldown). Other mappings replace the blueprint's whole.
KEYWISE = ("autoscaling_trigger",)


def _pick(hostvars: dict, defaults: dict, key: str):
    value = hostvars.get(key)
    if value is None:
        value = defaults.get(key)
    elif key in KEYWISE and isinstance(value, dict) and isinstance(defaults.get(key), dict):
        value = {**defaults[key], **value}
    return value


def _check_render_dir(site: dict, where: str) -> None:
    """delivery render/gitops writes its objects under render_dir: say now, before anything is written, when it
    cannot."""
    why = unwritable_dir(site["render_dir"]) if site["delivery"] in ("render", "gitops") else None
    if why:
        valid = "a directory this user can create and write (default render/<site_name>)"
        raise SchemaError([("render_dir", f"{why}; valid: {valid}")], where)


def _validated(values: dict, errors: list, where: str, inventory_dir: str | None) -> dict:
    """The site's values checked against the one schema, its models' catalog ids or own architectures (read
    from their config.json files); every problem at once."""
    schema = Field("dict", options={**inventory.SITE_FIELDS, **inventory.all_variables()})
    raw_models = values.get("models") if isinstance(values.get("models"), list) else []
    errors = errors + own_model.model_errors(raw_models)  # a catalog id, or an own model with its artifact
    try:
        resolved = validate(values, schema, where=where, unknown_key=keys.unknown_key_hint)
    except SchemaError as e:
        raise SchemaError(errors + e.errors, where) from None
    errors += own_model.load(resolved["models"], inventory_dir)
    if errors:
        raise SchemaError(errors, where)
    return resolved


def resolve(  # noqa: PLR0913 - one more: the run's inventory directories
    host: str, hostvars: dict, bdir_candidates: list[str], names=None, ignore=(), *, inventory_dirs=()
) -> dict:
    """Validate one cluster's variables; return the site with every default filled.

    ``hostvars`` holds the host's variables (templated; at least every known one), ``names``
    every variable name the host has (for the typo check; default: ``hostvars``' keys),
    ``ignore`` names that are Ansible's own (magic variables) and ``inventory_dirs`` the run's
    inventory directories (render_dir must lie outside them). Raises SchemaError listing every
    problem, each with its path.
    """
    hostvars = plain(dict(hostvars))
    inventory_dir = hostvars.pop(own_model.INVENTORY_DIR, None)
    where = f"host {host}"
    # the host name becomes a directory of render_dir (intent/names.py)
    errors = names_mod.host_errors(host) + misspelled_variables(names if names is not None else hostvars, ignore)
    name = hostvars.get("blueprint")
    if not name:
        errors.append(("blueprint", "required: the name of a blueprint data file (blueprints/<name>.yml)"))
        raise SchemaError(errors, where)
    bdir = bp_mod.find_dir([hostvars.get("blueprints_dir") or "", *bdir_candidates])
    try:
        blueprint = bp_mod.load(str(name), bdir)
    except SchemaError as e:
        raise SchemaError(errors + e.errors, e.where or where) from None
    bdefaults = blueprint["defaults"]

    site_in = {k: _pick(hostvars, bdefaults, k) for k in inventory.SITE_FIELDS}
    options_in = {}
    for role in inventory.component_names():
        for opt in inventory.component_options(role):
            value = _pick(hostvars, bdefaults, opt)
            if value is not None:
                options_in[opt] = value
    # a URI with a credential in it: refused on the raw values, before a field's own check could echo it
    names_mod.refuse_credentials({**site_in, **options_in}, errors, where)
    resolved = _validated({**site_in, **options_in}, errors, where, inventory_dir)

    site = {k: resolved[k] for k in inventory.SITE_FIELDS}
    _refuse(served_name_clashes(site["models"]), where)
    site["host"] = host
    site["blueprint"] = blueprint["name"]
    site["blueprint_data"] = blueprint
    site["components"] = list(blueprint["components"])
    site["options"] = {
        role: {opt: resolved[opt] for opt in inventory.component_options(role)} for role in inventory.component_names()
    }
    site["render_dir"] = site["render_dir"] or f"render/{site['site_name']}"
    site["report_dir"] = site["report_dir"] or f"reports/{site['site_name']}"
    _check_render_dir(site, where)
    site["escalation"] = site["escalation"] or {"enabled": False, "endpoint": None, "model": None}
    site["gitops"] = site["gitops"] or validate({}, inventory.SITE_FIELDS["gitops"])
    if site["delivery"] == "gitops" and not site["gitops"].get("repo_url"):
        raise SchemaError(
            [
                (
                    "gitops.repo_url",
                    "required with delivery=gitops: the Git repository Argo CD syncs the rendered tree from",
                )
            ],
            where,
        )
    names_mod.refuse_paths(site, inventory_dirs, where)  # render_dir outside the inventory, gitops.path
    if site["escalation"]["enabled"] and not site["escalation"].get("endpoint"):
        raise SchemaError(
            [("escalation.endpoint", "required when escalation.enabled is true (an https:// URL)")], where
        )
    # which SLO keys of each model the inventory itself sets (the site's slo or the model's, not the
    # blueprint's default): an SLO the user wrote that no layout meets is bad input (_unreachable_slo)
    inventory_slo = _given(hostvars.get("slo")) if isinstance(hostvars.get("slo"), dict) else {}
    site["slo_given"] = [sorted({*inventory_slo, *_given(m.get("slo"))}) for m in site["models"]]
    for model in site["models"]:
        model["policy"] = {**blueprint["policy"], **(model.get("policy") or {})}
        slo = {**_given(site.get("slo")), **_given(model.get("slo"))}
        model["slo"] = slo or None
        model["traffic"] = _given(model.get("traffic")) or None
    site["traffic"] = _given(site.get("traffic")) or None
    return site


def _given(block) -> dict:
    return {k: v for k, v in (block or {}).items() if v is not None}


def model_hardware(site: dict, model: dict) -> dict:
    """The node pool a model is planned and served on: its own ``hardware`` (a site that mixes
    GPU types per model class) or the site's. A model on its own pool has no decode pool of
    another GPU type: ``decode_*`` belong to the site's hardware."""
    own = {k: v for k, v in (model.get("hardware") or {}).items() if v is not None}
    if not own:
        return site["hardware"]
    base = {k: v for k, v in site["hardware"].items() if not k.startswith("decode_")}
    return {**base, **own}


def gpu_types(site: dict) -> list[str]:
    """Every GPU type the site's models run on (more than one: pods are pinned to theirs)."""
    types = {model_hardware(site, m)["gpu"] for m in site["models"]}
    if site["hardware"].get("decode_gpu"):
        types.add(site["hardware"]["decode_gpu"])
    return sorted(types)


def planner_inputs(site: dict, model: dict) -> dict:
    """The planner's inputs for one model of a site: the one inventory-to-planner mapping."""
    inp = {
        "model": model["id"],
        "name": model["name"],
        "blueprint": site["blueprint"],
        "policy": dict(model["policy"]),
        "policy_source": site["blueprint_data"]["path"] + (" + models[].policy" if model["policy"] else ""),
    }
    hardware = model_hardware(site, model)
    for k in HARDWARE_FIELDS:
        if hardware.get(k) is not None:
            inp[k] = hardware[k]
    for k in (*MODEL_PLANNER_FIELDS, "traffic", "slo"):
        if model.get(k) is not None:
            inp[k] = model[k]
    inp.update(own_model.planner_fields(model))  # architecture (config.json), quantization, artifact
    if site.get("vllm_version"):
        # the engine the site runs: the planner emits that version's flags (catalog/vllm_flags_<minor>.yaml)
        inp["vllm_version"] = site["vllm_version"]
    if site.get("calibration"):
        # measured engine figures (verify's host_vars/<cluster>/calibration.yml); the planner uses the entries
        # of this model's id, GPU and engine version and ignores the others
        inp["calibration"] = site["calibration"]
    if site.get("traffic"):
        # the blueprint's (or site's) example traffic: the planner fills only what the model leaves
        # out, and fits it to the model's window
        inp["traffic_defaults"] = site["traffic"]
    return inp


def _field_path(field: str, index: int, model: dict | None = None) -> str:
    own = own_model.field_path(field, index)
    if own:
        return own
    if field in HARDWARE_FIELDS:
        if field in ((model or {}).get("hardware") or {}):
            return f"models[{index}].hardware.{field}"
        return f"hardware.{field}"
    if field == "model":
        return f"models[{index}].id"
    if field in ("blueprint", "vllm_version"):
        return field
    if field.startswith("calibration"):
        return field
    return f"models[{index}].{field}"


def _unreachable_slo(site: dict, model: dict, index: int, result: dict) -> tuple[str, str] | None:
    """An SLO no layout of the hardware meets even for one request at a time is bad input, not a
    plan warning: ``(path, message)``. A miss that only the load causes (too few GPUs for the
    traffic) is left to the plan's warning and preflight's GPU count."""
    slo = model.get("slo") or {}
    if (result.get("latency") or {}).get("meets_slo") is not False or not slo:
        return None
    inp = planner_inputs(site, model)
    inp["traffic"] = {**(result.get("traffic") or inp.get("traffic") or {}), "concurrent_sessions": 1}
    inp["traffic"]["arrival_rate_rps"] = 0.01
    try:
        alone = cached_plan(inp)
    except PlanError:
        return None
    if (alone.get("latency") or {}).get("meets_slo") is not False:
        return None
    closest = next((w for w in alone.get("warnings") or [] if "comes closest" in w), "")
    closest = closest.split(": ", 1)[-1] if closest else "no layout reaches it"
    key = next((k for k, tag in (("ttft_p95_ms", "(TTFT"), ("tpot_p95_ms", "(TPOT")) if tag in closest), None)
    given = (site.get("slo_given") or [])[index] if index < len(site.get("slo_given") or []) else []
    if not (key in given if key else given):
        return None  # the blueprint's default SLO: the plan's warning says it is missed
    where = f"{int(inp.get('nodes') or 1) * int(inp.get('gpus_per_node') or 1)} x {inp.get('gpu')}"
    path = f"models[{index}].slo" + (f".{key}" if key else "")
    shown = f"{slo[key]:g} ms" if key and isinstance(slo.get(key), (int, float)) else str(slo)
    return (
        path,
        f"{shown} cannot be met by any layout on {where}, even for one request at a time: {closest}; "
        f"valid: a {key or 'SLO'} above what that layout reaches (or faster GPUs)",
    )


def plan_models(site: dict) -> list[dict]:
    """``[{model, plan}]`` for every model of the site. Identical inputs are planned once per process."""
    out, errors = [], []
    for i, model in enumerate(site["models"]):
        try:
            result = cached_plan(planner_inputs(site, model))
        except PlanError as e:
            errors.append((_field_path(e.field, i, model), e.message))
            continue
        unreachable = _unreachable_slo(site, model, i, result)
        if unreachable:
            errors.append(unreachable)
            continue
        out.append({"model": model, "plan": copy.deepcopy(result)})
    if errors:
        raise SchemaError(errors, f"host {site['host']}")
    return out


def defaults_for(options: dict[str, Field]) -> dict:
    return {k: f.default for k, f in options.items() if f.default is not MISSING}
