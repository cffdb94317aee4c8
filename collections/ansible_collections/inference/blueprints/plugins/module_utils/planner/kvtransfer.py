# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Stage: the KV connector (seed section 4 table) and its --kv-transfer-config."""

from __future__ import annotations

import json

from .structs import Run


def choose_connector(run: Run, disagg: bool) -> dict | None:
    """Stage 7: the KV connector between pools and to the tiers below HBM."""
    n, pol, dec = run.n, run.pol, run.dec
    k = pol["kv_connector"]
    off = pol["kv_offload"] != "none"
    shared = pol["shared_kv_cache"]
    transport = {"nvlink": "ucx-nvlink", "rdma": "ucx-rdma", "ethernet": "ucx-tcp"}[n["interconnect"]]
    if k == "none":
        dec.add("kv connector", None, "policy kv_connector: none")
        return None
    if k == "mooncake":
        dec.add(
            "kv connector", "MooncakeConnector", "policy kv_connector: mooncake (cluster-scale shared KV pool, RDMA)"
        )
        return {"name": "MooncakeConnector", "role": "kv_both", "transport": "rdma", "connectors": None}
    lm = {
        "name": "LMCacheConnectorV1",
        "role": "kv_both",
        "transport": f"lmcache-{pol['kv_offload'] if off else 'local'}" + ("+remote" if shared else ""),
    }
    nixl = {"name": "NixlConnector", "role": "kv_both", "transport": transport}
    if k == "lmcache" and not disagg:
        dec.add("kv connector", "LMCacheConnectorV1", "policy kv_connector: lmcache")
        return dict(lm, connectors=None)
    if disagg:
        if off or shared or k == "lmcache":
            dec.add(
                "kv connector",
                "MultiConnector(NixlConnector, LMCacheConnectorV1)",
                f"P/D transfer over NIXL ({transport}) plus LMCache tiering/sharing (seed section 4 table)",
            )
            return {"name": "MultiConnector", "role": "kv_both", "transport": transport, "connectors": [nixl, lm]}
        dec.add(
            "kv connector",
            "NixlConnector",
            f"P/D in one cluster with {n['interconnect']}: NIXL over UCX (seed section 4 table)",
        )
        return dict(nixl, connectors=None)
    if off or shared:
        dec.add(
            "kv connector",
            "LMCacheConnectorV1",
            f"KV tiering HBM->{pol['kv_offload'].upper() if off else 'remote'}"
            + (" with a shared prefix cache" if shared else "")
            + " (seed section 4/5: LMCache)",
        )
        return dict(lm, connectors=None)
    dec.add("kv connector", None, "aggregated serving without KV offload: no connector")
    return None


def kv_transfer_json(conn: dict | None) -> str | None:
    if not conn:
        return None

    def one(x):
        return {"kv_connector": x["name"], "kv_role": x["role"]}

    if conn["name"] == "MultiConnector":
        cfg = {
            "kv_connector": "MultiConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": {"connectors": [one(x) for x in conn["connectors"]]},
        }
    else:
        cfg = one(conn)
    if conn["name"] == "NixlConnector":
        cfg["kv_connector_extra_config"] = {"backends": ["UCX"]}
    return json.dumps(cfg, separators=(",", ":"), sort_keys=True)
