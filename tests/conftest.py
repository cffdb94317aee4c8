"""Session fixtures for tests that need the local control plane.

Fixtures
--------
``cluster`` (module; the instance is the session's)
    A running control plane of site profile ``h100-8x2-rdma``: kube-apiserver, the workload
    controllers, kube-scheduler, kwok running the profile's nodes, the LeaderWorkerSet and KServe
    controllers, and the status simulator for the rest. Pods are real API objects: a test that
    deploys GPU workloads on this shared plane deletes them when it is done (the GPUs are few).
    It is a :class:`controlplane.cluster.ControlPlane`:

    * ``cluster.kubeconfig``: path of the admin kubeconfig (``system:masters``);
      ``cluster.server``: ``https://127.0.0.1:<port>``.
    * ``cluster.api_client``: ``kubernetes.client.ApiClient``; ``cluster.dynamic``:
      ``kubernetes.dynamic.DynamicClient``; ``cluster.new_api_client(kubeconfig)``.
    * ``cluster.profile``: the site profile dict (``tests/controlplane/profiles/*.yaml``).
    * ``cluster.kubectl(*args, kubeconfig=None, input=None)``: runs kubectl of the same
      Kubernetes version, returns ``subprocess.CompletedProcess`` (never raises on exit code).
    * ``cluster.mint_sa_kubeconfig(namespace, name)``: creates the ServiceAccount if needed
      and returns the path of a kubeconfig using its token (no rights unless bound: RBAC).
    * ``cluster.set_never_ready(kind, name, namespace=None)`` / ``cluster.clear_never_ready()``:
      the simulator never makes that object ready (timeouts and their messages), for the kinds
      it plays. Stored in ConfigMap ``sim-system/sim-config``, so ansible runs see it too.
    * ``with cluster.hold_scheduling():`` every node cordoned for the block: pods created meanwhile
      stay Pending (a workload held back the way a cluster holds one).
    * ``cluster.pod_network.cidr``: the loopback /16 the instance's pod IPs come from.
    * ``cluster.set_sim_delay(seconds)``: simulator delay (default 0.2 s).
    * ``cluster.set_openshift_version("4.21.9")``: what ClusterVersion reports.

    The cluster is shared by the whole session: use your own namespaces, and call
    ``clear_never_ready()`` when you set entries.

``cluster_factory(profile="h100-8x2-rdma", name=None, kserve=None, kserve_flavor=None)`` (session)
    Starts (once per ``name or profile``) and returns another instance, e.g.
    ``cluster_factory("sno-rtx-pro-6000")`` or two of one profile for multi-cluster
    blueprints: ``cluster_factory("h100-8x2-rdma", name="burst")``. All are stopped at the
    end of the session, or by ``cluster_factory.release(name)`` when a module is done with
    its own, and when the session leaves a test directory (``pytest_runtest_teardown`` below): every
    instance but the ``cluster`` one, and that one too when no test left requests a plane. A
    fixture of a later directory asking for the same name starts it again. So hold an instance in
    fixtures of module or package scope, never in a session fixture or a module global.
    ``cluster_factory("h100-8x2-rdma")`` is the ``cluster`` fixture.
    ``kserve=True`` runs the real KServe LLMInferenceService controller in that instance
    (``cluster.kserve``; the simulator then leaves LLMInferenceService status to KServe);
    ``None`` follows the ``KCP_KSERVE`` environment variable (off unless set to 1).
    ``kserve_flavor="rhoai"`` runs OpenShift AI 3.5's build, ``"upstream"`` KServe v0.20.0; None the default
    (``KCP_KSERVE_FLAVOR``, else ``DEFAULT_FLAVOR`` of tests/controlplane/kserve_controller.py).

If the control plane binary is missing or does not start, these fixtures raise
``ControlPlaneError``: the tests fail, they never skip. ``make pytest`` builds it first.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

# The CLI and several tests import plugin_utils modules lazily (module_utils may not import plugin_utils at import
# time). In one pytest process a test that initialises Ansible's plugin loader installs its collection finder,
# which then refuses to import a module of the (pip-installed) collection that was not imported before it ("this
# loader requires exactly one path to search"): import them all first, whatever order the tests run in.
from ansible_collections.inference.blueprints.plugins import plugin_utils as _plugin_utils  # noqa: E402
from controlplane import cluster as _cluster  # noqa: E402
from controlplane.cluster import DEFAULT_PROFILE, ControlPlane  # noqa: E402

for _mod in pkgutil.walk_packages(_plugin_utils.__path__, _plugin_utils.__name__ + "."):
    importlib.import_module(_mod.name)

_DEATHS_SEEN = pytest.StashKey[int]()
_FILE_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """Seconds per test file (setup, call and teardown), for the summary below."""
    path = report.nodeid.split("::", 1)[0]
    _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    """Where a session's time goes, file by file: make test's budget is decided by these figures (the slowest
    single tests alone do not show a file of many medium ones)."""
    if not _FILE_SECONDS:
        return
    total = sum(_FILE_SECONDS.values())
    terminalreporter.section(f"seconds per test file ({total:.0f} s in tests)")
    for path, seconds in sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1])[:40]:
        terminalreporter.write_line(f"{seconds:8.1f} s  {100 * seconds / total:5.1f} %  {path}")
    if _cluster.STARTS:
        by_file: dict[str, list[float]] = {}
        for where, _profile, seconds in _cluster.STARTS:
            by_file.setdefault(where, []).append(seconds)
        terminalreporter.section(f"control planes started: {len(_cluster.STARTS)} (this process)")
        for where, secs in sorted(by_file.items(), key=lambda kv: -len(kv[1])):
            terminalreporter.write_line(f"{len(secs):4d} started, {sum(secs):7.1f} s to ready  {where}")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_DEATHS_SEEN] = len(_cluster.DEATHS)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that fails while a control plane it used had died says so first: a dropped connection
    ("Remote end closed connection") alone does not tell a crashed kube-apiserver from a refused request."""
    seen = item.stash.get(_DEATHS_SEEN, len(_cluster.DEATHS))
    outcome = yield
    report = outcome.get_result()
    deaths = _cluster.dead_since(seen)
    if report.failed and deaths:
        report.sections.append(("control planes that died", "\n\n".join(deaths)))
        crash = getattr(report.longrepr, "reprcrash", None)
        if crash is not None:
            crash.message = deaths[0].splitlines()[0] + " | " + crash.message


@pytest.fixture(scope="session")
def cluster_factory():
    instances: dict[str, ControlPlane] = {}

    def factory(  # noqa: PLR0913 - one option per part of a plane
        profile: str = DEFAULT_PROFILE,
        name: str | None = None,
        *,
        kserve: bool | None = None,
        kserve_flavor: str | None = None,
        scc: bool | None = None,
        hpa: bool = False,
    ) -> ControlPlane:
        key = name or profile
        cp = instances.get(key)
        if cp is None:
            cp = ControlPlane(profile, kserve=kserve, kserve_flavor=kserve_flavor, scc=scc, hpa=hpa)
            instances[key] = cp.start()
        elif cp.profile_name != profile:
            raise ValueError(f"instance {key!r} already runs profile {cp.profile_name!r}")
        elif kserve is not None and cp.kserve_enabled != kserve:
            raise ValueError(f"instance {key!r} already runs with kserve={cp.kserve_enabled}")
        elif kserve_flavor is not None and cp.kserve_flavor != kserve_flavor:
            raise ValueError(f"instance {key!r} already runs KServe flavor {cp.kserve_flavor!r}")
        elif scc is not None and cp.scc_enabled != scc:
            raise ValueError(f"instance {key!r} already runs with scc={cp.scc_enabled}")
        return cp

    def release(key: str) -> None:
        """Stop the instance ``key`` (a name, or a profile) now: one that a single module or package uses
        (an idle plane's kube-apiserver, controllers and node agent cost a few per cent of a core for the rest
        of the session, about as much in all as starting it once more)."""
        cp = instances.pop(key, None)
        if cp is not None:
            cp.stop()

    def release_all(keep: tuple[str, ...] = ()) -> None:
        for key in [k for k in instances if k not in keep]:
            release(key)

    factory.release = release
    factory.release_all = release_all
    _FACTORY.append(factory)
    yield factory
    _FACTORY.clear()
    for cp in instances.values():
        cp.stop()


# The session's factory while it exists: the teardown hook below reads it.
_FACTORY: list = []
_TESTS = Path(__file__).resolve().parent


def _area(item) -> str:
    """The test directory directly under tests/ an item belongs to (package fixtures live no wider)."""
    path = Path(item.path).resolve()
    return path.relative_to(_TESTS).parts[0] if path.is_relative_to(_TESTS) else str(path.parent)


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """Leaving a test directory (one under tests/), stop the planes its tests started: an idle plane (kube-apiserver,
    etcd, the controllers, kwok) costs 4-5 % of a core, measured on a quiet machine, and a session that kept every
    plane it started until its end had five to seven idle ones in its last half hour (docs/ci-time.md). The
    ``cluster`` instance (the default profile, which most directories use) stays while a later test may request a
    plane (cluster_factory in its fixtures); a later directory that asks again for a released one starts it
    again."""
    yield
    if not _FACTORY or (nextitem is not None and _area(nextitem) == _area(item)):
        return
    later = item.session.items[item.session.items.index(nextitem) :] if nextitem is not None else []
    wanted = any("cluster_factory" in it.fixturenames for it in later)
    _FACTORY[0].release_all(keep=(DEFAULT_PROFILE,) if wanted else ())


@pytest.fixture(scope="module")
def cluster(cluster_factory) -> ControlPlane:
    return cluster_factory(DEFAULT_PROFILE)
