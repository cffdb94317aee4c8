# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: serving_view
short_description: One normalised view of a planned model for the serving roles
version_added: 0.1.0
description:
  - Takes one entry of C(site_plans) (C({model, plan}), set by the C(inference.blueprints.site) role)
    and returns what the serving roles (C(model_service), C(inference_scheduler), C(kv_cache),
    C(serving_autoscaling), C(observability)) need to agree on - object names, pools, the KV
    connector, the KV offload tier, whether the llm-d scheduler is used - so that every role
    derives them the same way.
  - It computes no sizes; replicas, GPUs and parallelism are copied from the plan.
author:
  - inference.blueprints contributors
positional: _input, blueprint, components
options:
  _input:
    description: One C(site_plans) entry, a dict with C(model) (the inventory model) and C(plan).
    type: dict
    required: true
  blueprint:
    description: The blueprint data (C(site_blueprint)), for its C(policy) and C(defaults).
    type: dict
    default: {}
  components:
    description: The blueprint's component (role) names (C(site_components)).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Show the pools of every model
  ansible.builtin.debug:
    msg: "{{ item | inference.blueprints.serving_view(site_blueprint, site_components) }}"
  loop: "{{ site_plans }}"
"""

RETURN = r"""
_value:
  description: The view.
  type: dict
  contains:
    name:
      description: Kubernetes name of the LLMInferenceService (the inventory model name).
      type: str
    names:
      description: Names of every object derived from the model (pool, EPP config, LMCache, workloads).
      type: dict
    pools:
      description: The pools, each with C(role) (prefill, decode or serve) and the plan's sizes and engine_args.
      type: list
    main:
      description: The decode pool when disaggregated, otherwise the single serve pool.
      type: dict
    prefill:
      description: The prefill pool, or null.
      type: dict
    disaggregated:
      description: Whether prefill and decode run in separate pools.
      type: bool
    nixl:
      description: Whether KV moves between pools with a NIXL connector.
      type: bool
    rdma:
      description: Whether the KV transport is RDMA (RDMA devices requested).
      type: bool
    lmcache:
      description: Whether LMCache is configured (offload tier or shared pool) and the kv_cache component is used.
      type: bool
    offload:
      description: KV offload tier, none, dram or nvme.
      type: str
    shared_kv:
      description: Whether a shared LMCache server holds KV for every worker.
      type: bool
    scheduler:
      description: Whether the llm-d scheduler (InferencePool + EPP) fronts the model.
      type: bool
    speculative:
      description: The plan's speculative decoding settings, or null.
      type: dict
    scale_to_zero:
      description: Whether the autoscaler may scale the model to zero replicas.
      type: bool
    autoscaled:
      description:
        - Whether a KEDA ScaledObject owns the main workload's replica count (scale to zero, or a plan
          with C(autoscaling.max_replicas) above the planned replicas); the LLMInferenceService then
          leaves C(replicas) unset.
      type: bool
    min_replicas:
      description: Fewest replicas of the main workload the autoscaler keeps.
      type: int
    max_replicas:
      description: Most replicas of the main workload the autoscaler may run (the plan's size by default).
      type: int
"""

import json  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402

POOL_FIELDS = ("replicas", "gpus_per_replica", "gpu", "tp", "dp", "pp", "ep", "dcp", "pcp")


def _get(d, key, default=None):
    return d.get(key, default) if isinstance(d, dict) else default


def _flag_value(args, flag):
    for arg in args or []:
        if isinstance(arg, str) and (arg == flag or arg.startswith(flag + "=") or arg.startswith(flag + " ")):
            return arg[len(flag) + 1 :] if len(arg) > len(flag) else ""
        if isinstance(arg, dict) and flag in arg:
            value = arg[flag]
            return json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    return None


def _pool(role, pool, fallback_args):
    out = {"role": role}
    for f in POOL_FIELDS:
        out[f] = _get(pool, f)
    for f in ("tp", "dp", "pp", "ep", "dcp", "pcp"):
        out[f] = int(out[f] or 1)
    out["replicas"] = int(out["replicas"] if out["replicas"] is not None else 1)
    out["gpus_per_replica"] = int(out["gpus_per_replica"] or out["tp"] * out["pp"] * out["pcp"])
    out["engine_args"] = list(_get(pool, "engine_args") or fallback_args or [])
    out["resources"] = _get(pool, "resources") or {}
    return out


def serving_view(entry, blueprint=None, components=None):
    if not isinstance(entry, dict) or "plan" not in entry or "model" not in entry:
        raise AnsibleFilterError("serving_view: expected a site_plans entry with 'model' and 'plan'")
    model, plan = entry["model"] or {}, entry["plan"] or {}
    blueprint = blueprint or {}
    components = list(components or blueprint.get("components") or [])
    # The plan's resolved policy wins; the blueprint's (plus the model's overrides) fills gaps.
    policy = dict(blueprint.get("policy") or {})
    policy.update(model.get("policy") or {})
    policy.update(plan.get("policy") or {})
    name = model.get("name") or _get(plan.get("model"), "name")
    if not name:
        raise AnsibleFilterError("serving_view: the model has no name")

    pools_in = plan.get("pools") or {}
    disagg = bool(plan.get("disaggregated")) and bool(pools_in.get("prefill")) and bool(pools_in.get("decode"))
    main_args = plan.get("engine_args") or []
    if disagg:
        prefill = _pool("prefill", pools_in["prefill"], main_args)
        main = _pool("decode", pools_in["decode"], main_args)
        pools = [prefill, main]
    else:
        serve = pools_in.get("serve") or pools_in.get("decode") or {}
        main = _pool("serve", serve, main_args)
        if not serve:
            main.update({k: _get(plan.get("layout"), k, main[k]) for k in ("tp", "dp", "pp", "ep", "dcp", "pcp")})
        prefill = None
        pools = [main]

    connector = plan.get("kv_connector") or None
    parts = [connector] + list(_get(connector, "connectors") or []) if connector else []
    names_used = " ".join(str(_get(c, "name") or "") for c in parts)
    names_used += " " + " ".join(filter(None, (_flag_value(p["engine_args"], "--kv-transfer-config") for p in pools)))
    transports = " ".join(str(_get(c, "transport") or "") for c in parts)
    nixl = "Nixl" in names_used
    rdma = nixl and (
        "rdma" in transports or (not transports.strip() and _get(plan.get("hardware"), "interconnect") == "rdma")
    )

    offload = plan.get("kv_offload")
    if isinstance(offload, dict):
        offload_gib = offload.get("gib_per_engine") or offload.get("gib") or policy.get("kv_offload_gib", 64)
        offload = offload.get("tier") or "none"
    else:
        offload_gib = policy.get("kv_offload_gib", 64)
        offload = offload or ("none" if "kv_offload" in plan else policy.get("kv_offload")) or "none"
    shared = bool(policy.get("shared_kv_cache", False))
    lmcache = "kv_cache" in components and (offload != "none" or shared or "LMCache" in names_used)

    scale_to_zero = bool(_get(plan.get("autoscaling"), "scale_to_zero", policy.get("scale_to_zero", False)))
    default_min = 0 if scale_to_zero else 1
    min_replicas = int(_get(plan.get("autoscaling"), "min_replicas", policy.get("min_replicas", default_min)))
    max_replicas = int(_get(plan.get("autoscaling"), "max_replicas", main["replicas"]) or main["replicas"])
    max_replicas = max(max_replicas, main["replicas"], 1)
    autoscaled = "serving_autoscaling" in components and (scale_to_zero or max_replicas > main["replicas"])
    slo = dict((blueprint.get("defaults") or {}).get("slo") or {})
    slo.update(model.get("slo") or {})
    slo.update(plan.get("slo") or {})

    names = {
        "service": name,
        "pool": f"{name}-inference-pool",
        "epp_config": f"{name}-epp-config",
        "epp_service": f"{name}-epp-service",
        "epp_deployment": f"{name}-kserve-router-scheduler",
        "lmcache_config": f"{name}-lmcache",
        "lmcache_server": f"{name}-lmcache-server",
        "main_deployment": f"{name}-kserve",
        "prefill_deployment": f"{name}-kserve-prefill",
        "workload_service": f"{name}-kserve-workload-svc",
        "scaledobject": f"{name}-decode-scaler" if disagg else f"{name}-scaler",
        "escalation": f"{name}-escalation",
    }
    return {
        "name": name,
        "model_id": model.get("id") or _get(plan.get("model"), "id"),
        "served_name": model.get("served_name") or model.get("id") or name,
        "uri": _get(model.get("artifact"), "uri"),
        "max_model_len": model.get("max_model_len"),
        "names": names,
        "pools": pools,
        "main": main,
        "prefill": prefill,
        "disaggregated": disagg,
        "kv_connector": connector,
        "nixl": nixl,
        "rdma": bool(rdma),
        "offload": offload,
        "offload_gib": offload_gib,
        "shared_kv": shared and "kv_cache" in components,
        "lmcache": lmcache,
        "scheduler": "inference_scheduler" in components,
        "speculative": plan.get("speculative") or None,
        "scale_to_zero": scale_to_zero,
        "min_replicas": min_replicas,
        "max_replicas": max_replicas,
        "autoscaled": autoscaled,
        "output_token_cap": policy.get("output_token_cap"),
        "slo": slo,
        "policy": policy,
    }


class FilterModule:
    def filters(self):
        return {"serving_view": serving_view}
