"""What a newcomer met on the first run (issue 14), each checked so it cannot come back.

* ``make demo`` says up front what a first run costs (minutes, GB of Go caches) and shows progress
  while Go compiles; it converges with ``blueprints converge`` (a bar per stage, a summary) and
  closes with whole tables from the sizing report, not a cut-off head;
* pip builds the project without setuptools' licence deprecation warning;
* molecule no longer logs "CRITICAL 'molecule/default/molecule.yml' glob failed";
* ``blueprints converge -e render_dir=./render`` writes under the working directory and says where;
  an invalid inventory exits 3 and a bad stage 2 (codes scripts can use).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.plugin_utils.converge import COLLECTION_PLAYBOOKS, site_stages

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ENV = {
    **os.environ,
    "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".cache" / "collections"),
    "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
}


def test_make_demo_states_time_and_go_caches_up_front_and_shows_build_progress():
    dry = subprocess.run(["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    lines = dry.splitlines()
    intro = next(i for i, ln in enumerate(lines) if "make demo:" in ln)
    build = next(i for i, ln in enumerate(lines) if "build_progress.py" in ln)
    cluster = next(i for i, ln in enumerate(lines) if "cluster.py up" in ln)
    converge = next(i for i, ln in enumerate(lines) if "blueprints converge" in ln)
    assert intro < build < cluster < converge, "the costs are stated before anything is built"
    text = "\n".join(lines[intro:build])
    assert re.search(r"\d+-\d+ minutes", text) and re.search(r"\d+(\.\d+)? GB of Go caches", text)
    assert "head" not in dry and "sed -n" not in dry, "the closing summary must not be a cut-off head"


def test_build_progress_prints_while_a_quiet_command_runs(tmp_path):
    env = {**os.environ, "GOCACHE": str(tmp_path / "cache"), "GOMODCACHE": str(tmp_path / "mod")}
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts/build_progress.py"), "--every", "0.5", "--", "sleep", "3.5"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    assert len(re.findall(r"^\[go build 0:0\d\] build cache \+", out, re.M)) >= 2, out
    assert "finished (exit 0)" in out


def test_demo_summary_prints_whole_tables_of_the_report(tmp_path):
    subprocess.run(
        [BIN / "blueprints", "plan", "--site", str(ROOT / "inventories/example-chat"), "--report", str(tmp_path)],
        check=True,
        capture_output=True,
        env=ENV,
    )
    mk = (ROOT / "mk/demo.mk").read_text()
    program = re.search(r"@awk '(.*?)' \$\(DEMO_REPORT\)", mk, re.S).group(1).replace("\\\n", " ")
    shown = subprocess.run(
        ["awk", program, str(tmp_path / "report.md")], capture_output=True, text=True, check=True
    ).stdout
    assert "### Pools" in shown
    pools = shown.split("### Pools", 1)[1]
    rows = [ln for ln in pools.splitlines() if ln.startswith("| ") and not ln.startswith("| pool")]
    assert rows, "the Pools table stops after its header"
    report = (tmp_path / "report.md").read_text()
    for row in rows:
        assert row in report


def test_pip_builds_without_the_setuptools_license_warning(tmp_path):
    proc = subprocess.run(
        [BIN / "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "license" not in (proc.stdout + proc.stderr).lower(), (proc.stdout + proc.stderr)[-2000:]


def test_molecule_has_no_default_scenario_glob_failure():
    proc = subprocess.run(
        [BIN / "molecule", "syntax", "-s", "default"], cwd=ROOT, capture_output=True, text=True, env=ENV, check=False
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-2000:]
    assert "glob failed" not in out and "CRITICAL" not in out


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _converge(*args, cwd):
    return subprocess.run(
        [BIN / "blueprints", "converge", "--site", str(ROOT / "inventories/example-chat"), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=ENV,
        check=False,
    )


def test_render_dir_is_relative_to_the_working_directory_and_the_run_says_where(in_tmp):
    proc = _converge("--stage", "serving", "-e", "delivery=render", "-e", "render_dir=./render", "--json", cwd=in_tmp)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    summary = records[-1]
    assert summary["rendered"]["dir"] == str(in_tmp / "render" / "chat-east-1")
    # every file the render added is listed (issue 31 item 2: the run said only "changed")
    assert summary["file_changes"] and set(summary["file_changes"].values()) == {"created"}
    assert list((in_tmp / "render").rglob("*.yaml")), "nothing under ./render of the working directory"
    assert not (ROOT / "playbooks" / "render").exists() and not (Path(COLLECTION_PLAYBOOKS) / "render").exists()
    kinds = [r["event"] for r in records]
    assert kinds[0] == "stage_start" and "task" in kinds and kinds[-1] == "summary"
    ends = [r for r in records if r["event"] == "stage_end"]
    assert [r["stage"] for r in ends] == site_stages(str(Path(COLLECTION_PLAYBOOKS) / "site.yml"))
    assert all(r["status"] == "ok" and r["done"] == r["total"] for r in ends)
    serving = next(r for r in ends if r["stage"] == "serving")
    assert serving["changed"] == 1  # the render task wrote the files
    # the terminal form says the same
    text = _converge("--stage", "serving", "-e", "delivery=render", "-e", "render_dir=./render", cwd=in_tmp).stdout
    assert f"under {in_tmp / 'render' / 'chat-east-1'}" in text and "exit 0: converged" in text
    assert "Files:" not in text  # the second run added, changed and removed nothing


def test_converge_exit_codes_for_scripts(in_tmp):
    bad = _converge("--stage", "servng", cwd=in_tmp)
    assert bad.returncode == 2 and "unknown stage(s) servng" in bad.stderr
    site = in_tmp / "site"
    subprocess.run(["cp", "-r", str(ROOT / "inventories/example-chat"), str(site)], check=True)
    cfg = site / "group_vars" / "all" / "site.yml"
    cfg.write_text(cfg.read_text().replace("serving_namespace:", "serving_namspace:"))
    proc = subprocess.run(
        [BIN / "blueprints", "converge", "--site", str(site), "--playbooks-dir", COLLECTION_PLAYBOOKS, "--json"],
        capture_output=True,
        text=True,
        cwd=in_tmp,
        env=ENV,
        check=False,
    )
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = json.loads(proc.stdout.splitlines()[-1])
    assert summary["stages"][0]["stage"] == "plan" and "did you mean 'serving_namespace'" in summary["stages"][0]["msg"]


def _intro(tmp_path, **env):
    """``make demo-intro`` of a clone without built binaries (CACHE empty), with the given Go caches."""
    run_env = {**os.environ, **env}
    return subprocess.run(
        ["make", "-s", "demo-intro", f"CACHE={tmp_path / 'cache'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=run_env,
    ).stdout


def test_demo_says_first_run_only_when_the_go_caches_are_cold(tmp_path):
    """Issue 33 item 5: a clone without binaries on a machine whose Go caches are warm was told the first run
    takes 20-45 minutes. The modules the builds read and a filled build cache make it a rebuild."""
    mk = (ROOT / "mk/controlplane.mk").read_text()
    k8s = re.search(r"^\s+k8s.io/kubernetes (v\S+)", (ROOT / "tests/controlplane/go.mod").read_text(), re.M).group(1)
    kserve = re.search(
        r"^\s+github.com/kserve/kserve (v[^\s,]+)", (ROOT / "tests/controlplane/kserve/go.mod").read_text(), re.M
    )
    assert "KCP_K8S_VER" in mk and kserve
    mod, gocache = tmp_path / "mod", tmp_path / "gocache"
    cold = _intro(tmp_path, GOMODCACHE=str(mod), GOCACHE=str(gocache))
    assert "First run" in cold and "20-45 minutes" in cold
    (mod / f"k8s.io/kubernetes@{k8s}").mkdir(parents=True)
    (mod / f"github.com/kserve/kserve@{kserve.group(1)}").mkdir(parents=True)
    (gocache / "00").mkdir(parents=True)
    warm = _intro(tmp_path, GOMODCACHE=str(mod), GOCACHE=str(gocache))
    assert "First run" not in warm and "20-45" not in warm and "Go caches this machine already holds" in warm


def test_demo_ends_with_the_endpoint_a_request_and_the_teardown(tmp_path):
    dry = subprocess.run(["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    converge = dry.index("blueprints converge")
    assert dry.index("scripts/demo_outro.py") > converge
    # no cluster here: the endpoint is said to be missing, the rest is the same
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts/demo_outro.py"), "--site", str(ROOT / "inventories/example-chat"),
         "--kubeconfig", str(tmp_path / "none"), "--kubectl", "false"],
        capture_output=True, text=True, check=True, env=ENV,
    ).stdout  # fmt: skip
    assert "Endpoint of qwen-chat (chat-east-1): no status.url yet" in out
    assert "playbooks/teardown.yml" in out and "make cluster-down" in out
    from scripts import demo_outro  # the request a user pastes, for a URL KServe set

    line = demo_outro.request_line("http://gw.ns.svc.cluster.local/llm-chat/qwen-chat", "Qwen3.5-35B-A3B", "llm-chat",
                                   "qwen-chat")  # fmt: skip
    assert "http://gw.ns.svc.cluster.local/llm-chat/qwen-chat/v1/chat/completions" in line
    assert '"model": "Qwen3.5-35B-A3B"' in line and line.startswith("kubectl -n llm-chat run ask-qwen-chat --rm -i")
