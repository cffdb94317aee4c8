"""Issue 31 item 6: a model outside the catalog, described by its Hugging Face config.json.

The two configs in ``configs/`` are the published ones of meta-llama/Llama-3.1-8B-Instruct (dense)
and mistralai/Mixtral-8x7B-Instruct-v0.1 (MoE), neither in the catalog. The planner counts their
parameters from the layer shapes (the published totals: 8.03 B and 46.7 B), reads the checkpoint's
precision from quantization_config, and refuses what it cannot price, naming the field.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils.planner import PlanError, data, hf_config, plan
from ansible_collections.inference.blueprints.plugins.plugin_utils import (  # noqa: F401
    converge,  # imported before a test installs Ansible's collection finder (cli.main imports it lazily)
)

CONFIGS = Path(__file__).parent / "configs"
LLAMA = CONFIGS / "llama-3.1-8b-instruct.json"
MIXTRAL = CONFIGS / "mixtral-8x7b-instruct-v0.1.json"


def _cfg(path: Path) -> dict:
    return json.loads(path.read_text())


def test_the_test_models_are_not_in_the_catalog():
    ids = {m["hf_repo"] for m in data.models().values()} | set(data.models())
    assert not {"meta-llama/Llama-3.1-8B-Instruct", "mistralai/Mixtral-8x7B-Instruct-v0.1"} & ids


@pytest.mark.parametrize(
    ("path", "kind", "total_b", "active_b"),
    [
        # Meta's model card: 8.03 B parameters
        (LLAMA, "dense", 8.03, 8.03 - 2 * 0.5253),
        # Mistral's model card: 46.7 B parameters, 12.9 B used per token (with embedding and lm_head)
        (MIXTRAL, "moe", 46.7, 12.9 - 2 * 0.1311),
    ],
)
def test_parameters_counted_from_the_published_config(path, kind, total_b, active_b):
    arch = hf_config.architecture(_cfg(path))
    assert arch["kind"] == kind and arch["attention"] == "gqa"
    assert arch["params_b"] == pytest.approx(total_b, abs=0.01)
    assert arch["active_params_b"] == pytest.approx(active_b, abs=0.05)
    assert arch["native_dtype"] == "bf16"


def test_the_conversion_agrees_with_the_catalog_on_a_catalog_model():
    """Qwen/Qwen3-30B-A3B's config.json through the conversion gives the catalog's hand-counted split."""
    cfg = {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "moe_intermediate_size": 768,
        "num_hidden_layers": 48,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "vocab_size": 151936,
        "tie_word_embeddings": False,
        "max_position_embeddings": 40960,
        "use_sliding_window": False,
        "sliding_window": None,
        "torch_dtype": "bfloat16",
    }
    arch, cat = hf_config.architecture(cfg), data.models()["Qwen3-30B-A3B"]
    for k in ("params_b", "active_params_b", "expert_params_b", "embedding_params_b", "lm_head_params_b"):
        assert arch[k] == pytest.approx(cat[k], abs=0.01), k
    for k in ("layers", "hidden_size", "num_key_value_heads", "head_dim", "experts", "experts_per_token"):
        assert arch[k] == cat[k], k


def _explicit(path: Path, *extra: str) -> list[str]:
    return [
        "plan",
        "--architecture",
        str(path),
        "--model",
        path.stem,
        "--gpu",
        "h100",
        "--gpus-per-node",
        "8",
        "--format",
        "json",
        *extra,
    ]


def _pools(p: dict) -> list[dict]:
    return [v for v in p["pools"].values() if v]


def _cli_plan(capsys, argv: list[str]) -> dict:
    assert cli.main(argv) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("path", [LLAMA, MIXTRAL])
def test_cli_plans_a_config_json_and_serves_it_quantized_online(capsys, path):
    p = _cli_plan(capsys, _explicit(path, "--weights", "fp8"))
    assert p["weights"]["precision"] == "fp8"
    for pool in _pools(p):
        # a BF16 checkpoint sized as FP8: vLLM must quantize it at load
        assert "--quantization=fp8" in pool["engine_args"]
    # BF16 weights, served as stored: no flag
    p16 = _cli_plan(capsys, _explicit(path, "--weights", "bf16", "--nodes", "2", "--interconnect", "rdma"))
    assert all(not any(a.startswith("--quantization") for a in pool["engine_args"]) for pool in _pools(p16))


# the quantization_config shapes of published checkpoints (vLLM's and transformers' readers)
FP8_BLOCK = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
FP8_CT = {
    "quant_method": "compressed-tensors",
    "format": "float-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True},
            "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True},
        }
    },
    "ignore": ["lm_head"],
}
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}
W4A16_CT = {
    "quant_method": "compressed-tensors",
    "format": "pack-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True},
            "input_activations": None,
        }
    },
}


@pytest.mark.parametrize(
    ("qc", "weights", "fmt"),
    [(FP8_BLOCK, "fp8", "block"), (FP8_CT, "fp8", "channel"), (AWQ, "int4", None), (GPTQ, "int4", None),
     (W4A16_CT, "int4", None)],
)  # fmt: skip
def test_quantization_config_is_read_and_served_as_stored(qc, weights, fmt):
    cfg = {**_cfg(LLAMA), "quantization_config": qc}
    arch = hf_config.architecture(cfg)
    assert arch["native_dtype"] == weights and arch.get("fp8_format") == fmt
    p = plan({"model": "llama-q", "model_architecture": cfg, "gpu": "h100", "gpus_per_node": 1, "blueprint": "custom"})
    assert p["weights"]["precision"] == weights
    assert all(not any(a.startswith("--quantization") for a in pool["engine_args"]) for pool in _pools(p))
    bf16 = plan({"model": "llama", "model_architecture": _cfg(LLAMA), "gpu": "h100", "weights": "bf16"})
    if weights == "int4":  # 4.125 bits a weight against 16
        assert p["weights"]["total_gib"] < bf16["weights"]["total_gib"] * 0.4


def test_declared_quantization_for_a_config_without_quantization_config():
    cfg = _cfg(LLAMA)
    p = plan({"model": "llama-awq", "model_architecture": cfg, "model_quantization": "int4", "gpu": "h100"})
    assert p["weights"]["precision"] == "int4"
    with pytest.raises(PlanError) as err:
        quantized = {**cfg, "quantization_config": AWQ}
        plan({"model": "x", "model_architecture": quantized, "model_quantization": "fp8-block", "gpu": "h100"})
    assert err.value.field == "quantization" and "contradicts" in err.value.message


def test_a_quantized_checkpoint_is_not_quantized_again():
    cfg = {**_cfg(LLAMA), "quantization_config": AWQ}
    with pytest.raises(PlanError) as err:
        plan({"model": "x", "model_architecture": cfg, "gpu": "h100", "weights": "fp8"})
    assert err.value.field == "weights" and "valid: int4 or auto" in err.value.message


def _drop(cfg: dict, key: str) -> dict:
    out = copy.deepcopy(cfg)
    out.pop(key)
    return out


@pytest.mark.parametrize(
    ("cfg", "field", "words"),
    [
        (_drop(_cfg(LLAMA), "num_attention_heads"), "model_architecture.num_attention_heads", ["missing", "integer"]),
        ({**_cfg(LLAMA), "model_type": "jamba"}, "model_architecture.model_type", ["cannot price", "llama"]),
        ({**_cfg(LLAMA), "quantization_config": {"quant_method": "bitsandbytes"}},
         "model_architecture.quantization_config.quant_method", ["bitsandbytes", "awq"]),
        ({**_cfg(LLAMA), "quantization_config": {"quant_method": "gptq", "bits": 8}},
         "model_architecture.quantization_config.bits", ["valid: 4"]),
        ({**_cfg(MIXTRAL), "sliding_window": 4096}, "model_architecture.sliding_window", ["full attention"]),
        (_drop(_cfg(MIXTRAL), "num_local_experts"), "model_architecture.num_local_experts", ["missing"]),
    ],
)  # fmt: skip
def test_an_unpriceable_config_is_refused_with_what_is_missing(cfg, field, words):
    with pytest.raises(PlanError) as err:
        plan({"model": "x", "model_architecture": cfg, "gpu": "h100"})
    assert err.value.field == field
    for w in words:
        assert w in err.value.message


def test_cli_names_the_config_field(tmp_path, capsys):
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps(_drop(_cfg(LLAMA), "num_attention_heads")))
    assert cli.main(_explicit(bad)) == 2
    err = capsys.readouterr().err
    assert "--architecture num_attention_heads: missing" in err and "Traceback" not in err
