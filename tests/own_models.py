"""Sites that serve models outside the catalog (issue 31 item 6), for the unit, render and integration tests.

``own_site`` copies the example chat inventory and replaces its model by Llama-3.1-8B-Instruct (dense)
and/or Mixtral-8x7B-Instruct-v0.1 (MoE), each named by its published config.json
(tests/unit/planner/configs), kept next to the inventory: Ansible parses every file under an inventory
directory as inventory.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "tests" / "unit" / "planner" / "configs"
OWN = {
    "llama": {
        "config": "llama-3.1-8b-instruct.json",
        "id": "Llama-3.1-8B-Instruct",
        "uri": "hf://meta-llama/Llama-3.1-8B-Instruct",
    },
    "mixtral": {
        "config": "mixtral-8x7b-instruct-v0.1.json",
        "id": "Mixtral-8x7B-Instruct-v0.1",
        "uri": "hf://mistralai/Mixtral-8x7B-Instruct-v0.1",
    },
}


def own_model(template: dict, which: str, **changes) -> dict:
    """The example's model entry turned into an own model (its traffic, SLO and policy kept)."""
    own = OWN[which]
    model = {
        **template,
        "name": f"{which}-chat",
        "id": own["id"],
        "served_name": own["uri"][len("hf://") :],
        "architecture": f"../models/{which}/config.json",
        "artifact": {"uri": own["uri"]},
        "max_model_len": 32768,
    }
    for k, v in changes.items():
        if v is None:
            model.pop(k, None)
        else:
            model[k] = v
    return model


def own_site(tmp_path: Path, which: str | list[str], **model_changes) -> Path:
    """example-chat copied to tmp_path/inv whose models are the own models ``which``; configs in tmp_path/models."""
    inv = tmp_path / "inv"
    shutil.copytree(ROOT / "inventories" / "example-chat", inv)
    names = [which] if isinstance(which, str) else list(which)
    site_file = inv / "group_vars" / "all" / "site.yml"
    site = yaml.safe_load(site_file.read_text())
    template = site["models"][0]
    for name in names:
        (tmp_path / "models" / name).mkdir(parents=True)
        shutil.copy(CONFIGS / OWN[name]["config"], tmp_path / "models" / name / "config.json")
    site["models"] = [own_model(template, n, **model_changes) for n in names]
    site_file.write_text(yaml.safe_dump(site, sort_keys=False))
    return inv
