"""Run the job templates and workflows of aap/config/ the way AAP (automation controller) runs them.

No AAP here, so this module does, in a few lines each, what the controller does for a job (read
from AWX's own code, ansible/awx HEAD of 2024-10: awx/main/tasks/jobs.py, awx/main/models/mixins.py,
awx/main/models/credential.py, awx/main/models/jobs.py), and hands the job to the same
ansible-runner the controller's execution nodes run:

* **project sync**: a checkout of the repository (the files git tracks or would track) as
  ``<private data dir>/project``; the collection comes from its tarball installed where the
  execution environment has it (``/usr/share/ansible/collections`` there; a directory here), not
  from the source tree;
* **inventory sync**: ``ansible-inventory --list --export`` of the source's ``source_path`` in the
  project, written as the executable inventory script ``inventory/hosts`` the controller writes;
* **launch**: extra variables = the template's ``extra_vars``, then every survey default that passes
  the survey's own checks, then the launch answers (checked the same way; variables outside the
  survey only with ``ask_variables_on_launch``), then the controller's ``awx_*``/``tower_*`` variables;
* **command line**: ``--check`` for job_type check, ``--diff``, ``-l``, ``-v``, ``-t``,
  ``--skip-tags``, as the controller builds it;
* **environment**: ANSIBLE_COLLECTIONS_PATH as the controller computes it (the project's
  requirements_collections, the project ansible.cfg's collections_path, then the user's and the
  execution environment's), the project's ansible.cfg, and the credentials' injectors: file
  templates rendered into ``<private data dir>/env`` (mode 0600) and env templates that may name
  those files (``{{ tower.filename.<name> }}``), rendered in a sandboxed Jinja environment;
* **workflow**: nodes without parents start; a node runs when a parent ends with the outcome its
  link names (success, failure, always); approval nodes wait for a person (the caller decides).

The private data directory is removed when the job ends, as the controller does; the caller
gets its artifacts and events first (``Job.scan``).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = ROOT / "aap" / "config"
VENV_BIN = Path(sys.executable).parent
JOB_VARIABLE_PREFIXES = ("awx", "tower")
_job_ids = itertools.count(1)


def load_config(config_dir: Path = CONFIG_DIR) -> dict:
    """Every ``controller_*`` list of aap/config, merged (the files split one state)."""
    out: dict = {}
    for path in sorted(config_dir.glob("*.yml")):
        for key, value in (yaml.safe_load(path.read_text()) or {}).items():
            out.setdefault(key, []).extend(value)
    return out


def by_name(config: dict, kind: str) -> dict[str, dict]:
    return {o["name"]: o for o in config.get(kind, [])}


# ------------------------------------------------------------------ surveys and launch variables
def _choices(question: dict) -> list:
    choices = question.get("choices") or []
    if isinstance(choices, str):
        choices = [c for c in choices.splitlines() if c.strip()]
    return list(choices)


def survey_errors(question: dict, answers: dict) -> list[str]:
    """The controller's check of one survey answer (missing, type, length or range, choices)."""
    var = question["variable"]
    if var not in answers:
        return [f"'{var}' value missing"] if question.get("required") else []
    value, kind = answers[var], question["type"]
    errors = []
    if kind in ("text", "textarea", "password"):
        if not isinstance(value, str):
            return [f"value {value!r} for '{var}' expected to be a string"]
        if question.get("min") not in ("", None) and len(value) < int(question["min"]):
            errors.append(f"'{var}' is shorter than {question['min']}")
        if question.get("max") not in ("", None) and len(value) > int(question["max"]):
            errors.append(f"'{var}' is longer than {question['max']}")
    elif kind in ("integer", "float"):
        ok = type(value) is int if kind == "integer" else type(value) in (int, float)
        if not ok:
            return [f"value {value!r} for '{var}' expected to be {kind}"]
        if question.get("min") not in ("", None) and value < float(question["min"]):
            errors.append(f"'{var}' value {value} is below {question['min']}")
        if question.get("max") not in ("", None) and value > float(question["max"]):
            errors.append(f"'{var}' value {value} is above {question['max']}")
    elif kind == "multiselect":
        if not isinstance(value, list):
            return [f"'{var}' value is expected to be a list"]
        errors += [
            f"value {v!r} for '{var}' expected to be one of {_choices(question)}"
            for v in value
            if v not in _choices(question)
        ]
    elif kind == "multiplechoice" and value not in _choices(question):
        errors.append(f"value {value!r} for '{var}' expected to be one of {_choices(question)}")
    return errors


def launch_extra_vars(template: dict, answers: dict | None = None, launch_vars: dict | None = None) -> dict:
    """Extra variables of a job launched from ``template`` (without the controller's meta variables).

    Raises ValueError for an answer the survey refuses or a variable the template does not accept.
    """
    answers, launch_vars = dict(answers or {}), dict(launch_vars or {})
    out = dict(template.get("extra_vars") or {})
    spec = (template.get("survey_spec") or {}).get("spec", []) if template.get("survey_enabled") else []
    for q in spec:
        if q.get("default") is not None and not survey_errors(q, {q["variable"]: q["default"]}):
            out[q["variable"]] = q["default"]
    problems = [e for q in spec for e in survey_errors(q, {**out, **answers})]
    if problems:
        raise ValueError("; ".join(problems))
    surveyed = {q["variable"] for q in spec}
    for name in set(answers) - surveyed:
        raise ValueError(f"{name}: not a survey variable of {template['name']}")
    if launch_vars and not template.get("ask_variables_on_launch"):
        raise ValueError(f"{template['name']} does not prompt for variables on launch")
    out.update(answers)
    out.update(launch_vars)
    return out


def meta_vars(job_id: int, template: dict, inventory: str, workflow: tuple[int, str] | None, revision: str) -> dict:
    out = {}
    for p in JOB_VARIABLE_PREFIXES:
        out.update(
            {
                f"{p}_job_id": job_id,
                f"{p}_job_launch_type": "workflow" if workflow else "manual",
                f"{p}_user_name": "admin",
                f"{p}_inventory_name": inventory,
                f"{p}_job_template_name": template["name"],
                f"{p}_project_revision": revision,
                f"{p}_project_scm_branch": "main",
                f"{p}_execution_node": "localhost",
            }
        )
        if workflow:
            out[f"{p}_workflow_job_id"], out[f"{p}_workflow_job_name"] = workflow
    return out


def command_line(template: dict, overrides: dict) -> list[str]:
    """ansible-playbook options the controller adds for a job (prompted values win when asked)."""

    def value(key: str, ask: str):
        if key in overrides:
            if not template.get(ask):
                raise ValueError(f"{template['name']} does not prompt for {key} on launch")
            return overrides[key]
        return template.get(key)

    args = []
    if value("job_type", "ask_job_type_on_launch") == "check":
        args.append("--check")
    if value("diff_mode", "ask_diff_mode_on_launch"):
        args.append("--diff")
    if limit := value("limit", "ask_limit_on_launch"):
        args += ["-l", limit]
    if verbosity := value("verbosity", "ask_verbosity_on_launch"):
        args.append("-" + "v" * min(5, int(verbosity)))
    if tags := value("job_tags", "ask_tags_on_launch"):
        args += ["-t", tags]
    if skip := value("skip_tags", "ask_skip_tags_on_launch"):
        args.append(f"--skip-tags={skip}")
    return args


# ------------------------------------------------------------------ credentials
class _Namespace:
    pass


def inject_credential(cred_type: dict, inputs: dict, private_data_dir: Path) -> dict[str, str]:
    """The environment a credential of ``cred_type`` injects (files go to private_data_dir/env)."""
    from jinja2 import sandbox

    env_dir = private_data_dir / "env"
    env_dir.mkdir(parents=True, exist_ok=True)
    tower = _Namespace()
    namespace: dict = {"tower": tower}
    for name, value in inputs.items():
        if isinstance(value, bool) or len(value):
            namespace[name] = value
    for fld in cred_type["inputs"].get("fields", []):
        if fld["type"] == "boolean" and fld["id"] not in inputs:
            namespace[fld["id"]] = False
    jinja = sandbox.ImmutableSandboxedEnvironment()
    injectors = cred_type.get("injectors") or {}
    for label, template in (injectors.get("file") or {}).items():
        fd, path = tempfile.mkstemp(dir=env_dir)
        with os.fdopen(fd, "w") as fh:
            fh.write(jinja.from_string(template).render(**namespace))
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
        if "." not in label:
            tower.filename = path
        else:
            if not hasattr(tower, "filename"):
                tower.filename = _Namespace()
            setattr(tower.filename, label.split(".", 1)[1], path)
    return {k: jinja.from_string(v).render(**namespace) for k, v in (injectors.get("env") or {}).items()}


# ------------------------------------------------------------------ project and execution environment
@dataclass
class Controller:
    """A project checkout, its execution environment's collections and the synced inventories."""

    workdir: Path
    config: dict = field(default_factory=load_config)
    credentials: dict[str, dict] = field(default_factory=dict)  # credential name -> inputs (the secrets)
    project: Path = field(init=False)
    ee_collections: Path = field(init=False)
    revision: str = field(init=False)
    inventories: dict[str, dict] = field(default_factory=dict)

    def __post_init__(self):
        self.project = self.workdir / "project"
        self.ee_collections = self.workdir / "ee" / "collections"
        self._sync_project()
        self._build_ee()

    def _sync_project(self):
        files = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout.split(b"\0")
        for rel in filter(None, files):
            src = ROOT / rel.decode()
            if src.is_file():
                dst = self.project / rel.decode()
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)
        self.revision = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout.strip()

    def _build_ee(self):
        """The execution environment's collections: this collection's tarball and its dependencies."""
        out = self.workdir / "ee" / "dist"
        subprocess.run(
            [
                VENV_BIN / "ansible-galaxy",
                "collection",
                "build",
                str(self.project / "collections/ansible_collections/inference/blueprints"),
                "--output-path",
                str(out),
            ],
            check=True,
            capture_output=True,
        )
        (tarball,) = out.glob("inference-blueprints-*.tar.gz")
        target = self.ee_collections / "ansible_collections" / "inference" / "blueprints"
        target.mkdir(parents=True)
        with tarfile.open(tarball) as tf:
            tf.extractall(target, filter="data")
        deps = yaml.safe_load((ROOT / "collections" / "requirements.yml").read_text())["collections"]
        for dep in deps:
            ns, name = dep["name"].split(".")
            shutil.copytree(
                ROOT / ".cache" / "collections" / "ansible_collections" / ns / name,
                self.ee_collections / "ansible_collections" / ns / name,
            )

    def sync_inventory(self, name: str) -> dict:
        """Import an inventory from its source in the project (``ansible-inventory --list --export``)."""
        if name not in self.inventories:
            source = next(s for s in self.config["controller_inventory_sources"] if s["inventory"] == name)
            out = subprocess.run(
                [VENV_BIN / "ansible-inventory", "-i", str(self.project / source["source_path"]), "--list", "--export"],
                check=True,
                capture_output=True,
                text=True,
                env={**os.environ, "ANSIBLE_CONFIG": str(self.project / "ansible.cfg")},
                cwd=self.project,
            ).stdout
            self.inventories[name] = json.loads(out)
        return self.inventories[name]

    def environment(self, project_dir: Path) -> dict[str, str]:
        """ANSIBLE_* of a job as the controller computes them (collections: project's first)."""
        cfg = project_dir / "ansible.cfg"
        import configparser

        parser = configparser.ConfigParser()
        parser.read(cfg)
        paths = ["~/.ansible/collections", str(self.ee_collections)]
        configured = parser.get("defaults", "collections_path", fallback=None)
        if configured:
            paths = [configured, *paths]
        paths = [str(project_dir.parent / "requirements_collections"), *paths]
        return {
            # the controller's own ANSIBLE_* settings (awx/settings/defaults.py)
            "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True",
            "ANSIBLE_PARAMIKO_RECORD_HOST_KEYS": "False",
            "ANSIBLE_FORCE_COLOR": "True",
            "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join(paths),
            # the execution environment has no source tree on sys.path: only the tarball counts
            "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "False",
            "ANSIBLE_CONFIG": str(cfg),
            "ANSIBLE_RETRY_FILES_ENABLED": "False",
            "PATH": str(VENV_BIN) + os.pathsep + os.environ.get("PATH", ""),
        }

    # -------------------------------------------------------------- jobs
    def launch(  # noqa: PLR0913 (the controller's launch prompts)
        self,
        template_name: str,
        *,
        answers: dict | None = None,
        launch_vars: dict | None = None,
        overrides: dict | None = None,
        workflow: tuple[int, str] | None = None,
        workflow_vars: dict | None = None,
        event_handler: Callable[[dict], None] | None = None,
    ) -> Job:
        """Launch a job template (``workflow_vars``: a workflow's variables, which every node's job gets)."""
        template = by_name(self.config, "controller_templates")[template_name]
        overrides = dict(overrides or {})
        inventory = overrides.pop("inventory", None) or template["inventory"]
        if inventory != template["inventory"] and not template.get("ask_inventory_on_launch"):
            raise ValueError(f"{template_name} does not prompt for an inventory")
        job_id = next(_job_ids)
        pdd = Path(tempfile.mkdtemp(prefix=f"awx_{job_id}_", dir=self.workdir))
        os.chmod(pdd, stat.S_IRWXU)
        job = Job(job_id=job_id, template=template, private_data_dir=pdd)
        shutil.copytree(self.project, pdd / "project", symlinks=True)
        (pdd / "inventory").mkdir()
        inv_script = pdd / "inventory" / "hosts"
        inv_script.write_text(
            "#! /usr/bin/env python3\n# -*- coding: utf-8 -*-\nprint(%r)\n" % json.dumps(self.sync_inventory(inventory))
        )
        inv_script.chmod(0o700)
        job.extra_vars = {
            **launch_extra_vars(template, answers, launch_vars),
            **(workflow_vars or {}),
            **meta_vars(job_id, template, inventory, workflow, self.revision),
        }
        job.cmdline = command_line(template, overrides)
        env = self.environment(pdd / "project")
        types = by_name(self.config, "controller_credential_types")
        creds = by_name(self.config, "controller_credentials")
        for cred_name in overrides.get("credentials", template.get("credentials") or []):
            cred = creds[cred_name]
            env.update(inject_credential(types[cred["credential_type"]], self.credentials[cred_name], pdd))
        job.env = env
        job.run(event_handler)
        return job


@dataclass
class Job:
    job_id: int
    template: dict
    private_data_dir: Path
    extra_vars: dict = field(default_factory=dict)
    cmdline: list = field(default_factory=list)
    env: dict = field(default_factory=dict)
    events: list = field(default_factory=list)
    status: str = ""
    rc: int | None = None
    stats: dict = field(default_factory=dict)
    stdout: str = ""

    def run(self, event_handler=None):
        import ansible_runner

        def on_event(ev):
            self.events.append(ev)
            if event_handler:
                event_handler(ev)
            return True

        pdd = self.private_data_dir
        runner = ansible_runner.run(
            private_data_dir=str(pdd),
            ident=str(self.job_id),
            playbook=self.template["playbook"],
            inventory=str(pdd / "inventory" / "hosts"),
            extravars=self.extra_vars,
            envvars=self.env,
            cmdline=" ".join(_quote(a) for a in self.cmdline) or None,
            event_handler=on_event,
            quiet=True,
        )
        self.status, self.rc, self.stats = runner.status, runner.rc, runner.stats or {}
        self.stdout = runner.stdout.read() if runner.stdout else ""

    @property
    def artifacts(self) -> Path:
        return self.private_data_dir / "artifacts" / str(self.job_id)

    @property
    def changed(self) -> int:
        return sum((self.stats or {}).get("changed", {}).values())

    def results(self, event: str = "runner_on_ok") -> list[dict]:
        return [e["event_data"] for e in self.events if e.get("event") == event]

    def failures(self) -> list[dict]:
        return [
            e["event_data"]
            for e in self.events
            if e.get("event") in ("runner_on_failed", "runner_on_unreachable")
            and not e["event_data"].get("ignore_errors")
        ]

    def failure_messages(self) -> str:
        return "\n".join(f"{d.get('task')}: {d.get('res', {}).get('msg', d.get('res'))}" for d in self.failures())

    def cleanup(self):
        """The controller removes the private data directory (credential files with it)."""
        shutil.rmtree(self.private_data_dir, ignore_errors=True)


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


# ------------------------------------------------------------------ workflows
APPROVED, DENIED = "approved", "denied"


def run_workflow(
    controller: Controller,
    workflow_name: str,
    *,
    approve: Callable[[dict], bool],
    launch: Callable[[dict, tuple[int, str]], Job],
) -> list[tuple[str, str]]:
    """Run a workflow's nodes as the controller does; returns ``[(identifier, outcome)]`` in order.

    ``launch(node, (workflow_job_id, name))`` runs a job template node; ``approve(node)`` answers an
    approval node. A node runs once every parent that reached it ended with the link's outcome.
    """
    wf = by_name(controller.config, "controller_workflows")[workflow_name]
    nodes = {n["identifier"]: n for n in wf["simplified_workflow_nodes"]}
    children = {n: [] for n in nodes}
    for node in nodes.values():
        for kind in ("success_nodes", "failure_nodes", "always_nodes"):
            for child in node.get(kind, []):
                children[node["identifier"]].append((kind, child))
    has_parent = {child for links in children.values() for _, child in links}
    ready = [n for n in nodes if n not in has_parent]
    wf_job = (next(_job_ids), workflow_name)
    done: list[tuple[str, str]] = []
    while ready:
        ident = ready.pop(0)
        node = nodes[ident]
        if "approval_node" in node:
            outcome = "successful" if approve(node) else "failed"
        else:
            outcome = "successful" if launch(node, wf_job).status == "successful" else "failed"
        done.append((ident, outcome))
        for kind, child in children[ident]:
            if kind == "always_nodes" or (kind == "success_nodes") == (outcome == "successful"):
                ready.append(child)
    return done
