# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Stage: the KV connector (seed section 4 table), the KV tier below HBM and its size per rank and per pod,
checked against the engine compatibility table (catalog/engine_compat.yaml)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .structs import Layout, Run, r

GIB = 2**30
TRANSPORTS = {"nvlink": "ucx-nvlink", "rdma": "ucx-rdma", "ethernet": "ucx-tcp"}
LMCACHE_CONNECTOR = "LMCacheConnectorV1"


@dataclass
class KVTransfer:
    """The connector choice, pool-independent: what moves KV between pools and what keeps a tier below HBM."""

    transfer: dict | None = None  # {name, role, transport}: NixlConnector / MooncakeConnector
    tier: str = "none"  # dram | nvme | none
    backend: str | None = None  # native | lmcache_v1 | None
    shared: bool = False  # LMCache remote tier shared across instances
    env: dict = field(default_factory=dict)  # environment every engine with this connector needs

    @property
    def tiering(self) -> dict | None:
        if self.backend == "native":
            transport = "cpu-dram" + ("+fs" if self.tier == "nvme" else "")
            return {"name": "OffloadingConnector", "role": "kv_both", "transport": transport}
        if self.backend == "lmcache_v1":
            where = self.tier if self.tier != "none" else "local"
            return {"name": LMCACHE_CONNECTOR, "role": "kv_both", "transport": f"lmcache-{where}"}
        return None

    def connector(self) -> dict | None:
        """plan.kv_connector: {name, role, transport, connectors} (connectors only for MultiConnector)."""
        parts = [x for x in (self.transfer, self.tiering) if x]
        if self.shared and self.tiering:
            parts[-1] = dict(parts[-1], transport=parts[-1]["transport"] + "+remote")
        if not parts:
            return None
        if len(parts) == 1:
            return dict(parts[0], connectors=None)
        return {"name": "MultiConnector", "role": "kv_both", "transport": parts[0]["transport"], "connectors": parts}


# --------------------------------------------------------------------------- choosing


def _transfer(run: Run, disagg: bool) -> dict | None:
    k = run.pol["kv_connector"]
    if k == "mooncake":
        return {"name": "MooncakeConnector", "role": "kv_both", "transport": "rdma"}
    if disagg:
        return {"name": "NixlConnector", "role": "kv_both", "transport": TRANSPORTS[run.n["interconnect"]]}
    return None


def _lmcache_refused(run: Run, xfer: KVTransfer) -> None:
    """LMCacheConnectorV1 was wanted (shared cache or policy lmcache) but the engine refuses it for this model."""
    sup, pol = run.sup, run.pol
    _ok, why = sup.connector_ok(LMCACHE_CONNECTOR)
    what = "a shared KV cache (LMCache remote tier)" if pol["shared_kv_cache"] else "policy kv_connector: lmcache"
    instead = (
        f"vLLM's native OffloadingConnector keeps the {pol['kv_offload'].upper()} tier"
        if xfer.backend == "native"
        else "no tier below HBM"
    )
    run.dec.add(
        "kv cache sharing",
        False,
        f"{what} needs {LMCACHE_CONNECTOR}, which vLLM {sup.version} refuses here ({why}); "
        f"LMCacheMPConnector supports it but needs an LMCache multi-process server the deployment does not run; "
        f"{instead}; prefix-aware routing still sends repeated prefixes to the engine that holds them",
    )
    run.warnings.append(f"{what} dropped for {run.model['id']}: {LMCACHE_CONNECTOR} lacks hybrid KV cache support")


def _choose_tier(run: Run, xfer: KVTransfer) -> None:
    pol, sup = run.pol, run.sup
    k = pol["kv_connector"]
    want_lmcache = pol["shared_kv_cache"] or k == "lmcache"
    if k == "mooncake":
        if xfer.tier != "none":
            why = (
                f"policy kv_connector: mooncake moves KV between engines; the {xfer.tier} tier is not combined with it"
            )
            run.dec.add("kv offload", None, why)
        xfer.tier = "none"
        return
    if want_lmcache and sup.offload_backend("lmcache_v1")["supported"]:
        xfer.backend, xfer.shared = "lmcache_v1", pol["shared_kv_cache"]
        return
    native = sup.offload_backend("native")
    if xfer.tier != "none" and not native["supported"]:
        why = f"vLLM {sup.version} has no native KV offload for {run.model['attention']}: {native.get('why')}"
        run.dec.add("kv offload", None, why)
        xfer.tier = "none"
    xfer.backend = "native" if xfer.tier != "none" else None
    if want_lmcache:
        _lmcache_refused(run, xfer)


def _check_requirements(run: Run, xfer: KVTransfer) -> None:
    """Drop a tier whose connector needs an engine setting the policy turned off."""
    tiering = xfer.tiering
    if not tiering:
        return
    needs = run.sup.connector_needs(tiering["name"]).get("requires", [])
    if "prefix_caching" in needs and not run.pol["prefix_caching"]:
        run.dec.add(
            "kv offload",
            None,
            f"{tiering['name']} on {run.model['attention']} models needs --enable-prefix-caching (block alignment of "
            "the Mamba/GDN state); policy prefix_caching is false, so no tier below HBM",
        )
        run.warnings.append(f"kv_offload {xfer.tier} dropped: {tiering['name']} needs prefix caching on this model")
        xfer.tier, xfer.backend, xfer.shared = "none", None, False


def _decide(run: Run, xfer: KVTransfer) -> None:
    conn = xfer.connector()
    if conn is None:
        why = "policy kv_connector: none" if run.pol["kv_connector"] == "none" else "no P/D transfer and no KV tier"
        run.dec.add("kv connector", None, why)
        return
    names = [c["name"] for c in conn["connectors"] or [conn]]
    ok, why = run.sup.connector_ok(conn["name"], names if conn["connectors"] else None)
    if not ok:  # the choices above only pick connectors the table accepts
        raise AssertionError(f"planner bug: {why}")
    parts = []
    if xfer.transfer:
        parts.append(f"{xfer.transfer['name']} moves KV between the P/D pools ({xfer.transfer['transport']})")
    if xfer.tiering:
        parts.append(
            f"{xfer.tiering['name']} keeps a {xfer.tier.upper() if xfer.tier != 'none' else 'local'} tier below HBM"
            + (" with a shared remote tier" if xfer.shared else "")
        )
    label = conn["name"] + (f"({', '.join(names)})" if conn["connectors"] else "")
    run.dec.add(
        "kv connector",
        label,
        "; ".join(parts)
        + f"; accepted by vLLM {run.sup.version} for {run.model['attention']} attention (engine_compat.yaml)",
    )


def choose_kv_transfer(run: Run, disagg: bool) -> KVTransfer:
    """Stage 7: the KV connector between pools and the tier below HBM, only what the engine accepts."""
    pol = run.pol
    xfer = KVTransfer()
    if pol["kv_connector"] == "none":
        if pol["kv_offload"] != "none" or pol["shared_kv_cache"] or disagg:
            run.warnings.append("policy kv_connector: none: no KV transfer between pools and no tier below HBM")
        _decide(run, xfer)
        return xfer
    xfer.transfer = _transfer(run, disagg)
    xfer.tier = pol["kv_offload"]
    _choose_tier(run, xfer)
    _check_requirements(run, xfer)
    if xfer.transfer:
        xfer.env = dict(run.sup.connector_needs(xfer.transfer["name"]).get("env") or {})
    _decide(run, xfer)
    return xfer


# --------------------------------------------------------------------------- sizing per pool


def _ranks_per_pod(lay: Layout, gpn: int) -> int:
    """GPU ranks one pod runs: the whole engine, or a node's share when PP spans nodes."""
    return min(lay.world, gpn)


def offload_per_pool(run: Run, xfer: KVTransfer, lay: Layout, pool_hw: tuple) -> dict | None:
    """plan.pools.<role>.kv_offload: the tier's size per rank, per engine and per pod (what the pod must request)."""
    if not xfer.backend:
        return None
    gpu, gpn = pool_hw
    pol = run.pol
    sizing = run.sup.offload_sizing
    requested = pol["kv_offload_gib"] if xfer.tier != "none" else sizing["lmcache_v1"]["default_gib"]
    cap = pol["kv_offload_max_gib_per_gpu"]
    per_rank = min(float(requested), float(cap))
    engine_core = lay.tp * lay.pp * lay.pcp  # one DP rank: the unit cpu_bytes_to_use configures
    ranks_pod = _ranks_per_pod(lay, gpn)
    native = xfer.backend == "native"
    in_shm = native and gpu.get("vendor") == "nvidia"  # vLLM maps the CPU tier from /dev/shm on CUDA
    cores_pod = max(1, ranks_pod // engine_core) if engine_core <= gpn else 1
    core_bytes = int(round(per_rank * engine_core * GIB))
    shm = core_bytes * cores_pod / GIB if in_shm else 0.0
    out = {
        "tier": xfer.tier if xfer.tier != "none" else "dram",
        "backend": xfer.backend,
        "connector": xfer.tiering["name"],
        "shared": xfer.shared,
        "requested_gib_per_rank": requested,
        "gib_per_rank": r(per_rank, 3),
        "ranks_per_engine": lay.world,
        "gib_per_engine": r(per_rank * lay.world, 3),
        "ranks_per_pod": ranks_pod,
        "gib_per_pod": r(max(per_rank * ranks_pod, shm), 3),
        "shm_gib_per_pod": r(shm, 3),
        "cpu_bytes_to_use": core_bytes if native else None,
        "lmcache_max_local_cpu_size": None if native else r(per_rank, 3),
        "disk_gib_per_pod": r(float(requested) * ranks_pod, 3) if xfer.tier == "nvme" else None,
        "kserve_kv_cache_offloading": native and not xfer.transfer,
    }
    if per_rank < requested:
        out["capped_by"] = "kv_offload_max_gib_per_gpu"
    return out


def offload_decision(run: Run, role: str, off: dict | None) -> None:
    if not off:
        return
    why = (
        f"{off['gib_per_rank']} GiB per GPU rank x {off['ranks_per_pod']} ranks per pod = {off['gib_per_pod']} GiB of "
        f"host memory per pod ({off['ranks_per_engine']} ranks per engine)"
    )
    if off["backend"] == "native":
        why += (
            f"; cpu_bytes_to_use={off['cpu_bytes_to_use']} per engine core (a DP rank and its TP x PP x PCP workers); "
            "each DP rank allocates its own"
        )
        if off["shm_gib_per_pod"]:
            why += "; on CUDA the tier lives in /dev/shm, so the pod's /dev/shm must hold it"
    else:
        why += "; LMCache max_local_cpu_size is allocated by every worker rank"
    if off.get("capped_by"):
        cap = run.pol["kv_offload_max_gib_per_gpu"]
        want = off["requested_gib_per_rank"]
        why = (
            f"{want} GiB per rank x {off['ranks_per_pod']} ranks = {r(want * off['ranks_per_pod'], 1)} GiB per pod "
            f"exceeds the host share of {cap} GiB per GPU ({r(cap * off['ranks_per_pod'], 1)} GiB); reduced to "
            f"{cap} GiB per rank. " + why
        )
    run.dec.add(f"{role}: kv offload", f"{off['gib_per_pod']} GiB per pod", why)


# --------------------------------------------------------------------------- --kv-transfer-config


def _one(x: dict, off: dict | None) -> dict:
    cfg = {"kv_connector": x["name"], "kv_role": x["role"]}
    if x["name"] == "NixlConnector":
        cfg["kv_connector_extra_config"] = {"backends": ["UCX"]}
    elif x["name"] == "OffloadingConnector" and off:
        extra = {"cpu_bytes_to_use": off["cpu_bytes_to_use"], "spec_name": "TieringOffloadingSpec"}
        if off["tier"] == "nvme":
            extra["secondary_tiers"] = [{"type": "fs", "root_dir": "/mnt/kv-cache-0"}]
        cfg["kv_connector_extra_config"] = extra
    elif x["name"] == LMCACHE_CONNECTOR and off:
        extra = {"lmcache.local_cpu": True, "lmcache.max_local_cpu_size": off["lmcache_max_local_cpu_size"]}
        if off["tier"] == "nvme":
            extra["lmcache.max_local_disk_size"] = off["requested_gib_per_rank"]
        cfg["kv_connector_extra_config"] = extra
    return cfg


def kv_transfer_json(conn: dict | None, off: dict | None) -> str | None:
    """--kv-transfer-config for one pool (the tier's size depends on the pool's layout)."""
    if not conn:
        return None
    if conn["name"] == "MultiConnector":
        cfg = {
            "kv_connector": "MultiConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": {"connectors": [_one(x, off) for x in conn["connectors"]]},
        }
    else:
        cfg = _one(conn, off)
    return json.dumps(cfg, separators=(",", ":"), sort_keys=True)
