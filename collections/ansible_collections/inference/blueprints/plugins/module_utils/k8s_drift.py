# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine of inference.blueprints.k8s_drift: what changed on the cluster behind our back.

For every object of the intent it reports, without writing anything:

* the object is missing;
* a field we set has another value live (the field, the live and the intended value), and who
  owns it now: a server-side apply dry run with our field manager and no force names every
  field another manager took over (HTTP 409 causes), and the live object's managedFields name
  the manager of a changed field;
* a label or annotation on our object that we did not set (controllers' own domains excepted).

Objects are compared as the server stores them (quantities, defaulted list keys), with the same
rules the apply engine uses to prove a no-op.
"""

from __future__ import annotations

import json

from ansible_collections.inference.blueprints.plugins.module_utils import applied_record, ownership
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_apply as engine
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_client as kc

ARGUMENT_SPEC = dict(
    objects=dict(type="list", elements="dict", required=True),
    field_manager=dict(type="str", default="inference-blueprints"),
    remove_foreign=dict(type="bool", default=False),
    # the site's ownership policy (k8s_apply's): our objects carry its annotation, adopted ones are only ours in part
    ownership=engine.ARGUMENT_SPEC["ownership"],
    # the stage's record (k8s_apply's): what it names and the objects no longer hold, still on the cluster, is drift
    record=engine.ARGUMENT_SPEC["record"],
    **kc.AUTH_ARG_SPEC,
)

# Label and annotation domains controllers and the platform write on objects: never drift.
SYSTEM_DOMAINS = (
    "kubernetes.io",
    "k8s.io",
    "openshift.io",
    "kserve.io",
    "serving.kserve.io",
    "operators.coreos.com",
    "olm.operatorframework.io",
    "argocd.argoproj.io",
    "deployment.kubernetes.io",
)


def _key_of(item):
    """A readable key of a list item: its name (env, containers, volumes, ports) or its index."""
    if isinstance(item, dict):
        for k in ("name", "type", "key", "mountPath", "containerPort", "pluginRef"):
            if k in item:
                return f"{k}={item[k]}"
    return None


def value_diffs(want, have, path="", key=None, outer=None):
    """[(path, intended, live)] where ``have`` does not hold ``want`` (the apply engine's rules)."""
    if engine.contains(want, have, key, outer):
        return []
    if isinstance(want, dict) and isinstance(have, dict):
        out = []
        for k, v in want.items():
            out.extend(value_diffs(v, have.get(k), f"{path}.{k}" if path else k, k, key))
        return out or [(path, want, have)]
    if isinstance(want, list) and isinstance(have, list):
        out = []
        for i, w in enumerate(want):
            label = _key_of(w)
            match = None
            if label:
                match = next((h for h in have if _key_of(h) == label), None)
            elif i < len(have):
                match = have[i]
            where = f"{path}[{label or i}]"
            if match is None:
                out.append((where, w, None))
            else:
                out.extend(value_diffs(w, match, where, key, outer))
        return out or [(path, want, have)]
    return [(path, want, have)]


def _system(key):
    domain = key.split("/", 1)[0] if "/" in key else ""
    return any(domain == d or domain.endswith("." + d) for d in SYSTEM_DOMAINS)


def extra_metadata(obj, live):
    """[(path, None, value)] for labels and annotations someone else put on our object."""
    out = []
    for field in ("labels", "annotations"):
        want = (obj.get("metadata") or {}).get(field) or {}
        have = (live.get("metadata") or {}).get(field) or {}
        for k, v in sorted(have.items()):
            if k not in want and not _system(k) and not k.startswith("kubectl.kubernetes.io/"):
                out.append((f"metadata.{field}[{k}]", None, v))
    return out


def _segment(key):
    """A fieldsV1 key as a path segment: f:name -> .name, k:{"name":"main"} -> [name=main], i:3 -> [3]."""
    if key.startswith("f:"):
        return "." + key[2:]
    if key.startswith("k:"):
        try:
            keys = json.loads(key[2:])
        except ValueError:
            return f"[{key[2:]}]"
        return "[" + ",".join(f"{k}={v}" for k, v in sorted(keys.items())) + "]"
    if key.startswith("i:"):
        return f"[{key[2:]}]"
    if key.startswith("v:"):
        return f"[{key[2:]}]"
    return "." + key


def field_paths(fields, prefix=""):
    """Every leaf path of a fieldsV1 set (a map's own ``.`` entry is not a field)."""
    out = []
    for k, v in (fields or {}).items():
        if k == ".":
            continue
        path = (prefix + _segment(k)).lstrip(".")
        children = {kk: vv for kk, vv in (v or {}).items() if kk != "."}
        if children:
            out.extend(field_paths(children, path))
        else:
            out.append(path)
    return out


# Fields a field manager other than ours may own without it being drift.
NOT_DRIFT = ("metadata.finalizers", "metadata.ownerReferences", "metadata.resourceVersion", "status")


# Field managers of the cluster's own controllers: what they write on our objects (a service
# account token, a default) is theirs to write, not drift.
CONTROLLER_MANAGERS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
CONTROLLER_WORDS = ("controller", "operator")


def is_controller(manager):
    name = (manager or "").lower()
    return name in CONTROLLER_MANAGERS or any(w in name for w in CONTROLLER_WORDS)


def _managers_by_path(live, manager):
    """{leaf field path: [other managers]} of the main resource (not status or scale subresources),
    controllers' own fields left out."""
    out = {}
    for entry in (live.get("metadata") or {}).get("managedFields") or []:
        if entry.get("subresource") or (entry.get("manager") == manager and entry.get("operation") == "Apply"):
            continue
        if is_controller(entry.get("manager")):
            continue
        who = f"{entry.get('manager')} ({entry.get('operation')})"
        for path in field_paths(entry.get("fieldsV1") or {}):
            out.setdefault(path, set()).add(who)
    return out


def value_paths(value, prefix=""):
    """Every leaf path of a desired value, in the notation of field_paths (list items by key)."""
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            out.extend(value_paths(v, f"{prefix}.{k}" if prefix else k))
        return out or [prefix]
    if isinstance(value, list) and value and all(_key_of(i) for i in value):
        out = []
        for item in value:
            out.extend(value_paths(item, f"{prefix}[{_key_of(item)}]"))
        return out
    return [prefix]


def foreign_fields(obj, live, manager):
    """[(path, None, live value or '(set)', owners)] for fields of our object another manager set
    that we do not set at all (an image someone patched in, a new env var)."""
    ours = set(field_paths(_our_fields(live, manager))) | set(value_paths(engine.desired_fields(obj)))
    out = []
    for path, who in sorted(_managers_by_path(live, manager).items()):
        if path in ours or path.startswith(NOT_DRIFT) or path.startswith(("metadata.labels", "metadata.annotations")):
            continue
        if any(path.startswith(p + ".") or path.startswith(p + "[") for p in ours):
            continue
        out.append((path, None, _value_at(live, path), sorted(who)))
    return out


def _value_at(live, path):
    """The live value at a drift path (for a report), or '(set)' when it cannot be walked."""
    ptr = pointer(live, path)
    if ptr is None:
        return "(set)"
    node = live
    for token in ptr.lstrip("/").split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        node = node[int(token)] if isinstance(node, list) else node[token]
    return _readable(node)


def _our_fields(live, manager):
    for entry in (live.get("metadata") or {}).get("managedFields") or []:
        if entry.get("manager") == manager and entry.get("operation") == "Apply" and not entry.get("subresource"):
            return entry.get("fieldsV1") or {}
    return {}


def _conflicts(client, resource, obj, manager):
    """Fields another manager holds that our apply would need to force (from a dry run)."""
    try:
        client.apply(resource, obj, field_manager=manager, force=False, dry_run=True)
    except kc.ApiError as exc:
        if exc.status == 409:
            return [c.get("message") or c.get("field") for c in exc.causes]
        raise
    return []


def _readable(value):
    if isinstance(value, (dict, list)):
        text = json.dumps(value, sort_keys=True)
        return text if len(text) <= 200 else text[:197] + "..."
    return value


def check_object(client, obj, manager, own=None):
    """The drift of one object: a list of {object, field, live, intended[, owners]}.

    With an ownership policy (``own``), our objects are compared with their creation annotation; on an
    adopted object only the fields we set count (the labels and fields its owner set are not drift, and
    ``remove_foreign`` must never remove them)."""
    ref = kc.ref(obj)
    resource = client.resource(obj["apiVersion"], obj["kind"])
    meta = obj["metadata"]
    live = client.get(resource, meta["name"], meta.get("namespace") if resource.namespaced else None)
    if live is None:
        return [{"object": ref, "field": "(the object)", "live": "absent", "intended": "present"}]
    cls = ownership.OURS
    if own:
        cls, obj = ownership.prepared(obj, live, own)
        if cls == ownership.FOREIGN:
            other = ownership.creator(live)
            whose = f"created by site {other!r}" if other else "not created by inference.blueprints"
            return [{"object": ref, "field": "(ownership)", "live": whose, "intended": f"created by {own['value']!r}"}]
    desired = engine.desired_fields(obj)
    stored = engine._as_stored(obj, desired)  # noqa: SLF001 - the engine's own stored form
    metadata = dict(stored.get("metadata") or {})
    stored_wo_meta = {k: v for k, v in stored.items() if k != "metadata"}
    found = value_diffs(stored_wo_meta, {k: live.get(k) for k in stored_wo_meta})
    for field in ("labels", "annotations"):
        if metadata.get(field):
            found += [
                (f"metadata.{p}", w, h)
                for p, w, h in value_diffs({field: metadata[field]}, {field: (live.get("metadata") or {}).get(field)})
            ]
    if cls != ownership.ADOPTED:
        found += extra_metadata(obj, live)
    owners = _managers_by_path(live, manager)
    out = []
    for path, want, have in found:
        who = sorted(set().union(*[w for p, w in owners.items() if p == path or p.startswith(path)] or [set()]))
        entry = {"object": ref, "field": path, "live": _readable(have), "intended": _readable(want)}
        if who:
            entry["owners"] = who
        out.append(entry)
    for path, want, have, who in foreign_fields(obj, live, manager) if cls != ownership.ADOPTED else []:
        out.append({"object": ref, "field": path, "live": have, "intended": want, "owners": who})
    conflicts = _conflicts(client, resource, obj, manager)
    if conflicts and not out:
        out.append({"object": ref, "field": "(field ownership)", "live": "; ".join(conflicts), "intended": manager})
    elif conflicts:
        out[0]["conflicts"] = conflicts
    return out


def _escape(token):
    return str(token).replace("~", "~0").replace("/", "~1")


def pointer(live, path):
    """The JSON pointer of a drift path on ``live`` (list items by key or index), or None."""
    tokens, node = [], live
    for part in path.replace("]", "").replace("[", ".[").split("."):
        if not part:
            continue
        if part.startswith("["):
            sel = part[1:]
            if isinstance(node, dict):  # labels[key], annotations[key]
                if sel not in node:
                    return None
                tokens.append(_escape(sel))
                node = node[sel]
                continue
            if not isinstance(node, list):
                return None
            if sel.isdigit():
                index = int(sel)
            else:
                pairs = dict(kv.split("=", 1) for kv in sel.split(",") if "=" in kv)
                index = next(
                    (i for i, item in enumerate(node) if all(str(item.get(k)) == v for k, v in pairs.items())), None
                )
            if index is None or index >= len(node):
                return None
            tokens.append(str(index))
            node = node[index]
        else:
            if not isinstance(node, dict) or part not in node:
                return None
            tokens.append(_escape(part))
            node = node[part]
    return "/" + "/".join(tokens)


def remove_foreign(client, obj, entries):
    """Remove the fields and labels others added to our object (entries with intended None)."""
    resource = client.resource(obj["apiVersion"], obj["kind"])
    meta = obj["metadata"]
    ns = meta.get("namespace") if resource.namespaced else None
    live = client.get(resource, meta["name"], ns)
    if live is None:
        return 0
    ops = [{"op": "remove", "path": p} for p in {pointer(live, e["field"]) for e in entries} if p]
    if ops:
        client.request(
            "PATCH",
            kc.resource_path(resource, meta["name"], ns),
            body=sorted(ops, key=lambda o: o["path"], reverse=True),
            content_type="application/json-patch+json",
        )
    return len(ops)


def dropped(client, objects, own, record):
    """Drift of the objects the stage's record names and ``objects`` no longer hold: each still on the cluster
    and the site's (so the next converge prunes it)."""
    out = []
    for ref in applied_record.stale(applied_record.read(client, own, record), objects, own, record):
        meta = ref["metadata"]
        try:
            resource = client.resource(ref["apiVersion"], ref["kind"])
        except kc.KindNotServed:
            continue
        live = client.get(resource, meta["name"], meta.get("namespace") if resource.namespaced else None)
        if live is not None and ownership.creator(live) == own["value"]:
            out.append(
                {
                    "object": kc.ref(ref),
                    "field": "(the object)",
                    "live": "present",
                    "intended": "absent (no longer rendered: a converge prunes it)",
                }
            )
    return out


def run(params, check_mode=False, diff=False, env=None):
    """The k8s_drift task: {drift: [...]}; with remove_foreign, the fields and labels others added to
    our objects are removed (changed); fails only on API errors."""
    del diff
    if not kc.HAS_KUBERNETES:
        return {"failed": True, "msg": f"k8s_drift needs the kubernetes Python package: {kc.KUBERNETES_IMPORT_ERROR}"}
    removed = 0
    try:
        client = kc.get_client(params, env)
        drift = []
        own = engine.owner_policy(params)
        for obj in params["objects"]:
            found = check_object(client, obj, params["field_manager"], own)
            drift.extend(found)
            foreign = [d for d in found if d["intended"] is None]
            if foreign and params.get("remove_foreign") and not check_mode:
                removed += remove_foreign(client, obj, foreign)
        if own and params.get("record"):
            drift.extend(dropped(client, params["objects"], own, params["record"]))
    except kc.ClientError as exc:
        return {"failed": True, "msg": str(exc)}
    lines = [f"{d['object']}: {d['field']}: live {d['live']!r}, intended {d['intended']!r}" for d in drift]
    return {
        "changed": removed > 0,
        "removed": removed,
        "drift": drift,
        "msg": "; ".join(lines) if lines else "no drift",
    }
