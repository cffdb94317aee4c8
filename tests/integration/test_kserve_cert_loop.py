"""KServe v0.20.0's self-signed certificate loop, on the real controller (issue 33 item 3; docs/upstream.md,
"KServe: the workload certificate is regenerated while a pod has no IP").

While a workload pod of an LLMInferenceService has no IP (Pending), KServe's controller puts the empty
``status.podIP`` into the set of IPs the certificate must cover, while the certificate side drops empty IPs:
the set is never covered, every reconcile makes a new certificate, and the Secret's update triggers the next
reconcile. The test holds the example chat service's pods Pending (every node cordoned: the scheduler places
nothing) and watches the Secret's resourceVersion move; then lets the scheduler place them (kwok gives each
pod an IP) and watches it stay still: a site whose every workload pod has an IP leaves the controller quiet,
which is what tests/integration/test_quiet_converged.py asks of every converged example.
"""

from __future__ import annotations

import base64
import copy
import json
import time

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.plugin_utils import render
from controlplane import kserve_controller
from controlplane.cluster import DEFAULT_PROFILE
from cryptography import x509

from tests.kserve_checks import accounts_for
from tests.serving_helpers import INVENTORIES

pytestmark = pytest.mark.cluster

NS, NAME = "cert-loop", "qwen-chat"
SECRET = f"{NAME}-kserve-self-signed-certs"
SELECTOR = f"app.kubernetes.io/name={NAME},app.kubernetes.io/part-of=llminferenceservice"


@pytest.fixture(scope="module")
def kserve(cluster_factory):
    # the session's KServe plane (tests/integration/test_kserve_workloads.py uses the same one)
    cp = cluster_factory(DEFAULT_PROFILE, name="kserve", kserve=True)
    gateway = kserve_controller.ingress_gateway()
    res = cp.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in gateway))
    assert res.returncode == 0, res.stderr
    return cp


def _service() -> list[dict]:
    """The chat service in this test's namespace, after the ServiceAccounts it names (kserve_checks.accounts_for)."""
    intent = cli.site_intents(str(INVENTORIES / "example-chat"), None)["chat-east-1"]
    objs = render.render_components(intent["stages"]["serving"], intent)
    svc = copy.deepcopy(next(o for o in objs if o["kind"] == "LLMInferenceService" and o["metadata"]["name"] == NAME))
    svc["metadata"]["namespace"] = NS
    return [*accounts_for(objs, svc, NS), svc]


def _nodes(cp, verb: str) -> None:
    names = cp.kubectl("get", "nodes", "-o", "name").stdout.split()
    res = cp.kubectl(verb, *names)
    assert res.returncode == 0, res.stderr


def _secret_version(cp) -> str | None:
    res = cp.kubectl("-n", NS, "get", "secret", SECRET, "-o", "jsonpath={.metadata.resourceVersion}")
    return res.stdout.strip() if res.returncode == 0 and res.stdout.strip() else None


def _certificate_ips(cp) -> set[str]:
    res = cp.kubectl("-n", NS, "get", "secret", SECRET, "-o", "jsonpath={.data.tls\\.crt}")
    if res.returncode != 0 or not res.stdout.strip():
        return set()
    cert = x509.load_pem_x509_certificate(base64.b64decode(res.stdout))
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}


def _workload_pods(cp) -> list[dict]:
    res = cp.kubectl("-n", NS, "get", "pods", "-l", SELECTOR, "-o", "json")
    assert res.returncode == 0, res.stderr
    pods = json.loads(res.stdout)["items"]
    return [
        p
        for p in pods
        if p["metadata"]["labels"].get("app.kubernetes.io/component") != "llminferenceservice-router-scheduler"
    ]


def _versions(cp, seconds: float) -> list[str]:
    """The distinct resourceVersions the Secret had while watched for ``seconds`` (polled every 0.5 s)."""
    seen: list[str] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        v = _secret_version(cp)
        if v and (not seen or seen[-1] != v):
            seen.append(v)
        time.sleep(0.5)
    return seen


def _until(cond, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"not within {timeout:.0f} s: {what}")


def test_a_pending_workload_pod_keeps_the_certificate_secret_moving_and_ips_end_it(kserve):
    cp = kserve
    _nodes(cp, "cordon")
    try:
        cp.kubectl("create", "namespace", NS)
        res = cp.kubectl("apply", "--server-side", "-f", "-", input="\n---\n".join(json.dumps(o) for o in _service()))
        assert res.returncode == 0, res.stderr
        _until(lambda: _workload_pods(cp) and _secret_version(cp), 300, "KServe created the pods and the Secret")
        pending = _workload_pods(cp)
        assert all(not p["status"].get("podIP") for p in pending), "a cordoned plane placed a pod"
        # the loop: with nothing changing but the controller's own writes, the Secret keeps moving
        moved = _versions(cp, 20)
        assert len(moved) >= 3, f"the Secret moved {len(moved) - 1} time(s) in 20 s while pods were Pending"
    finally:
        _nodes(cp, "uncordon")
    try:

        def placed():
            pods = _workload_pods(cp)
            return pods if all(p["status"].get("podIP") for p in pods) else None

        pods = _until(placed, 120, "every workload pod has an IP")
        ips = {p["status"]["podIP"] for p in pods}
        # one last certificate that covers the new IPs, then nothing
        _until(lambda: ips <= _certificate_ips(cp), 60, f"a certificate covering the pods' IPs {sorted(ips)}")
        still = _versions(cp, 15)
        assert len(still) == 1, f"the Secret still moved {len(still) - 1} time(s) in 15 s once every pod had an IP"
    finally:
        cp.kubectl("delete", "namespace", NS, "--wait=false", "--ignore-not-found")
