# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Regenerate tests/unit/planner/oracle/aiconfigurator.json: aiconfigurator 0.12.0 on the planner's oracle grid.

Not a test (pytest collects only test_*.py). It needs the `oracle` extra (aiconfigurator==0.12.0, pyproject.toml):

    make oracle                     # installs the extra into .venv, then runs this script
    .venv/bin/python tests/bench/planner_oracle.py [POINT_ID ...] [--best]

For every grid point it records the planner's inputs and its choice, aiconfigurator's estimates at the planner's
candidate layouts over a batch sweep (`agg`; `static_gen` / `static_ctx` for the pools of a P/D plan) and
aiconfigurator's best configuration for the traffic's request rate under the SLOs (`cli default` without
`--total-gpus`, i.e. its recommend mode: the fewest GPUs), each with the equivalent command line. aiconfigurator runs
in this process through its Python API (`aiconfigurator.cli.api.cli_estimate` / `cli_recommend`, the functions its
CLI calls), about 50 ms an estimate once its tables are loaded. Estimates do not depend on the planner and are reused
from the existing file by (mode, model, system, ISL, OSL, layout, batch); aiconfigurator's best is reused unless
`--best` is given. Naming points reruns only those (the others are kept as they are). An `agg` estimate gets
`--ctx-tokens` where aiconfigurator's default (one prompt a mixed step) cannot keep the batch decoding
(``agg_ctx_tokens``); a point with ``replay`` also records aiconfigurator's static estimates of that layout (its best's)
for test_oracle.py's Poisson replay of it.

Model configs: aiconfigurator bundles only BF16 configs of the Qwen3.5 models, so local copies with the official FP8
checkpoints' quantization_config (block 128x128) are written to AIC_MODELS (default /tmp/aic-models); Qwen3.6-27B is
planned against Qwen3.5-27B's config (same shapes) and Llama-3.3-70B against nvidia/Llama-3.1-70B-Instruct-FP8 (same
shapes). Models outside the planner's catalog are planned from tests/unit/planner/oracle/architectures/*.yaml, as
`blueprints plan --architecture FILE` plans them. Nothing of aiconfigurator is written into the repository.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import logging
import math
import os
import sys
import time

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path[:0] = [ROOT, os.path.join(ROOT, "collections")]


from tests.unit.planner.oracle_data import plan_for_traffic, plan_gpus  # noqa: E402

ORACLE = os.path.join(ROOT, "tests", "unit", "planner", "oracle")
OUT = os.path.join(ORACLE, "aiconfigurator.json")
ARCH_DIR = os.path.join(ORACLE, "architectures")
AIC_MODELS = os.environ.get("AIC_MODELS", "/tmp/aic-models")
VERSION = "0.12.0"
BACKEND_VERSION = "0.24.0"  # the vLLM version of aiconfigurator 0.12.0's measured tables for these systems
SYSTEMS = {"h100": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm", "l40s": "l40s"}
FP8_BLOCK = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
# planner model (catalog id or architectures/<name>.yaml) -> (aiconfigurator model path, how it was made)
MODELS = {
    "Qwen3.6-27B": ("local:Qwen3.5-27B-FP8", "Qwen/Qwen3.5-27B (same shapes as Qwen3.6-27B) + block FP8"),
    "Qwen3.5-35B-A3B": ("local:Qwen3.5-35B-A3B-FP8", "Qwen/Qwen3.5-35B-A3B + block FP8"),
    "Qwen3.5-397B-A17B": ("local:Qwen3.5-397B-A17B-FP8", "Qwen/Qwen3.5-397B-A17B + block FP8"),
    "Llama-3.3-70B-Instruct": ("nvidia/Llama-3.1-70B-Instruct-FP8", "bundled (same shapes as Llama-3.3-70B)"),
    "Qwen3-30B-A3B": ("Qwen/Qwen3-30B-A3B-FP8", "bundled (official block FP8)"),
    "DeepSeek-V3": ("deepseek-ai/DeepSeek-V3", "bundled (official block FP8)"),
    "Qwen3-235B-A22B": ("Qwen/Qwen3-235B-A22B-FP8", "bundled (official block FP8)"),
    "Kimi-K2-Instruct": ("copy:moonshotai/Kimi-K2-Instruct", "bundled config copied to a local directory (block FP8)"),
    "Qwen3-32B": ("Qwen/Qwen3-32B-FP8", "bundled (official block FP8)"),
    "Llama-3.1-8B": ("meta-llama/Meta-Llama-3.1-8B", "bundled (BF16)"),
}
VLLM_BATCHED_TOKENS = 8192  # vLLM's max_num_batched_tokens when the policy sets none (the planner's default too)
SWEEP = (8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512)


def blueprint_policy(name: str) -> dict:
    """A blueprint's policy as blueprints/<name>.yml states it (the caller merges it, as the site role and the CLI
    do: the planner knows no blueprint by name)."""
    with open(os.path.join(ROOT, "blueprints", f"{name}.yml"), encoding="utf-8") as fh:
        return dict(yaml.safe_load(fh)["policy"])


def point(pid: str, model: str, hw: tuple, traffic: tuple, slo: tuple, **kw) -> dict:
    """One grid point. ``model`` is a catalog id or, with ``arch=True``, an architectures/<model>.yaml file;
    ``blueprint`` (default chat) names a blueprint whose policy file is merged under the oracle's own keys
    (speculative off, no KV tier: aiconfigurator models neither) and ``policy`` entries over it."""
    (gpu, gpn, nodes), (isl, osl, rate), (ttft, tpot) = hw, traffic, slo
    precision = kw.pop("precision", "fp8")
    aic = kw.pop("aic", None) or MODELS[model]
    bp = kw.pop("blueprint", "chat")
    policy = {} if bp == "chat" else blueprint_policy(bp)
    for unmodelled in ("shared_kv_cache", "kv_offload_gib"):  # the KV tier is left off below
        policy.pop(unmodelled, None)
    disagg = kw.pop("disaggregation", None) or policy.get("disaggregation", "auto")
    policy.update(speculative="off", kv_offload="none", disaggregation=disagg)
    policy.update(kw.pop("policy", {}))
    inp = {
        "gpu": gpu,
        "gpus_per_node": gpn,
        "nodes": nodes,
        "weights": precision,
        "kv_cache_dtype": "bfloat16" if precision == "bf16" else "fp8",
        "max_model_len": kw.pop("max_model_len", 32768),
        "blueprint": bp,
        "traffic": {
            "prompt_tokens_mean": isl,
            "prompt_tokens_p95": isl,
            "output_tokens_mean": osl,
            "output_tokens_p95": osl,
            "arrival_rate_rps": rate,
        },
        "slo": {"ttft_p95_ms": ttft, "tpot_p95_ms": tpot},
        "policy": policy,
    }
    if kw.pop("arch", False):
        inp["architecture_file"] = f"architectures/{model}.yaml"
    else:
        inp["model"] = model
    replay = kw.pop("replay", None)
    assert not kw, kw
    out = {"id": pid, "model": model, "aic": aic, "why": "", "planner_inputs": inp}
    if replay:
        out["replay_layout"] = replay
    return out


def why(p: dict, text: str) -> dict:
    p["why"] = text
    return p


# The grid: (model, GPU, traffic, SLO) points aiconfigurator 0.12.0 answers with its vLLM 0.24.0 tables. Fixed prompt
# and output lengths (aiconfigurator models one ISL/OSL; the planner's p95 = mean there).
GRID = [
    point("27b-h100-chat", "Qwen3.6-27B", ("h100", 8, 1), (800, 200, 10), (1000, 50)),
    point("27b-h200-chat", "Qwen3.6-27B", ("h200", 8, 1), (800, 200, 20), (1000, 40)),
    point("27b-h100-long", "Qwen3.6-27B", ("h100", 8, 1), (8000, 400, 2), (3000, 80)),
    point("27b-h100x16-mid", "Qwen3.6-27B", ("h100", 8, 2), (1500, 300, 40), (1500, 50)),
    point("35b-h100x16-chat", "Qwen3.5-35B-A3B", ("h100", 8, 2), (800, 200, 25), (1000, 50)),
    point("35b-h200-mid", "Qwen3.5-35B-A3B", ("h200", 8, 1), (2000, 300, 40), (2000, 30)),
    point("35b-h100-batch", "Qwen3.5-35B-A3B", ("h100", 8, 1), (3000, 300, 40), (60000, 200)),
    point("70b-h100-chat", "Llama-3.3-70B-Instruct", ("h100", 8, 1), (800, 200, 5), (1000, 50)),
    point("70b-h200-mid", "Llama-3.3-70B-Instruct", ("h200", 8, 1), (2000, 500, 8), (2000, 40)),
    point("70b-h100x16-long", "Llama-3.3-70B-Instruct", ("h100", 8, 2), (4000, 300, 10), (3000, 60)),
    point("30b-h100-chat", "Qwen3-30B-A3B", ("h100", 8, 1), (800, 200, 30), (1000, 40)),
    point("30b-h200-mid", "Qwen3-30B-A3B", ("h200", 8, 1), (1500, 300, 20), (1500, 30)),
    point("397b-h200-chat", "Qwen3.5-397B-A17B", ("h200", 8, 1), (800, 200, 5), (2000, 60)),
    point("397b-h100x16-chat", "Qwen3.5-397B-A17B", ("h100", 8, 2), (800, 200, 5), (2000, 60)),
    # issue 27: B200 and L40S
    # (block-FP8 checkpoints are left off B200 and L40S: aiconfigurator's vLLM 0.24.0 tables measure block-FP8 GEMMs
    # there at 6-7 % of bandwidth below 1024 rows (170-330 us a call), so it needs 40-216 GPUs for the chat traffic a
    # Hopper node serves; NVFP4 and per-channel FP8 are what those GPUs run)
    point("70b-b200-mid", "Llama-3.3-70B-Instruct", ("b200", 8, 1), (2000, 400, 10), (2000, 30)),
    point(
        "397b-b200-nvfp4",
        "Qwen3.5-397B-A17B",
        ("b200", 8, 1),
        (1000, 250, 5),
        (2000, 50),
        precision="fp4",
        aic=("nvidia/Qwen3.5-397B-A17B-NVFP4", "bundled (NVIDIA ModelOpt NVFP4, FP8 KV)"),
    ),  # fmt: skip
    point(
        "235b-b200-nvfp4",
        "Qwen3-235B-A22B",
        ("b200", 8, 1),
        (1500, 300, 8),
        (1500, 40),
        arch=True,
        precision="fp4",
        aic=("nvidia/Qwen3-235B-A22B-NVFP4", "bundled (NVIDIA ModelOpt NVFP4, FP8 KV)"),
    ),  # fmt: skip
    point("30b-l40s-chat", "Qwen3-30B-A3B", ("l40s", 8, 1), (800, 200, 10), (1500, 50)),
    point("70b-l40s-mid", "Llama-3.3-70B-Instruct", ("l40s", 8, 1), (1000, 200, 1), (3000, 100)),
    point("70b-l40s-chat", "Llama-3.3-70B-Instruct", ("l40s", 8, 1), (800, 200, 2), (2000, 70)),
    # issue 27: MLA (DeepSeek-V3 in the catalog; Kimi-K2 outside it)
    point("dsv3-h200-chat", "DeepSeek-V3", ("h200", 8, 1), (1000, 200, 2), (2000, 60)),
    point("dsv3-b200-chat", "DeepSeek-V3", ("b200", 8, 1), (1000, 250, 4), (2000, 50)),
    point("dsv3-h200x16-mid", "DeepSeek-V3", ("h200", 8, 2), (2000, 400, 4), (3000, 60)),
    point("kimi-b200-chat", "Kimi-K2-Instruct", ("b200", 8, 1), (1000, 200, 2), (2000, 60), arch=True),
    # issue 27: Qwen3-235B-class MoE (outside the catalog), long prompts on MoE
    point("235b-h200-chat", "Qwen3-235B-A22B", ("h200", 8, 1), (800, 200, 5), (1000, 50), arch=True),
    point("235b-h100x16-long", "Qwen3-235B-A22B", ("h100", 8, 2), (12000, 400, 1), (5000, 60), arch=True),
    point("35b-h100-long", "Qwen3.5-35B-A3B", ("h100", 8, 1), (12000, 500, 2), (4000, 40)),
    point("30b-h200-long", "Qwen3-30B-A3B", ("h200", 8, 1), (8000, 300, 4), (3000, 30)),
    # issue 27: P/D below 100 sessions (long prompts, tight TPOT: a few requests in flight)
    point("27b-h200-pd-long", "Qwen3.6-27B", ("h200", 8, 1), (10000, 300, 1), (2500, 35)),
    point("70b-h100-pd-long", "Llama-3.3-70B-Instruct", ("h100", 8, 1), (8000, 250, 0.5), (2000, 30)),
    point("32b-h100x16-pd-long", "Qwen3-32B", ("h100", 8, 2), (6000, 300, 2), (1500, 20), arch=True),
    # issue 27: dense models outside the catalog
    point("32b-h100-chat", "Qwen3-32B", ("h100", 8, 1), (1500, 500, 6), (1000, 35), arch=True),
    point("8b-l40s-bf16", "Llama-3.1-8B", ("l40s", 4, 1), (1000, 200, 8), (1000, 30), arch=True, precision="bf16"),
    # issue 36: large MoE on 8 and 16 GPUs of two kinds, long-context RAG below 1 req/s, MoE across two nodes, a
    # small-batch edge MoE, a batch blueprint with its max_num_seqs cap (blueprints/<name>.yml's policy merged)
    point("235b-h200-mid", "Qwen3-235B-A22B", ("h200", 8, 1), (2000, 400, 4), (2000, 40), arch=True),
    point("235b-h100-mid", "Qwen3-235B-A22B", ("h100", 8, 1), (2000, 400, 2), (2000, 50), arch=True),
    point("235b-h100x16-mid", "Qwen3-235B-A22B", ("h100", 8, 2), (2000, 400, 6), (2000, 50), arch=True),
    point("dsv3-h100x16-chat", "DeepSeek-V3", ("h100", 8, 2), (1000, 200, 2), (2000, 60)),
    point(
        "70b-h200x16-rag",
        "Llama-3.3-70B-Instruct",
        ("h200", 8, 2),
        (64000, 300, 0.3),
        (8000, 30),
        blueprint="rag",
        max_model_len=65536,
        policy={"router": "least_loaded"},  # llm-d's picker (the blueprint's inference_scheduler)
        replay={"tp": 4, "pp": 1, "dp": 1, "ep": 1},  # aiconfigurator's best layout, replayed in test_oracle.py
    ),  # fmt: skip
    point("30b-h100-rag", "Qwen3-30B-A3B", ("h100", 8, 1), (30000, 300, 0.5), (5000, 30), blueprint="rag"),
    point(
        "30b-l40s-edge",
        "Qwen3-30B-A3B",
        ("l40s", 1, 1),
        (1000, 300, 0.5),
        (1500, 60),
        blueprint="edge_sno",
        policy={"expert_routing_skew": "auto"},  # item 4: aiconfigurator's measured power law, not uniform routing
    ),  # fmt: skip
    point("35b-h200-batch-cap", "Qwen3.5-35B-A3B", ("h200", 8, 1), (2000, 300, 40), (60000, 200), blueprint="batch"),
    # issue 36: more of the same shapes (large MoE on 16 H200, the 397B and MLA on one H200 node, RAG on dense,
    # hybrid and MoE models, a dense chat point on H200, batch caps on dense and MoE models, edge MoE on one H100)
    point("235b-h200x16-mid", "Qwen3-235B-A22B", ("h200", 8, 2), (2000, 400, 10), (2000, 40), arch=True),
    point("397b-h200-mid", "Qwen3.5-397B-A17B", ("h200", 8, 1), (2000, 400, 3), (2000, 50)),
    point("dsv3-h200-mid", "DeepSeek-V3", ("h200", 8, 1), (2000, 400, 3), (3000, 60)),
    point("70b-h100-rag", "Llama-3.3-70B-Instruct", ("h100", 8, 1), (16000, 300, 0.5), (4000, 40), blueprint="rag"),
    point("27b-h200-rag", "Qwen3.6-27B", ("h200", 8, 1), (30000, 300, 0.5), (5000, 40), blueprint="rag"),
    point("35b-h100-rag", "Qwen3.5-35B-A3B", ("h100", 8, 1), (30000, 300, 0.5), (5000, 30), blueprint="rag"),
    point("32b-h200-chat", "Qwen3-32B", ("h200", 8, 1), (1500, 500, 6), (1000, 35), arch=True),
    point("30b-h200-batch-cap", "Qwen3-30B-A3B", ("h200", 8, 1), (2000, 300, 40), (60000, 200), blueprint="batch"),
    point("27b-h100-batch-cap", "Qwen3.6-27B", ("h100", 8, 1), (2000, 300, 20), (60000, 200), blueprint="batch"),
    point(
        "30b-h100-edge",
        "Qwen3-30B-A3B",
        ("h100", 1, 1),
        (1000, 300, 1),
        (1500, 60),
        blueprint="edge_sno",
        policy={"expert_routing_skew": "auto"},
    ),  # fmt: skip
]


def model_path(path: str) -> str:
    """aiconfigurator's model path for a MODELS entry: an HF id it bundles, ``local:<name>`` (a bundled Qwen3.5 BF16
    config with the FP8 checkpoints' quantization_config) or ``copy:<hf id>`` (a bundled config its id lookup does not
    list, copied to a local directory)."""
    if not path.startswith(("local:", "copy:")):
        return path
    how, name = path.split(":", 1)
    pkg = importlib.util.find_spec("aiconfigurator_core").submodule_search_locations[0]
    if how == "copy":
        src = os.path.join(pkg, "model_configs", name.replace("/", "--") + "_config.json")
        name = name.split("/")[-1]
    else:
        src = glob.glob(os.path.join(pkg, "model_configs", f"Qwen--{name.removesuffix('-FP8')}_config.json"))[0]
    dst = os.path.join(AIC_MODELS, name)
    os.makedirs(dst, exist_ok=True)
    with open(src, encoding="utf-8") as fh:
        cfg = json.load(fh)
    if how == "local":
        cfg["quantization_config"] = FP8_BLOCK
    with open(os.path.join(dst, "config.json"), "w", encoding="utf-8") as fh:
        json.dump(cfg, fh, indent=1)
    return dst


def moe_split(lay: dict, moe: bool) -> tuple[int | None, int | None]:
    """(moe_tp, moe_ep) of a planner layout: experts split by EP (ep = TP x DP) or by TP (ep = 1, moe_tp = TP x DP)."""
    if not moe:
        return None, None
    width = lay["tp"] * lay["dp"]
    ep = lay.get("ep", 1) or 1
    return width // ep, ep


def _cmd(target: dict, mode: str, lay: dict, batch: int) -> str:
    moe_tp, moe_ep = moe_split(lay, target["moe"])
    a = [
        "aiconfigurator cli estimate",
        f"--model-path {target['mp']}",
        f"--system {target['system']}",
        f"--backend vllm --backend-version {BACKEND_VERSION}",
        f"--isl {target['isl']} --osl {target['osl']} --batch-size {batch}",
        f"--tp {lay['tp']} --pp {lay['pp']}",
    ]
    if target["moe"]:
        a.append(f"--attention-dp-size {lay['dp']} --moe-tp-size {moe_tp} --moe-ep-size {moe_ep}")
    a.append(f"--kvcache-quant-mode {target['kv']} --estimate-mode {mode}")
    ctx = agg_ctx_tokens(target, mode, batch)
    if ctx:
        a.append(f"--ctx-tokens {ctx}")
    return " ".join(a)


def agg_ctx_tokens(target: dict, mode: str, batch: int) -> int | None:
    """aiconfigurator's prefill tokens a mixed step (`--ctx-tokens`, agg only), when its default (one prompt a step,
    ctx_tokens = ISL) would not keep ``batch`` sequences decoding: its run_agg decodes ``batch`` x OSL / (ISL x batch
    / ctx_tokens) sequences a mix step when the prompts take more mix steps than the output has tokens, so at
    batch 512 with ISL 2000 and OSL 300 its figure is of 300 decoding sequences. vLLM at max_num_seqs ``batch``
    prefills the prompts of the sequences that finish a step (``batch`` / OSL of them) in the same step, up to its
    token budget (policy max_num_batched_tokens, vLLM's 8192 by default): that many prompt tokens, when it is more
    than one prompt and fits the budget. None: aiconfigurator's default."""
    if mode != "agg":
        return None
    ctx = min(target["ctx"] or VLLM_BATCHED_TOKENS, math.ceil(batch * target["isl"] / target["osl"]))
    return ctx if ctx > target["isl"] else None


def estimate(target: dict, mode: str, lay: dict, batch: int) -> dict:
    """aiconfigurator's estimate for one (mode, layout, batch) of a point (``target``: model path, system, ISL, OSL,
    MoE or not, KV dtype)."""
    from aiconfigurator.cli.api import cli_estimate

    moe_tp, moe_ep = moe_split(lay, target["moe"])
    t = time.time()
    # aiconfigurator's batch with pipeline parallelism is one micro-batch (PP of them in flight: its concurrency is
    # batch x PP); the planner's is the engine's running sequences, split into PP micro-batches (vLLM's batch queue)
    aic_batch = max(1, round(batch / lay["pp"]))
    rec = {"mode": mode, "layout": lay, "batch": batch, "aic_batch": aic_batch}
    rec["command"] = _cmd(target, mode, lay, aic_batch)
    ctx = agg_ctx_tokens(target, mode, aic_batch)
    if ctx:
        rec["ctx_tokens"] = ctx
    try:
        r = cli_estimate(
            target["mp"],
            target["system"],
            mode=mode,
            backend_name="vllm",
            backend_version=BACKEND_VERSION,
            isl=target["isl"],
            osl=target["osl"],
            batch_size=aic_batch,
            tp_size=lay["tp"],
            pp_size=lay["pp"],
            attention_dp_size=lay["dp"],
            moe_tp_size=moe_tp,
            moe_ep_size=moe_ep,
            kvcache_quant_mode=target["kv"],
            ctx_tokens=ctx,
        )
        rec["ttft_ms"] = round(float(r.ttft), 3) if r.ttft else None
        rec["tpot_ms"] = round(float(r.tpot), 3) if r.tpot else None
        mem = r.memory.get("total") if isinstance(r.memory, dict) else None
        rec["memory_gb"] = round(float(mem), 2) if mem else None
        if r.kv_cache_warning:
            rec["warning"] = str(r.kv_cache_warning)[:300]
    except Exception as e:  # noqa: BLE001 - aiconfigurator's own error, recorded as the answer
        rec["ttft_ms"] = rec["tpot_ms"] = None
        rec["error"] = f"{type(e).__name__}: {e}"[:600]
    rec["seconds"] = round(time.time() - t, 2)
    return rec


BEST_KEEP = (
    "total_gpus_needed",
    "replicas_needed",
    "ttft",
    "tpot",
    "request_rate",
    "parallel",
    "bs",
    "(p)parallel",
    "(p)workers",
    "(p)bs",
    "(d)parallel",
    "(d)workers",
    "(d)bs",
    "num_total_gpus",
)


def best(target: dict, rate: float, slo: tuple) -> dict:
    """aiconfigurator's fewest GPUs for the traffic's request rate under the SLOs (ttft, tpot ms), agg and disagg."""
    from aiconfigurator.cli.api import cli_recommend

    cmd = (
        f"aiconfigurator cli default --model-path {target['mp']} --system {target['system']} --backend vllm "
        f"--backend-version {BACKEND_VERSION} --isl {target['isl']} --osl {target['osl']} --ttft {slo[0]} "
        f"--tpot {slo[1]} --target-request-rate {rate}"
    )
    t = time.time()
    rec: dict = {"command": cmd}
    try:
        r = cli_recommend(
            model_path=target["mp"],
            system=target["system"],
            target_request_rate=rate,
            backend="vllm",
            backend_version=BACKEND_VERSION,
            isl=target["isl"],
            osl=target["osl"],
            ttft=slo[0],
            tpot=slo[1],
        )
        for mode in ("agg", "disagg"):
            df = r.best_configs.get(mode)
            if df is None or df.empty:
                rec[mode] = None
                continue
            top = df.iloc[0]
            rec[mode] = {k: str(top[k]) for k in BEST_KEEP if k in top.index}
            rec[mode]["total_gpus_needed"] = int(float(top["total_gpus_needed"]))
    except Exception as e:  # noqa: BLE001
        rec["error"] = f"{type(e).__name__}: {e}"[:800]
    rec["seconds"] = round(time.time() - t, 1)
    return slo_checked(rec, slo)


def slo_checked(rec: dict, slo: tuple) -> dict:
    """aiconfigurator's best with each mode's ``meets_slo`` and ``gpus`` the fewest among the modes that meet the SLOs
    (with no configuration under the SLOs it returns the closest ones)."""
    for mode in ("agg", "disagg"):
        if rec.get(mode):
            rec[mode]["meets_slo"] = float(rec[mode]["ttft"]) <= slo[0] and float(rec[mode]["tpot"]) <= slo[1]
    done = [rec[m]["total_gpus_needed"] for m in ("agg", "disagg") if rec.get(m) and rec[m]["meets_slo"]]
    rec["gpus"] = min(done) if done else None
    return rec


def _lay(d: dict) -> dict:
    return {k: d[k] for k in ("tp", "pp", "dp", "ep")}


def jobs_for(p: dict) -> list[tuple[str, dict, int]]:
    """The (mode, layout, batch) estimates a point needs: the chosen layout and runner-ups over a batch sweep (agg),
    the P/D pools' layouts (static_gen / static_ctx) of the plan and of its P/D option."""
    out = []
    cands = [c for c in p["layout_candidates"] if not c.get("rejected") and c.get("batch_per_rank")][:4]
    for i, c in enumerate(cands):
        b, pp = c["batch_per_rank"], c["layout"]["pp"]
        sweep = [x for x in SWEEP if x <= max(16, 2 * b)] if i == 0 else [x for x in SWEEP if b / 2 <= x <= 2 * b]
        out += [("agg", c["layout"], x) for x in sorted({b, *[x * pp for x in sweep]} if pp > 1 else {b, *sweep})]
    pools = p["pools"]
    if p["disaggregated"]:
        dl, db = _lay(pools["decode"]), pools["decode"]["max_num_seqs"]
        sweep = [x * dl["pp"] for x in SWEEP if x * dl["pp"] <= max(16, 2 * db)]
        out += [("static_gen", dl, x) for x in sorted({db, *sweep})]
        out.append(("static_ctx", _lay(pools["prefill"]), 1))
    return out


REPLAY_BATCHES = (1, 2, 4, 8, 16)


def replay_jobs(pt: dict) -> list[tuple[str, dict, int]]:
    """aiconfigurator's static estimates of a layout its best runs (``replay``: a prompt's prefill, decode steps over
    a few batches), for test_oracle.py's Poisson replay of its best with its own kernel times."""
    lay = pt.get("replay_layout")
    if not lay:
        return []
    return [("static_ctx", lay, 1)] + [("static_gen", lay, b) for b in REPLAY_BATCHES]


def _cache_key(mode: str, target: tuple, lay: dict, batch: int, ctx: int | None) -> tuple:
    """An estimate's identity: mode, (model path, system, ISL, OSL), layout, batch, agg's ctx_tokens when set."""
    return (mode, *target, json.dumps(lay, sort_keys=True), batch, ctx)


def _load() -> dict:
    if os.path.exists(OUT):
        with open(OUT, encoding="utf-8") as fh:
            return json.load(fh)
    return {"points": []}


def _old_cache(data: dict) -> dict:
    cache = {}
    for old in data["points"]:
        path = old["aiconfigurator_model"]["path"]
        mp = os.path.join(AIC_MODELS, path.split(":", 1)[1].split("/")[-1]) if ":" in path else path
        t = old["planner_inputs"]["traffic"]
        for e in old["estimates"]:
            if "aic_batch" not in e:  # before issue 27: a PP layout was queried at the engine's batch
                continue
            target = (mp, old["aiconfigurator_model"]["system"], t["prompt_tokens_mean"], t["output_tokens_mean"])
            key = _cache_key(e["mode"], target, e["layout"], e["batch"], e.get("ctx_tokens"))
            cache[key] = e
    return cache


def run_point(pt: dict, cache: dict, old_best: dict | None) -> dict:
    inp = pt["planner_inputs"]
    t0 = time.time()
    p, used = plan_for_traffic(inp)  # on more nodes when the point's cluster is too small for the traffic
    plan_s = time.time() - t0
    moe = p["model"]["kind"] == "moe"
    mp = model_path(pt["aic"][0])
    system = SYSTEMS[inp["gpu"]]
    t = inp["traffic"]
    isl, osl = t["prompt_tokens_mean"], t["output_tokens_mean"]
    kv = "fp8" if inp["kv_cache_dtype"] == "fp8" else "bfloat16"
    slo = (inp["slo"]["ttft_p95_ms"], inp["slo"]["tpot_p95_ms"])
    ctx = inp["policy"].get("max_num_batched_tokens")
    target = {"mp": mp, "system": system, "isl": isl, "osl": osl, "moe": moe, "kv": kv, "ctx": ctx}
    ests, seen = [], set()
    for mode, lay, b in jobs_for(p) + replay_jobs(pt):
        ctx = agg_ctx_tokens(target, mode, max(1, round(b / lay["pp"])))
        key = _cache_key(mode, (mp, system, isl, osl), lay, b, ctx)
        if key in seen:
            continue
        seen.add(key)
        if key not in cache:
            cache[key] = estimate(target, mode, lay, b)
            e = cache[key]
            print(f"  {pt['id']} {mode} {lay} b{b}: TTFT {e.get('ttft_ms')} TPOT {e.get('tpot_ms')}", flush=True)
        ests.append(cache[key])
    ch = p["layout_candidates"][0]
    rec = {
        "id": pt["id"],
        "why": pt["why"],
        "planner_inputs": inp,
        "aiconfigurator_model": {"path": pt["aic"][0], "made_from": pt["aic"][1], "system": system},
        "planner_at_generation": {
            "layout": ch["layout"],
            "batch_per_rank": ch["batch_per_rank"],
            "disaggregated": p["disaggregated"],
            "pools": {
                k: {f: v[f] for f in ("replicas", "tp", "pp", "dp", "ep", "max_num_seqs")}
                for k, v in p["pools"].items()
                if v
            },
            "gpus_needed": plan_gpus(p),
            "nodes_planned": used.get("nodes", 1),
            "interconnect_planned": p["hardware"]["interconnect"],
            "plan_seconds": round(plan_s, 3),
        },  # fmt: skip
        "estimates": ests,
        "best": slo_checked(old_best, slo) if old_best else best(target, t["arrival_rate_rps"], slo),
    }
    if pt.get("replay_layout"):
        rec["replay_layout"] = pt["replay_layout"]
    print(f"{pt['id']}: aiconfigurator best {rec['best'].get('gpus')} GPUs, planner {plan_gpus(p)}", flush=True)
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ids", nargs="*", help="grid points to (re)run; default: all")
    ap.add_argument("--best", action="store_true", help="rerun aiconfigurator's best configuration search too")
    a = ap.parse_args()
    logging.disable(logging.WARNING)  # aiconfigurator logs every table it loads
    data = _load()
    done = {p["id"]: p for p in data["points"]}
    cache = _old_cache(data)
    unknown = set(a.ids) - {g["id"] for g in GRID}
    if unknown:
        ap.error(f"unknown point(s): {', '.join(sorted(unknown))}")
    for pt in GRID:
        if a.ids and pt["id"] not in a.ids:
            continue
        old = done.get(pt["id"])
        same = old and old["planner_inputs"] == pt["planner_inputs"] and old["best"].get("gpus")
        done[pt["id"]] = run_point(pt, cache, None if (a.best or not same) else old["best"])
        data = {
            "tool": "aiconfigurator",
            "version": VERSION,
            "install": f"pip install aiconfigurator=={VERSION} (pyproject extra `oracle`; make oracle)",
            "backend": f"vllm (perf data {BACKEND_VERSION}, the version aiconfigurator {VERSION} serves for these "
            "systems)",
            "generated_by": "tests/bench/planner_oracle.py (aiconfigurator's Python API: cli_estimate, cli_recommend)",
            "local_model_configs": "AIC_MODELS/<name>/config.json = aiconfigurator's bundled Qwen/<name> config.json "
            f"with quantization_config {json.dumps(FP8_BLOCK, sort_keys=True)}",
            "points": [done[g["id"]] for g in GRID if g["id"] in done],
        }
        with open(OUT, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
            fh.write("\n")


if __name__ == "__main__":
    main()
