"""The traffic paths a site's serving needs, and the NetworkPolicy that admits exactly them.

Every request crosses pods that KServe's controller creates from the site's LLMInferenceServices: the front door's
proxies ask the endpoint picker (ext-proc, gRPC) which engine serves a request, then send it to that engine; the picker
scrapes every engine's /metrics; a P/D decode pod's routing sidecar sends the prompt to a prefill engine and the decode
engine pulls the KV cache over NIXL (side channel on TCP, data over UCX); the ranks of a multi-node engine talk to each
other (torch.distributed and NCCL bootstrap, ports chosen at run time); user-workload Prometheus scrapes the picker and
the engines. A cluster whose namespaces start with a deny-by-default policy (OpenShift's multitenant project template),
or a later OpenShift AI build whose controller isolates the workload and router pods (it admits ports 8000/9002 from the
ingress, monitoring and the same namespace only: not Envoy Gateway's proxies), blocks some of these. NetworkPolicies
are additive, so one policy of the site's that admits each needed path (and only those) keeps them open whatever else
selects the pods; it also isolates the site's pods from everything it does not list.

``paths(intent)`` lists the paths (tests/integration/test_traffic_paths.py evaluates each against every policy
present after convergence with cyclonus's matcher); ``network_policies(intent)`` are the policies (rendered by the
model_service role). The burst path (on-prem front door -> the burst cluster's front door) crosses clusters and ends at
Envoy Gateway's proxies, which are not the site's pods: no policy of the site's selects them.

Facts read from the upstream code (KServe v0.20.0 and OpenShift AI 3.5's KServe keep them alike):
* pod labels: ``app.kubernetes.io/part-of: llminferenceservice``, ``app.kubernetes.io/name: <service>`` and
  ``app.kubernetes.io/component`` one of the values below (pkg/constants/constants.go; SchedulerLabels in
  pkg/controller/v1alpha2/llmisvc/scheduler.go, singleNodeLabels in workload_single_node.go);
* ports: the picker's ``grpc`` 9002 (ext-proc), ``metrics`` 9090 and ``zmq`` 5557 (KV events), the engine's 8000
  (the P/D sidecar's port in a decode pod, vLLM's own elsewhere) (config/llmisvcconfig/config-llm-scheduler.yaml,
  config-llm-decode-template.yaml, config-llm-template.yaml);
* Envoy Gateway runs a Gateway's proxies in its controller's namespace (``envoy-gateway-system`` in its install),
  labelled ``gateway.envoyproxy.io/owning-gateway-name``/``-namespace`` (envoyproxy/gateway
  internal/infrastructure/kubernetes/proxy); OpenShift's Gateway API controller (Istio) runs them in the Gateway's own
  namespace, labelled ``gateway.networking.k8s.io/gateway-name`` (istio pilot/pkg/config/kube/gateway deployment
  controller);
* OpenShift's user-workload Prometheus runs in ``openshift-user-workload-monitoring``.
The test checks the labels and ports against the pods the real controller made.
"""

from __future__ import annotations

from .burst_exposure import ENVOY_GATEWAY_NAMESPACE
from .serving import NIXL_SIDE_CHANNEL_PORT

PART_OF = {"app.kubernetes.io/part-of": "llminferenceservice"}
NAME_LABEL = "app.kubernetes.io/name"
COMPONENT_LABEL = "app.kubernetes.io/component"
SCHEDULER = "llminferenceservice-router-scheduler"
DECODE = "llminferenceservice-workload"
PREFILL = "llminferenceservice-workload-prefill"
LEADER = "llminferenceservice-workload-leader"
WORKER = "llminferenceservice-workload-worker"
LEADER_PREFILL = "llminferenceservice-workload-leader-prefill"
WORKER_PREFILL = "llminferenceservice-workload-worker-prefill"
EPP_GRPC, EPP_METRICS, EPP_KV_EVENTS = 9002, 9090, 5557
ENGINE_PORT = 8000
ENVOY_GATEWAY_CONTROLLER = "gateway.envoyproxy.io/gatewayclass-controller"
USER_WORKLOAD_MONITORING = "openshift-user-workload-monitoring"
NS_NAME_LABEL = "kubernetes.io/metadata.name"
POLICY_NAME = "inference-blueprints-serving-paths"


def _pods(ns: str, **labels: str) -> dict:
    return {"namespace": ns, "pods": {**PART_OF, **labels}}


def _component(ns: str, model: str, component: str) -> dict:
    return _pods(ns, **{NAME_LABEL: model, COMPONENT_LABEL: component})


def front_doors(intent: dict) -> list[dict]:
    """The Gateways whose proxies send requests to the site's pickers and engines: OpenShift AI's inference gateway
    (the route KServe makes attaches to it) and the AI grid's Envoy Gateway front door, each as the namespace and
    labels of its proxy pods."""
    ns = intent["serving"]["namespace"]
    out = []
    oai = ((intent.get("platform") or {}).get("openshift_ai") or {}).get("gateway")
    if oai:
        out.append(
            {
                "name": oai["name"],
                "namespace": oai["namespace"],
                "pods": {"gateway.networking.k8s.io/gateway-name": oai["name"]},
            }
        )
    # the AI grid's routes send to the InferencePools themselves; the sovereign front door and the edge escalation
    # route to Backends (OpenShift AI's gateway, the regional grid), so their proxies never reach these pods
    gw = intent.get("gateway")
    if gw and gw.get("controller_name") == ENVOY_GATEWAY_CONTROLLER:
        gw_ns = gw.get("namespace") or ns
        out.append(
            {
                "name": gw["name"],
                "namespace": ENVOY_GATEWAY_NAMESPACE,
                "pods": {
                    "gateway.envoyproxy.io/owning-gateway-name": gw["name"],
                    "gateway.envoyproxy.io/owning-gateway-namespace": gw_ns,
                },
            }
        )
    return out


def _roles(m: dict) -> list[dict]:
    """The engine pod groups of a model: (role, the component its leader or only pod carries, its workers' or None,
    the data-parallel ranks one pod runs: each listens on its own NIXL side-channel port)."""
    out = []
    for role, part, single, leader, worker in (
        ("decode", m["main"], DECODE, LEADER, WORKER),
        ("prefill", m["prefill"], PREFILL, LEADER_PREFILL, WORKER_PREFILL),
    ):
        if not part:
            continue
        multi = part.get("worker") is not None
        par = part.get("parallelism") or {}
        ranks = int(par.get("dataLocal") or (1 if multi else par.get("data") or 1))
        out.append(
            {"role": role, "engine": leader if multi else single, "worker": worker if multi else None, "ranks": ranks}
        )
    return out


def _model_paths(ns: str, m: dict, doors: list[dict]) -> list[dict]:
    name = m["name"]
    roles = _roles(m)
    decode = roles[0]
    out = []
    for door in doors:
        src = {"namespace": door["namespace"], "pods": door["pods"]}
        if m["scheduler"]:
            out.append(
                _path(f"{name}: gateway {door['name']} -> picker", src, _component(ns, name, SCHEDULER), EPP_GRPC)
            )
        out.append(
            _path(f"{name}: gateway {door['name']} -> engine", src, _component(ns, name, decode["engine"]), ENGINE_PORT)
        )
    if m["scheduler"]:
        picker = _component(ns, name, SCHEDULER)
        for r in roles:
            engine = _component(ns, name, r["engine"])
            out.append(_path(f"{name}: picker -> {r['role']} engine", picker, engine, ENGINE_PORT))
            out.append(_path(f"{name}: {r['role']} engine -> picker KV events", engine, picker, EPP_KV_EVENTS))
        out.append(_path(f"{name}: prometheus -> picker", _monitoring(), picker, EPP_METRICS))
    for r in roles:
        out.append(
            _path(
                f"{name}: prometheus -> {r['role']} engine",
                _monitoring(),
                _component(ns, name, r["engine"]),
                ENGINE_PORT,
            )
        )
    if len(roles) == 2:
        prefill = roles[1]
        decoders = [decode["engine"]] + ([decode["worker"]] if decode["worker"] else [])
        prefillers = [prefill["engine"]] + ([prefill["worker"]] if prefill["worker"] else [])
        side = (NIXL_SIDE_CHANNEL_PORT, NIXL_SIDE_CHANNEL_PORT + prefill["ranks"] - 1)
        out.append(
            _path(
                f"{name}: P/D sidecar -> prefill engine",
                _component(ns, name, decode["engine"]),
                _component(ns, name, prefill["engine"]),
                ENGINE_PORT,
            )
        )
        for d in decoders:
            for p in prefillers:
                out.append(
                    _path(
                        f"{name}: NIXL side channel {d} -> {p}", _component(ns, name, d), _component(ns, name, p), side
                    )
                )
    for r in roles:
        if r["worker"]:
            leader, workers = _component(ns, name, r["engine"]), _component(ns, name, r["worker"])
            out.append(
                _path(f"{name}: {r['role']} ranks, workers -> leader (torch.distributed)", workers, leader, None)
            )
            out.append(_path(f"{name}: {r['role']} ranks, leader -> workers (NCCL)", leader, workers, None))
            out.append(_path(f"{name}: {r['role']} ranks, worker -> worker (NCCL)", workers, workers, None))
    return out


def _monitoring() -> dict:
    return {"namespace": USER_WORKLOAD_MONITORING, "pods": {}}


def _path(name: str, source: dict, destination: dict, port) -> dict:
    """port: a number, a (first, last) range, or None for any port (chosen at run time)."""
    return {"name": name, "source": source, "destination": destination, "port": port}


def paths(intent: dict) -> list[dict]:
    """Every path in the cluster that serving needs (port None: any port, the ranks choose theirs at run time)."""
    ns = intent["serving"]["namespace"]
    doors = front_doors(intent)
    return [p for m in intent["serving"]["models"] for p in _model_paths(ns, m, doors)]


def _peer(ns: str, end: dict) -> dict:
    """A NetworkPolicy peer. No podSelector for every pod of a namespace: the API server stores an empty
    ``matchLabels`` as absent, and a peer written with one would read back as drift on every run."""
    peer = {"podSelector": {"matchLabels": dict(sorted(end["pods"].items()))}} if end["pods"] else {}
    if end["namespace"] != ns:
        peer["namespaceSelector"] = {"matchLabels": {NS_NAME_LABEL: end["namespace"]}}
    return peer


def _port(port) -> dict:
    if isinstance(port, int):
        return {"protocol": "TCP", "port": port}
    first, last = port
    if first == last:
        return {"protocol": "TCP", "port": first}
    return {"protocol": "TCP", "port": first, "endPort": last}


def _short(component: str) -> str:
    return component.removeprefix("llminferenceservice-").removeprefix("router-").removeprefix("workload-")


def network_policies(intent: dict) -> list[dict]:
    """One ingress policy per group of the site's serving pods (a model's picker, decode, prefill, leader or worker
    pods: a policy's rules apply to every pod it selects, so one per destination keeps each admission exact), a rule
    per source with the ports of the paths from it; none when the site turns them off
    (model_service_network_policies: false)."""
    if not intent["options"]["model_service"]["model_service_network_policies"]:
        return []
    ns = intent["serving"]["namespace"]
    groups: dict[tuple, dict] = {}
    for p in paths(intent):
        dst = p["destination"]
        if dst["namespace"] != ns:
            continue
        key = tuple(sorted(dst["pods"].items()))
        group = groups.setdefault(key, {"pods": dict(key), "rules": {}})
        peer = _peer(ns, p["source"])
        group["rules"].setdefault(repr(peer), {"peer": peer, "ports": set()})["ports"].add(p["port"])
    out = []
    for group in groups.values():
        pods = group["pods"]
        ingress = []
        for rule in group["rules"].values():
            entry = {"from": [rule["peer"]]}
            if None not in rule["ports"]:
                entry["ports"] = [
                    _port(port) for port in sorted(rule["ports"], key=lambda p: p if isinstance(p, int) else p[0])
                ]
            ingress.append(entry)
        name = f"{pods[NAME_LABEL]}-{_short(pods[COMPONENT_LABEL])}-paths"
        out.append({"name": name, "namespace": ns, "pod_selector": pods, "ingress": ingress})
    return sorted(out, key=lambda x: x["name"])
