# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""The engine compatibility table: its facts (read from the vLLM 0.33.0 / LMCache 0.5.6 wheels and KServe v0.20.0)
and the checker that refuses what the engine refuses."""

from __future__ import annotations

import json

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils.planner import compat, data

M = data.models()
ATTENTIONS = ("hybrid_gdn", "gqa", "mla")


def rows():
    for attention in ATTENTIONS:
        yield attention, compat.support(attention, "0.33.0")


def test_every_entry_names_its_source():
    for attention, sup in rows():
        for section in ("connectors", "offload_backends", "context_parallel"):
            for name, entry in sup.row[section].items():
                assert entry.get("source"), (attention, section, name)
        assert sup.row["speculative"]["source"]
    for unit in compat.table()["engines"]["vllm"]["0.33"]["offload_sizing"].values():
        assert unit["source"] and unit["summary"]
    assert compat.kserve_offloading()["source"]


def test_hybrid_models_refuse_lmcache_v1_alone_and_inside_multiconnector():
    sup = compat.support("hybrid_gdn", "0.33.0")
    assert not sup.connector_ok("LMCacheConnectorV1")[0]
    assert not sup.connector_ok("MultiConnector", ["NixlConnector", "LMCacheConnectorV1"])[0]
    for name in ("NixlConnector", "OffloadingConnector", "LMCacheMPConnector", "MooncakeConnector"):
        assert sup.connector_ok(name)[0], name
    # MultiConnector supports HMA only when every child does
    assert sup.connector_ok("MultiConnector", ["NixlConnector", "OffloadingConnector"])[0]
    assert not sup.connector_ok("MultiConnector", [])[0]
    assert not sup.offload_backend("lmcache_v1")["supported"]
    assert sup.offload_backend("native")["connector"] == "OffloadingConnector"
    # attention-only models keep LMCacheConnectorV1 (one KV cache group, no HMA needed)
    for attention in ("gqa", "mla"):
        assert compat.support(attention, "0.33").connector_ok("LMCacheConnectorV1")[0]


def test_nixl_on_hybrid_needs_pp1_dcp1_and_the_ds_conv_layout():
    need = compat.support("hybrid_gdn", "0.33.0").connector_needs("NixlConnector")
    assert need["max_pp"] == 1 and need["pd_dcp"] == "one"
    assert need["env"] == {"VLLM_SSM_CONV_STATE_LAYOUT": "DS"}
    assert compat.support("mla", "0.33.0").connector_needs("NixlConnector")["pd_dcp"] == "transfer_tp"
    assert "prefix_caching" in compat.support("hybrid_gdn", "0.33.0").connector_needs("OffloadingConnector")["requires"]


def test_pcp_is_mla_only_and_never_with_dcp():
    for attention, sup in rows():
        assert sup.pcp_ok(2, 1)[0] == (attention == "mla"), attention
        assert not sup.pcp_ok(2, 2)[0]
        assert sup.pcp_ok(1, 1)[0]


@pytest.mark.parametrize(
    ("model", "tp", "expected"),
    [
        ("Qwen3.6-27B", 2, 1),  # 4 KV heads: DCP needs TP > 4
        ("Qwen3.6-27B", 4, 1),
        ("Qwen3.6-27B", 8, 2),  # TP / KV heads = 2; 6 query heads per KV head
        ("Qwen3.5-35B-A3B", 2, 1),  # 2 KV heads
        ("Qwen3.5-35B-A3B", 4, 2),
        ("Qwen3.5-397B-A17B", 8, 4),
        ("Llama-3.3-70B-Instruct", 8, 1),  # 8 KV heads
        ("DeepSeek-V3", 8, 8),  # MLA: any divisor of TP
    ],
)
def test_dcp_limits(model, tp, expected):
    m = M[model]
    sup = compat.support(m["attention"], "0.33.0")
    assert sup.dcp_max(m, tp)[0] == expected
    assert sup.dcp_ok(m, tp, 1, expected)[0]
    assert not sup.dcp_ok(m, tp, 1, expected * 2)[0]


def test_speculative_aliases_map_to_mtp():
    for _attention, sup in rows():
        assert sup.spec_method("qwen3_5_mtp") == ("mtp", "qwen3_5_mtp is a deprecated alias of mtp in vLLM 0.33")
        assert sup.spec_method("mtp") == ("mtp", None)
        assert sup.spec_ok("mtp")[0] and sup.spec_ok("ngram")[0] and sup.spec_ok("eagle3")[0]
        assert not sup.spec_ok("qwen3_5_mtp")[0] and not sup.spec_ok("deepseek_mtp")[0]


def test_kserve_offloading_note():
    k = compat.kserve_offloading("v0.20.0")
    assert k["connector"] == "OffloadingConnector" and k["spec_name"] == "TieringOffloadingSpec"
    assert k["min_vllm"] == "0.22.0" and k["emitted_only_without_kv_transfer_config"] is True
    assert k["cpu_key"] == "cpu_bytes_to_use"


def test_unknown_engine_version_is_an_input_error():
    with pytest.raises(Exception) as e:
        compat.support("gqa", "0.1.0")
    assert "no compatibility table" in str(e.value)


def _pool(args, **kw):
    pool = {"tp": 1, "pp": 1, "dp": 1, "dcp": 1, "pcp": 1, "engine_args": args, "engine_env": {}}
    pool.update(kw)
    return pool


def _kvt(cfg):
    return "--kv-transfer-config=" + json.dumps(cfg)


def _plan(pools, attention="hybrid_gdn", disaggregated=False):
    return {
        "model": {"attention": attention},
        "vllm_version": "0.33.0",
        "disaggregated": disaggregated,
        "pools": {"prefill": None, "decode": None, "serve": None, **pools},
    }


def test_refusals_catch_what_the_engine_refuses():
    """The issue-8 example plans: LMCache inside MultiConnector, PCP on a hybrid model, the qwen3_5_mtp alias."""
    m27 = M["Qwen3.6-27B"]
    multi = {
        "kv_connector": "MultiConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {
            "connectors": [
                {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"},
            ]
        },
    }
    spec = '--speculative-config={"method":"qwen3_5_mtp","num_speculative_tokens":2}'
    bad = compat.refusals(_plan({"decode": _pool([_kvt(multi), spec], pp=2)}, disaggregated=True), m27)
    text = " | ".join(bad)
    assert "LMCacheConnectorV1" in text and "HMA" in text
    assert "VLLM_SSM_CONV_STATE_LAYOUT=DS" in text
    assert "PP <= 1" in text
    assert "deprecated alias" in text
    rag = _pool(["--prefill-context-parallel-size=8", _kvt({"kv_connector": "LMCacheConnectorV1"})], pcp=8)
    assert any("PCP on hybrid_gdn" in r for r in compat.refusals(_plan({"serve": rag}), m27))
    assert any("DCP=2 on TP=2" in r for r in compat.refusals(_plan({"serve": _pool([], tp=2, dcp=2)}), m27))
    # what the engine accepts
    good = {
        "kv_connector": "MultiConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {
            "connectors": [
                {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                {
                    "kv_connector": "OffloadingConnector",
                    "kv_role": "kv_both",
                    "kv_connector_extra_config": {"cpu_bytes_to_use": 2**36},
                },
            ]
        },
    }
    ok = _pool(
        [_kvt(good), "--enable-prefix-caching", '--speculative-config={"method":"mtp"}'],
        engine_env={"VLLM_SSM_CONV_STATE_LAYOUT": "DS"},
    )
    assert compat.refusals(_plan({"decode": ok}, disaggregated=True), m27) == []
    no_size = dict(good["kv_connector_extra_config"]["connectors"][1], kv_connector_extra_config={})
    bare = _pool([_kvt(no_size), "--enable-prefix-caching"])
    assert compat.refusals(_plan({"serve": bare}), m27) == [
        "serve: OffloadingConnector needs kv_connector_extra_config.cpu_bytes_to_use"
    ]


# ---------------------------------------------------------------------- vLLM 0.24 (Red Hat AI Inference 3.5.0)


def test_vllm_024_differs_from_033_where_its_wheel_does():
    """What 0.24.0's wheel lacks: NIXL with PP > 1 or DCP between P/D pools, Mooncake's GDN state path, context
    parallelism on hybrid layouts, PCP anywhere, and (without an --attention-backend) DCP on MLA."""
    old = {a: compat.support(a, "0.24.0") for a in ATTENTIONS}
    for attention, sup in old.items():
        need = sup.connector_needs("NixlConnector")
        assert need["max_pp"] == 1 and need["pd_dcp"] == "one", attention
        ok, why = sup.pcp_ok(2, 1)
        assert not ok and "no attention implementation in vLLM 0.24 supports PCP" in why, attention
        assert sup.connector_ok("OffloadingConnector")[0] and sup.spec_ok("mtp")[0]
        assert sup.spec_method("qwen3_5_mtp")[0] == "mtp"
    ok, why = old["hybrid_gdn"].connector_ok("MooncakeConnector")
    assert not ok and "Gated DeltaNet" in why
    assert old["gqa"].connector_ok("MooncakeConnector")[0]
    for model, tp in (("Qwen3.6-27B", 8), ("Qwen3.5-397B-A17B", 8), ("DeepSeek-V3", 8)):
        m = M[model]
        top, why = old[m["attention"]].dcp_max(m, tp)
        assert top == 1 and why.startswith("vLLM 0.24 has no DCP for"), (model, why)
        assert compat.support(m["attention"], "0.33.0").dcp_max(m, tp)[0] > 1  # 0.33 has it
    # GQA keeps the KV-heads rule
    assert old["gqa"].dcp_max(M["Llama-3.3-70B-Instruct"], 16)[0] == 2
    assert compat.table()["engines"]["vllm"]["0.24"]["source"].startswith("vLLM 0.24.0 wheel from PyPI")


@pytest.mark.parametrize(("version", "off"), [("0.24.0", "--no-enable-"), ("0.33.0", "--disable-")])
def test_a_switched_off_feature_is_spelled_the_way_the_engine_version_parses_it(version, off):
    """0.24 registers --X/--no-X only (--disable-prefix-caching is an unknown argument there); 0.33 adds --disable-X."""
    from ansible_collections.inference.blueprints.plugins.module_utils.planner import plan

    p = plan(
        {
            "model": "Llama-3.3-70B-Instruct",
            "gpu": "h100",
            "gpus_per_node": 8,
            "nodes": 1,
            "blueprint": "batch",
            "vllm_version": version,
            "policy": {"prefix_caching": False, "chunked_prefill": False},
        }
    )
    args = [a for pool in p["pools"].values() if pool for a in pool["engine_args"]]
    assert f"{off}prefix-caching" in args and f"{off}chunked-prefill" in args, args
    assert set(a.split("=", 1)[0] for a in args) <= set(data.vllm_flags(version)["flags"])
