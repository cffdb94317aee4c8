"""plan() as the collection calls it for a blueprint: with that blueprint file's policy and defaults.

The planner knows no blueprint by name (blueprints/<name>.yml is the only source of a blueprint's
policy, traffic and SLO defaults). Tests that say ``blueprint: rag`` mean "as the rag blueprint
file sets it", so this helper reads the file the same way the intent does.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import yaml
from ansible_collections.inference.blueprints.plugins.module_utils.planner import plan as _plan

BLUEPRINTS_DIR = Path(__file__).resolve().parents[3] / "blueprints"
BLUEPRINTS = tuple(sorted(p.stem for p in BLUEPRINTS_DIR.glob("*.yml")))


@functools.cache
def _blueprint(path: Path) -> dict:
    """A blueprint file, parsed once per test process (a sixth of the grid test's time was this parse)."""
    return yaml.safe_load(path.read_text())


def with_blueprint(inputs: dict) -> dict:
    """The inputs with the blueprint file's policy, example traffic and SLO, as the intent passes them
    (read directly: blueprints whose components are not built yet still have a policy to plan with)."""
    name = inputs.get("blueprint")
    if not name or name not in BLUEPRINTS:
        return inputs
    path = BLUEPRINTS_DIR / f"{name}.yml"
    bp = copy.deepcopy(_blueprint(path))
    defaults = bp.get("defaults") or {}
    out = dict(inputs)
    out["policy"] = {**(bp.get("policy") or {}), **(inputs.get("policy") or {})}
    out.setdefault("policy_source", str(path))
    if defaults.get("traffic"):
        out["traffic_defaults"] = defaults["traffic"]
    slo = {**(defaults.get("slo") or {}), **(inputs.get("slo") or {})}
    if slo:
        out["slo"] = slo
    return out


def plan(inputs):
    return _plan(with_blueprint(inputs) if isinstance(inputs, dict) else inputs)
