#!/usr/bin/python
# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: k8s_apply
short_description: Server-side apply a list of Kubernetes objects in one task, or render them to files
version_added: 0.1.0
description:
  - Applies every object of O(objects) (or of the multi-document YAML in O(definition)) in order,
    with Kubernetes server-side apply and B(strict) field validation, so that a misspelled or unknown
    field is an error from the API server instead of a field silently pruned.
  - One task applies a whole component, which keeps a converge close to the speed of
    C(kubectl apply --server-side) of the same objects.
  - Reports C(changed) only when a live object changed. In check mode every object is sent as a
    server-side dry run, so the API server still validates it and nothing is written.
  - With O(delivery=render) nothing is sent to any cluster; each object is written to its own YAML
    file under O(render_dir) (the seed of GitOps delivery).
  - With O(state=absent) the objects are deleted in reverse order and, by default, the task waits
    until they are gone.
author:
  - inference.blueprints contributors (@inference-blueprints)
extends_documentation_fragment:
  - inference.blueprints.k8s_auth
  - inference.blueprints.k8s_auth.ATTRIBUTES
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
options:
  objects:
    description:
      - The objects to apply, as a list of dictionaries, each with C(apiVersion), C(kind) and
        C(metadata.name). Applied in list order.
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
      - Seconds to wait for deletions.
    type: int
    default: 300
notes:
  - Objects of a kind the cluster does not serve fail with a message naming the kind and API version.
    With O(state=absent) they are treated as already absent.
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
  description: One entry per object, in the order handled.
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
      choices: [created, configured, unchanged, deleted, absent, rendered]
    validated:
      description:
        - V(false) when, in check mode, the object lives in a namespace the same run would create,
          so the API server could not dry-run it.
      type: bool
      returned: when false
    path:
      description: File written, with O(delivery=render).
      type: str
      returned: with O(delivery=render)
"""

import os  # noqa: E402
import time  # noqa: E402

from ansible.module_utils.basic import AnsibleModule, missing_required_lib  # noqa: E402
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_client as kc  # noqa: E402

try:
    import yaml

    HAS_YAML = True
except ImportError:  # pragma: no cover
    HAS_YAML = False


def _load_objects(module):
    objs = module.params["objects"]
    if module.params["definition"] is not None:
        objs = [d for d in yaml.safe_load_all(module.params["definition"]) if d]
    objs = objs or []
    for i, obj in enumerate(objs):
        missing = [k for k in ("apiVersion", "kind") if not obj.get(k)]
        if not (obj.get("metadata") or {}).get("name"):
            missing.append("metadata.name")
        if missing:
            module.fail_json(msg=f"object #{i} ({obj.get('kind', 'unknown kind')}) lacks {', '.join(missing)}")
    return objs


def _with_labels(obj, labels, namespace):
    if not labels and not namespace:
        return obj
    obj = dict(obj)
    meta = dict(obj.get("metadata") or {})
    if labels:
        meta["labels"] = {**labels, **(meta.get("labels") or {})}
    if namespace and not meta.get("namespace"):
        meta["_default_namespace"] = namespace
    obj["metadata"] = meta
    return obj


def _entry(obj, action, **extra):
    meta = obj.get("metadata", {})
    entry = {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "namespace": meta.get("namespace", ""),
        "name": meta["name"],
        "action": action,
    }
    entry.update(extra)
    return entry


def render_path(render_dir, obj):
    meta = obj["metadata"]
    group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else "core"
    folder = meta.get("namespace") or "_cluster"
    return os.path.join(render_dir, folder, f"{obj['kind'].lower()}.{group}-{meta['name']}.yaml")


def render(module, objs):
    render_dir = module.params["render_dir"]
    if not render_dir:
        module.fail_json(msg="delivery=render needs render_dir: the directory to write the objects to")
    results, diffs, changed = [], [], False
    for obj in objs:
        path = render_path(render_dir, obj)
        text = yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)
        old = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                old = fh.read()
        differs = old != text
        changed |= differs
        if differs and not module.check_mode:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        results.append(_entry(obj, "rendered" if differs else "unchanged", path=path))
        if differs:
            diffs.append({"before_header": path, "after_header": path, "before": old or "", "after": text})
    return results, diffs, changed


def _split_default_ns(obj, resource):
    meta = dict(obj["metadata"])
    default_ns = meta.pop("_default_namespace", None)
    obj = {**obj, "metadata": meta}
    if resource.namespaced and not meta.get("namespace"):
        if not default_ns:
            raise kc.ClientError(
                f"{kc.ref(obj)} is namespaced but has no metadata.namespace and no namespace was given"
            )
        meta["namespace"] = default_ns
    elif not resource.namespaced:
        meta.pop("namespace", None)
    return obj


def apply(module, client, objs):
    params = module.params
    dry_run = "All" if module.check_mode else None
    results, diffs, changed = [], [], False
    # In check mode a namespace this batch would create does not exist yet, so the server
    # cannot dry-run objects inside it: they are reported as to be created, unvalidated.
    pending_namespaces = set()
    for obj in objs:
        resource = kc.resource_for(client, obj["apiVersion"], obj["kind"])
        obj = _split_default_ns(obj, resource)
        meta = obj["metadata"]
        if module.check_mode and meta.get("namespace") in pending_namespaces:
            changed = True
            results.append(_entry(obj, "created", validated=False))
            if module._diff:
                diffs.append({"before_header": kc.ref(obj), "after_header": kc.ref(obj), "before": {}, "after": obj})
            continue
        before = kc.get_live(client, resource, meta["name"], meta.get("namespace"))
        if module.check_mode and before is None and obj["kind"] == "Namespace" and obj["apiVersion"] == "v1":
            pending_namespaces.add(meta["name"])
        try:
            after = client.server_side_apply(
                resource,
                body=obj,
                name=meta["name"],
                namespace=meta.get("namespace"),
                field_manager=params["field_manager"],
                force_conflicts=params["force_conflicts"],
                dry_run=dry_run,
                query_params=[("fieldValidation", "Strict")],
            ).to_dict()
        except kc.ApiException as exc:
            raise kc.ClientError(
                f"the API server refused {kc.ref(obj)}: {kc.api_error_message(exc)}", results=results
            ) from exc
        if before is None:
            action = "created"
        elif kc.normalize(before) != kc.normalize(after):
            action = "configured"
        else:
            action = "unchanged"
        if action != "unchanged":
            changed = True
            if module._diff:
                diffs.append(
                    {
                        "before_header": kc.ref(obj),
                        "after_header": kc.ref(obj),
                        "before": kc.normalize(before) or {},
                        "after": kc.normalize(after),
                    }
                )
        results.append(_entry(obj, action))
    return results, diffs, changed


def delete(module, client, objs):
    params = module.params
    dry_run = "All" if module.check_mode else None
    results, diffs, changed, pending = [], [], False, []
    for obj in reversed(objs):
        try:
            resource = kc.resource_for(client, obj["apiVersion"], obj["kind"])
        except kc.ClientError:
            results.append(_entry(obj, "absent"))
            continue
        obj = _split_default_ns(obj, resource)
        meta = obj["metadata"]
        try:
            resource.delete(
                name=meta["name"], namespace=meta.get("namespace"), dry_run=dry_run, propagation_policy="Background"
            )
        except kc.NotFoundError:
            results.append(_entry(obj, "absent"))
            continue
        except kc.ApiException as exc:
            raise kc.ClientError(f"cannot delete {kc.ref(obj)}: {kc.api_error_message(exc)}", results=results) from exc
        changed = True
        results.append(_entry(obj, "deleted"))
        if module._diff:
            diffs.append({"before_header": kc.ref(obj), "after_header": kc.ref(obj), "before": obj, "after": {}})
        pending.append((resource, obj))
    if params["wait_deleted"] and not module.check_mode:
        deadline = time.monotonic() + params["wait_timeout"]
        while pending:
            pending = [
                (r, o)
                for r, o in pending
                if kc.get_live(client, r, o["metadata"]["name"], o["metadata"].get("namespace")) is not None
            ]
            if not pending:
                break
            if time.monotonic() > deadline:
                names = ", ".join(kc.ref(pair[1]) for pair in pending)
                raise kc.ClientError(
                    f"timed out after {params['wait_timeout']} s waiting for deletion of: {names} "
                    "(still present; check their finalizers)",
                    results=results,
                )
            time.sleep(1)
    return results, diffs, changed


def main():
    argument_spec = dict(
        objects=dict(type="list", elements="dict"),
        definition=dict(type="str"),
        state=dict(type="str", choices=["present", "absent"], default="present"),
        delivery=dict(type="str", choices=["apply", "render"], default="apply"),
        render_dir=dict(type="path"),
        namespace=dict(type="str"),
        labels=dict(type="dict", default={}),
        field_manager=dict(type="str", default="inference-blueprints"),
        force_conflicts=dict(type="bool", default=True),
        wait_deleted=dict(type="bool", default=True),
        wait_timeout=dict(type="int", default=300),
    )
    argument_spec.update(kc.AUTH_ARG_SPEC)
    module = AnsibleModule(
        argument_spec=argument_spec,
        mutually_exclusive=[("objects", "definition")],
        supports_check_mode=True,
    )
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"))
    objs = [_with_labels(o, module.params["labels"], module.params["namespace"]) for o in _load_objects(module)]

    if module.params["delivery"] == "render":
        if module.params["state"] == "absent":
            module.exit_json(changed=False, objects=[], msg="delivery=render: nothing to delete")
        clean = []
        for o in objs:
            meta = dict(o["metadata"])
            ns = meta.pop("_default_namespace", None)
            if ns and not meta.get("namespace") and o["kind"] not in _CLUSTER_KINDS:
                meta["namespace"] = ns
            clean.append({**o, "metadata": meta})
        results, diffs, changed = render(module, clean)
        module.exit_json(changed=changed, objects=results, **({"diff": diffs} if module._diff else {}))

    if not kc.HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=str(kc.KUBERNETES_IMPORT_ERROR))
    try:
        client = kc.get_client(module.params)
        if module.params["state"] == "present":
            results, diffs, changed = apply(module, client, objs)
        else:
            results, diffs, changed = delete(module, client, objs)
    except kc.ClientError as exc:
        module.fail_json(msg=str(exc), objects=getattr(exc, "results", []))
    module.exit_json(changed=changed, objects=results, **({"diff": diffs} if module._diff else {}))


# Kinds that are cluster-scoped in every cluster we target; used only when rendering offline,
# where there is no discovery to ask.
_CLUSTER_KINDS = frozenset(
    {
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "ClusterPolicy",
        "NicClusterPolicy",
        "DataScienceCluster",
        "DSCInitialization",
        "GatewayClass",
        "PinnedImageSet",
        "MachineConfigPool",
        "MachineConfig",
        "ImageDigestMirrorSet",
        "ClusterVersion",
        "Infrastructure",
        "StorageClass",
        "PriorityClass",
        "NVIDIADriver",
        "HostDeviceNetwork",
        "MacvlanNetwork",
        "IPoIBNetwork",
    }
)


if __name__ == "__main__":
    main()
