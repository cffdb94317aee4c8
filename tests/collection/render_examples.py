"""Run by tests/collection/test_package.py with the Python of an installed copy of the collection (the wheel in a
virtual environment, or the Galaxy tarball on a collections path): renders both stages of every example inventory
given with the collection it imports, and prints {"collection": where it was imported from, "sites": {site:
{cluster: sha256 of the rendered YAML}}} as JSON."""

from __future__ import annotations

import hashlib
import json
import sys

import yaml
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.plugin_utils import platform, render


def rendered(intent: dict) -> str:
    docs = list(platform.render_phase(intent, "all")["objects"])
    docs.extend(render.render_components(intent["stages"]["serving"], intent))
    return yaml.safe_dump_all(docs, sort_keys=True)


def render_site(inventory: str) -> dict[str, str]:
    """{cluster: sha256 of its rendered YAML} of one site inventory."""
    intents = cli.site_intents(inventory, None)
    return {h: hashlib.sha256(rendered(i).encode()).hexdigest() for h, i in sorted(intents.items())}


def main(inventories: list[str]) -> int:
    import ansible_collections.inference.blueprints as collection

    sites = {inventory: render_site(inventory) for inventory in inventories}
    print(json.dumps({"collection": list(collection.__path__), "sites": sites}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
