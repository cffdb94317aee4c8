"""The collection alone, as a user gets it from Galaxy, Automation Hub or an execution environment (issue 23):
the tarball installed into an empty collections path, no clone, no project ansible.cfg, Ansible told not to look
for collections on sys.path (where the project's editable install is), an example inventory copied elsewhere:
``ansible-playbook inference.blueprints.site`` converges it with the playbooks and blueprint data the collection
ships, and ``inference.blueprints.teardown`` removes it."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.collection.conftest import BIN, ROOT
from tests.serving_helpers import EXAMPLES

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def _run(args, env, cwd, timeout=1200):
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, check=False, timeout=timeout)


def test_installed_tarball_converges_an_example_without_a_clone(tarball, cluster_factory, tmp_path):
    cluster = cluster_factory(EXAMPLES["example-chat"])
    work = tmp_path / "elsewhere"
    work.mkdir()
    collections = tmp_path / "collections"
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")  # nothing of the project's configuration
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ANSIBLE_") and k not in ("K8S_AUTH_KUBECONFIG", "KUBECONFIG")
    }
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=str(collections),
        ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
        K8S_AUTH_KUBECONFIG=cluster.kubeconfig,
    )
    install = _run(
        [BIN / "ansible-galaxy", "collection", "install", str(tarball), "-p", str(collections), "--no-deps"], env, work
    )
    assert install.returncode == 0, install.stdout + install.stderr
    # the module Ansible finds is the installed one, not the clone's
    doc = _run([BIN / "ansible-doc", "-t", "module", "inference.blueprints.k8s_apply"], env, work)
    assert doc.returncode == 0 and str(collections) in doc.stdout and str(ROOT) not in doc.stdout, doc.stdout[:600]

    site = work / "my-site"
    shutil.copytree(ROOT / "inventories" / "example-chat", site)
    converge = _run(
        [
            BIN / "ansible-playbook",
            "-i",
            str(site),
            "inference.blueprints.site",
            "-e",
            f"report_dir={work / 'reports'}",
        ],
        env,
        work,
    )
    assert converge.returncode == 0, converge.stdout[-5000:] + converge.stderr[-2000:]
    assert "failed=0" in converge.stdout
    # the blueprint came from the installed collection (no blueprints/ directory near the copy or the cwd)
    assert (
        not (work / "blueprints").exists()
        and (collections / "ansible_collections/inference/blueprints/blueprints/chat.yml").is_file()
    )
    teardown = _run([BIN / "ansible-playbook", "-i", str(site), "inference.blueprints.teardown"], env, work)
    assert teardown.returncode == 0, teardown.stdout[-5000:] + teardown.stderr[-2000:]
