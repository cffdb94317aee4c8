"""inference.blueprints.k8s_endpoints (verify's service read, probe and smoke request) against a real
kube-apiserver with KServe's LLMInferenceService CRD and guidellm's own OpenAI mock server as the engine.

The plane runs without KServe's controller (nothing else writes these services' status), so the test
sets each ``status.url`` itself: one to the mock server, one to a closed port, one left unset, one to a
server that lists its model but answers chat with an error.
"""

from __future__ import annotations

import http.server
import json
import threading

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_endpoints
from controlplane.cluster import DEFAULT_PROFILE

from tests.controlplane.procutil import free_port
from tests.slo.mockservers import MockFleet

pytestmark = [pytest.mark.cluster]

NS = "endpoints-test"
API = "serving.kserve.io/v1alpha2"
SERVED = "Qwen/Qwen3-0.6B"


class _BrokenEngine(http.server.BaseHTTPRequestHandler):
    """Lists its model, then fails every completion (an engine that loaded but cannot serve)."""

    def do_GET(self):  # noqa: N802 - http.server's naming
        body = json.dumps({"data": [{"id": SERVED}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):  # noqa: N802
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def plane(cluster_factory):
    return cluster_factory(DEFAULT_PROFILE, name="endpoints-no-kserve", kserve=False)


def _service(plane, name: str, url: str | None) -> None:
    obj = {
        "apiVersion": API,
        "kind": "LLMInferenceService",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"model": {"uri": f"hf://{SERVED}", "name": SERVED}},
    }
    plane.dynamic.resources.get(api_version=API, kind="LLMInferenceService").server_side_apply(
        body=obj, name=name, namespace=NS, field_manager="test"
    )
    if url:
        plane.dynamic.resources.get(api_version=API, kind="LLMInferenceService").status.patch(
            body={"status": {"url": url}}, name=name, namespace=NS, content_type="application/merge-patch+json"
        )


def test_reachable_unreachable_unset_and_a_failing_engine(plane, tmp_path):
    fleet = MockFleet(tmp_path)
    broken = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _BrokenEngine)
    threading.Thread(target=broken.serve_forever, daemon=True).start()
    try:
        (mock_url,) = fleet.start("good", "serve", SERVED, 1, latency=(5, 1))
        plane.kubectl("create", "namespace", NS)
        _service(plane, "good", mock_url + "/")
        _service(plane, "closed", f"http://127.0.0.1:{free_port()}")
        _service(plane, "pending", None)
        _service(plane, "broken", f"http://127.0.0.1:{broken.server_address[1]}")
        params = {
            **{k: None for k in ("kubeconfig", "context", "host", "api_key", "validate_certs", "ca_cert")},
            "kubeconfig": plane.kubeconfig,
            "namespace": NS,
            "api_version": API,
            "kind": "LLMInferenceService",
            "probe_timeout": 5.0,
            "smoke_prompt": "Reply with the single word: ready",
            "smoke_timeout": 30.0,
            "endpoint_validate_certs": False,
        }
        models = [{"name": n, "served_name": SERVED} for n in ("good", "closed", "pending")]
        out = k8s_endpoints.run({**params, "models": models}, env={})
        assert not out.get("failed"), out
        by = {e["name"]: e for e in out["endpoints"]}
        assert by["good"]["reachable"] and SERVED in by["good"]["models"], by["good"]
        assert by["good"]["smoke"]["status"] == 200 and by["good"]["smoke"]["answer"], by["good"]["smoke"]
        assert out["reachable"] == {"good": mock_url}
        assert not by["closed"]["reachable"] and by["closed"]["status"] == 0 and by["closed"]["error"], by["closed"]
        assert "smoke" not in by["closed"]
        assert by["pending"]["error"] == "the service has no status.url yet"
        assert "reachable from here: 1; smoke requests answered: 1" in out["msg"]

        # check mode probes but sends no smoke request
        quiet = k8s_endpoints.run({**params, "models": models}, check_mode=True, env={})
        assert "smoke" not in {e["name"]: e for e in quiet["endpoints"]}["good"]

        # an engine that lists its model but cannot answer fails the task, naming model, URL and answer
        failed = k8s_endpoints.run({**params, "models": [{"name": "broken", "served_name": SERVED}]}, env={})
        assert failed["failed"] and "broken: POST http://127.0.0.1:" in failed["msg"], failed
        assert "/v1/chat/completions" in failed["msg"] and "503" in failed["msg"], failed

        # a service that does not exist is an error naming it
        missing = k8s_endpoints.run({**params, "models": [{"name": "nope"}]}, env={})
        assert missing["failed"] and "LLMInferenceService nope not found in namespace endpoints-test" in missing["msg"]
    finally:
        broken.shutdown()
        fleet.stop()
