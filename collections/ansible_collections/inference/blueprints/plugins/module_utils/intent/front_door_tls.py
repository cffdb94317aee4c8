# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""TLS on the front doors that carry tenant API keys (the AI grid's Gateway) or regulated request bodies (the
sovereign front door): where each listener's certificate comes from, decided here once (issue 35 item 4). The
site variable ``front_door_tls`` chooses; the roles' templates only give the result its shape.

Sources (``front_door_tls.source``):

* ``service-ca`` (the default; every OpenShift cluster runs the service CA operator): OpenShift's service CA
  signs a certificate for the proxy's Service. Envoy Gateway creates that Service in its controller's namespace
  (the default ``ControllerNamespace`` deploy mode) with the name and annotations of the Gateway's
  ``EnvoyProxy`` (``spec.provider.kubernetes.envoyService.name`` / ``.annotations``; github.com/envoyproxy/
  gateway v1.9.0 internal/infrastructure/kubernetes/proxy/resource_provider.go, Service). The annotation
  ``service.beta.openshift.io/serving-cert-secret-name`` makes the operator write a ``kubernetes.io/tls`` Secret
  of that name beside the Service, valid for ``<service>.<namespace>.svc``. The listener refers to that Secret
  across namespaces, which Gateway API allows only through a ``ReferenceGrant`` in the Secret's namespace.
  Clients in the cluster verify it with the ``openshift-service-ca.crt`` ConfigMap every namespace holds; an
  OpenShift Route with ``reencrypt`` termination verifies it as well.
* ``cert-manager``: a cert-manager ``Certificate`` in the gateway's namespace, for the names the site lists
  (``front_door_tls.hostnames``), signed by the Issuer or ClusterIssuer it names; its Secret is the listener's.
* ``secret``: a ``kubernetes.io/tls`` Secret the site provides (``front_door_tls.secret``), in the gateway's
  namespace.
* ``plaintext``: an HTTP listener, only because the site says so; the plan summary warns what crosses it in the
  clear.

The listener's port is the role's port option when the site sets one, else 443 (HTTPS) or 80 (plaintext).
"""

from __future__ import annotations

from .schema import DNS_SUBDOMAIN, Field

SOURCES = ("service-ca", "cert-manager", "secret", "plaintext")
DEFAULT_SOURCE = "service-ca"
SERVING_CERT_ANNOTATION = "service.beta.openshift.io/serving-cert-secret-name"
CERT_MANAGER = {"apiVersion": "cert-manager.io/v1", "group": "cert-manager.io"}
LISTENER = "front-door"  # the listener's name, whatever its protocol (routes attach to the Gateway, not to it)
NAME_MAX = 63


def _check(value: dict) -> str | None:
    """What a source needs, said before anything is applied."""
    source = value.get("source") or DEFAULT_SOURCE
    if source == "cert-manager" and not ((value.get("issuer") or {}).get("name") and value.get("hostnames")):
        return (
            "source cert-manager needs issuer.name (the Issuer or ClusterIssuer that signs the certificate) and "
            "hostnames (the names clients reach the front door by)"
        )
    if source == "secret" and not value.get("secret"):
        return "source secret needs secret: the kubernetes.io/tls Secret (in the gateway's namespace) to serve"
    stray = [k for k in ("issuer", "hostnames", "secret") if value.get(k) and not _uses(source, k)]
    if stray:
        return (
            f"{', '.join(stray)} not read with source {source} (valid with: "
            + "; ".join(f"{k}: {'cert-manager' if k != 'secret' else 'secret'}" for k in stray)
            + ")"
        )
    return None


def _uses(source: str, key: str) -> bool:
    return (source, key) in {("cert-manager", "issuer"), ("cert-manager", "hostnames"), ("secret", "secret")}


FIELD = Field(
    "dict",
    options={
        "source": Field(
            "str",
            choices=SOURCES,
            default=DEFAULT_SOURCE,
            doc="where the front door's certificate comes from: OpenShift's service CA, cert-manager, a Secret of "
            "the site's, or plaintext (no TLS: API keys and request bodies cross the listener in the clear)",
        ),
        "issuer": Field(
            "dict",
            options={
                "kind": Field("str", choices=("ClusterIssuer", "Issuer"), default="ClusterIssuer"),
                "name": Field("str", pattern=DNS_SUBDOMAIN, pattern_doc="an issuer name"),
            },
            doc="cert-manager: the issuer that signs the certificate",
        ),
        "hostnames": Field(
            "list",
            elements=Field("str", pattern=DNS_SUBDOMAIN, pattern_doc="a DNS name (lower case)"),
            doc="cert-manager: the names the certificate is for (the first is the front door's address)",
        ),
        "secret": Field(
            "str", pattern=DNS_SUBDOMAIN, pattern_doc="a Secret name", doc="secret: the kubernetes.io/tls Secret"
        ),
    },
    check=_check,
    doc="TLS of the front doors that carry API keys (ai_grid) or regulated bodies (sovereign_burst's on-prem "
    "cluster); default: a certificate from OpenShift's service CA",
)


def _name(*parts: str) -> str:
    return "-".join(parts)[:NAME_MAX].rstrip("-")


def build(site: dict, door: dict) -> dict:
    """The listener of one front door and what its certificate needs. ``door``: ``gateway`` and ``namespace``
    (the Gateway), ``port`` (the role's port option; None: the protocol's port), ``carries`` (what crosses it,
    for the warning), ``eg_namespace`` (where Envoy Gateway creates the proxy's Service: its controller's)."""
    gateway, namespace, port, carries = door["gateway"], door["namespace"], door["port"], door["carries"]
    eg_namespace = door["eg_namespace"]
    cfg = site.get("front_door_tls") or {}
    source = cfg.get("source") or DEFAULT_SOURCE
    out = {
        "source": source,
        "envoy_proxy": None,
        "reference_grant": None,
        "certificate": None,
        "warning": None,
    }
    if source == "plaintext":
        out["listener"] = {"name": LISTENER, "protocol": "HTTP", "port": port or 80, "certificate_refs": []}
        out["address"] = None
        out["warning"] = (
            f"front door {namespace}/{gateway} is plaintext (front_door_tls.source: plaintext): {carries} cross it "
            "in the clear"
        )
        return out
    port = port or 443
    if source == "service-ca":
        service = _name(namespace, gateway)  # unique in the controller's namespace, which every site shares
        secret = _name(service, "tls")
        out["envoy_proxy"] = {
            "name": _name(gateway, "proxy"),
            "service": {"name": service, "annotations": {SERVING_CERT_ANNOTATION: secret}},
        }
        out["reference_grant"] = {
            "name": _name(namespace, gateway, "cert"),
            "namespace": eg_namespace,
            "from_namespace": namespace,
            "secret": secret,
        }
        ref = {"group": "", "kind": "Secret", "name": secret, "namespace": eg_namespace}
        out["address"] = f"https://{service}.{eg_namespace}.svc:{port}"
    elif source == "cert-manager":
        secret = _name(gateway, "tls")
        issuer = cfg["issuer"]
        out["certificate"] = {
            **CERT_MANAGER,
            "name": secret,
            "namespace": namespace,
            "secret": secret,
            "dns_names": list(cfg["hostnames"]),
            "issuer": {
                "group": CERT_MANAGER["group"],
                "kind": issuer.get("kind") or "ClusterIssuer",
                "name": issuer["name"],
            },  # fmt: skip
        }
        ref = {"group": "", "kind": "Secret", "name": secret}
        out["address"] = f"https://{cfg['hostnames'][0]}:{port}"
    else:  # secret
        ref = {"group": "", "kind": "Secret", "name": cfg["secret"]}
        out["address"] = None
    out["listener"] = {"name": LISTENER, "protocol": "HTTPS", "port": port, "certificate_refs": [ref]}
    return out


def summary_lines(intent: dict) -> list[str]:
    """Each front door's TLS in the plan summary, and the warning of a plaintext one."""
    out = []
    for where, tls in _front_doors(intent):
        if tls["warning"]:
            out.append(f"{where}: WARNING {tls['warning']}")
        else:
            out.append(f"{where}: TLS ({tls['source']}) on port {tls['listener']['port']}")
    return out


def _front_doors(intent: dict) -> list[tuple[str, dict]]:
    out = []
    gw = intent.get("gateway") or {}
    if gw.get("tls"):
        out.append(("AI grid front door", gw["tls"]))
    front = (intent.get("burst") or {}).get("front_door") or {}
    if (front.get("gateway") or {}).get("tls"):
        out.append(("sovereign front door", front["gateway"]["tls"]))
    return out
