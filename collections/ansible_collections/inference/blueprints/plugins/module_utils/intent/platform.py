# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The platform part of the deployment intent: operators, their operands, waits and requirements.

``build(intent, facts=None)`` computes ``intent["platform"]`` from the rest of the intent (the
options of the platform roles, the hardware, the plans and the serving intent) and, when given,
what a read of the cluster found (``cluster_facts``). ``bind(intent, facts)`` is the same
computation on a new cluster read: the preflight step binds once after reading the cluster, and
the platform flow binds again after its first phase installed operators (their APIs were not
served before). Without facts (``delivery: render|gitops``, the golden files) every choice takes
the newest API the collection targets. docs/platform.md lists every choice bind makes.

Everything a template of a platform role renders is decided here, once: which components run
(the network operator only when RDMA is needed), the OLM Subscriptions (package, namespace,
channel, source, install mode, the CSV to wait for), every operand value, the readiness waits
(inference.blueprints.k8s_wait specs, each with its component's timeout) and what the cluster
must offer before anything is applied (``requirements``, checked by cluster_facts).

Pure Python over plain data; no Ansible, no Jinja.
"""

from __future__ import annotations

import json
import math
import re

from .. import ownership as ownership_mod
from ..cluster_facts import SERVING_APIS
from ..planner import data as catalog
from . import preflight_needs
from .schema import IMAGE_BY_DIGEST, SchemaError

# Platform components in apply order (the network operator before the GPU operator: the GPU
# driver pods wait for the NIC driver when GPUDirect RDMA is on).
ORDER = ("nfd", "network_operator", "gpu_operator", "openshift_ai", "autoscaling", "gitops", "image_prewarm")
# CatalogSources of the default OpenShift catalogs (and of oc-mirror's disconnected ones) live here.
CATALOG_NAMESPACE = "openshift-marketplace"
OLM_SUBSCRIPTION_API = "operators.coreos.com/v1alpha1"
CRD_API = "apiextensions.k8s.io/v1"
MONITORING_NAMESPACE = "openshift-monitoring"
MONITORING_CONFIG = "cluster-monitoring-config"
# PinnedImageSet is GA from OpenShift 4.19 (openshift/api release-4.19 machineconfiguration/v1).
PINNED_IMAGES_SINCE = (4, 19)
# The MCO writes one pool synchroniser, PinnedImageSets, into MachineConfigPool
# status.poolSynchronizersStatus (openshift/machine-config-operator pkg/controller/node/status.go).
PINNED_SYNC_FIELD = "status.poolSynchronizersStatus.0.updatedMachineCount"
# CRD schema paths that differ between operator releases (cluster_facts records them: crd_fields).
CLUSTERPOLICY_CRD = "clusterpolicies.nvidia.com"
NICCLUSTERPOLICY_CRD = "nicclusterpolicies.mellanox.com"
DSC_CRD = "datascienceclusters.datasciencecluster.opendatahub.io"
# DataScienceCluster components the platform switches off, per API version (opendatahub-operator
# v3.0.0 api/datasciencecluster/v2 and rhods-operator rhoai-2.25 api/datasciencecluster/v1).
DSC_REMOVED = ("kueue", "ray", "trustyai", "workbenches", "modelregistry", "trainingoperator", "feastoperator")
DSC_REMOVED_V2 = ("llamastackoperator", "aipipelines")
DSC_REMOVED_V1 = ("llamastackoperator", "datasciencepipelines", "modelmeshserving", "codeflare")
CORE = ["v1"]  # the core API group, always served
SUBSCRIPTION_READY = "AtLatestKnown"
SUBSCRIPTION_MANUAL = ["AtLatestKnown", "UpgradePending"]
# Shared platform objects (``sharing``): the fields whose content depends on the site, merged over every site's
# claim (module_utils/claims.py): the images each site pins, GPUDirect RDMA on when any site's traffic needs it.
MERGED_FIELDS = {
    "PinnedImageSet": {"spec.pinnedImages": "union"},
    "ClusterPolicy": {"spec.driver.rdma.enabled": "any", "spec.driver.rdma.useHostMofed": "any"},
}
# the labels of a shared object name the collection, not one of the sites that claim it
SITE_LABELS = ("app.kubernetes.io/part-of", "inference.blueprints/blueprint")
SHARED_PART_OF = "inference-blueprints"


def _decision(out: list, component: str, what: str, choice, why: str) -> None:
    out.append({"component": component, "what": what, "choice": choice, "why": why})


def _version(text) -> tuple:
    parts = re.findall(r"\d+", str(text or ""))[:2]
    return tuple(int(p) for p in parts)


def _yaml(value, sort_keys: bool = False) -> str:
    import yaml  # lazy: module_utils import only the standard library at load time

    return yaml.safe_dump(value, sort_keys=sort_keys, default_flow_style=False)


def _split(api_version: str) -> tuple[str, str]:
    return tuple(api_version.split("/", 1)) if "/" in api_version else ("", api_version)


# ---------------------------------------------------------------------------- the cluster


def rdma_attachment(options: dict, serving_namespace: str) -> dict:
    """What a serving pod whose traffic crosses nodes over RDMA requests and attaches, decided once
    from the network operator's options (the serving intent and the platform both read this): the
    device resource (``rdma/<name>`` from the shared device plugin, ``openshift.io/<name>`` from
    SR-IOV) and the secondary network the platform creates for it, named ``<namespace>/<name>`` in
    the pod's ``k8s.v1.cni.cncf.io/networks`` annotation: the NetworkAttachmentDefinition the network
    operator renders from the MacvlanNetwork (Mellanox/network-operator v26.4.1
    manifests/state-macvlan-network: the MacvlanNetwork's name, in its ``networkNamespace``) or the
    SR-IOV operator from the SriovNetwork (the same rule)."""
    o, p = options["network_operator"], "network_operator_"
    sriov = o[p + "mode"] == "sriov"
    return {
        "resource": f"openshift.io/{o[p + 'sriov_resource_name']}" if sriov else f"rdma/{o[p + 'rdma_resource_name']}",
        "network": o[p + "network_name"],
        "network_namespace": o[p + "network_namespace"] or serving_namespace,
    }


class Cluster:
    """What a cluster read says, for the choices bind makes. ``facts=None``: nothing is known."""

    def __init__(self, facts: dict | None, hardware: dict, assumed_version: str | None = None):
        self.facts = facts or {}
        self.source = self.facts.get("source")
        self.live = self.source == "cluster"
        self.hardware = hardware
        # without a cluster read: the version the inventory says to assume (preflight_openshift_version)
        self.assumed_version = None if self.live else assumed_version

    # served APIs: True, False, or None when not known (no cluster read)
    def served(self, api_version: str) -> bool | None:
        if not self.live:
            return None
        group, version = _split(api_version)
        return version in (self.facts.get("served") or {}).get(group, CORE if group == "" else [])

    def kind_served(self, api_version: str, kind: str) -> bool | None:
        """Kind-level when the read listed the group's resources, else by API version."""
        served = self.served(api_version)
        if not served:
            return served
        prefix = f"{api_version}/"
        kinds = [k[len(prefix) :] for k in self.facts.get("api_resources") or {} if k.startswith(prefix)]
        return kind in kinds if kinds else True

    def crd_has(self, crd: str, path: str) -> bool | None:
        fields = (self.facts.get("crd_fields") or {}).get(crd)
        return None if not self.live or fields is None else path in fields

    @property
    def single_node(self) -> bool:
        if self.source in ("cluster", "inventory") and self.facts.get("single_node") is not None:
            return bool(self.facts["single_node"])
        hw = self.hardware
        return int(hw.get("nodes") or 1) == 1 and not hw.get("decode_gpu")

    @property
    def openshift_version(self) -> str | None:
        return self.facts.get("openshift_version") or self.assumed_version or None

    def subscription(self, namespace: str, name: str) -> dict | None:
        return (self.facts.get("subscriptions") or {}).get(f"{namespace}/{name}")

    def csv_phase(self, namespace: str, name: str | None) -> str | None:
        if not name:
            return None
        return ((self.facts.get("csvs") or {}).get(f"{namespace}/{name}") or {}).get("phase")

    def manifest(self, package: str) -> dict:
        return (self.facts.get("packagemanifests") or {}).get(package) or {}

    def pool_machines(self, pool: str) -> int | None:
        if self.facts.get("assume_present"):
            return 1  # a cluster where everything the intent may wait for exists (intent/access.py)
        for p in self.facts.get("machine_config_pools") or []:
            if p.get("name") == pool:
                return int(p.get("machine_count") or 0)
        return None

    def gpu_nodes(self) -> list[str]:
        return sorted(n["name"] for n in self.facts.get("nodes") or [] if (n.get("gpu") or {}).get("present"))

    def monitoring_config(self) -> dict | None:
        """The parsed config.yaml of openshift-monitoring/cluster-monitoring-config ({} when absent)."""
        if not self.live:
            return None
        text = self.facts.get("cluster_monitoring_config")
        if not text:
            return {}
        import yaml  # lazy, as in _yaml

        try:
            parsed = yaml.safe_load(text)
        except yaml.YAMLError:
            return None
        return parsed if isinstance(parsed, dict) else {}

    def digest(self) -> dict:
        """What the intent keeps of the read: enough to decide, at render time, which objects the
        cluster cannot take (their API is not served)."""
        if not self.live:
            return {"source": self.source, "openshift_version": self.openshift_version, "served": None, "kinds": None}
        kinds: dict[str, list] = {}
        for key in sorted(self.facts.get("api_resources") or {}):
            gv, kind = key.rsplit("/", 1)
            kinds.setdefault(gv, []).append(kind)
        return {
            "source": self.source,
            "openshift_version": self.openshift_version,
            "served": {g: list(v) for g, v in sorted((self.facts.get("served") or {}).items())},
            "kinds": kinds,
        }


# ---------------------------------------------------------------------------- components


class _Builder:
    def __init__(self, intent: dict, facts: dict | None, operators_ready: bool, dry_run: bool):
        self.intent = intent
        self.options = intent["options"]
        self.hardware = intent["hardware"]
        self.serving = intent.get("serving") or {"models": [], "namespace": intent["site"]["namespace"]}
        self.models = self.serving.get("models") or []
        assumed = self.options["preflight"]["preflight_openshift_version"] or None
        self.cluster = Cluster(facts, self.hardware, assumed)
        self.operators_ready = operators_ready
        self.dry_run = dry_run
        self.decisions: list[dict] = []
        self.notes: list[str] = []
        blueprint_components = intent["components"]
        self.rdma = self._rdma()
        self.available = self._available(blueprint_components)
        self.components = [c for c in self.available if self._deployed(c, blueprint_components)]

    # -------------------------------------------------------------- which components
    def _available(self, components) -> list[str]:
        wanted = set(components)
        if "serving_autoscaling" in wanted:
            wanted.add("autoscaling")  # ScaledObjects need KEDA
        if self.intent["site"]["delivery"] == "gitops":
            wanted.add("gitops")  # the rendered tree is synced by OpenShift GitOps
        return [c for c in ORDER if c in wanted]

    def _deployed(self, component: str, blueprint_components) -> bool:
        if component == "network_operator" and not self.rdma["needed"]:
            _decision(self.decisions, component, "deploy", False, self.rdma["why"])
            return False
        return True

    def _rdma(self) -> dict:
        """RDMA needed for this cluster: decided here, once, from the models whose pods move traffic
        between nodes over RDMA (the serving intent's per-model ``rdma``/``rdma_why``: P/D KV over
        NIXL/UCX on RDMA, or an engine whose data-parallel ranks span nodes). ``hardware.interconnect:
        rdma`` alone says the NICs are there, not that anything uses them: no network operator then."""
        why = [
            m.get("rdma_why") or f"{m['name']} moves traffic between nodes over RDMA"
            for m in self.models
            if m.get("rdma")
        ]
        needed = bool(why)
        nics = (
            "the nodes have RDMA NICs (hardware.interconnect rdma), but "
            if self.hardware.get("interconnect") == "rdma"
            else ""
        )
        out = {
            "needed": needed,
            "why": "; ".join(why)
            if needed
            else f"{nics}no model's traffic crosses nodes over RDMA: no P/D KV over RDMA, no engine spans pods",
            "nodes": int(self.hardware.get("nodes") or 1),
            "fabric": self.hardware.get("rdma_fabric") or "roce",
        }
        _decision(self.decisions, "platform", "RDMA", needed, out["why"])
        return out

    # -------------------------------------------------------------- OLM operators
    def _operator(self, component: str, spec: dict) -> dict:
        """One OLM operator. ``spec``: package, install_mode, and the option names (without the
        component prefix) of its namespace, channel and source."""
        opts, prefix = self.options[component], f"{component}_"
        package, ns = spec["package"], opts[prefix + spec["namespace"]]
        channel, source = opts[prefix + spec["channel"]], opts[prefix + spec["source"]]
        c = self.cluster
        sub = c.subscription(ns, package) or {}
        manifest = c.manifest(package)
        if channel:
            chosen, why = channel, "pinned by the inventory"
        elif manifest.get("default_channel"):
            chosen, why = manifest["default_channel"], "the catalog's default channel (PackageManifest)"
        else:
            chosen, why = None, "left out: OLM resolves the catalog's default channel itself"
        _decision(self.decisions, component, f"{package} channel", chosen, why)
        head = (manifest.get("heads") or {}).get(chosen) if chosen else None
        installed = sub.get("installed_csv")
        # a Subscription moved to another channel: its status (AtLatestKnown, the installed CSV) still speaks of the
        # old channel until OLM resolves the new one, so the installed CSV says nothing about the new channel's
        moving = bool(sub) and bool(chosen) and sub.get("channel") not in (None, chosen)
        at_latest = bool(installed) and sub.get("state") == SUBSCRIPTION_READY and not moving
        # the CSV to wait for: the installed one when OLM says it is the latest, else the head of the
        # channel, which is what OLM installs for a new Subscription (and upgrades to after a channel change)
        csv = installed if at_latest else (head or installed)
        return {
            "component": component,
            "package": package,
            "subscription": package,  # RHOAI looks its dependencies up by Subscription name
            "namespace": ns,
            "namespace_labels": dict(spec.get("labels") or {}),
            "channel": chosen,
            "source": source,
            "source_namespace": CATALOG_NAMESPACE,
            "install_mode": spec["install_mode"],
            "target_namespaces": [ns] if spec["install_mode"] == "OwnNamespace" else None,
            "approval": opts[prefix + "install_plan_approval"],
            "csv": csv,
            "installed_csv": installed,
            # teardown removes a Subscription (and its CSV) only when a site of the collection created it (its
            # claims then decide: module_utils/claims.py), or it is gone
            "ours": not sub or bool(sub.get("created_by")),
            "ready": at_latest and c.csv_phase(ns, installed) == "Succeeded",
        }

    def _operator_specs(self, component: str) -> list[dict]:
        """The OLM packages of a component (package names and install modes from each operator's CSV:
        NFD, GPU, network, SR-IOV and LWS operators are own-namespace only)."""
        opts = self.options[component]
        own, every = "OwnNamespace", "AllNamespaces"
        std = {"namespace": "namespace", "channel": "channel", "source": "source"}
        if component == "nfd":
            return [{"package": "nfd", "install_mode": own, **std}]
        if component == "network_operator":
            out = [{"package": "nvidia-network-operator", "install_mode": own, **std}]
            if opts["network_operator_mode"] == "sriov":
                sriov = {"namespace": "sriov_namespace", "channel": "sriov_channel", "source": "sriov_source"}
                out.append({"package": "sriov-network-operator", "install_mode": own, **sriov})
            return out
        if component == "gpu_operator":
            # the platform Prometheus scrapes the DCGM exporter ServiceMonitor in this namespace
            labels = {"openshift.io/cluster-monitoring": "true"}
            return [{"package": "gpu-operator-certified", "install_mode": own, "labels": labels, **std}]
        if component == "openshift_ai":
            # Dependencies first, under the Subscription names RHOAI looks up (opendatahub-operator
            # v3.5.0 pkg/cluster/operator.go SubscriptionExists; internal/controller/components/kserve).
            def dep(package, key, mode):
                return {"package": package, "install_mode": mode, "namespace": f"{key}_namespace",
                        "channel": f"{key}_channel", "source": "source"}  # fmt: skip

            out = [dep("openshift-cert-manager-operator", "cert_manager", every)]
            if opts["openshift_ai_lws"]:
                out.append(dep("leader-worker-set", "lws", own))
            if opts["openshift_ai_auth"]:
                out.append(dep("rhcl-operator", "rhcl", every))
            return [*out, {"package": "rhods-operator", "install_mode": every, **std}]
        if component == "autoscaling":
            return [{"package": "openshift-custom-metrics-autoscaler-operator", "install_mode": every, **std}]
        if component == "gitops":
            return [{"package": "openshift-gitops-operator", "install_mode": every, **std}]
        return []

    def operators(self) -> list[dict]:
        return [self._operator(comp, spec) for comp in self.available for spec in self._operator_specs(comp)]

    # -------------------------------------------------------------- operands
    def nfd(self) -> dict:
        o = self.options["nfd"]
        choice = o["nfd_rule_api_version"]
        if choice == "auto":
            old = self.cluster.served("nfd.openshift.io/v1alpha1")
            new = self.cluster.served("nfd.k8s-sigs.io/v1alpha1")
            if old and not new:
                choice, why = "nfd.openshift.io/v1alpha1", "the cluster serves only the older NFD rule API"
            else:
                choice, why = "nfd.k8s-sigs.io/v1alpha1", "upstream NFD API (served by the NFD operator of 4.19+)"
            _decision(self.decisions, "nfd", "NodeFeatureRule API", choice, why)
        worker = {
            "core": {"sleepInterval": o["nfd_sleep_interval"]},
            "sources": {
                "pci": {
                    "deviceClassWhitelist": list(o["nfd_device_class_whitelist"]),
                    "deviceLabelFields": list(o["nfd_device_label_fields"]),
                }
            },
        }
        return {
            "namespace": o["nfd_namespace"],
            "instance": o["nfd_instance_name"],
            "operand_image": o["nfd_operand_image"] or None,
            "worker_config": _yaml(worker),
            "rule": {"name": o["nfd_rule_name"], "api_version": choice} if o["nfd_rdma_rule"] else None,
        }

    def gpu_operator(self) -> dict:
        o = self.options["gpu_operator"]
        p = "gpu_operator_"
        rdma = self.rdma["needed"] if o[p + "rdma"] == "auto" else o[p + "rdma"] == "true"
        if o[p + "use_host_mofed"] == "auto":
            host_mofed = rdma and "network_operator" not in self.components
        else:
            host_mofed = o[p + "use_host_mofed"] == "true"
        _decision(
            self.decisions,
            "gpu_operator",
            "GPUDirect RDMA",
            rdma,
            self.rdma["why"] if o[p + "rdma"] == "auto" else "gpu_operator_rdma",
        )
        has_kmt = self.cluster.crd_has(CLUSTERPOLICY_CRD, "spec.driver.kernelModuleType")
        field = "useOpenKernelModules" if has_kmt is False else "kernelModuleType"
        _decision(
            self.decisions,
            "gpu_operator",
            "ClusterPolicy kernel module field",
            field,
            "the served ClusterPolicy schema predates kernelModuleType (GPU operator < v25.3)"
            if has_kmt is False
            else "driver.kernelModuleType (GPU operator v25.3+)",
        )
        replicas = int(o[p + "time_slicing_replicas"])
        time_slicing = None
        if replicas > 1:
            # one named device plugin configuration per data key (NVIDIA cloud-native-docs
            # openshift/time-slicing-gpus-in-openshift.rst)
            config = {
                "version": "v1",
                "flags": {"migStrategy": o[p + "mig_strategy"]},
                "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}},
            }
            time_slicing = {"name": o[p + "time_slicing_config_name"], "key": "any", "config": _yaml(config)}
        return {
            "namespace": o[p + "namespace"],
            "policy": o[p + "policy_name"],
            "kernel_module_field": field,
            "kernel_module_type": o[p + "kernel_module_type"],
            "open_kernel_modules": o[p + "kernel_module_type"] == "open",
            "driver": {k: o[p + "driver_" + k] or None for k in ("repository", "image", "version")},
            "driver_auto_upgrade": bool(o[p + "driver_auto_upgrade"]),
            "rdma": rdma,
            "use_host_mofed": host_mofed,
            "cdi": bool(o[p + "cdi"]),
            "dcgm_exporter": bool(o[p + "dcgm_exporter"]),
            "service_monitor": bool(o[p + "dcgm_exporter"] and o[p + "service_monitor"]),
            "service_monitor_interval": o[p + "service_monitor_interval"],
            "gfd": bool(o[p + "gfd"]),
            "gds": bool(o[p + "gds"]),
            "mig_strategy": o[p + "mig_strategy"],
            "mig_manager": bool(o[p + "mig_manager"]),
            "mig_config": o[p + "mig_config"] or None,
            "time_slicing": time_slicing,
        }

    def network_operator(self) -> dict:
        o = self.options["network_operator"]
        p = "network_operator_"
        sriov = o[p + "mode"] == "sriov"
        single = self.cluster.single_node
        net_ns = o[p + "network_namespace"] or self.serving["namespace"]
        ipam = json.dumps({"type": "nv-ipam", "poolName": o[p + "ip_pool_name"]})
        has_ipam = self.cluster.crd_has(NICCLUSTERPOLICY_CRD, "spec.nvIpam")
        if has_ipam is False:
            _decision(
                self.decisions,
                "network_operator",
                "NicClusterPolicy nvIpam",
                False,
                "the served NicClusterPolicy schema has no nvIpam (network operator < 23.x)",
            )
        out = {
            "namespace": o[p + "namespace"],
            "mode": o[p + "mode"],
            "ofed": {
                "repository": o[p + "ofed_repository"],
                "version": o[p + "ofed_version"],
                # DOCA driver auto-upgrade does not work on Single Node OpenShift (network-operator-docs)
                "auto_upgrade": not single,
            }
            if o[p + "ofed_driver"]
            else None,
            "rdma_shared_device_plugin": None
            if sriov
            else {
                "repository": o[p + "component_repository"],
                "version": o[p + "rdma_plugin_version"],
                # the plugin takes its configuration as a JSON document in a string field
                "config": json.dumps(
                    {
                        "configList": [
                            {
                                "resourceName": o[p + "rdma_resource_name"],
                                "rdmaHcaMax": o[p + "rdma_hca_max"],
                                "selectors": o[p + "rdma_selectors"],
                            }
                        ]
                    }
                ),
            },
            "nv_ipam": None
            if has_ipam is False
            else {"repository": o[p + "component_repository"], "version": o[p + "ipam_version"]},
            "ip_pool": {
                "name": o[p + "ip_pool_name"],
                "subnet": o[p + "ip_pool_subnet"],
                "block_size": o[p + "ip_pool_block_size"],
                "gateway": o[p + "ip_pool_gateway"] or None,
            },
            "macvlan": None,
            "sriov": None,
            "rdma": rdma_attachment(self.options, self.serving["namespace"]),
        }
        if not sriov:
            # the secondary network every RDMA pod names (rdma_attachment): an interface on the RDMA NIC with
            # an address from the nv-ipam pool, so RoCE has a GID for the pod
            out["macvlan"] = {
                "name": o[p + "network_name"],
                "network_namespace": net_ns,
                "master": o[p + "macvlan_master"] or None,
                "mtu": o[p + "mtu"],
                "ipam": ipam,
            }
            if not o[p + "macvlan_master"] and "network_operator" in self.components:
                # without a master the macvlan CNI enslaves the default-route interface: no RoCE path unless that
                # happens to be the ConnectX port, and no cluster fact names the port (NFD labels carry no names)
                raise SchemaError(
                    [
                        (
                            p + "macvlan_master",
                            f"required: the pods of this site move KV cache over RoCE through the MacvlanNetwork "
                            f"{net_ns}/{o[p + 'network_name']}, and an empty master makes macvlan enslave each "
                            "node's default-route interface; set it to the host interface name of the ConnectX "
                            "port (for example ens8f0np0), or set network_operator_mode: sriov",
                        )
                    ]
                )
        if sriov:
            out["sriov"] = {
                "namespace": o[p + "sriov_namespace"],
                "disable_drain": single,
                "mofed_wait": bool(o[p + "ofed_driver"]),
                "policy": o[p + "sriov_resource_name"].replace("_", "-"),
                "resource": o[p + "sriov_resource_name"],
                "device_id": o[p + "sriov_device_id"] or None,
                "pf_names": list(o[p + "sriov_pf_names"]) or None,
                "num_vfs": o[p + "sriov_num_vfs"],
                "link_type": o[p + "sriov_link_type"],
                "mtu": o[p + "mtu"],
                "network": o[p + "network_name"],
                "network_namespace": net_ns,
                "ipam": ipam,
                "nodes": self.cluster.gpu_nodes(),
            }
        return out

    def _openshift_ai_api(self, o) -> str:
        choice = o["openshift_ai_api_version"]
        if choice != "auto":
            return choice
        v2 = self.cluster.served("datasciencecluster.opendatahub.io/v2")
        v1 = self.cluster.served("datasciencecluster.opendatahub.io/v1")
        if v2:
            choice, why = "v2", "the cluster serves DataScienceCluster v2 (OpenShift AI 3.x)"
        elif v1:
            choice, why = "v1", "the cluster serves DataScienceCluster v1 only (OpenShift AI 2.x)"
        else:
            rhods = next((x for x in self._operators if x["package"] == "rhods-operator"), None)
            csv = (rhods or {}).get("csv") or ""
            if re.match(r"^rhods-operator\.v?2\.", csv):
                choice, why = "v1", f"OpenShift AI 2.x will be installed ({csv})"
            else:
                choice, why = "v2", "newest API (OpenShift AI 3.x), nothing served yet"
        _decision(self.decisions, "openshift_ai", "DSCInitialization/DataScienceCluster API", choice, why)
        return choice

    def openshift_ai(self) -> dict:
        o = self.options["openshift_ai"]
        p = "openshift_ai_"
        api = self._openshift_ai_api(o)
        removed = DSC_REMOVED + (DSC_REMOVED_V2 if api == "v2" else DSC_REMOVED_V1)
        known = [c for c in removed if self.cluster.crd_has(DSC_CRD, f"spec.components.{c}") is not False]
        nim = self.cluster.crd_has(DSC_CRD, "spec.components.kserve.nim") is not False
        return {
            "api_version": api,
            "lws_operator": bool(o[p + "lws"]),
            "dsci": {
                "name": o[p + "dsci_name"],
                "applications_namespace": o[p + "applications_namespace"],
                "monitoring_namespace": o[p + "monitoring_namespace"],
                "service_mesh": api == "v1",  # v1 (2.x) still has the block; we set it Removed
            },
            "dsc": {
                "name": o[p + "dsc_name"],
                "dashboard": "Managed" if o[p + "dashboard"] else "Removed",
                "raw_deployment": api == "v1",  # 2.x: RawDeployment, no Knative (3.x knows only that)
                "nim": nim,
                "removed": known,
            },
            "gateway_class": {"name": o[p + "gateway_class"], "controller": o[p + "gateway_controller"]},
            "gateway": {
                "name": o[p + "gateway_name"],
                "namespace": o[p + "gateway_namespace"],
                "port": o[p + "gateway_port"],
                "tls_secret": o[p + "gateway_tls_secret"] or None,
            },
        }

    def autoscaling(self) -> dict:
        o = self.options["autoscaling"]
        p = "autoscaling_"
        monitoring = None
        if o[p + "user_workload_monitoring"]:
            existing = self.cluster.monitoring_config()
            base = dict(existing or {})
            config = {**base, "enableUserWorkload": True}
            monitoring = {
                "namespace": MONITORING_NAMESPACE,
                "name": MONITORING_CONFIG,
                "config": _yaml(config, sort_keys=True),
                # removed on teardown only when it holds nothing but our setting
                "removable": not (set(base) - {"enableUserWorkload"}),
            }
            if existing is not None and set(base) - {"enableUserWorkload"}:
                self.notes.append(
                    f"{MONITORING_NAMESPACE}/{MONITORING_CONFIG} has settings besides enableUserWorkload "
                    f"({', '.join(sorted(set(base) - {'enableUserWorkload'}))}): they are kept, and teardown leaves it"
                )
        return {
            "namespace": o[p + "namespace"],
            "watch_namespace": o[p + "watch_namespace"],
            "log_level": o[p + "log_level"],
            "monitoring": monitoring,
        }

    def gitops(self) -> dict:
        o = self.options["gitops"]
        wait = o["gitops_wait_argocd"]
        # auto: the default Argo CD the operator creates, once the cluster serves its API
        wait = bool(self.cluster.served("argoproj.io/v1beta1")) if wait == "auto" else wait == "true"
        return {"argocd": {"namespace": o["gitops_argocd_namespace"], "name": o["gitops_argocd_name"], "wait": wait}}

    def _images(self, o) -> list[str]:
        out = list(o["image_prewarm_images"])
        for entry in self.intent["plans"]:
            uri = ((entry.get("model") or {}).get("artifact") or {}).get("uri") or ""
            m = re.match(r"^oci(\+native)?://(.+)$", uri)
            if m:
                out.append(m.group(2))
            out.extend((entry.get("plan") or {}).get("images") or [])
        unique = list(dict.fromkeys(out))
        bad = [i for i in unique if not IMAGE_BY_DIGEST.match(i)]
        if bad:
            raise SchemaError(
                [
                    (
                        "image_prewarm_images",
                        "every image must be pinned by digest (name@sha256:<64 hex>), a tag is not enough: "
                        + ", ".join(bad),
                    )
                ]
            )
        return unique

    def _models_to_stage(self, o) -> list[dict]:
        out = []
        for entry in self.intent["plans"]:
            uri = ((entry.get("model") or {}).get("artifact") or {}).get("uri") or ""
            if not uri.startswith("hf://"):
                continue
            plan = entry.get("plan") or {}
            layout = plan.get("layout") or {}
            weights = (
                float((plan.get("memory") or {}).get("weights_gib_per_gpu") or 0)
                * int(layout.get("tp") or 1)
                * int(layout.get("pp") or 1)
            )
            # planned weights per replica with a quarter of headroom, else 100Gi
            size = o["image_prewarm_pvc_size"] or (f"{math.ceil(weights * 1.25)}Gi" if weights > 0 else "100Gi")
            name = entry["model"]["name"]
            out.append(
                {
                    "name": name,
                    "repo": uri[len("hf://") :],
                    "size": size,
                    "pvc": f"{name}-weights",
                    "job": f"{name}-stage-weights",
                }
            )
        return out

    def image_prewarm(self) -> dict:
        o = self.options["image_prewarm"]
        p = "image_prewarm_"
        images = self._images(o)
        models = self._models_to_stage(o)
        stage_image = o[p + "stage_image"] or None
        if stage_image and models and not IMAGE_BY_DIGEST.match(stage_image):
            raise SchemaError([(p + "stage_image", f"must be pinned by digest: {stage_image}")])
        if models and not stage_image:
            self.notes.append(
                f"{len(models)} non-OCI model(s) not staged (set image_prewarm_stage_image): replicas download "
                "their weights at start"
            )
        mode = o[p + "mode"]
        if mode == "auto":
            version = _version(self.cluster.openshift_version)
            mco = self.cluster.served("machineconfiguration.openshift.io/v1")
            if (version and version < PINNED_IMAGES_SINCE) or mco is False:
                mode, why = "daemonset", "OpenShift < 4.19 or no MachineConfig API: a pre-pull DaemonSet"
            else:
                mode, why = "pinned", "PinnedImageSet (GA in OpenShift 4.19)"
            _decision(self.decisions, "image_prewarm", "mode", mode, why)
        pools = list(o[p + "pools"]) or (["master"] if self.cluster.single_node else ["worker"])
        size = int(o[p + "max_per_set"])
        chunks = [images[i : i + size] for i in range(0, len(images), size)]
        sets = []
        if mode == "pinned":
            for pool in pools:
                for i, chunk in enumerate(chunks):
                    suffix = f"-{i}" if len(chunks) > 1 else ""
                    sets.append({"name": f"{o[p + 'name']}-{pool}{suffix}", "pool": pool, "images": chunk})
        daemonset = None
        if mode == "daemonset" and images:
            daemonset = {
                "namespace": o[p + "namespace"],
                "name": o[p + "name"],
                "node_selector": o[p + "node_selector"],
                "command": list(o[p + "command"]),
                "pause_image": o[p + "pause_image"],
                "pulls": [{"name": f"pull-{i}", "image": img} for i, img in enumerate(images)],
            }
        staging = None
        if stage_image and models:
            staging = {
                "namespace": self.serving["namespace"],
                "image": stage_image,
                "command": list(o[p + "stage_command"]),
                "storage_class": o[p + "storage_class"] or None,
                "models": models,
            }
        return {
            "mode": mode,
            "images": images,
            "pools": pools if mode == "pinned" else [],
            "pinned_image_sets": sets,
            "daemonset": daemonset,
            "staging": staging,
        }

    # -------------------------------------------------------------- waits
    def _wait(self, component, api_version, kind, name, namespace=None, **test):
        timeout = self.options[component][f"{component}_timeout"]
        spec = {"apiVersion": api_version, "kind": kind, "name": name}
        if namespace:
            spec["namespace"] = namespace
        spec.update(test)
        return {**spec, "timeout": timeout, "component": component}

    def operator_waits(self, operators) -> list[dict]:
        out = []
        for op in operators:
            comp = op["component"]
            if not self.options[comp][f"{comp}_wait"]:
                continue
            state = SUBSCRIPTION_MANUAL if op["approval"] == "Manual" else SUBSCRIPTION_READY
            out.append(
                self._wait(
                    comp,
                    OLM_SUBSCRIPTION_API,
                    "Subscription",
                    op["subscription"],
                    op["namespace"],
                    field="status.state",
                    value=state,
                )
            )
            if op["csv"]:
                out.append(
                    self._wait(
                        comp,
                        OLM_SUBSCRIPTION_API,
                        "ClusterServiceVersion",
                        op["csv"],
                        op["namespace"],
                        field="status.phase",
                        value="Succeeded",
                    )
                )
            elif self.cluster.live:
                self.notes.append(
                    f"{op['package']}: no PackageManifest names the CSV of channel {op['channel'] or '(default)'}; "
                    "the run waits for the Subscription only"
                )
        return out

    def operand_waits(self, values: dict) -> list[dict]:  # noqa: PLR0912 - one branch per component
        out = []
        for comp in self.available:
            if not self.options[comp][f"{comp}_wait"]:
                continue
            v = values[comp]
            if comp == "nfd":
                out.append(
                    self._wait(
                        comp,
                        "nfd.openshift.io/v1",
                        "NodeFeatureDiscovery",
                        v["instance"],
                        v["namespace"],
                        condition="Available",
                    )
                )
            elif comp == "gpu_operator":
                out.append(
                    self._wait(comp, "nvidia.com/v1", "ClusterPolicy", v["policy"], field="status.state", value="ready")
                )
            elif comp == "network_operator":
                out.append(
                    self._wait(
                        comp,
                        "mellanox.com/v1alpha1",
                        "NicClusterPolicy",
                        "nic-cluster-policy",
                        field="status.state",
                        value="ready",
                    )
                )
                if v["macvlan"]:
                    out.append(
                        self._wait(
                            comp,
                            "mellanox.com/v1alpha1",
                            "MacvlanNetwork",
                            v["macvlan"]["name"],
                            field="status.state",
                            value="ready",
                        )
                    )
                for node in (v["sriov"] or {}).get("nodes") or []:
                    out.append(
                        self._wait(
                            comp,
                            "sriovnetwork.openshift.io/v1",
                            "SriovNetworkNodeState",
                            node,
                            v["sriov"]["namespace"],
                            field="status.syncStatus",
                            value="Succeeded",
                        )
                    )
            elif comp == "openshift_ai":
                api = v["api_version"]
                out.append(
                    self._wait(
                        comp,
                        f"dscinitialization.opendatahub.io/{api}",
                        "DSCInitialization",
                        v["dsci"]["name"],
                        field="status.phase",
                        value="Ready",
                    )
                )
                out.append(
                    self._wait(
                        comp,
                        f"datasciencecluster.opendatahub.io/{api}",
                        "DataScienceCluster",
                        v["dsc"]["name"],
                        condition="Ready",
                    )
                )
                if self.options[comp]["openshift_ai_wait_gateway"]:
                    gw = v["gateway"]
                    out.append(
                        self._wait(
                            comp,
                            "gateway.networking.k8s.io/v1",
                            "Gateway",
                            gw["name"],
                            gw["namespace"],
                            condition="Programmed",
                        )
                    )
            elif comp == "autoscaling":
                if self.options[comp]["autoscaling_wait_keda_controller"]:
                    out.append(
                        self._wait(
                            comp,
                            "keda.sh/v1alpha1",
                            "KedaController",
                            "keda",
                            v["namespace"],
                            field="status.phase",
                            value="Installation Succeeded",
                        )
                    )
            elif comp == "gitops":
                argo = v["argocd"]
                if argo["wait"]:
                    out.append(
                        self._wait(
                            comp,
                            "argoproj.io/v1beta1",
                            "ArgoCD",
                            argo["name"],
                            argo["namespace"],
                            field="status.phase",
                            value="Available",
                        )
                    )
            elif comp == "image_prewarm":
                out.extend(self._prewarm_waits(v))
            # the serving APIs this component installs: their CRDs are Established
            for api in self.serving_apis():
                if api["installed_by"] == comp:
                    out.append(
                        self._wait(comp, CRD_API, "CustomResourceDefinition", api["crd"], condition="Established")
                    )
        return out

    def _prewarm_waits(self, v) -> list[dict]:
        comp = "image_prewarm"
        out = []
        if v["mode"] == "pinned" and v["images"]:
            for pool in v["pools"]:
                machines = self.cluster.pool_machines(pool)
                if machines is None:
                    if self.cluster.live:
                        self.notes.append(f"MachineConfigPool {pool} not found: its pinned images are not waited for")
                    continue
                out.append(
                    self._wait(
                        comp,
                        "machineconfiguration.openshift.io/v1",
                        "MachineConfigPool",
                        pool,
                        field=PINNED_SYNC_FIELD,
                        value=machines,
                    )
                )
        if v["daemonset"]:
            out.append(self._wait(comp, "apps/v1", "DaemonSet", v["daemonset"]["name"], v["daemonset"]["namespace"]))
        for m in (v["staging"] or {}).get("models") or []:
            out.append(self._wait(comp, "batch/v1", "Job", m["job"], v["staging"]["namespace"], condition="Complete"))
        return out

    # -------------------------------------------------------------- requirements
    def serving_apis(self) -> list[dict]:
        """The APIs the serving stage needs served, by what the models use (SERVING_APIS: who installs them)."""
        models = self.models
        needed = {
            "llminferenceservice": (bool(models), "every model is an LLMInferenceService"),
            "inferencepool": (any(m.get("scheduler") for m in models), "KServe creates an InferencePool per scheduler"),
            "legacy_inferencepool": (
                any(m.get("disaggregated") for m in models),
                "KServe v0.20.0's P/D routing sidecar looks the pool up in inference.networking.x-k8s.io",
            ),
            "inferenceobjective": (
                any((m.get("scheduler") or {}).get("objectives") for m in models),
                "the priority classes are InferenceObjectives",
            ),
            "leaderworkerset": (
                any(w and w.get("worker") is not None for m in models for w in (m.get("main"), m.get("prefill"))),
                "a data-parallel workload runs as a LeaderWorkerSet",
            ),
            "scaledobject": (
                bool((self.serving.get("autoscaling") or {}).get("scaled_objects")),
                "autoscaled models scale through KEDA ScaledObjects",
            ),
        }
        out = []
        for key, (wanted, why) in needed.items():
            if not wanted:
                continue
            installer, group, versions, kind = SERVING_APIS[key]
            out.append(
                {
                    "group": group,
                    "versions": list(versions),
                    "kind": kind,
                    "crd": f"{kind.lower()}s.{group}",
                    "for": f"{kind}: {why}",
                    "installed_by": installer if installer in self.components else None,
                }
            )
        return out

    def _gpu_needs(self) -> list[dict]:
        hw = self.hardware
        needs: dict[str, dict] = {}
        by_name = {m["name"]: m for m in self.models}
        for entry in self.intent["plans"]:
            plan = entry.get("plan") or {}
            name = (entry.get("model") or {}).get("name") or "?"
            served = by_name.get(name) or {}
            per_pod = {
                w["role"]: int(w.get("gpus_per_pod") or 1) for w in (served.get("main"), served.get("prefill")) if w
            }
            for role, pool in (plan.get("pools") or {}).items():
                if not isinstance(pool, dict):
                    continue
                gpu = pool.get("gpu") or (plan.get("hardware") or {}).get("gpu") or hw.get("gpu")
                replicas = int(pool.get("replicas") or 1)
                count = int(pool.get("gpus") or 0) or replicas * int(pool.get("gpus_per_replica") or 1)
                if not gpu or count <= 0:
                    continue
                need = needs.setdefault(gpu, {"gpu": gpu, "count": 0, "per_pod": 0, "for": []})
                need["count"] += count
                need["per_pod"] = max(need["per_pod"], per_pod.get(role, int(pool.get("gpus_per_replica") or 1)))
                need["for"].append(f"{name} {role} {replicas}x{int(pool.get('gpus_per_replica') or 1)}")
        return [{**v, "for": "; ".join(v["for"])} for v in needs.values()]

    def _pod_needs(self) -> list[dict]:
        """The pods the serving intent plans, by shape (cluster_facts.placement_gap packs them on the nodes):
        every workload's planned replicas x pods per replica, each with its GPUs and RDMA devices."""
        return [
            {
                "model": m["name"],
                "role": w["role"],
                "gpu": w["gpu"],
                "gpus": int(w["gpus_per_pod"]),
                "rdma": int(w.get("rdma_per_pod") or 0),
                "count": int(w["planned_replicas"]) * int(w["pods_per_replica"]),
            }
            for m in self.models
            for w in (m.get("prefill"), m.get("main"))
            if w
        ]

    def requirements(self) -> dict:
        pre = self.options["preflight"]
        apis, seen = [], set()
        olm = {"group": "operators.coreos.com", "versions": ["v1alpha1"], "kind": "Subscription"}
        component_apis = {
            "gpu_operator": [
                {
                    "group": "monitoring.coreos.com",
                    "versions": ["v1"],
                    "kind": "ServiceMonitor",
                    "for": "the DCGM exporter ServiceMonitor (gpu_operator)",
                }
            ],
            "openshift_ai": [
                {
                    "group": "gateway.networking.k8s.io",
                    "versions": ["v1"],
                    "kind": "Gateway",
                    "for": "the GatewayClass and Gateway llm-d serving uses (openshift_ai; OpenShift >= 4.19)",
                }
            ],
        }
        for comp in self.components:
            wanted = list(component_apis.get(comp, []))
            if comp != "image_prewarm":
                wanted.insert(0, {**olm, "for": f"OLM Subscriptions ({comp})"})
            for api in wanted:
                key = (api["group"], api["kind"])
                if key not in seen:
                    seen.add(key)
                    apis.append(api)
        served_later = []
        for api in self.serving_apis():
            entry = {k: api[k] for k in ("group", "versions", "kind", "for")}
            if api["installed_by"]:
                # installed by this run: the installing component waits for the CRD instead
                served_later.append({**entry, "installed_by": api["installed_by"], "crd": api["crd"]})
            else:
                apis.append({**entry, "for": f"{entry['for']} (no platform component of this site installs it)"})
        req = {
            "openshift_min": pre["preflight_openshift_min"],
            "openshift_max": pre["preflight_openshift_max"],
            "gpus": self._gpu_needs(),
            # the GPU nodes the inventory describes (hardware.gpu x hardware.nodes): the plan was sized for them
            "gpu_nodes": {"gpu": self.hardware.get("gpu"), "nodes": int(self.hardware.get("nodes") or 1)},
            "pods": self._pod_needs(),
            "rdma": {"nodes": self.rdma["nodes"], "why": self.rdma["why"]} if self.rdma["needed"] else False,
            "apis": apis,
            "single_node": None,
            "storage_class": any(
                not str(((e.get("model") or {}).get("artifact") or {}).get("uri") or "oci://").startswith("oci://")
                for e in self.intent["plans"]
            ),
            "allow_unobserved_gpus": "gpu_operator" in self.components,
            # the claims and Secrets serving reads, and whose pods' GPUs are the site's (serving_preflight.py)
            "serving": preflight_needs.serving_needs(self.intent),
        }
        for key, value in (pre["preflight_requirements"] or {}).items():
            if value is None:
                continue
            req[key] = req["apis"] + list(value) if key == "apis" else value
        req["apis_installed_here"] = served_later
        if self.intent["plans"]:
            # the plans' engine flags against the vLLM of OpenShift AI's presets (cluster_facts.evaluate)
            req["engine"] = {**self.intent["engine"], "supported": catalog.supported_vllm_versions()}
        return req

    def ownership(self, values: dict) -> dict:
        """What the platform takes over without the site listing it (module_utils/ownership.py): the
        DSCInitialization OpenShift AI's operator creates itself once installed (rhods-operator creates
        default-dsci unless told not to), when this site installs that operator; and an existing
        cluster-monitoring-config, which the autoscaling component merges its setting into by design (its other
        settings kept, the object never deleted); and the namespace that holds the claims of the site's pvc://
        weights, which is there before the site and keeps data the site did not create."""
        derived, adopt = [], []
        ai = values.get("openshift_ai")
        rhods = next((o for o in self._operators if o["package"] == "rhods-operator"), None)
        if ai and rhods and rhods["ours"]:
            derived.append(f"DSCInitialization/{ai['dsci']['name']}")
        mon = (values.get("autoscaling") or {}).get("monitoring")
        if mon and self.cluster.monitoring_config():  # the cluster has one (an empty one reads as {})
            adopt.append(f"ConfigMap/{mon['namespace']}/{mon['name']}")
        # the namespace of the claims of pvc:// weights: it exists before the site (the claim is staged into it
        # first), and holds data the site did not create; the site serves into it and a teardown keeps it
        for ns in sorted({c["namespace"] for c in preflight_needs.claims(self.intent)}):
            adopt.append(f"Namespace/{ns}")
        return {"derived": derived, "adopt": adopt}

    # -------------------------------------------------------------- all of it
    def build(self) -> dict:
        self._operators = self.operators()
        values = {}
        for comp in self.available:
            values[comp] = getattr(self, comp)()
        ready = {comp: all(op["ready"] for op in self._operators if op["component"] == comp) for comp in self.available}
        if self.operators_ready:
            ready = dict.fromkeys(self.available, True)
        pre = self.options["preflight"]
        source = pre["preflight_source"]
        if source == "auto":
            source = "cluster" if self.intent["site"]["delivery"] == "apply" else "inventory"
        return {
            "components": list(self.components),
            "available": list(self.available),
            "rdma": self.rdma,
            "operators": self._operators,
            **values,
            "waits": {"operators": self.operator_waits(self._operators), "operands": self.operand_waits(values)},
            "requirements": self.requirements(),
            "preflight": {
                "source": source,
                "openshift_version": pre["preflight_openshift_version"] or None,
                # PackageManifests to read: the channels and head CSVs of our packages
                "packages": list(dict.fromkeys(op["package"] for op in self._operators)),
            },
            "cluster": {
                **self.cluster.digest(),
                "operators_ready": ready,
                "dry_run": self.dry_run,
            },
            "operators_pending": [c for c in self.components if not ready.get(c, True)],
            "ownership": self.ownership(values),
            # set by the renderer for a removal (teardown): the operator objects then include the CSVs
            "removal": False,
            "decisions": self.decisions,
            "notes": self.notes,
        }


def build(intent: dict, facts: dict | None = None, operators_ready: bool = False, dry_run: bool = False) -> dict:
    """``intent["platform"]``: every platform component's operators, operand values, waits and the
    cluster requirements, from the rest of the intent and (optionally) a cluster read."""
    return _Builder(intent, facts, operators_ready, dry_run).build()


def bind(intent: dict, facts: dict | None, operators_ready: bool = False, dry_run: bool = False) -> dict:
    """The intent with its platform part recomputed for what a cluster read found.

    ``facts``: the ``cluster_facts`` of inference.blueprints.cluster_facts (``source: cluster``),
    or its inventory stand-in (``source: inventory``), or None (nothing known: newest APIs).
    ``operators_ready``: the platform flow's first phase saw every CSV succeed, so an operand
    whose API the cluster still does not serve is left out (with its reason) instead of failing
    the apply; ``dry_run`` (check mode) does the same before any operator is installed.
    """
    return {**intent, "platform": build(intent, facts, operators_ready, dry_run)}


# ---------------------------------------------------------------------------- render-time helpers


def sharing(obj: dict, serving_namespace: str) -> dict | None:
    """How a platform object is owned when several sites of the collection run on one cluster: the one place that
    decides it. Every object of the platform stage is the cluster's (operators, their operands, the GatewayClass
    and shared Gateway, PinnedImageSets, the NFD instance, KedaController, DSC/DSCI, the cluster monitoring
    config): shared by design, each site claims it, its ``merge`` fields (MERGED_FIELDS) the union of the claims
    (module_utils/claims.py). Only what lives in, or is, the site's serving namespace (the weight staging Jobs and
    PVCs) is the site's alone. Returns the policy's shared entry, or None."""
    meta = obj.get("metadata") or {}
    if meta.get("namespace") == serving_namespace:
        return None
    if obj.get("kind") == "Namespace" and obj.get("apiVersion") == "v1" and meta.get("name") == serving_namespace:
        return None
    return {"ref": ownership_mod.ref(obj), "merge": dict(MERGED_FIELDS.get(obj.get("kind"), {}))}


def shared_objects(intent: dict, objects: list[dict]) -> list[dict]:
    """The shared entries (``sharing``) of a platform phase's ``objects``, whose site labels are replaced in place
    by the collection's (a shared object's labels must not change with the site that applies it)."""
    out = []
    for obj in objects:
        entry = sharing(obj, intent["site"]["namespace"])
        if entry is None:
            continue
        labels = {k: v for k, v in (obj["metadata"].get("labels") or {}).items() if k not in SITE_LABELS}
        obj["metadata"]["labels"] = {**labels, SITE_LABELS[0]: SHARED_PART_OF}
        out.append(entry)
    return out


def summary(platform: dict) -> dict:
    """What a bind decided, for task results: components, RDMA, the read's source, pending operators,
    decisions and notes."""
    return {
        "components": platform["components"],
        "rdma": platform["rdma"],
        "source": platform["cluster"]["source"],
        "operators_pending": platform["operators_pending"],
        "decisions": platform["decisions"],
        "notes": platform["notes"],
    }


def unserved(platform: dict, component: str, api_version: str, kind: str) -> str | None:
    """Why an object of ``component`` cannot be applied to the bound cluster, or None.

    Objects are left out only when the cluster read says their API is not served AND the
    component's operators are installed (or the run is a dry run): before an operator is
    installed its API is not served yet, and that is not a reason to leave its objects out.
    """
    cluster = platform.get("cluster") or {}
    served = cluster.get("served")
    if served is None:
        return None
    ready = (cluster.get("operators_ready") or {}).get(component, True) or cluster.get("dry_run")
    if not ready:
        return None
    group, version = _split(api_version)
    if version not in served.get(group, CORE if group == "" else []):
        why = f"the cluster does not serve {api_version}"
    else:
        kinds = (cluster.get("kinds") or {}).get(api_version)
        if not kinds or kind in kinds:
            return None
        why = f"the cluster serves {api_version} without a kind {kind}"
    if cluster.get("dry_run") and not (cluster.get("operators_ready") or {}).get(component, True):
        why += " (yet: check mode runs before its operator is installed)"
    return why


def selected(platform: dict, components) -> list[str]:
    """The components to render, in apply order; unknown ones are an error."""
    if components is None:
        return list(platform["components"])
    unknown = [c for c in components if c not in platform["available"]]
    if unknown:
        raise SchemaError(
            [
                (
                    "components",
                    f"not platform components of this site: {', '.join(unknown)} "
                    f"(it has: {', '.join(platform['available']) or 'none'})",
                )
            ]
        )
    return [c for c in platform["available"] if c in components]
