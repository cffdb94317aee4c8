"""scripts/cpu_by_component.py (docs/ci-time.md): the CPU of a command's processes, by component, and the command's
own exit status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cpu_by_component.py"
BUSY = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5: pass\n"


def test_a_busy_child_is_counted_under_its_component_and_the_exit_status_is_the_commands(tmp_path):
    out = tmp_path / "cpu.json"
    run = subprocess.run(
        [sys.executable, SCRIPT, "--every", "0.2", "--json", out, "--", "bash", "-c", f"python3 -c '{BUSY}'; exit 3"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 3, run.stderr
    figures = json.loads(out.read_text())
    assert figures["cpu_s"] >= 1, figures  # the kernel's count of the whole tree
    assert figures["by_component"].get("python -c", 0) >= 1, figures  # one reading at least saw the busy child
    assert "== by component: python -c" in run.stderr


def test_an_orphan_the_command_leaves_running_is_adopted_read_and_reaped(tmp_path):
    """What ``cluster.py up`` does (molecule's create): a process started in a new session, its parent gone."""
    out = tmp_path / "cpu.json"
    done = tmp_path / "done"
    orphan = BUSY + f"open({str(done)!r}, 'w').close()\n"
    command = f'(setsid python3 -c "{orphan}" &); until [ -e {done} ]; do sleep 0.1; done; sleep 1'
    run = subprocess.run(
        [sys.executable, SCRIPT, "--every", "0.2", "--json", out, "--", "bash", "-c", command],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    figures = json.loads(out.read_text())
    assert figures["by_component"].get("python -c", 0) >= 1, figures
    assert figures["cpu_s"] >= 1, figures  # reaped here, so the kernel counted it
