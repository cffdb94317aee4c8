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
  - A test is a condition (C(status.conditions[type=X].status == "True")), a field value
    (C(status.state == ready)), or, with neither given, the built-in readiness of Deployment,
    StatefulSet and DaemonSet.
  - On timeout the task fails with one line per object still waiting, naming the object, the test
    and what it last saw (the field's value, or the condition's status, reason and message, or that
    the object does not exist).
  - In check mode it returns at once, since nothing it would wait for was created.
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
    description: What to wait for.
    type: list
    elements: dict
    required: true
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
  timeout:
    description: Seconds to wait for all objects together.
    type: int
    default: 600
  sleep:
    description: Seconds between polls.
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
"""

import time  # noqa: E402

from ansible.module_utils.basic import AnsibleModule, missing_required_lib  # noqa: E402
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_client as kc  # noqa: E402


def describe_test(spec):
    if spec.get("condition"):
        return f"condition {spec['condition']}={spec.get('status') or 'True'}"
    if spec.get("field"):
        want = spec.get("value")
        shown = " or ".join(repr(v) for v in want) if isinstance(want, list) else repr(want)
        return f"{spec['field']} == {shown}"
    return "built-in readiness of " + spec["kind"]


def builtin_ready(kind, obj):
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    if kind in ("Deployment", "StatefulSet"):
        want = spec.get("replicas", 1)
        have = status.get("availableReplicas" if kind == "Deployment" else "readyReplicas", 0) or 0
        current = status.get("observedGeneration", 0) >= obj["metadata"].get("generation", 0)
        return current and have >= want, f"{have}/{want} replicas ready"
    if kind == "DaemonSet":
        want = status.get("desiredNumberScheduled")
        have = status.get("numberReady", 0)
        return want is not None and have >= want, f"{have}/{want} pods ready"
    return True, "exists"


def evaluate(spec, obj):
    """Return (ready, what was seen) for one object."""
    if obj is None:
        return False, "the object does not exist"
    if spec.get("condition"):
        wanted = str(spec.get("status") or "True")
        conditions = kc.lookup(obj, "status.conditions") or []
        for cond in conditions:
            if cond.get("type") == spec["condition"]:
                seen = f"{cond['type']}={cond.get('status')}"
                if cond.get("reason"):
                    seen += f" reason={cond['reason']}"
                if cond.get("message"):
                    seen += f" message={cond['message']!r}"
                return str(cond.get("status")) == wanted, seen
        types = ", ".join(c.get("type", "?") for c in conditions) or "none"
        return False, f"no {spec['condition']} condition (conditions: {types})"
    if spec.get("field"):
        value = kc.lookup(obj, spec["field"])
        want = spec.get("value")
        ok = value in want if isinstance(want, list) else value == want
        return ok, f"{spec['field']}={value!r}"
    return builtin_ready(spec["kind"], obj)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            objects=dict(
                type="list",
                elements="dict",
                required=True,
                options=dict(
                    apiVersion=dict(type="str", required=True),
                    kind=dict(type="str", required=True),
                    name=dict(type="str", required=True),
                    namespace=dict(type="str"),
                    condition=dict(type="str"),
                    status=dict(type="str", default="True"),
                    field=dict(type="str"),
                    value=dict(type="raw"),
                ),
            ),
            timeout=dict(type="int", default=600),
            sleep=dict(type="float", default=2),
            **kc.AUTH_ARG_SPEC,
        ),
        supports_check_mode=True,
    )
    specs = module.params["objects"]
    if module.check_mode:
        module.exit_json(changed=False, elapsed=0.0, objects=[], msg="check mode: nothing to wait for")
    if not kc.HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=str(kc.KUBERNETES_IMPORT_ERROR))

    start = time.monotonic()
    deadline = start + module.params["timeout"]
    state = {}
    try:
        client = kc.get_client(module.params)
        resources = {}
        while True:
            for i, spec in enumerate(specs):
                if state.get(i, (False,))[0]:
                    continue
                key = (spec["apiVersion"], spec["kind"])
                if key not in resources:
                    try:
                        resources[key] = kc.resource_for(client, *key)
                    except kc.ClientError as exc:
                        state[i] = (False, str(exc))
                        continue
                obj = kc.get_live(client, resources[key], spec["name"], spec.get("namespace"))
                state[i] = evaluate(spec, obj)
            if all(state[i][0] for i in range(len(specs))):
                break
            if time.monotonic() >= deadline:
                lines = []
                for i, spec in enumerate(specs):
                    if not state[i][0]:
                        obj_ref = kc.ref(
                            {
                                "apiVersion": spec["apiVersion"],
                                "kind": spec["kind"],
                                "metadata": {"name": spec["name"], "namespace": spec.get("namespace")},
                            }
                        )
                        lines.append(f"{obj_ref}: waited for {describe_test(spec)}; last saw {state[i][1]}")
                module.fail_json(
                    msg=f"timed out after {module.params['timeout']} s: " + "; ".join(lines),
                    objects=_report(specs, state),
                    elapsed=round(time.monotonic() - start, 1),
                )
            time.sleep(module.params["sleep"])
    except kc.ClientError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, objects=_report(specs, state), elapsed=round(time.monotonic() - start, 1))


def _report(specs, state):
    out = []
    for i, spec in enumerate(specs):
        obj_ref = kc.ref(
            {
                "apiVersion": spec["apiVersion"],
                "kind": spec["kind"],
                "metadata": {"name": spec["name"], "namespace": spec.get("namespace")},
            }
        )
        ready, seen = state.get(i, (False, "not checked"))
        out.append({"ref": obj_ref, "ready": ready, "seen": seen})
    return out


if __name__ == "__main__":
    main()
