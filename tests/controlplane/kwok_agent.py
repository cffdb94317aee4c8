"""kwok, the node agent of a local control plane's nodes (TEST-SIDE ONLY).

``make controlplane`` builds ``cmd/kwok`` of the Go module ``sigs.k8s.io/kwok`` (version pinned in
``kwok/go.mod`` beside this file) into ``.cache/bin/kwok``. :class:`KwokAgent` runs it against one
:class:`~cluster.ControlPlane` instance as the kubelet of every Node the instance seeds (the Nodes
carry the annotation ``kwok.x-k8s.io/node: fake``, kwok's own convention for the nodes it fakes):

* Nodes: the seeding writes what the hardware and its operators would put there (capacity and
  allocatable: CPU, memory, pods, ``nvidia.com/gpu``, the RDMA resource; NFD and GPU feature
  discovery labels; taints; addresses) and no conditions. kwok's ``node-initialize`` Stage then
  reports them Ready (NodeConditions, phase Running) and ``node-heartbeat-with-lease`` keeps them so,
  with a Lease per node in ``kube-node-lease``, as kwokctl configures kwok by default.
* Pods: kube-scheduler binds them; kwok's ``pod-ready`` Stage makes a bound pod Running and Ready
  (every container running, every init container completed, readiness gates true) with a pod IP
  from its node's ``spec.podCIDR``; ``pod-complete`` ends Job pods, ``pod-delete`` removes pods
  being deleted. These are the "fast" Stages kwokctl loads by default.

The Stages are read at start time from the kwok module in GOMODCACHE
(``kustomize/stage/{node/fast,node/heartbeat-with-lease,pod/fast}``, the files their kustomizations
list) and handed to kwok in its ``--config`` file; its options are flags (kwok's defaults for the
rest). Nothing of kwok is copied into the repository.

Pod IPs are loopback addresses, so that processes on this machine can stand in for pods later (the
data-plane tier binds engines to their pod IPs): each instance claims one 127.<k>.0.0/16 (a lock file
per /16, held while the instance runs, so that instances started side by side never share one),
node i of the instance gets ``spec.podCIDR`` 127.<k>.<i+1>.0/24 when it is seeded, and kwok gives each
pod the next free address of its node's range (kwok's ipPool: .1, .2, ...; recycled on delete).
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

try:  # imported as controlplane.kwok_agent (pytest) or beside cluster.py as a script
    from . import gomodule
    from .component import CACHE, Component, ComponentError
    from .procutil import free_port
except ImportError:
    import gomodule  # type: ignore[no-redef]
    from component import CACHE, Component, ComponentError  # type: ignore[no-redef]
    from procutil import free_port  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
BINARY = Path(os.environ.get("KCP_KWOK_BIN", CACHE / "bin" / "kwok"))
GO_MODULE_DIR = HERE / "kwok"
MODULE = "sigs.k8s.io/kwok"

# kwok's annotation for the nodes it manages (its docs and kwokctl use kwok.x-k8s.io/node=fake).
NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
# The Stage sets kwokctl loads by default (pkg/kwokctl/runtime/cluster.go: node fast, heartbeat with
# lease when leases are on, pod fast).
STAGE_SETS = ("kustomize/stage/node/fast", "kustomize/stage/node/heartbeat-with-lease", "kustomize/stage/pod/fast")
NODE_LEASE_SECONDS = 40  # kwok's default nodeLeaseDurationSeconds (and the kubelet's)


class KwokError(ComponentError):
    """kwok could not be started."""


def module_version() -> str:
    return gomodule.version(GO_MODULE_DIR, MODULE)


def stages() -> list[dict]:
    """kwok's default Stages, read from the kwok module (the resources each kustomization lists)."""
    out = []
    for stage_set in STAGE_SETS:
        kustomization = yaml.safe_load(gomodule.read(GO_MODULE_DIR, MODULE, f"{stage_set}/kustomization.yaml"))
        for rel in kustomization["resources"]:
            out += [d for d in yaml.safe_load_all(gomodule.read(GO_MODULE_DIR, MODULE, f"{stage_set}/{rel}")) if d]
    return out


def options(server_port: int, cidr: str) -> list[str]:
    """kwok's options for one instance, as flags: with no KwokConfiguration in its config file kwok
    applies its own defaults to every other option (a KwokConfiguration read from a file gets none)."""
    return [
        "--manage-nodes-with-annotation-selector=" + "=".join(NODE_ANNOTATION),
        f"--cidr={cidr}",  # for a node without spec.podCIDR (the seeding gives every node one)
        f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}",
        f"--server-address=127.0.0.1:{server_port}",
    ]


class KwokAgent(Component):
    """One kwok process: the kubelet of every node of one control plane instance."""

    name = "kwok"
    error = KwokError

    def __init__(self, cp, binary: Path | None = None):
        super().__init__(cp, binary or BINARY)
        self.port = 0

    def launch(self) -> None:
        self.missing(f"builds {MODULE}/cmd/kwok {module_version()} from the Go module")
        self.port = free_port()
        conf = self.cp.workdir / "kwok-stages.yaml"
        conf.write_text(yaml.safe_dump_all(stages(), sort_keys=False))
        args = [f"--kubeconfig={self.cp.kubeconfig}", f"--config={conf}"]
        # HOME: kwok would also read ~/.kwok/kwok.yaml
        self.spawn(args + options(self.port, self.cp.pod_network.default_cidr), {"HOME": str(self.cp.workdir)})

    def ready(self, timeout: float = 120) -> KwokAgent:
        try:
            self.wait(lambda: self.http_ok(f"http://127.0.0.1:{self.port}/healthz"), "healthz", timeout)
            self.wait(self._nodes_ready, "nodes Ready", timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _nodes_ready(self) -> bool:
        nodes = self.cp._call("GET", "/api/v1/nodes")["items"]
        ours = [n for n in nodes if (n["metadata"].get("annotations") or {}).get(NODE_ANNOTATION[0])]
        return bool(ours) and all(
            any(c["type"] == "Ready" and c["status"] == "True" for c in (n.get("status") or {}).get("conditions") or [])
            for n in ours
        )


def state(agent: KwokAgent | None) -> dict | None:
    if agent is None:
        return None
    return {"pid": agent.pid, "version": module_version(), "log": str(agent.log), "port": agent.port}
