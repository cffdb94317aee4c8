"""Least privilege, the part that is built (docs/reliability.md, "Least privilege").

The serving stage run with rights over its one namespace only fails clearly when it is asked to do
cluster work: the chat site converges (as admin), then ``serving.yml`` runs as a ServiceAccount
whose only right is a Role granting every verb on every resource of the serving namespace (RBAC is
enforced by the local kube-apiserver). The run must fail before it writes anything, naming the verb
and the cluster-scoped resource it may not use, with no traceback.
"""

from __future__ import annotations

import contextlib
import re

import pytest

from tests.reliability import results
from tests.reliability.harness import (
    PLAYBOOKS,
    TRACEBACK,
    ansible_env,
    ansible_playbook,
    copy_inventory,
    delete_namespace,
    object_path,
    quiet_total,
)
from tests.reliability.test_faults import serving_namespace

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SITE = "example-chat"
ACCOUNT_NS, ACCOUNT = "rel-access", "serving-only"


def test_serving_stage_with_namespace_rights_names_the_missing_cluster_right(plane, tmp_path):
    inventory = copy_inventory(SITE, tmp_path)
    admin = ansible_env(plane.kubeconfig)
    extravars = [f"report_dir={tmp_path / 'reports'}"]
    ns = serving_namespace(inventory)
    # the test's own grant in the site's namespace: not the site's, so the teardown would keep the namespace
    # for it (issue 31); the test removes what it made first
    grants = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": ACCOUNT, "namespace": ns},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": ACCOUNT, "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ACCOUNT},
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": ACCOUNT_NS}],
        },
    ]
    try:
        converge = ansible_playbook(PLAYBOOKS / "site.yml", inventory, env=admin, extravars=extravars)
        assert converge.rc == 0, converge.output[-3000:]
        token = plane.service_account_token(ACCOUNT_NS, ACCOUNT)
        for obj in grants:
            plane.ensure(obj)
        limited = ansible_env(plane.token_kubeconfig(token, tmp_path / "namespace-only.kubeconfig"))
        before = quiet_total(plane.census)
        r = ansible_playbook(PLAYBOOKS / "serving.yml", inventory, env=limited, extravars=extravars)
        after = plane.census.total()
        err = r.error_text()
        said = re.search(r"may not (\w+) (\S+) at cluster scope", err)
        results.record(
            "access",
            "serving_namespace_only",
            {
                "rc": r.rc,
                "objects_written": after - before,
                "named": said.group(0) if said else "",
                "seconds": r.seconds,
            },
        )
        assert r.rc != 0, r.output[-3000:]
        assert said, f"the error names no cluster-scoped verb and resource:\n{err[:3000]}"
        assert said.group(2).endswith(".rbac.authorization.k8s.io"), said.group(0)
        assert "nothing was applied" in err, err[:3000]
        assert not TRACEBACK.search(r.output), r.output[-3000:]
        assert after == before, f"{after - before} objects written by the refused run"
    finally:
        for obj in reversed(grants):
            with contextlib.suppress(Exception):  # absent when the converge failed before the grant
                plane.call("DELETE", object_path(obj))
        teardown = ansible_playbook(PLAYBOOKS / "teardown.yml", inventory, env=admin)
        delete_namespace(plane.census.api, ACCOUNT_NS)
        assert teardown.rc == 0, teardown.output[-3000:]
