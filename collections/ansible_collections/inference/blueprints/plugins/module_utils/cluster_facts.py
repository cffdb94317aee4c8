# Copyright: (c) 2026, inference.blueprints maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cluster facts for preflight: read once, summarise, compare with the plan.

``gather(get)`` reads a cluster through a tiny ``get(path) -> dict | None`` callable
(None = 404), so that the reading and the evaluation can be unit-tested from dicts.
``facts_from_inventory(hardware)`` builds the same shape from inventory values only
(``delivery: render``). ``evaluate(facts, requirements)`` returns the list of unmet
requirements, one human-readable line each.

Label and field names (sources):
- GFD: ``nvidia.com/gpu.product|count|memory`` (NVIDIA/k8s-device-plugin internal/lm/resource.go)
- GPU operator: ``nvidia.com/gpu.present``; NFD ``feature.node.kubernetes.io/pci-10de.present``
  (gpu-operator v26.7.0 controllers/state_manager.go gpuNodeLabels)
- NFD RDMA: ``feature.node.kubernetes.io/rdma.capable|available`` (node-feature-discovery v0.19.0)
- ClusterVersion ``status.desired.version`` / ``status.history``; Infrastructure
  ``status.controlPlaneTopology`` (openshift/api release-4.22 config/v1)
"""

from __future__ import annotations

import re

from . import ownership

NFD_PREFIX = "feature.node.kubernetes.io/"
GPU_PCI_LABELS = (
    NFD_PREFIX + "pci-10de.present",
    NFD_PREFIX + "pci-0302_10de.present",
    NFD_PREFIX + "pci-0300_10de.present",
)
NIC_PCI_LABELS = (
    NFD_PREFIX + "pci-15b3.present",
    NFD_PREFIX + "pci-0200_15b3.present",
    NFD_PREFIX + "pci-0207_15b3.present",
)
RDMA_LABELS = (
    NFD_PREFIX + "rdma.capable",
    NFD_PREFIX + "custom-rdma.capable",
    NFD_PREFIX + "rdma.available",
    NFD_PREFIX + "custom-rdma.available",
)
# Our own NodeFeatureRule (role nfd) publishes this label.
BLUEPRINT_RDMA_LABEL = NFD_PREFIX + "inference-blueprints.rdma"
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
RDMA_RESOURCE_PREFIXES = ("rdma/", "openshift.io/", "nvidia.com/hostdev")

# OpenShift AI's operator names the vLLM image of its LLMInferenceService presets, and that image's vLLM version, in
# the environment of its CSV's deployment (rhods-operator.3.5.0: vllm-cuda-rhel9 and 0.24.0+rhaiv.9;
# red-hat-data-services/RHOAI-Build-Config branch rhoai-3.5,
# bundle/manifests/rhods-operator.clusterserviceversion.yaml).
ENGINE_IMAGE_ENV = "RELATED_IMAGE_RHAII_VLLM_CUDA_IMAGE"
ENGINE_VERSION_ENV = ENGINE_IMAGE_ENV + "_UPSTREAM_VERSION"

# Groups whose served versions we always record (the ones the blueprints use).
DEFAULT_GROUPS = (
    "config.openshift.io",
    "operators.coreos.com",
    "packages.operators.coreos.com",
    "machineconfiguration.openshift.io",
    "route.openshift.io",
    "monitoring.coreos.com",
    "nfd.openshift.io",
    "nfd.k8s-sigs.io",
    "nvidia.com",
    "mellanox.com",
    "nv-ipam.nvidia.com",
    "sriovnetwork.openshift.io",
    "k8s.cni.cncf.io",
    "dscinitialization.opendatahub.io",
    "datasciencecluster.opendatahub.io",
    "serving.kserve.io",
    "gateway.networking.k8s.io",
    "inference.networking.k8s.io",
    "inference.networking.x-k8s.io",
    "leaderworkerset.x-k8s.io",
    "operator.openshift.io",
    "keda.sh",
    "argoproj.io",
    "storage.k8s.io",
    "apps",
)


def _labels(obj):
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def _truthy(value):
    return str(value).lower() == "true"


def _int(value, default=0):
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return default


_SUFFIXES = {
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "m": 0.001,
}


def quantity(value):
    """A Kubernetes resource quantity ("8", "1k", "500m", "64Gi") as a number; 0 when unparsable."""
    m = re.fullmatch(r"\s*([0-9.]+)([a-zA-Z]*)\s*", str(value or ""))
    if not m or (m.group(2) and m.group(2) not in _SUFFIXES):
        return 0
    try:
        return float(m.group(1)) * _SUFFIXES.get(m.group(2), 1)
    except ValueError:
        return 0


def summarize_node(node):
    """Reduce a Node to the facts preflight and the roles use."""
    labels = _labels(node)
    status = node.get("status") or {}
    capacity = status.get("capacity") or {}
    allocatable = status.get("allocatable") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))
    gpu_resource_count = max((int(quantity(allocatable.get(r, capacity.get(r)))) for r in GPU_RESOURCES), default=0)
    label_count = _int(labels.get("nvidia.com/gpu.count"))
    pci_gpu = any(_truthy(labels.get(k)) for k in GPU_PCI_LABELS)
    gpu_present = _truthy(labels.get("nvidia.com/gpu.present")) or pci_gpu or gpu_resource_count > 0 or label_count > 0
    product = labels.get("nvidia.com/gpu.product") or labels.get("amd.com/gpu.product-name") or ""
    count = label_count or gpu_resource_count
    resources = {**capacity, **allocatable}
    rdma_resources = sorted(k for k, v in resources.items() if k.startswith(RDMA_RESOURCE_PREFIXES) and quantity(v) > 0)
    rdma_labels = sorted(k for k in RDMA_LABELS + (BLUEPRINT_RDMA_LABEL,) if _truthy(labels.get(k)))
    mellanox = any(_truthy(labels.get(k)) for k in NIC_PCI_LABELS)
    node_info = status.get("nodeInfo") or {}
    return {
        "name": (node.get("metadata") or {}).get("name"),
        "roles": roles,
        "gpu": {
            "present": gpu_present,
            "product": product,
            "count": count,
            "count_known": count > 0,
            "memory_mib": _int(labels.get("nvidia.com/gpu.memory")),
            "allocatable": gpu_resource_count,
            "mig_capable": _truthy(labels.get("nvidia.com/mig.capable")),
        },
        "nic": {
            "mellanox": mellanox,
            "rdma": bool(rdma_labels or rdma_resources),
            "rdma_labels": rdma_labels,
            "rdma_resources": rdma_resources,
            "sriov_capable": any(_truthy(v) for k, v in labels.items() if k.endswith(".sriov.capable")),
        },
        # what the scheduler places new pods on now (serving_preflight counts free GPUs on these only)
        "schedulable": not bool((node.get("spec") or {}).get("unschedulable")),
        "ready": all(c.get("status") == "True" for c in status.get("conditions") or [] if c.get("type") == "Ready"),
        "rdma_allocatable": {
            k: int(quantity(v)) for k, v in allocatable.items() if k.startswith(RDMA_RESOURCE_PREFIXES)
        },
        "kernel": node_info.get("kernelVersion"),
        "os_image": node_info.get("osImage"),
        "kubelet": node_info.get("kubeletVersion"),
    }


def gpu_matches(catalog_id, product):
    """True when a GFD product label (e.g. NVIDIA-H100-80GB-HBM3) is the catalog GPU (e.g. h100).

    Every dash-separated token of the catalog id must appear in the product as a token
    (rtx-pro-6000 -> RTX-PRO-6000-Blackwell-Server-Edition; a100-80gb -> A100-SXM4-80GB).
    """
    if not catalog_id or not product:
        return False
    tokens = set(re.split(r"[-_ ]+", product.lower()))
    return all(t in tokens for t in catalog_id.lower().split("-"))


def _version_tuple(version):
    parts = re.findall(r"\d+", str(version or ""))[:3]
    return tuple(int(p) for p in parts) if parts else ()


def _openshift_version(cv):
    status = (cv or {}).get("status") or {}
    for entry in status.get("history") or []:
        if entry.get("state") == "Completed" and entry.get("version"):
            return entry["version"]
    return (status.get("desired") or {}).get("version")


# CRDs whose schema differs between operator releases in ways the roles render for: the
# property paths they serve are recorded (``crd_fields``), so a role can render for the schema
# the cluster actually has (for example ClusterPolicy driver.kernelModuleType, added in GPU
# operator v25.3, versus the older useOpenKernelModules).
SCHEMA_CRDS = (
    "clusterpolicies.nvidia.com",
    "nicclusterpolicies.mellanox.com",
    "datascienceclusters.datasciencecluster.opendatahub.io",
    "dscinitializations.dscinitialization.opendatahub.io",
)


def schema_paths(schema, prefix="", depth=4):
    """Dotted property paths of an OpenAPI v3 schema, down to ``depth`` levels."""
    out = []
    if depth <= 0 or not isinstance(schema, dict):
        return out
    for name, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}.{name}" if prefix else name
        out.append(path)
        out.extend(schema_paths(sub, path, depth - 1))
    return out


def _crd_path(name):
    return f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"


def prefetch(get, paths):
    """Let a reader that can read concurrently (``get.prefetch``, k8s_facts.reader) read ``paths``
    at once; the reads that follow then come from what it kept. A plain callable reads each path
    when asked, as before."""
    ahead = getattr(get, "prefetch", None)
    if ahead is not None:
        ahead(list(paths))


def crd_fields(get, names=SCHEMA_CRDS):
    fields = {}
    for name in names:
        crd = get(_crd_path(name))
        if not crd:
            continue
        versions = (crd.get("spec") or {}).get("versions") or []
        storage = next((v for v in versions if v.get("storage")), versions[0] if versions else {})
        schema = ((storage.get("schema") or {}).get("openAPIV3Schema") or {}).get("properties") or {}
        fields[name] = sorted(schema_paths(schema.get("spec") or {}, "spec"))
    return fields


def gather_api(get):
    """Served API groups and versions and the schema fields of SCHEMA_CRDS (the 'api' subset)."""
    api_groups = {"": {"versions": ["v1"], "preferred": "v1"}}
    for group in (get("/apis") or {}).get("groups") or []:
        versions = [v["version"] for v in group.get("versions") or []]
        api_groups[group["name"]] = {
            "versions": versions,
            "preferred": (group.get("preferredVersion") or {}).get("version"),
        }
    served = {g: v["versions"] for g, v in api_groups.items()}
    return {
        "api_groups": api_groups,
        "served": served,
        "served_api_versions": sorted(f"{g}/{v}" if g else v for g, vs in served.items() for v in vs),
        "crd_fields": crd_fields(get),
    }


def identity(cv, namespaces):
    """What tells one cluster from another, whatever URL or credentials reach it: OpenShift's ClusterVersion
    ``spec.clusterID`` and the UID of the kube-system namespace (created once, with the cluster)."""
    ks = next((n for n in namespaces if (n.get("metadata") or {}).get("name") == "kube-system"), None)
    return {
        "cluster_id": ((cv or {}).get("spec") or {}).get("clusterID"),
        "kube_system_uid": ((ks or {}).get("metadata") or {}).get("uid"),
    }


def shared_clusters(identities, intended=None):
    """The hosts of one site that reach the same cluster: one line per such group, naming the hosts and what
    they share, unless every host of the group names the others in ``same_cluster_as`` (``intended``:
    {host: [hosts]}). ``identities``: {host: identity (see ``identity``) or None (not read)}."""
    groups = {}
    for host in sorted(identities):
        ident = identities[host] or {}
        key = ident.get("cluster_id") or ident.get("kube_system_uid")
        if key:
            groups.setdefault(key, []).append(host)
    intended = intended or {}
    out = []
    for hosts in (groups[k] for k in sorted(groups)):
        if len(hosts) < 2:
            continue
        if all(set(hosts) - {h} <= set(intended.get(h) or ()) for h in hosts):
            continue
        ident = identities[hosts[0]] or {}
        what = (
            f"ClusterVersion clusterID {ident['cluster_id']}"
            if ident.get("cluster_id")
            else f"kube-system namespace uid {ident.get('kube_system_uid')}"
        )
        out.append(
            f"hosts {', '.join(hosts)} reach the same cluster ({what}): their objects would overwrite each other's. "
            "Give each host its own cluster (k8s_kubeconfig / k8s_context per host, or K8S_AUTH_KUBECONFIG); if they "
            "are meant to share it, set same_cluster_as on each of them naming the others"
        )
    return out


def independent_reads(served_groups, packages=()):
    """The paths ``gather`` reads whose choice depends only on the served groups: read ahead at
    once (a path missing here is still read, one at a time)."""
    paths = [_crd_path(name) for name in SCHEMA_CRDS]
    if "config.openshift.io" in served_groups:
        paths += [
            "/apis/config.openshift.io/v1/clusterversions/version",
            "/apis/config.openshift.io/v1/infrastructures/cluster",
        ]
    paths += ["/api/v1/namespaces", "/api/v1/nodes", "/apis/storage.k8s.io/v1/storageclasses"]
    if "operators.coreos.com" in served_groups:
        paths += [
            "/apis/operators.coreos.com/v1alpha1/subscriptions",
            "/apis/operators.coreos.com/v1alpha1/clusterserviceversions",
        ]
    if "packages.operators.coreos.com" in served_groups:
        paths += [
            f"/apis/packages.operators.coreos.com/v1/namespaces/openshift-marketplace/packagemanifests/{pkg}"
            for pkg in packages
        ]
    if "machineconfiguration.openshift.io" in served_groups:
        paths.append("/apis/machineconfiguration.openshift.io/v1/machineconfigpools")
    paths.append("/api/v1/namespaces/openshift-monitoring/configmaps/cluster-monitoring-config")
    return paths


def gather(get, groups=DEFAULT_GROUPS, packages=()):
    """Read every fact preflight needs. ``get(path)`` returns parsed JSON or None on 404."""
    facts = {"source": "cluster", "warnings": []}
    served_groups = {g.get("name") for g in (get("/apis") or {}).get("groups") or []}
    prefetch(get, independent_reads(served_groups, packages))
    facts.update(gather_api(get))
    api_groups = facts["api_groups"]

    resources = {}
    for group in groups:
        for version in api_groups.get(group, {}).get("versions", []):
            listing = get(f"/apis/{group}/{version}") or {}
            for res in listing.get("resources") or []:
                if "/" in res.get("name", ""):
                    continue
                resources[f"{group}/{version}/{res['kind']}"] = {
                    "plural": res["name"],
                    "namespaced": bool(res.get("namespaced")),
                }
    facts["api_resources"] = resources

    openshift = "config.openshift.io" in api_groups
    facts["openshift"] = openshift
    cv = get("/apis/config.openshift.io/v1/clusterversions/version") if openshift else None
    facts["openshift_version"] = _openshift_version(cv)
    facts["openshift_channel"] = ((cv or {}).get("spec") or {}).get("channel")
    infra = get("/apis/config.openshift.io/v1/infrastructures/cluster") if openshift else None
    istatus = (infra or {}).get("status") or {}
    facts["control_plane_topology"] = istatus.get("controlPlaneTopology")
    facts["infrastructure_topology"] = istatus.get("infrastructureTopology")
    facts["platform"] = (istatus.get("platformStatus") or {}).get("type") or istatus.get("platform")

    namespaces = (get("/api/v1/namespaces") or {}).get("items") or []
    facts["namespaces"] = sorted((n.get("metadata") or {}).get("name") for n in namespaces)
    facts["identity"] = identity(cv, namespaces)
    nodes = [summarize_node(n) for n in (get("/api/v1/nodes") or {}).get("items") or []]
    facts["nodes"] = nodes
    facts["single_node"] = facts["control_plane_topology"] == "SingleReplica" or (
        facts["control_plane_topology"] is None and len(nodes) == 1
    )

    classes = []
    for sc in (get("/apis/storage.k8s.io/v1/storageclasses") or {}).get("items") or []:
        ann = (sc.get("metadata") or {}).get("annotations") or {}
        classes.append(
            {
                "name": sc["metadata"]["name"],
                "provisioner": sc.get("provisioner"),
                "default": _truthy(ann.get("storageclass.kubernetes.io/is-default-class")),
                "binding_mode": sc.get("volumeBindingMode") or "Immediate",
            }
        )
    facts["storage_classes"] = classes

    subscriptions = {}
    csvs = {}
    if "operators.coreos.com" in api_groups:
        for sub in (get("/apis/operators.coreos.com/v1alpha1/subscriptions") or {}).get("items") or []:
            meta, spec, st = sub.get("metadata") or {}, sub.get("spec") or {}, sub.get("status") or {}
            subscriptions[f"{meta.get('namespace')}/{meta.get('name')}"] = {
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "package": spec.get("name"),
                "channel": spec.get("channel"),
                "installed_csv": st.get("installedCSV"),
                "state": st.get("state"),
                # teardown removes only the Subscriptions the site created (module_utils/ownership.py)
                "created_by": ((meta.get("annotations") or {}).get(ownership.ANNOTATION)),
            }
        for csv in (get("/apis/operators.coreos.com/v1alpha1/clusterserviceversions") or {}).get("items") or []:
            meta = csv.get("metadata") or {}
            # OLM copies CSVs of AllNamespaces operators into every namespace; keep the original.
            if _labels(csv).get("olm.copiedFrom"):
                continue
            csvs[f"{meta.get('namespace')}/{meta.get('name')}"] = {
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "phase": (csv.get("status") or {}).get("phase"),
                "version": (csv.get("spec") or {}).get("version"),
                "engine": csv_engine(csv),
            }
    facts["subscriptions"] = subscriptions
    facts["csvs"] = csvs
    facts["operators"] = sorted({s["package"] for s in subscriptions.values() if s.get("package")})

    manifests = {}
    if "packages.operators.coreos.com" in api_groups:
        for pkg in packages:
            pm = get(f"/apis/packages.operators.coreos.com/v1/namespaces/openshift-marketplace/packagemanifests/{pkg}")
            if pm:
                st = pm.get("status") or {}
                manifests[pkg] = {
                    "default_channel": st.get("defaultChannel"),
                    "channels": [c.get("name") for c in st.get("channels") or []],
                    # the CSV a new Subscription to the channel installs (its head)
                    "heads": {c.get("name"): c.get("currentCSV") for c in st.get("channels") or [] if c.get("name")},
                    "catalog": st.get("catalogSource"),
                    "catalog_namespace": st.get("catalogSourceNamespace"),
                }
    facts["packagemanifests"] = manifests

    pools = []
    if "machineconfiguration.openshift.io" in api_groups:
        for mcp in (get("/apis/machineconfiguration.openshift.io/v1/machineconfigpools") or {}).get("items") or []:
            spec, st = mcp.get("spec") or {}, mcp.get("status") or {}
            selector = ((spec.get("machineConfigSelector") or {}).get("matchLabels")) or {}
            pools.append(
                {
                    "name": mcp["metadata"]["name"],
                    "role": selector.get("machineconfiguration.openshift.io/role", mcp["metadata"]["name"]),
                    "machine_count": _int(st.get("machineCount")),
                }
            )
    facts["machine_config_pools"] = pools

    # The cluster monitoring configuration (config.yaml), whose other settings the platform keeps
    # when it turns user-workload monitoring on (openshift/cluster-monitoring-operator).
    cm = get("/api/v1/namespaces/openshift-monitoring/configmaps/cluster-monitoring-config")
    facts["cluster_monitoring_config"] = ((cm or {}).get("data") or {}).get("config.yaml") if cm else None
    return summarize(facts)


def facts_from_inventory(hardware, openshift_version=None, single_node=None):
    """Facts from inventory values only (delivery=render: no cluster access)."""
    hw = hardware or {}
    nodes = []
    interconnect = hw.get("interconnect")
    for pool, gpu_key, per_key, count_key in (
        ("main", "gpu", "gpus_per_node", "nodes"),
        ("decode", "decode_gpu", "decode_gpus_per_node", "decode_nodes"),
    ):
        if not hw.get(gpu_key):
            continue
        for i in range(_int(hw.get(count_key), 1)):
            nodes.append(
                {
                    "name": f"inventory-{pool}-{i}",
                    "roles": ["worker"],
                    "gpu": {
                        "present": True,
                        "product": hw[gpu_key],
                        "count": _int(hw.get(per_key)),
                        "count_known": True,
                        "memory_mib": 0,
                        "allocatable": _int(hw.get(per_key)),
                        "mig_capable": False,
                        "catalog_id": hw[gpu_key],
                    },
                    "nic": {
                        "mellanox": interconnect == "rdma",
                        "rdma": interconnect == "rdma",
                        "rdma_labels": [],
                        "rdma_resources": [],
                        "sriov_capable": False,
                    },
                }
            )
    total_nodes = len(nodes)
    facts = {
        "source": "inventory",
        "warnings": ["delivery=render: no cluster access, facts come from the inventory (hardware) only"],
        "api_groups": {},
        "served": {},
        "served_api_versions": [],
        "crd_fields": {},
        "namespaces": [],
        "identity": {"cluster_id": None, "kube_system_uid": None},
        "api_resources": {},
        "openshift": True,
        "openshift_version": openshift_version,
        "openshift_channel": None,
        "control_plane_topology": None,
        "infrastructure_topology": None,
        "platform": None,
        "nodes": nodes,
        "single_node": bool(single_node) if single_node is not None else total_nodes == 1,
        "storage_classes": [],
        "subscriptions": {},
        "csvs": {},
        "operators": [],
        "packagemanifests": {},
        "machine_config_pools": [],
        "cluster_monitoring_config": None,
    }
    return summarize(facts)


def summarize(facts):
    nodes = facts["nodes"]
    gpu_nodes = [n for n in nodes if n["gpu"]["present"]]
    by_product = {}
    for n in gpu_nodes:
        key = n["gpu"]["product"] or "unknown"
        by_product[key] = by_product.get(key, 0) + n["gpu"]["count"]
    facts["gpus"] = {
        "total": sum(n["gpu"]["count"] for n in gpu_nodes),
        "nodes": len(gpu_nodes),
        "by_product": by_product,
        "observable": bool(gpu_nodes),
        "count_known": all(n["gpu"]["count_known"] for n in gpu_nodes),
    }
    facts["rdma"] = {
        "nodes": len([n for n in nodes if n["nic"]["rdma"]]),
        "gpu_nodes": len([n for n in gpu_nodes if n["nic"]["rdma"]]),
        "mellanox_nodes": len([n for n in nodes if n["nic"]["mellanox"]]),
    }
    facts["storage_class_default"] = next((c["name"] for c in facts["storage_classes"] if c["default"]), None)
    return facts


def _count_gpus(facts, catalog_id):
    """(GPUs of the type, nodes with them, the most on one node)."""
    total = 0
    nodes = 0
    largest = 0
    for n in facts["nodes"]:
        g = n["gpu"]
        if not g["present"]:
            continue
        if g.get("catalog_id") == catalog_id or gpu_matches(catalog_id, g["product"]):
            total += g["count"]
            nodes += 1
            largest = max(largest, g["count"])
    return total, nodes, largest


def _api_gap(facts, api):
    """Why a required API is not served (None when it is)."""
    served = facts["served"].get(api["group"])
    wanted = api.get("versions") or []
    why = api.get("for", "the blueprint")
    if served is None:
        return f"API group {api['group']} is not served (needed for {why})"
    if wanted and not set(wanted) & set(served):
        return (
            f"API group {api['group']} serves {', '.join(served)} but one of {', '.join(wanted)} is needed (for {why})"
        )
    kind = api.get("kind")
    for version in wanted or served:
        listed = [
            k.rsplit("/", 1)[1] for k in facts.get("api_resources") or {} if k.startswith(f"{api['group']}/{version}/")
        ]
        if kind and listed and version in served and kind not in listed:
            return f"API {api['group']}/{version} is served without the kind {kind} (needed for {why})"
    return None


def csv_engine(csv):
    """The preset engine a CSV names ({image, vllm_version}), or None: OpenShift AI's operator sets it in the
    environment of its deployment (ENGINE_IMAGE_ENV, ENGINE_VERSION_ENV)."""
    install = ((csv.get("spec") or {}).get("install") or {}).get("spec") or {}
    for dep in install.get("deployments") or []:
        pod = (((dep.get("spec") or {}).get("template") or {}).get("spec")) or {}
        for container in pod.get("containers") or []:
            env = {e.get("name"): e.get("value") for e in container.get("env") or [] if isinstance(e, dict)}
            if env.get(ENGINE_VERSION_ENV) or env.get(ENGINE_IMAGE_ENV):
                return {"image": env.get(ENGINE_IMAGE_ENV), "vllm_version": env.get(ENGINE_VERSION_ENV)}
    return None


def _minor(version):
    return ".".join(re.split(r"[+-]", str(version))[0].split(".")[:2])


def _engine_gap(facts, engine):
    """The plans' vLLM version against the engine of OpenShift AI's presets, as its CSV names it: the unmet line, or
    None (a warning is recorded when the presets' engine cannot be read)."""
    if engine.get("image"):
        return None  # the site pins its own engine image; vllm_version states that image's version
    want = engine.get("vllm_version")
    # the installed release first (an upgrade in progress lists the old and the new CSV)
    named = sorted(
        ((c.get("phase") == "Succeeded", k), c)
        for k, c in facts["csvs"].items()
        if (c.get("engine") or {}).get("vllm_version")
    )
    if not named:
        facts["warnings"].append(
            f"vLLM engine: no CSV names the vLLM version of the LLMInferenceService presets ({ENGINE_VERSION_ENV}; "
            f"OpenShift AI not installed yet, or a release that does not say): the plans' vLLM {want} flags are not "
            "checked against the engine"
        )
        return None
    (_ok, key), csv = named[-1]
    have = csv["engine"]["vllm_version"]
    if _minor(have) == _minor(want):
        return None
    base = re.split(r"[+-]", have)[0]
    stated = "vllm_version" if engine.get("stated") else "the default; the site sets no vllm_version"
    if _minor(have) in (engine.get("supported") or []):
        fix = f'set vllm_version: "{base}" so the plans use that engine\'s flags and features'
    else:
        fix = (
            f"the collection has no flag set for vLLM {_minor(have)} (supported: "
            f"{', '.join(engine.get('supported') or [])}); install an OpenShift AI release whose engine is one of them"
        )
    return (
        f"vLLM engine: the plans are written for vLLM {want} ({stated}), but the LLMInferenceService presets of "
        f"{csv['name']} ({key}) run vLLM {have} ({ENGINE_VERSION_ENV}), which may refuse their flags; {fix}"
    )


def evaluate(facts, requirements):  # noqa: PLR0912 - one branch per kind of requirement
    """Every unmet requirement, one line each (empty list = ready).

    ``requirements`` is what the deployment intent says the site needs (intent/platform.py
    decides it; see ``requirements_from_plans``): openshift_min/max, apis, gpus, pods (placement),
    rdma, single_node, storage_class, allow_unobserved_gpus.
    """
    req = requirements or {}
    unmet = []

    version = facts.get("openshift_version")
    vmin, vmax = req.get("openshift_min"), req.get("openshift_max")
    if not facts.get("openshift"):
        unmet.append("OpenShift: API group config.openshift.io is not served (not an OpenShift cluster)")
    elif not version:
        if facts.get("source") == "cluster":
            unmet.append("OpenShift version: ClusterVersion 'version' has no status.desired.version or history")
    else:
        v = _version_tuple(version)[:2]
        if vmin and v < _version_tuple(vmin)[:2]:
            unmet.append(f"OpenShift version {version} is older than the supported minimum {vmin}")
        if vmax and v > _version_tuple(vmax)[:2]:
            unmet.append(f"OpenShift version {version} is newer than the supported maximum {vmax}")

    if facts.get("source") == "cluster":
        for api in req.get("apis") or []:
            gap = _api_gap(facts, api)
            if gap:
                unmet.append(gap)

    gpu_unobserved_ok = bool(req.get("allow_unobserved_gpus"))
    for need in req.get("gpus") or []:
        gpu, count = need["gpu"], _int(need.get("count"))
        if count <= 0:
            continue
        have, nodes, largest = _count_gpus(facts, gpu)
        if not facts["gpus"]["observable"] and gpu_unobserved_ok:
            facts["warnings"].append(
                f"GPUs: no node shows GPU labels or capacity yet; {count} x {gpu} needed, "
                "not verifiable before NFD and the GPU operator run"
            )
            continue
        if have < count:
            seen = ", ".join(f"{p}: {c}" for p, c in sorted(facts["gpus"]["by_product"].items())) or "none"
            unmet.append(
                f"GPUs: {count} x {gpu} needed ({need.get('for', 'the plan')}), {have} found on {nodes} node(s) "
                f"(cluster GPUs by product: {seen})"
            )
        elif _int(need.get("per_pod")) > largest:
            unmet.append(
                f"GPUs: a pod needs {_int(need.get('per_pod'))} x {gpu} on one node ({need.get('for', 'the plan')}); "
                f"the most {gpu} GPUs on one node is {largest}"
            )

    short = _node_gap(facts, req.get("gpu_nodes"))
    if short:
        unmet.append(short)  # fewer nodes than the plan was sized for: packing its pods would only repeat it
    else:
        unmet.extend(placement_gap(facts, req))

    rdma = req.get("rdma")
    if rdma:
        unmet.extend(_rdma_gap(facts, req, rdma))

    single = req.get("single_node")
    if single is not None and facts.get("source") == "cluster" and bool(single) != bool(facts.get("single_node")):
        want = "Single Node OpenShift" if single else "a multi-node cluster"
        unmet.append(
            f"Topology: the blueprint needs {want}; Infrastructure 'cluster' reports "
            f"controlPlaneTopology={facts.get('control_plane_topology')} with {len(facts['nodes'])} node(s)"
        )

    if req.get("engine") and facts.get("source") == "cluster":
        gap = _engine_gap(facts, req["engine"])
        if gap:
            unmet.append(gap)

    if req.get("storage_class") and facts.get("source") == "cluster" and not facts["storage_classes"]:
        unmet.append("Storage: the plan stages models on a PVC but no StorageClass exists")
    return unmet


def _gpu_nodes(facts, gpu):
    """The nodes that show ``gpu`` (catalog id) by GFD's product label or our catalog match."""
    return [
        n
        for n in facts["nodes"]
        if n["gpu"]["present"] and (n["gpu"].get("catalog_id") == gpu or gpu_matches(gpu, n["gpu"]["product"]))
    ]


def _node_gap(facts, need):
    """The inventory describes more nodes of its GPU than the cluster shows: the plan was sized for nodes that are
    not there (a line naming hardware.nodes), else None. Only where GPUs are observable."""
    if not need or not need.get("gpu") or facts.get("source") != "cluster" or not facts["gpus"]["observable"]:
        return None
    want, gpu = _int(need.get("nodes"), 1), need["gpu"]
    have = _gpu_nodes(facts, gpu)
    if len(have) >= want:
        return None
    return (
        f"GPU nodes: hardware.nodes says {want} node(s) with {gpu} GPUs, the cluster shows {len(have)}"
        + (f" ({', '.join(n['name'] for n in have)})" if have else "")
        + f"; valid: hardware.nodes {max(len(have), 1)} or less (the plan is sized for the nodes the inventory "
        "describes)"
    )


def _rdma_gap(facts, req, rdma):
    """The RDMA requirement, counted on the nodes of the GPUs the plan uses (RDMA NICs on other
    GPU nodes do not carry this plan's KV): [] when met, else one line saying what is missing."""
    want_nodes = _int(rdma.get("nodes"), 1) if isinstance(rdma, dict) else 1
    planned = [need["gpu"] for need in req.get("gpus") or [] if _int(need.get("count")) > 0]
    if not facts["gpus"]["observable"]:
        if facts["rdma"]["nodes"] >= want_nodes:
            return []
        if req.get("allow_unobserved_gpus") and facts["rdma"]["mellanox_nodes"]:
            facts["warnings"].append("RDMA: Mellanox NICs found; RDMA not verifiable before the network operator")
            return []
        pool, have_nodes = [], facts["rdma"]["nodes"]
    else:
        pool = [
            n
            for n in facts["nodes"]
            if n["gpu"]["present"]
            and (
                not planned
                or any(n["gpu"].get("catalog_id") == g or gpu_matches(g, n["gpu"]["product"]) for g in planned)
            )
        ]
        have_nodes = len([n for n in pool if n["nic"]["rdma"]])
        # fewer GPU nodes than the inventory says is its own gap (_node_gap): RDMA counts on the nodes there are
        if have_nodes >= min(want_nodes, len(pool)) and pool:
            return []
    why = rdma.get("why", "interconnect rdma") if isinstance(rdma, dict) else "rdma"
    which = f"{have_nodes} of {len(pool)} {'/'.join(planned)} node(s)" if pool else f"{have_nodes} GPU node(s)"
    elsewhere = sorted({n["gpu"]["product"] or "unknown" for n in facts["nodes"] if n["nic"]["rdma"] and n not in pool})
    return [
        f"RDMA: the plan uses RDMA ({why}) on {want_nodes} GPU node(s); {which} show RDMA "
        f"(NFD label rdma.capable, {BLUEPRINT_RDMA_LABEL}, or an rdma/* / openshift.io/* device resource)"
        + (f"; the RDMA NICs are on other nodes ({', '.join(elsewhere)})" if elsewhere else "")
        + "; valid: hardware.interconnect ethernet (or nvlink) when these GPUs have no RDMA NICs, or GPU nodes "
        "with RDMA NICs for the plan"
    ]


def placement_nodes(facts):
    """The GPU nodes as placement sees them: name, GPU (catalog id, or the GFD product), GPUs, RDMA NIC."""
    return [
        {
            "name": n["name"],
            "catalog_id": n["gpu"].get("catalog_id"),
            "product": n["gpu"]["product"],
            "gpus": n["gpu"]["count"],
            # the RDMA device plugin advertises the NIC once the network operator runs; NFD's Mellanox label is there
            # before (the GPU operator, whose labels make GPUs observable, runs after NFD)
            "rdma": bool(n["nic"]["rdma"] or n["nic"]["mellanox"]),
        }
        for n in facts["nodes"]
        if n["gpu"]["present"] and n["gpu"]["count"] > 0
    ]


def _node_has(node, gpu):
    return node.get("catalog_id") == gpu or gpu_matches(gpu, node["product"])


def pack_pods(nodes, pods):
    """Place every pod of ``pods`` on one of ``nodes`` the way the scheduler's resource fit allows it: a pod
    needs its GPUs of its type on one node, and a node with an RDMA NIC when it asks for an RDMA device.

    ``nodes``: ``placement_nodes``; ``pods``: ``[{model, role, gpu, gpus, rdma, count}]`` (``count`` pods of
    ``gpus`` GPUs and ``rdma`` RDMA devices each; ``platform.requirements.pods``). Largest pods first, each on
    the fitting node with the fewest GPUs left (best fit decreasing: a packing exists when this finds one for
    the few pod sizes a site has). Returns ``(nodes with their "pods" and "free", unplaced pods with the
    count that did not fit)``; the input is not changed."""
    placed = [{**n, "free": n["gpus"], "pods": []} for n in nodes]
    unplaced = []
    for pod in sorted(pods, key=lambda p: (-int(p["gpus"]), -int(p.get("rdma") or 0), p["model"], p["role"])):
        left = int(pod["count"])
        for _copy in range(int(pod["count"])):
            fits = [
                n
                for n in placed
                if _node_has(n, pod["gpu"]) and n["free"] >= int(pod["gpus"]) and (n["rdma"] or not pod.get("rdma"))
            ]
            if not fits:
                break
            node = min(fits, key=lambda n: (n["free"], n["name"]))
            node["free"] -= int(pod["gpus"])
            node["pods"].append({k: pod[k] for k in ("model", "role", "gpu", "gpus", "rdma")})
            left -= 1
        if left:
            unplaced.append({**pod, "unplaced": left})
    return placed, unplaced


def placement_gap(facts, req):
    """Preflight of the plan's pods on the cluster's GPU nodes (``req["pods"]``): every pod fits a node of its
    GPU type with room for all of its GPUs (and an RDMA NIC when it asks for a device), after the site's other
    pods; a plan that needs more GPUs per node than the nodes have stops here with the numbers, never as
    Pending pods. GPU types short in total, or of a pod larger than any node, are reported by the GPU count
    check and skipped here, and so are RDMA NICs when the RDMA check reports them missing. [] when the pods
    fit or the GPUs are not observable yet."""
    pods = [p for p in req.get("pods") or [] if int(p.get("count") or 0) > 0 and int(p.get("gpus") or 0) > 0]
    if not pods or not facts["gpus"]["observable"]:
        return []
    nodes = placement_nodes(facts)
    if req.get("rdma") and _rdma_gap(facts, req, req["rdma"]):
        nodes = [{**n, "rdma": True} for n in nodes]
    short = set()
    for gpu in {p["gpu"] for p in pods}:
        have = [n["gpus"] for n in nodes if _node_has(n, gpu)]
        need = sum(int(p["count"]) * int(p["gpus"]) for p in pods if p["gpu"] == gpu)
        if sum(have) < need or max((int(p["gpus"]) for p in pods if p["gpu"] == gpu), default=0) > max(have, default=0):
            short.add(gpu)
    placed, unplaced = pack_pods(nodes, [p for p in pods if p["gpu"] not in short])
    out = []
    for pod in unplaced:
        gpu = pod["gpu"]
        room = [n for n in placed if _node_has(n, gpu)]
        shown = ", ".join(
            f"{n['name']} {n['free']} of {n['gpus']} free"
            + ("" if n["rdma"] or not pod.get("rdma") else ", no RDMA NIC")
            for n in room[:8]
        ) + (f" and {len(room) - 8} more" if len(room) > 8 else "")
        plan = ", ".join(
            f"{p['model']} {p['role']} {p['count']} x {p['gpus']}" + (" + RDMA" if p.get("rdma") else "")
            for p in pods
            if p["gpu"] == gpu
        )
        out.append(
            f"Placement: {pod['unplaced']} of {pod['count']} {pod['model']} {pod['role']} pod(s) "
            f"({pod['gpus']} x {gpu}" + (" and an RDMA device" if pod.get("rdma") else "") + " each, on one node) "
            f"fit no node once the plan's larger pods are placed; {gpu} nodes after placing: {shown or 'none'}; "
            f"the plan's {gpu} pods: {plan}; valid: GPU nodes with room for every pod, or a plan for the nodes the "
            "cluster has (hardware.gpus_per_node, hardware.nodes)"
        )
    return out


# The APIs the serving stage needs and the platform component that installs them:
# name -> (installer, group, versions, kind). intent/platform.py decides which a site needs;
# k8s_client names the installer when a kind is not served.
SERVING_APIS = {
    "llminferenceservice": ("openshift_ai", "serving.kserve.io", ["v1alpha2"], "LLMInferenceService"),
    "inferencepool": ("openshift_ai", "inference.networking.k8s.io", ["v1"], "InferencePool"),
    # KServe v0.20.0 installs the legacy pool CRD (config/llmisvc/gateway-inference-extension.yaml);
    # its P/D decode preset starts the routing sidecar with --pool-group=inference.networking.x-k8s.io
    "legacy_inferencepool": ("openshift_ai", "inference.networking.x-k8s.io", ["v1alpha2"], "InferencePool"),
    "inferenceobjective": ("openshift_ai", "llm-d.ai", ["v1alpha2"], "InferenceObjective"),
    "leaderworkerset": ("openshift_ai", "leaderworkerset.x-k8s.io", ["v1"], "LeaderWorkerSet"),
    "scaledobject": ("autoscaling", "keda.sh", ["v1alpha1"], "ScaledObject"),
}

_REQUIREMENT_DEFAULTS = {
    "gpus": [],
    "pods": [],
    "apis": [],
    "rdma": False,
    "single_node": None,
    "storage_class": False,
    "allow_unobserved_gpus": False,
}


def requirements_from_plans(plans, hardware, components, overrides=None):
    """The requirements ``evaluate`` checks: the ones given (``overrides``), missing keys empty.

    What a site needs from its cluster is decided once, by the deployment intent
    (``intent/platform.py``, ``intent.platform.requirements``), which the preflight step passes
    whole as ``requirements``. ``plans``, ``hardware`` and ``components`` are no longer read;
    they stay in the signature for the module's arguments.
    """
    del plans, hardware, components
    req = dict(_REQUIREMENT_DEFAULTS)
    for key, value in (overrides or {}).items():
        if value is not None:
            req[key] = value
    return req
