# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Regenerate tests/unit/planner/oracle/aiconfigurator.json: run aiconfigurator on the oracle grid.

Not a test (pytest never imports it). It needs aiconfigurator in a separate environment, outside the repository:

    python3.12 -m venv /tmp/aic-venv && /tmp/aic-venv/bin/pip install aiconfigurator==0.12.0
    AIC=/tmp/aic-venv/bin/aiconfigurator .venv/bin/python tests/unit/planner/oracle/tools/run_oracle.py

aiconfigurator 0.12.0 ships no FP8 config for the Qwen3.5 models, so the script writes a local copy of its
Qwen/Qwen3.5-* config.json with the quantization_config of the official FP8 checkpoints (quant_method fp8, block
128x128) into AIC_MODELS (default /tmp/aic-models); nothing of aiconfigurator is written into the repository. For every
grid point it records: the planner's inputs and choice (layout, batch, GPUs for the traffic), aiconfigurator
`estimate` (agg) at the planner's candidate layouts over a batch sweep, and aiconfigurator `default` with the traffic's
request rate and the SLOs (the minimum GPUs it finds), each with the exact command line.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "collections"))

from ansible_collections.inference.blueprints.plugins.module_utils.planner import plan  # noqa: E402

AIC = os.environ.get("AIC", "/tmp/aic-venv/bin/aiconfigurator")
AIC_MODELS = os.environ.get("AIC_MODELS", "/tmp/aic-models")
OUT = os.path.join(ROOT, "tests", "unit", "planner", "oracle", "aiconfigurator.json")
VERSION = "0.12.0"
SYSTEMS = {"h100": "h100_sxm", "h200": "h200_sxm"}
FP8_BLOCK = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
# planner catalog id -> (aiconfigurator model path, how it was made)
MODELS = {
    "Qwen3.6-27B": ("local:Qwen3.5-27B-FP8", "Qwen/Qwen3.5-27B (same shapes as Qwen3.6-27B) + block FP8"),
    "Qwen3.5-35B-A3B": ("local:Qwen3.5-35B-A3B-FP8", "Qwen/Qwen3.5-35B-A3B + block FP8"),
    "Qwen3.5-397B-A17B": ("local:Qwen3.5-397B-A17B-FP8", "Qwen/Qwen3.5-397B-A17B + block FP8"),
    "Llama-3.3-70B-Instruct": ("nvidia/Llama-3.1-70B-Instruct-FP8", "bundled (same shapes as Llama-3.3-70B)"),
    "Qwen3-30B-A3B": ("Qwen/Qwen3-30B-A3B-FP8", "bundled (official block FP8)"),
}
SWEEP = (16, 32, 64, 128, 256, 512)


def point(pid: str, model: str, hw: tuple, traffic: tuple, slo: tuple, **kw) -> dict:
    (gpu, gpn, nodes), (isl, osl, rate), (ttft, tpot) = hw, traffic, slo
    inp = {
        "model": model,
        "gpu": gpu,
        "gpus_per_node": gpn,
        "nodes": nodes,
        "weights": "fp8",
        "kv_cache_dtype": "fp8",
        "max_model_len": kw.pop("max_model_len", 32768),
        "blueprint": "chat",
        "traffic": {
            "prompt_tokens_mean": isl,
            "prompt_tokens_p95": isl,
            "output_tokens_mean": osl,
            "output_tokens_p95": osl,
            "arrival_rate_rps": rate,
        },
        "slo": {"ttft_p95_ms": ttft, "tpot_p95_ms": tpot},
        "policy": {"speculative": "off", "kv_offload": "none", "disaggregation": kw.pop("disaggregation", "auto")},
    }
    assert not kw, kw
    return {"id": pid, "planner_inputs": inp}


# (model, GPU, traffic, SLO) points aiconfigurator 0.12.0 supports with its vLLM 0.24.0 data; fixed prompt and
# output lengths (aiconfigurator models one ISL/OSL), p95 = mean.
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
]


def model_path(model: str) -> str:
    path, _how = MODELS[model]
    if not path.startswith("local:"):
        return path
    name = path.split(":", 1)[1]
    base = name.removesuffix("-FP8")
    src = glob.glob(
        os.path.join(
            os.path.dirname(AIC),
            "..",
            "lib",
            "python*",
            "site-packages",
            "aiconfigurator_core",
            "model_configs",
            f"Qwen--{base}_config.json",
        )
    )[0]
    dst = os.path.join(AIC_MODELS, name)
    os.makedirs(dst, exist_ok=True)
    with open(src, encoding="utf-8") as fh:
        cfg = json.load(fh)
    cfg["quantization_config"] = FP8_BLOCK
    with open(os.path.join(dst, "config.json"), "w", encoding="utf-8") as fh:
        json.dump(cfg, fh, indent=1)
    return dst


def run(cmd: list[str], timeout: int = 1800) -> tuple[str, float]:
    t = time.time()
    r = subprocess.run(["nice", "-n", "10", *cmd], capture_output=True, text=True, timeout=timeout, check=False)
    return r.stdout + r.stderr, time.time() - t


def parallel_args(lay: dict, moe: bool) -> list[str]:
    a = ["--tp", str(lay["tp"]), "--pp", str(lay["pp"])]
    if moe:
        a += ["--attention-dp-size", str(lay["dp"]), "--moe-tp-size", "1", "--moe-ep-size", str(lay["tp"] * lay["dp"])]
    return a


def estimate(target: dict, mode: str, lay: dict, batch: int) -> dict:
    """aiconfigurator `estimate` for one (mode, layout, batch); ``target`` = model path, system, isl, osl, moe."""
    mp, system, isl, osl, moe = (target[k] for k in ("mp", "system", "isl", "osl", "moe"))
    cmd = [
        AIC,
        "cli",
        "estimate",
        "--model-path",
        mp,
        "--system",
        system,
        "--backend",
        "vllm",
        "--isl",
        str(isl),
        "--osl",
        str(osl),
        "--batch-size",
        str(batch),
        *parallel_args(lay, moe),
        "--kvcache-quant-mode",
        "fp8",
        "--estimate-mode",
        mode,
        "--no-color",
    ]
    out, secs = run(cmd)
    rec = {
        "mode": mode,
        "layout": lay,
        "batch": batch,
        "command": " ".join(["aiconfigurator", *cmd[1:]]),
        "seconds": round(secs, 1),
    }
    for key, pat in (
        ("ttft_ms", r"TTFT:\s+([\d.,]+) ms"),
        ("tpot_ms", r"TPOT:\s+([\d.,]+) ms"),
        ("memory_gb", r"Memory \(GPU\):\s+([\d.,]+) GB"),
    ):
        m = re.search(pat, out)
        rec[key] = float(m.group(1).replace(",", "")) if m else None
    if rec["tpot_ms"] is None and rec["ttft_ms"] is None:
        rec["error"] = "\n".join(line for line in out.splitlines() if "[E]" in line or "Error" in line)[-600:]
    return rec


def best(target: dict, rate: float, slo: tuple) -> dict:
    """aiconfigurator `default` (recommend mode) for the traffic's request rate under the SLOs (ttft, tpot ms)."""
    mp, system, isl, osl = (target[k] for k in ("mp", "system", "isl", "osl"))
    tmp = tempfile.mkdtemp(prefix="aic-default-")
    cmd = [
        AIC,
        "cli",
        "default",
        "--model-path",
        mp,
        "--system",
        system,
        "--backend",
        "vllm",
        "--isl",
        str(isl),
        "--osl",
        str(osl),
        "--ttft",
        str(slo[0]),
        "--tpot",
        str(slo[1]),
        "--target-request-rate",
        str(rate),
        "--no-color",
        "--save-dir",
        tmp,
    ]
    out, secs = run(cmd, timeout=3600)
    rec = {"command": " ".join(["aiconfigurator", *cmd[1:-2]]), "seconds": round(secs, 1)}
    for mode in ("agg", "disagg"):
        files = glob.glob(os.path.join(tmp, "**", mode, "best_config_topn.csv"), recursive=True)
        if not files:
            rec[mode] = None
            continue
        with open(files[0], encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        if not rows:
            rec[mode] = None
            continue
        top = rows[0]
        keep = (
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
        rec[mode] = {k: top[k] for k in keep if k in top}
        rec[mode]["total_gpus_needed"] = int(float(top["total_gpus_needed"]))
    shutil.rmtree(tmp, ignore_errors=True)
    done = [rec[m]["total_gpus_needed"] for m in ("agg", "disagg") if rec.get(m)]
    rec["gpus"] = min(done) if done else None
    if not done:
        rec["error"] = "\n".join(line for line in out.splitlines() if "[E]" in line or "rror" in line)[-800:]
    return rec


def main() -> None:
    only = set(sys.argv[1:])
    data = {"points": []}
    if os.path.exists(OUT):
        with open(OUT, encoding="utf-8") as fh:
            data = json.load(fh)
    done = {p["id"]: p for p in data["points"]}
    cache: dict = {}
    for old in data["points"]:  # estimates do not depend on the planner: reuse what an earlier run measured
        path = old["aiconfigurator_model"]["path"]
        mp = os.path.join(AIC_MODELS, path.split(":", 1)[1]) if path.startswith("local:") else path
        t = old["planner_inputs"]["traffic"]
        for e in old["estimates"]:
            key = (
                e.get("mode", "agg"),
                mp,
                old["aiconfigurator_model"]["system"],
                t["prompt_tokens_mean"],
                t["output_tokens_mean"],
                json.dumps(e["layout"], sort_keys=True),
                e["batch"],
            )
            cache[key] = e
    best_cache = {p["id"]: p["best"] for p in data["points"] if p["best"].get("gpus")}
    for pt in GRID:
        if only and pt["id"] not in only and pt["id"] in done:
            continue
        inp = pt["planner_inputs"]
        p = plan(json.loads(json.dumps(inp)))
        model = inp["model"]
        moe = p["model"]["kind"] == "moe"
        mp = model_path(model)
        system = SYSTEMS[inp["gpu"]]
        t = inp["traffic"]
        isl, osl = t["prompt_tokens_mean"], t["output_tokens_mean"]
        target = {"mp": mp, "system": system, "isl": isl, "osl": osl, "moe": moe}
        cands = [c for c in p["layout_candidates"] if not c.get("rejected") and c.get("batch_per_rank")][:3]
        jobs = []
        for c in cands:
            batches = sorted({c["batch_per_rank"], *[b for b in SWEEP if b <= max(16, 2 * c["batch_per_rank"])]})
            jobs += [("agg", c["layout"], b) for b in batches]
        if p["disaggregated"]:
            pre, dec = p["pools"]["prefill"], p["pools"]["decode"]
            dl = {k: dec[k] for k in ("tp", "pp", "dp", "ep")}
            db = dec["max_num_seqs"]
            jobs += [("static_gen", dl, b) for b in sorted({db, *[b for b in SWEEP if b <= 2 * db]})]
            jobs.append(("static_ctx", {k: pre[k] for k in ("tp", "pp", "dp", "ep")}, 1))
        ests = []
        for mode, lay, b in jobs:
            key = (mode, mp, system, isl, osl, json.dumps(lay, sort_keys=True), b)
            if key not in cache:
                cache[key] = estimate(target, mode, lay, b)
                print(pt["id"], mode, lay, b, cache[key].get("ttft_ms"), cache[key].get("tpot_ms"), flush=True)
            ests.append(cache[key])
        rec = {
            "id": pt["id"],
            "planner_inputs": inp,
            "aiconfigurator_model": {"path": MODELS[model][0], "made_from": MODELS[model][1], "system": system},
            "planner_at_generation": {
                "layout": p["layout_candidates"][0]["layout"],
                "batch_per_rank": p["layout_candidates"][0]["batch_per_rank"],
                "disaggregated": p["disaggregated"],
                "pools": {
                    k: {f: v[f] for f in ("replicas", "tp", "pp", "dp", "ep", "max_num_seqs")}
                    for k, v in p["pools"].items()
                    if v
                },
                "gpus_needed": plan_gpus(p),
            },
            "estimates": ests,
            "best": best_cache.get(pt["id"])
            or best(target, t["arrival_rate_rps"], (inp["slo"]["ttft_p95_ms"], inp["slo"]["tpot_p95_ms"])),
        }
        print(
            pt["id"],
            "best",
            rec["best"].get("gpus"),
            "planner",
            rec["planner_at_generation"]["gpus_needed"],
            flush=True,
        )
        done[pt["id"]] = rec
        data = {
            "tool": "aiconfigurator",
            "version": VERSION,
            "install": f"pip install aiconfigurator=={VERSION} (Python 3.12, separate venv)",
            "backend": "vllm (perf data 0.24.0, the version aiconfigurator 0.12.0 serves for h100_sxm / h200_sxm)",
            "generated_by": "tests/unit/planner/oracle/tools/run_oracle.py",
            "local_model_configs": "AIC_MODELS/<name>/config.json = aiconfigurator's bundled Qwen/<name> config.json "
            f"with quantization_config {json.dumps(FP8_BLOCK, sort_keys=True)}",
            "points": [done[g["id"]] for g in GRID if g["id"] in done],
        }
        with open(OUT, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
            fh.write("\n")


def plan_gpus(p: dict) -> int:
    if p["disaggregated"]:
        return p["pools"]["prefill"]["required_gpus"] + p["pools"]["decode"]["required_gpus"]
    return p["estimates"]["gpus_needed"]


if __name__ == "__main__":
    main()
