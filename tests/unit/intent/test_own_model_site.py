"""Issue 31 item 6: a site serves a model outside the catalog, named by its config.json.

The example chat inventory, copied, with its model replaced by Llama-3.1-8B-Instruct (dense) or
Mixtral-8x7B-Instruct-v0.1 (MoE): the site plans it exactly as ``blueprints plan --architecture``
does and renders an LLMInferenceService whose artifact, served name and engine arguments come
from that plan. Bad own models are refused before anything is planned, each by its path.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.plugin_utils import (  # noqa: F401
    converge,  # imported before a test installs Ansible's collection finder (cli.main imports it lazily)
    render,
)

from tests.own_models import CONFIGS, OWN, ROOT, own_site

BDIR = str(ROOT / "blueprints")


def cli_argv(model: dict, config: Path) -> list[str]:
    """The explicit CLI inputs the site's model and hardware give (inventories/example-chat)."""
    t, slo = model["traffic"], model["slo"]
    argv = ["plan", "--architecture", str(config), "--model", model["id"], "--name", model["name"]]
    argv += ["--blueprint", "chat", "--blueprints-dir", BDIR, "--artifact", model["artifact"]["uri"]]
    argv += ["--gpu", "h100", "--gpus-per-node", "8", "--nodes", "2", "--interconnect", "rdma"]
    argv += ["--weights", model["weights"], "--kv-dtype", model["kv_cache_dtype"]]
    argv += ["--max-model-len", str(model["max_model_len"])]
    for c in model["contexts"]:
        argv += ["--context", str(c)]
    for k, v in t.items():
        argv += ["--arrival-rate" if k == "arrival_rate_rps" else "--" + k.replace("_", "-"), str(v)]
    argv += ["--ttft-p95-ms", str(slo["ttft_p95_ms"]), "--tpot-p95-ms", str(slo["tpot_p95_ms"])]
    for k, v in (model.get("policy") or {}).items():
        argv += ["--policy", f"{k}={json.dumps(v)}"]
    return argv


def _comparable(p: dict) -> dict:
    """A plan without the words that name where its policy came from (a file path, not a figure); the CLI
    reads numbers as floats (1000.0 ms in a reason where the inventory's 1000 reads 1000 ms)."""
    out = json.loads(json.dumps(p))
    out["decisions"] = [d for d in out["decisions"] if d["what"] != "policy"]
    out.pop("policy_source", None)
    return json.loads(re.sub(r"(\d)\.0( ms| req/s)", r"\1\2", json.dumps(out)))


@pytest.mark.parametrize("which", sorted(OWN))
def test_site_sizes_its_own_model_as_the_cli_does(tmp_path, capsys, which):
    inv = own_site(tmp_path, which)
    intent = cli.site_intents(str(inv), BDIR)["chat-east-1"]
    entry = intent["plans"][0]
    site_plan = entry["plan"]
    assert entry["model"]["architecture_file"] == str(tmp_path / "models" / which / "config.json")
    assert cli.main(cli_argv(entry["model"], tmp_path / "models" / which / "config.json")) == 0
    cli_plan = json.loads(capsys.readouterr().out)
    assert _comparable(site_plan) == _comparable(cli_plan)
    assert site_plan["model"]["kind"] == ("moe" if which == "mixtral" else "dense")


@pytest.mark.parametrize("which", sorted(OWN))
def test_own_model_renders_with_engine_args_sized_from_its_config(tmp_path, which):
    inv = own_site(tmp_path, which)
    intent = cli.site_intents(str(inv), BDIR)["chat-east-1"]
    plan = intent["plans"][0]["plan"]
    objs = render.render_components(intent["stages"]["serving"], intent)
    (svc,) = [o for o in objs if o["kind"] == "LLMInferenceService"]
    assert svc["spec"]["model"] == {"uri": OWN[which]["uri"], "name": OWN[which]["uri"][len("hf://") :]}
    assert svc["metadata"]["annotations"]["inference.blueprints/model-id"] == OWN[which]["id"]
    roles = {"main": plan["pools"].get("decode") or plan["pools"]["serve"], "prefill": plan["pools"].get("prefill")}
    for role, wl in (("main", svc["spec"]), ("prefill", svc["spec"].get("prefill"))):
        if not wl:
            continue
        pool = roles[role]
        env = {e["name"]: e.get("value") for e in wl["template"]["containers"][0].get("env", [])}
        args = shlex.split(env["VLLM_ADDITIONAL_ARGS"])
        # the BF16 checkpoint sized as FP8: vLLM quantizes at load, as the plan priced it
        assert "--quantization=fp8" in args and "--kv-cache-dtype=fp8" in args
        assert f"--max-num-seqs={pool['max_num_seqs']}" in args
        assert "--max-model-len=32768" in args
        assert pool["served_model"] == OWN[which]["uri"][len("hf://") :]


def _error(tmp_path: Path, which: str = "llama", config: dict | None = None, **changes) -> str:
    inv = own_site(tmp_path, which, **changes)
    if config is not None:
        (tmp_path / "models" / which / "config.json").write_text(json.dumps(config))
    with pytest.raises(cli.CliError) as err:
        cli.site_intents(str(inv), BDIR)
    return str(err.value)


def test_own_model_without_its_artifact_is_refused(tmp_path):
    msg = _error(tmp_path, artifact=None)
    assert "models[0].artifact.uri: required for a model outside the catalog" in msg
    assert "hf://<org>/<name>" in msg


def test_config_path_that_cannot_be_read_is_refused(tmp_path):
    msg = _error(tmp_path, architecture="../models/llama/nope.json")
    assert "models[0].architecture: cannot read" in msg and "nope.json" in msg
    assert "relative to the inventory directory" in msg


def test_unpriceable_configs_are_refused_by_their_path(tmp_path):
    cfg = json.loads((CONFIGS / OWN["llama"]["config"]).read_text())
    missing = {k: v for k, v in cfg.items() if k != "num_attention_heads"}
    msg = _error(tmp_path / "a", config=missing)
    assert "models[0].architecture.num_attention_heads: missing" in msg
    msg = _error(tmp_path / "b", config={**cfg, "quantization_config": {"quant_method": "bitsandbytes"}})
    assert "models[0].architecture.quantization_config.quant_method: 'bitsandbytes'" in msg
    assert "valid: fp8, compressed-tensors, awq" in msg


def test_inline_config_and_declared_quantization(tmp_path):
    cfg = json.loads((CONFIGS / OWN["llama"]["config"]).read_text())
    inv = own_site(tmp_path, "llama", architecture=cfg, quantization="int4", weights="auto")
    intent = cli.site_intents(str(inv), BDIR)["chat-east-1"]
    plan = intent["plans"][0]["plan"]
    assert plan["weights"]["precision"] == "int4"
    assert all("--quantization" not in " ".join(p["engine_args"]) for p in plan["pools"].values() if p)


def test_quantization_on_a_catalog_model_is_refused(tmp_path):
    inv = tmp_path / "inv"
    shutil.copytree(ROOT / "inventories" / "example-chat", inv)
    site_file = inv / "group_vars" / "all" / "site.yml"
    site = yaml.safe_load(site_file.read_text())
    site["models"][0]["quantization"] = "fp8-block"
    site_file.write_text(yaml.safe_dump(site, sort_keys=False))
    with pytest.raises(cli.CliError) as err:
        cli.site_intents(str(inv), BDIR)
    assert "models[0].quantization: applies to a model described by architecture" in str(err.value)


def test_config_inside_the_inventory_directory_is_refused(tmp_path):
    """Ansible parses every file under an inventory directory as inventory (a config.json there becomes
    groups and warnings): the path must lie outside it, under a hidden directory, or the fields inline."""
    inv = own_site(tmp_path, "llama", architecture="models/config.json")
    (inv / "models").mkdir()
    shutil.copy(CONFIGS / OWN["llama"]["config"], inv / "models" / "config.json")
    with pytest.raises(cli.CliError) as err:
        cli.site_intents(str(inv), BDIR)
    msg = str(err.value)
    assert "models[0].architecture: " in msg and "Ansible reads every file under the inventory directory" in msg
    assert "valid: " in msg and "../" in msg
    hidden = own_site(tmp_path / "h", "llama", architecture=".models/config.json")
    (hidden / ".models").mkdir()
    shutil.copy(CONFIGS / OWN["llama"]["config"], hidden / ".models" / "config.json")
    assert cli.site_intents(str(hidden), BDIR)["chat-east-1"]["plans"][0]["plan"]["model"]["kind"] == "dense"
