# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Issue 8, planner defects 3, 4, 5 and 9: no plan carries an engine configuration vLLM 0.33 refuses, and the
KV tier's host memory is stated per rank and per pod. The checks below restate the upstream facts directly
(not through the compatibility table), so a wrong table entry fails them too."""

from __future__ import annotations

import copy
import itertools
import json
import math
import os

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils.planner import PlanError, compat, data

from tests.unit.planner.blueprint_plan import BLUEPRINTS, plan

GIB = 2**30
MODELS = data.models()
HARDWARE = [
    ("h100", 8, 2, None),
    ("rtx-pro-6000", 1, 1, None),
    ("b200", 8, 1, None),
    ("h100", 8, 2, "l40s"),
    ("mi300x", 8, 1, None),
    ("h200", 8, 4, None),
]
TRAFFIC = {
    "chat": {"prompt_tokens_mean": 800, "output_tokens_mean": 200, "concurrent_sessions": 3000},
    "long": {
        "prompt_tokens_mean": 60000,
        "prompt_tokens_p95": 131072,
        "output_tokens_mean": 1000,
        "output_tokens_p95": 4000,
        "concurrent_sessions": 40,
    },
}
POLICIES = [
    {},
    {"shared_kv_cache": True, "kv_offload": "dram"},
    {"kv_connector": "lmcache"},
    {"kv_offload": "nvme"},
    {"kv_offload": "dram", "kv_offload_gib": 256},
    {"disaggregation": "always", "kv_offload": "dram"},
]

# the example sites' planner inputs (inventories/example-chat and example-rag with blueprints/chat.yml, rag.yml)
CHAT_SITE = {
    "model": "Qwen3.5-35B-A3B",
    "name": "qwen-chat",
    "blueprint": "chat",
    "gpu": "h100",
    "gpus_per_node": 8,
    "nodes": 2,
    "interconnect": "rdma",
    "weights": "fp8",
    "kv_cache_dtype": "fp8",
    "max_model_len": 32768,
    "contexts": [8192, 32768],
    "traffic": {
        "prompt_tokens_mean": 800,
        "prompt_tokens_p95": 2000,
        "output_tokens_mean": 200,
        "output_tokens_p95": 600,
        "concurrent_sessions": 5000,
        "arrival_rate_rps": 25,
    },
    "slo": {"ttft_p95_ms": 1000, "tpot_p95_ms": 50},
    "policy": {"kv_offload": "dram", "kv_offload_gib": 64, "output_token_cap": 4096, "speculative": "auto"},
}
RAG_SITE = {
    "model": "Qwen3.6-27B",
    "name": "qwen-rag",
    "blueprint": "rag",
    "gpu": "h100",
    "gpus_per_node": 8,
    "nodes": 2,
    "interconnect": "rdma",
    "weights": "fp8",
    "kv_cache_dtype": "fp8",
    "max_model_len": 262144,
    "contexts": [32768, 131072, 262144],
    "traffic": {
        "prompt_tokens_mean": 48000,
        "prompt_tokens_p95": 160000,
        "output_tokens_mean": 400,
        "output_tokens_p95": 1200,
        "concurrent_sessions": 40,
        "arrival_rate_rps": 0.5,
    },
    "slo": {"ttft_p95_ms": 4000, "tpot_p95_ms": 80},
    "policy": {
        "kv_offload": "dram",
        "kv_offload_gib": 128,
        "shared_kv_cache": True,
        "speculative": "off",
        "output_token_cap": 2048,
        "max_num_seqs": 64,
        "max_num_batched_tokens": 16384,
    },
}


def grid():
    for model, hw, bp in itertools.product(MODELS, HARDWARE, BLUEPRINTS):
        gpu, gpn, nodes, dgpu = hw
        for traffic, policy in itertools.product(TRAFFIC, POLICIES):
            inp = {"model": model, "gpu": gpu, "gpus_per_node": gpn, "nodes": nodes, "blueprint": bp}
            inp.update(traffic=TRAFFIC[traffic], policy=policy)
            if traffic == "long":
                inp["slo"] = {"ttft_p95_ms": 120000, "tpot_p95_ms": 100}
            if dgpu:
                inp.update(decode_gpu=dgpu, decode_gpus_per_node=4, decode_nodes=4)
            yield inp


def flags(args: list[str]) -> dict:
    return dict(a.partition("=")[::2] for a in args)


def connectors(args: list[str]) -> list[dict]:
    """Every connector config in a pool's --kv-transfer-config (MultiConnector children included)."""
    raw = flags(args).get("--kv-transfer-config")
    if not raw:
        return []
    cfg = json.loads(raw)
    children = (cfg.get("kv_connector_extra_config") or {}).get("connectors")
    return [cfg, *(children or [])]


def upstream_problems(p: dict, model: dict) -> list[str]:
    """vLLM 0.33 / LMCache 0.5.6 facts, restated without the table (issue 8 defects 3, 4, 9)."""
    out = []
    hybrid, mla = model["attention"] == "hybrid_gdn", model["attention"] == "mla"
    for role, pool in p["pools"].items():
        if not pool:
            continue
        args, names = pool["engine_args"], [c["kv_connector"] for c in connectors(pool["engine_args"])]
        f = flags(args)
        if hybrid and "LMCacheConnectorV1" in names:
            out.append(f"{role}: LMCacheConnectorV1 on a hybrid model (no HMA)")
        if not mla and "--prefill-context-parallel-size" in f:
            out.append(f"{role}: PCP on {model['attention']} attention (no backend)")
        if "--speculative-config" in f and json.loads(f["--speculative-config"])["method"] != "mtp":
            method = json.loads(f["--speculative-config"])["method"]
            if method.endswith("_mtp"):
                out.append(f"{role}: deprecated speculative method {method}")
        nixl_env_ok = pool["engine_env"].get("VLLM_SSM_CONV_STATE_LAYOUT") == "DS" and pool["pp"] == 1
        if hybrid and "NixlConnector" in names and not nixl_env_ok:
            out.append(f"{role}: NIXL on a GDN model needs PP=1 and VLLM_SSM_CONV_STATE_LAYOUT=DS")
        if pool["dcp"] > 1 and not mla:
            kv = model["num_key_value_heads"]
            if pool["tp"] <= kv or pool["dcp"] > pool["tp"] // kv:
                out.append(f"{role}: DCP={pool['dcp']} on TP={pool['tp']} with {kv} KV heads")
            if p["disaggregated"] and "NixlConnector" in names:
                out.append(f"{role}: DCP > 1 with NIXL P/D on non-MLA attention")
    return out


def _pool_offload_problems(role: str, pool: dict, cap: float) -> list[str]:
    off, cfgs = pool["kv_offload"], connectors(pool["engine_args"])
    tiers = [c for c in cfgs if c["kv_connector"] in ("OffloadingConnector", "LMCacheConnectorV1")]
    if not off:
        return [f"{role}: a KV tier in the engine arguments but no kv_offload sizing"] if tiers else []
    out = []
    if off["gib_per_rank"] > cap + 1e-9:
        out.append(f"{role}: {off['gib_per_rank']} GiB per rank above the {cap} GiB host share")
    if off["gib_per_rank"] * off["ranks_per_pod"] > off["gib_per_pod"] + 1e-6:
        out.append(f"{role}: {off['gib_per_rank']} x {off['ranks_per_pod']} ranks > {off['gib_per_pod']} per pod")
    if off["ranks_per_engine"] != pool["gpus_per_replica"]:
        out.append(f"{role}: ranks_per_engine {off['ranks_per_engine']} != {pool['gpus_per_replica']} GPUs")
    extra = tiers[0].get("kv_connector_extra_config") or {}
    if off["backend"] != "native":
        if extra.get("lmcache.max_local_cpu_size") != off["gib_per_rank"]:
            out.append(f"{role}: lmcache.max_local_cpu_size differs from gib_per_rank")
        return out
    core = pool["tp"] * pool["pp"] * pool["pcp"]
    if extra.get("cpu_bytes_to_use") != off["cpu_bytes_to_use"]:
        out.append(f"{role}: cpu_bytes_to_use in the arguments differs from the plan")
    if abs(off["cpu_bytes_to_use"] - off["gib_per_rank"] * core * GIB) > GIB / 1000:
        out.append(f"{role}: cpu_bytes_to_use is not gib_per_rank x TP x PP x PCP")
    dp_in_pod = max(1, off["ranks_per_pod"] // core)  # every DP rank allocates its own cpu_bytes_to_use
    if off["cpu_bytes_to_use"] * dp_in_pod > off["gib_per_pod"] * GIB + GIB / 1000:
        out.append(f"{role}: {dp_in_pod} DP ranks x cpu_bytes_to_use exceed gib_per_pod")
    return out


def offload_problems(p: dict) -> list[str]:
    """Defect 5: the per-rank size times the ranks a pod runs never exceeds what the plan sizes per pod."""
    cap = p["policy"]["kv_offload_max_gib_per_gpu"]
    out = []
    for role, pool in p["pools"].items():
        if pool:
            out += _pool_offload_problems(role, pool, cap)
    main = p["pools"]["decode"] or p["pools"]["serve"]
    if p["kv_offload"] != main["kv_offload"] or p["engine_env"] != main["engine_env"]:
        out.append("plan.kv_offload / engine_env are not the main pool's")
    return out


def plan_or_infeasible(inp: dict) -> dict | None:
    """The plan, or None where the grid point cannot be served (a model too big, an SLO out of reach): any
    other planning error fails the test."""
    try:
        return plan(inp)
    except PlanError as e:
        ok = ("model", "max_model_len", "slo.tpot_p95_ms", "slo.ttft_p95_ms", "policy.disaggregation")
        assert e.field in ok or e.field.startswith("traffic.prompt_tokens"), (inp, str(e))
        return None


def test_every_plan_over_the_grid_is_accepted_by_the_engine():
    """A third of the grid: in each (model, hardware, blueprint) block of 12 (traffic x policy) points every third
    one, shifted by one in the next block, so every combination of the inner axes is still planned on every model and
    hardware, twice over the six blueprints (the whole grid took six CPU-minutes of make test's loaded CI machine;
    half of it 280 s of an emulation of CI that ran 65 minutes on 2026-12-01)."""
    planned = pd = offload = 0
    inner = len(TRAFFIC) * len(POLICIES)
    seen = set()
    for i, inp in enumerate(grid()):
        if (i + i // inner) % 3:
            continue
        seen.add((inp["model"], inp["gpu"], inp.get("decode_gpu"), i % inner))
        p = plan_or_infeasible(inp)
        if p is None:
            continue
        model = MODELS[inp["model"]]
        planned += 1
        pd += p["disaggregated"]
        offload += p["kv_offload"] is not None
        assert compat.refusals(p, model) == [], inp
        assert upstream_problems(p, model) == [], inp
        assert offload_problems(p) == [], inp
    print(f"{planned} plans, {pd} disaggregated, {offload} with a KV tier")
    # every (traffic, policy) point on every model and hardware, over the blueprints
    assert len(seen) == len(MODELS) * len(HARDWARE) * inner, len(seen)
    assert planned > 500 and pd > 25 and offload > 250, (planned, pd, offload)


def test_every_seventh_plan_of_the_grid_is_accepted_by_vllm_024():
    """The same grid for vLLM 0.24 (the engine of OpenShift AI 3.5.0's presets), a seventh of it: only 0.24's flags,
    nothing its table refuses, and none of what 0.24 lacks (PCP, DCP on hybrid or MLA models, NIXL with PP > 1)."""
    allowed = set(data.vllm_flags("0.24.0")["flags"])
    planned = pd = 0
    for i, inp in enumerate(grid()):
        if i % 7:
            continue
        p = plan_or_infeasible({**inp, "vllm_version": "0.24.0"})
        if p is None:
            continue
        model = MODELS[inp["model"]]
        planned += 1
        pd += p["disaggregated"]
        assert p["vllm_version"] == "0.24.0"
        assert compat.refusals(p, model) == [], inp
        for role, pool in p["pools"].items():
            if not pool:
                continue
            assert {a.split("=", 1)[0] for a in pool["engine_args"]} <= allowed, (role, inp)
            assert pool["pcp"] == 1, inp
            assert pool["dcp"] == 1 or model["attention"] == "gqa", inp
            if p["disaggregated"]:
                assert pool["pp"] == 1, inp
    print(f"vLLM 0.24: {planned} plans, {pd} disaggregated")
    assert planned > 150 and pd > 20, (planned, pd)


def test_chat_site_pd_connector_offload_and_mtp():
    # issue 9: at its 25 req/s the example chat site stays aggregated (one H100 serves it, P/D would cost twice as
    # much per token); `always` keeps the P/D connector path of issue 8 under test
    assert plan(copy.deepcopy(CHAT_SITE))["disaggregated"] is False
    inp = copy.deepcopy(CHAT_SITE)
    inp["policy"]["disaggregation"] = "always"
    p = plan(inp)
    assert p["disaggregated"] is True
    for role in ("prefill", "decode"):
        pool = p["pools"][role]
        kinds = [c["kv_connector"] for c in connectors(pool["engine_args"])]
        assert kinds == ["MultiConnector", "NixlConnector", "OffloadingConnector"]  # defect 3: no LMCache
        assert pool["engine_env"] == {"VLLM_SSM_CONV_STATE_LAYOUT": "DS"}
    dec = p["pools"]["decode"]
    off = dec["kv_offload"]
    # defect 5: 64 GiB per rank x the ranks of a pod, and the plan says so
    ranks = dec["tp"] * dec["pp"] * dec["dp"]
    assert (off["gib_per_rank"], off["ranks_per_pod"], off["gib_per_pod"]) == (64, ranks, 64 * ranks)
    assert off["cpu_bytes_to_use"] == 64 * GIB * dec["tp"] * dec["pp"] and off["shm_gib_per_pod"] == 64 * ranks
    assert off["kserve_kv_cache_offloading"] is False  # P/D: NixlConnector shares the flag
    pre = p["pools"]["prefill"]
    assert pre["kv_offload"]["gib_per_pod"] == 64 * pre["tp"] * pre["pp"] * pre["dp"]
    # defect 9
    spec = json.loads(flags(dec["engine_args"])["--speculative-config"])
    assert spec["method"] == "mtp" and p["speculative"]["method"] == "mtp"
    assert not any("qwen3_5_mtp" in a for a in dec["engine_args"])
    assert compat.refusals(p, MODELS["Qwen3.5-35B-A3B"]) == []


def test_rag_site_tp_not_pcp_and_a_capped_native_tier():
    p = plan(copy.deepcopy(RAG_SITE))
    lay = p["layout"]
    # defect 4: no PCP on the 27B; TP=8 spreads the 160k-token prefill, DCP=2 removes the 2x KV replication
    assert (lay["tp"], lay["pcp"], lay["dcp"]) == (8, 1, 2)
    f = flags(p["engine_args"])
    assert "--prefill-context-parallel-size" not in f and f["--decode-context-parallel-size"] == "2"
    assert next(d for d in p["decisions"] if d["what"] == "engine: tensor parallel (long prompts)")["choice"] == 8
    # defect 3: no LMCacheConnectorV1; the shared cache is dropped and the plan says why
    assert [c["kv_connector"] for c in connectors(p["engine_args"])] == ["OffloadingConnector"]
    sharing = next(d for d in p["decisions"] if d["what"] == "kv cache sharing")
    assert sharing["choice"] is False and "HMA" in sharing["why"]
    # defect 5: 128 GiB per rank x 8 ranks = 1 TiB per pod is over the 64 GiB/GPU host share: 64 GiB per rank
    off = p["kv_offload"]
    assert off["requested_gib_per_rank"] == 128 and off["gib_per_rank"] == 64 and off["capped_by"]
    assert off["gib_per_pod"] == 512 and off["cpu_bytes_to_use"] == 8 * 64 * GIB
    assert off["kserve_kv_cache_offloading"] is True  # OffloadingConnector alone: KServe's field can emit it
    why = next(d for d in p["decisions"] if d["what"] == "serve: kv offload")["why"]
    assert "1024.0 GiB per pod exceeds the host share" in why


def test_shared_cache_on_attention_only_models_keeps_lmcache_sized_per_rank():
    inp = dict(copy.deepcopy(RAG_SITE), model="Llama-3.3-70B-Instruct", max_model_len=131072, contexts=[32768])
    inp["traffic"].update(prompt_tokens_p95=100000)
    p = plan(inp)
    off = p["kv_offload"]
    assert off["backend"] == "lmcache_v1" and off["shared"] is True
    cfg = connectors(p["engine_args"])[0]
    assert cfg["kv_connector"] == "LMCacheConnectorV1"
    assert cfg["kv_connector_extra_config"]["lmcache.max_local_cpu_size"] == off["gib_per_rank"]
    assert off["gib_per_pod"] == off["gib_per_rank"] * off["ranks_per_pod"]
    assert offload_problems(p) == []


def test_dp_ranks_each_allocate_the_offload_tier():
    """Defect 5 on a DP=8 engine: every DP rank is an engine core with its own cpu_bytes_to_use, so a pod of DP 8 x
    TP 1 needs 8 x 64 GiB (the layout search now picks such engines only where they need fewer GPUs)."""
    from ansible_collections.inference.blueprints.plugins.module_utils.planner import kvtransfer  # noqa: PLC0415
    from ansible_collections.inference.blueprints.plugins.module_utils.planner.inputs import normalize  # noqa: PLC0415
    from ansible_collections.inference.blueprints.plugins.module_utils.planner.structs import Layout, Run  # noqa: PLC0415

    run = Run(normalize(copy.deepcopy(CHAT_SITE)))
    xfer = kvtransfer.KVTransfer(tier="dram", backend="native")
    off = kvtransfer.offload_per_pool(run, xfer, Layout(tp=1, dp=8, ep=8), (run.gpu, 8))
    assert (off["gib_per_rank"], off["ranks_per_pod"], off["gib_per_pod"]) == (64, 8, 512)
    assert off["cpu_bytes_to_use"] == 64 * GIB and off["shm_gib_per_pod"] == 512


def test_nixl_refuses_pipeline_parallel_gdn_pools():
    """NIXL cannot move Gated DeltaNet state between pools with PP > 1 (engine_compat.yaml): the P/D option is sized
    only over PP=1 layouts for hybrid models, and the final check names the rule for any PP > 1 pool."""
    from ansible_collections.inference.blueprints.plugins.module_utils.planner import serving  # noqa: PLC0415
    from ansible_collections.inference.blueprints.plugins.module_utils.planner.inputs import normalize  # noqa: PLC0415
    from ansible_collections.inference.blueprints.plugins.module_utils.planner.structs import Layout, Run  # noqa: PLC0415

    inp = {
        "model": "Qwen3.5-397B-A17B",
        "gpu": "h100",
        "gpus_per_node": 8,
        "nodes": 4,
        "weights": "fp8",
        "traffic": {"prompt_tokens_mean": 800, "output_tokens_mean": 200, "concurrent_sessions": 5000},
        "policy": {"disaggregation": "always"},
    }
    p = plan(inp)
    assert p["disaggregated"] is True
    assert p["pools"]["prefill"]["pp"] == 1 and p["pools"]["decode"]["pp"] == 1
    assert compat.refusals(p, MODELS["Qwen3.5-397B-A17B"]) == []
    run = Run(normalize(inp))
    why = serving._pd_refusal(run, {"prefill": Layout(tp=8, pp=2), "decode": Layout(tp=8)})
    assert "the prefill engine needs PP=2" in why and "PP <= 1" in why and "NixlConnector" in why


def test_the_planner_reads_the_table(monkeypatch):
    """With a table that refuses native offload for hybrid models, the planner emits no tier and says why."""
    changed = copy.deepcopy(compat.table())
    row = changed["engines"]["vllm"]["0.33"]["attention"]["hybrid_gdn"]
    row["offload_backends"]["native"] = {"supported": False, "why": "test row", "source": "test"}
    monkeypatch.setattr(compat, "table", lambda: changed)
    p = plan(dict(copy.deepcopy(RAG_SITE)))
    assert p["kv_offload"] is None and p["kv_connector"] is None
    assert "test row" in next(d["why"] for d in p["decisions"] if d["what"] == "kv offload")


def test_offload_host_share_is_a_policy():
    p = plan(dict(copy.deepcopy(RAG_SITE), policy=dict(RAG_SITE["policy"], kv_offload_max_gib_per_gpu=128)))
    assert p["kv_offload"]["gib_per_rank"] == 128 and "capped_by" not in p["kv_offload"]
    assert p["kv_offload"]["gib_per_pod"] == 1024
    assert math.isclose(p["kv_offload"]["cpu_bytes_to_use"] / GIB, 1024)


@pytest.mark.parametrize("site", ["example-chat", "example-rag", "example-batch", "example-edge-fleet"])
def test_example_sites_are_accepted_by_the_engine(capsys, site):
    """Every plan of every example site, as `blueprints plan --site` makes it from the inventory and blueprint file."""
    from ansible_collections.inference.blueprints.plugins.module_utils import cli  # noqa: PLC0415 - CLI needs Ansible

    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    rc = cli.main(["plan", "--site", os.path.join(root, "inventories", site), "--format", "json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    entries = json.loads(out)
    assert entries
    for e in entries:
        p = e["plan"]
        model = MODELS[p["model"]["id"]]
        assert compat.refusals(p, model) == [], e["target"]
        assert upstream_problems(p, model) == [], e["target"]
        assert offload_problems(p) == [], e["target"]
