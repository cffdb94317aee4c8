# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes connection, discovery and requests for the collection's Kubernetes tasks.

One code path: the action plugins (in-process on the controller) and the modules (the
AnsiballZ fallback) both call :func:`get_client` and the helpers here.

Connection
    :func:`get_client` builds one :class:`Client` per connection identity (kubeconfig,
    context, host, credentials) and process. :func:`load_configuration` reads the common
    kubeconfigs itself (bearer token, client certificate, CA, insecure-skip-tls-verify), the
    in-cluster service account and host plus API key; it hands the rest (exec credential
    plugins, auth providers, basic auth, several files in KUBECONFIG) to the ``kubernetes``
    package, imported only then. Requests go through one urllib3 pool, JSON in and out, so
    the client is thread-safe and version-neutral.

Discovery
    :meth:`Client.resource` maps ``(apiVersion, kind)`` to a :class:`Resource`. The map
    comes from aggregated discovery (``GET /api`` and ``GET /apis``, two requests; per
    group-version requests on servers without it) and is cached in a file shared by every
    task and worker process of a run, like kubectl's ``~/.kube/cache/discovery``:

    ``$INFERENCE_BLUEPRINTS_CACHE_DIR/discovery/<host>/<identity>.json``
    (default ``${XDG_CACHE_HOME:-~/.cache}/inference-blueprints/discovery/...``), where
    ``<identity>`` is a SHA-256 of the server URL and the credentials (token, client
    certificate, user), mode 0600. Entries are trusted for
    ``$INFERENCE_BLUEPRINTS_DISCOVERY_TTL`` seconds (default 6 h, kubectl's discovery cache
    TTL: k8s.io/cli-runtime v0.36.3 pkg/genericclioptions/config_flags.go). A kind that is
    not in the cache triggers one refresh per process (CRDs appear mid-run when operators
    install them); a kind still missing after it is reported as not served.

Tracing (tests, debugging)
    With ``INFERENCE_BLUEPRINTS_K8S_TRACE=<file>`` every HTTP request (method, path, status;
    never headers) and every discovery decision (cache read, fetch) is appended to the file
    as one JSON line.

Private to the collection: the public interface is the modules.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import random
import re
import sys
import tempfile
import threading
import time
from collections import namedtuple
from urllib.parse import quote, urlencode

# The ``kubernetes`` package is imported only for what the collection's own loader
# (:class:`Configuration`) leaves to it: exec credential plugins, auth providers, basic auth,
# several kubeconfig files in KUBECONFIG. Importing it costs a quarter of a second (requests,
# oauthlib, pydantic, dateutil) on every run, more than a no-op apply spends on requests.
try:
    import urllib3

    HAS_KUBERNETES = True  # what the client needs on this host: urllib3 (and PyYAML, with ansible-core)
    KUBERNETES_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - reported by the callers
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = exc

AUTH_ARG_SPEC = {
    "kubeconfig": {"type": "raw"},
    "context": {"type": "str"},
    "host": {"type": "str"},
    "api_key": {"type": "str", "no_log": True},
    "validate_certs": {"type": "bool", "aliases": ["verify_ssl"]},
    "ca_cert": {"type": "path", "aliases": ["ssl_ca_cert"]},
}

_ENV = {
    "kubeconfig": "K8S_AUTH_KUBECONFIG",
    "context": "K8S_AUTH_CONTEXT",
    "host": "K8S_AUTH_HOST",
    "api_key": "K8S_AUTH_API_KEY",
    "validate_certs": "K8S_AUTH_VERIFY_SSL",
    "ca_cert": "K8S_AUTH_SSL_CA_CERT",
}

ENV_CACHE_DIR = "INFERENCE_BLUEPRINTS_CACHE_DIR"
ENV_DISCOVERY_TTL = "INFERENCE_BLUEPRINTS_DISCOVERY_TTL"
ENV_TRACE = "INFERENCE_BLUEPRINTS_K8S_TRACE"
# kubectl keeps discovery for 6 hours (k8s.io/cli-runtime v0.36.3,
# pkg/genericclioptions/config_flags.go: NewCachedDiscoveryClientForConfig(..., 6*time.Hour)).
DEFAULT_DISCOVERY_TTL = 6 * 3600
CACHE_FORMAT = 1

# Aggregated discovery media types (apidiscovery.k8s.io v2 is GA since Kubernetes 1.30,
# v2beta1 since 1.26: kubernetes/enhancements KEP-3352); plain JSON is the fallback.
AGGREGATED_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)
USER_AGENT = "inference-blueprints"
POOL_SIZE = 16
REQUEST_TIMEOUT = 60
# Throttling: 429 (and 5xx with Retry-After) are retried, honouring Retry-After.
MAX_RETRIES = 6
MAX_RETRY_WAIT = 30.0
RETRY_BUDGET = 120.0
# An API server that answered this host before (in this process, or its discovery is cached on disk) and now
# refuses or drops connections is restarting (a kube-apiserver rollout, which on Single Node OpenShift leaves no
# other instance to answer, or a load balancer's backend going away): every request is sent again, with backoff,
# until it answers or this long has passed. Server-side apply, reads and deletes are safe to send twice. A server
# never reached (a wrong address or port) fails at once; timeouts, DNS and TLS failures are not retried.
DOWN_BUDGET = 60.0
_WENT_AWAY = ("Connection refused", "Connection reset", "Remote end closed", "Connection aborted")

# Metadata the server owns; ignored when comparing desired and live objects.
VOLATILE_METADATA = ("managedFields", "resourceVersion", "generation", "creationTimestamp", "uid", "selfLink")

VERBS = {"GET": "get", "PATCH": "patch", "DELETE": "delete", "POST": "create", "PUT": "update"}


class ClientError(Exception):
    """A connection or API problem, with a message meant for the user."""

    def __init__(self, msg, results=None):
        super().__init__(msg)
        self.results = results or []


class ApiError(ClientError):
    """A non-2xx answer of the API server, parsed from its Status object when it sent one."""

    def __init__(self, method, path, status, body=b"", headers=None):
        self.method = method
        self.path = path
        self.status = status
        self.headers = dict(headers or {})
        self.reason = ""
        self.details = {}
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body or "")
        self.message = text.strip()
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and doc.get("kind") == "Status":
            self.message = doc.get("message") or self.message
            self.reason = doc.get("reason") or ""
            self.details = doc.get("details") or {}
        if not self.message:
            self.message = f"HTTP {status}"
        super().__init__(f"{method} {path}: {status} {self.reason or ''} {self.message}".replace("  ", " "))

    @property
    def causes(self):
        return self.details.get("causes") or []

    def object_not_found(self, name):
        """404 for a missing object (not for a path the server does not serve at all)."""
        return self.status == 404 and self.reason == "NotFound" and self.details.get("name") == name


class Unauthorized(ApiError):
    """401: the API server does not accept the credentials; the message says whose and why."""

    def __init__(self, method, path, status, body=b"", headers=None, why=""):
        super().__init__(method, path, status, body, headers)
        self.message = why or self.message
        self.args = (self.message,)


class KindNotServed(ClientError):
    """The API server does not serve a kind in an API version."""


Resource = namedtuple("Resource", "group version kind plural namespaced verbs subresources")


def api_version_of(resource):
    return f"{resource.group}/{resource.version}" if resource.group else resource.version


def resource_path(resource, name=None, namespace=None, subresource=None):
    base = f"/apis/{resource.group}/{resource.version}" if resource.group else f"/api/{resource.version}"
    if resource.namespaced and namespace:
        base += f"/namespaces/{quote(namespace, safe='')}"
    base += f"/{resource.plural}"
    if name:
        base += f"/{quote(name, safe='')}"
    if subresource:
        base += f"/{subresource}"
    return base


def split_api_version(api_version):
    if "/" in api_version:
        group, version = api_version.split("/", 1)
        return group, version
    return "", api_version


# ---------------------------------------------------------------------------- helpers (pure)


def retry_delay(attempt, retry_after=None):
    """Seconds to wait before retry ``attempt`` (0-based): Retry-After when given, else backoff."""
    if retry_after is not None:
        try:
            return max(0.0, min(float(str(retry_after).strip()), MAX_RETRY_WAIT))
        except ValueError:
            pass  # an HTTP date: fall back to backoff
    return min(0.5 * (2**attempt), 8.0) * (0.75 + random.random() / 2)  # noqa: S311 - jitter, not crypto


def closed_connection_retries():
    """urllib3's retries (3 in all), where a request sent on a kept-alive connection that the API server, or a load
    balancer in front of it, had already closed and that got no answer ("Remote end closed connection without
    response") is sent again like a refused connection, whatever its method. urllib3 alone resends only idempotent
    methods: a create after a wait longer than the server's idle timeout (90 s for kube-apiserver) would fail the
    run. A server that is down is refused on the resend, and the error says so as before."""
    from http.client import RemoteDisconnected

    class _Resend(urllib3.util.retry.Retry):
        def _is_connection_error(self, err):
            closed = isinstance(err, urllib3.exceptions.ProtocolError) and any(
                isinstance(arg, RemoteDisconnected) for arg in err.args
            )
            return closed or super()._is_connection_error(err)

    return _Resend(total=3)


def retryable(status, headers):
    """Whether an answer means "try again later": 429, or a 5xx that says when (Retry-After)."""
    if status == 429:
        return True
    return status >= 500 and any(k.lower() == "retry-after" for k in (headers or {}))


def parse_aggregated(doc):
    """(groups, resources, stale) from an APIGroupDiscoveryList (apidiscovery.k8s.io v2/v2beta1).

    ``groups``: group -> versions (preferred first); ``resources``: group/version -> kind ->
    [plural, namespaced, verbs, subresources]; ``stale``: group/versions the server could
    not refresh (an aggregated API that is down), whose resources may be missing.
    """
    groups, resources, stale = {}, {}, []
    for item in doc.get("items") or []:
        group = (item.get("metadata") or {}).get("name") or ""
        versions = []
        for ver in item.get("versions") or []:
            version = ver.get("version")
            if not version:
                continue
            versions.append(version)
            gv = f"{group}/{version}" if group else version
            if ver.get("freshness") == "Stale":
                stale.append(gv)
            kinds = {}
            for res in ver.get("resources") or []:
                kind = (res.get("responseKind") or {}).get("kind")
                if not kind or not res.get("resource"):
                    continue
                kinds.setdefault(
                    kind,
                    [
                        res["resource"],
                        res.get("scope") == "Namespaced",
                        sorted(res.get("verbs") or []),
                        sorted(s.get("subresource", "") for s in res.get("subresources") or []),
                    ],
                )
            resources[gv] = kinds
        groups[group] = versions
    return groups, resources, stale


def parse_resource_list(doc):
    """kind -> [plural, namespaced, verbs, subresources] from an APIResourceList."""
    kinds, subs = {}, {}
    for res in doc.get("resources") or []:
        name = res.get("name", "")
        if "/" in name:
            parent, sub = name.split("/", 1)
            subs.setdefault(parent, []).append(sub)
            continue
        kinds.setdefault(res.get("kind"), [name, bool(res.get("namespaced")), sorted(res.get("verbs") or []), []])
    for entry in kinds.values():
        entry[3] = sorted(subs.get(entry[0], []))
    return kinds


def parse_group_list(doc):
    """group -> versions (preferred first) from an APIGroupList."""
    groups = {}
    for group in doc.get("groups") or []:
        versions = [v["version"] for v in group.get("versions") or []]
        preferred = (group.get("preferredVersion") or {}).get("version")
        if preferred in versions:
            versions.remove(preferred)
            versions.insert(0, preferred)
        groups[group["name"]] = versions
    return groups


def safe_host(server):
    """A directory name for a server URL (kubectl's rule: scheme dropped, the rest made file-safe)."""
    schemeless = re.sub(r"^https?://", "", server)
    return re.sub(r"[^\w/.]", "_", schemeless).replace("/", "_")


def default_cache_dir(env=None):
    env = os.environ if env is None else env
    base = env.get(ENV_CACHE_DIR)
    if not base:
        xdg = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        base = os.path.join(xdg, "inference-blueprints")
    return os.path.join(base, "discovery")


def discovery_ttl(env=None):
    env = os.environ if env is None else env
    try:
        return float(env.get(ENV_DISCOVERY_TTL, DEFAULT_DISCOVERY_TTL))
    except ValueError:
        return float(DEFAULT_DISCOVERY_TTL)


def not_served_message(kind, api_version, served_versions, kinds_in_version=None):
    """Why (apiVersion, kind) cannot be used, naming the kind, the group/version and what is served."""
    group, version = split_api_version(api_version)
    label = group or "core"
    head = f"the API server does not serve {kind} in {api_version}"
    if kinds_in_version is not None:
        shown = ", ".join(sorted(kinds_in_version)[:12]) or "none"
        return f"{head}: API group {label} {version} is served but has no kind {kind} (it serves: {shown})"
    if served_versions:
        return (
            f"{head}: API group {label} is served only in version(s) {', '.join(served_versions)}; "
            f"render for a served version or install the operator or CRD release that serves {api_version}"
        )
    hint = provider_hint(group)
    return (
        f"{head}: nothing on this cluster provides API group {label} (no CRD or operator serves it); "
        f"install {hint} first"
    )


def provider_hint(group):
    """Who installs ``group`` in a site, from the cluster_facts requirement tables."""
    try:
        from ansible_collections.inference.blueprints.plugins.module_utils.cluster_facts import SERVING_APIS
    except ImportError:  # pragma: no cover
        SERVING_APIS = {}
    for _component, (installer, api_group, _versions, kind) in SERVING_APIS.items():
        if api_group == group:
            return f"the operator that provides {kind} (the blueprint's {installer} component)"
    return f"the operator or CRD that provides {group}"


_WEBHOOK = re.compile(r'admission webhook "([^"]+)" denied the request(?::\s*(.*))?', re.S)
_FORBIDDEN = re.compile(
    r'cannot (?P<verb>\w+) resource "(?P<resource>[^"]+)" in API group "(?P<group>[^"]*)"'
    r'(?: in the namespace "(?P<namespace>[^"]+)")?'
)
_POLICY = re.compile(
    r"ValidatingAdmissionPolicy '([^']+)'(?: with binding '([^']+)')? denied request(?::\s*(.*))?", re.S
)


def explain(err, verb, what, resource=None, namespace=None):
    """One clear sentence for an API error of ``verb`` on ``what`` (a ref such as ``ConfigMap ns/a (v1)``)."""
    if not isinstance(err, ApiError):
        return f"cannot {verb} {what}: {err}"
    msg = err.message
    webhook = _WEBHOOK.search(msg)
    if webhook:
        reason = webhook.group(2) or "(no reason given)"
        return f"admission webhook {webhook.group(1)} denied {verb} of {what}: {reason}"
    policy = _POLICY.search(msg)
    if policy:
        binding = f" (binding {policy.group(2)})" if policy.group(2) else ""
        reason = policy.group(3) or "(no reason given)"
        return f"admission policy {policy.group(1)}{binding} denied {verb} of {what}: {reason}"
    if err.status == 403:
        said = _FORBIDDEN.search(msg)
        if said:  # the authorizer's own words: verb, resource, group, namespace it checked
            verb = said.group("verb")
            res = said.group("resource") + (f".{said.group('group')}" if said.group("group") else "")
            if said.group("namespace"):
                namespace = said.group("namespace")
            elif "at the cluster scope" in msg:
                namespace = None
        elif resource is not None:
            res = resource.plural + (f".{resource.group}" if resource.group else "")
        else:
            res = err.details.get("kind") or "the resource"
        where = f"in namespace {namespace}" if namespace else "at cluster scope"
        return f"forbidden: the credentials in use may not {verb} {res} {where} ({what}): {msg}"
    if err.status == 409 and err.reason == "Conflict" and err.causes:
        fields = ", ".join(c.get("field", "?") for c in err.causes)
        return (
            f"conflict applying {what}: other field managers own {fields} ({msg}); "
            "set force_conflicts: true to take these fields over, or leave them to their owner"
        )
    if err.status == 429 or retryable(err.status, err.headers):
        return f"the API server kept throttling {verb} of {what} (HTTP {err.status}) after {MAX_RETRIES} retries: {msg}"
    return f"the API server refused {verb} of {what}: {msg}"


def ref(obj):
    """Human-readable reference: Kind namespace/name (group/version)."""
    meta = obj.get("metadata", {})
    name = meta.get("name", "?")
    if meta.get("namespace"):
        name = f"{meta['namespace']}/{name}"
    return f"{obj.get('kind', '?')} {name} ({obj.get('apiVersion', '?')})"


def normalize(obj):
    """Drop server-owned metadata so that two versions of an object compare by content."""
    if obj is None:
        return None
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    for key in VOLATILE_METADATA:
        meta.pop(key, None)
    annotations = dict(meta.get("annotations") or {})
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    out["metadata"] = meta
    return out


def lookup(obj, path):
    """Value at a dotted path (``status.conditions``); ``None`` when absent."""
    cur = obj
    for part in path.split("."):
        if isinstance(cur, dict):
            cur = cur.get(part)
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return None
    return cur


# ---------------------------------------------------------------------------- connection


def _param(params, key, env):
    value = params.get(key)
    if value is None:
        value = env.get(_ENV[key])
        if key == "validate_certs" and value is not None:
            value = str(value).lower() not in ("0", "false", "no", "off")
    return value


def _connection_key(params, env):
    """What decides the connection: the options, the kubeconfig file's identity, the token."""
    kubeconfig = _param(params, "kubeconfig", env)
    if isinstance(kubeconfig, dict):
        source = json.dumps(kubeconfig, sort_keys=True, default=str)
    else:
        source = str(kubeconfig or env.get("KUBECONFIG") or "")
        for path in source.split(os.pathsep) if source else []:
            try:
                st = os.stat(os.path.expanduser(path))
                source += f"|{st.st_mtime_ns}:{st.st_size}"
            except OSError:
                pass
    parts = [
        source,
        _param(params, "context", env),
        _param(params, "host", env),
        hashlib.sha256(str(_param(params, "api_key", env) or "").encode()).hexdigest(),
        _param(params, "validate_certs", env),
        _param(params, "ca_cert", env),
        bool(env.get("KUBERNETES_SERVICE_HOST")),
    ]
    return json.dumps(parts, default=str)


def _named(params, key, env, inventory_name):
    """Where a connection option came from, as the user set it: the inventory variable the
    playbooks pass as the task option, or the environment variable."""
    if params.get(key) is not None:
        return inventory_name
    return _ENV[key] if env.get(_ENV[key]) is not None else None


def _read_kubeconfig(path, name, context, context_name):
    """The kubeconfig file, parsed once; clear errors, naming the variable, for one that is not
    there or lacks the context."""
    if not os.path.exists(path):
        raise ClientError(
            f"{name}: {path} does not exist; valid: the path of this cluster's kubeconfig file "
            "(k8s_kubeconfig in the cluster's host_vars, or K8S_AUTH_KUBECONFIG)"
        )
    doc = _load_yaml(path)
    names = (
        [c.get("name") for c in (doc or {}).get("contexts") or [] if isinstance(c, dict)]
        if isinstance(doc, dict)
        else None
    )
    if context and names is not None and context not in names:
        import difflib

        close = difflib.get_close_matches(context, names, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ClientError(
            f"{context_name or 'context'}: {context!r} is not a context of {path}{hint}; "
            f"valid: {', '.join(names) or '(the file has no contexts)'}"
        )
    return doc


IN_CLUSTER_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# what the collection's own loader reads in a kubeconfig; any other user or cluster key (exec,
# auth-provider, username/password, tokenFile, proxy-url, ...) goes to the kubernetes package
_FAST_USER_KEYS = frozenset(("token", "client-certificate-data", "client-key-data", "client-certificate", "client-key"))
_FAST_CLUSTER_KEYS = frozenset(
    ("server", "certificate-authority-data", "certificate-authority", "insecure-skip-tls-verify")
)
_TEMP_FILES: list = []


class ConfigError(Exception):
    """A kubeconfig the loader cannot use; the caller says where it came from."""


class Configuration:
    """The connection of one identity to one API server: server URL, TLS, credentials.

    The collection's own loader fills it for the common kubeconfigs (bearer token, client
    certificate, CA, insecure-skip-tls-verify), the in-cluster service account and host plus API
    key; the kubernetes package's ``Configuration`` stands in for the rest (same attributes).
    """

    def __init__(self):
        self.host = "http://localhost"
        self.verify_ssl = True
        self.ssl_ca_cert = None  # path
        self.ca_cert_data = None  # PEM text (certificate-authority-data)
        self.cert_file = None
        self.key_file = None
        self.username = None
        self.api_key = {}
        self.connection_pool_maxsize = POOL_SIZE
        self.token_file = None  # re-read every minute (the kubelet rotates a service account's token)
        self._token_read = 0.0

    def auth_settings(self):
        if self.token_file and time.monotonic() - self._token_read > 60:
            with open(self.token_file, encoding="utf-8") as fh:
                self.api_key = {"authorization": f"Bearer {fh.read().strip()}"}
            self._token_read = time.monotonic()
        value = self.api_key.get("authorization")
        return {"BearerToken": {"in": "header", "key": "authorization", "value": value}} if value else {}

    def pool_manager(self):
        kwargs = {
            "num_pools": 4,
            "maxsize": self.connection_pool_maxsize,
            "cert_reqs": "CERT_REQUIRED" if self.verify_ssl else "CERT_NONE",
            "retries": closed_connection_retries(),
        }
        if self.verify_ssl:
            if self.ssl_ca_cert:
                kwargs["ca_certs"] = self.ssl_ca_cert
            elif self.ca_cert_data:
                kwargs["ca_cert_data"] = self.ca_cert_data
            else:
                try:
                    import certifi  # the kubernetes package's default too

                    kwargs["ca_certs"] = certifi.where()
                except ImportError:  # the system's trust store
                    pass
        if self.cert_file:
            kwargs.update(cert_file=self.cert_file, key_file=self.key_file)
        return urllib3.PoolManager(**kwargs)


def _b64(text, what):
    import base64
    import binascii

    try:
        return base64.b64decode(text, validate=False)
    except (binascii.Error, ValueError) as exc:
        raise ConfigError(f"{what} is not valid base64: {exc}") from exc


def _temp_file(data, suffix):
    """A 0600 file holding credential data, removed by :func:`release`."""
    fd, path = tempfile.mkstemp(prefix="inference-blueprints-", suffix=suffix)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    _TEMP_FILES.append(path)
    return path


def _named_entry(doc, section, name, what):
    for item in doc.get(section) or []:
        if isinstance(item, dict) and item.get("name") == name:
            return item.get(what[0]) or {}
    raise ConfigError(f"{what[1]} {name!r} is not defined in the kubeconfig's {section}")


def _fast_kubeconfig(doc, context, base_dir):
    """A :class:`Configuration` for a kubeconfig the collection's own loader reads, or None when
    it uses something only the kubernetes package does (exec plugins, auth providers, ...)."""
    if not isinstance(doc, dict):
        raise ConfigError("the kubeconfig is not a mapping")
    name = context or doc.get("current-context")
    if not name:
        raise ConfigError("no context given and the kubeconfig has no current-context")
    ctx = _named_entry(doc, "contexts", name, ("context", "context"))
    cluster = _named_entry(doc, "clusters", ctx.get("cluster"), ("cluster", "cluster"))
    user = _named_entry(doc, "users", ctx.get("user"), ("user", "user")) if ctx.get("user") else {}
    if set(user) - _FAST_USER_KEYS or set(cluster) - _FAST_CLUSTER_KEYS:
        return None
    if not cluster.get("server"):
        raise ConfigError(f"cluster {ctx.get('cluster')!r} has no server")

    def path(p):
        return p if os.path.isabs(p) or not base_dir else os.path.join(base_dir, p)

    cfg = Configuration()
    cfg.host = cluster["server"]
    cfg.verify_ssl = not cluster.get("insecure-skip-tls-verify", False)
    if cluster.get("certificate-authority-data"):
        cfg.ca_cert_data = _b64(cluster["certificate-authority-data"], "certificate-authority-data").decode()
    elif cluster.get("certificate-authority"):
        cfg.ssl_ca_cert = path(cluster["certificate-authority"])
    if user.get("token"):
        cfg.api_key = {"authorization": f"Bearer {user['token']}"}
    if user.get("client-certificate-data"):
        cfg.cert_file = _temp_file(_b64(user["client-certificate-data"], "client-certificate-data"), ".crt")
    elif user.get("client-certificate"):
        cfg.cert_file = path(user["client-certificate"])
    if user.get("client-key-data"):
        cfg.key_file = _temp_file(_b64(user["client-key-data"], "client-key-data"), ".key")
    elif user.get("client-key"):
        cfg.key_file = path(user["client-key"])
    if bool(cfg.cert_file) != bool(cfg.key_file):
        raise ConfigError(
            f"user {ctx.get('user')!r} has a client certificate without its key, or a key without its certificate"
        )
    return cfg


def _in_cluster(env):
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    token, ca = os.path.join(IN_CLUSTER_DIR, "token"), os.path.join(IN_CLUSTER_DIR, "ca.crt")
    if not host or not port:
        raise ConfigError("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must both be set")
    if not os.path.isfile(token):
        raise ConfigError(f"no service account token at {token}")
    cfg = Configuration()
    cfg.host = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    cfg.ssl_ca_cert = ca if os.path.isfile(ca) else None
    cfg.token_file = token
    cfg.auth_settings()  # reads the token now: an unreadable one fails here
    return cfg


def _load_yaml(path):
    import yaml  # lazy: PyYAML comes with ansible-core

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path, encoding="utf-8") as fh:
        try:
            return yaml.load(fh, Loader=loader)  # noqa: S506 - a safe loader
        except yaml.YAMLError as exc:
            raise ConfigError(f"not a valid kubeconfig file: {exc}") from exc


def _kubernetes_package():
    try:
        from kubernetes import client as k8s
        from kubernetes import config as k8s_config
    except ImportError as exc:
        raise ConfigError(
            "this kubeconfig needs the kubernetes Python package (exec plugins, auth providers), "
            f"which cannot be imported: {exc}"
        ) from exc
    return k8s, k8s_config


def _with_kubernetes(load, *args, **kwargs):
    """A Configuration from the kubernetes package's loader (what ours does not read)."""
    k8s, k8s_config = _kubernetes_package()
    configuration = k8s.Configuration()
    try:
        load(k8s_config)(*args, client_configuration=configuration, **kwargs)
    except k8s_config.ConfigException as exc:
        raise ConfigError(str(exc)) from exc
    return configuration


def _from_kubeconfig(doc, path, context):
    cfg = _fast_kubeconfig(doc, context, os.path.dirname(path) if path else None)
    if cfg is not None:
        return cfg
    if path:
        return _with_kubernetes(lambda m: m.load_kube_config, config_file=path, context=context)
    return _with_kubernetes(lambda m: m.load_kube_config_from_dict, doc, context=context)


def load_configuration(params, env=None):
    """A :class:`Configuration` for the connection options (task args, then K8S_AUTH_*)."""
    env = os.environ if env is None else env
    kubeconfig = _param(params, "kubeconfig", env)
    context = _param(params, "context", env)
    host = _param(params, "host", env)
    api_key = _param(params, "api_key", env)
    kubeconfig_name = _named(params, "kubeconfig", env, "k8s_kubeconfig")
    context_name = _named(params, "context", env, "k8s_context")
    configuration = Configuration()
    source = ""
    try:
        if isinstance(kubeconfig, dict):
            source = f"the {kubeconfig_name or 'kubeconfig'} mapping"
            configuration = _from_kubeconfig(kubeconfig, None, context)
        elif kubeconfig:
            path = os.path.expanduser(str(kubeconfig))
            source = f"{kubeconfig_name or 'kubeconfig'}={path}"
            doc = _read_kubeconfig(path, kubeconfig_name or "kubeconfig", context, context_name)
            configuration = _from_kubeconfig(doc, path, context)
        elif host and api_key:
            source = f"{_named(params, 'host', env, 'host') or 'host'}={host} with an API key"
            configuration.host = host
        elif env.get("KUBERNETES_SERVICE_HOST"):
            source = "the in-cluster service account"
            configuration = _in_cluster(env)
        else:
            default = env.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
            name = "KUBECONFIG" if env.get("KUBECONFIG") else "the default kubeconfig"
            source = f"{name}={default}"
            if os.pathsep not in default:
                doc = _read_kubeconfig(
                    default, f"{name} (neither k8s_kubeconfig nor K8S_AUTH_KUBECONFIG is set)", context, context_name
                )
                configuration = _from_kubeconfig(doc, default, context)
            else:  # several files, merged the kubernetes package's way
                configuration = _with_kubernetes(lambda m: m.load_kube_config, config_file=default, context=context)
    except (ConfigError, OSError) as exc:
        raise ClientError(f"cannot load Kubernetes credentials from {source or 'the environment'}: {exc}") from exc
    if context:
        source += f", {context_name or 'context'}={context}"
    configuration.inference_blueprints_source = source
    return _overridden(configuration, params, env)


def _overridden(configuration, params, env):
    """The task options (or K8S_AUTH_*) that override the kubeconfig: host, API key, TLS checks, CA."""
    host = _param(params, "host", env)
    if host:
        configuration.host = host
    api_key = _param(params, "api_key", env)
    if api_key:
        configuration.api_key = {"authorization": f"Bearer {api_key}"}
    validate = _param(params, "validate_certs", env)
    if validate is not None:
        configuration.verify_ssl = bool(validate)
    ca_cert = _param(params, "ca_cert", env)
    if ca_cert:
        configuration.ssl_ca_cert = ca_cert
    return configuration


_CLIENTS = {}
_CLIENTS_LOCK = threading.Lock()


def get_client(params, env=None):
    """The :class:`Client` for the connection options in ``params``, built once per process."""
    env = dict(os.environ if env is None else env)
    key = _connection_key(params, env) + "|" + json.dumps([env.get(ENV_TRACE), default_cache_dir(env)])
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = Client(load_configuration(params, env), env)
            _CLIENTS[key] = client
        return client


def release():
    """Close every client of this process and delete the credential files the kubeconfig
    loader wrote (client certificate, key, CA) to the temp directory.

    The loader removes them in an ``atexit`` hook, but Ansible's worker processes end with
    ``os._exit``, which skips it: the action plugins call this when their task is done.
    """
    with _CLIENTS_LOCK:
        for client in _CLIENTS.values():
            client.close()
        _CLIENTS.clear()
    while _TEMP_FILES:
        with contextlib.suppress(OSError):
            os.unlink(_TEMP_FILES.pop())
    kube_config = sys.modules.get("kubernetes.config.kube_config")  # only when a run needed the package
    cleanup = getattr(kube_config, "_cleanup_temp_files", None)
    if cleanup is not None:
        cleanup()


class Client:
    """JSON requests to one API server with one identity, and its discovery."""

    def __init__(self, configuration, env=None):
        env = os.environ if env is None else env
        self.configuration = configuration
        self.server = configuration.host.rstrip("/")
        # where the connection came from, for messages: "K8S_AUTH_KUBECONFIG=/path, k8s_context=admin"
        self.source = getattr(configuration, "inference_blueprints_source", "") or "the connection options"
        configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, POOL_SIZE)
        if isinstance(configuration, Configuration):
            self._http = configuration.pool_manager()
        else:  # the kubernetes package's Configuration (exec plugins, auth providers, ...)
            from kubernetes.client import rest as k8s_rest

            if getattr(configuration, "retries", None) is None:
                configuration.retries = closed_connection_retries()
            self._http = k8s_rest.RESTClientObject(configuration).pool_manager
        self._trace_path = env.get(ENV_TRACE)
        self._answered = False
        self._trace_lock = threading.Lock()
        self.discovery = Discovery(self, default_cache_dir(env), discovery_ttl(env))

    def close(self):
        self._http.clear()

    # -- identity, tracing
    def _auth_headers(self):
        headers = {}
        for setting in (self.configuration.auth_settings() or {}).values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[setting["key"]] = setting["value"]
        return headers

    def identity(self):
        """SHA-256 over the server and the credentials (never stored or shown in clear)."""
        digest = hashlib.sha256(self.server.encode())
        for key, value in sorted(self._auth_headers().items()):
            digest.update(f"\0{key}={value}".encode())
        for path in (self.configuration.cert_file,):
            if path:
                try:
                    with open(path, "rb") as fh:
                        digest.update(b"\0cert=" + fh.read())
                except OSError:
                    digest.update(f"\0cert={path}".encode())
        if self.configuration.username:
            digest.update(f"\0user={self.configuration.username}".encode())
        return digest.hexdigest()[:32]

    def trace(self, **event):
        if not self._trace_path:
            return
        event["pid"] = os.getpid()
        event["t"] = round(time.time(), 3)
        line = json.dumps(event, sort_keys=True) + "\n"
        with self._trace_lock, open(self._trace_path, "a", encoding="utf-8") as fh:
            fh.write(line)

    # -- requests
    def request(self, method, path, *, query=None, body=None, content_type=None, accept=None, timeout=None):
        """Send one request; return the parsed JSON answer (``{}`` when empty). Raises :class:`ApiError`."""
        url = self.server + path
        if query:
            url += "?" + urlencode(query)
        headers = {"Accept": accept or "application/json", "User-Agent": USER_AGENT}
        headers.update(self._auth_headers())
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = content_type or "application/json"
        read_timeout = timeout or REQUEST_TIMEOUT
        spent = 0.0
        attempt = 0
        down_since = None
        while True:
            try:
                resp = self._http.request(
                    method,
                    url,
                    body=data,
                    headers=headers,
                    timeout=urllib3.Timeout(connect=min(10.0, read_timeout), read=read_timeout),
                    preload_content=True,
                )
            except urllib3.exceptions.HTTPError as exc:
                self.trace(method=method, path=path, query=query and urlencode(query), status=0, error=_reason(exc))
                now = time.monotonic()
                down_since = now if down_since is None else down_since
                went_away = any(w in str(exc) for w in _WENT_AWAY) and self._answered_before()
                if went_away and now - down_since < DOWN_BUDGET:
                    time.sleep(min(0.25 * 2 ** min(int(now - down_since), 3), 2.0))
                    continue
                waited = f" (it answered before; sent again for {now - down_since:.0f} s)" if went_away else ""
                raise ClientError(
                    f"cannot reach the API server {self.server} ({self.source}): {_reason(exc)}{waited}; "
                    "valid: the address of a running API server that this host can reach, in the kubeconfig "
                    "that k8s_kubeconfig / K8S_AUTH_KUBECONFIG and k8s_context name"
                ) from exc
            self.trace(method=method, path=path, query=query and urlencode(query), status=resp.status)
            self._answered = True
            if 200 <= resp.status < 300:
                if not resp.data:
                    return {}
                try:
                    return json.loads(resp.data.decode("utf-8"))
                except ValueError:
                    return {"raw": resp.data.decode("utf-8", "replace")}
            resp_headers = dict(resp.headers)
            if resp.status == 401:
                raise Unauthorized(method, path, resp.status, resp.data, resp_headers, why=self._unauthorized())
            if retryable(resp.status, resp_headers) and attempt < MAX_RETRIES and spent < RETRY_BUDGET:
                retry_after = next((v for k, v in resp_headers.items() if k.lower() == "retry-after"), None)
                delay = retry_delay(attempt, retry_after)
                spent += delay
                attempt += 1
                time.sleep(delay)
                continue
            err = ApiError(method, path, resp.status, resp.data, resp_headers)
            if retryable(resp.status, resp_headers):
                # whatever the caller was doing (discovery included), say that it was throttling
                err.args = (
                    f"the API server {self.server} kept throttling {method} {path} (HTTP {resp.status}) "
                    f"after {attempt} retries over {spent:.0f} s: {err.message}; nothing more was sent. "
                    "Run again when the API server is less loaded (its priority and fairness settings decide "
                    "who is throttled); a re-run applies only what is still missing",
                )
            raise err

    def _answered_before(self):
        """Whether the API server answered this host before: in this process, or its discovery is cached on disk
        (written after a fetch from it, whatever its age)."""
        return self._answered or os.path.exists(self.discovery.path)

    def _unauthorized(self):
        """Why the API server answered 401, as far as the client can tell, and what would be valid."""
        why = "they are not valid for this cluster (revoked, for another cluster, or mistyped)"
        expired = _certificate_expiry(self.configuration.cert_file) or _token_expiry(self._auth_headers())
        if expired:
            why = f"{expired[0]} expired on {expired[1]}"
        return (
            f"the API server {self.server} answered 401 Unauthorized to the credentials of {self.source}: {why}; "
            "valid: current credentials for this cluster (log in again, e.g. oc login, or renew the token or "
            "client certificate, and point k8s_kubeconfig / K8S_AUTH_KUBECONFIG at them)"
        )

    # -- discovery
    def resource(self, api_version, kind, refresh_after=None):
        return self.discovery.resource(api_version, kind, refresh_after=refresh_after)

    # -- objects
    def get(self, resource, name, namespace=None, timeout=None):
        """The live object as a dict, or None when it does not exist."""
        try:
            return self.request("GET", resource_path(resource, name, namespace), timeout=timeout)
        except ApiError as exc:
            if exc.object_not_found(name):
                return None
            if exc.status == 404:
                raise self.discovery.gone(resource, exc) from exc
            raise

    def apply(self, resource, obj, *, field_manager, force, dry_run=False, validation="Strict"):
        meta = obj["metadata"]
        query = [("fieldManager", field_manager), ("fieldValidation", validation)]
        if force:
            query.append(("force", "true"))
        if dry_run:
            query.append(("dryRun", "All"))
        path = resource_path(resource, meta["name"], meta.get("namespace"))
        try:
            return self.request("PATCH", path, query=query, body=obj, content_type="application/apply-patch+yaml")
        except ApiError as exc:
            if exc.status == 404 and not exc.details.get("name"):
                raise self.discovery.gone(resource, exc) from exc
            raise

    def delete(self, resource, name, namespace=None, *, dry_run=False, propagation="Background"):
        """Delete; return False when the object was already gone."""
        query = [("propagationPolicy", propagation)]
        if dry_run:
            query.append(("dryRun", "All"))
        try:
            self.request("DELETE", resource_path(resource, name, namespace), query=query)
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True


def _reason(exc):
    """The root cause of a connection failure in a few words ("[Errno 111] Connection refused")."""
    text = str(getattr(exc, "reason", None) or exc)
    found = re.findall(r"\[Errno -?\d+\] [^'\"()]+|certificate verify failed[^'\"()]*|timed out", text)
    return found[-1].strip() if found else type(exc).__name__


# datetime.UTC is Python 3.11+; modules may run on older Pythons on the target
_UTC = datetime.timezone.utc  # noqa: UP017


def _when(dt):
    return dt.strftime("%Y-%m-%d %H:%M UTC")


def _certificate_expiry(path):
    """("its client certificate", when) when the client certificate has expired, else None."""
    if not path:
        return None
    try:
        from cryptography import x509  # lazy: ansible-core requires cryptography

        with open(path, "rb") as fh:
            cert = x509.load_pem_x509_certificate(fh.read())
        end = cert.not_valid_after_utc
        if end < datetime.datetime.now(_UTC):
            return ("its client certificate", _when(end))
    except Exception:  # noqa: BLE001 - no verdict when the certificate cannot be read
        return None
    return None


def _token_expiry(headers):
    """("its bearer token", when) when the token is a JWT whose exp has passed, else None."""
    import base64

    auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
    parts = auth.split(" ", 1)[-1].split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        exp = datetime.datetime.fromtimestamp(int(payload["exp"]), _UTC)
    except Exception:  # noqa: BLE001 - an opaque token (e.g. OpenShift's sha256~): no verdict
        return None
    return ("its bearer token", _when(exp)) if exp < datetime.datetime.now(_UTC) else None


# ---------------------------------------------------------------------------- discovery


class Discovery:
    """(apiVersion, kind) -> Resource for one server and identity, cached in a file."""

    def __init__(self, client, cache_dir, ttl):
        self.client = client
        self.cache_dir = cache_dir
        self.ttl = ttl
        self._lock = threading.RLock()
        self._data = None
        self._refreshed_at = None  # monotonic time of the last fetch from the server in this process
        self._path = None

    @property
    def path(self):
        if self._path is None:
            self._path = os.path.join(self.cache_dir, safe_host(self.client.server), f"{self.client.identity()}.json")
        return self._path

    # -- file
    def _read(self):
        try:
            with open(self.path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            return None
        if (
            not isinstance(data, dict)
            or data.get("format") != CACHE_FORMAT
            or data.get("server") != self.client.server
            or not isinstance(data.get("resources"), dict)
        ):
            return None
        age = time.time() - float(data.get("fetched", 0))
        if age < 0 or age > self.ttl:
            self.client.trace(event="discovery-cache-expired", file=self.path, age=round(age, 1))
            return None
        self.client.trace(event="discovery-cache-read", file=self.path, age=round(age, 1))
        return data

    def _write(self, data):
        directory = os.path.dirname(self.path)
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, separators=(",", ":"))
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except OSError:
            pass  # a read-only home: discovery still works, just uncached

    # -- fetching
    def _fetch(self):
        self.client.trace(event="discovery-fetch", file=self.path)
        try:
            core = self.client.request("GET", "/api", accept=AGGREGATED_ACCEPT)
        except ApiError as exc:
            if exc.status != 404:
                raise
            # every Kubernetes API server serves /api: whatever answered is something else, or the URL has a path
            raise ClientError(
                f"the server {self.client.server} ({self.client.source}) answered 404 for /api, the path every "
                f"Kubernetes API server serves: it is not the cluster's API server, or its URL carries a path; "
                "valid: the cluster's API URL (https://api.<cluster>.<domain>:6443 on OpenShift) as cluster.server "
                "in the kubeconfig that k8s_kubeconfig / K8S_AUTH_KUBECONFIG and k8s_context name"
            ) from None
        if core.get("kind") == "APIGroupDiscoveryList":
            apis = self.client.request("GET", "/apis", accept=AGGREGATED_ACCEPT)
            groups, resources, stale = parse_aggregated(core)
            more = parse_aggregated(apis)
            groups.update(more[0])
            resources.update(more[1])
            stale += more[2]
            aggregated = True
        else:  # no aggregated discovery: group list now, resources per group/version on demand
            groups = {"": list(core.get("versions") or ["v1"])}
            groups.update(parse_group_list(self.client.request("GET", "/apis")))
            resources, stale, aggregated = {}, [], False
        data = {
            "format": CACHE_FORMAT,
            "server": self.client.server,
            "fetched": time.time(),
            "aggregated": aggregated,
            "groups": groups,
            "resources": resources,
            "stale": stale,
        }
        self._refreshed_at = time.monotonic()
        self._data = data
        self._write(data)
        return data

    def _group_version(self, data, gv):
        """Resources of one group/version, fetched directly when the aggregated list lacks them."""
        kinds = data["resources"].get(gv)
        if kinds is not None and gv not in data.get("stale", []):
            return kinds
        group, version = split_api_version(gv)
        if version not in data["groups"].get(group, []):
            return None
        path = f"/apis/{gv}" if group else f"/api/{version}"
        try:
            kinds = parse_resource_list(self.client.request("GET", path))
        except ApiError as exc:
            if exc.status in (404, 503):
                return kinds
            raise
        data["resources"][gv] = kinds
        if gv in data.get("stale", []):
            data["stale"].remove(gv)
        self._write(data)
        return kinds

    def _ensure(self):
        if self._data is None:
            self._data = self._read() or self._fetch()
        return self._data

    def refresh(self):
        with self._lock:
            return self._fetch()

    def gone(self, resource, error):
        """A request found no such resource path: refresh discovery and say what is (not) served."""
        api_version = api_version_of(resource)
        with self._lock:
            data = self._fetch()
            if self._find(data, api_version, resource.kind) is not None:
                return error  # still served: the 404 means something else
        group, version = split_api_version(api_version)
        served = data["groups"].get(group)
        kinds = self._group_version(data, api_version) if served and version in served else None
        return KindNotServed(not_served_message(resource.kind, api_version, served, kinds))

    def resource(self, api_version, kind, refresh_after=None):
        """The Resource for (apiVersion, kind). A miss refreshes discovery once per process
        (or again after ``refresh_after`` seconds, for waits on kinds an operator installs)."""
        with self._lock:
            data = self._ensure()
            found = self._find(data, api_version, kind)
            if found is None:
                stale_enough = self._refreshed_at is None or (
                    refresh_after is not None and time.monotonic() - self._refreshed_at >= refresh_after
                )
                if stale_enough:
                    data = self._fetch()
                    found = self._find(data, api_version, kind)
            if found is not None:
                return found
            group, version = split_api_version(api_version)
            served = data["groups"].get(group)
            kinds = None
            if served and version in served:
                kinds = self._group_version(data, api_version) or {}
            raise KindNotServed(not_served_message(kind, api_version, served, kinds))

    def _find(self, data, api_version, kind):
        kinds = self._group_version(data, api_version)
        entry = (kinds or {}).get(kind)
        if entry is None:
            return None
        group, version = split_api_version(api_version)
        plural, namespaced, verbs, subresources = entry
        return Resource(group, version, kind, plural, bool(namespaced), tuple(verbs), tuple(subresources))

    def kinds(self, api_version):
        """kind -> [plural, namespaced, verbs, subresources] of one served group/version ({} when not served)."""
        with self._lock:
            return self._group_version(self._ensure(), api_version) or {}

    def served(self):
        """group -> served versions (preferred first)."""
        with self._lock:
            return dict(self._ensure()["groups"])


__all__ = [
    "AUTH_ARG_SPEC",
    "ApiError",
    "Client",
    "ClientError",
    "HAS_KUBERNETES",
    "KUBERNETES_IMPORT_ERROR",
    "KindNotServed",
    "Unauthorized",
    "Resource",
    "api_version_of",
    "explain",
    "get_client",
    "lookup",
    "normalize",
    "ref",
    "resource_path",
    "retry_delay",
]
