# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The canary's rules (seed 002, section 4: one pool at a time, rollback gates on TTFT and TPOT).

``steps(service, change)`` orders the change over a live LLMInferenceService: the prefill pool
(``spec.prefill.template``) before the main one (``spec.template``: decode, or the single pool), each
getting the new engine image and engine arguments; a new model artifact (``spec.model.uri``, one field
both pools share in KServe v0.20.0) is one step of its own after them. ``gates(baseline, after, canary)``
compares the benchmark after a step with the one before the canary at the gate percentile;
``restorable(obj)`` is what a rollback writes back and ``same(a, b)`` what must then be equal.
"""

from __future__ import annotations

import copy
import shlex

ARGS_ENV = "VLLM_ADDITIONAL_ARGS"  # the engine arguments of a pool's container (intent/serving.py)
POOL_PATHS = {"prefill": ("spec", "prefill", "template"), "main": ("spec", "template")}
# metadata a rollback writes back; the rest (uid, resourceVersion, generation, managedFields) is the server's
KEPT_METADATA = ("name", "namespace", "labels", "annotations")


def _get(obj: dict, path: tuple) -> dict | None:
    for k in path:
        obj = (obj or {}).get(k)
    return obj


def _main_container(template: dict) -> dict:
    containers = template.setdefault("containers", [])
    found = next((c for c in containers if c.get("name") == "main"), None)
    if found is None:
        found = {"name": "main"}
        containers.append(found)
    return found


def set_engine_args(current: str, flags: list[str]) -> str:
    """``current`` with each ``--flag=value`` (or ``--flag``) of ``flags`` replacing the same flag."""
    words = shlex.split(current or "")
    for flag in flags:
        name = flag.split("=", 1)[0]
        words = [w for w in words if w != name and not w.startswith(name + "=")]
        words.append(flag)
    return " ".join(shlex.quote(w) for w in words)


def _change_pool(template: dict, change: dict) -> list[str]:
    what = []
    main = _main_container(template)
    if change.get("image"):
        main["image"] = change["image"]
        what.append(f"image {change['image']}")
    if change.get("engine_args"):
        env = main.setdefault("env", [])
        var = next((e for e in env if e.get("name") == ARGS_ENV), None)
        if var is None:
            var = {"name": ARGS_ENV, "value": ""}
            env.append(var)
        var["value"] = set_engine_args(var.get("value", ""), change["engine_args"])
        what.append("engine args " + " ".join(change["engine_args"]))
    return what


def steps(service: dict, change: dict) -> list[dict]:
    """[{pool, role, what, object}] in canary order; each object is the service after that step alone."""
    out = []
    roles = {"prefill": "prefill", "main": "decode" if _get(service, POOL_PATHS["prefill"]) else "serve"}
    for pool in ("prefill", "main"):
        template = _get(service, POOL_PATHS[pool])
        if template is None or not (change.get("image") or change.get("engine_args")):
            continue
        new = copy.deepcopy(service)
        what = _change_pool(_get(new, POOL_PATHS[pool]), change)
        out.append({"pool": pool, "role": roles[pool], "what": "; ".join(what), "object": new})
    if change.get("model_uri"):
        new = copy.deepcopy(service)
        new["spec"].setdefault("model", {})["uri"] = change["model_uri"]
        out.append({"pool": "model", "role": "model", "what": f"model {change['model_uri']}", "object": new})
    return out


def apply_step(live: dict, step: dict) -> dict:
    """The live object with the step's pool (or model) part taken from the step (earlier promoted steps kept)."""
    new = copy.deepcopy(live)
    if step["pool"] == "model":
        new["spec"]["model"] = copy.deepcopy(step["object"]["spec"]["model"])
        return new
    path = POOL_PATHS[step["pool"]]
    parent = _get(new, path[:-1])
    parent[path[-1]] = copy.deepcopy(_get(step["object"], path))
    return new


def restorable(obj: dict) -> dict:
    """What a write sends to make the object ``obj`` again: its spec and our metadata, no status."""
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {k: copy.deepcopy(meta[k]) for k in KEPT_METADATA if k in meta},
        "spec": copy.deepcopy(obj.get("spec") or {}),
    }


def same(a: dict, b: dict) -> bool:
    return restorable(a) == restorable(b)


def gates(baseline: dict, after: dict, canary: dict) -> list[dict]:
    """Every gate the run after a step trips against the baseline, per entry point and metric."""
    q = canary["percentile"]
    limits = {"ttft": canary["ttft_regression_pct"], "tpot": canary["tpot_regression_pct"]}
    base_by_pool = {r["pool"]: r for r in baseline["runs"]}
    tripped = []
    for run in after["runs"]:
        base = base_by_pool.get(run["pool"])
        if run["runner_error"] or run["completed"] == 0 or run["error_rate"] > canary["max_error_rate"]:
            why = run["runner_error"] or "; ".join(run["error_samples"])
            if run["completed"] == 0 and not run["runner_error"]:  # not an error rate: nothing finished in time
                msg = f"{run['model']} {run['pool']}: no request completed within the benchmark" + (
                    f" ({why})" if why else ""
                )
            else:
                rate, limit = run["error_rate"], canary["max_error_rate"]
                msg = f"{run['model']} {run['pool']}: error rate {rate:.1%} > {limit:.1%} ({why})"
            tripped.append({"gate": "max_error_rate", "pool": run["pool"], "msg": msg})
            continue
        for metric, pct in limits.items():
            if not base or not base.get(metric) or not run.get(metric):
                continue
            before, now = base[metric][q], run[metric][q]
            limit = before * (1 + pct / 100.0)
            if now > limit:
                tripped.append(
                    {
                        "gate": f"{metric}_regression_pct",
                        "metric": metric.upper(),
                        "percentile": q,
                        "pool": run["pool"],
                        "baseline_ms": before,
                        "after_ms": now,
                        "limit_pct": pct,
                        "msg": f"{run['model']} {run['pool']}: {metric.upper()} {q} {now:.1f} ms > {limit:.1f} ms "
                        f"(baseline {before:.1f} ms + {pct:g} %; gate {metric}_regression_pct)",
                    }
                )
    return tripped
