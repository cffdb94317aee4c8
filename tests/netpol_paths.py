"""Traffic paths evaluated against NetworkPolicies by cyclonus's matcher (tests/netpol, built by mk/netpol.mk).

A path of intent/traffic_paths.py names its two ends by namespace and pod labels. The ends inside the site's
namespace are resolved to the pod templates the real KServe controller made (their labels, and the destination's
container ports): a label or port the collection assumes and KServe does not use fails here, before any policy is
evaluated. The ends outside it (the front doors' proxies, user-workload Prometheus) have no pods on the local plane:
they are played by their selectors' labels in a namespace of that name, as OpenShift labels every namespace.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from ansible_collections.inference.blueprints.plugins.module_utils.intent import traffic_paths as tp
from kubernetes import dynamic

ROOT = Path(__file__).resolve().parents[1]
BINARY = Path(os.environ.get("NETPOLCHECK_BIN", ROOT / ".cache" / "bin" / "netpolcheck"))


def pod_templates(cp, ns: str) -> list[dict]:
    """Every pod template KServe's workloads in ns carry: Deployments' and LeaderWorkerSets' leaders and workers."""
    dyn = dynamic.DynamicClient(cp.new_api_client())
    out = []
    for d in dyn.resources.get(api_version="apps/v1", kind="Deployment").get(namespace=ns).items:
        out.append(d.to_dict()["spec"]["template"])
    for lws in (
        dyn.resources.get(api_version="leaderworkerset.x-k8s.io/v1", kind="LeaderWorkerSet").get(namespace=ns).items
    ):
        lwt = lws.to_dict()["spec"]["leaderWorkerTemplate"]
        out += [t for t in (lwt.get("leaderTemplate"), lwt.get("workerTemplate")) if t]
    return out


def _matches(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _ports(template: dict) -> set[int]:
    spec = template.get("spec") or {}
    containers = (spec.get("containers") or []) + (spec.get("initContainers") or [])
    return {p["containerPort"] for c in containers for p in c.get("ports") or []}


def resolve(paths: list[dict], ns: str, templates: list[dict]) -> tuple[list[dict], list[str]]:
    """(cyclonus flows, problems): each path's ends as peers; a problem where an end in ns matches no pod KServe
    made, or a single-port destination listens on no such container port."""
    flows, problems = [], []
    for p in paths:
        ends = []
        for which in ("source", "destination"):
            end = p[which]
            if end["namespace"] != ns:
                ends.append(
                    [
                        {
                            "namespace": end["namespace"],
                            "namespaceLabels": {tp.NS_NAME_LABEL: end["namespace"]},
                            "podLabels": dict(end["pods"]),
                        }
                    ]
                )
                continue
            found = [t for t in templates if _matches(end["pods"], (t.get("metadata") or {}).get("labels") or {})]
            if not found:
                problems.append(f"{p['name']}: no pod KServe made in {ns} carries the {which}'s labels {end['pods']}")
            ends.append(
                [
                    {
                        "namespace": ns,
                        "namespaceLabels": {tp.NS_NAME_LABEL: ns},
                        "podLabels": (t.get("metadata") or {}).get("labels") or {},
                        "_ports": _ports(t),
                    }
                    for t in found
                ]
            )
        port = p["port"]
        first = port if isinstance(port, int) else (port[0] if port else 40000)
        listening = any(port in d["_ports"] for d in ends[1])
        if isinstance(port, int) and p["destination"]["namespace"] == ns and ends[1] and not listening:
            problems.append(f"{p['name']}: no destination pod listens on container port {port}")
        for s in ends[0]:
            for d in ends[1]:
                flows.append(
                    {"name": p["name"], "source": _peer(s), "destination": _peer(d), "port": first, "protocol": "TCP"}
                )
                if isinstance(port, tuple) and port[1] != port[0]:
                    flows.append({**flows[-1], "port": port[1]})
    return flows, problems


def _peer(end: dict) -> dict:
    return {k: v for k, v in end.items() if not k.startswith("_")}


def live_policies(cp) -> list[dict]:
    dyn = dynamic.DynamicClient(cp.new_api_client())
    items = dyn.resources.get(api_version="networking.k8s.io/v1", kind="NetworkPolicy").get().items
    return [i.to_dict() for i in items]


def evaluate(policies: list[dict], flows: list[dict]) -> list[dict]:
    """cyclonus's verdict on each flow: [{name, allowed, ingress, egress, explanation}]."""
    assert BINARY.exists(), f"{BINARY} is missing: `make netpol` builds it (mk/netpol.mk)"
    res = subprocess.run(
        [str(BINARY)],
        input=json.dumps({"policies": policies, "flows": flows}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def blocked(verdicts: list[dict]) -> dict[str, str]:
    """{path name: cyclonus's explanation} of every flow refused."""
    return {v["name"]: v["explanation"] for v in verdicts if not v["allowed"]}
