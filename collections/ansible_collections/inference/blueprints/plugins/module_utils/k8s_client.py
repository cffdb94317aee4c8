# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes client construction and object helpers shared by the collection's modules.

Private to the collection: the public interface is the modules.
"""

from __future__ import annotations

import os

try:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import ApiException, NotFoundError, ResourceNotFoundError

    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - reported by the module
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

# Metadata the server owns; ignored when comparing desired and live objects.
VOLATILE_METADATA = ("managedFields", "resourceVersion", "generation", "creationTimestamp", "uid", "selfLink")


class ClientError(Exception):
    """A connection or API problem, with a message meant for the user."""

    def __init__(self, msg, results=None):
        super().__init__(msg)
        self.results = results or []


def _param(params, key):
    value = params.get(key)
    if value is None:
        value = os.environ.get(_ENV[key])
        if key == "validate_certs" and value is not None:
            value = str(value).lower() not in ("0", "false", "no", "off")
    return value


def get_client(params):
    """Return a DynamicClient for the connection options in ``params``."""
    kubeconfig = _param(params, "kubeconfig")
    context = _param(params, "context")
    host = _param(params, "host")
    api_key = _param(params, "api_key")
    configuration = k8s.Configuration()
    try:
        if isinstance(kubeconfig, dict):
            k8s_config.load_kube_config_from_dict(kubeconfig, context=context, client_configuration=configuration)
        elif kubeconfig:
            path = os.path.expanduser(str(kubeconfig))
            if not os.path.exists(path):
                raise ClientError(f"kubeconfig {path} does not exist")
            k8s_config.load_kube_config(config_file=path, context=context, client_configuration=configuration)
        elif host and api_key:
            configuration.host = host
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            k8s_config.load_kube_config(context=context, client_configuration=configuration)
    except k8s_config.ConfigException as exc:
        raise ClientError(f"cannot load Kubernetes credentials: {exc}") from exc
    if host:
        configuration.host = host
    if api_key:
        configuration.api_key = {"authorization": f"Bearer {api_key}"}
    validate = _param(params, "validate_certs")
    if validate is not None:
        configuration.verify_ssl = bool(validate)
    ca_cert = _param(params, "ca_cert")
    if ca_cert:
        configuration.ssl_ca_cert = ca_cert
    try:
        return DynamicClient(k8s.ApiClient(configuration))
    except Exception as exc:  # discovery failure: unreachable server, bad credentials
        raise ClientError(f"cannot reach the Kubernetes API at {configuration.host}: {_reason(exc)}") from exc


def _reason(exc):
    body = getattr(exc, "body", None)
    if body:
        try:
            import json

            return json.loads(body).get("message", str(body))
        except (ValueError, AttributeError):
            return str(body)
    return str(exc)


def api_error_message(exc):
    """The API server's own message for an ApiException."""
    return _reason(exc)


def ref(obj):
    """Human-readable reference: Kind namespace/name (group/version)."""
    meta = obj.get("metadata", {})
    name = meta.get("name", "?")
    if meta.get("namespace"):
        name = f"{meta['namespace']}/{name}"
    return f"{obj.get('kind', '?')} {name} ({obj.get('apiVersion', '?')})"


def resource_for(client, api_version, kind):
    try:
        return client.resources.get(api_version=api_version, kind=kind)
    except ResourceNotFoundError:
        # The discovery cache may predate a CRD installed moments ago.
        client.resources.invalidate_cache()
        try:
            return client.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError as exc:
            raise ClientError(
                f"the API server does not serve {kind} in {api_version}: is the operator or CRD that "
                "provides it installed, and is this the API version your cluster serves?"
            ) from exc


def get_live(client, resource, name, namespace):
    try:
        return resource.get(name=name, namespace=namespace).to_dict()
    except NotFoundError:
        return None


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


__all__ = [
    "AUTH_ARG_SPEC",
    "ApiException",
    "ClientError",
    "HAS_KUBERNETES",
    "KUBERNETES_IMPORT_ERROR",
    "NotFoundError",
    "api_error_message",
    "get_client",
    "get_live",
    "lookup",
    "normalize",
    "ref",
    "resource_for",
]
