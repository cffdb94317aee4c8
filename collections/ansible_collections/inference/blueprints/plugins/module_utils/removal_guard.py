# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a removal must not take with it: objects that are not the site's, lost by cascade.

Deleting a Namespace deletes everything in it, and deleting an object lets the garbage collector delete
every object whose ownerReferences name only it. Before a removal deletes anything, it lists the
namespaces it touches (every namespaced kind the API serves that can be listed and deleted: a fresh
discovery, so a CRD a user installed since is seen) and sorts each object there (``Census``):

``site``       it carries this site's ``created-by`` annotation, or the policy names it in ``derived``;
``made``       a controller made it from one of the site's objects: it has an ownerReference with
               ``controller: true`` (pods of a ReplicaSet, EndpointSlices of a Service, what KServe
               makes of an LLMInferenceService, KEDA's HPA of a ScaledObject), or one naming an OLM
               object (``operators.coreos.com``: what OLM installs for a CSV), to an object that is
               itself the site's or made; or it is the Endpoints of such a Service;
``shared``     what a controller makes once per namespace for all the objects of one kind there, without an
               ownerReference, and deletes with the last of them (``SHARED``: OpenShift AI's KServe's monitoring
               objects for the namespace's LLMInferenceServices), while every object of that kind in the
               namespace is the site's or made (none of another's would still need it);
``automatic``  what the control plane makes in every namespace, or keeps as a record
               (``AUTOMATIC``: the ``kube-root-ca.crt`` ConfigMap, the ``default`` ServiceAccount and
               OpenShift's ``builder``/``deployer`` with their token and pull Secrets, OpenShift's
               image-puller and builder RoleBindings, OLM's copied CSVs, Events, Leases);
``garbage``    going whatever the removal does: being deleted, or every owner it names is gone;
``foreign``    anything else: a user's ConfigMap, Secret or custom resource, another site's object, or an
               object a user made with an ownerReference (not a controller's) to one of ours.

A Namespace holding a foreign object is kept, and the removal says which objects kept it. A site object whose
dependents (made ones, transitively) include a foreign object is deleted with ``propagationPolicy=Orphan``
(the garbage collector then only drops the reference to it), and its made dependents are deleted one by one
the same way, so that only the foreign object stays. A kind the removal may not list (403) in a namespace
keeps that namespace: what it cannot see, it cannot prove is the site's.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ansible_collections.inference.blueprints.plugins.module_utils import k8s_client as kc
from ansible_collections.inference.blueprints.plugins.module_utils import ownership

WORKERS = 8
GONE = {"gone": True}  # an owner that no longer exists (the marker, compared by identity)
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
OLM_GROUP = "operators.coreos.com"

# (group, kind) -> names (None: every object of the kind) -> why the control plane made it
AUTOMATIC = {
    ("", "ConfigMap"): {
        "kube-root-ca.crt": "the cluster CA, published in every namespace by kube-controller-manager",
        "openshift-service-ca.crt": "the service CA, published in every namespace by OpenShift",
    },
    ("", "ServiceAccount"): {
        "default": "made in every namespace by kube-controller-manager",
        "builder": "made in every namespace by OpenShift",
        "deployer": "made in every namespace by OpenShift",
    },
    ("rbac.authorization.k8s.io", "RoleBinding"): {
        "system:image-pullers": "made in every namespace by OpenShift",
        "system:image-builders": "made in every namespace by OpenShift",
        "system:deployers": "made in every namespace by OpenShift",
    },
    ("", "Event"): None,
    ("events.k8s.io", "Event"): None,
    ("coordination.k8s.io", "Lease"): None,
}
RECORDS = "a record the control plane keeps (events, leader-election leases)"
# What a controller makes once per namespace for all the objects of one kind there (no ownerReference) and deletes
# itself with the last of them: {name: (the labels that mark it, (group, kind) it serves, who makes it)}.
SHARED = {
    "llm-monitoring": (
        {"app.kubernetes.io/part-of": "llminferenceservice", "app.kubernetes.io/component": "llm-monitoring"},
        ("serving.kserve.io", "LLMInferenceService"),
        # kserve pkg/controller/v1alpha2/llmisvc/monitoring.go (OpenShift AI 3.5): the metrics reader ServiceAccount
        # and its token Secret, the engines' PodMonitors and the scheduler's ServiceMonitors of the namespace,
        # removed by cleanupMonitoringResources when its last LLMInferenceService is deleted
        "KServe's LLMInferenceService controller, for every LLMInferenceService of the namespace",
    ),
}
# the annotations by which a token or image-pull Secret names the ServiceAccount it was made for
SA_SECRET_TYPES = ("kubernetes.io/service-account-token", "kubernetes.io/dockercfg")
SA_ANNOTATIONS = ("kubernetes.io/service-account.name", "openshift.io/internal-registry-auth-token.service-account")


def group_of(api_version: str) -> str:
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def listable_kinds(client) -> list:
    """Every namespaced kind the API serves that can be listed and deleted, at its group's preferred version,
    from a fresh discovery (a CRD made since the cache was written counts)."""
    client.discovery.refresh()
    out, seen = [], set()
    for group, versions in sorted(client.discovery.served().items()):
        for version in versions[:1]:
            api_version = f"{group}/{version}" if group else version
            for kind, (plural, namespaced, verbs, _subs) in sorted(client.discovery.kinds(api_version).items()):
                if not namespaced or "list" not in verbs or "delete" not in verbs or (group, kind) in seen:
                    continue
                seen.add((group, kind))
                out.append(kc.Resource(group, version, kind, plural, True, tuple(verbs), ()))
    return out


def _list(client, resource, namespace):
    """Every object of one kind in ``namespace`` (metadata only, but for Secrets: their type counts)."""
    accept = "application/json" if (resource.group, resource.kind) == ("", "Secret") else METADATA_ONLY
    items, cont = [], None
    while True:
        query = {"limit": "500", **({"continue": cont} if cont else {})}
        page = client.request("GET", kc.resource_path(resource, None, namespace), query=query, accept=accept)
        for item in page.get("items") or []:
            items.append({**item, "apiVersion": kc.api_version_of(resource), "kind": resource.kind})
        cont = (page.get("metadata") or {}).get("continue")
        if not cont:
            return items


def list_namespaces(client, namespaces) -> tuple[list[dict], dict]:
    """(every object in ``namespaces``, {namespace: [kinds that could not be listed, with why]})."""
    if not namespaces:
        return [], {}
    kinds = listable_kinds(client)
    jobs = [(r, ns) for ns in sorted(namespaces) for r in kinds]
    objects, unreadable = [], {}

    def one(job):
        resource, ns = job
        try:
            return job, _list(client, resource, ns), None
        except kc.ApiError as exc:
            if exc.status == 404:  # the namespace or the kind went meanwhile
                return job, [], None
            return job, [], f"{resource.kind}.{resource.group or 'core'} ({exc.status} {exc.reason})"
        except kc.ClientError as exc:
            return job, [], f"{resource.kind}.{resource.group or 'core'} ({exc})"

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        for (_resource, ns), items, error in pool.map(one, jobs):
            objects.extend(items)
            if error:
                unreadable.setdefault(ns, []).append(error)
    return objects, unreadable


class Census:
    """The objects of some namespaces, sorted for one site (see the module docstring)."""

    def __init__(self, objects, own, lookup=None):
        self.own = own
        self.objects = list(objects)
        self.by_uid = {o["metadata"].get("uid"): o for o in self.objects if o["metadata"].get("uid")}
        self.lookup = lookup  # (ownerReference, namespace) -> the live owner or None, for owners not listed here
        self._made: dict = {}
        self.dependents: dict = {}
        for obj in self.objects:
            for ref in obj["metadata"].get("ownerReferences") or []:
                self.dependents.setdefault(ref.get("uid"), []).append(obj)

    def add(self, obj):
        """An object of the removal not listed here (cluster-scoped): known by uid."""
        uid = (obj.get("metadata") or {}).get("uid")
        if uid and uid not in self.by_uid:
            self.by_uid[uid] = obj

    def is_site(self, obj) -> bool:
        return ownership.creator(obj) == self.own["value"] or ownership.ref(obj) in (self.own.get("derived") or ())

    def _owner(self, ref, namespace):
        """The owner an ownerReference names: the object, ``GONE`` (it no longer exists: another object of that
        name is not it), or None (it could not be read)."""
        owner = self.by_uid.get(ref.get("uid"))
        if owner is None and self.lookup is not None:
            owner = self.lookup(ref, namespace)
            if owner is None:
                return None
            if owner is GONE or (owner.get("metadata") or {}).get("uid") != ref.get("uid"):
                owner = GONE
            self.by_uid[ref.get("uid")] = owner
        return owner

    def garbage(self, obj) -> bool:
        """Going whatever the removal does: being deleted already, or every owner it names is gone (the garbage
        collector deletes it)."""
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            return True
        refs = meta.get("ownerReferences") or []
        return bool(refs) and all(self._owner(r, meta.get("namespace")) is GONE for r in refs)

    def made(self, obj) -> bool:
        """A controller made ``obj`` from one of the site's objects (directly or down a chain)."""
        uid = obj["metadata"].get("uid")
        if uid in self._made:
            return self._made[uid]
        self._made[uid] = False  # a cycle proves nothing
        result = False
        ns = obj["metadata"].get("namespace")
        for ref in obj["metadata"].get("ownerReferences") or []:
            if not (ref.get("controller") or group_of(ref.get("apiVersion", "")) == OLM_GROUP):
                continue
            owner = self._owner(ref, ns)
            if owner not in (None, GONE) and (self.is_site(owner) or self.made(owner)):
                result = True
                break
        if not result and (group_of(obj["apiVersion"]), obj["kind"]) == ("", "Endpoints"):
            service = self._named("", "Service", ns, obj["metadata"]["name"])
            result = service is not None and (self.is_site(service) or self.made(service))
        self._made[uid] = result
        return result

    def _named(self, group, kind, namespace, name):
        for o in self.objects:
            meta = o["metadata"]
            if (group_of(o["apiVersion"]), o["kind"], meta.get("namespace"), meta["name"]) == (
                group,
                kind,
                namespace,
                name,
            ):
                return o
        return None

    def shared(self, obj) -> str | None:
        """Why ``obj`` goes with the site's objects of its namespace (``SHARED``: a controller made it for all of them
        and deletes it with the last), or None when it matches no rule or another party's object there still
        needs it."""
        labels = obj["metadata"].get("labels") or {}
        ns = obj["metadata"].get("namespace")
        for marks, (group, kind), who in SHARED.values():
            if any(labels.get(k) != v for k, v in marks.items()):
                continue
            served = [
                o
                for o in self.objects
                if (group_of(o["apiVersion"]), o["kind"]) == (group, kind) and o["metadata"].get("namespace") == ns
            ]
            if all(self.is_site(o) or self.made(o) for o in served):
                return f"made by {who}; none of them is another's"
        return None

    def automatic(self, obj) -> str | None:
        """Why the control plane made ``obj`` (it is no one's to keep), or None."""
        key = (group_of(obj["apiVersion"]), obj["kind"])
        meta = obj["metadata"]
        if key in AUTOMATIC:
            names = AUTOMATIC[key]
            if names is None:
                return RECORDS
            return names.get(meta["name"])
        if key == (OLM_GROUP, "ClusterServiceVersion") and "olm.copiedFrom" in (meta.get("labels") or {}):
            return "a copy OLM makes in every namespace of an operator installed for all namespaces"
        if key == ("", "Secret") and obj.get("type") in SA_SECRET_TYPES:
            annotations = meta.get("annotations") or {}
            account = next((annotations[a] for a in SA_ANNOTATIONS if annotations.get(a)), None)
            sa = self._named("", "ServiceAccount", meta.get("namespace"), account) if account else None
            if sa is not None and (self.is_site(sa) or self.made(sa) or self.automatic(sa) or self.shared(sa)):
                return f"the token or pull secret the control plane made for ServiceAccount {account}"
        return None

    def foreign(self, obj) -> bool:
        return not (self.is_site(obj) or self.made(obj) or self.automatic(obj) or self.shared(obj) or self.garbage(obj))

    def foreign_in(self, namespace) -> list[dict]:
        return [o for o in self.objects if o["metadata"].get("namespace") == namespace and self.foreign(o)]

    def at_risk(self, uid, seen=None) -> list[dict]:
        """The foreign objects the garbage collector would delete with the object ``uid`` (down made chains)."""
        seen = set() if seen is None else seen
        if uid in seen:
            return []
        seen.add(uid)
        out = []
        for dep in self.dependents.get(uid, []):
            if self.foreign(dep):
                out.append(dep)
            else:
                out.extend(self.at_risk(dep["metadata"].get("uid"), seen))
        return out

    def children(self, uid) -> list[dict]:
        """The dependents of ``uid`` that go with it (the site's, made from it, or the control plane's)."""
        return [d for d in self.dependents.get(uid, []) if not self.foreign(d)]


def describe(objs) -> str:
    return ", ".join(sorted(ownership.ref(o) + _whose(o) for o in objs))


def _whose(obj) -> str:
    other = ownership.creator(obj)
    return f" (site {other!r})" if other else ""


def _lookup(client):
    def find(ref, namespace):
        try:
            resource = client.resource(ref["apiVersion"], ref["kind"])
            live = client.get(resource, ref["name"], namespace if resource.namespaced else None)
        except kc.KindNotServed:
            return GONE  # no object of a kind the cluster no longer serves exists
        except (kc.ClientError, KeyError):
            return None  # an owner we cannot read proves nothing: its dependent counts as foreign
        return GONE if live is None else live

    return find


def is_namespace(obj) -> bool:
    return obj["kind"] == "Namespace" and obj["apiVersion"] == "v1"


def plan(client, items, own):
    """What a removal of ``items`` (the site's objects, read: ``.obj``, ``.live``, ``.resource``, ``.index``)
    must not take with it: ``(census, {index: why a Namespace is kept}, {index: [foreign dependents]})``.
    The second: Namespaces holding foreign objects (or kinds that could not be listed); the third: objects
    to delete with propagationPolicy=Orphan, each with the foreign objects the cascade would have deleted."""
    present = [i for i in items if i.live is not None]
    names = {i.obj["metadata"]["name"] for i in present if is_namespace(i.obj)}
    namespaces = names | {i.obj["metadata"].get("namespace") for i in present if i.resource.namespaced}
    objects, unreadable = list_namespaces(client, sorted(n for n in namespaces if n))
    census = Census(objects, own, lookup=_lookup(client))
    for item in present:
        census.add(item.live)
    keep_ns, orphan = {}, {}
    for item in present:
        if is_namespace(item.obj):
            name = item.obj["metadata"]["name"]
            foreign, blind = census.foreign_in(name), unreadable.get(name) or []
            if foreign or blind:
                keep_ns[item.index] = namespace_reason(own, foreign, blind)
                item.live = None
            continue
        risk = census.at_risk(item.live["metadata"].get("uid"))
        if risk:
            orphan[item.index] = risk
    return census, keep_ns, orphan


SPARED = "the site created it, but "


def namespace_reason(own, foreign, blind) -> str:
    """Why a Namespace the site created is kept (starts with ``SPARED``)."""
    parts = []
    if foreign:
        parts.append(f"it holds {len(foreign)} object(s) not created by site {own['value']!r}: {describe(foreign)}")
    if blind:
        kinds = ", ".join(sorted(blind))
        parts.append(f"these kinds could not be listed in it, so it cannot be shown to hold only the site's: {kinds}")
    return SPARED + "; ".join(parts) + ". The site's own objects in it were deleted; the namespace and the rest stay"


def remove_made(client, census, uid, check_mode=False) -> list[tuple]:
    """Delete what was made from the object ``uid`` (deleted with propagationPolicy=Orphan): each dependent
    whose own dependents hold nothing foreign with the default cascade, the others the same way, down.
    ``[(object, resource, existed)]``."""
    out = []
    for child in census.children(uid):
        meta = child["metadata"]
        try:
            resource = client.resource(child["apiVersion"], child["kind"])
        except kc.KindNotServed:
            continue
        risky = bool(census.at_risk(meta.get("uid")))
        existed = client.delete(
            resource,
            meta["name"],
            meta.get("namespace") if resource.namespaced else None,
            dry_run=check_mode,
            propagation="Orphan" if risky else "Background",
        )
        out.append((child, resource, existed))
        if risky:
            out.extend(remove_made(client, census, meta.get("uid"), check_mode))
    return out


def kept_lines(results) -> list[str]:
    """A line for every object a removal kept because something not the site's is in it or hangs on it."""
    out = []
    for r in results:
        where = f"{r['kind']}/{r['namespace'] + '/' if r.get('namespace') else ''}{r['name']}"
        if r["action"] == "kept" and is_namespace(r) and r.get("reason", "").startswith(SPARED):
            out.append(f"kept {where}: {r['reason']}")
        elif r.get("kept_dependents"):
            out.append(
                f"deleted {where} without the objects that name it as owner and are not the site's, which were "
                f"kept: {', '.join(r['kept_dependents'])}"
            )
    return out
