"""Admission webhooks of the upstream controllers on a local control plane (TEST-SIDE ONLY).

On a cluster a controller's webhooks are Services in its namespace, with a certificate from
cert-manager or the controller's own rotator. Here the controller listens on a loopback port and
its webhook configurations, read from the upstream module, are pointed at
``https://127.0.0.1:<port><path>`` with the instance CA as ``caBundle``; the serving certificate is
issued by that CA (``pki/ca.{crt,key}`` of kcp) for 127.0.0.1.
"""

from __future__ import annotations

import copy
import datetime
import ipaddress
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .cluster import ControlPlane


def issue_serving_cert(
    pki: Path,
    out_dir: Path,
    common_name: str = "webhook-server",
    dns_names: tuple[str, ...] = (),
    client: bool = False,
) -> None:
    """tls.crt/tls.key for 127.0.0.1 (and ``dns_names``), signed by the control plane's CA (pki/ca.crt, ca.key);
    ``client``: good for client authentication too (KEDA's operator and metrics server share one for mTLS)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_cert = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    *(x509.DNSName(n) for n in ("localhost", *dns_names)),
                ]
            ),
            critical=False,
        )
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, *([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file = out_dir / "tls.key"
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_file.chmod(0o600)


def pointed(doc: dict, port: int, ca_bundle: str, name: str | None = None) -> dict:
    """A Mutating/ValidatingWebhookConfiguration whose webhooks call https://127.0.0.1:<port><path>."""
    doc = copy.deepcopy(doc)
    doc["metadata"] = {"name": name or doc["metadata"]["name"]}
    for hook in doc["webhooks"]:
        path = hook["clientConfig"]["service"]["path"]
        hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
    return doc


def put(cp: ControlPlane, obj: dict) -> None:
    """Create or replace a cluster-scoped admissionregistration object."""
    base = f"/apis/{obj['apiVersion']}/{obj['kind'].lower()}s"
    name = obj["metadata"]["name"]
    if cp._call("POST", base, obj) is None:  # exists: replace it
        current = cp._call("GET", f"{base}/{name}")
        obj = obj | {"metadata": obj["metadata"] | {"resourceVersion": current["metadata"]["resourceVersion"]}}
        cp._call("PUT", f"{base}/{name}", obj)


def json_patch(doc: dict, ops: list[dict]) -> dict:
    """Apply RFC 6902 ``add``/``replace``/``remove`` operations (what kustomize's patches of the
    upstream webhook configurations use) to a copy of doc."""
    doc = copy.deepcopy(doc)
    for op in ops:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
        target = doc
        for p in parents:
            target = target[int(p)] if isinstance(target, list) else target[p]
        key = (len(target) if last == "-" else int(last)) if isinstance(target, list) else last
        if op["op"] == "remove":
            del target[key]
        elif op["op"] == "add" and isinstance(target, list):
            target.insert(key, copy.deepcopy(op["value"]))
        elif op["op"] in ("add", "replace"):
            target[key] = copy.deepcopy(op["value"])
        else:
            raise ValueError(f"unsupported JSON patch operation {op['op']!r}")
    return doc
