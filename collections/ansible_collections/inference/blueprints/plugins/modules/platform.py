#!/usr/bin/python
# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: platform
short_description: Bind the deployment intent to a cluster read and render the platform stage, phase by phase
version_added: 0.2.0
description:
  - With O(bind), recomputes the platform part of the cluster's deployment intent (C(intent.platform),
    module_utils/intent/platform.py) for what P(inference.blueprints.cluster_facts#module) read, that is the API
    versions and CRD schemas the cluster serves, the catalog's default channels and the CSVs to wait for, the
    topology and the cluster monitoring configuration. The bound intent replaces this host's entry of
    C(ansible_facts.site_intents), so every later task renders for that cluster.
  - With O(phase), renders the platform stage from the intent through the shape-only templates of the platform roles
    and returns the objects and the readiness waits of that phase. Phase V(operators) holds every selected
    component's Namespace, OperatorGroup and Subscription (C(roles/olm_operator/templates/objects.yml.j2)); phase
    V(operands) the custom resources of those operators (C(roles/<component>/templates/objects.yml.j2)); V(all)
    both. An operand whose API the bound cluster does not serve (after its operator is installed, or in check mode)
    is left out and listed in RV(dropped) with the reason.
  - With O(state=absent) the objects of a removal, without waits; the operator phase then lists the installed CSVs
    and leaves out operators whose Subscription the collection did not create.
  - For clusters whose delivery is C(render) or C(gitops), O(write) writes one YAML file per object under
    C(<render_dir>/<cluster>/). Nothing is sent to any cluster.
  - Runs on the controller as an action plugin.
author:
  - inference.blueprints contributors (@inference-blueprints)
options:
  bind:
    description:
      - Cluster facts (the C(cluster_facts) result of P(inference.blueprints.cluster_facts#module)) to bind this host's
        intent to.
    type: dict
  operators_ready:
    description:
      - With O(bind), the operators of every component are installed (the flow's first phase saw every CSV succeed),
        so operands whose API the cluster still does not serve are left out, with the reason, instead of failing the
        apply.
    type: bool
    default: false
  phase:
    description: The phase to render.
    type: str
    choices: [operators, operands, all]
  state:
    description: V(absent) renders the objects of a removal (no waits).
    type: str
    choices: [present, absent]
    default: present
  components:
    description: Render these platform components (role names) instead of the site's whole platform stage.
    type: list
    elements: str
  hosts:
    description: Cluster hosts to render. Defaults to the current host.
    type: list
    elements: str
  deliveries:
    description: Only render hosts whose intent's delivery is one of these.
    type: list
    elements: str
    choices: [apply, render, gitops]
  write:
    description: Write the objects of C(render)/C(gitops) clusters to their render directory.
    type: bool
    default: false
  check_inventory:
    description:
      - Before rendering, check every selected cluster's requirements (C(intent.platform.requirements)) against
        what its inventory says the hardware is, as preflight does for a cluster it cannot read, and fail listing
        every gap of every cluster without writing anything. For a fleet that renders, this is its preflight in
        one task.
    type: bool
    default: false
seealso:
  - module: inference.blueprints.site
  - module: inference.blueprints.cluster_facts
  - module: inference.blueprints.k8s_apply
  - module: inference.blueprints.k8s_wait
"""

EXAMPLES = r"""
- name: Read the cluster
  inference.blueprints.cluster_facts:
    requirements: "{{ ansible_facts.site_intents[inventory_hostname].platform.requirements }}"
  register: facts

- name: Bind the intent to it
  inference.blueprints.platform:
    bind: "{{ facts.cluster_facts }}"

- name: The operators of every platform component
  inference.blueprints.platform:
    phase: operators
  register: operators

- name: Apply them in one call, then wait for every Subscription and CSV at once
  inference.blueprints.k8s_apply:
    objects: "{{ operators.objects }}"
    wait_for: "{{ operators.waits }}"
    wait_timeout: "{{ operators.wait_timeout }}"
"""

RETURN = r"""
objects:
  description: The current host's objects of the phase, in render order.
  returned: with O(phase)
  type: list
  elements: dict
waits:
  description: The current host's readiness waits of the phase, as P(inference.blueprints.k8s_wait#module) object specs.
  returned: with O(phase)
  type: list
  elements: dict
wait_timeout:
  description: Seconds the longest of those waits may take (each component's C(<component>_timeout)).
  returned: with O(phase)
  type: int
dropped:
  description: Operands left out because the cluster does not serve their API (component, apiVersion, kind, name, why).
  returned: with O(phase)
  type: list
  elements: dict
ownership:
  description:
    - The site's ownership policy for P(inference.blueprints.k8s_apply#module)'s
      O(inference.blueprints.k8s_apply#module:ownership); for a removal its C(derived) lists the CSVs OLM installed
      for the site's Subscriptions, deleted with them.
  returned: with O(phase) for the current host
  type: dict
operators_pending:
  description: Components whose operators the bound cluster read did not see installed.
  returned: with O(phase)
  type: list
  elements: str
notes:
  description: What the intent says the operator should know (for example a secondary network left out).
  returned: with O(phase)
  type: list
  elements: str
platform:
  description:
    - With O(bind), a summary of the bound platform (components, rdma, source, operators_pending, decisions, notes).
  returned: with O(bind)
  type: dict
files:
  description: Files written (render and gitops delivery).
  returned: with O(phase)
  type: list
  elements: str
file_changes:
  description: The files created, changed or removed (C(path), C(action)); C(.inference-blueprints-manifest) lists
    the files the render owns.
  returned: with O(phase)
  type: list
  elements: dict
hosts:
  description: The hosts rendered.
  returned: with O(phase)
  type: list
  elements: str
counts:
  description: Objects per rendered host.
  returned: with O(phase)
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def main():
    module = AnsibleModule(
        argument_spec={
            "bind": {"type": "dict"},
            "operators_ready": {"type": "bool", "default": False},
            "phase": {"type": "str", "choices": ["operators", "operands", "all"]},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "components": {"type": "list", "elements": "str"},
            "hosts": {"type": "list", "elements": "str"},
            "deliveries": {"type": "list", "elements": "str", "choices": ["apply", "render", "gitops"]},
            "write": {"type": "bool", "default": False},
            "check_inventory": {"type": "bool", "default": False},
        },
        required_one_of=[["bind", "phase"]],
        supports_check_mode=True,
    )
    module.fail_json(msg="inference.blueprints.platform runs on the controller through its action plugin")


if __name__ == "__main__":
    main()
