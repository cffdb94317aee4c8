"""``blueprints converge`` on a site whose plan misses its SLOs (issue 31 item 11): the plan stage prints the plan
with the miss, the platform stage stops before it reads or applies anything, and the run exits 6 with a message
that names the model, the SLO missed and the GPUs that would meet it. No cluster is needed: the stop comes first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ansible_collections.inference.blueprints.plugins.plugin_utils.converge import COLLECTION_PLAYBOOKS

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ENV = {
    **os.environ,
    "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".cache" / "collections"),
    "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
}


def test_a_converge_whose_plan_misses_its_slo_exits_6_before_applying(tmp_path):
    site = tmp_path / "site"
    subprocess.run(["cp", "-r", str(ROOT / "inventories/example-chat"), str(site)], check=True)
    cfg = site / "group_vars" / "all" / "site.yml"
    cfg.write_text(cfg.read_text().replace("arrival_rate_rps: 120", "arrival_rate_rps: 100000"))
    env = {**ENV, "K8S_AUTH_KUBECONFIG": str(tmp_path / "no-such-kubeconfig")}
    proc = subprocess.run(
        [BIN / "blueprints", "converge", "--site", str(site), "--playbooks-dir", COLLECTION_PLAYBOOKS, "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    out = proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.returncode == 6, out
    summary = json.loads(proc.stdout.splitlines()[-1])
    plan = next(s for s in summary["stages"] if s["stage"] == "plan")
    assert plan["failed"] == 0, summary  # plan.yml prints the plan, misses included
    failed = next(s for s in summary["stages"] if s.get("failed"))
    assert failed["stage"] == "platform", summary
    msg = failed["msg"]
    assert "models[0] (qwen-chat) misses its SLO (TTFT p95 1000 ms, TPOT p95 30 ms) on 16 x h100" in msg, msg
    assert "would meet it; nothing was applied" in msg and "accept_missed_slo" in msg, msg
    assert "a plan misses its SLOs" in summary["result"], summary
