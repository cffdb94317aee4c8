# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Measured engine figures into the inventory: ``host_vars/<cluster>/calibration.yml``.

Each entry has the planner's calibration fields (planner/calibration.py, docs/planner.md "Calibration"):
model, GPU and engine version, where it was measured (layout), prefill tokens/s at the measured prompt
length and decode tokens/s per sequence at the measured batch. The site loader hands the file's
``calibration`` list to the planner, which then replaces its efficiency assumptions with them.

Ansible reads ``host_vars/<host>/`` *instead of* ``host_vars/<host>.yml`` when both exist
(``DataLoader.find_vars_files`` stops at the first match, the directory first): a cluster whose variables
are in ``host_vars/<host>.yml`` has that file moved to ``host_vars/<host>/main.yml`` before the
calibration is written next to it, and the result says so.
"""

from __future__ import annotations

import datetime
import os
import re

HEADER = (
    "# Measured by playbooks/verify.yml (inference.blueprints.slo_benchmark); the planner uses these figures\n"
    "# instead of its efficiency assumptions for the same model, GPU and vLLM minor version (docs/verify.md).\n"
    "# Entries for other models, GPUs or versions are kept when verify rewrites this file.\n"
)
KEY = ("model", "gpu", "vllm_version", "weights", "kv_cache_dtype")
# vLLM's Prometheus gauge with the cache configuration as labels (vllm/v1/metrics/loggers.py,
# log_metrics_info("cache_config", ...)): num_gpu_blocks is the KV blocks the engine allocated.
CACHE_INFO = re.compile(r"^vllm:cache_config_info\{([^}]*)\}", re.M)


def _minor(v) -> str:
    return ".".join(str(v).split(".")[:2])


def engine_mismatch(model: str, plan: dict, version) -> str | None:
    """A warning when the endpoint's vLLM (its /version) is another minor version than the plan was written for:
    the plan's flags were chosen for the other engine, and the calibration is filed under the endpoint's version,
    which plans for the plan's version do not read. None when they agree or the endpoint does not say."""
    want = plan.get("vllm_version")
    if not version or not want or _minor(re.split(r"[+-]", str(version))[0]) == _minor(want):
        return None
    base = re.split(r"[+-]", str(version))[0]
    return (
        f"{model}: the endpoint runs vLLM {version} (its /version) but the plan was written for vLLM {want}: its "
        f"engine arguments were chosen for that version, and this run's calibration is filed under {_minor(base)}, "
        f'which plans for {_minor(want)} do not read; set vllm_version: "{base}" (docs/planner.md, Engine versions)'
    )


def entries(model_id: str, plan: dict, pools: dict, stats_by_pool: dict, origin: dict) -> list[dict]:
    """Calibration entries of one model: one per pool hardware that measured a figure. ``origin``: the engine
    version and KV blocks the endpoint reported (or None) and the source text."""
    engine_version, source = origin.get("version"), origin["source"]
    from . import analyze

    out: dict = {}
    for role, stats in stats_by_pool.items():
        figures = analyze.calibration_figures(stats)
        if not figures:
            continue
        # the model's entry point (a gateway) measured the main pool's figures
        pool_role = {"model": "decode" if "decode" in pools else "serve"}.get(role, role)
        if role == "model" and "prefill" in pools:
            figures = {k: v for k, v in figures.items() if not k.startswith(("prefill", "prompt"))}
        planned = (plan.get("pools") or {}).get(pool_role) or {}
        gpu = planned.get("gpu") or plan["hardware"]["gpu"]
        dp = int(planned.get("dp") or 1)
        replicas = int(planned.get("replicas") or 1)
        layout = {"tp": int(planned.get("tp") or 1), "pp": int(planned.get("pp") or 1), "dp": max(1, dp // replicas),
                  "ep": int(planned.get("ep") or 1)}  # fmt: skip
        if "batch" in figures:  # per DP rank, as the planner's batch
            figures["batch"] = max(1, int(round(figures["batch"] / layout["dp"])))
        if "prefill_tokens_per_s" in figures:  # one request is one rank's prefill; the entry is the engine's
            figures["prefill_tokens_per_s"] = round(figures["prefill_tokens_per_s"] * layout["dp"], 1)
        key = (gpu, tuple(sorted(layout.items())))
        entry = out.setdefault(
            key,
            {
                "model": model_id,
                "gpu": gpu,
                "vllm_version": str(engine_version or plan.get("vllm_version")),
                "weights": (plan.get("weights") or {}).get("precision"),
                "kv_cache_dtype": (plan.get("kv") or {}).get("dtype") or plan.get("kv_cache_dtype"),
                "layout": layout,
            },
        )
        entry.update(figures)
        if origin.get("kv_blocks") is not None:
            entry["kv_blocks"] = int(origin["kv_blocks"])
        entry["measured_at"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        entry["source"] = source + (
            "" if engine_version else " (engine version: the plan's, the endpoint has no /version)"
        )
    return [{k: v for k, v in e.items() if v is not None} for e in out.values()]


def merge(existing: list[dict], new: list[dict]) -> list[dict]:
    """New entries replace the ones measured for the same model, GPU, engine minor, weights, KV dtype and layout."""

    def key(e):
        return tuple(_minor(e.get(k)) if k == "vllm_version" else e.get(k) for k in KEY) + (
            tuple(sorted((e.get("layout") or {}).items())),
        )

    fresh = {key(e) for e in new}
    return [e for e in existing if key(e) not in fresh] + new


def calibration_path(inventory_dir: str, host: str) -> tuple[str, str | None]:
    """(path of host_vars/<host>/calibration.yml, the host_vars file that must move into the directory or None)."""
    hv = os.path.join(inventory_dir, "host_vars")
    directory = os.path.join(hv, host)
    single = next(
        (
            os.path.join(hv, host + ext)
            for ext in (".yml", ".yaml", ".json")
            if os.path.isfile(os.path.join(hv, host + ext))
        ),
        None,
    )
    return os.path.join(directory, "calibration.yml"), single if not os.path.isdir(directory) else None


def read(path: str) -> list[dict]:
    import yaml

    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as fh:
        doc = yaml.safe_load(fh) or {}
    cal = doc.get("calibration") or []
    return [cal] if isinstance(cal, dict) else list(cal)


def write(inventory_dir: str, host: str, new: list[dict]) -> dict:
    """Merge ``new`` into the cluster's calibration file; returns the file, the entries and what moved."""
    import yaml

    path, single = calibration_path(inventory_dir, host)
    note = None
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if single:
        target = os.path.join(os.path.dirname(path), "main" + os.path.splitext(single)[1])
        os.replace(single, target)
        note = (
            f"moved {os.path.relpath(single, inventory_dir)} to {os.path.relpath(target, inventory_dir)}: "
            "Ansible reads only the directory when host_vars has both"
        )
    merged = merge(read(path), new)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(HEADER)
        yaml.safe_dump({"calibration": merged}, fh, sort_keys=False, default_flow_style=False)
    os.replace(tmp, path)
    return {"file": path, "entries": new, "all_entries": merged, "note": note}


def kv_blocks(metrics_text: str) -> int | None:
    """num_gpu_blocks from vLLM's ``vllm:cache_config_info`` gauge, or None."""
    m = CACHE_INFO.search(metrics_text or "")
    if not m:
        return None
    labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
    try:
        return int(labels["num_gpu_blocks"])
    except (KeyError, ValueError):
        return None
