#!/usr/bin/python
# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: k8s_apply
short_description: Server-side apply many Kubernetes objects in one task, or render them to files
version_added: 0.1.0
description:
  - Applies every object of O(objects) (or of the multi-document YAML in O(definition)) with
    Kubernetes server-side apply and B(strict) field validation, so that a misspelled or unknown
    field is an error from the API server instead of a field silently pruned.
  - One task applies a whole component or stage, objects of many kinds and namespaces together.
    They are applied in a safe order, whatever their order in the list - Namespaces, then
    CustomResourceDefinitions (waited for until Established, so custom resources of the same
    task can follow), then ServiceAccounts, Secrets, ConfigMaps, Roles and the like, then role
    bindings, then every other kind in order of first appearance, and webhook registrations
    last. Objects of one step are sent concurrently.
  - Reports C(changed) only when a live object changed. An object whose live copy already holds
    every desired value, with exactly the desired fields owned by O(field_manager), is reported
    V(unchanged) without any write request, so a no-op re-run only reads. Other objects are
    applied and compared with what they were.
  - In check mode every object that would change is sent as a server-side dry run, so the API
    server still validates it and nothing is written.
  - With O(delivery=render) nothing is sent to any cluster; each object is written to its own YAML
    file under O(render_dir) (the seed of GitOps delivery).
  - With O(state=absent) the objects are deleted in the reverse order and, by default, the task
    waits until they are all gone.
  - With an ownership policy a removal deletes only what the site created, and nothing that is not the site's goes
    with it. Before deleting a Namespace the site created it lists every namespaced kind the API serves there; when
    anything is neither the site's, nor made by a controller from the site's objects, nor made by the control plane
    in every namespace (the C(kube-root-ca.crt) ConfigMap, the C(default) ServiceAccount, events, leases), the
    Namespace is kept (V(kept), its RV(objects[].reason) naming those objects, and a warning). An object whose
    dependents include such an object is deleted with C(propagationPolicy=Orphan) and what its controller made from
    it is deleted on its own (RV(objects[].kept_dependents)).
  - Runs on the controller (an action plugin of the same name, no module transfer) when the host's
    connection is C(local), with one client per connection and API discovery cached across tasks
    (see notes); otherwise, or with E(INFERENCE_BLUEPRINTS_K8S_EXECUTION=module), as a module on
    the target.
author:
  - inference.blueprints contributors (@inference-blueprints)
extends_documentation_fragment:
  - inference.blueprints.k8s_auth
  - inference.blueprints.k8s_auth.ATTRIBUTES
  - inference.blueprints.ownership
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
options:
  objects:
    description:
      - The objects to apply, as a list of dictionaries, each with C(apiVersion), C(kind) and
        C(metadata.name). Applied in the order described above; objects of one kind keep their
        list order in the result.
      - Mutually exclusive with O(definition).
    type: list
    elements: dict
  definition:
    description:
      - The objects as a (multi-document) YAML string. Empty documents are ignored.
    type: str
  state:
    description:
      - V(present) applies the objects, V(absent) deletes them (in reverse order).
    type: str
    choices: [present, absent]
    default: present
  delivery:
    description:
      - V(apply) talks to the cluster. V(render) writes one YAML file per object under O(render_dir)
        and touches no cluster.
    type: str
    choices: [apply, render]
    default: apply
  render_dir:
    description:
      - Directory for O(delivery=render). Files are named
        C(<namespace or _cluster>/<kind>.<group>-<name>.yaml).
    type: path
  namespace:
    description:
      - Namespace for namespaced objects that do not set C(metadata.namespace).
    type: str
  labels:
    description:
      - Labels merged into every object's C(metadata.labels) (for example ownership labels that a
        teardown selects on). Labels set on an object win.
    type: dict
    default: {}
  field_manager:
    description:
      - The server-side apply field manager.
    type: str
    default: inference-blueprints
  force_conflicts:
    description:
      - Take ownership of fields that another field manager set.
    type: bool
    default: true
  wait_deleted:
    description:
      - With O(state=absent), wait until every object is gone.
    type: bool
    default: true
  wait_timeout:
    description:
      - Seconds to wait for deletions, for new CustomResourceDefinitions to be Established, and for
        O(wait_for) (all its objects together).
    type: int
    default: 300
  references:
    description:
      - Objects the applied objects name but that this collection does not create (for example the Secrets of the
        AI grid's tenant keys, created out of band). After a successful apply each is read; one that does not exist,
        or cannot be read, is a warning saying what it is for. Nothing is written.
    type: list
    elements: dict
    default: []
    suboptions:
      apiVersion:
        description: API version of the referenced object.
        type: str
        required: true
      kind:
        description: Kind of the referenced object.
        type: str
        required: true
      namespace:
        description: Its namespace (namespaced kinds).
        type: str
      name:
        description: Its name.
        type: str
        required: true
      why:
        description: What it is for, said in the warning.
        type: str
        default: named by the applied objects
  claim_objects:
    description:
      - Objects a later task of the same stage applies (the platform's operands), checked against O(ownership) with
        this task's objects, so that an object the site may not take over stops the stage before anything is written.
        Kinds the cluster does not serve yet are skipped (no object of them can exist). Nothing else is done with them.
    type: list
    elements: dict
    default: []
  from_intent:
    description:
      - Take the objects and readiness waits from a stage of the host's deployment intent (the C(site_intents) fact, or
        computed from the inventory when no earlier task set it) instead of O(objects), O(definition) and O(wait_for).
      - C(serving) renders the serving components' objects and applies them in one call, then waits
        for all of them at once (as O(wait_for)).
      - C(platform) runs the platform's two phases in this one task. Every operator in one apply and
        one wait; when operators were installed, one new read of the cluster and the intent bound to
        the APIs they serve (set as the host's fact); every operand in one apply and one wait. In
        check mode both phases go in one dry run. The result adds RV(phases), RV(notes) and
        RV(dropped).
      - Resolved by the action plugin on the controller, where the intent is; the module alone
        refuses it.
    type: dict
    suboptions:
      stage:
        description: The stage whose objects to take.
        type: str
        required: true
        choices: [platform, serving]
      components:
        description: Only these components of the stage (default, every component the intent lists for it).
        type: list
        elements: str
  record:
    description:
      - The record of what a stage applied (a ConfigMap of the site, C(inference-blueprints-applied-<site>-<stage>) in
        O(record.namespace)), used only with an ownership policy. With O(state=present) the objects are the whole
        stage, so every object the record names that they no longer hold is pruned (deleted when its live copy carries
        the site's C(created-by) annotation, kept and named otherwise; listed as V(pruned); in check mode listed and
        not deleted), then the objects are recorded. With O(state=absent) what the record names is removed too, and
        the record last.
    type: dict
    suboptions:
      stage:
        description: The stage (one record per site, stage and cluster).
        type: str
        required: true
      namespace:
        description: The namespace the record lives in (the stage's namespace).
        type: str
        required: true
  wait_for:
    description:
      - Readiness tests checked after a successful apply, all at once and on the task's own
        connection, the way M(inference.blueprints.k8s_wait) checks its O(inference.blueprints.k8s_wait#module:objects).
        So one task applies a stage's objects and waits for them. Skipped in check mode and with
        O(state=absent) or O(delivery=render).
      - On timeout the task fails with a message naming every object still waiting, the test and
        what it last saw; RV(objects) still lists what was applied.
    type: list
    elements: dict
    default: []
    suboptions:
      apiVersion:
        description: API version of the object.
        type: str
        required: true
      kind:
        description: Kind of the object.
        type: str
        required: true
      name:
        description: Name of the object.
        type: str
        required: true
      namespace:
        description: Namespace, for namespaced kinds.
        type: str
      condition:
        description: Type of a C(status.conditions) entry that must have O(wait_for[].status).
        type: str
      status:
        description: Wanted status of O(wait_for[].condition).
        type: str
        default: "True"
      field:
        description: Dotted path of a field (for example C(status.state)) that must equal O(wait_for[].value).
        type: str
      value:
        description: Wanted value of O(wait_for[].field); a list means any of these values.
        type: raw
notes:
  - Objects of a kind the cluster does not serve fail, before anything is written, with a message
    naming the kind, the API version and what the API group serves. With O(state=absent) they are
    treated as already absent.
  - API errors are reported per object - a field manager conflict names the fields and owners, a
    403 names the verb, resource and namespace that were refused, an admission webhook or policy
    denial quotes its reason. Throttled requests (HTTP 429) are retried, honouring Retry-After.
  - API discovery is cached in C(<cache>/discovery/<server>/<identity hash>.json), where C(<cache>) is
    E(INFERENCE_BLUEPRINTS_CACHE_DIR), else C(${XDG_CACHE_HOME:-~/.cache}/inference-blueprints). It is
    trusted for E(INFERENCE_BLUEPRINTS_DISCOVERY_TTL) seconds (default 21600, as kubectl), and
    refreshed once when a kind is not found in it.
seealso:
  - module: inference.blueprints.k8s_wait
  - module: kubernetes.core.k8s
"""

EXAMPLES = r"""
- name: Apply the GPU operator objects
  inference.blueprints.k8s_apply:
    objects: "{{ lookup('ansible.builtin.template', 'objects.yml.j2') | ansible.builtin.from_yaml_all | list }}"
    labels:
      app.kubernetes.io/managed-by: inference-blueprints

- name: Render the same objects for review or GitOps
  inference.blueprints.k8s_apply:
    definition: "{{ lookup('ansible.builtin.template', 'objects.yml.j2') }}"
    delivery: render
    render_dir: ./render/cluster-a

- name: Remove them again
  inference.blueprints.k8s_apply:
    definition: "{{ lookup('ansible.builtin.template', 'objects.yml.j2') }}"
    state: absent
"""

RETURN = r"""
objects:
  description: One entry per object, in the order handled (apply order; reversed for O(state=absent)).
  returned: always
  type: list
  elements: dict
  contains:
    apiVersion:
      description: API version of the object.
      type: str
    kind:
      description: Kind of the object.
      type: str
    namespace:
      description: Namespace, empty for cluster-scoped objects.
      type: str
    name:
      description: Name of the object.
      type: str
    action:
      description: What happened.
      type: str
      sample: created
      choices: [created, configured, unchanged, deleted, absent, kept, released, rendered, pruned]
    reason:
      description:
        - Why a removal kept the object (V(kept)) - adopted by the site, not created by it, or a Namespace the site
          created that holds objects that are not the site's (named); or why an object not in O(objects) was deleted;
          or why a shared platform object was handed back to the other sites that claim it (V(released)).
      type: str
      returned: when the action is V(kept) or V(released), and for an object deleted with orphaning
    kept_dependents:
      description: Objects that name this deleted object as owner and are not the site's, kept (orphaned).
      type: list
      elements: str
      returned: when a deleted object had such dependents
    validated:
      description:
        - V(false) when, in check mode, the object lives in a namespace the same run would create,
          or is of a kind a CustomResourceDefinition of the same task defines, so the API server
          could not dry-run it.
      type: bool
      returned: when false
    path:
      description: File written, with O(delivery=render).
      type: str
      returned: with O(delivery=render)
waited:
  description: The final state seen for each O(wait_for) object.
  returned: when O(wait_for) was checked
  type: list
  elements: dict
  contains:
    ref:
      description: Kind, namespace/name and API version.
      type: str
    ready:
      description: Whether the object met its test.
      type: bool
    seen:
      description: What was last seen.
      type: str
wait_elapsed:
  description: Seconds spent checking O(wait_for) (with O(from_intent), every step's waits).
  returned: when O(wait_for) was checked
  type: float
phases:
  description:
    - With O(from_intent), what each step did, by name (C(preflight), C(operators), C(reread),
      C(operands)); a step that did not run is absent.
  returned: with O(from_intent)
  type: dict
notes:
  description: With O(from_intent.stage=platform), what the deployment intent notes for this cluster.
  returned: with O(from_intent.stage=platform)
  type: list
  elements: str
dropped:
  description:
    - With O(from_intent.stage=platform), the operands not applied because the cluster does not serve
      their API (after their operators were installed), each with C(kind), C(name), C(namespace),
      C(why) and C(message).
  returned: with O(from_intent.stage=platform)
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.inference.blueprints.plugins.module_utils.k8s_apply import (  # noqa: E402
    ARGUMENT_SPEC,
    MUTUALLY_EXCLUSIVE,
    run,
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, mutually_exclusive=MUTUALLY_EXCLUSIVE, supports_check_mode=True)
    result = run(module.params, check_mode=module.check_mode, diff=module._diff)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
