"""Machinery the reliability catalogue shares (tests/reliability, docs/reliability.md).

* :func:`ansible_playbook` runs a real playbook as a user would (``ansible-playbook`` with the
  repository's ansible.cfg), in its own process group, its processes marked in their environment
  (Ansible's workers leave the group: setsid), all of which die with the test (even on SIGKILL of
  the test process) or at a kill, and returns its exit code and combined output.
* :class:`Census` counts every object the API server holds: every listable resource that
  discovery reports, listed (``limit=1`` and ``remainingItemCount``), nothing assumed.
* :func:`read_table` reads a Markdown table of docs/reliability.md: the docs are the catalogue.
* :func:`apply_edit` makes one careless edit to a copy of an example inventory (the edit
  language is documented in docs/reliability.md).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reliability.md"
PLAYBOOKS = ROOT / "playbooks"
INVENTORIES = ROOT / "inventories"
VENV_BIN = Path(sys.executable).parent

sys.path.insert(0, str(ROOT / "tests"))
from controlplane import procutil  # noqa: E402
from simulator.kube import request  # noqa: E402

LABEL_MANAGED_BY = "app.kubernetes.io/managed-by=inference-blueprints"
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\s+File \".*\", line \d+", re.M)


# ---------------------------------------------------------------------------- playbooks
def ansible_env(kubeconfig: str | os.PathLike | None = None, **extra: str) -> dict[str, str]:
    """The environment of ``make``'s Ansible runs (Makefile exports), with one cluster's kubeconfig."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("K8S_AUTH_", "ANSIBLE_", "KUBECONFIG", "PYTEST_", "INFERENCE_BLUEPRINTS_K8S"))
    }
    env.update(
        ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".cache" / "collections"),
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        PYTHONUNBUFFERED="1",
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    if kubeconfig:
        env["K8S_AUTH_KUBECONFIG"] = str(kubeconfig)
    env.update({k: str(v) for k, v in extra.items()})
    return env


@dataclass
class Result:
    rc: int
    output: str
    seconds: float
    killed: bool = False
    tasks: list[str] = field(default_factory=list)  # task banners in the order they started

    def error_text(self) -> str:
        """The part of the output that reports the failure (from the first error or fatal line)."""
        starts = [m.start() for m in re.finditer(r"^\[ERROR\]|^fatal:|^ERROR!", self.output, re.M)]
        return self.output[min(starts) :] if starts else ""


def _child_setup() -> None:
    os.setpgid(0, 0)  # its own process group: a kill reaches Ansible's workers too


def ansible_playbook(  # noqa: PLR0913 - the options of one ansible-playbook command line
    playbook: str | os.PathLike,
    inventory: str | os.PathLike,
    *,
    env: dict[str, str],
    extravars: list[str] | None = None,
    verbosity: int = 0,
    timeout: float = 900,
    kill_at_task: int | None = None,
    kill_delay: float = 0.0,
    args: list[str] | None = None,
) -> Result:
    """Run ``ansible-playbook`` to its end, or SIGKILL its whole process group once the
    ``kill_at_task``-th task (1-based) has started and ``kill_delay`` seconds passed."""
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), str(playbook)]
    for ev in extravars or []:
        cmd += ["-e", ev]
    if verbosity:
        cmd.append("-" + "v" * verbosity)
    cmd += args or []
    deathsig = procutil.die_with_parent()
    mark = procutil.new_mark()  # every process of the run, workers included, carries it
    env = {**env, procutil.MARK_VAR: mark}

    def preexec() -> None:
        _child_setup()
        deathsig()

    t0 = time.monotonic()
    proc = subprocess.Popen(  # noqa: S603 - our own venv's ansible-playbook
        cmd,
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        preexec_fn=preexec,  # noqa: PLW1509 - setpgid and prctl only
    )
    procutil.track_group(proc.pid)
    lines: list[str] = []
    tasks: list[str] = []
    killed = threading.Event()
    timer: list[threading.Timer] = []

    def kill() -> None:
        killed.set()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        procutil.kill_marked(mark)  # the workers (own sessions) and the modules they run

    watchdog = threading.Timer(timeout, kill)
    watchdog.daemon = True
    watchdog.start()
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if line.startswith("TASK ["):
                tasks.append(line.strip())
                if kill_at_task is not None and len(tasks) == kill_at_task and not timer:
                    t = threading.Timer(kill_delay, kill)
                    t.daemon = True
                    t.start()
                    timer.append(t)
        rc = proc.wait()
    finally:
        watchdog.cancel()
        for t in timer:
            t.cancel()
        if proc.poll() is None:
            kill()
            proc.wait()
        # whatever the run left (its group; workers in their own sessions) goes with it
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        left = procutil.kill_marked(mark)
        procutil.untrack_group(proc.pid)
        if not left:
            procutil.untrack_mark(mark)
    return Result(rc, "".join(lines), time.monotonic() - t0, killed.is_set(), tasks)


# ---------------------------------------------------------------------------- the API server's objects
class Census:
    """Every object the API server holds, by resource (discovery: every listable resource)."""

    def __init__(self, api_client):
        self.api = api_client
        self._resources: list[tuple[str, str, bool]] | None = None

    def resources(self, refresh: bool = False) -> list[tuple[str, str, bool]]:
        """(group/version path, plural, namespaced) of every listable resource of every group, once
        (from the group's preferred version when it serves the resource)."""
        if self._resources is not None and not refresh:
            return self._resources
        out = []
        core = request(self.api, "GET", "/api/v1")
        out += [("/api/v1", r["name"], r["namespaced"]) for r in core["resources"] if self._listable(r)]
        for group in request(self.api, "GET", "/apis")["groups"]:
            # every resource of the group, from the preferred version where it serves it, else from
            # the first version that does (serving.kserve.io prefers v1beta1, which has no
            # LLMInferenceService: the preferred version alone would miss it)
            preferred = group["preferredVersion"]["groupVersion"]
            versions = [preferred] + [v["groupVersion"] for v in group["versions"] if v["groupVersion"] != preferred]
            seen: set[str] = set()
            for gv in versions:
                try:
                    doc = request(self.api, "GET", f"/apis/{gv}")
                except Exception:  # noqa: BLE001, S112 - an aggregated API that is down lists nothing
                    continue
                for r in doc["resources"]:
                    if self._listable(r) and r["name"] not in seen:
                        seen.add(r["name"])
                        out.append((f"/apis/{gv}", r["name"], r["namespaced"]))
        self._resources = out
        return out

    @staticmethod
    def _listable(r: dict) -> bool:
        return "/" not in r["name"] and "list" in r.get("verbs", [])

    def _count_one(self, res: tuple[str, str, bool], selector: str | None) -> int:
        base, plural, _ = res
        query = [("limit", "1")] + ([("labelSelector", selector)] if selector else [])
        try:
            doc = request(self.api, "GET", f"{base}/{plural}", query=query)
        except Exception as e:  # noqa: BLE001
            if getattr(e, "status", None) in (404, 405, 503):
                return 0
            raise
        meta = doc.get("metadata") or {}
        return len(doc.get("items") or []) + int(meta.get("remainingItemCount") or 0)

    def count(self, selector: str | None = None) -> dict[str, int]:
        """Objects per resource (``plural.group``), every listable resource counted."""
        resources = self.resources(refresh=True)
        with ThreadPoolExecutor(8) as ex:
            counts = list(ex.map(lambda r: self._count_one(r, selector), resources))
        out: dict[str, int] = {}
        for (base, plural, _), n in zip(resources, counts, strict=True):
            group = base.split("/")[2] if base.startswith("/apis/") else ""
            key = f"{plural}.{group}" if group else plural
            out[key] = out.get(key, 0) + n
        return out

    def total(self, selector: str | None = None) -> int:
        return sum(self.count(selector).values())

    def objects(self, selector: str) -> list[dict]:
        """Every object carrying the label selector, any resource (metadata and the object itself)."""
        found = []
        for base, plural, _ in self.resources(refresh=True):
            try:
                doc = request(self.api, "GET", f"{base}/{plural}", query=[("labelSelector", selector)])
            except Exception as e:  # noqa: BLE001
                if getattr(e, "status", None) in (404, 405, 503):
                    continue
                raise
            for item in doc.get("items") or []:
                item.setdefault("kind", plural)
                found.append(item)
        return found


def object_path(obj: dict) -> str:
    """The REST path of one object of a built-in or well-known kind (Namespace, ServiceAccount,
    Secret, RBAC kinds) for the tests' own set-up writes."""
    plurals = {
        "Namespace": "namespaces",
        "ServiceAccount": "serviceaccounts",
        "Secret": "secrets",
        "ConfigMap": "configmaps",
        "ClusterRole": "clusterroles",
        "ClusterRoleBinding": "clusterrolebindings",
        "Role": "roles",
        "RoleBinding": "rolebindings",
        "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
    }
    api = obj["apiVersion"]
    base = f"/api/{api}" if "/" not in api else f"/apis/{api}"
    meta = obj["metadata"]
    ns = f"/namespaces/{meta['namespace']}" if meta.get("namespace") else ""
    return f"{base}{ns}/{plurals[obj['kind']]}/{meta['name']}"


def stage_artifacts(plane, inventory: Path, cluster: str | None = None) -> list[str]:
    """What the site's storage team stages before a converge (controlplane/artifacts.py): the Bound
    claims of its pvc:// model artifacts, without which kube-scheduler leaves their pods Pending."""
    from ansible_collections.inference.blueprints.plugins.module_utils import cli
    from controlplane import artifacts

    intents = cli.site_intents(str(inventory), str(ROOT / "blueprints"))  # a copy has no blueprints beside it
    staged = []
    for host, intent in intents.items():
        if cluster in (None, host):
            staged += artifacts.stage(plane.census.api, intent)
    return staged


def unstage_claims(plane, staged: list[str]) -> None:
    """Delete the claims stage_artifacts made (``namespace/claim`` each) and wait until they are gone: they are the
    storage team's, so a teardown keeps the namespace that holds them."""
    for item in staged:
        ns, claim = item.split("/", 1)
        path = f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{claim}"
        with contextlib.suppress(Exception):  # gone already
            plane.call("DELETE", path)
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                plane.call("GET", path)
            except Exception:  # noqa: BLE001 - 404: gone
                break
            time.sleep(0.2)


def remove_staged_volumes(plane, staged: list[str]) -> None:
    """The volumes stage_artifacts made (``namespace/claim`` each; their claims went with the site's
    namespace at teardown), so that the next test's object count does not hold them."""
    from controlplane import artifacts

    for item in staged:
        with contextlib.suppress(Exception):  # gone already
            plane.call("DELETE", f"/api/v1/persistentvolumes/{artifacts.volume_name(*item.split('/', 1))}")


def delete_namespace(api_client, name: str, timeout: float = 120.0) -> None:
    """Delete a namespace the test made and wait until it is gone: the namespace controller empties
    it in the background, and the tests after this one count every object."""
    with contextlib.suppress(Exception):
        request(api_client, "DELETE", f"/api/v1/namespaces/{name}")
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            request(api_client, "GET", f"/api/v1/namespaces/{name}")
        except Exception as e:  # noqa: BLE001
            if getattr(e, "status", None) == 404:
                return
        time.sleep(0.2)
    raise AssertionError(f"namespace {name} still there {timeout:.0f} s after its deletion")


def quiet_total(census: Census, settle: float = 2.0, timeout: float = 120.0, expect: int | None = None) -> int:
    """The object count once it has not moved for ``settle`` seconds (controllers finishing). With ``expect``, a
    count still away from it is waited on until ``timeout`` even when quiet: on a loaded machine the garbage
    collector can stall longer than ``settle`` between two deletions (an emulation of CI at stop 44 counted 14
    objects left that way)."""
    end = time.monotonic() + timeout
    last, since = census.total(), time.monotonic()
    while time.monotonic() < end:
        time.sleep(0.5)
        now = census.total()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= settle and (expect is None or now == expect):
            return now
    return last


# ---------------------------------------------------------------------------- the catalogue in the docs
def read_table(heading: str, path: Path = DOC) -> list[dict[str, str]]:
    """Rows of the first Markdown table after the heading ``heading`` (cells stripped, backticks off)."""
    text = path.read_text(encoding="utf-8")
    m = re.search(rf"^#+\s+{re.escape(heading)}\s*$", text, re.M)
    if not m:
        raise AssertionError(f"{path}: no heading {heading!r}")
    lines = text[m.end() :].splitlines()
    rows, header = [], None
    for line in lines:
        s = line.strip()
        if not s.startswith("|"):
            if header is not None and rows:
                break
            if s.startswith("#"):
                break
            continue
        cells = [c.strip() for c in s.strip("|").split("|")]
        if header is None:
            header = [c.lower() for c in cells]
            continue
        if all(set(c) <= set("-: ") for c in cells):
            continue
        rows.append({h: _unquote(c) for h, c in zip(header, cells, strict=True)})
    if not rows:
        raise AssertionError(f"{path}: the table under {heading!r} is empty")
    return rows


def _unquote(cell: str) -> str:
    cell = cell.strip()
    if cell.startswith("`") and cell.endswith("`") and cell.count("`") == 2:
        return cell[1:-1]
    return cell.replace("\\|", "|")


# ---------------------------------------------------------------------------- careless edits
_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _steps(path: str) -> list:
    out = []
    for name, index in _STEP.findall(path):
        out.append(int(index) if index else name)
    return out


def _parent(doc, path: str):
    steps = _steps(path)
    cur = doc
    for s in steps[:-1]:
        cur = cur[s]
    return cur, steps[-1]


def site_file(inventory: Path) -> Path:
    """The inventory file that names the blueprint (where a user edits the site)."""
    for p in sorted(inventory.glob("group_vars/**/*.yml")):
        doc = yaml.safe_load(p.read_text()) or {}
        if isinstance(doc, dict) and "blueprint" in doc:
            return p
    raise AssertionError(f"{inventory}: no group_vars file sets blueprint")


def copy_inventory(site: str, dest: Path) -> Path:
    target = dest / site
    shutil.copytree(INVENTORIES / site, target)
    return target


def apply_edit(inventory: Path, edit: str) -> None:
    """Apply one edit of the catalogue's edit language (docs/reliability.md, "Edits") to an inventory copy.

    ``[FILE:] set PATH = YAML`` | ``[FILE:] rename PATH -> KEY`` | ``[FILE:] del PATH`` |
    ``[FILE:] append PATH = YAML`` | ``[FILE:] text 'OLD' => 'NEW'``. FILE is relative to the
    inventory (default: the file that names the blueprint); ``@PATH`` as a value copies a value
    of the same file."""
    m = re.match(r"^(?:(?P<file>[\w./-]+\.yml):\s*)?(?P<verb>set|rename|del|append|text)\s+(?P<rest>.*)$", edit)
    if not m:
        raise AssertionError(f"edit not understood: {edit!r}")
    target = inventory / m["file"] if m["file"] else site_file(inventory)
    verb, rest = m["verb"], m["rest"]
    if verb == "text":
        tm = re.match(r"^'(?P<old>.*?)'\s*=>\s*'(?P<new>.*)'$", rest)
        if not tm:
            raise AssertionError(f"text edit not understood: {edit!r}")
        old = tm["old"].encode().decode("unicode_escape")
        new = tm["new"].encode().decode("unicode_escape")
        text = target.read_text() if target.exists() else ""
        if old not in text:
            raise AssertionError(f"{target}: {old!r} not found for edit {edit!r}")
        target.write_text(text.replace(old, new, 1))
        return
    doc = (yaml.safe_load(target.read_text()) if target.exists() else None) or {}

    def value_of(raw: str):
        raw = raw.strip()
        if raw.startswith("@"):
            parent, key = _parent(doc, raw[1:])
            return yaml.safe_load(yaml.safe_dump(parent[key]))
        return yaml.safe_load(raw)

    if verb == "set":
        path, _, raw = rest.partition("=")
        parent, key = _parent(doc, path.strip())
        parent[key] = value_of(raw)
    elif verb == "append":
        path, _, raw = rest.partition("=")
        parent, key = _parent(doc, path.strip())
        parent[key].append(value_of(raw))
    elif verb == "del":
        parent, key = _parent(doc, rest.strip())
        del parent[key]
    elif verb == "rename":
        path, _, new = rest.partition("->")
        parent, key = _parent(doc, path.strip())
        items = list(parent.items())
        parent.clear()
        for k, v in items:
            parent[new.strip() if k == key else k] = v
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("---\n" + yaml.safe_dump(doc, sort_keys=False, width=200))
