#!/usr/bin/python
# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: access
short_description: The least-privilege RBAC of each stage, derived from the deployment intent
version_added: 0.3.0
description:
  - Computes the ClusterRole and Roles each stage of the site needs on this cluster from what the stage
    renders, waits for, reads and removes (C(module_utils/intent/access.py); docs/reliability.md, "Least privilege").
  - C(platform) is one ClusterRole, bound cluster-wide; every rule names its objects, except C(get) and C(delete)
    on the ClusterServiceVersions OLM names at install time, and the cluster read's lists.
  - C(serving) is a Role in the serving namespace and a small ClusterRole for the stage's cluster-scoped objects.
  - With O(subject), adds a binding of every role to it. With O(dest), writes every object as a YAML file.
  - Sends nothing to a cluster; P(inference.blueprints.k8s_apply#module) applies the returned RV(objects)
    (C(playbooks/access.yml) does, with C(access_apply=true)).
  - Runs on the controller as an action plugin.
author:
  - inference.blueprints contributors (@inference-blueprints)
options:
  stages:
    description: The stages to grant.
    type: list
    elements: str
    choices: [platform, serving]
    default: [platform, serving]
  subject:
    description: Who to bind the roles to.
    type: dict
    suboptions:
      kind:
        description: The subject kind.
        type: str
        required: true
        choices: [ServiceAccount, User, Group]
      name:
        description: The subject's name.
        type: str
        required: true
      namespace:
        description: The ServiceAccount's namespace (required for a ServiceAccount).
        type: str
  dest:
    description: Write every object (Namespaces the Roles live in, roles, bindings) under this directory.
    type: path
seealso:
  - module: inference.blueprints.k8s_apply
"""

EXAMPLES = r"""
- name: The roles of every stage, bound to the deployer ServiceAccount
  inference.blueprints.access:
    subject:
      kind: ServiceAccount
      name: deployer
      namespace: ci
  register: access

- name: Apply them (as a cluster administrator)
  inference.blueprints.k8s_apply:
    objects: "{{ access.objects }}"
"""

RETURN = r"""
roles:
  description: The ClusterRole and Role objects per stage.
  returned: success
  type: dict
bindings:
  description: A binding of each role to O(subject) (empty without it).
  returned: success
  type: list
  elements: dict
namespaces:
  description: The Namespace objects the Roles live in (the stage's own, created first).
  returned: success
  type: list
  elements: dict
objects:
  description: Namespaces, roles and bindings, in apply order.
  returned: success
  type: list
  elements: dict
summary:
  description: One line per role, naming what it may do.
  returned: success
  type: list
  elements: str
files:
  description: Files written under O(dest).
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.inference.blueprints.plugins.module_utils.intent.access import ARGUMENT_SPEC  # noqa: E402


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(msg="inference.blueprints.access runs on the controller through its action plugin")


if __name__ == "__main__":
    main()
