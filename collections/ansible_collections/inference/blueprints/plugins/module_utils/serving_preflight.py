# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight of what serving will read when its pods start, before anything is applied.

The requirements come from the deployment intent (``platform.requirements.serving``, intent/preflight_needs.py:
the claims of ``pvc://`` artifacts, the Secrets the objects name, the site's own namespaces) and
``platform.requirements.pods`` (the planned pods). ``gather(get, needs)`` reads them through the same
``get(path) -> dict | None`` as cluster_facts.gather (None = absent or not readable); ``evaluate`` is pure and
returns one line per unmet need, naming the object, what was found and what to do.

What the scheduler and the kubelet would otherwise only say on the pods, after the wait:
- a claim that does not exist, is not bound and cannot bind, or is smaller than the weights: kube-scheduler's
  VolumeBinding plugin leaves the pod Pending (``persistentvolumeclaim "<name>" not found``, ``unbound immediate
  PersistentVolumeClaims``; kubernetes v1.36 pkg/scheduler/framework/plugins/volumebinding);
- GPUs and RDMA devices present but held by other pods (other sites included): NodeResourcesFit counts the
  requests of every pod bound to a node, whatever its phase until it ends (``Insufficient nvidia.com/gpu``;
  a pod already being deleted is counted free here: its devices come back within its grace period;
  pkg/scheduler/framework/plugins/noderesources/fit.go), and a cordoned node (``spec.unschedulable``) or one
  that is not Ready takes no new pod (NodeUnschedulable plugin; the node lifecycle controller's
  ``node.kubernetes.io/not-ready`` taint).
A Secret is never read into the result: only its type and the names of its keys.
"""

from __future__ import annotations

from urllib.parse import quote

from . import cluster_facts as cf

# every pod that may hold a device: the ones that have not ended (Pending pods bound to a node hold theirs too)
PODS_PATH = "/api/v1/pods?fieldSelector=" + quote("status.phase!=Succeeded,status.phase!=Failed", safe="=")
SHARED_ACCESS = ("ReadWriteMany", "ReadOnlyMany")
HELD_SHOWN = 6


def _key(namespace, name):
    return f"{namespace}/{name}"


def paths(needs: dict) -> list[str]:
    out = [f"/api/v1/namespaces/{c['namespace']}/persistentvolumeclaims/{c['name']}" for c in needs.get("claims") or []]
    out += [f"/api/v1/namespaces/{s['namespace']}/secrets/{s['name']}" for s in needs.get("secrets") or []]
    return out + [PODS_PATH]


def summarize_claim(pvc: dict) -> dict:
    spec, status = pvc.get("spec") or {}, pvc.get("status") or {}
    return {
        "phase": status.get("phase") or "Pending",
        "capacity": (status.get("capacity") or {}).get("storage"),
        "requested": ((spec.get("resources") or {}).get("requests") or {}).get("storage"),
        "access_modes": list(status.get("accessModes") or spec.get("accessModes") or []),
        "storage_class": spec.get("storageClassName"),
        "volume": spec.get("volumeName"),
    }


def summarize_secret(secret: dict) -> dict:
    """The type and key names of a Secret (never a value)."""
    return {
        "type": secret.get("type"),
        "keys": sorted(set(secret.get("data") or {}) | set(secret.get("stringData") or {})),
    }


def _device(resource: str) -> bool:
    return resource in cf.GPU_RESOURCES or resource.startswith(cf.RDMA_RESOURCE_PREFIXES)


def pod_requests(pod: dict) -> dict:
    """The extended resources (GPUs, RDMA devices) a pod holds on its node: the containers' requests (limits when a
    request is not set) and the largest init container's, as the scheduler counts them."""
    spec = pod.get("spec") or {}

    def of(container):
        res = container.get("resources") or {}
        both = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        return {
            k: int(cf.quantity(v))
            for k, v in both.items()
            if k in cf.GPU_RESOURCES or k.startswith(cf.RDMA_RESOURCE_PREFIXES)
        }

    total: dict = {}
    for c in spec.get("containers") or []:
        for k, v in of(c).items():
            total[k] = total.get(k, 0) + v
    for c in spec.get("initContainers") or []:
        for k, v in of(c).items():
            total[k] = max(total.get(k, 0), v)
    return {k: v for k, v in total.items() if v > 0}


def gather(get, needs: dict) -> dict:
    """Read the claims, Secrets and device-holding pods ``needs`` (``requirements.serving``) asks about."""
    cf.prefetch(get, paths(needs))
    claims = {}
    for c in needs.get("claims") or []:
        pvc = get(f"/api/v1/namespaces/{c['namespace']}/persistentvolumeclaims/{c['name']}")
        claims[_key(c["namespace"], c["name"])] = summarize_claim(pvc) if pvc else None
    secrets = {}
    for s in needs.get("secrets") or []:
        obj = get(f"/api/v1/namespaces/{s['namespace']}/secrets/{s['name']}")
        secrets[_key(s["namespace"], s["name"])] = summarize_secret(obj) if obj else None
    held = []
    for pod in (get(PODS_PATH) or {}).get("items") or []:
        meta, node = pod.get("metadata") or {}, (pod.get("spec") or {}).get("nodeName")
        holds = pod_requests(pod)
        # a pod being deleted frees its devices within its grace period: counted free, as a re-run after a
        # teardown would otherwise stop on the site's own pods still terminating
        if node and holds and not meta.get("deletionTimestamp"):
            held.append({"namespace": meta.get("namespace"), "name": meta.get("name"), "node": node, "holds": holds})
    return {"claims": claims, "secrets": secrets, "held": held}


def _gib(value) -> float:
    return round(cf.quantity(value) / 2**30, 1)


def claim_gaps(facts: dict, serving: dict, needs: dict) -> list[str]:
    """One line per pvc:// claim that is missing, cannot bind, is too small or cannot be shared by the pods."""
    modes = {c["name"]: c.get("binding_mode") for c in facts.get("storage_classes") or []}
    out = []
    for c in needs.get("claims") or []:
        what = f"PersistentVolumeClaim {c['namespace']}/{c['name']}"
        uses = ", ".join(f"{m} (pvc://{c['name']}/{p})" for m, p in zip(c["models"], c["paths"], strict=True))
        need = f"{c['weights_gib']:g} GiB" if c["weights_gib"] else "the weights"
        seen = serving["claims"].get(_key(c["namespace"], c["name"]))
        if seen is None:
            out.append(
                f"{what} (the weights of {uses}) does not exist: every pod of the model would stay Pending "
                f'(persistentvolumeclaim "{c["name"]}" not found). Create it in namespace {c["namespace"]}, '
                f"ReadWriteMany or ReadOnlyMany, at least {need}, and copy the weights to its path before "
                "converging (the inventory's README says how), or point artifact.uri at an OCI image"
            )
            continue
        phase = seen["phase"]
        if phase == "Lost" or (phase == "Pending" and modes.get(seen["storage_class"]) != "WaitForFirstConsumer"):
            out.append(
                f"{what} is {phase} (storage class {seen['storage_class']!r}, volume {seen['volume'] or 'none'}): "
                "a pod whose claim is not bound is never scheduled. Bind it to a volume that holds the weights "
                "(a class that provisions it, or a PersistentVolume whose claimRef names it), then converge again"
            )
            continue
        size = seen["capacity"] if phase == "Bound" else seen["requested"]
        if c["weights_gib"] and size and cf.quantity(size) < c["weights_gib"] * 2**30:
            out.append(
                f"{what} holds {size} ({_gib(size):g} GiB); the weights of {uses} are {need} (the plan's "
                "weights.total_gib): the copy cannot fit. Use a claim of at least that size"
            )
        if c["pods"] > 1 and not set(seen["access_modes"]) & set(SHARED_ACCESS):
            out.append(
                f"{what} is {'/'.join(seen['access_modes']) or 'of no access mode'}; {c['pods']} pods of {uses} "
                "mount it and the plan places them on different nodes: a claim only one node mounts leaves the "
                "others Pending. Use a ReadWriteMany or ReadOnlyMany claim"
            )
    return out


def secret_gaps(serving: dict, needs: dict, warnings: list) -> list[str]:
    """Secrets that exist without the keys the site reads (unmet), or are missing (unmet when ``required``, else a
    warning naming what does not work until they exist)."""
    out = []
    for s in needs.get("secrets") or []:
        what = f"Secret {s['namespace']}/{s['name']}"
        seen = serving["secrets"].get(_key(s["namespace"], s["name"]))
        keys = ", ".join(s["keys"]) or "one key per client"
        if seen is None:
            line = (
                f"{what} does not exist (or these credentials cannot read it): it holds {s['for']}. Create it "
                f"(keys: {keys}); it is not created by this collection"
            )
            (out if s["required"] else warnings).append(line)
            continue
        missing = [k for k in s["keys"] if k not in seen["keys"]]
        if missing or not seen["keys"]:
            out.append(
                f"{what} has keys {', '.join(seen['keys']) or 'none'}; the site reads {keys} ({s['for']}): "
                f"add {', '.join(missing) or 'a key'} to it, or name a Secret that has them"
            )
    return out


def free_nodes(facts: dict, serving: dict, own: list) -> tuple[list[dict], dict]:
    """The GPU nodes as cluster_facts.placement_nodes sees them, with the GPUs free now: allocatable minus what
    the pods bound to the node hold (the site's own namespaces excepted: its pods are replaced by the plan's), none
    on a node that takes no new pod. Also {node: [(pod, GPUs held)]} for the message."""
    held: dict = {}
    rdma_held: dict = {}
    by_node: dict = {}
    for pod in serving["held"]:
        if pod["namespace"] in own:
            continue
        gpus = sum(v for k, v in pod["holds"].items() if k in cf.GPU_RESOURCES)
        held[pod["node"]] = held.get(pod["node"], 0) + gpus
        for k, v in pod["holds"].items():
            if k.startswith(cf.RDMA_RESOURCE_PREFIXES):
                rdma_held[(pod["node"], k)] = rdma_held.get((pod["node"], k), 0) + v
        if gpus:
            by_node.setdefault(pod["node"], []).append((_key(pod["namespace"], pod["name"]), gpus))
    summaries = {n["name"]: n for n in facts["nodes"]}
    out = []
    for n in cf.placement_nodes(facts):
        s = summaries[n["name"]]
        have = s["gpu"]["allocatable"] or s["gpu"]["count"]
        usable = s.get("schedulable", True) and s.get("ready", True)
        devices = s.get("rdma_allocatable") or {}
        rdma_free = any(v - rdma_held.get((n["name"], k), 0) > 0 for k, v in devices.items()) if devices else n["rdma"]
        out.append(
            {
                **n,
                "gpus": max(have - held.get(n["name"], 0), 0) if usable else 0,
                "total": have,
                "rdma": bool(n["rdma"] and rdma_free),
                "why": "" if usable else ("cordoned" if not s.get("schedulable", True) else "not Ready"),
            }
        )
    return out, by_node


def _held_text(nodes: list[dict], by_node: dict) -> str:
    pods = sorted(((n["name"], p, g) for n in nodes for p, g in by_node.get(n["name"]) or []), key=lambda x: -x[2])
    shown = ", ".join(f"{p} holds {g} on {node}" for node, p, g in pods[:HELD_SHOWN])
    return shown + (f" and {len(pods) - HELD_SHOWN} more pod(s)" if len(pods) > HELD_SHOWN else "")


def free_gaps(facts: dict, serving: dict, req: dict) -> list[str]:
    """The plan's pods packed on the GPUs free now (cluster_facts.pack_pods): one line per GPU type whose pods do not
    all fit, with the GPUs needed and free, and the pods that hold the rest."""
    pods = [p for p in req.get("pods") or [] if int(p.get("count") or 0) > 0 and int(p.get("gpus") or 0) > 0]
    if not pods or not facts["gpus"]["observable"]:
        return []
    own = (req.get("serving") or {}).get("own_namespaces") or []
    nodes, by_node = free_nodes(facts, serving, own)
    _placed, unplaced = cf.pack_pods(nodes, pods)
    out = []
    for gpu in sorted({p["gpu"] for p in unplaced}):
        room = [n for n in nodes if cf._node_has(n, gpu)]
        need = sum(int(p["count"]) * int(p["gpus"]) for p in pods if p["gpu"] == gpu)
        plan = ", ".join(
            f"{p['model']} {p['role']} {p['count']} x {p['gpus']}" + (" + RDMA" if p.get("rdma") else "")
            for p in pods
            if p["gpu"] == gpu
        )
        free = ", ".join(
            f"{n['name']} {n['gpus']} of {n['total']}" + (f" ({n['why']})" if n["why"] else "") for n in room[:8]
        ) + (f" and {len(room) - 8} more" if len(room) > 8 else "")
        holders = _held_text(room, by_node)
        out.append(
            f"GPUs free now: the plan's {gpu} pods ({plan}) need {need} x {gpu}, each pod's on one node; "
            f"{sum(n['gpus'] for n in room)} of {sum(n['total'] for n in room)} are free now ({free or 'no node'})"
            + (f"; held by {holders}" if holders else "")
            + "; valid: free them (scale down or remove those workloads, uncordon the nodes), or a plan for the GPUs "
            "that are free (hardware.nodes, hardware.gpus_per_node)"
        )
    return out


# the static checks whose failure already says the GPUs are not there at all (cluster_facts.evaluate)
_GPU_LINES = ("GPUs:", "GPU nodes:", "Placement:")


def evaluate(facts: dict, serving: dict, req: dict, unmet: list) -> list[str]:
    """Every unmet serving need (claims, Secrets, GPUs free now); warnings go to ``facts["warnings"]``. ``unmet``:
    what cluster_facts.evaluate found (the free-GPU check is left out when the GPUs are not there at all)."""
    needs = req.get("serving") or {}
    out = claim_gaps(facts, serving, needs) + secret_gaps(serving, needs, facts["warnings"])
    if not any(u.startswith(_GPU_LINES) for u in unmet):
        out += free_gaps(facts, serving, req)
    return out
