#!/usr/bin/python
# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: render
short_description: Render a stage's or components' Kubernetes objects from the deployment intent
version_added: 0.2.0
description:
  - Renders the shape-only templates (C(roles/<component>/templates/objects.yml.j2)) of a stage's components,
    or of the given components, from the deployment intent the P(inference.blueprints.site#module) action set
    (C(ansible_facts.site_intents)), and returns the objects and the readiness waits the intent holds for them.
  - For clusters whose intent says C(delivery=render) or C(delivery=gitops), writes one YAML file per object
    under C(<render_dir>/<cluster>/) (O(write)); nothing is sent to any cluster. The directory's
    C(.inference-blueprints-manifest) lists the files the render wrote; only those are changed, and removed when
    a whole stage no longer renders them; a file it did not write, or one it wrote that was edited since, fails
    the task, naming it, before anything is written.
  - With O(hosts) it renders many clusters in one task (a fleet renders in one call).
  - Runs on the controller as an action plugin.
author:
  - inference.blueprints contributors (@inference-blueprints)
options:
  stage:
    description: Render every component of this stage of the blueprint.
    type: str
    choices: [platform, serving]
  components:
    description: Render these components (role names) instead of a whole stage.
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
    default: true
seealso:
  - module: inference.blueprints.site
  - module: inference.blueprints.k8s_apply
  - module: inference.blueprints.k8s_wait
"""

EXAMPLES = r"""
- name: Render the serving objects of this cluster
  inference.blueprints.render:
    stage: serving
    write: false
  register: serving

- name: Apply them in one call
  inference.blueprints.k8s_apply:
    objects: "{{ serving.objects }}"

- name: Wait for everything the intent waits for
  inference.blueprints.k8s_wait:
    objects: "{{ serving.waits }}"
    timeout: "{{ serving.wait_timeout }}"
"""

RETURN = r"""
objects:
  description: The current host's objects, in render order.
  returned: success
  type: list
  elements: dict
waits:
  description: The current host's readiness waits, as P(inference.blueprints.k8s_wait#module) object specs.
  returned: success
  type: list
  elements: dict
wait_timeout:
  description: Seconds the longest of those waits may take.
  returned: success
  type: int
files:
  description: Files written (render and gitops delivery).
  returned: success
  type: list
  elements: str
file_changes:
  description: The files created, changed or removed (C(path), C(action)); C(.inference-blueprints-manifest) lists
    the files the render owns.
  returned: success
  type: list
  elements: dict
hosts:
  description: The hosts rendered.
  returned: success
  type: list
  elements: str
counts:
  description: Objects per rendered host.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def main():
    module = AnsibleModule(
        argument_spec={
            "stage": {"type": "str", "choices": ["platform", "serving"]},
            "components": {"type": "list", "elements": "str"},
            "hosts": {"type": "list", "elements": "str"},
            "deliveries": {"type": "list", "elements": "str", "choices": ["apply", "render", "gitops"]},
            "write": {"type": "bool", "default": True},
        },
        required_one_of=[["stage", "components"]],
        mutually_exclusive=[["stage", "components"]],
        supports_check_mode=True,
    )
    module.fail_json(msg="inference.blueprints.render runs on the controller through its action plugin")


if __name__ == "__main__":
    main()
