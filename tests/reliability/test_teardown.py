"""Least privilege and teardown (docs/reliability.md, "Least privilege" and "Teardown").

Every example site converges as a ServiceAccount bound to exactly the roles ``playbooks/access.yml``
derives for it (RBAC enforced by the local kube-apiserver), then ``teardown.yml`` removes it as the
same ServiceAccount: afterwards no object anywhere carries the collection's managed-by label, the API
server holds exactly the objects it held before the converge once the cluster-wide access objects
are removed (kube-controller-manager's garbage collector runs: what KServe's controller made from
our services goes with them), no object names a deleted owner, and a second teardown changes nothing.
"""

from __future__ import annotations

import json
import re

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils.intent.burst_exposure import ENVOY_GATEWAY_NAMESPACE

from tests.reliability import results
from tests.reliability.harness import (
    LABEL_MANAGED_BY,
    PLAYBOOKS,
    ROOT,
    ansible_env,
    ansible_playbook,
    copy_inventory,
    object_path,
    quiet_total,
    remove_staged_volumes,
    stage_artifacts,
    unstage_claims,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

# (site, cluster): a site's clusters converge together on the package's one plane, except the two
# clusters of the sovereign burst, which would collide on it (both hold llm-sovereign objects of the
# same names with different contents): each of those converges and is torn down on its own (--limit)
#
# make test tears down the chat site (P/D pools, KEDA), the AI grid (the most kinds and tenants) and both sovereign
# clusters; rag, batch and the edge fleet (three sites on one cluster) carry the marker heavy (make pytest-heavy): their
# kinds are among those, and the three converges with their teardowns were 515 of the reliability session's 2703 s in
# an emulation of CI on 2026-12-01 (2 cores, make test 65 minutes, over its 60-minute budget)
_HEAVY = pytest.mark.heavy
SITES = [
    pytest.param("example-chat", None, id="example-chat"),
    pytest.param("example-rag", None, id="example-rag", marks=_HEAVY),
    pytest.param("example-batch", None, id="example-batch", marks=_HEAVY),
    pytest.param("example-edge-fleet", None, id="example-edge-fleet", marks=_HEAVY),
    pytest.param("example-ai-grid", None, id="example-ai-grid"),
    pytest.param("example-sovereign-burst", "onprem-fra-1", id="example-sovereign-burst-onprem-fra-1"),
    pytest.param("example-sovereign-burst", "burst-aws-1", id="example-sovereign-burst-burst-aws-1"),
]
# The package's control plane (profile l40s-decode-mix) lacks these sites' GPUs; their preflight
# hardware check is relaxed (preflight_fail_on_unmet=false). What is applied is the same.
RELAXED = {
    "example-ai-grid": "20 H100 on 4-GPU nodes (the profile has 16 on two 8-GPU nodes)",
    "example-edge-fleet": "an RTX PRO 6000 per site",
}
# The edge fleet's three sites converge together on the one plane: their inventory says they share it
# (same_cluster_as on each), else preflight stops them, naming the hosts, as it would on a real cluster
SHARED = {"example-edge-fleet": ["store-berlin-001", "clinic-lyon-002", "branch-austin-003"]}


# The drift check (a label of the first LLMInferenceService taken by another field manager, drift_fix as the deployer)
# exercises the same kind and the same apply verbs on every site; it runs on the site with the most kinds and on a
# --limit'ed cluster of a two-cluster site, sparing make test's reliability session ten playbook runs (about five
# minutes in an emulation of CI). tests/integration/test_drift.py covers what drift.yml reports and takes back.
DRIFT = {("example-ai-grid", None), ("example-sovereign-burst", "onprem-fra-1")}

# the identity every site converges and tears down as: a ServiceAccount with no rights but the roles
# access.yml binds to it (and what every authenticated subject may do: discovery, self reviews)
DEPLOYER_NS, DEPLOYER = "rel-deployer", "deployer"
PART_OF = "app.kubernetes.io/part-of"
LABEL_ACCESS = "app.kubernetes.io/managed-by=inference-blueprints-access"
KINDS = {
    "clusterroles": "ClusterRole",
    "clusterrolebindings": "ClusterRoleBinding",
    "roles": "Role",
    "rolebindings": "RoleBinding",
}


def site_extravars(site: str, tmp_path) -> list[str]:
    out = [f"report_dir={tmp_path / 'reports'}"]
    if site in RELAXED:
        out.append("preflight_fail_on_unmet=false")
    return out


def drift_a_service(plane, inventory, cluster: str | None) -> tuple[str, str, str]:
    """Someone else (another field manager) takes over a label of the site's first LLMInferenceService: the
    drift ``drift.yml -e drift_fix=true`` must take back as the deployer. Returns the object's path, the label's
    value the site sets and what was changed."""
    from ansible_collections.inference.blueprints.plugins.module_utils import cli

    intents = cli.site_intents(str(inventory), str(ROOT / "blueprints"))  # the copy has no blueprints next to it
    intent = intents[cluster or sorted(intents)[0]]
    ns, name = intent["serving"]["namespace"], intent["serving"]["models"][0]["name"]
    path = f"/apis/serving.kserve.io/v1alpha2/namespaces/{ns}/llminferenceservices/{name}"
    plane.call("PATCH", path + "?fieldManager=someone-else", {"metadata": {"labels": {PART_OF: "drifted"}}},
               content_type="application/merge-patch+json")  # fmt: skip
    return path, intent["labels"][PART_OF], f"LLMInferenceService {ns}/{name} label {PART_OF}"


def changed_count(output: str) -> int:
    return sum(int(n) for n in re.findall(r"^\S+\s+:\s+ok=\d+\s+changed=(\d+)", output, re.M))


def dangling_owners(objects: list[dict]) -> list[str]:
    """Objects whose ownerReferences name an object that no longer exists (orphans)."""
    uids = {(o.get("metadata") or {}).get("uid") for o in objects}
    out = []
    for o in objects:
        meta = o.get("metadata") or {}
        for ref in meta.get("ownerReferences") or []:
            if ref.get("uid") not in uids:
                out.append(f"{o.get('kind')} {meta.get('namespace', '')}/{meta.get('name')} -> {ref.get('kind')}")
    return out


def grant(plane, inventory, admin: dict, tmp_path, limit: list[str]) -> tuple[dict, list[str]]:
    """Create the site's access roles bound to the deployer (as admin); the deployer's environment
    and the roles' lines as access.yml printed them."""
    token = plane.service_account_token(DEPLOYER_NS, DEPLOYER)
    subject = {"kind": "ServiceAccount", "name": DEPLOYER, "namespace": DEPLOYER_NS}
    r = ansible_playbook(
        PLAYBOOKS / "access.yml",
        inventory,
        env=admin,
        extravars=[f"report_dir={tmp_path / 'reports'}", "access_apply=true", json.dumps({"access_subject": subject})],
        args=limit,
    )
    assert r.rc == 0, r.output[-3000:]
    return ansible_env(plane.token_kubeconfig(token, tmp_path / "deployer.kubeconfig")), re.findall(
        r"(?:platform|serving): (?:Cluster)?Role \S+", r.output
    )


def _drift_fixed_as_the_deployer(plane, inventory, cluster, *, env, extra, limit) -> None:  # noqa: PLR0913
    path, value, drifted = drift_a_service(plane, inventory, cluster)
    fixed = ansible_playbook(PLAYBOOKS / "drift.yml", inventory, env=env, extravars=[*extra, "drift_fix=true"],
                             args=limit)  # fmt: skip
    assert fixed.rc == 0, f"drift_fix as the deployer ({drifted}):\n" + fixed.error_text()[:3000]
    assert plane.call("GET", path)["metadata"]["labels"][PART_OF] == value, f"not taken back: {drifted}"
    clean = ansible_playbook(PLAYBOOKS / "drift.yml", inventory, env=env, extravars=extra, args=limit)
    assert clean.rc == 0, f"drift left after drift_fix ({drifted}):\n" + clean.error_text()[:3000]


def remove_access(plane) -> list[str]:
    """Delete the access objects left (after a teardown, the cluster-wide ones: the namespaced ones
    went with their namespace)."""
    left = plane.census.objects(LABEL_ACCESS)
    for obj in left:
        kind = KINDS.get(obj["kind"], obj["kind"])
        ref = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": obj["metadata"]}
        plane.call("DELETE", object_path(ref))
    return sorted(f"{o['kind']} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in left)


@pytest.mark.parametrize(("site", "cluster"), SITES)
def test_a_site_converges_with_its_access_roles_and_its_teardown_leaves_nothing(site, cluster, plane, tmp_path):  # noqa: PLR0915
    census = plane.census
    limit = ["--limit", cluster] if cluster else []
    inventory = copy_inventory(site, tmp_path)
    if site in SHARED:
        (inventory / "group_vars/all/same_cluster.yml").write_text(f"same_cluster_as: {json.dumps(SHARED[site])}\n")
    admin = ansible_env(plane.kubeconfig)
    # the package's plane is shared: what earlier tests converged of this site goes first, so that
    # "before" counts nothing the teardown under test would also remove
    cleared = ansible_playbook(PLAYBOOKS / "teardown.yml", inventory, env=admin, args=limit)
    assert cleared.rc == 0, cleared.output[-3000:]
    remove_access(plane)
    plane.service_account_token(DEPLOYER_NS, DEPLOYER)
    staged: list[str] = []
    try:
        before = quiet_total(census)
        env, roles = grant(plane, inventory, admin, tmp_path, limit)
        assert any(r.startswith("platform: ClusterRole") for r in roles), roles
        assert any(r.startswith("serving: Role") for r in roles), roles
        staged += stage_artifacts(plane, inventory, cluster)  # its pvc:// weights (the namespace goes at teardown)
        converge = ansible_playbook(
            PLAYBOOKS / "site.yml", inventory, env=env, extravars=site_extravars(site, tmp_path), args=limit
        )
        assert converge.rc == 0, (
            f"{site} does not converge with only its access roles:\n" + converge.error_text()[:4000]
        )
        converged = census.total()
        labelled_after_converge = len(census.objects(LABEL_MANAGED_BY))
        assert labelled_after_converge > 0

        if (site, cluster) in DRIFT:  # drift taken back by the deployer: no right beyond its roles' apply verbs
            _drift_fixed_as_the_deployer(
                plane, inventory, cluster, env=env, extra=site_extravars(site, tmp_path), limit=limit
            )

        # the staged claims are the storage team's, not the site's: a teardown keeps a namespace that holds them
        # (issue 31), so the test takes back what it staged before it checks that nothing is left
        unstage_claims(plane, staged)
        first = ansible_playbook(PLAYBOOKS / "teardown.yml", inventory, env=env, args=limit)
        assert first.rc == 0, first.error_text()[:3000]
        labelled = census.objects(LABEL_MANAGED_BY)
        orphans = dangling_owners(census.objects(""))

        second = ansible_playbook(PLAYBOOKS / "teardown.yml", inventory, env=env, args=limit)
        assert second.rc == 0, second.output[-3000:]
        access_left = remove_access(plane)
        remove_staged_volumes(plane, staged)
        after = quiet_total(census, expect=before)
    except BaseException:
        # a failed site leaves nothing that would change the next site's counts
        ansible_playbook(PLAYBOOKS / "teardown.yml", inventory, env=admin, args=limit)
        remove_access(plane)
        remove_staged_volumes(plane, staged)
        raise
    results.record(
        "teardown",
        f"{site}/{cluster}" if cluster else site,
        {
            "objects_before": before,
            "objects_converged": converged,
            "labelled_converged": labelled_after_converge,
            "objects_after_teardown": after,
            "labelled_left": len(labelled),
            "orphans": len(orphans),
            "second_changed": changed_count(second.output),
            "access_roles": roles,
            "seconds": {
                "converge": round(converge.seconds, 1),
                "teardown": round(first.seconds, 1),
                "second": round(second.seconds, 1),
            },
        },
    )
    left = [f"{o.get('kind')} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in labelled]
    said = [line.strip()[:600] for line in first.output.splitlines() if "kept" in line or "keeps" in line]
    assert not left, f"objects with {LABEL_MANAGED_BY} after teardown: {left}; the teardown said: {said[:20]}"
    assert not orphans, f"objects whose owner is gone: {orphans}"
    # access.yml's objects outlive the teardown where their namespace does: the cluster-wide roles and bindings,
    # and the serving Role in Envoy Gateway's namespace, which is the platform's (the burst Route, the front doors'
    # certificate ReferenceGrants live there); the serving Role of the site's own namespace went with it
    kept = [a for a in access_left if a.split()[0] not in ("clusterroles", "clusterrolebindings")]
    assert all(a.split()[1].startswith(f"{ENVOY_GATEWAY_NAMESPACE}/") for a in kept), access_left
    assert after == before, f"{converged - before} objects created, {converged - after} removed: {after - before} left"
    assert changed_count(second.output) == 0, "the second teardown changed something:\n" + second.output[-3000:]
