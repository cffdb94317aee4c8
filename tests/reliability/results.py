"""What the reliability tests measured, kept for the README's reliability section.

Each test records its figures under a section (``bad_input``, ``interruptions``, ``secrets``, ...)
in ``.cache/reliability/results.json``; ``python -m tests.reliability.summary`` prints the table
from it and from docs/reliability.md.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PATH = Path(os.environ.get("RELIABILITY_RESULTS", ROOT / ".cache" / "reliability" / "results.json"))


def load() -> dict:
    try:
        return json.loads(PATH.read_text())
    except (OSError, ValueError):
        return {}


def record(section: str, key: str, data: dict) -> None:
    doc = load()
    doc.setdefault(section, {})[key] = data
    PATH.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=PATH.parent, prefix=".results-")
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)
    os.replace(tmp, PATH)
