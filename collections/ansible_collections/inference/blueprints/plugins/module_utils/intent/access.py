# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Least privilege: the RBAC each stage needs, derived from what that stage renders, waits for and reads.

Nothing here is a hand-kept list of kinds. For one cluster's deployment intent, every object a
stage renders gives a rule for its (API group, resource) with the verbs our client uses on it,
scoped to the object's name:

- ``get`` (k8s_apply reads the live object first, k8s_wait and verify read it),
- ``create`` and ``patch`` (server-side apply is a PATCH; when the object is absent the API server
  also checks ``create`` for that name),
- ``delete`` (teardown).

Added to those:

- the reads of the cluster read (``cluster_facts.independent_reads``: nodes, namespaces, storage
  classes, Subscriptions, CSVs, the four schema CRDs, PackageManifests, ...) and of preflight's serving
  checks (``serving_preflight.paths``: the claims of pvc:// weights and the Secrets the site names, by name;
  the pods of every namespace, listed, for the GPUs they hold), for the platform stage, which is the one that
  runs the preflight;
- every wait of the stage (``get`` by name);
- the ClusterServiceVersions OLM installs for our Subscriptions: their names are chosen by the
  cluster at install time, so ``get`` and ``delete`` on CSVs are the one write right not scoped by name;
- the rules of every Role and ClusterRole the stage itself renders: the API server lets a subject
  create a role only with rights it holds (RBAC escalation prevention), so the stage holds them too;
- ``bind`` on a role a rendered binding refers to that the stage does not render;
- for serving, ``update`` on each LLMInferenceService it renders, by name: ``playbooks/canary.yml`` replaces
  the services it rolls (and restores them) with a PUT, which ``patch`` does not cover;
- for serving, ``list`` on the Pods of the serving namespace: verify's placement (``k8s_endpoints``) reads
  where the pods KServe's workloads made were bound (their names are the cluster's, not the intent's), and the
  stage's wait reads why they are not ready, with ``list`` on the namespace's Events (``k8s_wait``);
- ``list`` on every kind in each namespace the stage creates, by a Role in that namespace: before a teardown
  deletes a namespace it lists what is inside (``module_utils/removal_guard.py``), and keeps the namespace
  when anything there is not the site's or cannot be listed;
- for serving, the record of what the stage applied (``module_utils/applied_record.py``), by name. Pruning an
  object the plan dropped needs ``delete`` on it, which roles derived from the new plan do not name: run
  ``access.yml`` with the earlier inventory's roles still bound, or prune as an identity that may delete it.

The split per stage:

- **platform**: one ClusterRole, bound cluster-wide (operators, their namespaces and cluster policies
  are cluster work). Every rule names its objects. A Role in each operator namespace holds the list
  right above.
- **serving**: a Role in each namespace the stage writes to (the serving namespace), and a small
  ClusterRole for the stage's cluster-scoped objects (its Namespace, the metrics-reader ClusterRole
  and binding, a GatewayClass, an admission policy). The namespace is created with the access objects
  (``playbooks/access.yml``): a Role needs its namespace to exist.

``access(intent)`` returns the roles; ``bindings(roles, subject)`` binds them to a subject. The
playbook ``playbooks/access.yml`` prints, writes or applies both (docs/reliability.md, "Least privilege").
"""

from __future__ import annotations

import re

from ansible_collections.inference.blueprints.plugins.module_utils import (
    applied_record,
    cluster_facts,
    serving_preflight,
)

PREFIX = "inference-blueprints"
RBAC_API = "rbac.authorization.k8s.io/v1"
RBAC_GROUP = "rbac.authorization.k8s.io"
STAGES = ("platform", "serving")
LABELS = {"app.kubernetes.io/managed-by": f"{PREFIX}-access"}

# what our client does with an object it renders: k8s_apply GETs it, then applies it (PATCH, which
# the API server also authorizes as create when the object is absent); teardown DELETEs it
APPLY_VERBS = ("get", "create", "patch")
DELETE_VERBS = ("delete",)
WAIT_VERBS = ("get",)
NAMESPACE_LIST_VERBS = ("list",)
# the rule that gives: the one wildcard of the roles, read-only, in a Role of a namespace the stage creates
NAMESPACE_LIST_RULE = {"apiGroups": ["*"], "resources": ["*"], "verbs": ["list"]}
# what playbooks/canary.yml does beyond the serving stage's apply: it replaces (PUT) the LLMInferenceServices it
# rolls, and restores the exact previous object the same way (plugins/action/canary.py, Cluster.replace)
CANARY = {("serving.kserve.io", "LLMInferenceService"): ("update",)}
# verify's placement lists the serving namespace's Pods (k8s_endpoints; KServe and the LWS controller name them)
VERIFY_POD_VERBS = ("list",)
# the serving stage's wait lists the Warning events of the serving namespace: why its pods are not ready
WAIT_EVENT_VERBS = ("list",)
# kinds whose object names the cluster picks, not the intent: OLM names a Subscription's CSV
UNNAMED = {("operators.coreos.com", "ClusterServiceVersion"): ("get", "delete")}
# the groups whose reads the cluster read makes when the cluster serves them (all of them on OpenShift)
READ_GROUPS = frozenset(
    (
        "config.openshift.io",
        "operators.coreos.com",
        "packages.operators.coreos.com",
        "machineconfiguration.openshift.io",
    )
)
SUBJECT_KINDS = ("ServiceAccount", "User", "Group")
# the options of inference.blueprints.access (its action plugin and its module's spec)
ARGUMENT_SPEC = {
    "stages": {"type": "list", "elements": "str", "choices": list(STAGES), "default": list(STAGES)},
    "subject": {
        "type": "dict",
        "options": {
            "kind": {"type": "str", "required": True, "choices": list(SUBJECT_KINDS)},
            "name": {"type": "str", "required": True},
            "namespace": {"type": "str"},
        },
    },
    "dest": {"type": "path"},
}


def group_of(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def plural(kind: str) -> str:
    """The resource name of a kind, by the rule Kubernetes and CRD authors follow: lower case, ``-s``,
    ``-es`` after an ``s``, ``-ies`` after a consonant and ``y``. (tests/integration/test_access_rules.py
    holds every kind the examples render to the plural the API server serves.)"""
    low = kind.lower()
    if low.endswith("s"):
        return low + "es"
    if low.endswith("y") and len(low) > 1 and low[-2] not in "aeiou":
        return low[:-1] + "ies"
    return low + "s"


_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<resource>[^/]+)(?:/(?P<name>[^/]+))?$"
)


def read_rule(path: str) -> tuple[str, str, str | None, str, str | None]:
    """``(group, resource, namespace, verb, name)`` of one GET path: a collection is ``list``, an object ``get``.

    ``/api/v1/namespaces`` and ``/api/v1/namespaces/<name>`` are the namespaces resource itself."""
    m = _PATH.match(path)
    if not m:
        raise ValueError(f"not a resource path: {path}")
    group = "" if m.group("core") else m.group("group")
    ns, resource, name = m.group("ns"), m.group("resource"), m.group("name")
    if group == "" and ns is None and resource == "namespaces" and name is None:
        return group, "namespaces", None, "list", None
    return group, resource, ns, ("get" if name else "list"), name


class Grants:
    """Rights gathered per scope: ``None`` is cluster-wide (a ClusterRole), a name is one namespace (a Role)."""

    def __init__(self):
        self._named: dict = {}  # (scope, group, resource, verb) -> set of names
        self._any: dict = {}  # (scope, group, resource) -> set of verbs on every object
        self._urls: dict = {}  # verb -> non-resource URLs (cluster scope only)
        self._copied: dict = {}  # scope -> rules copied whole from rendered roles

    def add(self, scope, group, resource, verbs, name=None):
        for verb in verbs:
            if name is None:
                self._any.setdefault((scope, group, resource), set()).add(verb)
            else:
                self._named.setdefault((scope, group, resource, verb), set()).add(name)

    def copy_rule(self, scope, rule: dict):
        if rule.get("nonResourceURLs"):
            for verb in rule.get("verbs") or []:
                self._urls.setdefault(verb, set()).update(rule["nonResourceURLs"])
            return
        rules = self._copied.setdefault(scope, [])
        if rule not in rules:
            rules.append(rule)

    def scopes(self):
        out = {k[0] for k in self._named} | {k[0] for k in self._any} | set(self._copied)
        if self._urls:
            out.add(None)
        return sorted(out, key=lambda s: (s is not None, s or ""))

    def rules(self, scope) -> list[dict]:
        """Deterministic rules: one per (group, resource, verbs, names)."""
        anyv = {(g, r): v for (s, g, r), v in self._any.items() if s == scope}
        named: dict = {}
        for (s, g, r, verb), names in self._named.items():
            if s != scope or verb in anyv.get((g, r), ()):
                continue  # a verb held on every object needs no names
            named.setdefault((g, r, tuple(sorted(names))), set()).add(verb)
        rules = []
        for (g, r), verbs in sorted(anyv.items()):
            rules.append({"apiGroups": [g], "resources": [r], "verbs": sorted(verbs)})
        # objects with the same verbs and group share a rule
        merged: dict = {}
        for (g, r, names), verbs in named.items():
            merged.setdefault((g, tuple(sorted(verbs)), names), []).append(r)
        for (g, verbs, names), resources in sorted(merged.items()):
            rules.append(
                {"apiGroups": [g], "resources": sorted(resources), "resourceNames": list(names), "verbs": list(verbs)}
            )
        rules.extend(self._copied.get(scope, []))
        if scope is None:
            for verb, urls in sorted(self._urls.items()):
                rules.append({"nonResourceURLs": sorted(urls), "verbs": [verb]})
        return rules


def _meta(name: str, stage: str, namespace: str | None = None) -> dict:
    meta = {"name": name, "labels": {**LABELS, f"{PREFIX}/stage": stage}}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _add_objects(grants: Grants, objects: list[dict], stage: str, verbs) -> None:
    rendered_roles = {(o["kind"], (o["metadata"].get("namespace")), o["metadata"]["name"]) for o in objects}
    for obj in objects:
        group, kind = group_of(obj["apiVersion"]), obj["kind"]
        meta = obj["metadata"]
        ns = meta.get("namespace")
        # the platform holds every right cluster-wide; serving holds namespaced rights in their namespace
        scope = ns if (stage == "serving" and ns) else None
        grants.add(scope, group, plural(kind), verbs, meta["name"])
        if group == RBAC_GROUP and kind in ("Role", "ClusterRole"):
            for rule in obj.get("rules") or []:
                grants.copy_rule(scope if kind == "Role" else None, rule)
        if group == RBAC_GROUP and kind in ("RoleBinding", "ClusterRoleBinding"):
            ref = obj.get("roleRef") or {}
            ref_ns = ns if ref.get("kind") == "Role" else None
            if (ref.get("kind"), ref_ns, ref.get("name")) not in rendered_roles:
                bind_scope = scope if ref.get("kind") == "Role" else None
                grants.add(bind_scope, RBAC_GROUP, plural(ref.get("kind", "ClusterRole")), ("bind",), ref.get("name"))


def _add_waits(grants: Grants, waits: list[dict], stage: str) -> None:
    for w in waits:
        ns = w.get("namespace")
        scope = ns if (stage == "serving" and ns) else None
        grants.add(scope, group_of(w["apiVersion"]), plural(w["kind"]), WAIT_VERBS, w.get("name"))


def _add_reads(grants: Grants, packages, serving_needs=None) -> None:
    paths = cluster_facts.independent_reads(READ_GROUPS, packages)
    if serving_needs is not None:  # preflight's serving checks: the claims and Secrets by name, the pods listed
        paths += serving_preflight.paths(serving_needs)
    for path in paths:
        group, resource, _ns, verb, name = read_rule(path.split("?", 1)[0])
        grants.add(None, group, resource, (verb,), name)


def stage_grants(intent: dict, stage: str, rendered: dict) -> Grants:
    """The rights of one stage from what it renders: ``rendered`` holds ``objects``, ``waits`` and,
    for the platform, ``removal`` (the objects teardown deletes, which include installed CSVs)."""
    grants = Grants()
    _add_objects(grants, rendered["objects"], stage, APPLY_VERBS + DELETE_VERBS)
    _add_objects(grants, rendered.get("removal") or [], stage, DELETE_VERBS + WAIT_VERBS)
    _add_waits(grants, rendered["waits"], stage)
    for ref in rendered.get("references") or []:  # the stage checks that they exist (get, by name)
        scope = ref.get("namespace") if stage == "serving" else None
        grants.add(scope, group_of(ref["apiVersion"]), plural(ref["kind"]), ("get",), ref["name"])
    # a teardown lists every kind in a namespace the stage created before deleting it (removal_guard.py): read
    # rights there alone, held by a Role in that namespace (so no read of any other namespace's Secrets)
    for obj in rendered["objects"]:
        if obj["kind"] == "Namespace" and obj["apiVersion"] == "v1":
            grants.add(obj["metadata"]["name"], "*", "*", NAMESPACE_LIST_VERBS)
    if stage == "serving":
        rolled = [o for o in rendered["objects"] if (group_of(o["apiVersion"]), o["kind"]) in CANARY]
        for obj in rolled:
            verbs = CANARY[(group_of(obj["apiVersion"]), obj["kind"])]
            grants.add(obj["metadata"].get("namespace"), group_of(obj["apiVersion"]), plural(obj["kind"]), verbs,
                       obj["metadata"]["name"])  # fmt: skip
        if intent["serving"]["models"]:
            grants.add(intent["serving"]["namespace"], "", "pods", VERIFY_POD_VERBS)
            # the serving wait reads the pods and Warning events behind its workloads (module_utils/wait_causes.py)
            grants.add(intent["serving"]["namespace"], "", "events", WAIT_EVENT_VERBS)
        # the stage's record of what it applied, read, written and removed by name (applied_record.py)
        record = applied_record.name_of(intent["ownership"]["value"], "serving")
        grants.add(intent["serving"]["namespace"], "", "configmaps", APPLY_VERBS + DELETE_VERBS, record)
    if stage == "platform":
        _add_reads(
            grants, intent["platform"]["preflight"]["packages"], intent["platform"]["requirements"].get("serving")
        )
        for (group, kind), verbs in UNNAMED.items():
            if any(group_of(o["apiVersion"]) == "operators.coreos.com" for o in rendered["objects"]):
                grants.add(None, group, plural(kind), verbs)
    return grants


def role_names(intent: dict) -> dict:
    """One set per cluster host, so that two sites (or two hosts of a fleet tested on one cluster)
    never overwrite each other's roles: ``inference-blueprints-<host>-<stage>``."""
    host = re.sub(r"[^a-z0-9.-]+", "-", intent["host"].lower()).strip("-.")
    return {
        "platform": f"{PREFIX}-{host}-platform",
        "serving_cluster": f"{PREFIX}-{host}-serving",
        "serving": f"{PREFIX}-{host}-serving",
    }


def access(intent: dict, rendered: dict) -> dict:
    """``{stage: [Role and ClusterRole objects]}`` for the stages in ``rendered``
    (``{stage: {objects, waits, removal}}``)."""
    names = role_names(intent)
    out = {}
    for stage in STAGES:
        if stage not in rendered:
            continue
        grants = stage_grants(intent, stage, rendered[stage])
        roles = []
        for scope in grants.scopes():
            rules = grants.rules(scope)
            if not rules:
                continue
            if scope is None:
                name = names["platform"] if stage == "platform" else names["serving_cluster"]
                roles.append(
                    {"apiVersion": RBAC_API, "kind": "ClusterRole", "metadata": _meta(name, stage), "rules": rules}
                )
            else:
                roles.append(
                    {
                        "apiVersion": RBAC_API,
                        "kind": "Role",
                        "metadata": _meta(names["platform" if stage == "platform" else "serving"], stage, scope),
                        "rules": rules,
                    }
                )
        out[stage] = roles
    return out


def subject_of(kind: str, name: str, namespace: str | None = None) -> dict:
    """An RBAC subject; raises ValueError naming the variable when it is incomplete."""
    if kind not in SUBJECT_KINDS:
        raise ValueError(f"access_subject.kind: {kind!r} is not a subject kind; valid: {', '.join(SUBJECT_KINDS)}")
    if not name:
        raise ValueError("access_subject.name: empty; give the ServiceAccount, User or Group to grant the stages to")
    if kind == "ServiceAccount":
        if not namespace:
            raise ValueError("access_subject.namespace: a ServiceAccount subject needs its namespace")
        return {"kind": kind, "name": name, "namespace": namespace}
    return {"kind": kind, "apiGroup": RBAC_GROUP, "name": name}


def bindings(roles: dict, subject: dict) -> list[dict]:
    """A ClusterRoleBinding for each ClusterRole and a RoleBinding for each Role, to ``subject``."""
    out = []
    for stage, objs in roles.items():
        for role in objs:
            meta = role["metadata"]
            kind = "ClusterRoleBinding" if role["kind"] == "ClusterRole" else "RoleBinding"
            out.append(
                {
                    "apiVersion": RBAC_API,
                    "kind": kind,
                    "metadata": _meta(meta["name"], stage, meta.get("namespace")),
                    "roleRef": {"apiGroup": RBAC_GROUP, "kind": role["kind"], "name": meta["name"]},
                    "subjects": [subject],
                }
            )
    return out


def namespaces_needed(roles: dict, rendered: dict) -> list[dict]:
    """The Namespace objects a stage renders that its Roles live in: created with the access objects."""
    wanted = {r["metadata"]["namespace"] for objs in roles.values() for r in objs if r["kind"] == "Role"}
    out = []
    for stage_rendered in rendered.values():
        for obj in stage_rendered["objects"]:
            is_ns = obj["kind"] == "Namespace" and obj["apiVersion"] == "v1"
            if is_ns and obj["metadata"]["name"] in wanted and obj not in out:
                out.append(obj)
    return out


def summary(roles: dict) -> list[str]:
    """One line per role: its name and what it may do."""
    lines = []
    for stage, objs in roles.items():
        for role in objs:
            meta = role["metadata"]
            where = f" in {meta['namespace']}" if meta.get("namespace") else " (cluster-wide)"
            parts = []
            for rule in role["rules"]:
                if rule.get("nonResourceURLs"):
                    parts.append(f"{'/'.join(rule['verbs'])} {','.join(rule['nonResourceURLs'])}")
                    continue
                group = rule["apiGroups"][0] or "core"
                names = f" [{len(rule['resourceNames'])} named]" if rule.get("resourceNames") else ""
                parts.append(f"{'/'.join(rule['verbs'])} {','.join(rule['resources'])}.{group}{names}")
            lines.append(
                f"{stage}: {role['kind']} {meta['name']}{where}: {len(role['rules'])} rules: " + "; ".join(parts)
            )
    return lines
