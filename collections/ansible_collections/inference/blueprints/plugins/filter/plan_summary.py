# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: plan_summary
short_description: A few readable lines per model of a cluster's deployment intent
version_added: 0.2.0
description:
  - Turns the deployment intent of one cluster (set by the P(inference.blueprints.site#module) action as
    C(site_intents[inventory_hostname])) into lines for the playbook output - per model the layout,
    the pools, the KV connector, speculative decoding, every planner decision with its reason, and
    the warnings.
author:
  - inference.blueprints contributors
positional: _input
options:
  _input:
    description: The deployment intent of one cluster.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Print the plan
  ansible.builtin.debug:
    msg: "{{ site_intents[inventory_hostname] | inference.blueprints.plan_summary }}"
"""

RETURN = r"""
_value:
  description: The lines.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.inference.blueprints.plugins.module_utils.intent import summary  # noqa: E402


def plan_summary(intent):
    if not isinstance(intent, dict) or "plans" not in intent:
        raise AnsibleFilterError("plan_summary: expected a deployment intent (site_intents[inventory_hostname])")
    return summary.lines(intent)


class FilterModule:
    def filters(self):
        return {"plan_summary": plan_summary}
