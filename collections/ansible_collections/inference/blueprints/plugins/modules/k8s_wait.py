#!/usr/bin/python
# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: k8s_wait
short_description: Wait until Kubernetes objects reach a state, and say what was seen when they do not
version_added: 0.1.0
description:
  - Polls every object in O(objects) until each one satisfies its own test, all against one deadline.
    The objects still waiting are read concurrently on every poll.
  - A test is a condition (C(status.conditions[type=X].status == "True")), a field value
    (C(status.state == ready)), or, with neither given, the built-in readiness of Deployment,
    StatefulSet and DaemonSet.
  - On timeout the task fails with one line per object still waiting, naming the object, the test
    and what it last saw (the field's value, or the condition's status, reason and message, or that
    the object does not exist).
  - While it waits for a workload (LLMInferenceService, Deployment, StatefulSet, DaemonSet, LeaderWorkerSet, Job)
    it reads the pods and the Warning events of its namespace every 5 seconds, and fails before the deadline,
    naming the pod (or the controller) and the reason, on a cause that waiting does not resolve - at once for an
    admission refusal of the pods (a C(FailedCreate) event whose message says forbidden, denied or exceeded quota)
    or an invalid image name; after a grace period (60 s, E(INFERENCE_BLUEPRINTS_WAIT_GRACE) seconds) for a pod
    the scheduler cannot place (C(PodScheduled=False) reason C(Unschedulable), with the scheduler's message), an
    image that does not pull, a crash loop, a container that cannot be created or a volume that does not mount.
    An event other than a refusal (a controller's C(FailedCreate) from a webhook that timed out, a volume that
    does not mount) counts only while it recurs; it fails the wait once the controller has recorded it again and
    again for the grace period, and stops counting when it was not recorded again for that long.
    A timeout message starts with the first such cause still there, else with the one of those that stopped
    recurring that was recorded last, and how long before the timeout. Run on the controller, it shows a progress
    line per workload (pods ready of those that exist, by phase, and the first cause) every 15 seconds.
  - In check mode it returns at once, since nothing it would wait for was created.
  - A kind the cluster does not serve yet (an operator still installing its CRDs) counts as not
    ready; discovery is refreshed for it at most every 10 seconds.
  - Runs on the controller (an action plugin of the same name, no module transfer) when the host's
    connection is C(local), sharing the client and the cached API discovery of
    M(inference.blueprints.k8s_apply); otherwise, or with E(INFERENCE_BLUEPRINTS_K8S_EXECUTION=module),
    as a module on the target.
author:
  - inference.blueprints contributors (@inference-blueprints)
extends_documentation_fragment:
  - inference.blueprints.k8s_auth
  - inference.blueprints.k8s_auth.ATTRIBUTES
attributes:
  check_mode:
    support: full
    details: Returns without waiting.
  diff_mode:
    support: none
options:
  objects:
    description: What to wait for (or O(from_intent)).
    type: list
    elements: dict
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
        description: Type of a C(status.conditions) entry that must have O(objects[].status).
        type: str
      status:
        description: Wanted status of O(objects[].condition).
        type: str
        default: "True"
      field:
        description: Dotted path of a field (for example C(status.state)) that must equal O(objects[].value).
        type: str
      value:
        description: Wanted value of O(objects[].field); a list means any of these values.
        type: raw
  from_intent:
    description:
      - Take the readiness waits from a stage of the host's deployment intent (the C(site_intents) fact, or
        computed from the inventory when no earlier task set it) instead of O(objects).
      - Waits for everything the stage's objects are waited for when applied, all at once.
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
  timeout:
    description: Seconds to wait for all objects together.
    type: int
    default: 600
  sleep:
    description:
      - Longest pause between polls, in seconds. The first polls come sooner (0.25 s, doubling up
        to this), so objects that are ready at once are seen at once.
    type: float
    default: 2
seealso:
  - module: inference.blueprints.k8s_apply
"""

EXAMPLES = r"""
- name: Wait for the GPU operator to report ready
  inference.blueprints.k8s_wait:
    objects:
      - apiVersion: nvidia.com/v1
        kind: ClusterPolicy
        name: gpu-cluster-policy
        field: status.state
        value: ready
    timeout: 900

- name: Wait for the model service
  inference.blueprints.k8s_wait:
    objects:
      - apiVersion: serving.kserve.io/v1alpha2
        kind: LLMInferenceService
        namespace: llm
        name: qwen-chat
        condition: Ready
"""

RETURN = r"""
objects:
  description: The final state seen for each object.
  returned: always
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
elapsed:
  description: Seconds waited.
  returned: always
  type: float
causes:
  description: What the pods behind the workloads still waiting showed last (pod or controller, reason, message).
  returned: when the wait failed
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.inference.blueprints.plugins.module_utils.k8s_wait import (  # noqa: E402
    ARGUMENT_SPEC,
    MUTUALLY_EXCLUSIVE,
    REQUIRED_ONE_OF,
    run,
)


def main():
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        required_one_of=REQUIRED_ONE_OF,
        mutually_exclusive=MUTUALLY_EXCLUSIVE,
        supports_check_mode=True,
    )
    result = run(module.params, check_mode=module.check_mode)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
