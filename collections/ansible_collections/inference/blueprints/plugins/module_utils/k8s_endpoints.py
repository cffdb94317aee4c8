# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine of inference.blueprints.k8s_endpoints (action plugin and module share it).

Where each model is served and whether it answers: every model's LLMInferenceService is read for
``status.url`` (KServe sets it once the route is ready), each URL is probed with ``GET /v1/models``
(an endpoint this host cannot reach, by name or by route, is reported, not failed) and, with a
``smoke_prompt``, every endpoint that answered gets one chat completion, which must succeed.

The placement: the serving pods KServe's workloads made (one list of the namespace's pods by our
``inference.blueprints/model`` label, which KServe copies from ``spec.labels`` / ``spec.prefill.labels``
to every pod template, leader and worker), per model and pool: how many, on which node, the GPUs and
RDMA devices each asks for, against the intent's plan (``planned_replicas`` x ``pods_per_replica`` pods
of ``gpus_per_pod`` GPUs and ``rdma_per_pod`` RDMA devices). Pods not bound to a node, a pool short of
its planned pods (unless an autoscaler moves it), or a pod asking for other GPUs or RDMA devices than
planned are the placement's problems; ``placement_enforce`` fails the task on them.

The services are read concurrently through the collection's client, and the probes are sent
concurrently from this process. The verify playbook used to read each service with a
kubernetes.core.k8s_info task and probe it with ansible.builtin.uri, one module process per
model and step. That was about 1.7 s of a 5 s no-op re-run of the chat site.
"""

from __future__ import annotations

import json
import urllib.error
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.urls import open_url
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_client as kc

ARGUMENT_SPEC = dict(
    namespace=dict(type="str", required=True),
    # the intent's model entries as they are (name and served_name are read; the rest is ignored)
    models=dict(type="list", elements="dict", required=True),
    api_version=dict(type="str", default="serving.kserve.io/v1alpha2"),
    kind=dict(type="str", default="LLMInferenceService"),
    probe_timeout=dict(type="float", default=10.0),
    smoke_prompt=dict(type="str"),
    smoke_timeout=dict(type="float", default=120.0),
    endpoint_validate_certs=dict(type="bool", default=False),
    placement=dict(type="bool", default=True),
    placement_enforce=dict(type="bool", default=False),
    **kc.AUTH_ARG_SPEC,
)
WORKERS = 8
SMOKE_MAX_TOKENS = 8
MODEL_LABEL = "inference.blueprints/model"
POOL_LABEL = "inference.blueprints/pool"
NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
RDMA_RESOURCE_PREFIXES = ("rdma/", "openshift.io/")


def _http(method: str, url: str, body, timeout: float, validate: bool):
    """(status, parsed JSON or None, error text): status 0 when the endpoint could not be reached."""
    data = json.dumps(body).encode() if body is not None else None
    try:
        resp = open_url(
            url,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
            timeout=timeout,
            validate_certs=validate,
        )
        raw, status = resp.read(), resp.status
    except urllib.error.HTTPError as exc:
        return exc.code, None, f"HTTP {exc.code} {exc.reason}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return 0, None, str(getattr(exc, "reason", exc))
    try:
        return status, json.loads(raw or b"null"), ""
    except ValueError:
        return status, None, "the answer is not JSON"


def _base(url: str) -> str:
    return url.rstrip("/")


def _probe(model: dict, url: str, params: dict) -> dict:
    out = {"name": model["name"], "url": url, "reachable": False, "status": 0, "models": [], "error": ""}
    if not url:
        out["error"] = "the service has no status.url yet"
        return out
    if not url.startswith(("http://", "https://")):
        out["error"] = f"status.url {url!r} is not an http(s) URL"
        return out
    status, doc, err = _http(
        "GET", _base(url) + "/v1/models", None, params["probe_timeout"], params["endpoint_validate_certs"]
    )
    out.update(status=status, error=err, reachable=status == 200)
    if status == 200 and isinstance(doc, dict):
        out["models"] = [m.get("id") for m in doc.get("data") or [] if isinstance(m, dict)]
    return out


def _smoke(model: dict, probe: dict, params: dict) -> dict:
    served = model.get("served_name") or model["name"]
    body = {
        "model": served,
        "messages": [{"role": "user", "content": params["smoke_prompt"]}],
        "max_tokens": SMOKE_MAX_TOKENS,
    }
    url = _base(probe["url"]) + "/v1/chat/completions"
    status, doc, err = _http("POST", url, body, params["smoke_timeout"], params["endpoint_validate_certs"])
    answer = ""
    if status == 200 and isinstance(doc, dict):
        choices = doc.get("choices") or [{}]
        answer = ((choices[0] or {}).get("message") or {}).get("content") or ""
    return {"status": status, "answer": answer, "error": err, "url": url, "model": served}


def _count(value) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def pod_facts(pod: dict) -> dict:
    """What placement reads of one serving pod: its pool, node, phase, readiness and what container main asks for
    (requests; the API server copies the limits of extended resources into them)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    main = next((c for c in spec.get("containers") or [] if c.get("name") == "main"), {})
    requests = (main.get("resources") or {}).get("requests") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return {
        "name": meta.get("name"),
        "model": (meta.get("labels") or {}).get(MODEL_LABEL),
        "pool": (meta.get("labels") or {}).get(POOL_LABEL),
        "node": spec.get("nodeName") or None,
        "phase": status.get("phase") or "Pending",
        "ready": ready,
        "gpus": sum(_count(requests.get(r)) for r in GPU_RESOURCES),
        "rdma": sum(_count(v) for k, v in requests.items() if k.startswith(RDMA_RESOURCE_PREFIXES)),
        "network": (meta.get("annotations") or {}).get(NETWORKS_ANNOTATION),
    }


def placement(models: list, pods: list) -> list[dict]:
    """Per model: every pool's planned and live pods, per node, and the problems (``pods``: ``pod_facts``)."""
    out = []
    for m in models:
        entry = {"name": m["name"], "pools": [], "problems": []}
        for w in (m.get("prefill"), m.get("main")):
            if not w:
                continue
            role = w["role"]
            planned = int(w.get("planned_replicas") or 1) * int(w.get("pods_per_replica") or 1)
            autoscaled = w.get("replicas", 0) is None
            mine = [p for p in pods if p["model"] == m["name"] and p["pool"] == role and p["phase"] != "Succeeded"]
            bound = [p for p in mine if p["node"]]
            nodes: dict = {}
            for p in bound:
                n = nodes.setdefault(p["node"], {"node": p["node"], "pods": 0, "gpus": 0, "rdma": 0})
                n.update(pods=n["pods"] + 1, gpus=n["gpus"] + p["gpus"], rdma=n["rdma"] + p["rdma"])
            want_gpus, want_rdma = int(w.get("gpus_per_pod") or 0), int(w.get("rdma_per_pod") or 0)
            entry["pools"].append(
                {
                    "role": role,
                    "planned_pods": planned,
                    "autoscaled": autoscaled,
                    "gpus_per_pod": want_gpus,
                    "rdma_per_pod": want_rdma,
                    "pods": len(mine),
                    "bound": len(bound),
                    "ready": sum(1 for p in mine if p["ready"]),
                    "gpus": sum(p["gpus"] for p in mine),
                    "rdma": sum(p["rdma"] for p in mine),
                    "nodes": sorted(nodes.values(), key=lambda n: n["node"]),
                }
            )
            where = f"{m['name']} {role}"
            if not autoscaled and len(mine) != planned:
                entry["problems"].append(f"{where}: {len(mine)} pod(s), the plan has {planned}")
            if autoscaled and not mine:
                entry["problems"].append(f"{where}: no pod (the plan has {planned} at its traffic; autoscaled)")
            pending = [p["name"] for p in mine if not p["node"]]
            if pending:
                entry["problems"].append(f"{where}: {len(pending)} pod(s) bound to no node: {', '.join(pending)}")
            for p in mine:
                if p["gpus"] != want_gpus:
                    entry["problems"].append(
                        f"{where}: pod {p['name']} asks for {p['gpus']} GPUs, the plan {want_gpus}"
                    )
                if p["rdma"] != want_rdma:
                    entry["problems"].append(
                        f"{where}: pod {p['name']} asks for {p['rdma']} RDMA device(s), the plan {want_rdma}"
                    )
                if want_rdma and not p["network"]:
                    entry["problems"].append(f"{where}: pod {p['name']} names no secondary network for its RDMA device")
        out.append(entry)
    return out


def placement_line(entry: dict) -> str:
    pools = []
    for p in entry["pools"]:
        nodes = ", ".join(
            f"{n['node']}: {n['pods']} ({n['gpus']} GPUs" + (f", {n['rdma']} RDMA)" if n["rdma"] else ")")
            for n in p["nodes"]
        )
        planned = f"{p['planned_pods']} planned" + (", autoscaled" if p["autoscaled"] else "")
        pools.append(
            f"{p['role']} {p['bound']} of {p['pods']} pod(s) bound ({planned}; {p['gpus_per_pod']} GPUs"
            + (f" + {p['rdma_per_pod']} RDMA" if p["rdma_per_pod"] else "")
            + f" each){': ' + nodes if nodes else ''}"
        )
    return f"{entry['name']}: " + "; ".join(pools)


def _read_placement(client, params, models):
    resource = client.resource("v1", "Pod")
    try:
        doc = client.request(
            "GET", kc.resource_path(resource, namespace=params["namespace"]), query={"labelSelector": MODEL_LABEL}
        )
    except kc.ApiError as exc:
        raise kc.ClientError(
            kc.explain(exc, "list", f"Pods in {params['namespace']}", resource, params["namespace"])
        ) from exc
    return placement(models, [pod_facts(p) for p in doc.get("items") or []])


def _map(fn, items):
    if len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(WORKERS, len(items))) as pool:
        return list(pool.map(fn, items))


def run(params, check_mode=False, diff=False, env=None):
    """The k8s_endpoints task: a result dict (``failed``/``msg`` on failure)."""
    del diff
    if not kc.HAS_KUBERNETES:
        return {
            "failed": True,
            "msg": f"k8s_endpoints needs the kubernetes Python package: {kc.KUBERNETES_IMPORT_ERROR}",
        }
    models = params["models"]
    unnamed = [str(i) for i, m in enumerate(models) if not isinstance(m.get("name"), str) or not m["name"]]
    if unnamed:
        return {"failed": True, "msg": f"models[{unnamed[0]}]: no name; every model needs the name of its service"}
    if not models:
        return {"changed": False, "endpoints": [], "reachable": {}, "msg": "no models"}
    try:
        client = kc.get_client(params, env)
        resource = client.resource(params["api_version"], params["kind"])

        def read(model):
            try:
                return client.get(resource, model["name"], params["namespace"])
            except kc.ApiError as exc:
                what = f"{params['kind']} {params['namespace']}/{model['name']}"
                raise kc.ClientError(kc.explain(exc, "get", what, resource, params["namespace"])) from exc

        services = _map(read, models)
        placed = _read_placement(client, params, models) if params.get("placement", True) else []
    except kc.ClientError as exc:
        return {"failed": True, "msg": str(exc)}
    missing = [m["name"] for m, svc in zip(models, services, strict=True) if svc is None]
    if missing:
        return {
            "failed": True,
            "msg": f"{params['kind']} {', '.join(missing)} not found in namespace {params['namespace']}: "
            "converge the serving stage first",
        }
    urls = [kc.lookup(svc, "status.url") or "" for svc in services]
    probes = _map(lambda pair: _probe(pair[0], pair[1], params), list(zip(models, urls, strict=True)))
    failures = []
    if params.get("smoke_prompt") and not check_mode:
        reachable = [(m, p) for m, p in zip(models, probes, strict=True) if p["reachable"]]
        smokes = _map(lambda pair: _smoke(pair[0], pair[1], params), reachable)
        for (model, probe), smoke in zip(reachable, smokes, strict=True):
            probe["smoke"] = smoke
            if smoke["status"] != 200:
                failures.append(
                    f"{model['name']}: POST {smoke['url']} (model {smoke['model']!r}) answered "
                    f"{smoke['error'] or smoke['status']}"
                )
    answered = sum(1 for p in probes if (p.get("smoke") or {}).get("status") == 200)
    problems = [x for e in placed for x in e["problems"]]
    result = {
        "changed": False,
        "endpoints": probes,
        "reachable": {p["name"]: _base(p["url"]) for p in probes if p["reachable"]},
        "placement": placed,
        "placement_lines": [placement_line(e) for e in placed],
        "placement_problems": problems,
        "msg": f"{len(models)} model(s) in {params['namespace']}; reachable from here: "
        f"{sum(p['reachable'] for p in probes)}; smoke requests answered: {answered}",
    }
    if placed:
        bound = sum(p["bound"] for e in placed for p in e["pools"])
        result["msg"] += f"; serving pods bound to nodes: {bound}, placement problems: {len(problems)}"
    if failures:
        result.update(failed=True, msg="smoke request failed: " + "; ".join(failures))
    elif problems and params.get("placement_enforce"):
        result.update(failed=True, msg="the serving pods are not placed as planned: " + "; ".join(problems))
    return result
