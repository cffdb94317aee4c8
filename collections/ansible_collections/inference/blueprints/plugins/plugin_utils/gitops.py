# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write a site's GitOps repository tree (delivery=gitops) from its clusters' deployment intents.

The layout and the Argo CD objects are decided in ``module_utils/intent/gitops.py``; this
writes them: every component's objects (the same templates the apply path renders), a
kustomization per directory, the Applications and the AppProject, with the one tree writer
(module_utils/render_tree.py): files are written only when their content changes, files the
render wrote that are no longer intended are removed, and files it did not write are never
touched; a second run writes nothing and the tree is byte-identical.
"""

from __future__ import annotations

import json
import os

import yaml
from ansible_collections.inference.blueprints.plugins.module_utils import kind_scope, ownership, render_tree
from ansible_collections.inference.blueprints.plugins.module_utils.intent import gitops as gitops_mod
from ansible_collections.inference.blueprints.plugins.module_utils.intent import waits as waits_mod
from ansible_collections.inference.blueprints.plugins.plugin_utils import platform as platform_render
from ansible_collections.inference.blueprints.plugins.plugin_utils import render

KUSTOMIZE_API = "kustomize.config.k8s.io/v1beta1"
WAVE = "argocd.argoproj.io/sync-wave"
COMPARE = "argocd.argoproj.io/compare-options"


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
    """Multi-line strings (health-check scripts, embedded configs) as literal blocks: reviewable diffs."""


def _str(dumper, value):
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


def _dump(obj) -> str:
    return yaml.dump(json.loads(json.dumps(obj)), Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)


def _file_name(obj: dict) -> str:
    meta = obj["metadata"]
    group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else "core"
    ns = meta.get("namespace")
    return f"{ns + '.' if ns else ''}{obj['kind'].lower()}.{group}-{meta['name']}.yaml"


def _kustomization(files: list[str]) -> dict:
    return {"apiVersion": KUSTOMIZE_API, "kind": "Kustomization", "resources": sorted(files)}


def component_objects(intent: dict, component: str) -> list[dict]:
    """The objects of one component, as the apply path renders them; a platform component's
    operators sync before its operands (sync wave -1 inside its Application)."""
    if component in intent["stages"]["platform"]:
        ops = platform_render.render_phase(intent, "operators", [component])["objects"]
        for obj in ops:
            obj.setdefault("metadata", {}).setdefault("annotations", {})[WAVE] = "-1"
        objs, namespace = ops + platform_render.render_phase(intent, "operands", [component])["objects"], None
    else:
        objs, namespace = render.render_component(component, intent), intent["serving"]["namespace"]
    # placed as delivery=render places them (module_utils/kind_scope.py): no namespace on a cluster-scoped kind
    return [kind_scope.placed(obj, namespace) for obj in objs]


def _application(g: dict, app: dict, labels: dict) -> dict:
    return {
        "apiVersion": gitops_mod.API_APP,
        "kind": "Application",
        "metadata": {
            "name": app["name"],
            "namespace": g["argocd_namespace"],
            "labels": labels,
            # diff against a server-side dry run: defaults the API server adds (an HTTPRoute's match and backend
            # fields, from its CRD) are then no drift; the client-side diff saw them as OutOfSync at every
            # reconciliation, and self-heal re-applied the route forever (tests/gitops, the sovereign burst)
            "annotations": {WAVE: app["wave"], COMPARE: "ServerSideDiff=true"},
            "finalizers": ["resources-finalizer.argocd.argoproj.io"],
        },
        "spec": {
            "project": g["project"],
            "source": {"repoURL": g["repo_url"], "targetRevision": g["revision"], "path": app["path"]},
            "destination": {"server": app.get("server", g["destination_server"])},
            "syncPolicy": {
                "automated": {"prune": True, "selfHeal": True},
                "syncOptions": ["ServerSideApply=true", "SkipDryRunOnMissingResource=true"],
                "retry": {"limit": 10, "backoff": {"duration": "30s", "factor": 2, "maxDuration": "10m"}},
            },
        },
    }


def app_objects(intent: dict) -> list[tuple[dict, list[dict]]]:
    """[(Application, its objects)] of one cluster, in sync-wave order, Applications with no object left out.

    The serving namespace is created by the first serving Application (sync wave -1 inside it): each later
    one puts objects in it (the InferenceObjectives of inference_scheduler sync before model_service, whose
    template renders the Namespace), and a namespaced object whose namespace does not exist yet fails its
    sync. The apply path applies a stage at once, Namespaces first. Every object but an adopted one carries
    the site's creation annotation, as the apply path writes it with an object's first apply."""
    own = ownership.of_intent(intent)
    out = []
    for app in intent["gitops"]["apps"]:
        # created by the site, as the apply path marks what it creates (module_utils/ownership.py); an object the
        # site adopts keeps its owner's marks
        objs = [
            o if ownership.adopted(o, own["adopt"]) else ownership.stamp(o, own)
            for o in component_objects(intent, app["component"])
        ]
        if objs:
            out.append((app, objs))
    serving = [(app, objs) for app, objs in out if app["component"] in intent["stages"]["serving"]]
    if serving:
        moved = [o for _app, objs in serving for o in objs if o["kind"] == "Namespace"]
        for _app, objs in serving:
            objs[:] = [o for o in objs if o["kind"] != "Namespace"]
        for o in moved:
            o.setdefault("metadata", {}).setdefault("annotations", {})[WAVE] = "-1"
        serving[0][1][:0] = moved
    return [(app, objs) for app, objs in out if objs]


def tracked(intent: dict, components) -> list[dict]:
    """The objects this cluster's Applications of ``components`` deploy, with the tracking annotation Argo CD
    v3 writes on them (``<application>:<group>/<kind>:<namespace>/<name>``; the Applications live in the
    namespace of their Argo CD, so the name is the Application's own). What drift.yml compares a GitOps
    cluster with: an object another cluster's Application took shows its name here."""
    out = []
    for app, objs in app_objects(intent):
        if app["component"] not in components:
            continue
        for obj in objs:
            meta = obj.setdefault("metadata", {})
            group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
            value = f"{app['name']}:{group}/{obj['kind']}:{meta.get('namespace') or ''}/{meta['name']}"
            meta.setdefault("annotations", {})[gitops_mod.TRACKING_ANNOTATION] = value
            out.append(obj)
    return out


def cluster_tree(intent: dict) -> dict[str, dict]:
    """{relative path: object} of one cluster: component directories, apps/ and kustomizations."""
    g, host, labels = intent["gitops"], intent["host"], intent["labels"]
    files: dict[str, dict] = {}
    app_files = []
    for app, objs in app_objects(intent):
        base = f"clusters/{host}/{app['directory']}"
        names = []
        for obj in objs:
            name = _file_name(obj)
            files[f"{base}/{name}"] = obj
            names.append(name)
        files[f"{base}/kustomization.yaml"] = _kustomization(names)
        app_file = f"{app['directory']}.yaml"
        files[f"clusters/{host}/apps/{app_file}"] = _application(g, app, labels)
        app_files.append(app_file)
    files[f"clusters/{host}/apps/kustomization.yaml"] = _kustomization(app_files)
    return files


def _project(intents: dict[str, dict]) -> dict:
    """The site's AppProject: this repository, every cluster's destination. Each root holds the same
    object, so bootstrapping several roots on one Argo CD (a hub) leaves it as it is."""
    first = next(iter(intents.values()))
    g = first["gitops"]
    servers = {i["gitops"]["destination_server"] for i in intents.values()}
    return {
        "apiVersion": gitops_mod.API_APP,
        "kind": "AppProject",
        "metadata": {"name": g["project"], "namespace": g["argocd_namespace"], "labels": first["labels"]},
        "spec": {
            "description": f"inference.blueprints site {first['site']['name']} ({first['site']['blueprint']})",
            "sourceRepos": [g["repo_url"]],
            "destinations": [{"server": d, "namespace": "*"} for d in sorted(servers)]
            + [{"server": gitops_mod.IN_CLUSTER, "namespace": g["argocd_namespace"]}],
            "clusterResourceWhitelist": [{"group": "*", "kind": "*"}],
            "namespaceResourceWhitelist": [{"group": "*", "kind": "*"}],
        },
    }


def site_tree(intents: dict[str, dict]) -> dict[str, dict]:
    """{relative path: object} of a site's whole repository (the clusters sharing one render_dir).

    Raises SchemaError when two clusters' Applications would land on one destination."""
    gitops_mod.check_destinations(intents)
    files: dict[str, dict] = {}
    first = next(iter(intents.values()))
    g = first["gitops"]
    waits = []
    for _host, intent in sorted(intents.items()):
        files.update(cluster_tree(intent))
        waits += [w for ws in intent["platform"]["waits"].values() for w in ws]
        waits += waits_mod.for_components(intent, intent["stages"]["serving"])
    project = _project(intents)
    health = {
        "apiVersion": gitops_mod.ARGOCD_CR_API,
        "kind": "ArgoCD",
        "metadata": {"name": g["argocd_instance"], "namespace": g["argocd_namespace"]},
        "spec": {
            "resourceHealthChecks": gitops_mod.health_checks(waits),
            # the operator passes these to the application controller; Argo CD's default is no sync timeout
            "controller": {
                "env": [{"name": gitops_mod.SYNC_TIMEOUT_ENV, "value": str(gitops_mod.sync_timeout(waits))}],
            },
        },
    }
    for _host, intent in sorted(intents.items()):
        gi = intent["gitops"]
        # the app-of-apps runs where its Argo CD runs: it creates Applications in that Argo CD's namespace
        root = {**gi["root"], "wave": "0", "server": gitops_mod.IN_CLUSTER}
        root_file = f"{gi['root']['name']}.yaml"
        base = gi["root"]["directory"]
        files[f"{base}/{root_file}"] = _application({**g, "project": gi["project"]}, root, first["labels"])
        files[f"{base}/appproject.yaml"] = project
        files[f"{base}/health-checks.yaml"] = health
        files[f"{base}/kustomization.yaml"] = _kustomization(["appproject.yaml", "health-checks.yaml", root_file])
    return files


def plan(root: str, files: dict[str, dict]) -> render_tree.Plan:
    """Check the write of a site's tree under ``root`` (module_utils/render_tree.py): each cluster's files
    (argocd/<cluster>/, clusters/<cluster>/) are one scope of the tree's manifest, written in full, so a file
    the cluster no longer renders is removed, while files the render did not write (the user's own, another
    site's clusters) are never touched. Raises render_tree.TreeError before anything is written."""
    scopes: dict[str, dict[str, str]] = {}
    for rel, obj in files.items():
        parts = rel.split("/")
        if len(parts) < 3 or parts[0] not in ("argocd", "clusters"):
            raise render_tree.TreeError(f"refusing to write {rel!r}: not under argocd/<cluster>/, clusters/<cluster>/")
        scopes.setdefault(parts[1], {})[rel] = _dump(obj)
    return render_tree.plan(root, scopes, prune=True)


def write(root: str, files: dict[str, dict], check_mode: bool = False) -> list[dict]:
    """Write the tree under ``root``; results per file (created, changed, removed, unchanged)."""
    return render_tree.apply(plan(root, files), check_mode)


def legacy_root_warning(root: str, hosts) -> str | None:
    """Earlier releases wrote every cluster's root into one argocd/kustomization.yaml, which bootstrapped every
    cluster's tree on each cluster; that file is now the user's (it is not in the manifest): never removed, but
    named when it still lists a cluster of the site."""
    path = os.path.join(root, "argocd", "kustomization.yaml")
    if not os.path.isfile(path) or "argocd/kustomization.yaml" in render_tree.read_manifest(root):
        return None
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    named = sorted(h for h in hosts if h in text)
    if not named:
        return None
    return (
        f"{path} names cluster(s) {', '.join(named)} and was not written by this render (kept as it is). If it is the "
        "combined root of an earlier release, delete it and bootstrap each cluster's own root "
        "(oc --context <cluster> apply --server-side -k argocd/<cluster>): bootstrapped on each cluster, it syncs "
        "every cluster's tree into every cluster"
    )
