"""Golden files: the objects every example site renders, platform and serving stage, are checked
in (tests/golden/).

A change to the planner, the intent or a template shows up as a reviewable diff of these files.
Regenerate them with ``UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/intent/test_golden.py``
and review the diff before committing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.plugin_utils import platform, render

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "golden"
INVENTORIES = ROOT / "inventories"
EXAMPLES = sorted(p.name for p in INVENTORIES.iterdir() if (p / "hosts.yml").exists())


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper, value):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def rendered_text(intent: dict) -> str:
    """Both stages in apply order: the platform (operators, then operands; the intent as rendering
    leaves it, bound to no cluster: the newest APIs), then the serving stage."""
    docs = list(platform.render_phase(intent, "all")["objects"])
    docs.extend(render.render_components(intent["stages"]["serving"], intent))
    # absolute paths differ between checkouts: the golden files hold none
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, width=120, default_flow_style=False)


@pytest.mark.parametrize("site", EXAMPLES)
def test_rendered_objects_match_the_golden_files(site):
    intents = cli.site_intents(str(INVENTORIES / site), None)
    mismatched = []
    for host, intent in intents.items():
        path = GOLDEN / site / f"{host}.yaml"
        text = rendered_text(intent)
        if os.environ.get("UPDATE_GOLDEN"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            continue
        if not path.exists():
            mismatched.append(f"{path} is missing (UPDATE_GOLDEN=1 writes it)")
        elif path.read_text() != text:
            mismatched.append(f"{path} differs from what {site} renders now")
    if os.environ.get("UPDATE_GOLDEN"):
        return
    stale = {p.stem for p in (GOLDEN / site).glob("*.yaml")} - set(intents)
    assert not stale, f"golden files of clusters the site no longer has: {sorted(stale)}"
    assert not mismatched, (
        "\n".join(mismatched)
        + "\nreview with: UPDATE_GOLDEN=1 pytest tests/unit/intent/test_golden.py; git diff tests/golden"
    )
