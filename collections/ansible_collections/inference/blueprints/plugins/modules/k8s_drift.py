#!/usr/bin/python
# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: k8s_drift
short_description: Report every out-of-band change to objects the collection manages
version_added: 0.2.0
description:
  - Compares each object in O(objects) (as rendered from the deployment intent) with the live one and
    reports every difference - the object is missing; a field we set holds
    another value (the field, the live and the intended value, and the managers that own it now, from the
    live object's managedFields); a label or annotation someone else added to our object (the platform's and
    controllers' own domains excepted).
  - A server-side apply dry run with O(field_manager) and no force names every field another field manager
    took over (the HTTP 409 conflict causes).
  - Changes nothing unless O(remove_foreign); the C(playbooks/drift.yml) playbook fails when drift is found,
    and with C(-e drift_fix=true) re-applies the intent and removes what others added.
  - Runs on the controller (an action plugin of the same name) when the host's connection is C(local);
    otherwise, or with E(INFERENCE_BLUEPRINTS_K8S_EXECUTION=module), as a module on the target.
author:
  - inference.blueprints contributors (@inference-blueprints)
extends_documentation_fragment:
  - inference.blueprints.k8s_auth
  - inference.blueprints.k8s_auth.ATTRIBUTES
  - inference.blueprints.ownership
attributes:
  check_mode:
    support: full
    details: It never writes; O(remove_foreign) removes nothing in check mode.
  diff_mode:
    support: none
options:
  objects:
    description: The objects as intended (every field they set is compared).
    type: list
    elements: dict
    required: true
  field_manager:
    description: The field manager the collection applies with.
    type: str
    default: inference-blueprints
  remove_foreign:
    description:
      - Remove the fields and the labels or annotations other managers added to our objects (a JSON patch per
        object). Fields we set are taken back by applying the intent (M(inference.blueprints.k8s_apply)), not here.
      - With an O(ownership) policy, an adopted object's own labels and fields are not drift and are never
        removed; an object that exists but was not created by the site is reported as drift of C((ownership)).
    type: bool
    default: false
  record:
    description:
      - The record of what the stage applied
        (O(inference.blueprints.k8s_apply#module:record) of M(inference.blueprints.k8s_apply)).
        Every object it names that O(objects) no longer hold, still on the cluster and carrying the site's
        C(created-by) annotation, is drift of C((the object)) (live V(present)); the next converge prunes it.
        Needs an O(ownership) policy.
    type: dict
    suboptions:
      stage:
        description: The stage.
        type: str
        required: true
      namespace:
        description: The namespace the record lives in.
        type: str
        required: true
"""

EXAMPLES = r"""
- name: Render what the serving stage intends
  inference.blueprints.render:
    stage: serving
    write: false
  register: intended

- name: Report every out-of-band change
  inference.blueprints.k8s_drift:
    objects: "{{ intended.objects }}"
  register: drift
"""

RETURN = r"""
drift:
  description: One entry per difference.
  returned: success
  type: list
  elements: dict
  contains:
    object:
      description: The object (kind, namespace/name, apiVersion).
      type: str
    field:
      description: The field path; list items by name (C(env[name=VLLM_ADDITIONAL_ARGS])) or index.
      type: str
    live:
      description: The live value (C(absent) for a deleted object, null for a missing field).
      type: raw
    intended:
      description: The intended value (null for a label or annotation we did not set).
      type: raw
    owners:
      description: Field managers that own the field now (besides ours).
      type: list
      elements: str
      returned: when another manager owns it
removed:
  description: Fields, labels and annotations removed (O(remove_foreign)).
  returned: always
  type: int
msg:
  description: The differences in one line, or C(no drift).
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.inference.blueprints.plugins.module_utils.k8s_drift import ARGUMENT_SPEC, run  # noqa: E402


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    result = run(module.params, check_mode=module.check_mode)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
