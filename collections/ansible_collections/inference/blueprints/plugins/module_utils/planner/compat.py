# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""The engine compatibility table (catalog/engine_compat.yaml): what an engine version accepts per attention type.

``support(attention, version)`` gives the planner one ``Support`` to ask before it emits a connector, an offload
backend, context parallelism or a speculative method; ``refusals(plan, model)`` lists everything in a finished plan
that the table says the engine refuses (the planner asserts it is empty; tests run it over a grid).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from . import data
from .errors import PlanError

TABLE = "engine_compat.yaml"


def table() -> dict:
    return data.load(TABLE)


def minor(version: str) -> str:
    return ".".join(str(version).split(".")[:2])


@dataclass(frozen=True)
class Support:
    """What one engine version accepts for one attention type (one row group of the table)."""

    engine: str
    version: str
    attention: str
    row: dict
    offload_sizing: dict

    # ------------------------------------------------------------------ connectors

    def connector(self, name: str) -> dict:
        entry = self.row["connectors"].get(name)
        if entry is None:
            return {"supported": False, "why": f"{name} is not in the compatibility table", "source": TABLE}
        return entry

    def connector_ok(self, name: str, children: list[str] | None = None) -> tuple[bool, str]:
        """Whether ``name`` (with ``children`` for MultiConnector) is accepted for this attention type."""
        entry = self.connector(name)
        if entry["supported"] == "children":
            bad = [(c, why) for c in children or [] for ok, why in [self.connector_ok(c)] if not ok]
            if not children:
                return False, f"{name} without child connectors"
            if bad:
                return False, f"{name} needs every child supported; " + "; ".join(w for _c, w in bad)
            return True, ""
        if entry["supported"]:
            return True, ""
        return False, f"{name} on {self.attention}: {entry.get('why', 'unsupported')}"

    def connector_needs(self, name: str) -> dict:
        """Constraints of an accepted connector: max_pp, pd_dcp, requires, env (empty when none)."""
        entry = self.connector(name)
        return {k: entry[k] for k in ("max_pp", "pd_dcp", "requires", "env") if k in entry}

    def offload_backend(self, backend: str) -> dict:
        return self.row["offload_backends"].get(backend) or {"supported": False, "why": "not in the table"}

    # ------------------------------------------------------------------ context parallel

    def pcp_ok(self, pcp: int, dcp: int) -> tuple[bool, str]:
        cp = self.row["context_parallel"]
        if pcp > 1 and not cp["pcp"]["supported"]:
            return False, f"PCP on {self.attention}: {cp['pcp']['why']}"
        if pcp > 1 and dcp > 1 and not cp["pcp_with_dcp"]["supported"]:
            return False, f"PCP with DCP on {self.attention}: {cp['pcp_with_dcp']['why']}"
        return True, ""

    def dcp_max(self, model: dict, tp: int) -> tuple[int, str]:
        """The largest DCP the engine accepts on TP ranks (without PCP), with the rule that bounds it."""
        dcp = self.row["context_parallel"]["dcp"]
        if not dcp.get("supported", True):
            return 1, f"vLLM {self.version} has no DCP for {self.attention}: {dcp['why']}"
        rule = dcp["rule"]
        if rule == "tp":
            return tp, f"DCP must divide TP={tp}"
        kv, heads = model["num_key_value_heads"], model["num_attention_heads"]
        if tp <= kv:
            why = f"vLLM {self.version} allows DCP for {self.attention} only when TP ({tp}) exceeds the {kv} KV heads"
            return 1, why
        d = tp // kv
        while d > 1 and ((heads // kv) % d or tp % d):
            d -= 1
        return d, f"DCP <= TP / KV heads = {tp // kv} and divides the {heads // kv} query heads per KV head"

    def dcp_ok(self, model: dict, tp: int, pcp: int, dcp: int) -> tuple[bool, str]:
        if dcp <= 1:
            return True, ""
        if pcp > 1:
            return (dcp in (pcp, tp * pcp), f"with PCP={pcp}, DCP must be 1, {pcp} or {tp * pcp}")
        top, why = self.dcp_max(model, tp)
        return (dcp <= top and tp % dcp == 0, f"DCP={dcp} on TP={tp}: {why}")

    # ------------------------------------------------------------------ speculative decoding

    def spec_method(self, method: str) -> tuple[str, str | None]:
        """The method name the engine wants (deprecated aliases mapped) and a note when it was an alias."""
        alias = self.row["speculative"]["deprecated_aliases"].get(method)
        if alias:
            return alias, f"{method} is a deprecated alias of {alias} in vLLM {self.version}"
        return method, None

    def spec_ok(self, method: str) -> tuple[bool, str]:
        sp = self.row["speculative"]
        if method in sp["deprecated_aliases"]:
            return False, f"speculative method {method} is a deprecated alias of {sp['deprecated_aliases'][method]}"
        if method not in sp["methods"]:
            return False, f"speculative method {method} is not one of {sp['methods']}"
        return True, ""


def support(attention: str, version: str, engine: str = "vllm") -> Support:
    versions = table()["engines"][engine]
    row = versions.get(minor(version))
    if row is None:
        raise PlanError("vllm_version", f"no compatibility table for {engine} {version}; have {', '.join(versions)}")
    if attention not in row["attention"]:
        raise PlanError("model.attention", f"{engine} {version} has no table row for attention {attention}")
    return Support(engine, minor(version), attention, row["attention"][attention], row["offload_sizing"])


def kserve_offloading(kserve_version: str = "v0.20.0") -> dict:
    """KServe's spec.kvCacheOffloading preset facts (what it emits and when)."""
    return table()["deployers"]["kserve"][kserve_version]["kv_cache_offloading"]


# ---------------------------------------------------------------------- checking a finished plan


def _flags(args: list[str]) -> dict:
    out = {}
    for a in args:
        k, dummy, v = a.partition("=")
        out[k] = v
    return out


def _connector_names(kvt: dict) -> tuple[str, list[str]]:
    children = (kvt.get("kv_connector_extra_config") or {}).get("connectors") or []
    return kvt["kv_connector"], [c["kv_connector"] for c in children]


def _connector_configs(kvt: dict) -> list[dict]:
    children = (kvt.get("kv_connector_extra_config") or {}).get("connectors") or []
    return children or [kvt]


def _pool_connector_refusals(sup: Support, pool: dict, disaggregated: bool) -> list[str]:
    flags = _flags(pool["engine_args"])
    if "--kv-transfer-config" not in flags:
        return []
    kvt = json.loads(flags["--kv-transfer-config"])
    name, children = _connector_names(kvt)
    ok, why = sup.connector_ok(name, children)
    out = [] if ok else [why]
    env = pool.get("engine_env") or {}
    for cfg in _connector_configs(kvt):
        out += _constraint_refusals(sup, cfg, pool, flags, (disaggregated, env))
    return out


def _constraint_refusals(sup: Support, cfg: dict, pool: dict, flags: dict, ctx: tuple) -> list[str]:
    disaggregated, env = ctx
    name = cfg["kv_connector"]
    need = sup.connector_needs(name)
    out = []
    if need.get("max_pp") and pool["pp"] > need["max_pp"]:
        out.append(f"{name} accepts PP <= {need['max_pp']} on {sup.attention}; pool has PP={pool['pp']}")
    if disaggregated and need.get("pd_dcp") == "one" and pool["dcp"] > 1:
        out.append(f"{name} between P/D pools needs DCP=1 on {sup.attention}; pool has DCP={pool['dcp']}")
    if disaggregated and need.get("pd_dcp") == "transfer_tp" and pool["dcp"] not in (1, max(pool["tp"], pool["pcp"])):
        out.append(f"{name} between P/D pools needs DCP in (1, max(TP, PCP)); pool has DCP={pool['dcp']}")
    if "prefix_caching" in need.get("requires", []) and "--enable-prefix-caching" not in flags:
        out.append(f"{name} on {sup.attention} needs --enable-prefix-caching")
    if "lmcache_mp_server" in need.get("requires", []):
        out.append(f"{name} needs an LMCache multi-process server, which the plan does not provide")
    for k, v in (need.get("env") or {}).items():
        if env.get(k) != v:
            out.append(f"{name} on {sup.attention} needs {k}={v} in the engine environment")
    if name == "OffloadingConnector" and not (cfg.get("kv_connector_extra_config") or {}).get("cpu_bytes_to_use"):
        out.append("OffloadingConnector needs kv_connector_extra_config.cpu_bytes_to_use")
    return out


def _pool_parallel_refusals(sup: Support, pool: dict, model: dict) -> list[str]:
    out = []
    ok, why = sup.pcp_ok(pool["pcp"], pool["dcp"])
    if not ok:
        out.append(why)
    ok, why = sup.dcp_ok(model, pool["tp"], pool["pcp"], pool["dcp"])
    if not ok:
        out.append(why)
    spec = _flags(pool["engine_args"]).get("--speculative-config")
    if spec:
        ok, why = sup.spec_ok(json.loads(spec)["method"])
        if not ok:
            out.append(why)
    return out


def refusals(plan: dict, model: dict) -> list[str]:
    """Everything in ``plan`` the table says its engine refuses, one line each (empty: the engine accepts it)."""
    sup = support(plan["model"]["attention"], plan["vllm_version"])
    out = []
    for role, pool in plan["pools"].items():
        if not pool:
            continue
        problems = _pool_connector_refusals(sup, pool, plan["disaggregated"]) + _pool_parallel_refusals(
            sup, pool, model
        )
        out += [f"{role}: {p}" for p in problems]
    return out
