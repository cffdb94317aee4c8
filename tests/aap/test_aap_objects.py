"""The AAP objects as code (aap/config/) against the product they drive.

* every job template's playbook exists (the pending ones are listed by name and must still be
  missing: a stale entry fails too);
* every survey question sets a variable the product reads (a site variable, a role's argument
  spec option or a variable of the template's playbook) with a compatible type, and its default
  and every choice pass the product's own validation;
* the workflow runs preflight -> plan -> platform -> serving -> verify on success, a person
  approves before canary and teardown, and failures lead to verify or the plan report;
* the credential type's injectors give kubernetes a working kubeconfig, set only K8S_AUTH_*
  and put no secret into the environment; credentials hold no literal secret;
* playbooks/aap_configure.yml passes every key of every object to an awx.awx option that exists
  (checked against the modules' own documentation), and logs no credential.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.inference.blueprints.plugins.module_utils.intent import inventory
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import MISSING, Field, Validator

from tests.aap import awx

ROOT = awx.ROOT
COLLECTION_PLAYBOOKS = ROOT / "collections/ansible_collections/inference/blueprints/playbooks"
CONFIG = awx.load_config()
TEMPLATES = awx.by_name(CONFIG, "controller_templates")
WORKFLOWS = awx.by_name(CONFIG, "controller_workflows")

SURVEY_TYPES = {  # survey type -> the product types its answer can feed
    "text": {"str", "path", "raw"},
    "textarea": {"str", "path", "raw", "dict", "list"},  # the site schema parses YAML text for structures
    "password": {"str", "raw"},
    "integer": {"int", "float", "raw"},
    "float": {"float", "raw"},
    "multiplechoice": {"str", "path", "bool", "int", "float", "raw"},
    "multiselect": {"list"},
}


def test_every_job_template_playbook_exists():
    missing = {t["playbook"] for t in TEMPLATES.values() if not (ROOT / t["playbook"]).is_file()}
    assert not missing, f"job templates name missing playbooks: {missing}"


def test_one_job_template_per_lifecycle_stage():
    stages = {"preflight", "plan", "platform", "serving", "verify", "drift", "teardown", "canary"}
    assert {n.removeprefix("inference-blueprints ") for n in TEMPLATES} == stages
    # preflight is platform.yml's preflight alone: its tag, nothing applied
    assert TEMPLATES["inference-blueprints preflight"]["job_tags"] == "preflight"
    text = (COLLECTION_PLAYBOOKS / "platform.yml").read_text()
    assert "inference.blueprints.preflight" in text


# ------------------------------------------------------------------ surveys
def _play_vars(playbook: Path) -> dict:
    """Variables the playbook (and the playbooks it imports) define in ``vars:``."""
    out: dict = {}
    if not playbook.is_file():
        return out
    for play in yaml.safe_load(playbook.read_text()) or []:
        if "import_playbook" in play or "ansible.builtin.import_playbook" in play:
            target = play.get("ansible.builtin.import_playbook") or play["import_playbook"]
            # the project's playbooks import the collection's by name: inference.blueprints.<playbook>
            path = (
                COLLECTION_PLAYBOOKS / f"{target.rsplit('.', 1)[1]}.yml"
                if target.startswith("inference.blueprints.")
                else playbook.parent / target
            )
            out.update(_play_vars(path))
        out.update(play.get("vars") or {})
    return out


def _playbook_source(playbook: str) -> Path:
    """The file that holds a job template's playbook: the project's top-level playbooks are wrappers that import
    the collection's playbook of the same name (``inference.blueprints.<name>``); the collection's file then."""
    path = ROOT / playbook
    plays = yaml.safe_load(path.read_text()) or []
    imported = [p.get("ansible.builtin.import_playbook") for p in plays if isinstance(p, dict)]
    if len(plays) == 1 and imported[0] and imported[0].startswith("inference.blueprints."):
        name = imported[0].rsplit(".", 1)[1]
        return ROOT / "collections/ansible_collections/inference/blueprints/playbooks" / f"{name}.yml"
    return path


def _field_for(template: dict, variable: str) -> tuple[str, Field]:
    """Where the product defines ``variable`` for this template, as a Field."""
    known = inventory.all_variables()
    if variable in known:
        return "site or role variable", known[variable]
    play_vars = _play_vars(_playbook_source(template["playbook"]))
    if variable in play_vars:
        default = play_vars[variable]
        kind = {bool: "bool", int: "int", float: "float", str: "str"}.get(type(default), "raw")
        return f"variable of {template['playbook']}", Field(kind, default=default)
    return "", Field()


def _questions():
    for t in TEMPLATES.values():
        for q in (t.get("survey_spec") or {}).get("spec", []):
            yield pytest.param(t, q, id=f"{t['name']}:{q['variable']}")


@pytest.mark.parametrize(("template", "question"), list(_questions()))
def test_survey_variable_is_one_the_product_reads_with_a_compatible_type(template, question):
    where, fld = _field_for(template, question["variable"])
    assert where, f"{question['variable']}: no site variable, role option or playbook variable of that name"
    assert fld.type in SURVEY_TYPES[question["type"]], (
        f"{question['variable']} ({where}) is {fld.type}; a {question['type']} question cannot feed it"
    )
    values = [question["default"]] if question.get("default") is not None else []
    values += awx._choices(question)
    if question["type"] == "multiselect":
        values = [values]
    for value in values:
        v = Validator()
        v.run(value, fld, question["variable"])
        assert not v.errors, f"survey value {value!r} is refused by the product: {v.errors}"
        assert not awx.survey_errors(question, {question["variable"]: value}), value
    if fld.choices and question["type"] == "multiplechoice":
        assert set(awx._choices(question)) <= {str(c) for c in fld.choices}
    if where.startswith("variable of") and fld.type == "bool":
        # a playbook variable answered with "true"/"false" must be read through | bool
        uses = re.findall(rf"{question['variable']}\s*\|\s*bool", _playbook_source(template["playbook"]).read_text())
        assert uses, f"{template['playbook']} reads {question['variable']} without | bool"
    if fld.minimum is not None and question.get("min") is not None:
        assert float(question["min"]) >= fld.minimum


@pytest.mark.parametrize(("template", "question"), list(_questions()))
def test_survey_question_without_default_does_not_override_the_inventory(template, question):
    # A survey default is sent on every launch and wins over the inventory: questions about what a
    # site's inventory may set (site variables, role options) must stay empty unless answered.
    where, _ = _field_for(template, question["variable"])
    if where == "site or role variable":
        assert question.get("default") is None and not question.get("required"), question["variable"]
        assert question["variable"] not in awx.launch_extra_vars(template)


def test_launch_variables_follow_the_controller_rules():
    t = TEMPLATES["inference-blueprints verify"]
    assert awx.launch_extra_vars(t)["verify_timeout"] == 120
    assert awx.launch_extra_vars(t, {"verify_timeout": 300})["verify_timeout"] == 300
    with pytest.raises(ValueError, match="verify_timeout"):
        awx.launch_extra_vars(t, {"verify_timeout": "300"})  # an integer question takes integers
    with pytest.raises(ValueError, match="verify_timeout"):
        awx.launch_extra_vars(t, {"verify_timeout": 5})  # below its min
    with pytest.raises(ValueError, match="does not prompt for variables"):
        awx.launch_extra_vars(t, launch_vars={"serving_namespace": "x"})
    p = TEMPLATES["inference-blueprints platform"]
    assert "delivery" not in awx.launch_extra_vars(p)
    with pytest.raises(ValueError, match="delivery"):
        awx.launch_extra_vars(p, {"delivery": "apply-now"})
    assert awx.command_line(p, {"job_tags": "nfd", "limit": "chat-east-1", "diff_mode": True}) == [
        "--diff",
        "-l",
        "chat-east-1",
        "-t",
        "nfd",
    ]
    with pytest.raises(ValueError, match="job_tags"):
        awx.command_line(TEMPLATES["inference-blueprints verify"], {"job_tags": "nfd"})


# ------------------------------------------------------------------ workflow
def _walk(workflow: str, fail: set[str] = frozenset(), approve: bool = True) -> list[tuple[str, str]]:
    def launch(node, _wf):
        return type("J", (), {"status": "failed" if node["identifier"] in fail else "successful"})()

    return awx.run_workflow(_Config(), workflow, approve=lambda n: approve, launch=launch)


class _Config:
    config = CONFIG


def test_workflow_success_path_runs_the_stages_in_order_and_asks_before_the_canary():
    wf = WORKFLOWS["inference-blueprints converge"]
    nodes = {n["identifier"]: n for n in wf["simplified_workflow_nodes"]}
    for n in nodes.values():
        assert "approval_node" in n or n["unified_job_template"] in TEMPLATES, n
        for kind in ("success_nodes", "failure_nodes", "always_nodes"):
            assert set(n.get(kind, [])) <= set(nodes), (n["identifier"], kind)
    done = _walk("inference-blueprints converge")
    assert [i for i, _ in done] == ["preflight", "plan", "platform", "serving", "verify", "approve-canary", "canary"]
    denied = _walk("inference-blueprints converge", approve=False)
    assert denied[-1] == ("approve-canary", "failed") and "canary" not in dict(denied)


@pytest.mark.parametrize(
    ("failing", "then"),
    [("preflight", "report"), ("platform", "verify-after-failure"), ("serving", "verify-after-failure")],
)
def test_workflow_failure_paths_run_verify_or_the_report(failing, then):
    done = _walk("inference-blueprints converge", fail={failing})
    assert (failing, "failed") in done and done[-1][0] == then, done
    node = {n["identifier"]: n for n in WORKFLOWS["inference-blueprints converge"]["simplified_workflow_nodes"]}[then]
    assert node["unified_job_template"] in ("inference-blueprints verify", "inference-blueprints plan")
    assert "canary" not in dict(done)


def test_canary_and_teardown_only_after_an_approval():
    for wf in WORKFLOWS.values():
        nodes = wf["simplified_workflow_nodes"]
        for n in nodes:
            if n.get("unified_job_template") in ("inference-blueprints canary", "inference-blueprints teardown"):
                parents = [
                    p
                    for p in nodes
                    if any(n["identifier"] in p.get(k, []) for k in ("success_nodes", "failure_nodes", "always_nodes"))
                ]
                assert parents and all(
                    "approval_node" in p and n["identifier"] in p.get("success_nodes", []) for p in parents
                ), (wf["name"], n)


# ------------------------------------------------------------------ credentials
CRED_TYPE = awx.by_name(CONFIG, "controller_credential_types")["OpenShift cluster (inference.blueprints)"]


def test_credential_type_injects_only_k8s_auth_and_no_secret_in_the_environment(tmp_path):
    secret_fields = {f["id"] for f in CRED_TYPE["inputs"]["fields"] if f.get("secret")}
    assert {"bearer_token", "kubeconfig"} <= secret_fields
    env = CRED_TYPE["injectors"]["env"]
    assert env and all(k.startswith("K8S_AUTH_") for k in env)
    for tmpl in env.values():  # env templates may name files, never inputs
        for expr in re.findall(r"\{\{(.*?)\}\}", tmpl):
            assert expr.strip().startswith("tower.filename."), tmpl
    for cred in CONFIG["controller_credentials"]:
        for key in secret_fields & set(cred["inputs"]):
            assert re.fullmatch(r"\{\{.*\}\}", str(cred["inputs"][key]).strip()), f"{cred['name']}.{key} is a literal"


def _load_kubeconfig(path: str):
    from kubernetes import client, config

    cfg = client.Configuration()
    config.load_kube_config(config_file=path, client_configuration=cfg)
    return cfg


def test_credential_injectors_give_kubernetes_a_working_kubeconfig(tmp_path):
    token = "canary-token-" + "x" * 20
    ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    env = awx.inject_credential(
        CRED_TYPE,
        {"host": "https://api.example:6443", "bearer_token": token, "ca_cert": ca, "verify_ssl": True},
        tmp_path,
    )
    assert set(env) == {"K8S_AUTH_KUBECONFIG"} and token not in json.dumps(env)
    kc = yaml.safe_load(Path(env["K8S_AUTH_KUBECONFIG"]).read_text())
    assert kc["clusters"][0]["cluster"]["server"] == "https://api.example:6443"
    assert Path(kc["clusters"][0]["cluster"]["certificate-authority"]).read_text() == ca
    assert kc["users"][0]["user"]["token"] == token
    assert oct(Path(env["K8S_AUTH_KUBECONFIG"]).stat().st_mode & 0o777) == "0o600"
    # without a CA and with verification off, the kubeconfig says so
    env = awx.inject_credential(
        CRED_TYPE, {"host": "https://api.example:6443", "bearer_token": token, "verify_ssl": False}, tmp_path
    )
    cfg = _load_kubeconfig(env["K8S_AUTH_KUBECONFIG"])
    assert cfg.verify_ssl is False and cfg.host == "https://api.example:6443"
    assert token in json.dumps(cfg.api_key)
    # a whole kubeconfig goes through as given
    own = yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "a",
            "contexts": [{"name": "a", "context": {"cluster": "a", "user": "a"}}],
            "clusters": [{"name": "a", "cluster": {"server": "https://a:6443"}}],
            "users": [{"name": "a", "user": {"token": token}}],
        }
    )
    env = awx.inject_credential(CRED_TYPE, {"kubeconfig": own}, tmp_path)
    assert Path(env["K8S_AUTH_KUBECONFIG"]).read_text() == own


# ------------------------------------------------------------------ aap_configure.yml
PLAYBOOK = yaml.safe_load((ROOT / "playbooks" / "aap_configure.yml").read_text())[0]
LISTS = {  # module -> the list it applies
    "awx.awx.execution_environment": "controller_execution_environments",
    "awx.awx.credential_type": "controller_credential_types",
    "awx.awx.credential": "controller_credentials",
    "awx.awx.project": "controller_projects",
    "awx.awx.inventory": "controller_inventories",
    "awx.awx.inventory_source": "controller_inventory_sources",
    "awx.awx.job_template": "controller_templates",
    "awx.awx.workflow_job_template": "controller_workflows",
}


def _module_options(module: str) -> set[str]:
    out = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-doc"), "-j", module], check=True, capture_output=True, text=True
    ).stdout
    return set(json.loads(out)[module]["doc"]["options"])


def _tasks():
    return [t for t in PLAYBOOK["tasks"] if any(k.startswith("awx.awx.") for k in t)]


def test_configure_playbook_applies_every_list_with_options_awx_has():
    seen = set()
    for task in _tasks():
        module = next(k for k in task if k.startswith("awx.awx."))
        unknown = set(task[module]) - _module_options(module)
        assert not unknown, f"{task['name']}: {module} has no option(s) {unknown}"
        if module in LISTS:
            seen.add(LISTS[module])
            assert LISTS[module] in task["loop"]
    assert seen == set(LISTS.values())
    assert set(CONFIG) == set(LISTS.values()), "a list of aap/config is applied by no task"


def test_configure_playbook_drops_no_key_of_any_object():
    for task in _tasks():
        module = next(k for k in task if k.startswith("awx.awx."))
        if module not in LISTS:
            continue
        passed = set(re.findall(r"__aap_item\.(\w+)", json.dumps(task[module])))
        if module == "awx.awx.workflow_job_template":
            passed.add("simplified_workflow_nodes")  # the node tasks below apply them
        for obj in CONFIG[LISTS[module]]:
            dropped = set(obj) - passed
            assert not dropped, f"{task['name']}: {obj['name']} sets {dropped}, which the task never passes"
    node_tasks = [t for t in PLAYBOOK["tasks"] if "awx.awx.workflow_job_template_node" in t]
    passed = set().union(*(re.findall(r"__aap_item\.1\.(\w+)", json.dumps(t)) for t in node_tasks))
    for wf in CONFIG["controller_workflows"]:
        for node in wf["simplified_workflow_nodes"]:
            assert set(node) <= passed, (wf["name"], set(node) - passed)


def test_configure_playbook_logs_no_credential():
    cred_tasks = [t for t in _tasks() if "awx.awx.credential" in t]
    assert cred_tasks and all(t.get("no_log") is True for t in cred_tasks)


def test_every_site_inventory_has_an_aap_inventory_synced_from_the_project():
    sites = {p.name for p in (ROOT / "inventories").iterdir() if (p / "hosts.yml").exists()}
    assert {i["name"] for i in CONFIG["controller_inventories"]} == sites
    sources = {s["inventory"]: s for s in CONFIG["controller_inventory_sources"]}
    for site in sites:
        assert sources[site]["source_path"] == f"inventories/{site}" and sources[site]["source"] == "scm"
        assert sources[site]["source_project"] in {p["name"] for p in CONFIG["controller_projects"]}


def test_awx_collection_comes_from_the_ansible_wheel():
    manifest = ROOT / ".cache" / "collections" / "ansible_collections" / "awx" / "awx" / "MANIFEST.json"
    assert manifest.is_file(), "make setup (scripts/fetch_collections.py) did not extract awx.awx"
    version = json.loads(manifest.read_text())["collection_info"]["version"]
    assert tuple(int(x) for x in version.split(".")[:2]) >= (24, 0)


def test_defaults_of_playbook_variables_match_the_survey_defaults():
    # one default per variable: a survey default that differs from the playbook's is a second source
    for t in TEMPLATES.values():
        for q in (t.get("survey_spec") or {}).get("spec", []):
            where, fld = _field_for(t, q["variable"])
            if where.startswith("variable of") and q.get("default") is not None and fld.default is not MISSING:
                assert str(q["default"]).lower() == str(fld.default).lower(), (t["name"], q["variable"])


def test_the_models_question_takes_models_traffic_and_slos_as_yaml_text():
    """A textarea answer (a string) is what AAP sends; the site schema reads it as YAML and names the
    line of a syntax error."""
    template = TEMPLATES["inference-blueprints serving"]
    (question,) = [q for q in template["survey_spec"]["spec"] if q["variable"] == "models"]
    _, fld = _field_for(template, "models")
    answer = (
        "- name: qwen-chat\n  id: Qwen3.5-35B-A3B\n"
        "  slo: {ttft_p95_ms: 800, tpot_p95_ms: 40}\n  traffic: {concurrent_sessions: 2000}\n"
    )
    assert not awx.survey_errors(question, {"models": answer})
    v = Validator()
    models = v.run(answer, fld, "models")
    assert not v.errors and models[0]["slo"]["ttft_p95_ms"] == 800
    v = Validator()
    v.run("- name: qwen-chat\n  id: [Qwen", fld, "models")
    assert v.errors and v.errors[0][0] == "models" and "line 2" in v.errors[0][1], v.errors
