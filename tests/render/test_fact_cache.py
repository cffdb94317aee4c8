"""A fact cache that outlives the run must not hand a run the last run's deployment intents.

The stages pass intents as facts (``ansible_facts.site_intents``) and compute them only when a host
has none. With a persistent fact cache (AAP's fact storage, molecule's jsonfile cache) the facts of
the previous run are there when the next one starts: without clusters.yml clearing them, the
second run below would deploy the first run's ``max_model_len`` after the inventory changed it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import yaml

from tests.serving_helpers import INVENTORIES, PLAYBOOKS, ROOT

STAGE = """
- name: Sort the clusters by delivery
  ansible.builtin.import_playbook: {clusters}

- name: A stage play, as platform.yml and serving.yml begin
  hosts: "{{{{ groups['inference_blueprints_apply'] | default([]) }}}}"
  gather_facts: false
  tasks:
    - name: Validate the site, plan every model and compute the deployment intent (unless an earlier play did)
      inference.blueprints.site:
      when: ansible_facts.site_intents is not defined

    - name: Say what this run deploys
      ansible.builtin.debug:
        msg: "{{{{ ansible_facts.site_intents[inventory_hostname].serving.models[0] | to_json }}}}"
"""


def _run(playbook, inventory, cache) -> str:
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".cache" / "collections"),
        "ANSIBLE_CACHE_PLUGIN": "ansible.builtin.jsonfile",
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(cache),
        "ANSIBLE_NOCOLOR": "1",
    }
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory), str(playbook)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def test_a_persistent_fact_cache_does_not_replay_the_last_runs_intents(tmp_path):
    inventory = tmp_path / "inventory"
    shutil.copytree(INVENTORIES / "example-chat", inventory)
    playbook = tmp_path / "stage.yml"
    playbook.write_text(STAGE.format(clusters=PLAYBOOKS / "clusters.yml"))
    cache = tmp_path / "facts"

    first = _run(playbook, inventory, cache)
    assert "--max-model-len=32768" in first, first[-3000:]
    assert any(cache.iterdir()), "the jsonfile cache kept nothing: the test would prove nothing"

    site_file = inventory / "group_vars" / "all" / "site.yml"
    site = yaml.safe_load(site_file.read_text())
    site["models"][0]["max_model_len"] = 16384
    site["models"][0]["contexts"] = [8192, 16384]
    site_file.write_text(yaml.safe_dump(site))
    second = _run(playbook, inventory, cache)
    assert "--max-model-len=16384" in second, second[-3000:]
