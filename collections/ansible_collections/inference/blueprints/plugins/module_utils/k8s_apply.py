# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine of inference.blueprints.k8s_apply (action plugin and module share it).

``run(params, check_mode, diff, env)`` returns the task result. For ``state=present``:

1. every object's kind is resolved through the cached discovery (kinds a CRD of the same
   batch defines wait for that CRD); every problem is reported before anything is written;
2. the live objects are read concurrently;
3. an object whose live copy already holds every desired value, and whose fields owned by
   our field manager are exactly the desired ones, is ``unchanged`` with no write
   (:func:`unchanged_without_write`); only the others are sent, as server-side apply with
   strict field validation (a server dry run in check mode);
4. writes go in waves (:func:`waves`): Namespaces, then CRDs (waited for until
   Established), then ServiceAccounts/Secrets/ConfigMaps/Roles..., then role bindings, then
   every other kind in order of first appearance, webhook configurations last; the objects
   of one wave are sent concurrently. Results come back in wave order, deterministic.

``state=absent`` deletes in the reverse wave order, then waits for all objects together.
"""

from __future__ import annotations

import base64
import json
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.inference.blueprints.plugins.module_utils import (
    applied_record,
    claims,
    k8s_wait,
    kind_scope,
    ownership,
    removal_guard,
)
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_client as kc
from ansible_collections.inference.blueprints.plugins.module_utils import render_tree as render_tree_mod
from ansible_collections.inference.blueprints.plugins.module_utils.cluster_facts import quantity

try:
    import yaml

    HAS_YAML = True
except ImportError:  # pragma: no cover
    HAS_YAML = False

ARGUMENT_SPEC = dict(
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
    # what this site created (module_utils/ownership.py): objects found without its annotation stop an apply
    # unless adopted, and a removal deletes only what carries it. Empty: every object is ours to apply and delete.
    # objects the applied ones name but nobody here creates (tenant key Secrets): a missing one is a warning
    references=dict(
        type="list",
        elements="dict",
        default=[],
        options=dict(
            apiVersion=dict(type="str", required=True),
            kind=dict(type="str", required=True),
            namespace=dict(type="str"),
            name=dict(type="str", required=True),
            why=dict(type="str", default="named by the applied objects"),
        ),
    ),
    # objects a later apply of the same stage writes (the platform's operands): checked for ownership with these,
    # so that an object the site may not take over stops the stage before its first write
    claim_objects=dict(type="list", elements="dict", default=[]),
    ownership=dict(
        type="dict",
        default={},
        options=dict(
            annotation=dict(type="str", default=ownership.ANNOTATION),
            value=dict(type="str"),
            adopt=dict(type="list", elements="str", default=[]),
            derived=dict(type="list", elements="str", default=[]),
            # platform objects several sites share, each site's claim recorded on them (module_utils/claims.py)
            shared=dict(type="list", elements="dict", default=[]),
        ),
    ),
    # the stage's record of what it applied (module_utils/applied_record.py): a full apply of the stage prunes what
    # the record names and the objects no longer hold, then records them; a removal deletes what it names too
    record=dict(applied_record.ARGUMENT_SPEC),
    wait_timeout=dict(type="int", default=300),
    # readiness tests checked, all at once, after a successful apply (k8s_wait's objects)
    wait_for=dict(type="list", elements="dict", default=[], options=k8s_wait.ARGUMENT_SPEC["objects"]["options"]),
    # the objects and waits of a stage of the host's deployment intent (controller only: plugin_utils/stage_apply.py)
    from_intent=k8s_wait.FROM_INTENT_SPEC,
    **kc.AUTH_ARG_SPEC,
)
MUTUALLY_EXCLUSIVE = [("objects", "definition", "from_intent")]

WORKERS = 8

# Apply order (deletes run it backwards). Namespaces and CRDs come first because nothing
# else can be created before them; then what workloads and bindings refer to; role bindings
# after their roles (RBAC checks the bound role when the binder is not all-powerful);
# webhook registrations last, after the services that answer them. Kinds not listed keep
# the order in which they first appear in the task.
_RANK = {
    "Namespace": 0,
    "CustomResourceDefinition": 1,
    "ServiceAccount": 2,
    # after ServiceAccounts: the token controller deletes a service-account-token Secret whose
    # account does not exist yet
    "Secret": 3,
    "ConfigMap": 2,
    "ClusterRole": 2,
    "Role": 2,
    "PriorityClass": 2,
    "StorageClass": 2,
    "PersistentVolume": 2,
    "PersistentVolumeClaim": 2,
    "ResourceQuota": 2,
    "LimitRange": 2,
    "NetworkPolicy": 2,
    "ClusterRoleBinding": 3,
    "RoleBinding": 3,
    "MutatingWebhookConfiguration": 5,
    "ValidatingWebhookConfiguration": 5,
    "APIService": 5,
}
_OTHER_RANK = 4

# Keys under which the API server rewrites resource quantities in canonical form
# ("0.5" -> "500m"); values there compare as quantities.
_QUANTITY_PARENTS = frozenset({"requests", "limits", "hard", "capacity", "allocatable"})


# ---------------------------------------------------------------------------- pure helpers


def waves(objs):
    """Indices of ``objs`` grouped into apply waves, in order (see the module docstring)."""
    first_seen = {}
    keys = []
    for i, obj in enumerate(objs):
        rank = _RANK.get(obj.get("kind"), _OTHER_RANK)
        sub = 0
        if rank == _OTHER_RANK:
            sub = first_seen.setdefault((obj.get("apiVersion"), obj.get("kind")), len(first_seen))
        keys.append(((rank, sub), i))
    grouped = {}
    for key, i in keys:
        grouped.setdefault(key, []).append(i)
    return [grouped[k] for k in sorted(grouped)]


def desired_fields(obj):
    """The part of an object that server-side apply tracks as fields (no identity, no status)."""
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "status")}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in ("name", "namespace")}
    if meta:
        out["metadata"] = meta
    else:
        out.pop("metadata", None)
    return out


def owned_fields(live, manager, api_version):
    """The fieldsV1 set ``manager`` owns by Apply on ``live`` (``{}``: it owns nothing), or None
    when it was recorded for another API version (and so cannot be compared here)."""
    for item in (live.get("metadata") or {}).get("managedFields") or []:
        if item.get("manager") == manager and item.get("operation") == "Apply" and not item.get("subresource"):
            if item.get("apiVersion") != api_version or item.get("fieldsType", "FieldsV1") != "FieldsV1":
                return None
            return item.get("fieldsV1") or {}
    return {}


def _item_matches_key(item, key_json):
    try:
        keys = json.loads(key_json)
    except ValueError:
        return False
    if not isinstance(keys, dict) or not isinstance(item, dict):
        return False
    # A key field the item leaves out was defaulted by the server (ports[].protocol: TCP).
    return all(item[k] == v for k, v in keys.items() if k in item) and any(k in item for k in keys)


def same_fieldset(value, node):
    """True when the ownership node (fieldsV1) covers exactly the fields ``value`` sets.

    ``{}`` is a leaf: the value is owned as a whole (a scalar, or an atomic map or list).
    Maps use ``f:<name>``; list items ``k:<key fields>`` (associative), ``v:<value>`` (set)
    or ``i:<index>``; ``.`` (the item or map itself) carries no field.
    """
    entries = {k: v for k, v in (node or {}).items() if k != "."}
    if not entries:
        return True
    if isinstance(value, dict):
        want = {"f:" + k for k, v in value.items() if v is not None}
        if set(entries) != want:
            return False
        return all(same_fieldset(value[k[2:]], entries[k]) for k in want)
    if isinstance(value, list):
        if len(entries) != len(value):
            return False
        unused = dict(entries)
        for index, item in enumerate(value):
            match = None
            if f"i:{index}" in unused:
                match = f"i:{index}"
            elif not isinstance(item, (dict, list)):
                candidate = "v:" + json.dumps(item, separators=(",", ":"))
                match = candidate if candidate in unused else None
            else:
                match = next((k for k in unused if k.startswith("k:") and _item_matches_key(item, k[2:])), None)
            if match is None:
                return False
            sub = unused.pop(match)
            if isinstance(item, dict) and not same_fieldset(item, sub):
                return False
        return True
    return False


def _scalar_equal(want, have, parent):
    if isinstance(want, bool) or isinstance(have, bool):
        return isinstance(want, bool) and isinstance(have, bool) and want == have
    if isinstance(want, (int, float)) and isinstance(have, (int, float)):
        return want == have
    if want == have:
        return True
    if parent in _QUANTITY_PARENTS and isinstance(want, (str, int, float)) and isinstance(have, (str, int, float)):
        a, b = quantity(want), quantity(have)
        return a != 0 and math.isclose(a, b, rel_tol=1e-9)
    return False


def contains(want, have, key=None, outer=None):
    """True when ``have`` (live) holds every value of ``want`` (desired); the server may add more.

    ``key`` is the field ``want`` sits under and ``outer`` the field of the map holding it
    (``resources.limits.memory``: key ``memory``, outer ``limits``).
    """
    if want is None:
        return have is None
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return False
        return all(contains(v, have.get(k), k, key) for k, v in want.items())
    if isinstance(want, list):
        if not isinstance(have, list):
            return False
        if len(want) == len(have):
            return all(contains(w, h, key, outer) for w, h in zip(want, have, strict=True))
        # Other managers may own more items of a granular list (finalizers, env): each desired
        # item must be present, in order.
        pos = 0
        for w in want:
            while pos < len(have) and not contains(w, have[pos], key, outer):
                pos += 1
            if pos == len(have):
                return False
            pos += 1
        return True
    return _scalar_equal(want, have, outer)


def unchanged_without_write(obj, live, manager):
    """Whether server-side apply of ``obj`` by ``manager`` would change nothing on ``live``.

    Proven from the live object alone: the live values contain the desired ones, and the
    fields ``manager`` owns are exactly the desired fields (so the apply would neither set
    nor release anything). When this cannot be shown the object is applied and compared.
    """
    if live is None or (live.get("metadata") or {}).get("deletionTimestamp"):
        return False
    fields = owned_fields(live, manager, obj.get("apiVersion"))
    if fields is None:
        return False
    desired = desired_fields(obj)
    if not desired or not fields:  # at the top, an empty set means "owns nothing"
        return not desired and not fields
    values = _as_stored(obj, desired)
    live_part = {k: v for k, v in live.items() if k in values}
    return contains(values, live_part) and same_fieldset(desired, fields)


def _as_stored(obj, desired):
    """Desired values as the server stores them: a Secret's write-only stringData is kept,
    base64-encoded, in data (where it wins over data of the same key)."""
    if obj.get("kind") != "Secret" or obj.get("apiVersion") != "v1" or not desired.get("stringData"):
        return desired
    out = {k: v for k, v in desired.items() if k != "stringData"}
    encoded = {k: base64.b64encode(str(v).encode("utf-8")).decode("ascii") for k, v in desired["stringData"].items()}
    out["data"] = {**(desired.get("data") or {}), **encoded}
    return out


def crd_kinds(objs):
    """(apiVersion, kind) pairs the CustomResourceDefinitions in ``objs`` define."""
    out = {}
    for obj in objs:
        if obj.get("kind") != "CustomResourceDefinition":
            continue
        spec = obj.get("spec") or {}
        kind = (spec.get("names") or {}).get("kind")
        for ver in spec.get("versions") or []:
            if kind and spec.get("group") and ver.get("name") and ver.get("served", True):
                out[(f"{spec['group']}/{ver['name']}", kind)] = obj["metadata"]["name"]
    return out


# ---------------------------------------------------------------------------- objects


def load_objects(params):
    """The task's objects, with labels merged; raises ValueError naming what is malformed."""
    objs = params.get("objects")
    if params.get("definition") is not None:
        objs = [d for d in yaml.safe_load_all(params["definition"]) if d]
    objs = objs or []
    out = []
    labels = params.get("labels") or {}
    for i, obj in enumerate(objs):
        if not isinstance(obj, dict):
            raise ValueError(f"object #{i} is a {type(obj).__name__}, not a mapping")
        missing = [k for k in ("apiVersion", "kind") if not obj.get(k)]
        if not (obj.get("metadata") or {}).get("name"):
            missing.append("metadata.name")
        if missing:
            raise ValueError(f"object #{i} ({obj.get('kind', 'unknown kind')}) lacks {', '.join(missing)}")
        if labels:
            obj = dict(obj)
            meta = dict(obj["metadata"])
            meta["labels"] = {**labels, **(meta.get("labels") or {})}
            obj["metadata"] = meta
        out.append(obj)
    return out


def entry(obj, action, **extra):
    meta = obj.get("metadata", {})
    out = {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "namespace": meta.get("namespace", "") or "",
        "name": meta["name"],
        "action": action,
    }
    out.update(extra)
    return out


def _dumper():
    try:
        return yaml.CSafeDumper  # libyaml: writing a fleet's files is mostly YAML emitting
    except AttributeError:  # PyYAML without libyaml
        return yaml.SafeDumper


def render_rel(obj):
    """The path of an object's file under a render directory: <namespace or _cluster>/<kind>.<group>-<name>.yaml."""
    meta = obj["metadata"]
    group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else "core"
    folder = meta.get("namespace") or "_cluster"
    return f"{folder}/{obj['kind'].lower()}.{group}-{meta['name']}.yaml"


def render_path(render_dir, obj):
    return os.path.join(render_dir, *render_rel(obj).split("/"))


def render_files(objs, namespace):
    """[(object, path under the render directory, text)] of the objects, as delivery=render writes them."""
    out = []
    dumper = _dumper()
    # plain types: objects templated in-process carry Ansible's tagged str/dict subclasses
    for obj in json.loads(json.dumps(objs)):
        # offline: the kind's scope from the one table (module_utils/kind_scope.py)
        obj = kind_scope.placed(obj, namespace)
        out.append((obj, render_rel(obj), yaml.dump(obj, Dumper=dumper, sort_keys=False, default_flow_style=False)))
    return out


def render_tree(objs, render_dir, namespace, check_mode, *, scope="objects", prune=False):  # noqa: PLR0913
    """Write the objects under render_dir with the one tree writer (module_utils/render_tree.py: it owns only
    the files it wrote, never leaves render_dir); raises render_tree.TreeError. Returns (file results,
    object entries, diffs, changed)."""
    files = render_files(objs, namespace)
    before = {}
    for _obj, rel, _text in files:
        path = render_tree_mod.contained(render_dir, rel)
        before[rel] = None
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as fh:
                before[rel] = fh.read()
    file_results = render_tree_mod.write(
        render_dir, {rel: text for _obj, rel, text in files}, scope, prune=prune, check_mode=check_mode
    )
    results, diffs = [], []
    for obj, rel, text in files:
        differs = before[rel] != text
        path = os.path.join(render_dir, rel)
        results.append(entry(obj, "rendered" if differs else "unchanged", path=path))
        if differs:
            diffs.append({"before_header": path, "after_header": path, "before": before[rel] or "", "after": text})
    changed = any(r["action"] != "unchanged" for r in file_results)
    return file_results, results, diffs, changed


def render(objs, render_dir, namespace, check_mode):
    _files, results, diffs, changed = render_tree(objs, render_dir, namespace, check_mode)
    return results, diffs, changed


class _Item:
    __slots__ = ("index", "obj", "resource", "live", "deferred", "result", "diff")

    def __init__(self, index, obj):
        self.index = index
        self.obj = obj
        self.resource = None
        self.live = None
        self.deferred = None  # name of the CRD of this batch that defines the kind
        self.result = None
        self.diff = None


def _parallel(fn, items, catch=(kc.ClientError,)):
    """Run ``fn`` on every item (threads); return the (item, error) pairs that raised, in order."""

    def call(item):
        try:
            fn(item)
        except catch as exc:
            return item, exc
        return item, None

    if len(items) <= 1:
        outcomes = [call(i) for i in items]
    else:
        with ThreadPoolExecutor(max_workers=min(WORKERS, len(items))) as pool:
            outcomes = list(pool.map(call, items))
    return [(item, err) for item, err in outcomes if err is not None]


def _fail(failures, verb, results):
    """One error for every failed object; objects that failed for the same reason share a line."""
    reasons = {}
    for item, err in failures:
        text, ref = str(err), kc.ref(item.obj)
        reasons.setdefault(text, [])
        if ref not in text:
            reasons[text].append(ref)
    lines = [f"{', '.join(refs)}: {text}" if refs else text for text, refs in reasons.items()]
    msg = lines[0] if len(failures) == 1 else f"{len(failures)} objects could not be {verb}: " + "; ".join(lines)
    return kc.ClientError(msg, results=results)


def _place(item, namespace):
    """Set or drop metadata.namespace by the kind's scope; raise when a namespace is needed."""
    meta = dict(item.obj["metadata"])
    if item.resource.namespaced and not meta.get("namespace"):
        if not namespace:
            raise kc.ClientError(
                f"{kc.ref(item.obj)} is namespaced but has no metadata.namespace and no namespace was given"
            )
        meta["namespace"] = namespace
    elif not item.resource.namespaced:
        meta.pop("namespace", None)
    item.obj = {**item.obj, "metadata": meta}


def _explained(exc, verb, item):
    if isinstance(exc, kc.ApiError):
        ns = item.obj["metadata"].get("namespace")
        return kc.ClientError(kc.explain(exc, verb, kc.ref(item.obj), item.resource, ns))
    return exc


def _resolve(client, items, params, batch_crds, refresh_after=None):
    def resolve(item):
        try:
            item.resource = client.resource(item.obj["apiVersion"], item.obj["kind"], refresh_after=refresh_after)
        except kc.KindNotServed:
            crd = batch_crds.get((item.obj["apiVersion"], item.obj["kind"]))
            if crd is None:
                raise
            item.deferred = crd
            return
        item.deferred = None
        _place(item, params.get("namespace"))

    failures = []
    for item in items:  # discovery is cached and locked: no gain from threads here
        try:
            resolve(item)
        except kc.ClientError as exc:
            failures.append((item, exc))
    return failures


def _read_live(client, items):
    def read(item):
        meta = item.obj["metadata"]
        try:
            item.live = client.get(item.resource, meta["name"], meta.get("namespace"))
        except kc.ApiError as exc:
            raise _explained(exc, "get", item) from exc

    return _parallel(read, items)


def _wait_established(client, crd_items, timeout, deadline):
    """Every CRD Established, by ``deadline`` (``time.monotonic()``; ``timeout`` the seconds it stands for, named in
    the error)."""
    pending = list(crd_items)
    pause = 0.1
    while pending:
        still = []
        for item in pending:
            live = client.get(item.resource, item.obj["metadata"]["name"])
            conds = kc.lookup(live or {}, "status.conditions") or []
            if not any(c.get("type") == "Established" and c.get("status") == "True" for c in conds):
                still.append(item)
        pending = still
        if not pending:
            return
        if time.monotonic() >= deadline:
            names = ", ".join(i.obj["metadata"]["name"] for i in pending)
            raise kc.ClientError(
                f"timed out after {timeout} s waiting for CustomResourceDefinition(s) {names} to be Established"
            )
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


def _unserved(client, crd_items):
    """'group/version Kind' of every served version of these CRDs that discovery does not list yet."""
    missing = []
    for api_version, kind in crd_kinds([i.obj for i in crd_items]):
        try:
            client.resource(api_version, kind)
        except kc.KindNotServed:
            missing.append(f"{api_version} {kind}")
    return missing


def _wait_served(client, crd_items, timeout, deadline):
    """The server sets Established before its discovery lists the new resource (the discovery controller
    catches up on its own; under load that took seconds in CI): wait for discovery as well, else the CRD's
    objects in the next wave read as a kind nothing serves. The same ``deadline`` as ``_wait_established``: the
    module's wait_timeout bounds both together."""
    pause = 0.1
    while True:
        client.discovery.refresh()
        missing = _unserved(client, crd_items)
        if not missing:
            return
        if time.monotonic() >= deadline:
            raise kc.ClientError(
                f"timed out after {timeout} s waiting for the API server's discovery to list "
                f"{', '.join(missing)} (their CustomResourceDefinitions are Established)"
            )
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


def apply_all(client, objs, params, check_mode=False, diff=False):
    manager = params["field_manager"]
    force = params["force_conflicts"]
    items = [_Item(i, o) for i, o in enumerate(objs)]
    batch_crds = crd_kinds(objs)

    failures = _resolve(client, items, params, batch_crds)
    if failures:
        raise _fail(failures, "resolved (nothing was applied)", [])
    failures = _read_live(client, [i for i in items if not i.deferred])
    if failures:
        raise _fail(failures, "read (nothing was applied)", [])
    _claim(client, items, params)

    new_namespaces = {
        i.obj["metadata"]["name"]
        for i in items
        if i.obj["kind"] == "Namespace" and i.obj["apiVersion"] == "v1" and i.live is None
    }
    done = []

    def apply_one(item):
        try:
            after = client.apply(item.resource, item.obj, field_manager=manager, force=force, dry_run=check_mode)
        except kc.ApiError as exc:
            raise _explained(exc, "apply", item) from exc
        before = item.live
        if before is None:
            action = "created"
        elif kc.normalize(before) != kc.normalize(after):
            action = "configured"
        else:
            action = "unchanged"
        item.result = entry(item.obj, action)
        if action != "unchanged" and diff:
            item.diff = {
                "before_header": kc.ref(item.obj),
                "after_header": kc.ref(item.obj),
                "before": kc.normalize(before) or {},
                "after": kc.normalize(after),
            }

    for wave in waves(objs):
        wave_items = [items[i] for i in wave]
        deferred = [i for i in wave_items if i.deferred]
        if deferred:
            if check_mode:
                # The CRD is not served yet, so the server cannot dry-run its objects.
                for item in deferred:
                    item.result = entry(item.obj, "created", validated=False)
                    item.diff = _creation_diff(item, diff)
            else:
                failures = _resolve(client, deferred, params, {})
                failed = {id(item) for item, _error in failures}
                failures += _read_live(client, [i for i in deferred if i.resource is not None and id(i) not in failed])
                if failures:
                    raise _fail(failures, "applied", _results(done))
        todo = []
        for item in wave_items:
            if item.result is not None:
                continue
            ns = item.obj["metadata"].get("namespace")
            if check_mode and ns in new_namespaces:
                item.result = entry(item.obj, "created", validated=False)
                item.diff = _creation_diff(item, diff)
            elif unchanged_without_write(item.obj, item.live, manager):
                item.result = entry(item.obj, "unchanged")
            else:
                todo.append(item)
        failures = _parallel(apply_one, todo)
        done.extend(i for i in wave_items if i.result is not None)
        if failures:
            raise _fail(failures, "applied", _results(done))
        crds = [i for i in todo if i.obj["kind"] == "CustomResourceDefinition"]
        if crds and not check_mode:
            timeout = params.get("wait_timeout") or 300
            deadline = time.monotonic() + timeout
            _wait_established(client, crds, timeout, deadline)
            _wait_served(client, crds, timeout, deadline)
    results = _results(done)
    diffs = [i.diff for i in done if i.diff]
    changed = any(r["action"] != "unchanged" for r in results)
    return results, diffs, changed


def owner_policy(params):
    """The ownership policy of a task (its `ownership` option), or None when it gives none."""
    own = params.get("ownership") or {}
    return own if own.get("value") else None


def _claim(client, items, params):
    """Annotate what this apply creates or created before; stop, before any write, on objects that exist and
    are neither ours nor adopted (module_utils/ownership.py), among this apply's objects and ``claim_objects``;
    claim the shared objects other sites of the collection created, and stop on settings of theirs that differ
    from this site's (module_utils/claims.py)."""
    own = owner_policy(params)
    if own is None:
        return
    foreign, clash = [], []
    for item in items:
        # a kind this batch's CRD defines is not served yet: no object of it can exist
        live = None if item.deferred else item.live
        if _shared(item.obj, live, own, clash, params):
            item.obj = claims.prepared(item.obj, live, own, claims.entry(item.obj, own))
            continue
        cls, item.obj = ownership.prepared(item.obj, live, own)
        if cls == ownership.FOREIGN:
            foreign.append((item.obj, item.live))
    later = [_Item(i, o) for i, o in enumerate(params.get("claim_objects") or [])]
    served = []
    for item in later:
        try:
            item.resource = client.resource(item.obj["apiVersion"], item.obj["kind"])
        except kc.KindNotServed:
            continue  # its operator is not installed yet: nothing of that kind exists
        _place(item, params.get("namespace"))
        served.append(item)
    failures = _read_live(client, served)
    if failures:
        raise _fail(failures, "read (nothing was applied)", [])
    foreign += [
        (i.obj, i.live)
        for i in served
        if not _shared(i.obj, i.live, own, clash, params)
        and ownership.classify(i.obj, i.live, own) == ownership.FOREIGN
    ]
    if clash:
        raise kc.ClientError(claims.refusal(clash, own), results=[])
    if foreign:
        raise kc.ClientError(ownership.refusal(foreign, own), results=[])


def _shared(obj, live, own, clash, params):
    """Whether ``obj`` is a shared platform object this site claims (new, or carrying the collection's
    annotations); the fields its settings and the other claimants' differ on are added to ``clash``."""
    shared = claims.entry(obj, own)
    # an object one of the site's operators made itself (derived) is claimed as if the site had created it
    found = live is None or claims.marked(live) or ownership.ref(obj) in (own.get("derived") or ())
    if shared is None or not found:
        return False
    owned = owned_fields(live, params["field_manager"], obj.get("apiVersion")) if live else None
    clash.extend(claims.conflicts(obj, live, own, contains, owned))
    return True


def missing_references(client, refs):
    """A warning for each referenced object that does not exist (or cannot be read), saying what it is for."""
    out = []
    for ref in refs:
        what = f"{ref['kind']} {ref.get('namespace') + '/' if ref.get('namespace') else ''}{ref['name']}"
        try:
            resource = client.resource(ref["apiVersion"], ref["kind"])
            if client.get(resource, ref["name"], ref.get("namespace") if resource.namespaced else None) is None:
                out.append(f"{what} does not exist: {ref['why']}. Create it (it is not created by this collection)")
        except kc.ClientError as exc:
            out.append(f"{what} could not be checked ({exc}): {ref['why']}")
    return out


def _creation_diff(item, diff):
    if not diff:
        return None
    return {"before_header": kc.ref(item.obj), "after_header": kc.ref(item.obj), "before": {}, "after": item.obj}


def _results(items):
    return [i.result for i in items if i.result is not None]


def delete_all(client, objs, params, check_mode=False, diff=False):
    items = [_Item(i, o) for i, o in enumerate(objs)]
    absent = set()
    for item in items:
        try:
            item.resource = client.resource(item.obj["apiVersion"], item.obj["kind"])
        except kc.KindNotServed:
            absent.add(item.index)
            continue
        _place(item, params.get("namespace"))
    for item in _in_missing_namespaces(client, [i for i in items if i.index not in absent]):
        absent.add(item.index)
    kept = _not_ours(client, [i for i in items if i.index not in absent], params)
    # shared platform objects other sites still claim: this site's claim is removed, the merge recomputed
    handback = _claims_left(items, kept, params)
    census, orphan = None, {}
    if owner_policy(params) is not None:
        # nothing that is not the site's goes with what it deletes: a Namespace holding such an object is kept,
        # an object whose cascade would take one is deleted with propagationPolicy=Orphan (removal_guard.py)
        ours = [i for i in items if i.index not in absent and i.index not in kept]
        census, keep_ns, orphan = removal_guard.plan(client, ours, owner_policy(params))
        kept.update(keep_ns)
    done = []

    def delete_one(item):
        meta = item.obj["metadata"]
        spared = orphan.get(item.index)
        try:
            existed = client.delete(
                item.resource,
                meta["name"],
                meta.get("namespace"),
                dry_run=check_mode,
                **({"propagation": "Orphan"} if spared else {}),
            )
        except kc.ApiError as exc:
            raise _explained(exc, "delete", item) from exc
        extra = {"kept_dependents": sorted(ownership.ref(o) for o in spared)} if spared and existed else {}
        item.result = entry(item.obj, "deleted" if existed else "absent", **extra)
        if existed and diff:
            ref = kc.ref(item.obj)
            item.diff = {"before_header": ref, "after_header": ref, "before": item.obj, "after": {}}

    for wave in reversed(waves(objs)):
        wave_items = [items[i] for i in reversed(wave)]
        for item in wave_items:
            if item.index in absent:
                item.result = entry(item.obj, "absent")
            elif item.index in kept:
                item.result = entry(item.obj, "kept", reason=kept[item.index])
        released = [i for i in wave_items if i.index in kept and kept[i.index].startswith("adopted")]
        released_ = [i for i in wave_items if i.index in handback]
        failures = _parallel(lambda item: _release(client, item, params, check_mode), released)
        failures += _parallel(
            lambda item: _hand_back(client, item, handback[item.index], params, check_mode), released_
        )
        if failures:
            raise _fail(failures, "released", _results(done))
        failures = _parallel(delete_one, [i for i in wave_items if i.result is None])
        done.extend(i for i in wave_items if i.result is not None)
        if failures:
            raise _fail(failures, "deleted", _results(done))
    done.extend(_remove_made(client, census, [i for i in done if i.index in orphan], check_mode))
    results = _results(done)
    pending = [i for i in done if i.result["action"] == "deleted"]
    if params.get("wait_deleted") and not check_mode and pending:
        _wait_gone(client, pending, params.get("wait_timeout") or 300, results)
    return results, [i.diff for i in done if i.diff], bool(pending) or any(i.index in handback for i in done)


def _remove_made(client, census, orphaned, check_mode):
    """What controllers made from the objects deleted with propagationPolicy=Orphan, deleted one by one (the
    cascade without the foreign objects it would have taken): results of their own, after the site's."""
    out = []
    for item in orphaned:
        if item.result["action"] != "deleted":
            continue
        try:
            made = removal_guard.remove_made(client, census, item.live["metadata"].get("uid"), check_mode)
        except kc.ApiError as exc:
            raise _explained(exc, "delete what was made from", item) from exc
        for obj, resource, existed in made:
            child = _Item(len(out), obj)
            child.resource = resource
            why = f"made from {ownership.ref(item.obj)} by its controller; deleted on its own"
            child.result = entry(obj, "deleted" if existed else "absent", reason=why)
            out.append(child)
    return out


def prune(client, objs, params, previous, modes=(False, False)):
    """Delete what the stage's record named (``previous``) and ``objs`` no longer hold (only the site's: the
    removal's own rules), then record ``objs`` (not in check mode). Results: ``pruned`` (``kept`` with why).
    ``modes``: (check mode, diff)."""
    check_mode, diff = modes
    own, spec = owner_policy(params), params["record"]
    gone = applied_record.stale(previous, objs, own, spec)
    results, diffs, changed = [], [], False
    if gone:
        results, diffs, changed = delete_all(client, gone, {**params, "record": None}, check_mode, diff)
        results = [
            {**r, "action": "pruned"} if r["action"] == "deleted" else r for r in results if r["action"] != "absent"
        ]
    if not check_mode:
        applied_record.write(client, applied_record.record_object(own, spec, objs), params["field_manager"], previous)
    return results, diffs, changed


def recorded_too(client, objs, params):
    """``objs`` with what the stage's record names besides, and the record itself (a teardown's objects)."""
    own, spec = owner_policy(params), params["record"]
    previous = applied_record.read(client, own, spec)
    return objs + applied_record.stale(previous, objs, own, spec) + [applied_record.record_ref(own, spec)]


def _not_ours(client, items, params):
    """``{index: why}`` of the objects a removal keeps: they exist and this site did not create them (adopted,
    another site's, or found on the cluster). Without an ownership policy every object is removed."""
    own = owner_policy(params)
    if own is None:
        return {}
    failures = _read_live(client, items)
    if failures:
        raise _fail(failures, "read (nothing was deleted)", [])
    kept = {}
    for item in items:
        if claims.entry(item.obj, own) is not None and claims.marked(item.live):
            continue  # a shared object: the claims on it decide (_claims_left)
        cls = ownership.classify(item.obj, item.live, own)
        if cls == ownership.ADOPTED:
            kept[item.index] = "adopted by the site (listed in adopt): never deleted; the fields the site set released"
        elif cls == ownership.FOREIGN:
            other = ownership.creator(item.live)
            kept[item.index] = f"created by site {other!r}" if other else "not created by inference.blueprints"
        if item.index in kept:
            item.live = None
    return kept


def _claims_left(items, kept, params):
    """``{index: object to apply}`` of the shared objects this removal hands back to the sites that still claim
    them (module_utils/claims.py), each also in ``kept`` with why; the shared objects this site does not claim
    are kept, and so are the objects derived from a kept one (the CSV of a Subscription another site holds)."""
    own = owner_policy(params)
    if own is None:
        return {}
    out, held = {}, set()
    for item in items:
        shared = claims.entry(item.obj, own)
        if shared is None or item.index in kept or not claims.marked(item.live):
            continue
        action, why, obj = claims.removal(item.obj, item.live, own, shared)
        if action == "delete":
            continue
        kept[item.index] = why
        held.add(_namespace_of(item))
        if obj is not None:
            out[item.index] = obj
    derived = set(own.get("derived") or ())
    for item in items:
        ns = _namespace_of(item) if item.resource is not None else None
        if ns and ns in held and item.index not in kept and ownership.ref(item.obj) in derived:
            kept[item.index] = "derived from a shared object other sites still claim in its namespace"
    return out


def _hand_back(client, item, obj, params, check_mode):
    """Apply the shared object without this site's claim (its merge recomputed from the claims left)."""
    try:
        after = client.apply(item.resource, obj, field_manager=params["field_manager"], force=True, dry_run=check_mode)
    except kc.ApiError as exc:
        raise _explained(exc, "release", item) from exc
    item.result = entry(item.obj, claims.RELEASED, reason=item.result.get("reason") if item.result else None)
    ref = kc.ref(item.obj)
    item.diff = {
        "before_header": ref,
        "after_header": ref,
        "before": kc.normalize(item.live),
        "after": kc.normalize(after),
    }


def _release(client, item, params, check_mode):
    """Give back the labels and annotations the site put on an adopted object: an apply of the object without
    them, as our field manager, makes the API server drop those only we set. Its spec and data are applied as
    they are, so none of them is dropped: a value the site took over by force (the config.yaml of a merged
    cluster-monitoring-config) may hold the owner's settings too, and releasing it would delete them."""
    meta = item.obj["metadata"]
    bare = {k: v for k, v in item.obj.items() if k not in ("metadata", "status")}
    bare["metadata"] = {"name": meta["name"]}
    if meta.get("namespace"):
        bare["metadata"]["namespace"] = meta["namespace"]
    try:
        client.apply(item.resource, bare, field_manager=params["field_manager"], force=True, dry_run=check_mode)
    except kc.ApiError as exc:
        raise _explained(exc, "release", item) from exc


def _namespace_of(item):
    return item.obj["metadata"].get("namespace") if item.resource.namespaced else None


def _in_missing_namespaces(client, items):
    """The items whose namespace does not exist: they are absent, with no request for each. (A subject
    whose rights there were a Role in that namespace, gone with it, would be refused, not told 404.)
    A namespace we may not read, or fail to read, is left to the per-object requests."""
    namespaces = sorted({ns for ns in map(_namespace_of, items) if ns})
    if not namespaces:
        return []
    try:
        ns_resource = client.resource("v1", "Namespace")
    except kc.ClientError:
        return []
    missing = set()

    def check(ns):
        try:
            if client.get(ns_resource, ns) is None:
                missing.add(ns)
        except kc.ClientError:
            pass

    if len(namespaces) == 1:
        check(namespaces[0])
    else:
        with ThreadPoolExecutor(max_workers=min(WORKERS, len(namespaces))) as pool:
            list(pool.map(check, namespaces))
    return [i for i in items if _namespace_of(i) in missing]


def _wait_gone(client, pending, timeout, results):
    deadline = time.monotonic() + timeout
    pause = 0.1
    # Namespaces deleted by this call: their content goes before they do, and the wait on the Namespace
    # covers it. A subject whose rights in one were a Role there loses them while it empties, so a
    # refused read of an object inside it counts as gone with it, not as a failure.
    emptying = {
        i.obj["metadata"]["name"] for i in pending if i.obj["kind"] == "Namespace" and i.obj["apiVersion"] == "v1"
    }

    def still_there(item):
        meta = item.obj["metadata"]
        try:
            live = client.get(item.resource, meta["name"], meta.get("namespace"))
        except kc.ApiError as exc:
            if exc.status == 403 and _namespace_of(item) in emptying:
                return
            raise
        if live is not None:
            raise _Present()

    while pending:
        outcome = _parallel(still_there, pending, catch=(kc.ClientError, _Present))
        failures = [(item, err) for item, err in outcome if not isinstance(err, _Present)]
        if failures:
            raise _fail(failures, "checked for deletion", results)
        pending = [item for item, _err in outcome]
        if not pending:
            return
        if time.monotonic() >= deadline:
            names = ", ".join(kc.ref(i.obj) for i in pending)
            raise kc.ClientError(
                f"timed out after {timeout} s waiting for deletion of: {names} (still present; check their finalizers)",
                results=results,
            )
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, 1.0)


class _Present(Exception):
    """The object is still there (a deletion not finished yet)."""


def run(params, check_mode=False, diff=False, env=None):
    """The k8s_apply task: a result dict (``failed``/``msg`` on failure)."""
    if params.get("from_intent"):
        return {"failed": True, "msg": k8s_wait.FROM_INTENT_ONLY}
    if not HAS_YAML:
        return {"failed": True, "msg": "k8s_apply needs the PyYAML Python package"}
    try:
        objs = load_objects(params)
    except ValueError as exc:
        return {"failed": True, "msg": str(exc)}
    if params["delivery"] == "render":
        if params["state"] == "absent":
            return {"changed": False, "objects": [], "msg": "delivery=render: nothing to delete"}
        if not params.get("render_dir"):
            return {"failed": True, "msg": "delivery=render needs render_dir: the directory to write the objects to"}
        try:
            results, diffs, changed = render(objs, params["render_dir"], params.get("namespace"), check_mode)
        except render_tree_mod.TreeError as exc:
            return {"failed": True, "msg": str(exc)}
        return {"changed": changed, "objects": results, **({"diff": diffs} if diff else {})}
    if not kc.HAS_KUBERNETES:
        return {"failed": True, "msg": f"k8s_apply needs the kubernetes Python package: {kc.KUBERNETES_IMPORT_ERROR}"}
    waits = params.get("wait_for") if params["state"] == "present" and not check_mode else []
    if not objs and not waits:
        return {"changed": False, "objects": []}
    try:
        client = kc.get_client(params, env)
        record = params.get("record") if owner_policy(params) else None
        if params["state"] == "present":
            # the stage's record, read first: one that is not the site's stops the apply before any write
            previous = applied_record.read(client, owner_policy(params), record) if record else None
            results, diffs, changed = apply_all(client, objs, params, check_mode, diff)
            if record:
                pruned, pruned_diffs, pruned_changed = prune(client, objs, params, previous, (check_mode, diff))
                results, diffs, changed = results + pruned, diffs + pruned_diffs, changed or pruned_changed
        else:
            if record:
                objs = recorded_too(client, objs, params)
            results, diffs, changed = delete_all(client, objs, params, check_mode, diff)
    except kc.ClientError as exc:
        results = exc.results
        return {
            "failed": True,
            "msg": str(exc),
            "objects": results,
            "changed": any(r["action"] not in ("unchanged", "absent", "kept") for r in results),
        }
    out = {"changed": changed, "objects": results, **({"diff": diffs} if diff else {})}
    missing = missing_references(client, params.get("references") or []) if params["state"] == "present" else []
    # what a removal (or a prune) kept because something not the site's is in it or hangs on it
    warnings = missing + removal_guard.kept_lines(results)
    if warnings:
        out["warnings"] = warnings
    if waits:
        # the same engine as k8s_wait, on this task's client: one task, one connection, one discovery
        waited = k8s_wait.wait(client, waits, params["wait_timeout"], k8s_wait.DEFAULT_SLEEP, k8s_wait.grace_of(env))
        out.update(waited=waited["objects"], wait_elapsed=waited["elapsed"])
        if waited.get("failed"):
            out.update(failed=True, msg=waited["msg"])
    return out
