"""What the real KServe controller made of a converged site, checked against its deployment intent.

Used by the integration tests and by every molecule scenario's verify step
(``python -m tests.kserve_checks --site inventories/<site> --kubeconfig ...``). Each check is
about behaviour on the cluster, not about our own YAML: the controller's workloads run the
engine arguments and resources we planned, its scheduler runs our EPP configuration, its
InferencePool selects the pods its workloads create, our monitors and autoscalers select
objects that exist, and every service is Ready by KServe's own conditions.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _get(dyn, api_version: str, kind: str, namespace: str, name: str) -> dict | None:
    from kubernetes.dynamic.exceptions import NotFoundError

    try:
        return dyn.resources.get(api_version=api_version, kind=kind).get(namespace=namespace, name=name).to_dict()
    except NotFoundError:
        return None


def _list(dyn, api_version: str, kind: str, namespace: str) -> list[dict]:
    return [o.to_dict() for o in dyn.resources.get(api_version=api_version, kind=kind).get(namespace=namespace).items]


def _container(pod_spec: dict, name: str = "main") -> dict:
    return next((c for c in pod_spec.get("containers") or [] if c["name"] == name), {})


def _env(container: dict) -> dict:
    return {e["name"]: e.get("value") for e in container.get("env") or []}


def _selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def _pod_templates(dyn, ns: str, m: dict) -> dict[str, dict]:
    """role -> pod template (metadata + spec) of the workloads KServe created for model m."""
    out = {}
    names = m["names"]
    for wl in (m["prefill"], m["main"]):
        if not wl:
            continue
        lws = wl["worker"] is not None
        name = names["prefill_workload"] if wl["role"] == "prefill" else names["main_workload"]
        if lws:
            obj = _get(dyn, "leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", ns, name)
            tmpl = (obj or {}).get("spec", {}).get("leaderWorkerTemplate", {}).get("leaderTemplate") if obj else None
        else:
            obj = _get(dyn, "apps/v1", "Deployment", ns, name)
            tmpl = obj["spec"]["template"] if obj else None
        kind = "LeaderWorkerSet" if lws else "Deployment"
        out[wl["role"]] = {"object": obj, "template": tmpl, "kind": kind, "name": name}
    return out


def _check_container(where: str, main: dict, want: dict, problems: list[str]) -> None:
    if "vllm serve" not in " ".join(main.get("command") or []):
        problems.append(f"{where}: container main does not start vllm serve (the preset's command was replaced?)")
    if want.get("image") and main.get("image") != want["image"]:
        problems.append(f"{where}: container main runs {main.get('image')!r}, the intent says {want['image']!r}")
    env = _env(main)
    for key, value in _env(want).items():
        if env.get(key) != value and value is not None:
            problems.append(f"{where}: env {key}={env.get(key)!r}, the intent says {value!r}")
    for side in ("requests", "limits"):
        have = (main.get("resources") or {}).get(side) or {}
        for res, qty in want["resources"][side].items():
            if str(have.get(res)) != str(qty):
                problems.append(f"{where}: resources.{side}.{res}={have.get(res)!r}, the intent says {qty!r}")


def _shm(pod_spec: dict) -> str | None:
    vol = next((v for v in pod_spec.get("volumes") or [] if v["name"] == "dshm"), {})
    return (vol.get("emptyDir") or {}).get("sizeLimit")


def _check_lws(where: str, got: dict, wl: dict, main: dict, problems: list[str]) -> None:
    size = got["object"]["spec"]["leaderWorkerTemplate"].get("size")
    par = wl["parallelism"]
    if size != max(par["data"] // par["dataLocal"], 1):
        problems.append(f"{where}: group size {size} for data={par['data']} dataLocal={par['dataLocal']}")
    if "--data-parallel-size" not in " ".join(main.get("command") or []):
        problems.append(f"{where}: KServe's data-parallel preset did not start the DP ranks")


def _check_worker(where: str, got: dict, wl: dict, leader: dict, problems: list[str]) -> None:
    """The worker pods of a LeaderWorkerSet run ranks of the leader's engine: after KServe's merge with its
    data-parallel preset, container main of the worker template asks for the intent's GPUs and devices,
    runs the intent's engine arguments and environment (the same as the leader's) and /dev/shm."""
    worker_pod = (got["object"]["spec"]["leaderWorkerTemplate"].get("workerTemplate") or {}).get("spec") or {}
    worker = _container(worker_pod)
    where = f"{where} worker"
    if not worker:
        problems.append(f"{where}: the worker template has no container main")
        return
    if not wl.get("worker"):
        problems.append(f"{where}: the intent renders no worker for a LeaderWorkerSet")
        return
    _check_container(where, worker, _container(wl["worker"]), problems)
    lead_res = leader.get("resources") or {}
    work_res = worker.get("resources") or {}
    for side in ("requests", "limits"):
        lead = {k: str(v) for k, v in (lead_res.get(side) or {}).items()}
        work = {k: str(v) for k, v in (work_res.get(side) or {}).items()}
        if lead != work:
            problems.append(f"{where}: resources.{side} {work} differ from the leader's {lead}")
    # what the intent sets on either pod (the presets' own, e.g. VLLM_RANDOMIZE_DP_DUMMY_INPUTS on decode
    # workers, may differ between them)
    lead_env, work_env = _env(leader), _env(worker)
    ours = set(_env(_container(wl["template"]))) | set(_env(_container(wl["worker"])))
    for key in sorted(k for k in ours if lead_env.get(k) != work_env.get(k)):
        problems.append(f"{where}: env {key}={work_env.get(key)!r}, the leader runs {lead_env.get(key)!r} (one engine)")
    want_shm = _shm(wl["worker"])
    if _shm(worker_pod) != want_shm:
        problems.append(f"{where}: /dev/shm is {_shm(worker_pod)}, not the planned {want_shm}")
    if "--headless" not in " ".join(worker.get("command") or []):
        problems.append(f"{where}: KServe's data-parallel preset did not start headless DP ranks")


def _check_workloads(dyn, ns: str, m: dict, problems: list[str]) -> dict[str, dict]:
    pods = _pod_templates(dyn, ns, m)
    for wl in (m["prefill"], m["main"]):
        if not wl:
            continue
        got = pods[wl["role"]]
        where = f"{m['name']}/{wl['role']} {got['kind']} {got['name']}"
        if got["template"] is None:
            problems.append(f"{where}: KServe created no such workload")
            continue
        main = _container(got["template"]["spec"])
        _check_container(where, main, _container(wl["template"]), problems)
        if _shm(got["template"]["spec"]) != _shm(wl["template"]):
            problems.append(f"{where}: /dev/shm is {_shm(got['template']['spec'])}, not the planned size")
        if got["kind"] == "LeaderWorkerSet":
            _check_lws(where, got, wl, main, problems)
            _check_worker(where, got, wl, main, problems)
        if wl["replicas"] is not None:
            have = (got["object"].get("spec") or {}).get("replicas")
            if have != wl["replicas"]:
                problems.append(f"{where}: replicas {have}, the plan says {wl['replicas']}")
    return pods


NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
RDMA_RESOURCE_PREFIXES = ("rdma/", "openshift.io/")


def _pod_templates_of(got: dict) -> list[tuple[str, dict]]:
    """(which, pod template) of one workload KServe created: a Deployment's, or a LeaderWorkerSet's leader and
    worker (the worker pods exist only when a group has more than one pod)."""
    if got["template"] is None:
        return []
    if got["kind"] != "LeaderWorkerSet":
        return [("pod", got["template"])]
    lwt = got["object"]["spec"]["leaderWorkerTemplate"]
    out = [("leader", got["template"])]
    if (lwt.get("size") or 1) > 1:
        out.append(("worker", lwt.get("workerTemplate") or {}))
    return out


def crosses_nodes(intent: dict, m: dict, pods: dict) -> str | None:
    """Why model m's traffic crosses nodes, read from what KServe runs, or None: an engine whose
    LeaderWorkerSet groups span pods (each on a node of its own), or P/D pools exchanging KV over NIXL on a
    site of several nodes; only counted where the nodes have RDMA NICs (hardware.interconnect rdma)."""
    hw = intent["hardware"]
    if hw.get("interconnect") != "rdma":
        return None
    for role, got in pods.items():
        if got["kind"] == "LeaderWorkerSet" and (got["object"]["spec"]["leaderWorkerTemplate"].get("size") or 1) > 1:
            return f"the {role} engine's ranks span {got['object']['spec']['leaderWorkerTemplate']['size']} pods"
    if m.get("disaggregated") and m.get("nixl") and int(hw.get("nodes") or 1) > 1:
        return "NIXL moves KV between the prefill and decode pods, placed on any of the nodes"
    return None


def _rdma_devices(pod_template: dict) -> int:
    main = _container((pod_template or {}).get("spec") or {})
    requests = (main.get("resources") or {}).get("requests") or {}
    return sum(int(str(v)) for k, v in requests.items() if k.startswith(RDMA_RESOURCE_PREFIXES))


def check_rdma(intent: dict, m: dict, pods: dict, problems: list[str]) -> int:
    """Every pod KServe runs for a model whose traffic crosses nodes asks for an RDMA device and carries the
    secondary network annotation (KServe copies it from the service); no other pod asks for one. Returns the
    RDMA devices the model's pod templates ask for."""
    why = crosses_nodes(intent, m, pods)
    used = 0
    for role, got in pods.items():
        for which, tmpl in _pod_templates_of(got):
            where = f"{m['name']}/{role} {got['kind']} {got['name']} {which}"
            n = _rdma_devices(tmpl)
            used += n
            nets = ((tmpl.get("metadata") or {}).get("annotations") or {}).get(NETWORKS_ANNOTATION)
            if why and not n:
                problems.append(f"{where}: {why} over RDMA, but the pod asks for no RDMA device")
            if why and not nets:
                problems.append(
                    f"{where}: {why} over RDMA, but the pod names no secondary network ({NETWORKS_ANNOTATION})"
                )
            if not why and n:
                problems.append(f"{where}: asks for {n} RDMA device(s), but none of its traffic crosses nodes")
    return used


def check_rdma_installed(intent: dict, devices: int, problems: list[str]) -> None:
    """The network operator is installed exactly when some pod asks for an RDMA device."""
    installed = "network_operator" in intent["platform"]["components"]
    if installed and not devices:
        problems.append(
            f"the network operator is installed ({intent['platform']['rdma']['why']}), "
            "but no pod asks for an RDMA device"
        )
    if devices and not installed:
        problems.append(f"pods ask for {devices} RDMA device(s), but no network operator advertises them")


# Plugins a KServe build adds to every inline scheduler config it deploys, on top of ours (never in a profile, so
# no scoring changes). OpenShift AI 3.5's scheduler preset declares router 0.10.0 (config/overlays/odh/patches/
# config-scheduler-patch.yaml: its downstream image dropped the --model-server-metrics-* flags), so its
# schedulerTransform moves those flags into a metrics-data-source plugin (pkg/controller/v1alpha2/llmisvc/
# scheduler.go, metricsDataSourceMinVersion, withMetricsDataSourceParams); KServe v0.20.0 (router 0.9.0) adds
# none. Held against the running controller by tests/controlplane/test_kserve_rhoai.py.
INJECTED_PLUGINS = ("metrics-data-source",)


def _check_epp_config(epp: dict, m: dict, problems: list[str]) -> None:
    args = _container(epp["spec"]["template"]["spec"]).get("args") or []
    if "--config-text" not in args:
        problems.append(f"{m['name']}: the scheduler does not get our EPP configuration (--config-text)")
        return
    running = yaml.safe_load(args[args.index("--config-text") + 1])
    want = m["scheduler"]["config"]
    for key in ("apiVersion", "featureGates", "schedulingProfiles"):
        if running.get(key) != want.get(key):
            problems.append(f"{m['name']}: the scheduler runs {key}={running.get(key)!r}, we set {want.get(key)!r}")
    ours = [p["type"] for p in want["plugins"]]
    runs = [p["type"] for p in running["plugins"]]
    if [t for t in runs if t not in INJECTED_PLUGINS] != ours:
        problems.append(f"{m['name']}: the scheduler runs plugins {runs}, we configured {ours}")


def _check_epp_monitor(dyn, ns: str, m: dict, svc: dict, problems: list[str]) -> None:
    monitor = _get(dyn, "monitoring.coreos.com/v1", "ServiceMonitor", ns, f"{m['name']}-epp")
    if monitor is None:
        return
    if not _selects(monitor["spec"]["selector"]["matchLabels"], svc["metadata"].get("labels") or {}):
        problems.append(f"{m['name']}: the EPP ServiceMonitor selects no EPP Service")
    port = monitor["spec"]["endpoints"][0]["port"]
    if port not in [p["name"] for p in svc["spec"]["ports"]]:
        problems.append(f"{m['name']}: the EPP Service has no port {port!r} to scrape")


def _check_scheduler(dyn, ns: str, m: dict, pods: dict, problems: list[str]) -> None:
    names = m["names"]
    epp = _get(dyn, "apps/v1", "Deployment", ns, names["epp_deployment"])
    if epp is None:
        problems.append(f"{m['name']}: KServe created no scheduler Deployment {names['epp_deployment']}")
        return
    _check_epp_config(epp, m, problems)
    pool = _get(dyn, "inference.networking.k8s.io/v1", "InferencePool", ns, names["pool"])
    if pool is None:
        problems.append(f"{m['name']}: KServe created no InferencePool {names['pool']}")
        return
    selector = pool["spec"]["selector"]["matchLabels"]
    for role, got in pods.items():
        labels = ((got["template"] or {}).get("metadata") or {}).get("labels") or {}
        if not _selects(selector, labels):
            problems.append(f"{m['name']}: the InferencePool does not select the {role} pods ({selector} vs {labels})")
    if pool["spec"]["endpointPickerRef"]["name"] != names["epp_service"]:
        problems.append(f"{m['name']}: the pool's endpoint picker is {pool['spec']['endpointPickerRef']['name']}")
    svc = _get(dyn, "v1", "Service", ns, names["epp_service"])
    if svc is None:
        problems.append(f"{m['name']}: no EPP Service {names['epp_service']}")
        return
    _check_epp_monitor(dyn, ns, m, svc, problems)
    for o in m["scheduler"]["objectives"]:
        obj = _get(dyn, m["scheduler"]["objective_api_version"], "InferenceObjective", ns, o["name"])
        if obj is None or obj["spec"]["poolRef"]["name"] != names["pool"]:
            problems.append(f"{m['name']}: objective {o['name']} does not point at the pool KServe created")


def _check_route(dyn, ns: str, m: dict, problems: list[str]) -> None:
    route = _get(dyn, "gateway.networking.k8s.io/v1", "HTTPRoute", ns, m["names"]["route"])
    if route is None:
        problems.append(f"{m['name']}: KServe created no HTTPRoute {m['names']['route']}")
        return
    refs = [b for r in route["spec"]["rules"] for b in r.get("backendRefs") or []]
    if m["scheduler"] and not any(b.get("kind") == "InferencePool" and b["name"] == m["names"]["pool"] for b in refs):
        problems.append(f"{m['name']}: the route does not send requests to the InferencePool")


def _check_monitors(dyn, ns: str, m: dict, pods: dict, problems: list[str]) -> None:
    for t in m["monitoring"]["vllm_targets"]:
        mon = _get(dyn, "monitoring.coreos.com/v1", "PodMonitor", ns, t["name"])
        if mon is None:
            continue
        sel = mon["spec"]["selector"]["matchLabels"]
        labels = [((p["template"] or {}).get("metadata") or {}).get("labels") or {} for p in pods.values()]
        if not any(_selects(sel, lab) for lab in labels):
            problems.append(f"{m['name']}: PodMonitor {t['name']} selects none of the workloads' pods")


def _check_ready(dyn, ns: str, m: dict, problems: list[str]) -> None:
    svc = _get(dyn, "serving.kserve.io/v1alpha2", "LLMInferenceService", ns, m["name"])
    conds = {c["type"]: c for c in ((svc or {}).get("status") or {}).get("conditions") or []}
    ready = conds.get("Ready", {})
    if ready.get("status") != "True":
        seen = {k: (c["status"], c.get("reason"), c.get("message")) for k, c in conds.items() if c["status"] != "True"}
        problems.append(f"{m['name']}: not Ready according to KServe: {seen}")


def _check_autoscaling(dyn, ns: str, intent: dict, problems: list[str]) -> None:
    for a in (intent["serving"].get("autoscaling") or {}).get("scaled_objects", []):
        t = a["target"]
        if _get(dyn, t["apiVersion"], t["kind"], ns, t["name"]) is None:
            problems.append(f"ScaledObject {a['name']} scales {t['kind']} {t['name']}, which KServe did not create")


def check_intent(dyn, intent: dict) -> list[str]:
    """Every problem with what KServe made of one cluster's serving intent."""
    problems: list[str] = []
    ns = intent["serving"]["namespace"]
    devices = 0
    for m in intent["serving"]["models"]:
        pods = _check_workloads(dyn, ns, m, problems)
        devices += check_rdma(intent, m, pods, problems)
        if m["scheduler"]:
            _check_scheduler(dyn, ns, m, pods, problems)
        _check_route(dyn, ns, m, problems)
        _check_monitors(dyn, ns, m, pods, problems)
        _check_ready(dyn, ns, m, problems)
    _check_autoscaling(dyn, ns, intent, problems)
    check_rdma_installed(intent, devices, problems)
    return problems


def host_clients(kubeconfig: str, hosts) -> dict:
    """{host: API client}: a multi-cluster site (molecule's CLUSTER_CONTEXTS) has one kubeconfig context per host,
    named after it; each host is read on its own cluster, the others on the current context."""
    from kubernetes import config

    contexts = {c["name"] for c in config.list_kube_config_contexts(config_file=kubeconfig)[0]}
    return {
        h: config.new_client_from_config(config_file=kubeconfig, context=h if h in contexts else None) for h in hosts
    }


def main(argv=None) -> int:
    from ansible_collections.inference.blueprints.plugins.module_utils import cli
    from kubernetes import dynamic

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", required=True)
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("-e", "--extra-vars", action="append", default=[])
    a = ap.parse_args(argv)
    intents = cli.site_intents(a.site, None, cli._parse_extra_vars(a.extra_vars))
    clients = host_clients(a.kubeconfig, intents)
    report = {host: check_intent(dynamic.DynamicClient(clients[host]), intent) for host, intent in intents.items()}
    print(json.dumps(report, indent=2))
    return 1 if any(report.values()) else 0


if __name__ == "__main__":
    sys.exit(main())


def accounts_for(rendered: list[dict], svc: dict, ns: str) -> list[dict]:
    """The ServiceAccounts the site renders that the service's pod templates name, moved to ``ns``: a pool that needs
    IPC_LOCK runs as an account of the model's own (intent/scc_grant.py), which KServe fetches and never creates
    (its multi-node reconcile fails "service account ... not found" without it). A test that applies a rendered
    service without its serving stage applies these first."""
    names: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("serviceAccountName"), str):
                names.add(node["serviceAccountName"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(svc.get("spec") or {})
    out = []
    for o in rendered:
        if o["kind"] == "ServiceAccount" and o["metadata"]["name"] in names:
            sa = copy.deepcopy(o)
            sa["metadata"]["namespace"] = ns
            out.append(sa)
    return out
