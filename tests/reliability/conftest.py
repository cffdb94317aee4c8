"""One local control plane for the whole reliability package (tests/reliability).

``plane`` is started once, before the first reliability test, and stopped after the last one, so
the catalogue never holds a second control plane beside the session's others for longer than it
runs. Profile ``l40s-decode-mix``: H100 nodes with RDMA NICs and L40S nodes without (for the
RDMA-without-NICs case). ``RELIABILITY_CLUSTER_DIR=<dir of cluster.py up>`` uses a running one
instead (development only).
"""

from __future__ import annotations

import base64
import datetime
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.reliability.harness import Census, quiet_total

PROFILE = "l40s-decode-mix"


@dataclass
class Plane:
    workdir: Path
    kubeconfig: str
    cp: object = None  # controlplane.cluster.ControlPlane when we started it
    _census: Census | None = field(default=None, repr=False)

    def api_client(self, kubeconfig: str | None = None):
        from kubernetes import client, config

        cfg = client.Configuration()
        config.load_kube_config(config_file=kubeconfig or self.kubeconfig, client_configuration=cfg)
        cfg.connection_pool_maxsize = 16
        return client.ApiClient(cfg)

    @property
    def census(self) -> Census:
        if self._census is None:
            self._census = Census(self.api_client())
        return self._census

    @property
    def server(self) -> str:
        return yaml.safe_load(Path(self.kubeconfig).read_text())["clusters"][0]["cluster"]["server"]

    @property
    def ca_file(self) -> str:
        return str(self.workdir / "pki" / "ca.crt")

    def call(self, method: str, path: str, body=None, content_type: str | None = None):
        from simulator.kube import request

        return request(self.census.api, method, path, body=body, content_type=content_type, timeout=60)

    def ensure(self, obj: dict) -> None:
        """Server-side apply of one object as the test's own field manager (admin)."""
        from tests.reliability.harness import object_path

        self.call(
            "PATCH",
            object_path(obj) + "?fieldManager=reliability-test&force=true",
            obj,
            content_type="application/apply-patch+yaml",
        )

    def service_account_token(self, namespace: str, name: str, seconds: int = 3600) -> str:
        """A ServiceAccount (created when missing) and a TokenRequest token for it: no rights
        beyond what RBAC bindings give it."""
        self.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        self.ensure({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}})
        tr = self.call(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": seconds}},
        )
        return tr["status"]["token"]

    def token_kubeconfig(self, token: str, path: Path, user: str = "token-user") -> str:
        cluster = yaml.safe_load(Path(self.kubeconfig).read_text())["clusters"][0]["cluster"]
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kcp", "cluster": cluster}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "kcp", "context": {"cluster": "kcp", "user": user}}],
            "current-context": "kcp",
        }
        path.write_text(yaml.safe_dump(doc))
        path.chmod(0o600)
        return str(path)


@pytest.fixture(scope="package")
def plane():
    existing = os.environ.get("RELIABILITY_CLUSTER_DIR")
    if existing:
        wd = Path(existing)
        state = json.loads((wd / "state.json").read_text())
        p = Plane(wd, state["kubeconfig"])
        quiet_total(p.census)
        yield p
        return
    from controlplane.cluster import ControlPlane

    cp = ControlPlane(PROFILE).start()
    try:
        p = Plane(Path(cp.workdir), cp.kubeconfig, cp)
        quiet_total(p.census)
        yield p
    finally:
        cp.stop()


@pytest.fixture(scope="package")
def broken_kubeconfigs(plane, tmp_path_factory) -> dict[str, str]:
    """Kubeconfigs a user may hold by mistake (docs/reliability.md, edit ``kubeconfig VARIANT``)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    out = tmp_path_factory.mktemp("kubeconfigs")
    good = yaml.safe_load(Path(plane.kubeconfig).read_text())

    def variant(name: str, change) -> str:
        doc = json.loads(json.dumps(good))
        change(doc)
        path = out / name
        path.write_text(yaml.safe_dump(doc))
        return str(path)

    # a client certificate the cluster's own CA issued, valid until yesterday
    pki = plane.workdir / "pki"
    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), None)
    ca = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.COMMON_NAME, "former-admin"),
                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                ]
            )
        )
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=30))
        .not_valid_after(now - datetime.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = base64.b64encode(cert.public_bytes(serialization.Encoding.PEM)).decode()
    key_pem = base64.b64encode(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    ).decode()

    def expired(doc):
        doc["users"][0]["user"] = {"client-certificate-data": pem, "client-key-data": key_pem}

    def revoked(doc):
        doc["users"][0]["user"] = {"token": "sha256~revoked-token-the-api-server-does-not-know"}

    def unreachable(doc):
        doc["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"

    def notapi(doc):  # a URL with a path (a console's, a proxy's): the API server answers 404 under it
        doc["clusters"][0]["cluster"]["server"] = doc["clusters"][0]["cluster"]["server"].rstrip("/") + "/console"

    return {
        "notapi": variant("notapi", notapi),
        "missing": str(out / "no-such-kubeconfig"),
        "expired": variant("expired", expired),
        "revoked": variant("revoked", revoked),
        "unreachable": variant("unreachable", unreachable),
    }


def pytest_collection_modifyitems(items):
    """The process test starts a control plane of its own: run it before the package's ``plane``
    starts, so the catalogue never holds two at once. Only this package's items move, among the
    slots they already hold."""
    slots = [i for i, it in enumerate(items) if "tests/reliability/" in str(it.fspath)]
    mine = sorted((items[i] for i in slots), key=lambda it: it.fspath.basename != "test_processes.py")
    for i, it in zip(slots, mine, strict=True):
        items[i] = it
