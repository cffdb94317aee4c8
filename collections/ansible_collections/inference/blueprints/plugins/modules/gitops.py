#!/usr/bin/python
# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gitops
short_description: Write the GitOps repository tree and Argo CD objects of clusters with delivery=gitops
version_added: 0.2.0
description:
  - For every host in O(hosts) whose deployment intent says C(delivery=gitops), writes the site's repository tree
    under its C(render_dir) - C(clusters/<cluster>/<NN>-<component>/) with one YAML file per object and a
    C(kustomization.yaml), C(clusters/<cluster>/apps/) with one Argo CD Application per component (sync waves in the
    blueprint's order, platform components first), and C(argocd/) with the AppProject, one app-of-apps
    Application per cluster and the health checks (Lua, from the same readiness waits the apply path uses) for the
    OpenShift GitOps Argo CD instance.
  - The objects are the ones the apply path renders (the same templates and intent); the tree holds no secret
    values, only references. Files change only when their content does, and files of objects no longer intended
    are removed, so a second run writes nothing.
  - The tree owns only the files it wrote, listed with their sha256 in C(.inference-blueprints-manifest) at the
    root of C(render_dir); a file it did not write (the user's own, in a repository clone) is never changed or
    removed. A path of the tree taken by such a file, or a file it wrote and the user edited since, fails the
    task naming the file, before anything is written.
  - Runs on the controller as an action plugin; computes the intents of hosts that carry none (a fleet in one task).
author:
  - inference.blueprints contributors (@inference-blueprints)
options:
  hosts:
    description: Cluster hosts to consider. Defaults to the current host.
    type: list
    elements: str
  write:
    description:
      - With V(false), write nothing and return in RV(objects) what each GitOps cluster's Applications deploy, with
        the tracking annotation Argo CD puts on them (C(argocd.argoproj.io/tracking-id)); C(playbooks/drift.yml)
        compares the live objects with them.
    type: bool
    default: true
  stages:
    description: With O(write=false), the stages whose components' objects are returned.
    type: list
    elements: str
    choices: [platform, serving]
    default: [serving]
seealso:
  - module: inference.blueprints.site
  - module: inference.blueprints.render
"""

EXAMPLES = r"""
- name: Write the GitOps tree of every cluster that delivers by GitOps
  inference.blueprints.gitops:
    hosts: "{{ ansible_play_hosts }}"
  run_once: true
"""

RETURN = r"""
files:
  description: Every file of the trees, with what happened to it (created, changed, unchanged, removed).
  returned: O(write=true)
  type: list
  elements: dict
file_changes:
  description: The files of RV(files) that were created, changed or removed.
  returned: O(write=true)
  type: list
  elements: dict
trees:
  description: The tree roots written (render_dir of each site).
  returned: O(write=true)
  type: list
  elements: str
objects:
  description: With O(write=false), per GitOps cluster the objects its Applications deploy, tracking annotation set.
  returned: O(write=false)
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def main():
    module = AnsibleModule(
        argument_spec={
            "hosts": {"type": "list", "elements": "str"},
            "write": {"type": "bool", "default": True},
            "stages": {"type": "list", "elements": "str", "choices": ["platform", "serving"], "default": ["serving"]},
        },
        supports_check_mode=True,
    )
    module.fail_json(msg="inference.blueprints.gitops runs on the controller through its action plugin")


if __name__ == "__main__":
    main()
