# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GitOps delivery: the repository layout, the Argo CD objects and their health checks.

With ``delivery: gitops`` a site is written as a repository tree (``render_dir`` is its root):

    clusters/<cluster>/<NN>-<component>/   one YAML file per object + kustomization.yaml
    clusters/<cluster>/apps/               one Argo CD Application per component (sync wave NN)
    argocd/<cluster>/                      what is bootstrapped on that cluster's Argo CD: its
                                           app-of-apps Application, the AppProject, the health
                                           checks, kustomization.yaml

Every cluster has a root of its own: ``oc apply -k argocd/<cluster>`` on that cluster (or, with one
Argo CD managing several clusters, on the hub with each cluster's ``destination_server``). Its
app-of-apps syncs only ``clusters/<cluster>/apps``, whose Applications target only that cluster's
``destination_server``. No object is part of two Applications: Argo CD (v3.5 controller/state.go)
reports an object whose tracking annotation names another Application as ``SharedResourceWarning``,
and two self-healing Applications with different desired states take it from each other at every
sync. ``check_destinations`` refuses, before anything is written, two clusters whose Applications
would land on one destination.

Argo CD (OpenShift GitOps) syncs the app-of-apps of each cluster, which syncs one Application
per component in the blueprint's order (sync waves: the platform's components first, the
serving ones after). Within a platform component, the operators (Namespace, OperatorGroup,
Subscription) sync before their operands. Health comes from the same waits the apply path
uses, as Argo CD Lua health checks. The tree holds no secret values: only references.
"""

from __future__ import annotations

import json

from . import sync_order
from .schema import DNS_LABEL, SchemaError

API_APP = "argoproj.io/v1alpha1"
# The API server of the cluster an Argo CD runs in, as that Argo CD names it (Argo CD's in-cluster).
IN_CLUSTER = "https://kubernetes.default.svc"
# Argo CD v3's default resource tracking: the annotation holds <app>:<group>/<kind>:<namespace>/<name>
# (util/argo/resource_tracking.go BuildAppInstanceValue; common.AnnotationKeyAppInstance).
TRACKING_ANNOTATION = "argocd.argoproj.io/tracking-id"
# The operator's default Argo CD instance (OpenShift GitOps) and its CR API.
ARGOCD_CR_API = "argoproj.io/v1beta1"
# The application controller's sync timeout (cmd/argocd-application-controller, flag --sync-timeout).
SYNC_TIMEOUT_ENV = "ARGOCD_APPLICATION_CONTROLLER_SYNC_TIMEOUT"


def _lua_condition(cond: str, status: str) -> str:
    return (
        'hs = {status = "Progressing", message = "waiting for condition ' + cond + "=" + status + '"}\n'
        "if obj.status ~= nil and obj.status.conditions ~= nil then\n"
        "  for _, c in ipairs(obj.status.conditions) do\n"
        '    if c.type == "' + cond + '" then\n'
        '      if c.status == "' + status + '" then\n'
        '        hs.status = "Healthy"\n'
        "      end\n"
        '      hs.message = (c.reason or "") .. " " .. (c.message or "")\n'
        "    end\n"
        "  end\n"
        "end\n"
        "return hs\n"
    )


def _lua_field(field: str, value) -> str:
    wanted = value if isinstance(value, list) else [value]
    steps = field.split(".")
    walk = "v = obj\n" + "".join(f'if v ~= nil then v = v["{s}"] end\n' for s in steps)
    tests = " or ".join(f"v == {json.dumps(w)}" for w in wanted)
    return (
        'hs = {status = "Progressing", message = "waiting for '
        + field
        + '"}\n'
        + walk
        + "if "
        + tests
        + ' then hs.status = "Healthy" end\n'
        + 'if v ~= nil then hs.message = "'
        + field
        + '=" .. tostring(v) end\n'
        + "return hs\n"
    )


# Argo CD's health statuses (gitops-engine pkg/health); a child Application's own one is its health as a resource.
LUA_APPLICATION = (
    'hs = {status = "Progressing", message = "waiting for the Application\'s health"}\n'
    "if obj.status ~= nil and obj.status.health ~= nil and obj.status.health.status ~= nil then\n"
    "  hs.status = obj.status.health.status\n"
    '  hs.message = obj.status.health.message or ("health " .. obj.status.health.status)\n'
    "end\n"
    "return hs\n"
)


def sync_timeout(waits: list[dict], default: int = 600) -> int:
    """Seconds after which Argo CD ends a sync operation (its controller's --sync-timeout, 0 = never): the sum
    of the apply path's longest wait of each component (the app-of-apps' one operation spans every wave). Ended,
    the operation fails and the Applications' retry limit takes over: a wave that cannot become healthy shows
    as a failed sync instead of one that runs forever."""
    longest: dict[str, int] = {}
    for w in waits:
        key = w.get("component") or w["kind"]
        longest[key] = max(longest.get(key, 0), int(w.get("timeout") or default))
    return sum(longest.values()) or default


def health_checks(waits: list[dict]) -> list[dict]:
    """Argo CD resourceHealthChecks ({group, kind, check}) for the kinds the waits test by a
    condition or a field (Argo CD knows Deployments, StatefulSets and DaemonSets itself)."""
    out, seen = [], set()
    for w in waits:
        group = w["apiVersion"].split("/")[0] if "/" in w["apiVersion"] else ""
        key = (group, w["kind"])
        if key in seen or not (w.get("condition") or w.get("field")):
            continue
        seen.add(key)
        if w.get("condition"):
            check = _lua_condition(w["condition"], str(w.get("status") or "True"))
        else:
            check = _lua_field(w["field"], w.get("value"))
        out.append({"group": group, "kind": w["kind"], "check": check})
    # Application health: Argo CD stopped assessing it in 1.8 (docs/operator-manual/health.md, "Argocd App"),
    # so an app-of-apps would not wait for one wave's Applications to be healthy before the next: restored
    # here, as that page says, from the child Application's own status.health, passed through as it is (a
    # Degraded child is Degraded, not Progressing: mapped to Progressing, the wave waited for it forever)
    out.append({"group": "argoproj.io", "kind": "Application", "check": LUA_APPLICATION})
    return sorted(out, key=lambda c: (c["group"], c["kind"]))


def build(site: dict, intent: dict) -> dict | None:
    """``intent["gitops"]`` for a cluster whose delivery is gitops (None otherwise)."""
    if site["delivery"] != "gitops":
        return None
    g = site["gitops"]
    host = intent["host"]
    project = g["project"] or site["site_name"]
    # the blueprint's order, each component after those whose objects it reads (sync_order.py)
    blueprint_order = intent["stages"]["platform"] + intent["stages"]["serving"]
    components = sync_order.ordered(blueprint_order, sync_order.needs(intent))
    apps = []
    for index, component in enumerate(components, start=1):
        directory = f"{index:02d}-{component.replace('_', '-')}"
        apps.append(
            {
                "component": component,
                "name": f"{site['site_name']}-{host}-{component.replace('_', '-')}"[:253],
                "directory": directory,
                "path": "/".join(p for p in (g["path"], "clusters", host, directory) if p),
                "wave": str(index),
            }
        )
    return {
        "repo_url": g["repo_url"],
        "revision": g["revision"],
        "path": g["path"],
        # The Argo CD the gitops component installs (its role options decide where it lives).
        "argocd_namespace": site["options"]["gitops"]["gitops_argocd_namespace"],
        "argocd_instance": site["options"]["gitops"]["gitops_argocd_name"],
        "project": project,
        "destination_server": g["destination_server"],
        "destination": destination(host, g["destination_server"]),
        "root": {
            "name": f"{site['site_name']}-{host}",
            "path": "/".join(p for p in (g["path"], "clusters", host, "apps") if p),
            # bootstrapped on this cluster's Argo CD only: oc apply -k argocd/<cluster>
            "directory": f"argocd/{host}",
        },
        "apps": apps,
    }


def destination(host: str, server: str) -> str:
    """Where a cluster's Applications land: its own cluster when they name Argo CD's in-cluster server
    (each root is bootstrapped on the cluster it deploys), else the registered API server's URL."""
    url = server.rstrip("/").lower()
    return f"in-cluster of {host}" if url == IN_CLUSTER else url


def check_destinations(intents: dict[str, dict]) -> None:
    """Refuse (SchemaError, before anything is written) two clusters delivered by GitOps whose
    Applications target one destination: both trees would be synced into one cluster, and every object
    both render (the LLMInferenceService, the ScaledObject) would be part of two Applications that take
    it from each other."""
    seen: dict[str, str] = {}
    errors = []
    for host, intent in sorted(intents.items()):
        g = intent.get("gitops")
        if not g:
            continue
        other = seen.setdefault(g["destination"], host)
        if other != host:
            errors.append(
                (
                    "gitops.destination_server",
                    f"clusters {other!r} and {host!r} both deliver to {g['destination_server']}: Argo CD would sync "
                    "both clusters' trees into one cluster, where each object they share belongs to two Applications "
                    "that overwrite each other; give each cluster the API server Argo CD knows it by (or the "
                    f"default {IN_CLUSTER} with argocd/<cluster> bootstrapped on that cluster itself)",
                )
            )
    if errors:
        raise SchemaError(errors, "site")


def valid_project(name: str) -> bool:
    return bool(DNS_LABEL.match(name))
