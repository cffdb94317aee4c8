"""The site-variable reference the collection ships (docs/site-variables.md and the notes of
``ansible-doc inference.blueprints.site``) is what scripts/site_reference.py generates from the validator's schema now
(issue 31, item 13): a variable added to the schema without `make docs-reference` fails here."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils.intent import inventory
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import Field

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
reference = importlib.import_module("site_reference")
data = importlib.import_module("site_reference_data")
BIN = Path(sys.executable).parent


def test_the_shipped_reference_is_what_the_schema_gives():
    run = subprocess.run(
        [sys.executable, ROOT / "scripts" / "site_reference.py", "--check"], check=False, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr + "\nregenerate with: make docs-reference"


def test_a_variable_added_without_regenerating_is_caught(monkeypatch):
    monkeypatch.setitem(inventory.SITE_FIELDS, "new_knob", Field("int", minimum=1, doc="a knob added later"))
    out = reference.outputs()
    for path, text in out.items():
        assert "new_knob" in text, path
        assert path.read_text(encoding="utf-8") != text
    assert reference.main(["--check"]) == 1


def test_every_site_variable_and_role_option_has_a_row():
    rows = data.rows(ROOT)
    paths = {r.path for r in rows}
    assert set(inventory.SITE_FIELDS) <= paths
    for role in inventory.component_names():
        assert set(inventory.component_options(role)) <= paths, role
    nested = {"models[].traffic.arrival_rate_rps", "hardware.gpu", "tiers.<name>.max_tokens", "slo.ttft_p95_ms"}
    assert nested <= paths
    text = reference.MARKDOWN.read_text(encoding="utf-8")
    assert all(f"`{p}`" in text for p in paths)


def test_examples_and_blueprints_come_from_the_data():
    rows = {r.path: r for r in data.rows(ROOT)}
    # set by the example-ai-grid inventory only
    assert rows["tenants[].tier"].example == "gold" and rows["tenants[].tier"].example_from.endswith("example-ai-grid")
    assert rows["tenants"].blueprints == ["ai_grid"]
    # a blueprint default
    assert rows["autoscaling_trigger.queue_threshold"].example_from == "blueprints/batch.yml"
    # a role option: the blueprints that list the role under components
    assert rows["ai_gateway_gateway_name"].blueprints == ["ai_grid"]
    assert rows["models"].blueprints == ["every"]


@pytest.mark.parametrize(
    "variable", ["serving_namespace", "models[].traffic.arrival_rate_rps", "tiers.<name>.max_tokens"]
)
def test_ansible_doc_shows_the_site_variables(variable, tmp_path):
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".cache" / "collections"), "HOME": str(tmp_path)}
    run = subprocess.run(
        [BIN / "ansible-doc", "--json", "inference.blueprints.site"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    notes = json.loads(run.stdout)["inference.blueprints.site"]["doc"]["notes"]
    assert any(n.startswith(f"C({variable}) ") for n in notes), notes[:3]
