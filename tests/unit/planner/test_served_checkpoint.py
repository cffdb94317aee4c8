"""Issue 31 item 7: the ``vllm serve`` line a plan prints serves what the plan sized.

For every catalog model and weight precision the printed command names a repository that holds
those weights, or the BF16 repository with ``--quantization=fp8`` (vLLM's online FP8, the only
precision vLLM quantizes to at load), and the engine arguments (what a site renders) carry the same
flag. The published repositories below are this test's own table, from the repositories' model cards.
"""

from __future__ import annotations

import shlex

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils.intent import build
from ansible_collections.inference.blueprints.plugins.module_utils.planner import data, plan
from ansible_collections.inference.blueprints.plugins.module_utils.planner import report as report_mod

# (catalog id, weights) -> the published Hugging Face repository holding those weights
PUBLISHED = {
    ("Qwen3.6-27B", "bf16"): "Qwen/Qwen3.6-27B",
    ("Qwen3.6-27B", "fp8"): "Qwen/Qwen3.6-27B-FP8",  # Qwen's fine-grained FP8 (128x128 blocks)
    ("Qwen3.5-35B-A3B", "bf16"): "Qwen/Qwen3.5-35B-A3B",
    ("Qwen3.5-35B-A3B", "fp8"): "Qwen/Qwen3.5-35B-A3B-FP8",
    ("Qwen3.5-397B-A17B", "bf16"): "Qwen/Qwen3.5-397B-A17B",
    ("Qwen3.5-397B-A17B", "fp8"): "Qwen/Qwen3.5-397B-A17B-FP8",
    ("Llama-3.3-70B-Instruct", "bf16"): "meta-llama/Llama-3.3-70B-Instruct",
    ("Llama-3.3-70B-Instruct", "fp8"): "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic",  # per-channel FP8
    ("Qwen3-30B-A3B", "bf16"): "Qwen/Qwen3-30B-A3B",
    ("Qwen3-30B-A3B", "fp8"): "Qwen/Qwen3-30B-A3B-FP8",
    ("DeepSeek-V3", "fp8"): "deepseek-ai/DeepSeek-V3",  # FP8 is its native precision
}
CASES = [(m, w) for m in data.models() for w in ("bf16", "fp8", "fp4")]


def _serve_lines(p: dict) -> list[list[str]]:
    md = report_mod.to_markdown(p, "x")
    lines = []
    for block in md.split("```")[1::2]:
        if block.strip().startswith("vllm serve"):
            lines.append(shlex.split(block.replace("\\\n", " ")))
    return lines


def _plan(model: str, weights: str) -> dict:
    # b200: FP4 tensor cores, so every precision is plannable; enough nodes for the 397B and DeepSeek-V3 in bf16
    return plan({"model": model, "gpu": "b200", "gpus_per_node": 8, "nodes": 4, "weights": weights,
                 "policy": {"allowed_weights": ["bf16", "fp8", "fp4"]}, "blueprint": "custom"})  # fmt: skip


@pytest.mark.parametrize(("model", "weights"), CASES)
def test_printed_serve_line_serves_the_sized_weights(model, weights):
    p = _plan(model, weights)
    assert p["weights"]["precision"] == weights
    lines = _serve_lines(p)
    assert lines, "the plan prints a vllm serve line per pool"
    pools = [v for v in p["pools"].values() if v]
    for argv, pool in zip(lines, pools, strict=True):
        served, flags = argv[2], argv[3:]
        assert flags == pool["engine_args"], "the printed line is the pool's engine arguments"
        quant = [f for f in flags if f.startswith("--quantization")]
        if (model, weights) in PUBLISHED:
            assert served == PUBLISHED[(model, weights)] and not quant, (served, quant)
        else:
            # no repository holds these weights: none may be named as if it did
            assert served not in PUBLISHED.values() and served.startswith("<"), served
            assert not quant


def test_a_bf16_checkpoint_sized_as_fp8_is_quantized_at_load():
    p = plan({"model": "Qwen3-30B-A3B", "gpu": "h100", "weights": "fp8", "quantized_checkpoint": False})
    (argv,) = _serve_lines(p)
    assert argv[2] == "Qwen/Qwen3-30B-A3B" and "--quantization=fp8" in argv


def test_site_artifact_of_the_bf16_repository_is_quantized_at_load():
    """A site that sizes FP8 weights but names the BF16 repository as its artifact: the rendered engine
    arguments carry --quantization=fp8 (vLLM would otherwise load 16-bit weights the plan never sized)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    values, names = cli.load_site_vars(str(root / "inventories" / "example-chat"))["chat-east-1"]
    model = {**values["models"][0], "id": "Qwen3-30B-A3B", "artifact": {"uri": "hf://Qwen/Qwen3-30B-A3B"}}
    intent = build.site_intent("chat-east-1", {**values, "models": [model]}, list(names), [str(root / "blueprints")])
    p = intent["plans"][0]["plan"]
    for pool in (v for v in p["pools"].values() if v):
        assert "--quantization=fp8" in pool["engine_args"]
        assert pool["served_model"] == "Qwen/Qwen3-30B-A3B"
    # the FP8 repository as artifact: served as stored
    model["artifact"] = {"uri": "hf://Qwen/Qwen3-30B-A3B-FP8"}
    intent = build.site_intent("chat-east-1", {**values, "models": [model]}, list(names), [str(root / "blueprints")])
    for pool in (v for v in intent["plans"][0]["plan"]["pools"].values() if v):
        assert not any(a.startswith("--quantization") for a in pool["engine_args"])


def test_site_model_without_artifact_serves_the_published_checkpoint_of_its_weights():
    """A catalog model without artifact.uri: the LLMInferenceService loads the repository that holds the sized
    weights (it had no uri at all)."""
    from pathlib import Path

    from ansible_collections.inference.blueprints.plugins.plugin_utils import render

    root = Path(__file__).resolve().parents[3]
    values, names = cli.load_site_vars(str(root / "inventories" / "example-chat"))["chat-east-1"]
    model = {k: v for k, v in values["models"][0].items() if k != "artifact"}
    model["id"] = "Qwen3-30B-A3B"
    intent = build.site_intent("chat-east-1", {**values, "models": [model]}, list(names), [str(root / "blueprints")])
    objs = render.render_components(intent["stages"]["serving"], intent)
    (svc,) = [o for o in objs if o["kind"] == "LLMInferenceService"]
    assert svc["spec"]["model"]["uri"] == "hf://Qwen/Qwen3-30B-A3B-FP8"
