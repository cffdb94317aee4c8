"""Least privilege, the derivation (module_utils/intent/access.py): every object each example site's
stages render, wait for and remove is covered by that stage's roles, by name and with exactly the
verbs our client uses; serving's namespaced rights are a Role in its namespace; nothing is a wildcard.

That these roles are enough on a real API server with RBAC enforced is
tests/reliability/test_teardown.py (every example converges and tears down as a ServiceAccount bound
to them); that every plural is the one the API server serves is tests/integration/test_access_rules.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils.intent import access
from ansible_collections.inference.blueprints.plugins.plugin_utils import platform as render_platform
from ansible_collections.inference.blueprints.plugins.plugin_utils.access import rendered_stages

ROOT = Path(__file__).resolve().parents[3]
INVENTORIES = ROOT / "inventories"
EXAMPLES = sorted(p.name for p in INVENTORIES.iterdir() if (p / "hosts.yml").exists())


def allows(roles: list[dict], group: str, resource: str, verb: str, name: str | None, namespace: str | None) -> bool:  # noqa: PLR0913, PLR0917 - one RBAC request
    """What the RBAC authorizer answers for one request, given these roles (no aggregation, no wildcards:
    the derived roles never use either)."""
    for role in roles:
        role_ns = role["metadata"].get("namespace")
        if role["kind"] == "Role" and role_ns != namespace:
            continue
        for rule in role["rules"]:
            if "nonResourceURLs" in rule:
                continue
            if group not in rule["apiGroups"] or resource not in rule["resources"] or verb not in rule["verbs"]:
                continue
            if rule.get("resourceNames") and name not in rule["resourceNames"]:
                continue
            return True
    return False


def site_roles():
    for site in EXAMPLES:
        for host, intent in cli.site_intents(str(INVENTORIES / site), None).items():
            rendered = rendered_stages(intent, access.STAGES)
            yield site, host, intent, rendered, access.access(intent, rendered)


@pytest.fixture(scope="module")
def every_site():
    return list(site_roles())


@pytest.mark.parametrize(
    ("kind", "plural"),
    [
        ("Gateway", "gateways"),
        ("ClusterPolicy", "clusterpolicies"),
        ("NodeFeatureDiscovery", "nodefeaturediscoveries"),
        ("IPPool", "ippools"),  # nv-ipam's CRD (not on the local plane: tests/integration/test_access_rules.py)
        ("LeaderWorkerSetOperator", "leaderworkersetoperators"),  # OpenShift's LWS operator (same)
        ("Namespace", "namespaces"),
        ("BackendTLSPolicy", "backendtlspolicies"),
        ("LLMInferenceService", "llminferenceservices"),
        ("ClusterServiceVersion", "clusterserviceversions"),
    ],
)
def test_plural(kind, plural):
    assert access.plural(kind) == plural


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("/api/v1/nodes", ("", "nodes", None, "list", None)),
        ("/api/v1/namespaces", ("", "namespaces", None, "list", None)),
        (
            "/api/v1/namespaces/openshift-monitoring/configmaps/cluster-monitoring-config",
            ("", "configmaps", "openshift-monitoring", "get", "cluster-monitoring-config"),
        ),
        (
            "/apis/config.openshift.io/v1/clusterversions/version",
            ("config.openshift.io", "clusterversions", None, "get", "version"),
        ),
    ],
)
def test_read_rule(path, rule):
    assert access.read_rule(path) == rule


def test_every_rendered_object_is_covered_by_its_stage_by_name_with_our_verbs(every_site):
    missing = []
    for site, host, _intent, rendered, roles in every_site:
        for stage, r in rendered.items():
            for obj in r["objects"]:
                meta = obj["metadata"]
                group, res = access.group_of(obj["apiVersion"]), access.plural(obj["kind"])
                for verb in ("get", "create", "patch", "delete"):
                    if not allows(roles[stage], group, res, verb, meta["name"], meta.get("namespace")):
                        missing.append(f"{site}/{host} {stage}: {verb} {res}.{group} {meta['name']}")
                # and not some other object of that kind (named rules), unless the cluster names them
                if (group, obj["kind"]) not in access.UNNAMED and allows(
                    roles[stage], group, res, "patch", "not-" + meta["name"], meta.get("namespace")
                ):
                    missing.append(f"{site}/{host} {stage}: patch {res}.{group} is not scoped by name")
            for w in r["waits"]:
                if not allows(roles[stage], access.group_of(w["apiVersion"]), access.plural(w["kind"]), "get",
                              w["name"], w.get("namespace")):  # fmt: skip
                    missing.append(f"{site}/{host} {stage}: wait on {w['kind']} {w['name']}")
    assert not missing, "\n".join(missing)


def test_teardown_may_read_and_delete_every_platform_object_it_removes(every_site):
    """roles/deploy/tasks/platform_absent.yml removes the operands and operators of every component the site's
    blueprint has (platform.available), deployed now or not (the network operator of a site whose traffic no
    longer crosses nodes): its roles must let it read and delete each of them, or the teardown stops half-way
    (seen with the RAG site, whose RDMA interconnect no longer installs the network operator)."""
    missing = []
    for site, host, intent, _rendered, roles in every_site:
        for phase in ("operands", "operators"):
            removed = render_platform.render_phase(intent, phase, intent["platform"]["available"], state="absent")
            for obj in removed["objects"]:
                meta = obj["metadata"]
                group, res = access.group_of(obj["apiVersion"]), access.plural(obj["kind"])
                for verb in ("get", "delete"):
                    if not allows(roles["platform"], group, res, verb, meta["name"], meta.get("namespace")):
                        missing.append(f"{site}/{host}: {verb} {res}.{group} {meta['name']}")
    assert not missing, "\n".join(missing)


def test_the_serving_roles_let_the_canary_replace_its_services_and_no_others(every_site):
    """canary.yml GETs and PUTs (update) each LLMInferenceService it rolls, and restores it the same way."""
    seen = 0
    for site, host, intent, _rendered, roles in every_site:
        ns = intent["serving"]["namespace"]
        for m in intent["serving"]["models"]:
            for verb in ("get", "update"):
                assert allows(roles["serving"], "serving.kserve.io", "llminferenceservices", verb, m["name"], ns), (
                    site, host, verb, m["name"],
                )  # fmt: skip
            assert not allows(roles["serving"], "serving.kserve.io", "llminferenceservices", "update", "x" + m["name"],
                              ns)  # fmt: skip
            assert not allows(roles["platform"], "serving.kserve.io", "llminferenceservices", "update", m["name"], ns)
            seen += 1
    assert seen >= 7


def test_serving_is_a_role_in_its_namespace_and_a_small_cluster_role(every_site):
    for site, host, intent, rendered, roles in every_site:
        ns = intent["serving"]["namespace"]
        serving = roles["serving"]
        role_namespaces = {r["metadata"]["namespace"] for r in serving if r["kind"] == "Role"}
        assert role_namespaces == {
            o["metadata"]["namespace"] for o in rendered["serving"]["objects"] if o["metadata"].get("namespace")
        }, (site, host)
        assert ns in role_namespaces, (site, host)
        cluster_roles = [r for r in serving if r["kind"] == "ClusterRole"]
        assert len(cluster_roles) == 1, (site, host)
        cluster_scoped = {
            (access.group_of(o["apiVersion"]), access.plural(o["kind"]))
            for o in rendered["serving"]["objects"]
            if not o["metadata"].get("namespace")
        }
        for rule in cluster_roles[0]["rules"]:
            if "resources" in rule:
                assert {(rule["apiGroups"][0], r) for r in rule["resources"]} <= cluster_scoped, (site, host, rule)
        # the platform is one ClusterRole, and a Role in each namespace it creates (the teardown's list right there)
        platform = roles["platform"]
        assert [r["kind"] for r in platform if r["kind"] == "ClusterRole"] == ["ClusterRole"], (site, host)
        created = {o["metadata"]["name"] for o in rendered["platform"]["objects"] if o["kind"] == "Namespace"}
        assert {r["metadata"]["namespace"] for r in platform if r["kind"] == "Role"} == created, (site, host)
        for role in (r for r in platform if r["kind"] == "Role"):
            assert role["rules"] == [access.NAMESPACE_LIST_RULE], role


def test_no_wildcards_and_writes_are_named_except_the_csvs_olm_names(every_site):
    for site, host, _intent, _rendered, roles in every_site:
        for stage, objs in roles.items():
            for role in objs:
                for rule in role["rules"]:
                    if role["kind"] == "Role" and rule == access.NAMESPACE_LIST_RULE:
                        continue  # the one wildcard: list what is in a namespace the stage creates (teardown)
                    for key in ("apiGroups", "resources", "verbs", "nonResourceURLs"):
                        assert "*" not in rule.get(key, []), (site, host, stage, rule)
                    writes = set(rule["verbs"]) & {"create", "patch", "update", "delete"}
                    if writes and "resources" in rule and not rule.get("resourceNames"):
                        assert rule["resources"] == ["clusterserviceversions"], (site, host, stage, rule)
                        assert writes == {"delete"}, rule


def test_a_rendered_role_s_rights_are_held_by_the_stage_that_creates_it(every_site):
    """RBAC escalation prevention: creating a role needs its rights (or escalate); binding one needs
    its rights (or bind)."""
    for site, host, _intent, rendered, roles in every_site:
        for stage, r in rendered.items():
            for obj in r["objects"]:
                if obj["kind"] not in ("Role", "ClusterRole"):
                    continue
                for rule in obj["rules"]:
                    if "nonResourceURLs" in rule:
                        held = [
                            x
                            for role in roles[stage]
                            for x in role["rules"]
                            if set(rule["nonResourceURLs"]) <= set(x.get("nonResourceURLs", []))
                            and set(rule["verbs"]) <= set(x["verbs"])
                        ]
                        assert held, (site, host, obj["metadata"]["name"], rule)
                        continue
                    for group in rule["apiGroups"]:
                        for res in rule["resources"]:
                            for verb in rule["verbs"]:
                                assert allows(roles[stage], group, res, verb, None, obj["metadata"].get("namespace")), (
                                    site,
                                    host,
                                    obj["metadata"]["name"],
                                    group,
                                    res,
                                    verb,
                                )


def test_the_platform_may_make_the_cluster_read(every_site):
    from ansible_collections.inference.blueprints.plugins.module_utils import cluster_facts

    for site, host, intent, _rendered, roles in every_site:
        packages = intent["platform"]["preflight"]["packages"]
        for path in cluster_facts.independent_reads(access.READ_GROUPS, packages):
            group, res, ns, verb, name = access.read_rule(path)
            assert allows(roles["platform"], group, res, verb, name, ns), (site, host, path)


def test_bindings_and_subjects():
    roles = {
        "platform": [{"kind": "ClusterRole", "metadata": {"name": "p"}, "rules": []}],
        "serving": [{"kind": "Role", "metadata": {"name": "s", "namespace": "llm"}, "rules": []}],
    }
    subject = access.subject_of("ServiceAccount", "deployer", "ci")
    binds = access.bindings(roles, subject)
    assert [(b["kind"], b["metadata"].get("namespace"), b["roleRef"]["name"]) for b in binds] == [
        ("ClusterRoleBinding", None, "p"),
        ("RoleBinding", "llm", "s"),
    ]
    assert binds[0]["subjects"] == [{"kind": "ServiceAccount", "name": "deployer", "namespace": "ci"}]
    assert access.subject_of("Group", "platform-team")["apiGroup"] == "rbac.authorization.k8s.io"
    with pytest.raises(ValueError, match=r"access_subject.namespace"):
        access.subject_of("ServiceAccount", "deployer")
    with pytest.raises(ValueError, match=r"access_subject.kind: 'Robot' .* valid: ServiceAccount, User, Group"):
        access.subject_of("Robot", "r2")


def test_the_serving_namespace_is_created_with_the_access_objects(every_site):
    for site, host, intent, rendered, roles in every_site:
        nss = access.namespaces_needed(roles, rendered)
        assert intent["serving"]["namespace"] in [n["metadata"]["name"] for n in nss], (site, host)
        # the stage's own Namespace object, labels and all: the stage's apply then changes nothing
        assert all(n in rendered["serving"]["objects"] + rendered["platform"]["objects"] for n in nss), (site, host)
