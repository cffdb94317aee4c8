# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names that become paths, URIs that could carry a credential, and where render_dir may be: checked
when a site is validated (``site.resolve``), before anything is written.

* The inventory host name (the cluster) becomes a directory of render_dir (``<render_dir>/<cluster>/``,
  ``clusters/<cluster>/``, ``argocd/<cluster>/``), of report_dir (the canary's report) and part of Argo CD's
  object names: it must be a DNS-1123 subdomain (the site, model and tenant names already are DNS-1123
  labels by their fields). ``../../tmp/x`` would write outside render_dir.
* A URI with userinfo (``https://user:token@host/...``) would be written in clear into an object or a file
  of the tree: every string of the site's variables that is a URI with userinfo is refused, the message
  says where the credential belongs and never shows it. This runs on the raw values, before the fields'
  own checks, some of which echo a value they refuse.
* render_dir (and report_dir) inside an inventory directory of the run makes the next run read the written
  files as inventory.

The writer (module_utils/render_tree.py) keeps every path under its root as the last guard.
"""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

from .schema import DNS_SUBDOMAIN, SchemaError, join_path

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

# Where the credential of each URL field belongs (a field not listed gets the general advice).
_CREDENTIAL_HOME = {
    "gitops.repo_url": "in Argo CD's repository Secret (label argocd.argoproj.io/secret-type: repository, with this "
    "URL, username and password) in Argo CD's namespace (gitops_argocd_namespace, default openshift-gitops); the "
    "collection has no variable for it",
    "gitops.destination_server": "in Argo CD's cluster Secret (argocd cluster add, in Argo CD's namespace, "
    "gitops_argocd_namespace); the collection has no variable for it",
    "escalation.endpoint": "in the Secret escalation.credential.secret names (its key 'credential')",
    "artifact.uri": "in a Secret of the serving namespace that KServe's storage initializer reads (its storage "
    "credentials); the collection has no variable for it",
    "model_uri": "in a Secret of the serving namespace that KServe's storage initializer reads (its storage "
    "credentials); the collection has no variable for it",
    "metrics_url": "in the token Secret the burst clusters read the sovereign queue with "
    "(burst_routing_metrics_secret-<sovereign cluster>)",
}


def _redacted(uri: str) -> str:
    parts = urlsplit(uri)
    host = parts.netloc.rsplit("@", 1)[-1]
    return f"{parts.scheme}://***@{host}{'/...' if parts.path not in ('', '/') else ''}"


def _home(path: str) -> str:
    for suffix, home in _CREDENTIAL_HOME.items():
        if path == suffix or path.endswith("." + suffix):
            return home
    return "in a Secret the site names, never in the URL"


def _uris_with_userinfo(value, path: str):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _uris_with_userinfo(v, join_path(path, k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _uris_with_userinfo(v, join_path(path, i))
    elif isinstance(value, str) and _URI.match(value.strip()):
        try:
            netloc = urlsplit(value.strip()).netloc
        except ValueError:
            return
        # userinfo@host; not an image digest written without a repository path (oci://image@sha256:...)
        if "@" in netloc and not netloc.rsplit("@", 1)[1].startswith("sha256:"):
            yield path, value.strip()


def credential_errors(values: dict) -> list[tuple[str, str]]:
    """(path, message) of every URI with userinfo among the site's raw variables; the credential is not shown."""
    return [
        (
            path,
            f"{_redacted(uri)} carries a credential in the URL (user or token before '@', not shown), which would be "
            f"written in clear into the rendered objects and files; give the URL without it and put the credential "
            f"{_home(path)}",
        )
        for path, uri in _uris_with_userinfo(values, "")
    ]


def host_errors(host: str) -> list[tuple[str, str]]:
    """The inventory host (a cluster) names directories and Argo CD objects: a DNS-1123 subdomain."""
    if DNS_SUBDOMAIN.match(host) and len(host) <= 253:
        return []
    return [
        (
            "inventory_hostname",
            f"{host!r} is not a DNS-1123 subdomain; the cluster's host name becomes a directory under render_dir and "
            "report_dir and part of Argo CD object names, so it cannot hold '/', '..', upper case or spaces; valid: "
            "lower case letters, digits, '-' and '.', starting and ending alphanumeric (e.g. chat-east-1)",
        )
    ]


def _inside(path: str, directory: str) -> bool:
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return os.path.commonpath([path, directory]) == directory


def render_dir_errors(site: dict, inventory_dirs) -> list[tuple[str, str]]:
    """render_dir (delivery render/gitops) or report_dir inside an inventory directory of the run: refused. Ansible
    reads every file of an inventory directory (YAML and JSON reports and objects included) as inventory."""
    fields = ["render_dir"] if site["delivery"] in ("render", "gitops") else []
    out = []
    for field in [*fields, "report_dir"]:
        inside = [inv for inv in sorted({os.path.abspath(d) for d in inventory_dirs if d}) if _inside(site[field], inv)]
        if inside:
            default = "render/<site_name>" if field == "render_dir" else "reports/<site_name>"
            out.append(
                (
                    field,
                    f"{os.path.abspath(site[field])} is inside the inventory directory {inside[0]}: the next run "
                    f"would read every file written there as inventory; valid: a directory outside every inventory "
                    f"directory (default {default}, relative to the working directory)",
                )
            )
    return out


def gitops_path_errors(site: dict) -> list[tuple[str, str]]:
    """gitops.path is where render_dir lies inside the repository: a relative path without '..'."""
    path = (site.get("gitops") or {}).get("path") or ""
    if path.startswith("/") or ".." in path.split("/") or "\\" in path:
        return [
            (
                "gitops.path",
                f"{path!r} leaves the repository; valid: a relative path inside it, without '..' (default: its root)",
            )
        ]
    return []


def refuse_credentials(values: dict, errors: list, where: str) -> None:
    """Raise SchemaError (with ``errors``, the problems found so far) when a URI of ``values`` holds a credential."""
    leaked = credential_errors(values)
    if leaked:
        raise SchemaError(errors + leaked, where)


def refuse_paths(site: dict, inventory_dirs, where: str) -> None:
    """The checks of a validated site with its defaults filled: render_dir outside the inventory, gitops.path."""
    problems = render_dir_errors(site, inventory_dirs) + gitops_path_errors(site)
    if problems:
        raise SchemaError(problems, where)


def inventory_dirs_of(task_vars: dict, host_vars=None) -> list[str]:
    """The inventory directories of a run: every source (a file's directory) and the host's inventory_dir."""
    out = []
    for source in task_vars.get("ansible_inventory_sources") or []:
        source = str(source)
        if not os.path.exists(source):
            continue  # a host list (-i host1,host2) or a plugin's name, not a path
        out.append(source if os.path.isdir(source) else os.path.dirname(source))
    for variables in (task_vars, host_vars or {}):
        if variables.get("inventory_dir"):
            out.append(str(variables["inventory_dir"]))
    return out
