"""Issue 24's acceptance: every example site converged where its pods are real, held to its plan.

Each example converges (``site.yml``) on control planes of its own, one per cluster host, of the profile
its hardware matches (``serving_helpers.EXAMPLES``): kube-scheduler binds the pods that KServe's
controller and the LeaderWorkerSet controller create, kwok runs them on the profile's nodes. The checks
of ``tests/placement_checks.py`` then read the pods back against the site's plan; one test per check and
example, so a failure names both. A plane lives as long as its example's tests (module-scoped, one
example after the other: at most three planes at once, the edge fleet's). What the site's storage team
stages before a converge, the volumes of ``pvc://`` model artifacts, is staged first
(``controlplane/artifacts.py``).

The readiness wait is shortened (``model_service_wait_timeout``): a pod that cannot be placed stays
Pending for ever, and the placement tests say why; the converge test then fails on its wait.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from controlplane import artifacts
from controlplane.cluster import ControlPlane, merged_kubeconfig

from tests import placement_checks
from tests.ansible_run import Run, run_playbook
from tests.serving_helpers import EXAMPLES, INVENTORIES, PLAYBOOKS

# heavy (make pytest-heavy): nine planes of its own, a quarter of the integration session's time in stop 43's CI; make
# test runs the same checks on molecule's converge of each example (molecule/shared/tasks/read_serving.yml)
pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.heavy]

WAIT_SECONDS = 240  # the pods of a placeable site are Running within seconds here


@dataclass
class Site:
    name: str
    planes: dict[str, ControlPlane]
    intents: dict[str, dict]
    run: Run

    def problems(self, check: str) -> list[str]:
        out = []
        for host, intent in self.intents.items():
            snap = placement_checks.Snapshot.read(self.planes[host].new_api_client())
            out += [f"{host}: {p}" for p in placement_checks.check(snap, intent, (check,))[check]]
        return out


def multi_cluster_inventory(site: str, hosts: list[str], dest: Path) -> Path:
    """The example's inventory with each host on the kubeconfig context of its own name (its plane)."""
    src = INVENTORIES / site
    dest.mkdir(parents=True)
    for part in ("group_vars", "host_vars"):
        if (src / part).exists():
            (dest / part).symlink_to(src / part)
    doc = yaml.safe_load((src / "hosts.yml").read_text())

    def walk(group: dict) -> None:
        for host, values in (group.get("hosts") or {}).items():
            group["hosts"][host] = (values or {}) | {"k8s_context": host}
        for child in (group.get("children") or {}).values():
            walk(child or {})

    walk(doc["all"])
    assert all(f"k8s_context: {h}" in yaml.safe_dump(doc) for h in hosts), hosts
    (dest / "hosts.yml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return dest


@pytest.fixture(scope="module", params=sorted(EXAMPLES))
def site(request, tmp_path_factory) -> Site:
    name = request.param
    tmp = tmp_path_factory.mktemp(name)
    intents = {str(h): i for h, i in cli.site_intents(str(INVENTORIES / name), None).items()}
    planes: dict[str, ControlPlane] = {}
    try:
        for host in sorted(intents):
            planes[host] = ControlPlane(EXAMPLES[name]).start()
            artifacts.stage(planes[host].new_api_client(), intents[host])  # the site's pvc:// weights
        if len(planes) == 1:
            inventory, kubeconfig = INVENTORIES / name, next(iter(planes.values())).kubeconfig
        else:
            inventory = multi_cluster_inventory(name, sorted(planes), tmp / "inventory")
            kubeconfig = merged_kubeconfig(planes, tmp / "kubeconfig")
        run = run_playbook(
            PLAYBOOKS / "site.yml",
            inventory,
            kubeconfig=kubeconfig,
            extravars={
                "report_dir": str(tmp / "reports"),
                "model_service_wait_timeout": WAIT_SECONDS,
                "adopt": artifacts.adopted(intents.values()),  # the staged weights' namespace exists already
            },
        )
        yield Site(name, planes, intents, run)
    finally:
        for cp in planes.values():
            cp.stop()


def _assert_none(site: Site, check: str, what: str) -> None:
    problems = site.problems(check)
    assert not problems, f"{site.name}: {what}:\n" + "\n".join(problems)


def test_example_converges_with_real_pods(site):
    assert site.run.rc == 0, site.run.failure_messages() or site.run.stdout[-4000:]


def test_no_pod_pending_and_no_failed_scheduling(site):
    _assert_none(site, "scheduling", "pods the scheduler could not place")


def test_serving_pods_bound_by_the_scheduler_to_the_planned_gpu(site):
    _assert_none(site, "binding", "serving pods not bound by kube-scheduler to a node of the planned GPU")


def test_serving_pods_request_the_planned_gpus(site):
    _assert_none(site, "gpus", "GPUs requested against the plan's")


def test_every_rank_requests_its_gpus_and_runs_the_same_engine_arguments(site):
    _assert_none(site, "ranks", "engine ranks")


def test_pods_whose_plan_crosses_nodes_use_rdma(site):
    _assert_none(site, "rdma", "traffic between nodes without RDMA")


def test_network_operator_only_where_a_pod_uses_rdma(site):
    _assert_none(site, "network_operator", "an RDMA network operator nothing uses")


def test_every_serving_pod_admitted_by_openshift_scc_admission(site):
    _assert_none(site, "scc", "serving pods not admitted by OpenShift's SCC admission")
