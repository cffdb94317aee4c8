# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``blueprints converge``: converge a site with playbooks/site.yml through ansible-runner, for a
person at a terminal (a live bar per stage, a summary at the end) or a script (``--json``: one
JSON object per line, the same records).

The stages are site.yml's imports and their tags (plan, platform, serving, verify); preflight runs
inside platform. A ``--list-tasks`` pass gives each stage's number of tasks; tasks that roles
include at run time are not in it, so a stage's total grows while it runs, and the totals of the
last successful run of the same site and stages are remembered and used from the start.

Exit codes (``EXIT_*``): 0 converged; 1 a task failed; 2 bad command line (no such site, no
playbooks); 3 the inventory is invalid (nothing was read from or written to a cluster); 4 a
cluster lacks what the plan needs, or two hosts reach one cluster (preflight; nothing was applied);
5 a cluster could not be read (kubeconfig, URL, credentials, network; nothing was applied);
6 a plan misses its SLOs on the given hardware and the site does not set accept_missed_slo (nothing was
applied); 7 verify was asked to measure (its own stage, or verify.yml) and no endpoint was reachable from
here: nothing measured (the message names the commands that measure from inside the cluster); 130 interrupted.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INVALID, EXIT_PREFLIGHT, EXIT_UNREACHABLE, EXIT_INTERRUPTED = (
    0, 1, 2, 3, 4, 5, 130
)  # fmt: skip
EXIT_MISSED_SLO = 6
EXIT_NOTHING_MEASURED = 7
EXIT_CODES = {
    EXIT_OK: "converged",
    EXIT_FAILED: "a task failed",
    EXIT_USAGE: "bad command line",
    EXIT_INVALID: "the inventory is invalid; nothing was read from or written to a cluster",
    EXIT_PREFLIGHT: "a cluster lacks what the plan needs, or two hosts reach one cluster (preflight); "
    "nothing was applied",
    EXIT_UNREACHABLE: "a cluster could not be read (kubeconfig, API server URL, credentials or network); "
    "nothing was applied",
    EXIT_MISSED_SLO: "a plan misses its SLOs on the given hardware (the message says which and how many GPUs would "
    "meet them; accept_missed_slo: true applies it anyway); nothing was applied",
    EXIT_NOTHING_MEASURED: "verify was asked to measure and no endpoint was reachable from here: nothing measured "
    "(the message names the commands that measure from inside the cluster)",
    EXIT_INTERRUPTED: "interrupted",
}
SITE_ACTION = "inference.blueprints.site"
PREFLIGHT_ACTION = "inference.blueprints.cluster_facts"
RENDER_ACTION = "inference.blueprints.render"
APPLY_ACTION = "inference.blueprints.k8s_apply"
PATH_VARIABLES = ("render_dir", "report_dir")  # given relative, they mean the working directory
_HOST_RESULT = {"runner_on_ok": "ok", "runner_on_failed": "failed", "runner_on_unreachable": "failed"}
_PLAY_LINE = re.compile(r"^\s*play #\d+ \((?P<hosts>.*?)\): (?P<name>.*?)\tTAGS: \[(?P<tags>.*)\]\s*$")
_TASK_LINE = re.compile(r"^\s{6}(?P<name>.*?)\tTAGS: \[(?P<tags>.*)\]\s*$")


class ConvergeError(Exception):
    """A usage problem (exit 2)."""


# ------------------------------------------------------------------ what will run
@dataclass
class Play:
    name: str
    stage: str
    tasks: int


def site_stages(site_yml: str) -> list[str]:
    """The stages of site.yml: the tags of its imports, in order (the one list of stages)."""
    import yaml  # lazy

    with open(site_yml, encoding="utf-8") as fh:
        plays = yaml.safe_load(fh) or []
    out = []
    for play in plays:
        for tag in play.get("tags") or []:
            if tag not in out:
                out.append(tag)
    return out


def parse_list_tasks(text: str, stages: list[str]) -> list[Play]:
    """Plays and their task counts from ``ansible-playbook --list-tasks`` (with the run's --tags)."""
    plays: list[Play] = []
    for line in text.splitlines():
        m = _PLAY_LINE.match(line)
        if m:
            tags = [t.strip() for t in m.group("tags").split(",")]
            stage = next((s for s in stages if s in tags), stages[0] if stages else "site")
            plays.append(Play(m.group("name"), stage, 0))
        elif plays and _TASK_LINE.match(line):
            plays[-1].tasks += 1
    return plays


# The collection's own playbooks (<collection>/playbooks/): what `ansible-playbook inference.blueprints.site` runs.
COLLECTION_PLAYBOOKS = os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "playbooks")
)


def find_playbooks(site: str, explicit: str | None) -> str:
    """The directory with site.yml: given, else the collection's own playbooks."""
    del site
    if explicit:
        if not os.path.isfile(os.path.join(explicit, "site.yml")):
            raise ConvergeError(f"--playbooks-dir: no site.yml in {explicit}")
        return os.path.abspath(explicit)
    if not os.path.isfile(os.path.join(COLLECTION_PLAYBOOKS, "site.yml")):
        raise ConvergeError(f"the collection has no playbooks/site.yml ({COLLECTION_PLAYBOOKS}); give --playbooks-dir")
    return COLLECTION_PLAYBOOKS


# ------------------------------------------------------------------ progress from runner events
@dataclass
class Stage:
    name: str
    total: int = 0
    done: int = 0
    current: str = ""
    started: float | None = None
    ended: float | None = None
    ok: int = 0
    changed: int = 0
    failed: int = 0
    failed_task: str = ""
    failed_msg: str = ""
    objects: dict = field(default_factory=dict)  # k8s_apply: action (created, configured, ...) -> count

    def elapsed(self, now: float | None = None) -> float:
        if self.started is None:
            return 0.0
        return (self.ended or now or time.monotonic()) - self.started

    @property
    def status(self) -> str:
        if self.failed:
            return "failed"
        if self.ended is not None:
            return "ok"
        return "running" if self.started is not None else "pending"


@dataclass
class Tracker:
    """Per-stage progress, fed with ansible-runner events (``on_event``); thread-safe reads."""

    plays: list[Play]
    stages: list[str]
    remembered: dict = field(default_factory=dict)
    records: list = field(default_factory=list)  # what --json prints, in order
    listeners: list = field(default_factory=list)
    plan_lines: list = field(default_factory=list)
    reports: list = field(default_factory=list)
    rendered: list = field(default_factory=list)
    file_changes: dict = field(default_factory=dict)  # path -> created, changed, removed (module_utils/render_tree.py)
    exit_hint: int = EXIT_FAILED
    _play: int = -1
    _stage: Stage | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self):
        self.by_name: dict[str, Stage] = {}
        for p in self.plays:
            st = self.by_name.setdefault(p.stage, Stage(p.stage))
            st.total += p.tasks
        for name, st in self.by_name.items():
            st.total = max(st.total, int(self.remembered.get(name, 0)))

    # -- public
    def snapshot(self) -> list[Stage]:
        with self._lock:
            return [Stage(**{k: getattr(s, k) for k in s.__dataclass_fields__}) for s in self.by_name.values()]

    def on_event(self, ev: dict) -> bool:
        kind, data = ev.get("event", ""), ev.get("event_data") or {}
        with self._lock:
            if kind == "playbook_on_play_start":
                self._play_start(data.get("play", ""))
            elif kind == "playbook_on_task_start" and self._stage is not None:
                self._task_start(data.get("task", ""))
            elif kind in _HOST_RESULT and self._stage is not None:
                self._host_result(kind, data)
            elif kind == "playbook_on_stats":
                self._finish_stage()
        return True

    # -- internals (called with the lock held)
    def _emit(self, record: dict) -> None:
        self.records.append(record)
        for listener in self.listeners:
            listener(record)

    def _play_start(self, name: str) -> None:
        nxt = next((i for i in range(self._play + 1, len(self.plays)) if self.plays[i].name == name), None)
        if nxt is None:
            return
        self._play = nxt
        stage = self.by_name[self.plays[nxt].stage]
        if stage is not self._stage:
            self._finish_stage()
            self._stage = stage
            stage.started = time.monotonic()
            self._emit({"event": "stage_start", "stage": stage.name, "total": stage.total})

    def _task_start(self, task: str) -> None:
        st = self._stage
        if st.current:
            st.done += 1
        st.current = task
        st.total = max(st.total, st.done + 1)
        self._emit(
            {
                "event": "task",
                "stage": st.name,
                "done": st.done,
                "total": st.total,
                "task": task,
                "elapsed": round(st.elapsed(), 1),
            }
        )

    def _host_result(self, kind: str, data: dict) -> None:
        st, res = self._stage, data.get("res") or {}
        if _HOST_RESULT[kind] == "failed" and not data.get("ignore_errors"):
            st.failed += 1
            st.failed_task = data.get("task", "")
            st.failed_msg = str(res.get("msg") or res.get("stderr") or ("unreachable" if "unreachable" in kind else ""))
            action = data.get("resolved_action") or data.get("task_action") or ""
            if res.get("missed_slo"):
                self.exit_hint = EXIT_MISSED_SLO
            elif res.get("nothing_measured"):
                self.exit_hint = EXIT_NOTHING_MEASURED
            elif action in (SITE_ACTION, "site"):
                self.exit_hint = EXIT_INVALID
            elif action in (PREFLIGHT_ACTION, "cluster_facts") and "unmet" not in res:
                # the read itself failed (no kubeconfig, a wrong URL, refused credentials): nothing was compared
                self.exit_hint = EXIT_UNREACHABLE
            elif action in (PREFLIGHT_ACTION, "cluster_facts") or data.get("role") == "preflight":
                self.exit_hint = EXIT_PREFLIGHT
            self._emit(
                {
                    "event": "failed",
                    "stage": st.name,
                    "task": st.failed_task,
                    "host": data.get("host"),
                    "msg": st.failed_msg,
                }
            )
            return
        st.ok += 1
        st.changed += int(bool(res.get("changed")))
        action = data.get("resolved_action") or data.get("task_action") or ""
        if action in (SITE_ACTION, "site") and res.get("summary") and not self.plan_lines:
            self.plan_lines = list(res["summary"])
        if res.get("reports"):
            self.reports = list(res["reports"])
        if action in (RENDER_ACTION, "render") and res.get("files"):
            self.rendered = sorted(set(self.rendered) | set(res["files"]))
        if action.rsplit(".", 1)[-1] in ("render", "platform", "gitops"):
            self.file_changes.update({f["path"]: f["action"] for f in res.get("file_changes") or []})
        if action in (APPLY_ACTION, "k8s_apply"):
            for obj in res.get("objects") or []:
                st.objects[obj.get("action", "?")] = st.objects.get(obj.get("action", "?"), 0) + 1

    def _finish_stage(self) -> None:
        st = self._stage
        if st is None:
            return
        if st.current:
            st.done += 1
            st.current = ""
        # tasks that never started (no host matched, skipped by a condition) are not left to do
        st.total = st.done if not st.failed else max(st.total, st.done)
        st.ended = time.monotonic()
        self._stage = None
        self._emit(
            {
                "event": "stage_end",
                "stage": st.name,
                "status": st.status,
                "done": st.done,
                "total": st.total,
                "ok": st.ok,
                "changed": st.changed,
                "failed": st.failed,
                "objects": dict(st.objects),
                "elapsed": round(st.elapsed(), 1),
            }
        )


# ------------------------------------------------------------------ views
def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}:{s:02d}"


def bar_line(st: Stage, width: int = 24, columns: int = 100) -> str:
    total = max(st.total, 1)
    filled = min(width, round(width * st.done / total))
    mark = {"ok": "done", "failed": "FAILED", "running": "", "pending": "waiting"}[st.status]
    head = (
        f"{st.name:<9} [{'#' * filled}{'.' * (width - filled)}] {st.done:>3}/{st.total:<3} {_clock(st.elapsed()):>5}  "
    )
    tail = mark or st.current
    room = max(columns - len(head) - 1, 10)
    return head + (tail if len(tail) <= room else tail[: room - 3] + "...")


class TerminalView:
    """Bars on a terminal: finished stages stay, the running one is redrawn in place."""

    def __init__(self, tracker: Tracker, stream, live: bool):
        self.tracker, self.stream, self.live = tracker, stream, live
        self.printed: set[str] = set()
        self.columns = shutil.get_terminal_size((100, 24)).columns

    def draw(self) -> None:
        for st in self.tracker.snapshot():
            if st.status in ("ok", "failed") and st.name not in self.printed:
                self.printed.add(st.name)
                self._line(bar_line(st, columns=self.columns), final=True)
            elif st.status == "running" and self.live:
                self._line(bar_line(st, columns=self.columns), final=False)

    def _line(self, text: str, final: bool) -> None:
        if self.live:
            self.stream.write("\r\x1b[2K" + text + ("\n" if final else ""))
        elif final:
            self.stream.write(text + "\n")
        self.stream.flush()


def summary_lines(tracker: Tracker, rc: int, log: str | None) -> list[str]:
    stages = [s for s in tracker.snapshot() if s.started is not None]
    out = ["", f"{'stage':<10}{'tasks':>7}{'ok':>6}{'changed':>9}{'failed':>8}{'time':>8}"]
    for s in stages:
        out.append(f"{s.name:<10}{s.done:>7}{s.ok:>6}{s.changed:>9}{s.failed:>8}{_clock(s.elapsed()):>8}")
    for s in stages:
        if s.objects:
            counts = ", ".join(f"{n} {a}" for a, n in sorted(s.objects.items()))
            out.append(f"{s.name} objects: {counts}")
    if tracker.plan_lines:
        out += ["", "Plan (key choices):"]
        out += ["  " + line for line in key_choices(tracker.plan_lines)]
    if tracker.reports:
        out.append(f"Sizing report: {', '.join(tracker.reports)}")
    if tracker.rendered:
        out.append(f"Rendered {len(tracker.rendered)} files under {common_dir(tracker.rendered)}")
    out += file_change_lines(tracker.file_changes)
    failed = [s for s in stages if s.failed]
    for s in failed:
        out.append(f"FAILED in {s.name}: {s.failed_task}: {s.failed_msg}")
    if log:
        out.append(f"Full log: {log}")
    out.append(f"exit {rc}: {EXIT_CODES.get(rc, 'failed')}")
    return out


def key_choices(lines: list[str], limit: int = 12) -> list[str]:
    """The plan's headline lines (layout, pools, speculative decoding, KV connector), not every decision; a plan
    that misses its SLOs first (stopped, rendered or applied because the site accepts it: intent/slo_gate.py)."""
    missed = [ln.strip() for ln in lines if "SLO MISSED" in ln]
    keep = [ln.strip() for ln in lines if " = " not in ln and "WARNING" not in ln and "SLO MISSED" not in ln]
    warn = [ln.strip() for ln in lines if "WARNING" in ln]
    return (missed + keep + warn)[:limit]


def file_change_lines(changes: dict, limit: int = 40) -> list[str]:
    """What the render wrote: counts, then each file added, changed or removed (the first ``limit``)."""
    if not changes:
        return []
    words = {"created": "added", "changed": "changed", "removed": "removed"}
    counts = ", ".join(f"{sum(1 for a in changes.values() if a == k)} {w}" for k, w in words.items())
    lines = [f"  {words.get(a, a):<8} {p}" for p, a in sorted(changes.items())]
    more = [f"  ... and {len(lines) - limit} more"] if len(lines) > limit else []
    return [f"Files: {counts}", *lines[:limit], *more]


def common_dir(paths: list[str]) -> str:
    return os.path.commonpath([os.path.dirname(p) for p in paths]) if paths else ""


# ------------------------------------------------------------------ running
def _remember_path(site: str, stages: list[str]) -> str:
    key = hashlib.sha256(json.dumps([os.path.abspath(site), stages]).encode()).hexdigest()[:16]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "inference-blueprints", "converge", key + ".json")


def _load_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


def absolute_paths(extra_vars: dict, cwd: str) -> dict:
    """Path variables given relative mean the working directory (the playbooks run elsewhere)."""
    out = dict(extra_vars)
    for key in PATH_VARIABLES:
        value = out.get(key)
        if isinstance(value, str) and value and not os.path.isabs(os.path.expanduser(value)):
            out[key] = os.path.normpath(os.path.join(cwd, value))
    return out


@dataclass
class Options:
    site: str
    stages: list[str]
    extra_vars: dict
    playbooks: str
    json: bool = False
    check: bool = False
    diff: bool = False
    limit: str | None = None


def _environment(playbooks: str) -> dict:
    env = {"ANSIBLE_NOCOLOR": "1", "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    cfg = os.path.join(os.path.dirname(playbooks), "ansible.cfg")
    if "ANSIBLE_CONFIG" not in os.environ and os.path.isfile(cfg):
        env["ANSIBLE_CONFIG"] = cfg  # the project's settings (collections path) wherever you stand
    return env


def list_plays(opts: Options, env: dict, all_stages: list[str]) -> list[Play]:
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", opts.site, "--list-tasks"]
    cmd += [os.path.join(opts.playbooks, "site.yml")]
    if opts.stages != all_stages:
        cmd += ["--tags", ",".join(opts.stages)]
    if opts.limit:
        cmd += ["--limit", opts.limit]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, check=False)
    if proc.returncode != 0:
        raise ConvergeError(f"cannot list the tasks of site.yml: {(proc.stderr or proc.stdout).strip()[-500:]}")
    return parse_list_tasks(proc.stdout, all_stages)


def converge(opts: Options, out=None, err=None) -> int:
    """Run site.yml for ``opts``; returns the exit code. Progress goes to ``err`` (or JSON to ``out``)."""
    import ansible_runner  # lazy: only the converge command needs it

    out, err = out or sys.stdout, err or sys.stderr
    all_stages = site_stages(os.path.join(opts.playbooks, "site.yml"))
    env = _environment(opts.playbooks)
    plays = list_plays(opts, env, all_stages)
    remember = _remember_path(opts.site, opts.stages)
    tracker = Tracker(plays, all_stages, remembered=_load_json(remember))
    if opts.json:
        tracker.listeners.append(lambda r: (out.write(json.dumps(r) + "\n"), out.flush()))
    view = None if opts.json else TerminalView(tracker, err, live=err.isatty())
    cmdline = (["--check"] if opts.check else []) + (["--diff"] if opts.diff else [])
    pdd = tempfile.mkdtemp(prefix="blueprints-converge-")
    cancelled = threading.Event()
    thread, runner = ansible_runner.run_async(
        private_data_dir=pdd,
        project_dir=os.getcwd(),  # relative paths in the inventory and -e mean the working directory
        playbook=os.path.join(opts.playbooks, "site.yml"),
        inventory=os.path.abspath(opts.site),
        extravars=absolute_paths(opts.extra_vars, os.getcwd()),
        envvars=env,
        cmdline=" ".join(cmdline) or None,
        tags=",".join(opts.stages) if opts.stages != all_stages else None,
        limit=opts.limit,
        event_handler=tracker.on_event,
        cancel_callback=cancelled.is_set,
        quiet=True,
    )
    try:
        while thread.is_alive():
            if view:
                view.draw()
            thread.join(0.25)
    except KeyboardInterrupt:
        cancelled.set()
        thread.join()
    if view:
        view.draw()
    rc = _exit_code(runner, tracker, cancelled.is_set())
    log = os.path.join(runner.config.artifact_dir, "stdout") if rc != EXIT_OK else None
    if rc == EXIT_OK:
        _save_totals(remember, tracker)
        shutil.rmtree(pdd, ignore_errors=True)
    summary = summary_lines(tracker, rc, log)
    if opts.json:
        out.write(json.dumps(_summary_record(tracker, rc, log)) + "\n")
    else:
        out.write("\n".join(summary) + "\n")
    return rc


def _exit_code(runner, tracker: Tracker, cancelled: bool) -> int:
    if cancelled or runner.status == "canceled":
        return EXIT_INTERRUPTED
    if runner.status == "successful" and runner.rc == 0:
        return EXIT_OK
    return tracker.exit_hint


def _save_totals(path: str, tracker: Tracker) -> None:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({s.name: s.done for s in tracker.snapshot() if s.started is not None}, fh)
    except OSError:
        pass  # remembering is only a nicer bar next time


def _summary_record(tracker: Tracker, rc: int, log: str | None) -> dict:
    return {
        "event": "summary",
        "rc": rc,
        "result": EXIT_CODES.get(rc, "failed"),
        "stages": [
            {
                "stage": s.name,
                "status": s.status,
                "tasks": s.done,
                "ok": s.ok,
                "changed": s.changed,
                "failed": s.failed,
                "objects": dict(s.objects),
                "elapsed": round(s.elapsed(), 1),
                "failed_task": s.failed_task or None,
                "msg": s.failed_msg or None,
            }
            for s in tracker.snapshot()
            if s.started is not None
        ],
        "plan": key_choices(tracker.plan_lines),
        "reports": tracker.reports,
        "rendered": {"files": len(tracker.rendered), "dir": common_dir(tracker.rendered)} if tracker.rendered else None,
        "file_changes": dict(sorted(tracker.file_changes.items())),
        "log": log,
    }


# ------------------------------------------------------------------ the command
def add_parser(sub) -> None:
    """The ``converge`` subcommand of ``blueprints`` (cli.py)."""
    import argparse

    codes = "\n".join(f"  {code:<4} {text}" for code, text in EXIT_CODES.items())
    p = sub.add_parser(
        "converge",
        help="converge a site (playbooks/site.yml) with a live progress bar per stage",
        description="Converge a site inventory with playbooks/site.yml through ansible-runner: a progress bar "
        "per stage (tasks done of total, current task, elapsed), then a summary (changed/failed per stage, the "
        "plan's key choices, where the report is). --json prints the same as JSON lines.",
        epilog="exit codes:\n" + codes,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--site", required=True, metavar="INVENTORY_DIR", help="site inventory directory")
    try:
        stages = ", ".join(site_stages(os.path.join(COLLECTION_PLAYBOOKS, "site.yml")))
    except OSError:
        stages = "the tags of site.yml's imports"
    p.add_argument(
        "--stage",
        action="append",
        default=[],
        metavar="STAGE",
        help=f"run only these stages (repeatable or comma-separated; site.yml's: {stages}); "
        "preflight and the site checks run with every stage",
    )
    p.add_argument(
        "-e",
        "--extra-vars",
        action="append",
        default=[],
        metavar="VARS",
        help="variables that win over the inventory (KEY=VALUE, YAML, @FILE); relative render_dir/report_dir "
        "mean the working directory",
    )
    p.add_argument("--json", action="store_true", help="print progress and summary as JSON lines (for CI)")
    p.add_argument("--check", action="store_true", help="change nothing (server-side dry run)")
    p.add_argument("--diff", action="store_true", help="show what changes")
    p.add_argument("--limit", metavar="PATTERN", help="only these clusters (hosts)")
    p.add_argument(
        "--playbooks-dir",
        metavar="DIR",
        help="directory with a site.yml whose imports carry the stage tags (default: the collection's playbooks)",
    )


def run_cli(a, parse_extra_vars) -> int:
    """``blueprints converge`` with parsed arguments; ``parse_extra_vars`` reads -e as the CLI does."""
    try:
        if not os.path.isdir(a.site):
            raise ConvergeError(f"--site: {a.site} is not a directory")
        playbooks = find_playbooks(a.site, a.playbooks_dir)
        known = site_stages(os.path.join(playbooks, "site.yml"))
        stages = [s.strip() for item in a.stage for s in item.split(",") if s.strip()] or list(known)
        unknown = [s for s in stages if s not in known]
        if unknown:
            raise ConvergeError(f"--stage: unknown stage(s) {', '.join(unknown)}; valid: {', '.join(known)}")
        opts = Options(
            site=os.path.abspath(a.site),
            stages=[s for s in known if s in stages],
            extra_vars=parse_extra_vars(a.extra_vars),
            playbooks=playbooks,
            json=a.json,
            check=a.check,
            diff=a.diff,
            limit=a.limit,
        )
        return converge(opts)
    except ConvergeError as e:
        sys.stderr.write(f"blueprints converge: error: {e}\n")
        return EXIT_USAGE
