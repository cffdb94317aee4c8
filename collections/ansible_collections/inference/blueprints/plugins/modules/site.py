#!/usr/bin/python
# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: site
short_description: Validate a site, plan every model and compute each cluster's deployment intent
version_added: 0.2.0
description:
  - Reads the inventory variables of the given cluster hosts (hosts are clusters), validates them against
    the collection's one definition of a site (C(plugins/module_utils/intent/inventory.py) and every role's
    C(meta/argument_specs.yml)) and the blueprint data file C(blueprints/<blueprint>.yml), runs the sizing
    planner for every model, and computes the deployment intent every template and stage reads
    (C(docs/contracts.md)).
  - Bad input fails before anything is read from or written to a cluster, with every problem at once, each
    naming the variable by its path (C(models[0].traffic.arrival_rate_rps)), what was wrong and what would be
    valid. A misspelled variable close to a known one is an error.
  - "Sets the fact C(site_intents) (C({host: intent})) on the host it runs for. Run it per host (no
    C(run_once)): each cluster then holds only its own intent, which keeps a fleet of hundreds of sites
    fast; identical models are planned once (plans are cached on disk, keyed by their inputs and the
    planner's code)."
  - Runs on the controller as an action plugin and changes nothing.
author:
  - inference.blueprints contributors (@inference-blueprints)
options:
  hosts:
    description: Cluster hosts to compute the intent of. Defaults to the current host.
    type: list
    elements: str
  blueprints_dir:
    description:
      - Directory of the blueprint data files. By default C(blueprints_dir) of the inventory, else the
        C(blueprints) directory next to the playbooks or the inventories, else in the working directory.
    type: path
  report:
    description: Also write the sizing report (Markdown, SVG charts, the plans as JSON) into each site's C(report_dir).
    type: bool
    default: false
  set_facts:
    description: Set C(site_intents). V(false) with O(report) writes the report of O(hosts) only.
    type: bool
    default: true
  stop_on_missed_slo:
    description:
      - Fail when a cluster that applies (delivery C(apply) or C(gitops)) has a plan that misses its SLOs on the
        given hardware and its site does not set C(accept_missed_slo=true); the message names the model, the SLO
        missed and the GPUs that would meet it (C(blueprints converge) exits 6).
      - V(false) (default) only says the misses in O(summary). The stages that apply stop on them anyway, before
        anything is applied, where they compute the intent (preflight, the serving apply, the GitOps tree); the
        playbooks that plan, verify, compare or remove (plan, verify, drift, teardown) are never stopped by them.
    type: bool
    default: false
notes:
  - The variables a site may set are listed in C(docs/contracts.md), section 1.
seealso:
  - module: inference.blueprints.render
  - module: inference.blueprints.plan
"""

EXAMPLES = r"""
- name: Validate the site, plan every model and compute the deployment intent (each cluster its own)
  inference.blueprints.site:

- name: Write the sizing report of every cluster of the play
  inference.blueprints.site:
    hosts: "{{ ansible_play_hosts }}"
    report: true
    set_facts: false
  run_once: true

- name: Print one cluster's plan
  ansible.builtin.debug:
    msg: "{{ ansible_facts.site_intents[inventory_hostname] | inference.blueprints.plan_summary }}"
"""

RETURN = r"""
ansible_facts:
  description: The facts set on the hosts.
  returned: success
  type: dict
  contains:
    site_intents:
      description: The deployment intent of every computed cluster host, by host name (C(docs/contracts.md), section 4).
      type: dict
hosts:
  description: The hosts whose intent was computed.
  returned: success
  type: list
  elements: str
deliveries:
  description: The delivery (apply, render or gitops) of every computed host.
  returned: success
  type: dict
summary:
  description: The plans of the computed hosts as readable lines, clusters with the same plans together.
  returned: success
  type: list
  elements: str
reports:
  description: Paths of the written sizing reports (C(report.md)).
  returned: with O(report)
  type: list
  elements: str
errors:
  description: Every problem with the input, as C({path, msg}).
  returned: failure
  type: list
  elements: dict
missed_slo:
  description:
    - The plans that stopped the run because they miss their SLOs, by host, each in words (model, SLO missed,
      GPUs that would meet it).
  returned: failure, when plans miss their SLOs and the site does not accept it
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def main():
    module = AnsibleModule(
        argument_spec={
            "hosts": {"type": "list", "elements": "str"},
            "blueprints_dir": {"type": "path"},
            "report": {"type": "bool", "default": False},
            "set_facts": {"type": "bool", "default": True},
            "stop_on_missed_slo": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    module.fail_json(msg="inference.blueprints.site runs on the controller through its action plugin")


if __name__ == "__main__":
    main()
