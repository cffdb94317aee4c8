"""Run playbooks from tests with ansible-runner, the way AAP runs them.

``run_playbook`` returns a ``Run`` with the exit code, the per-host stats and the
task results, so tests assert on ``changed`` counts and failure messages rather than
on console text.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import ansible_runner

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from controlplane import procutil  # noqa: E402


@dataclass
class Run:
    rc: int
    status: str
    stats: dict
    results: list = field(default_factory=list)  # (host, task name, action, status, result)
    stdout: str = ""

    @property
    def changed(self) -> int:
        return sum((self.stats or {}).get("changed", {}).values())

    def failures(self) -> list:
        return [r for r in self.results if r[3] in ("failed", "unreachable")]

    def failure_messages(self) -> str:
        return "\n".join(str(r[4].get("msg", r[4])) for r in self.failures())

    def results_of(self, action: str) -> list:
        return [r[4] for r in self.results if r[2] == action and r[3] == "ok"]


def run_playbook(
    playbook: str | os.PathLike,
    inventory: str | os.PathLike | dict | None = None,
    *,
    kubeconfig: str | os.PathLike | None = None,
    extravars: dict | None = None,
    check: bool = False,
    diff: bool = False,
    tags: str | None = None,
    limit: str | None = None,
    env: dict | None = None,
) -> Run:
    """Run one playbook in a fresh private data dir; ``playbook`` is a path or YAML text; ``env``: more environment
    variables of the run."""
    pdd = tempfile.mkdtemp(prefix="ib-runner-")
    try:
        if isinstance(playbook, str) and "\n" in playbook:
            path = Path(pdd) / "project" / "play.yml"
            path.parent.mkdir(parents=True)
            path.write_text(playbook)
            playbook = path
        playbook = Path(playbook).resolve()
        envvars = {
            "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".cache" / "collections"),
            "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
            "ANSIBLE_CALLBACK_PLUGINS": str(ROOT / "plugins" / "callback"),
            "ANSIBLE_NOCOLOR": "1",
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
        }
        if kubeconfig:
            envvars["K8S_AUTH_KUBECONFIG"] = str(kubeconfig)
        envvars.update({k: str(v) for k, v in (env or {}).items()})
        # every process of the run carries the mark (Ansible's workers leave its process group):
        # the reaper kills them if this test process dies, and whatever outlives the run goes below
        mark = procutil.new_mark()
        envvars[procutil.MARK_VAR] = mark
        cmdline = []
        if check:
            cmdline.append("--check")
        if diff:
            cmdline.append("--diff")
        if isinstance(inventory, dict):
            inv = inventory
        elif inventory is not None:
            inv = str(Path(inventory).resolve())
        else:
            inv = {
                "all": {
                    "hosts": {
                        "localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
                    }
                }
            }
        results: list = []

        def on_event(ev):
            data = ev.get("event_data", {})
            kind = ev.get("event", "")
            if kind.startswith("runner_on_") and kind not in ("runner_on_start",):
                status = kind.replace("runner_on_", "")
                results.append(
                    (
                        data.get("host"),
                        data.get("task"),
                        data.get("resolved_action") or data.get("task_action"),
                        status,
                        data.get("res", {}),
                    )
                )
            return True

        runner = ansible_runner.run(
            private_data_dir=pdd,
            playbook=str(playbook),
            project_dir=str(playbook.parent),
            inventory=inv,
            extravars=extravars or {},
            envvars=envvars,
            cmdline=" ".join(cmdline) or None,
            tags=tags,
            limit=limit,
            event_handler=on_event,
            quiet=True,
        )
        stdout = runner.stdout.read() if runner.stdout else ""
        if not procutil.kill_marked(mark):
            procutil.untrack_mark(mark)
        return Run(rc=runner.rc, status=runner.status, stats=runner.stats or {}, results=results, stdout=stdout)
    finally:
        shutil.rmtree(pdd, ignore_errors=True)
