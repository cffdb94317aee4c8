"""The collection's own kubeconfig loader (module_utils/k8s_client.load_configuration): what it reads
itself, what it hands to the kubernetes package, and what it says about a kubeconfig it cannot use."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest
import yaml
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_client as kc

CERT = b"-----BEGIN CERTIFICATE-----\nMIIB-client\n-----END CERTIFICATE-----\n"
KEY = b"-----BEGIN PRIVATE KEY-----\nMIIE-key\n-----END PRIVATE KEY-----\n"
CA = b"-----BEGIN CERTIFICATE-----\nMIIB-ca\n-----END CERTIFICATE-----\n"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _kubeconfig(user: dict, cluster: dict | None = None, context: str = "admin@c") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://api.example:6443", **(cluster or {})}}],
        "users": [{"name": "admin", "user": user}],
        "contexts": [{"name": "admin@c", "context": {"cluster": "c", "user": "admin"}}],
        "current-context": context,
    }


def _write(tmp_path, doc) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.fixture(autouse=True)
def _released():
    yield
    kc.release()


def test_client_certificate_data_goes_to_private_files_that_release_removes(tmp_path):
    doc = _kubeconfig(
        {"client-certificate-data": _b64(CERT), "client-key-data": _b64(KEY)},
        {"certificate-authority-data": _b64(CA)},
    )
    cfg = kc.load_configuration({"kubeconfig": _write(tmp_path, doc)}, env={})
    assert isinstance(cfg, kc.Configuration)
    assert cfg.host == "https://api.example:6443" and cfg.verify_ssl is True
    assert cfg.ca_cert_data == CA.decode() and cfg.ssl_ca_cert is None
    for path, data in ((cfg.cert_file, CERT), (cfg.key_file, KEY)):
        with open(path, "rb") as fh:
            assert fh.read() == data
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert cfg.auth_settings() == {}
    kc.release()
    assert not os.path.exists(cfg.cert_file) and not os.path.exists(cfg.key_file)


def test_token_relative_paths_and_insecure(tmp_path):
    doc = _kubeconfig(
        {"token": "sha256~abc", "client-certificate": "certs/u.crt", "client-key": "/abs/u.key"},
        {"certificate-authority": "ca.crt", "insecure-skip-tls-verify": True},
    )
    cfg = kc.load_configuration({"kubeconfig": _write(tmp_path, doc)}, env={})
    assert cfg.auth_settings()["BearerToken"]["value"] == "Bearer sha256~abc"
    assert cfg.cert_file == str(tmp_path / "certs" / "u.crt") and cfg.key_file == "/abs/u.key"
    assert cfg.ssl_ca_cert == str(tmp_path / "ca.crt") and cfg.verify_ssl is False


def test_a_mapping_and_the_task_options_override(tmp_path):
    doc = _kubeconfig({"token": "t1"})
    cfg = kc.load_configuration(
        {"kubeconfig": doc, "host": "https://other:6443", "api_key": "t2", "validate_certs": False}, env={}
    )
    assert cfg.host == "https://other:6443" and cfg.verify_ssl is False
    assert cfg.auth_settings()["BearerToken"]["value"] == "Bearer t2"
    assert "k8s_kubeconfig mapping" in cfg.inference_blueprints_source


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        (_kubeconfig({"token": "t"}, context="nope"), "context 'nope' is not defined in the kubeconfig's contexts"),
        (
            {**_kubeconfig({"token": "t"}), "current-context": ""},
            "no context given and the kubeconfig has no current-context",
        ),
        (_kubeconfig({"client-certificate-data": _b64(CERT)}), "a client certificate without its key"),
        ({**_kubeconfig({"token": "t"}), "clusters": []}, "cluster 'c' is not defined"),
        (_kubeconfig({"token": "t"}, {"server": ""}), "cluster 'c' has no server"),
    ],
)
def test_a_kubeconfig_it_cannot_use_is_named_with_why(doc, says):
    with pytest.raises(kc.ClientError) as err:
        kc.load_configuration({"kubeconfig": doc}, env={})
    assert "cannot load Kubernetes credentials from the k8s_kubeconfig mapping" in str(err.value)
    assert says in str(err.value)


def test_exec_credential_plugins_go_to_the_kubernetes_package(tmp_path):
    """An exec plugin (EKS, GKE, OIDC login) is the kubernetes package's: the token it prints is used."""
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        textwrap.dedent(
            """
            import json
            print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                              "status": {"token": "from-exec"}}))
            """
        )
    )
    doc = _kubeconfig(
        {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": sys.executable,
                "args": [str(plugin)],
                "interactiveMode": "Never",
            }
        }  # fmt: skip
    )
    cfg = kc.load_configuration({"kubeconfig": _write(tmp_path, doc)}, env={})
    assert not isinstance(cfg, kc.Configuration)
    assert type(cfg).__module__.startswith("kubernetes.")
    settings = cfg.auth_settings()["BearerToken"]
    assert settings["value"] == "Bearer from-exec"
    client = kc.Client(cfg, env={})  # the kubernetes package's pool
    client.close()


def test_in_cluster_service_account(tmp_path, monkeypatch):
    (tmp_path / "token").write_text("sa-token\n")
    (tmp_path / "ca.crt").write_bytes(CA)
    monkeypatch.setattr(kc, "IN_CLUSTER_DIR", str(tmp_path))
    cfg = kc.load_configuration({}, env={"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"})
    assert cfg.host == "https://[fd00::1]:443" and cfg.ssl_ca_cert == str(tmp_path / "ca.crt")
    assert cfg.auth_settings()["BearerToken"]["value"] == "Bearer sa-token"
    assert cfg.inference_blueprints_source == "the in-cluster service account"


def test_the_common_path_never_imports_the_kubernetes_package(tmp_path):
    path = _write(tmp_path, _kubeconfig({"token": "t"}))
    code = textwrap.dedent(
        f"""
        import json, sys
        from ansible_collections.inference.blueprints.plugins.module_utils import k8s_client as kc
        from ansible_collections.inference.blueprints.plugins.plugin_utils import k8s_action, stage_apply
        client = kc.get_client({{"kubeconfig": {path!r}}}, env={{}})
        print(json.dumps([client.server, "kubernetes" in sys.modules]))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["https://api.example:6443", False]
