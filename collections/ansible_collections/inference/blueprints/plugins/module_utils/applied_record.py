# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a site applied before: the record that lets a converge prune objects dropped from its plan.

A converge applies what the current intent renders. An object an earlier converge created and the intent no
longer renders (the ScaledObject and TriggerAuthentication of a model that stopped autoscaling, every object
of a removed model) would stay forever: nothing renders it, so neither drift nor teardown would name it.

So every full apply of a stage records the objects it applied, on the cluster it applied them to, in a
ConfigMap of the site (``inference-blueprints-applied-<site>-<stage>``, in the stage's namespace, carrying
the site's ``created-by`` annotation). The next full apply of that stage on that cluster reads it back
(one GET, no scan of the cluster; rewritten only when the set changed), and every recorded object
the intent no longer renders is a candidate:

- it is pruned only when its live copy carries this site's ``created-by`` annotation (never anything else:
  an object the site adopted, another site's, or one recreated by a user stays, named as kept);
- the removal is the teardown's (``k8s_apply`` ``state=absent`` with the site's ownership policy, so
  ``removal_guard`` keeps anything not the site's that would go with it);
- check mode lists what would be pruned and deletes nothing; drift reports each as drift;
- a teardown removes the recorded objects with the rendered ones, and the record last.

A record is kept per site, per stage and per cluster: an apply of the serving stage reads and writes the
serving record only, so it never prunes what the platform stage applied. An apply of a few components
(``components``) neither prunes nor records: it does not render the whole stage.
"""

from __future__ import annotations

import hashlib
import json
import re

from ansible_collections.inference.blueprints.plugins.module_utils import k8s_client as kc
from ansible_collections.inference.blueprints.plugins.module_utils import ownership

PREFIX = "inference-blueprints-applied"
KEY = "objects"
LABELS = {"app.kubernetes.io/managed-by": "inference-blueprints", "inference-blueprints/record": "applied"}

ARGUMENT_SPEC = dict(
    type="dict",
    options=dict(
        stage=dict(type="str", required=True),
        namespace=dict(type="str", required=True),
    ),
)


def name_of(site: str, stage: str) -> str:
    """The record's name: DNS-1123, at most 253 characters (a long site name is shortened with a hash)."""
    base = re.sub(r"[^a-z0-9-]+", "-", f"{site}-{stage}".lower()).strip("-")
    name = f"{PREFIX}-{base}"
    if len(name) > 63:
        digest = hashlib.sha256(base.encode()).hexdigest()[:10]
        name = f"{name[:52].rstrip('-')}-{digest}"
    return name


def key(obj: dict) -> tuple:
    meta = obj.get("metadata") or {}
    return (obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])


def ref_object(k: tuple) -> dict:
    api_version, kind, namespace, name = k
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


def record_object(own: dict, spec: dict, objects: list[dict]) -> dict:
    """The record ConfigMap of ``objects`` (the stage's applied objects), annotated as the site's."""
    refs = sorted({key(o) for o in objects})
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name_of(own["value"], spec["stage"]), "namespace": spec["namespace"], "labels": LABELS},
        "data": {KEY: json.dumps([list(r) for r in refs], separators=(",", ":"))},
    }
    return ownership.stamp(cm, own)


def read(client, own: dict, spec: dict) -> list[tuple] | None:
    """The keys the stage's last full apply recorded, or None when there is no record yet. A ConfigMap of that
    name that is not the site's stops the apply (before its first write: ``k8s_apply`` reads it first)."""
    resource = client.resource("v1", "ConfigMap")
    name = name_of(own["value"], spec["stage"])
    try:
        live = client.get(resource, name, spec["namespace"])
    except kc.ApiError as exc:
        # a subject whose right to read the record was a Role in its namespace loses it with the namespace
        if exc.status == 403 and client.get(client.resource("v1", "Namespace"), spec["namespace"]) is None:
            return None
        raise
    if live is None:
        return None
    if ownership.creator(live) != own["value"]:
        raise kc.ClientError(
            f"ConfigMap {spec['namespace']}/{name} exists and was not created by site {own['value']!r}: it is the "
            "name of the site's record of what its serving stage applied (module_utils/applied_record.py). Nothing "
            "was applied. Rename or delete that ConfigMap (it is not the site's, so the collection never touches it)"
        )
    try:
        return [tuple(r) for r in json.loads((live.get("data") or {}).get(KEY) or "[]")]
    except (ValueError, TypeError):
        return None


def stale(previous: list[tuple] | None, objects: list[dict], own: dict, spec: dict) -> list[dict]:
    """The recorded objects ``objects`` no longer hold, as bare references (apiVersion, kind, name, namespace)."""
    current = {key(o) for o in objects} | {key(record_object(own, spec, []))}
    return [ref_object(k) for k in previous or [] if k not in current]


def write(client, record: dict, field_manager: str, previous: list[tuple] | None) -> bool:
    """Apply ``record`` (a ``record_object``); no request when the live one already names the same objects.
    True when written."""
    if previous is not None and [list(k) for k in sorted(set(previous))] == json.loads(record["data"][KEY]):
        return False
    client.apply(client.resource("v1", "ConfigMap"), record, field_manager=field_manager, force=True, dry_run=False)
    return True


def record_ref(own: dict, spec: dict) -> dict:
    """The record itself as a bare reference (a teardown deletes it last)."""
    return ref_object(key(record_object(own, spec, [])))
