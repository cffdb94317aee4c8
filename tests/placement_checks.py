"""Where a converged site's serving pods run, checked against its plan (issue 24's acceptance).

On the local control plane the pods are real API objects: KServe's controller and the LeaderWorkerSet
controller create them, kube-scheduler binds them by its own rules to the profile's nodes, and kwok
(the node agent of those nodes) runs them. This module reads them back and holds them to the plan:

* ``scheduling``: no pod Pending anywhere, no FailedScheduling event;
* ``binding``: every serving pod bound by kube-scheduler (``spec.nodeName``, PodScheduled, a
  ``Scheduled`` event of ``default-scheduler``) to a node kwok runs (its annotation and node Lease),
  Running and Ready, its pod IP from its node's ``podCIDR``, on a node whose GPU feature discovery
  product label is the GPU the plan chose for its pool (``cluster_facts.gpu_matches``);
* ``gpus``: the GPUs the pods of each pool request add up to the plan's GPUs for the pool, and per
  model (an autoscaled pool: replicas x the plan's GPUs per replica, within the autoscaler's range);
* ``ranks``: every pod of a multi-node engine (leader and workers of each LeaderWorkerSet group)
  requests the same GPUs (tensor x dataLocal: the dataLocal ranks of a pod share its node) and runs
  the same vLLM arguments after KServe's merge of our spec with its presets, read from the pod's
  command line as the preset's shell would run it, and every argument the plan gave the engine;
* ``rdma``: every pod of a model whose plan moves traffic between nodes (an engine larger than a node,
  or prefill/decode disaggregation on a multi-node site) requests the RDMA device and attaches the
  secondary network that the platform decides (``intent.platform.rdma_attachment``);
* ``network_operator``: a cluster with an RDMA network operator subscribed has some pod using RDMA.

Every number is read from the plan or the intent of the site (``cli.site_intents``), nothing is
hard-coded. Used by ``tests/integration/test_placement.py`` and on the command line
(``python -m tests.placement_checks --site inventories/<site> --kubeconfig ...``; with several clusters,
each host on the kubeconfig context of its own name).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import shlex
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER = "leaderworkerset.sigs.k8s.io/worker-index"
NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
RDMA_OPERATORS = ("nvidia-network-operator", "sriov-network-operator")
SCHEDULER = "default-scheduler"
KSERVE_CONFIGS = "serving.kserve.io/v1alpha2/llminferenceserviceconfigs"
SCC_API = "security.openshift.io/v1/securitycontextconstraints"


# ---------------------------------------------------------------------- what the cluster holds
@dataclass
class Snapshot:
    """The objects of one cluster the checks read, all at one time."""

    pods: list[dict]
    nodes: dict[str, dict]
    events: list[dict]
    leases: set[str]
    subscriptions: list[dict]
    workloads: dict[tuple[str, str, str], dict] = field(default_factory=dict)  # (kind, ns, name) -> object
    # the LLMInferenceServiceConfigs the plane's KServe installed (its presets) and the SCCs OpenShift's admission
    # chooses from; empty when the plane serves neither
    presets: list[dict] = field(default_factory=list)
    sccs: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def read(cls, api) -> Snapshot:
        from simulator.kube import request

        def items(path: str) -> list[dict]:
            return (request(api, "GET", path, timeout=60) or {}).get("items") or []

        def served(group_version: str) -> bool:
            from kubernetes.client.rest import ApiException

            try:
                return bool(request(api, "GET", f"/apis/{group_version}", timeout=60))
            except ApiException as e:
                if e.status == 404:
                    return False
                raise

        snap = cls(
            pods=items("/api/v1/pods"),
            nodes={n["metadata"]["name"]: n for n in items("/api/v1/nodes")},
            events=items("/api/v1/events"),
            leases={
                x["metadata"]["name"] for x in items("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")
            },
            subscriptions=items("/apis/operators.coreos.com/v1alpha1/subscriptions"),
        )
        for kind, path in (
            ("Deployment", "/apis/apps/v1/deployments"),
            ("LeaderWorkerSet", "/apis/leaderworkerset.x-k8s.io/v1/leaderworkersets"),
        ):
            for o in items(path):
                snap.workloads[(kind, o["metadata"]["namespace"], o["metadata"]["name"])] = o
        if served(KSERVE_CONFIGS.rsplit("/", 1)[0]):
            snap.presets = items(f"/apis/{KSERVE_CONFIGS}")
        if served(SCC_API.rsplit("/", 1)[0]):
            snap.sccs = {x["metadata"]["name"]: x for x in items(f"/apis/{SCC_API}")}
        return snap

    def pods_of(self, kind: str, ns: str, name: str) -> list[dict]:
        """The pods a Deployment (by its selector) or a LeaderWorkerSet (by its name label) owns."""
        obj = self.workloads.get((kind, ns, name))
        if obj is None:
            return []
        if kind == "LeaderWorkerSet":
            sel = {LWS_NAME: name}
        else:
            sel = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        return [
            p
            for p in self.pods
            if p["metadata"]["namespace"] == ns
            and not p["metadata"].get("deletionTimestamp")
            and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in sel.items())
        ]


def pod_name(pod: dict) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


def _containers(pod_spec: dict) -> list[dict]:
    return list(pod_spec.get("containers") or [])


def requested(pod: dict, resource: str) -> int:
    """What a pod's containers request of an extended resource (requests, else limits: they are equal)."""
    total = 0
    for c in _containers(pod.get("spec") or {}):
        res = c.get("resources") or {}
        value = (res.get("requests") or {}).get(resource, (res.get("limits") or {}).get(resource))
        total += int(value or 0)
    return total


def gpus(pod: dict) -> int:
    return sum(requested(pod, r) for r in GPU_RESOURCES)


def _condition(obj: dict, ctype: str) -> str | None:
    return next(
        (c.get("status") for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == ctype), None
    )


# ---------------------------------------------------------------------- the site's plan
@dataclass
class Pool:
    """One workload of one model: what the plan says and the pods that run it."""

    model: str
    role: str  # serve | decode | prefill
    kind: str  # Deployment | LeaderWorkerSet
    namespace: str
    name: str
    plan: dict  # plan.pools[role]
    workload: dict  # intent serving.models[].main / .prefill
    autoscaling: dict | None
    pods: list[dict]

    @property
    def where(self) -> str:
        return f"{self.model}/{self.role} ({self.kind} {self.namespace}/{self.name})"


def plan_of(intent: dict, model: dict) -> dict:
    for entry in intent.get("plans") or []:
        name = entry["model"]["name"] if isinstance(entry.get("model"), dict) else entry.get("model")
        if name == model["name"]:
            return entry["plan"]
    raise KeyError(f"no plan for model {model['name']}")


def pools(snap: Snapshot, intent: dict) -> list[Pool]:
    """Every workload of every model of one cluster's intent, with its plan and its pods."""
    ns = intent["serving"]["namespace"]
    out = []
    for m in intent["serving"]["models"]:
        plan = plan_of(intent, m)
        for key, wl in (("prefill", m["prefill"]), ("main", m["main"])):
            if not wl:
                continue
            kind = "LeaderWorkerSet" if wl.get("worker") is not None else "Deployment"
            name = m["names"]["prefill_workload" if key == "prefill" else "main_workload"]
            plan_pool = (plan.get("pools") or {}).get(wl["role"]) or {}
            auto = None
            if wl.get("replicas") is None:
                # an autoscaled pool: the main pool's range, or the prefill pool's at the plan's ratio
                auto = (m.get("autoscaling") or {}) if key == "main" else (m.get("autoscaling") or {}).get("prefill")
            out.append(Pool(m["name"], wl["role"], kind, ns, name, plan_pool, wl, auto, snap.pods_of(kind, ns, name)))
    return out


def gpus_per_node(plan: dict, pool: dict) -> int:
    hw = plan.get("hardware") or {}
    if pool.get("gpu") and pool.get("gpu") == hw.get("decode_gpu") and hw.get("decode_gpus_per_node"):
        return int(hw["decode_gpus_per_node"])
    return int(hw.get("gpus_per_node") or 0)


def crosses_nodes(intent: dict, model: dict) -> str | None:
    """Why the plan of a model moves traffic between nodes (None when it does not)."""
    plan = plan_of(intent, model)
    for role, pool in (plan.get("pools") or {}).items():
        if pool and int(pool.get("gpus_per_replica") or 0) > gpus_per_node(plan, pool) > 0:
            return (
                f"its {role} engine spans nodes ({pool['gpus_per_replica']} GPUs a replica, "
                f"{gpus_per_node(plan, pool)} a node): expert/data-parallel traffic between nodes"
            )
    hw = plan.get("hardware") or {}
    if plan.get("disaggregated") and int(hw.get("nodes") or 1) + int(hw.get("decode_nodes") or 0) > 1:
        return "prefill/decode disaggregation on several nodes: KV moves between nodes"
    return None


# ---------------------------------------------------------------------- vLLM's command line on a pod
def vllm_argv(container: dict) -> list[str]:
    """The ``vllm serve`` argument list a KServe preset's container runs, as its shell would build it:
    the ``eval "exec vllm serve ..."`` line of the script, with ``${VLLM_ADDITIONAL_ARGS}`` (the
    container's env) and ``$@`` (the container's args) expanded; other shell variables stay as written
    (they are computed at run time, from the same text on every rank)."""
    command = container.get("command") or []
    script = command[command.index("-c") + 1] if "-c" in command[:-1] else " ".join(command)
    start = script.find("exec vllm serve")
    if start < 0:
        return []
    end = script.find('$@"', start)
    text = script[start : end if end >= 0 else len(script)].replace("\\\n", " ")
    text = text.replace("${VLLM_ADDITIONAL_ARGS}", _env(container).get("VLLM_ADDITIONAL_ARGS") or "")
    text += " " + " ".join(shlex.quote(a) for a in container.get("args") or [])
    try:
        return shlex.split(text)[1:]  # drop "exec"
    except ValueError:
        return text.split()[1:]


def role_only_tokens(presets: list[dict]) -> Counter:
    """Arguments KServe's data-parallel presets give only the leader or only the workers (the leader's
    API servers, ``--headless`` workers), read from the presets themselves: the tokens of the
    ``vllm serve`` line that one role's container has and the other's has not."""
    out: Counter = Counter()
    for p in presets:
        spec = p.get("spec") or {}
        leader = next((c for c in _containers(spec.get("template") or {}) if c["name"] == "main"), None)
        worker = next((c for c in _containers(spec.get("worker") or {}) if c["name"] == "main"), None)
        if not leader or not worker:
            continue
        a, b = Counter(vllm_argv(leader)), Counter(vllm_argv(worker))
        out |= (a - b) + (b - a)
    return out


def _main(pod: dict) -> dict:
    return next((c for c in _containers(pod.get("spec") or {}) if c["name"] == "main"), {})


def _env(container: dict) -> dict:
    return {e["name"]: e.get("value") for e in container.get("env") or [] if "value" in e}


# ---------------------------------------------------------------------- the checks
def check_scheduling(snap: Snapshot) -> list[str]:
    problems = [
        f"pod {pod_name(p)} is Pending: "
        + "; ".join(c.get("message", "") for c in (p.get("status") or {}).get("conditions") or [] if c.get("message"))
        for p in snap.pods
        if (p.get("status") or {}).get("phase", "Pending") == "Pending" and not p["metadata"].get("deletionTimestamp")
    ]
    for e in snap.events:
        if e.get("reason") == "FailedScheduling":
            ref = e.get("involvedObject") or {}
            problems.append(
                f"FailedScheduling x{e.get('count') or 1} for pod {ref.get('namespace')}/{ref.get('name')}:"
                f" {e.get('message')}"
            )
    return problems


def check_binding(snap: Snapshot, intent: dict) -> list[str]:
    from ansible_collections.inference.blueprints.plugins.module_utils import cluster_facts

    problems = []
    scheduled = {
        ((e.get("involvedObject") or {}).get("namespace"), (e.get("involvedObject") or {}).get("name"))
        for e in snap.events
        if e.get("reason") == "Scheduled"
        and SCHEDULER in (e.get("reportingComponent"), e.get("source", {}).get("component"))
    }
    for pool in pools(snap, intent):
        if not pool.pods:
            problems.append(f"{pool.where}: no pods")
        for pod in pool.pods:
            where, node_name = f"{pool.where} pod {pod['metadata']['name']}", pod["spec"].get("nodeName")
            if not node_name or _condition(pod, "PodScheduled") != "True":
                problems.append(f"{where}: not bound to a node")
                continue
            if pod["spec"].get("schedulerName", SCHEDULER) != SCHEDULER or (
                (pod["metadata"]["namespace"], pod["metadata"]["name"]) not in scheduled
            ):
                problems.append(f"{where}: bound to {node_name}, but not by kube-scheduler (no Scheduled event)")
            node = snap.nodes.get(node_name)
            if node is None:
                problems.append(f"{where}: bound to {node_name}, which does not exist")
                continue
            if not (node["metadata"].get("annotations") or {}).get(KWOK_ANNOTATION) or node_name not in snap.leases:
                problems.append(f"{where}: node {node_name} is not run by kwok (annotation, Lease)")
            if (pod.get("status") or {}).get("phase") != "Running" or _condition(pod, "Ready") != "True":
                problems.append(f"{where}: not Running and Ready on {node_name}")
            ip, cidr = (pod.get("status") or {}).get("podIP"), (node.get("spec") or {}).get("podCIDR")
            if not ip or not cidr or ipaddress.ip_address(ip) not in ipaddress.ip_network(cidr):
                problems.append(f"{where}: pod IP {ip} is not from its node's podCIDR {cidr}")
            product = (node["metadata"].get("labels") or {}).get("nvidia.com/gpu.product", "")
            if gpus(pod) and not cluster_facts.gpu_matches(pool.plan.get("gpu"), product):
                label = product or "no GPU product label"
                problems.append(f"{where}: on {node_name} ({label}), the plan chose {pool.plan.get('gpu')}")
    return problems


def check_gpus(snap: Snapshot, intent: dict) -> list[str]:
    problems = []
    by_model: dict[str, tuple[int, int]] = {}
    for pool in pools(snap, intent):
        have = sum(gpus(p) for p in pool.pods)
        planned = int(pool.plan.get("gpus") or 0)
        per_replica = int(pool.plan.get("gpus_per_replica") or 0)
        if pool.autoscaling:
            obj = snap.workloads.get((pool.kind, pool.namespace, pool.name)) or {}
            replicas = int((obj.get("spec") or {}).get("replicas") or 0)
            lo, hi = int(pool.autoscaling.get("min_replicas", 0)), int(pool.autoscaling.get("max_replicas", replicas))
            if not lo <= replicas <= hi:
                problems.append(f"{pool.where}: {replicas} replicas, the autoscaler's range is {lo}..{hi}")
            want = replicas * per_replica
            what = f"{replicas} autoscaled replicas x {per_replica} GPUs a replica (plan: {planned} for its traffic)"
        else:
            want, what = planned, f"the plan's {planned} ({pool.plan.get('replicas')} x {per_replica})"
        if have != want:
            problems.append(f"{pool.where}: its pods request {have} GPUs, {what}")
        h, w = by_model.get(pool.model, (0, 0))
        by_model[pool.model] = (h + have, w + want)
    for model, (have, want) in by_model.items():
        if have != want:
            problems.append(f"{model}: its pods request {have} GPUs in all, the plan {want}")
    return problems


def check_ranks(snap: Snapshot, intent: dict, role_tokens: Counter) -> list[str]:
    problems = []
    for pool in pools(snap, intent):
        problems += _check_pods(pool)
        if pool.kind == "LeaderWorkerSet":
            problems += _check_groups(pool, role_tokens)
    return problems


def _check_pods(pool: Pool) -> list[str]:
    """Each pod runs every argument the plan gave the engine and requests its ranks' GPUs."""
    problems = []
    par = pool.workload.get("parallelism") or {}
    planned = shlex.split(_env(_main({"spec": pool.workload["template"]})).get("VLLM_ADDITIONAL_ARGS") or "")
    per_pod = int(par.get("tensor", 1)) * int(par.get("dataLocal", 1)) if par.get("data") else None
    for pod in pool.pods:
        where = f"{pool.where} pod {pod['metadata']['name']}"
        argv = vllm_argv(_main(pod))
        missing = [t for t in planned if t not in argv]
        if missing:
            problems.append(f"{where}: runs without {' '.join(missing)}")
        if gpus(pod) == 0:
            problems.append(f"{where}: requests no GPU")
        elif per_pod is not None and gpus(pod) != per_pod:
            problems.append(
                f"{where}: requests {gpus(pod)} GPUs, its {par.get('dataLocal', 1)} local rank(s)"
                f" x TP {par.get('tensor', 1)} need {per_pod} on its node"
            )
    return problems


def _check_groups(pool: Pool, role_tokens: Counter) -> list[str]:
    """Each LeaderWorkerSet group has the plan's pods, and its workers run their leader's engine."""
    problems = []
    par = pool.workload.get("parallelism") or {}
    size = max(int(par.get("data", 1)) // max(int(par.get("dataLocal", 1)), 1), 1)
    groups: dict[str, list[dict]] = {}
    for pod in pool.pods:
        groups.setdefault((pod["metadata"].get("labels") or {}).get(LWS_GROUP, "?"), []).append(pod)
    for index, members in sorted(groups.items()):
        where = f"{pool.where} group {index}"
        if len(members) != size:
            problems.append(f"{where}: {len(members)} pods, the plan's {par.get('data')} DP ranks need {size}")
        leader = next((p for p in members if (p["metadata"].get("labels") or {}).get(LWS_WORKER) == "0"), None)
        if leader is None:
            problems.append(f"{where}: no leader pod")
            continue
        want = Counter(vllm_argv(_main(leader))) - role_tokens
        for worker in [p for p in members if p is not leader]:
            name = worker["metadata"]["name"]
            have = Counter(vllm_argv(_main(worker))) - role_tokens
            if have != want:
                problems.append(
                    f"{where}: worker {name} runs other engine arguments than its leader"
                    f" (leader only: {_tokens(want - have)}; worker only: {_tokens(have - want)})"
                )
            if gpus(worker) != gpus(leader):
                problems.append(f"{where}: worker {name} requests {gpus(worker)} GPUs, its leader {gpus(leader)}")
    return problems


def _tokens(c: Counter) -> str:
    return " ".join(sorted(c.elements())) or "-"


def rdma_attachment(intent: dict) -> dict:
    from ansible_collections.inference.blueprints.plugins.module_utils.intent import platform

    return platform.rdma_attachment(intent["options"], intent["serving"]["namespace"])


def check_rdma(snap: Snapshot, intent: dict) -> list[str]:
    problems = []
    attach = rdma_attachment(intent)
    by_model = {m["name"]: m for m in intent["serving"]["models"]}
    for pool in pools(snap, intent):
        why = crosses_nodes(intent, by_model[pool.model])
        if not why:
            continue
        network = f"{attach['network_namespace']}/{attach['network']}" if attach.get("network") else None
        for pod in pool.pods:
            where = f"{pool.where} pod {pod['metadata']['name']} ({why})"
            if requested(pod, attach["resource"]) < 1:
                problems.append(f"{where}: requests no {attach['resource']}")
            have = (pod["metadata"].get("annotations") or {}).get(NETWORKS_ANNOTATION)
            if network is None:
                problems.append(f"{where}: the platform renders no secondary network for RDMA to attach")
            elif network not in [n.strip() for n in (have or "").split(",")]:
                problems.append(f"{where}: {NETWORKS_ANNOTATION}={have!r}, not the RDMA network {network}")
    return problems


def _added_capabilities(pod: dict) -> set[str]:
    return {
        cap
        for c in _containers(pod.get("spec") or {})
        for cap in ((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or []
    }


def check_scc(snap: Snapshot, intent: dict) -> list[str]:
    """Every serving pod was admitted by OpenShift's SCC admission (its ``openshift.io/scc`` annotation), under an
    SCC that allows the capabilities its containers add."""
    from controlplane.scc_admission import SCC_ANNOTATION

    if not snap.sccs:
        return ["the cluster serves no SecurityContextConstraints: no pod went through OpenShift's SCC admission"]
    problems = []
    for pool in pools(snap, intent):
        for pod in pool.pods:
            where = f"{pool.where} pod {pod['metadata']['name']}"
            name = (pod["metadata"].get("annotations") or {}).get(SCC_ANNOTATION)
            if not name:
                problems.append(f"{where}: no {SCC_ANNOTATION} annotation (not admitted by the SCC admission)")
                continue
            scc = snap.sccs.get(name)
            if scc is None:
                problems.append(f"{where}: admitted under SCC {name}, which the cluster does not have")
                continue
            allowed = set(scc.get("allowedCapabilities") or [])
            if "*" not in allowed and (missing := _added_capabilities(pod) - allowed):
                problems.append(f"{where}: adds {sorted(missing)}, which SCC {name} does not allow")
    return problems


def check_network_operator(snap: Snapshot, intent: dict) -> list[str]:
    subscribed = sorted(
        {s["spec"]["name"] for s in snap.subscriptions if (s.get("spec") or {}).get("name") in RDMA_OPERATORS}
    )
    if not subscribed:
        return []
    resource = rdma_attachment(intent)["resource"]
    users = [pod_name(p) for p in snap.pods if requested(p, resource) > 0]
    if users:
        return []
    return [f"{', '.join(subscribed)} is installed, but no pod requests {resource}: the RDMA stack serves nothing"]


CHECKS = ("scheduling", "binding", "gpus", "ranks", "rdma", "network_operator", "scc")


def check(snap: Snapshot, intent: dict, which: tuple[str, ...] = CHECKS) -> dict[str, list[str]]:
    """Problems by check for one cluster (empty lists: all good)."""
    from controlplane import kserve_controller

    out: dict[str, list[str]] = {}
    if "scheduling" in which:
        out["scheduling"] = check_scheduling(snap)
    if "binding" in which:
        out["binding"] = check_binding(snap, intent)
    if "gpus" in which:
        out["gpus"] = check_gpus(snap, intent)
    if "ranks" in which:
        # the presets the plane's own KServe installed (OpenShift AI's or upstream's), else upstream's files
        out["ranks"] = check_ranks(snap, intent, role_only_tokens(snap.presets or kserve_controller.presets()))
    if "rdma" in which:
        out["rdma"] = check_rdma(snap, intent)
    if "network_operator" in which:
        out["network_operator"] = check_network_operator(snap, intent)
    if "scc" in which:
        out["scc"] = check_scc(snap, intent)
    return out


def main(argv=None) -> int:
    from ansible_collections.inference.blueprints.plugins.module_utils import cli

    from tests.kserve_checks import host_clients

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", required=True)
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("-e", "--extra-vars", action="append", default=[])
    a = ap.parse_args(argv)
    intents = cli.site_intents(a.site, None, cli._parse_extra_vars(a.extra_vars))
    clients = host_clients(a.kubeconfig, intents)
    report = {host: check(Snapshot.read(clients[host]), intent) for host, intent in intents.items()}
    print(json.dumps(report, indent=2))
    return 1 if any(p for r in report.values() for p in r.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
