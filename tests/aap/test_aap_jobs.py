"""The converge workflow's job templates, run the way AAP runs them, on the local control plane.

tests/aap/awx.py does what the controller does for each job (project checkout, inventory import,
survey defaults and launch variables, command line, credential injection into the private data
directory) and hands it to ansible-runner. The example chat site converges that way: preflight,
plan, platform, serving and verify in workflow order, each checked on its events and artifacts;
a second serving job changes nothing; a failing preflight takes the workflow's failure path to
the plan report; and the credential's token (a real ServiceAccount token with cluster-admin, the
identity every job uses) appears in no artifact, event, extra variable, command line, rendered
tree or log, and its kubeconfig file is gone when the job is.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from controlplane.cluster import ControlPlane

from tests.aap import awx

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NAMESPACE = "llm-chat-aap"  # its own serving namespace: the shared control plane also runs test_serving
CREDENTIAL = "example-chat cluster"
CONVERGE = "inference-blueprints converge"


def _credential_inputs(cluster) -> tuple[dict, str]:
    """A cluster-admin ServiceAccount's token, server and CA: what a platform team stores in AAP."""
    kubeconfig = yaml.safe_load(Path(cluster.mint_sa_kubeconfig("aap-system", "aap-jobs")).read_text())
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "aap-jobs-cluster-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "aap-jobs", "namespace": "aap-system"}],
    }
    done = cluster.kubectl("apply", "-f", "-", input=json.dumps(binding))
    assert done.returncode == 0, done.stderr
    server = kubeconfig["clusters"][0]["cluster"]
    ca = server.get("certificate-authority-data")
    ca_pem = base64.b64decode(ca).decode() if ca else Path(server["certificate-authority"]).read_text()
    token = kubeconfig["users"][0]["user"]["token"]
    return {"host": server["server"], "bearer_token": token, "ca_cert": ca_pem, "verify_ssl": True}, token


class Jobs:
    """Every job of the module, their timings, and the secret checks done before each is removed."""

    def __init__(self, controller: awx.Controller, secret: str):
        self.controller, self.secret = controller, secret
        self.runs: list[tuple[str, float, awx.Job]] = []

    def launch(self, template: str, **kwargs) -> awx.Job:
        start = time.monotonic()
        job = self.controller.launch(template, **kwargs)
        self.runs.append((template, time.monotonic() - start, job))
        self.check_no_secret(job)
        return job

    def check_no_secret(self, job: awx.Job) -> None:
        pdd = job.private_data_dir
        # the injected kubeconfig is the one place the token may be (the controller deletes it)
        cred_files = {p for p in (pdd / "env").glob("tmp*") if self.secret in p.read_text(errors="replace")}
        expected = 1 if job.template.get("credentials") else 0  # plan reaches no cluster
        assert len(cred_files) == expected, f"job {job.job_id}: the token should be in the injected kubeconfig only"
        leaks = [
            str(p.relative_to(pdd))
            for p in pdd.rglob("*")
            if p.is_file() and p not in cred_files and self.secret in p.read_text(errors="replace")
        ]
        assert not leaks, f"job {job.job_id} ({job.template['name']}): the credential's token is in {leaks}"
        assert self.secret not in json.dumps(job.events, default=str), "the token is in a job event"
        assert self.secret not in json.dumps(job.extra_vars) + " ".join(job.cmdline) + job.stdout
        assert self.secret not in json.dumps(job.env), "the token is in the job's environment"
        assert (job.artifacts / "job_events").is_dir() and (job.artifacts / "stdout").is_file()
        job.cleanup()
        assert not any(p.exists() for p in cred_files), "the injected kubeconfig outlived its job"


@pytest.fixture(scope="module")
def aap_cluster():
    """A control plane of this module's own, stopped after it: the jobs converge the chat site's platform
    and serving there, and other packages' tests expect a session cluster without them."""
    cluster = ControlPlane("h100-8x2-rdma").start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def jobs(aap_cluster):
    cluster = aap_cluster
    inputs, token = _credential_inputs(cluster)
    # its own directory: pytest's basetemp rotation (other sessions on the machine) must not remove it
    workdir = Path(tempfile.mkdtemp(prefix="ib-aap-"))
    start = time.monotonic()
    controller = awx.Controller(workdir, credentials={CREDENTIAL: inputs})
    print(f"\nproject checkout + execution environment collections: {time.monotonic() - start:.1f} s")
    yield Jobs(controller, token)
    shutil.rmtree(workdir, ignore_errors=True)


def _applied(job: awx.Job) -> list[dict]:
    return [
        o
        for r in job.results()
        if r.get("resolved_action") == "inference.blueprints.k8s_apply"
        for o in r["res"].get("objects", [])
    ]


def _actions(job: awx.Job) -> set[str]:
    return {e.get("resolved_action") for e in job.results()}


def test_converge_workflow_runs_each_job_template_as_aap_does(jobs, tmp_path_factory):
    workdir = jobs.controller.workdir
    # no model server runs here to benchmark (the verify job would fail, rightly, on "nothing measured":
    # tests/slo/test_nothing_measured.py): the workflow answers the verify survey's question with false
    wf_vars = {"serving_namespace": NAMESPACE, "report_dir": str(workdir / "reports"), "verify_slo_require": "false"}
    launched: dict[str, awx.Job] = {}
    approvals = []

    def launch(node, wf):
        job = jobs.launch(node["unified_job_template"], workflow=wf, workflow_vars=wf_vars)
        launched[node["identifier"]] = job
        return job

    def approve(node):
        approvals.append(node["identifier"])
        return False  # nobody approves the canary here (its playbook is still being written)

    done = awx.run_workflow(jobs.controller, CONVERGE, approve=approve, launch=launch)
    stages = ["preflight", "plan", "platform", "serving", "verify"]
    failed = {i: launched[i].failure_messages() for i, o in done if o == "failed" and i in launched}
    assert done[:5] == [(s, "successful") for s in stages], failed or done
    assert approvals == ["approve-canary"] and done[5] == ("approve-canary", "failed")

    pre, plan, platform, serving, verify = (launched[s] for s in stages)
    for job in launched.values():
        assert job.rc == 0 and job.status == "successful"
        assert "chat-east-1" in (job.stats.get("ok") or {}), f"{job.template['name']} ran on no cluster"
        assert job.extra_vars["awx_job_template_name"] == job.template["name"]
    # preflight: platform.yml with its tag only: reads the cluster, writes nothing
    assert "-t" in pre.cmdline and pre.cmdline[pre.cmdline.index("-t") + 1] == "preflight"
    assert "inference.blueprints.cluster_facts" in _actions(pre)
    assert not _applied(pre) and pre.changed == 0
    # plan: the plan printed and the report written where the workflow said
    assert plan.changed == 0 and any("Sizing report" in str(r["res"].get("msg")) for r in plan.results())
    assert (workdir / "reports" / "report.md").is_file()
    # platform and serving applied through the credential's identity; serving created the namespace's objects
    assert _applied(platform) and {o["action"] for o in _applied(platform)} <= {"created", "configured", "unchanged"}
    created = [o for o in _applied(serving) if o["action"] == "created"]
    assert created and serving.changed > 0
    assert any(o.get("kind") == "LLMInferenceService" and o.get("namespace") == NAMESPACE for o in created), created[:5]
    # verify: everything the serving stage waits for is ready, nothing changed
    assert "inference.blueprints.k8s_wait" in _actions(verify) and verify.changed == 0
    assert verify.extra_vars["verify_timeout"] == 120  # the survey's default went in
    assert verify.extra_vars["verify_slo_require"] == "false"  # the workflow's answer, read by verify.yml as a bool

    again = jobs.launch("inference-blueprints serving", launch_vars=wf_vars)
    assert again.status == "successful" and again.changed == 0, [
        (r["task"], r["res"].get("msg")) for r in again.results() if r["res"].get("changed")
    ]
    for name, seconds, job in jobs.runs:
        print(f"{name}: {seconds:.1f} s, {job.changed} changed, {len(job.events)} events")


def test_apply_jobs_do_not_warn_about_unmatched_host_patterns(jobs):
    # issue 14: every converge warned "Could not match supplied host pattern" (then serving_one_pass)
    ran = [(name, job) for name, _s, job in jobs.runs if job.status == "successful"]
    assert ran, "the workflow test runs first"
    warned = [name for name, job in ran if "Could not match supplied host pattern" in job.stdout]
    assert not warned, f"jobs that warned: {sorted(set(warned))}"


def test_preflight_failure_takes_the_workflow_to_the_plan_report(jobs):
    # the cluster reports OpenShift 4.2x; a site that needs 9.0 fails in preflight, nothing applied
    wf_vars = {
        "serving_namespace": NAMESPACE,
        "preflight_openshift_min": "9.0",
        "report_dir": str(jobs.controller.workdir / "r2"),
    }
    launched = {}

    def launch(node, wf):
        launched[node["identifier"]] = job = jobs.launch(
            node["unified_job_template"], workflow=wf, workflow_vars=wf_vars
        )
        return job

    done = awx.run_workflow(jobs.controller, CONVERGE, approve=lambda n: False, launch=launch)
    assert done == [("preflight", "failed"), ("report", "successful")], done
    msg = launched["preflight"].failure_messages()
    assert "9.0" in msg, msg
    assert not _applied(launched["preflight"])


def test_render_job_writes_a_tree_without_the_secret(jobs):
    out = jobs.controller.workdir / "rendered"
    job = jobs.launch(
        "inference-blueprints serving", answers={"delivery": "render"}, launch_vars={"render_dir": str(out)}
    )
    assert job.status == "successful", job.failure_messages()
    files = [p for p in out.rglob("*.yaml")] + [p for p in out.rglob("*.yml")]
    assert files, "nothing rendered"
    assert not [p for p in files if jobs.secret in p.read_text()]


def test_converge_cli_exit_code_when_preflight_fails(jobs, aap_cluster, tmp_path):
    cluster = aap_cluster
    root = awx.ROOT
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "blueprints"),
            "converge",
            "--site",
            str(root / "inventories/example-chat"),
            "--stage",
            "platform",
            "-e",
            "preflight_openshift_min=9.0",
            "-e",
            f"serving_namespace={NAMESPACE}",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "K8S_AUTH_KUBECONFIG": str(cluster.kubeconfig)},
        check=False,
    )
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    summary = records[-1]
    assert summary["event"] == "summary" and summary["rc"] == 4
    failed = [s for s in summary["stages"] if s["status"] == "failed"]
    assert [s["stage"] for s in failed] == ["platform"] and "9.0" in failed[0]["msg"]
