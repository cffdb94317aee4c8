"""verify.yml asked to measure and measuring nothing (issue 33 item 5): it used to exit 0 with
``reachable from here: 0 ... nothing measured``; now it fails, and says per model how to measure from inside
the cluster (docs/verify.md, "Measuring from inside the cluster"). No cluster is needed: only the tasks tagged
``slo`` run, and no endpoint is given."""

from __future__ import annotations

import shutil

from ansible_collections.inference.blueprints.plugins.module_utils.slo import inside
from ansible_collections.inference.blueprints.plugins.plugin_utils import converge

from tests.ansible_run import run_playbook
from tests.serving_helpers import INVENTORIES, PLAYBOOKS

HOST = "store-berlin-001"


def _verify(tmp_path, **extra):
    inv = tmp_path / "inventory"
    if not inv.exists():
        shutil.copytree(INVENTORIES / "example-edge-fleet", inv)
    return run_playbook(
        PLAYBOOKS / "verify.yml",
        inv,
        tags="slo",
        limit=HOST,
        extravars={"report_dir": str(tmp_path / "reports"), "serving_namespace": "llm-edge-slo", **extra},
    )


def test_verify_asked_to_measure_fails_when_it_measured_nothing_and_says_how(tmp_path):
    run = _verify(tmp_path)
    assert run.rc != 0, "measuring nothing passed"
    msg = run.failure_messages()
    assert (
        "for qwen-edge: nothing measured. How to measure it (from inside the cluster, or through a port-forward)" in msg
    ), msg
    assert "port-forward" in msg and "verify_slo_endpoints" in msg and "verify_slo_require=false" in msg, msg
    res = next(r[4] for r in run.failures() if r[2] == "inference.blueprints.slo_benchmark")
    assert res["nothing_measured"] is True

    lenient = _verify(tmp_path, verify_slo_require=False)
    assert lenient.rc == 0, lenient.failure_messages()
    report = next(r[4]["msg"] for r in lenient.results if r[1].startswith("Report what was verified"))
    assert any("nothing measured; to measure: qwen-edge:" in line for line in report), report


def test_the_commands_name_the_service_port_and_an_in_cluster_probe():
    url = "http://qwen-chat-kserve-workload-svc.llm-chat.svc.cluster.local:8000"
    lines = inside.hints([{"name": "qwen-chat", "url": url}], "llm-chat", ["qwen-chat"])
    assert "kubectl -n llm-chat port-forward svc/qwen-chat-kserve-workload-svc 8000:8000 &" in lines[0]
    assert """-e '{"verify_slo_endpoints": {"qwen-chat": "http://127.0.0.1:8000"}}'""" in lines[0]
    assert "kubectl -n llm-chat run verify-qwen-chat --rm -i --restart=Never" in lines[1]
    assert lines[1].endswith(f"curl -sS -m 10 {url}/v1/models")
    # a gateway address only the cluster reaches: no port-forward, the in-cluster probe only
    gw = inside.hints([{"name": "m", "url": "https://10.0.0.5/llm-chat/m"}], "llm-chat", ["m"])
    assert len(gw) == 1 and "curl -sS -m 10 https://10.0.0.5/llm-chat/m/v1/models" in gw[0]
    assert "no status.url" in inside.hints([{"name": "m", "url": ""}], "ns", ["m"])[0]


def test_blueprints_converge_exits_7_when_verify_measured_nothing():
    tracker = converge.Tracker(plays=[converge.Play("verify", "verify", 1)], stages=["verify"])
    tracker.on_event({"event": "playbook_on_play_start", "event_data": {"play": "verify"}})
    res = {"msg": "no endpoint reachable from here for m: nothing measured", "nothing_measured": True}
    event = {"task": "SLO benchmark", "resolved_action": "inference.blueprints.slo_benchmark", "res": res}
    tracker.on_event({"event": "runner_on_failed", "event_data": event})
    assert tracker.exit_hint == converge.EXIT_NOTHING_MEASURED == 7
    assert "nothing measured" in converge.EXIT_CODES[7]
