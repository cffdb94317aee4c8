# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The serving part of the deployment intent: one entry per planned model.

Everything here follows what KServe v0.20.0's LLMInferenceService controller does with a spec
(docs/upstream.md lists the sources): KServe creates the vLLM workloads, the llm-d scheduler
(EPP Deployment, Service, RBAC), the InferencePool and the HTTPRoute from the service and its
presets; we render the service, the EPP configuration it carries inline, the objectives, the
KV cache tier, autoscaling and monitoring around it. The intent only holds values; the
templates of the serving roles give them shape.
"""

from __future__ import annotations

import copy

from ..planner import data as catalog
from . import (
    burst,
    engine,
    escalation,
    grid,
    inventory,
    monitoring,
    platform,
    quantity,
    scaling,
    scc_grant,
    scheduler,
    summary,
)
from . import site as site_mod

# GPU device plugin resource per GPU vendor (planner catalog `vendor`).
GPU_RESOURCE = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}
# vLLM ports in KServe v0.20.0's presets: the decode pod of a P/D service runs vLLM on 8001
# behind the llm-d routing sidecar on 8000 (config-llm-decode-template.yaml).
VLLM_PORT = 8000
VLLM_DECODE_PORT = 8001
NIXL_SIDE_CHANNEL_PORT = 5600
LMCACHE_CONFIG_DIR = "/etc/lmcache"
# What KServe puts on the workload pods it creates (pkg/constants; config-llm-scheduler.yaml).
KSERVE_POD_SELECTOR_LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/part-of", "kserve.io/component")
# The pool label KServe's role values use (llm-d.ai/role: both | prefill | decode).
ROLE_LABEL = "llm-d.ai/role"
# OpenShift AI's per-service auth switch (red-hat-data-services/kserve rhoai-3.5,
# pkg/constants/constants_odh.go ODHKserveRawAuth)
OPENSHIFT_AI_AUTH_ANNOTATION = "security.opendatahub.io/enable-auth"


class IntentError(ValueError):
    """The plan cannot be expressed as a KServe v0.20.0 service (with the reason)."""


def names(name: str, worker: bool, prefill_worker: bool = False) -> dict:
    """Names of the objects KServe derives from a service name (kmeta.ChildName, <= 38 chars keep them literal).

    ``worker``/``prefill_worker``: the main/prefill workload is a LeaderWorkerSet (it has a worker)."""
    main = f"{name}-kserve-mn" if worker else f"{name}-kserve"
    return {
        "service": name,
        "pool": f"{name}-inference-pool",
        "epp_service": f"{name}-epp-service",
        "epp_deployment": f"{name}-kserve-router-scheduler",
        "route": f"{name}-kserve-route",
        "workload_service": f"{name}-kserve-workload-svc",
        "main_workload": main,
        "main_workload_kind": "LeaderWorkerSet" if worker else "Deployment",
        "prefill_workload": f"{name}-kserve-mn-prefill" if prefill_worker else f"{name}-kserve-prefill",
        "lmcache_config": f"{name}-lmcache",
        "lmcache_server": f"{name}-lmcache-server",
        "scaledobject": f"{name}-scaler",
        "prefill_scaledobject": f"{name}-prefill-scaler",
        "escalation": f"{name}-escalation",
        "prometheus_rule": f"{name}-slo",
        "scc_service_account": f"{name}-ipc-lock",  # intent/scc_grant.py
    }


def _decision(out: list, model: str, what: str, choice, why: str) -> None:
    out.append({"model": model, "what": what, "choice": choice, "why": why})


class _Model:
    """Builds one model's serving intent from its plan and the site."""

    def __init__(self, site: dict, entry: dict, common_labels: dict):
        self.site = site
        self.model = entry["model"]
        self.plan = entry["plan"]
        self.name = self.model["name"]
        self.options = site["options"]
        self.components = site["components"]
        self.hardware = site_mod.model_hardware(site, self.model)
        self.mixed_gpus = len(site_mod.gpu_types(site)) > 1
        self.decisions: list[dict] = []
        self.labels = {**common_labels, "inference.blueprints/model": self.name}
        # the engine image every pod of the service runs, or None: the preset's own (burst.engine_image)
        self.engine_image = burst.engine_image(site)
        pools = self.plan.get("pools") or {}
        self.disaggregated = bool(self.plan.get("disaggregated")) and bool(pools.get("prefill"))
        self.pools = (
            {"prefill": pools["prefill"], "main": pools["decode"]}
            if self.disaggregated
            else {"main": pools.get("serve") or pools.get("decode")}
        )
        if not self.pools["main"]:
            raise IntentError(f"{self.name}: the plan has no serving pool")
        # role and KServe parallelism of each pool (the DP preset when the pool has data parallelism)
        self.roles = {
            k: "prefill" if k == "prefill" else ("decode" if self.disaggregated else "serve") for k in self.pools
        }
        self.layouts = {k: self._parallelism(pool) for k, pool in self.pools.items()}
        self.rdma_why = self._rdma_reasons()

    # ------------------------------------------------------------------ connector / offload
    def connector_names(self) -> list[str]:
        conn = self.plan.get("kv_connector") or {}
        names_ = [conn.get("name")] + [c.get("name") for c in conn.get("connectors") or []]
        return [n for n in names_ if n]

    def _rdma_reasons(self) -> list[str]:
        """Why this model's pods move traffic between nodes over RDMA, one reason each ([] = none).

        Decided here, once per model; the platform installs the network operator only for these
        (intent/platform.py ``_rdma``). Two kinds of traffic cross nodes:

        * KV between the P/D pools: the planner's connector says how it moves (NixlConnector over
          UCX, ``ucx-rdma`` when the nodes have RDMA NICs; planner/kvtransfer.py). The scheduler is
          free to place a prefill and a decode pod on different nodes, so the KV crosses them.
        * the collectives of one engine whose data-parallel ranks span pods: KServe's data-parallel
          preset runs ``data / dataLocal`` pods per engine (one LeaderWorkerSet group), each on a node
          of its own (a pod asks for ``dataLocal x tensor`` GPUs, a whole node's worth), and vLLM's
          DP/EP all-to-all and all-reduce go over NCCL between them. Over RDMA when the plan's
          interconnect is ``rdma``; over the pod network otherwise (no device to ask for)."""
        why = []
        conn = self.plan.get("kv_connector") or {}
        for c in [conn] + list(conn.get("connectors") or []):
            if "rdma" in (c.get("transport") or ""):
                why.append(f"{self.name} moves KV between pods over RDMA ({c.get('name')}, {c['transport']})")
                break
        if (self.plan.get("hardware") or {}).get("interconnect") == "rdma":
            for key, (par, dp_preset) in self.layouts.items():
                size = par["data"] // par["dataLocal"] if dp_preset else 1
                if size > 1:
                    why.append(
                        f"{self.name} {self.roles[key]} runs its {par['data']} data-parallel ranks"
                        + (" (expert parallel)" if par.get("expert") else "")
                        + f" on {size} nodes ({par['dataLocal']} per node): their collectives cross nodes over RDMA"
                    )
        return why

    def rdma(self) -> bool:
        return bool(self.rdma_why)

    def rdma_attachment(self) -> dict:
        return platform.rdma_attachment(self.options, self.site["serving_namespace"])

    def nixl(self) -> bool:
        return any(n.startswith("Nixl") for n in self.connector_names())

    def lmcache(self) -> bool:
        """LMCache in-process (LMCacheConnectorV1): only attention-only models (the compat table)."""
        return any(n == "LMCacheConnectorV1" for n in self.connector_names())

    def offload(self, key: str = "main") -> dict:
        """The plan's KV tier of one pool (pools.<role>.kv_offload), or {}."""
        off = self.pools[key].get("kv_offload") or {}
        return off if off.get("tier") not in (None, "none") else {}

    def kserve_offloading(self) -> dict | None:
        """spec.kvCacheOffloading when the plan's only connector is vLLM's native OffloadingConnector:
        KServe's preset then emits the same --kv-transfer-config itself (vLLM >= 0.22)."""
        off = self.offload()
        if not off.get("kserve_kv_cache_offloading"):
            return None
        return {"cpu": quantity.format_bytes(int(off["cpu_bytes_to_use"]))}

    # ------------------------------------------------------------------ workloads
    def _parallelism(self, pool: dict) -> tuple[dict, bool]:
        tp, pp, dp, ep = (int(pool.get(k) or 1) for k in ("tp", "pp", "dp", "ep"))
        par: dict = {"tensor": tp}
        gpn = self._gpus_per_node(pool)
        if pp > 1:
            if tp * pp > gpn:
                raise IntentError(
                    f"{self.name}: the plan runs pipeline parallelism across nodes (TP={tp} x PP={pp} > {gpn} GPUs per "
                    "node); KServe v0.20.0 ships no pipeline-parallel multi-node preset "
                    "(kserve-config-llm-worker-pipeline-parallel is not installed), so it cannot be served"
                )
            par["pipeline"] = pp
            return par, False
        if dp > 1:
            local = max(1, min(dp, gpn // tp))
            if dp % local:
                raise IntentError(f"{self.name}: DP={dp} does not split into {local} ranks per node")
            par.update({"data": dp, "dataLocal": local})
            if ep > 1:
                par["expert"] = True
            return par, True
        return par, False

    def _gpus_per_node(self, pool: dict) -> int:
        if (
            pool.get("gpu")
            and pool.get("gpu") == self.hardware.get("decode_gpu")
            and self.hardware.get("decode_gpus_per_node")
        ):
            return int(self.hardware["decode_gpus_per_node"])
        return int(self.hardware["gpus_per_node"])

    def _resources(self, pool: dict, gpus_per_pod: int) -> dict:
        gpu = catalog.gpus()[pool.get("gpu") or self.hardware["gpu"]]
        res_opt = dict(self.options["model_service"]["model_service_default_resources"])
        res_opt.update(pool.get("resources") or {})
        memory = quantity.parse(res_opt["memory"])
        off = pool.get("kv_offload") or {}
        if off.get("gib_per_pod"):
            # the CPU tier of every rank in the pod (vLLM allocates it per engine core)
            memory += quantity.parse(quantity.gib(off["gib_per_pod"]))
        limits = {GPU_RESOURCE[gpu.get("vendor", "nvidia")]: str(gpus_per_pod)}
        if self.rdma():
            limits[self.rdma_attachment()["resource"]] = "1"
        requests = {**limits, "cpu": str(res_opt["cpu"]), "memory": quantity.format_bytes(memory)}
        limits = {**limits, "memory": quantity.format_bytes(memory)}
        return {"requests": requests, "limits": limits}

    def _env(self, pool: dict, dp_preset: bool) -> list[dict]:
        ms = self.options["model_service"]
        args = engine.additional_args(
            pool.get("engine_args") or self.plan.get("engine_args") or [],
            data_parallel_preset=dp_preset,
            drop=("kv-transfer-config",) if self.kserve_offloading() else (),
            vllm_version=self.plan.get("vllm_version", catalog.DEFAULT_VLLM_VERSION),
        )
        env = [{"name": "VLLM_ADDITIONAL_ARGS", "value": args}]
        env += [{"name": k, "value": str(v)} for k, v in sorted((pool.get("engine_env") or {}).items())]
        if self.nixl():
            env += [
                {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(NIXL_SIDE_CHANNEL_PORT)},
                {
                    "name": "UCX_TLS",
                    "value": ms["model_service_ucx_tls_rdma"] if self.rdma() else ms["model_service_ucx_tls_tcp"],
                },
            ]
        if self.rdma() and self.hardware.get("rdma_fabric", "roce") == "roce":
            # KServe's presets detect the active mlx5 HCAs and the RoCE v2 GID index and export
            # NCCL_IB_HCA, UCX_NET_DEVICES and the *_IB_GID_INDEX variables when this is set.
            env.append({"name": "KSERVE_INFER_ROCE", "value": "true"})
        if self.lmcache():
            env += [
                {"name": "LMCACHE_CONFIG_FILE", "value": f"{LMCACHE_CONFIG_DIR}/lmcache.yaml"},
                {"name": "PYTHONHASHSEED", "value": "0"},
                {"name": "PROMETHEUS_MULTIPROC_DIR", "value": "/tmp/lmcache_prometheus"},
            ]
        return env

    def _shm(self, pool: dict) -> str:
        """/dev/shm: the configured size, plus vLLM's native CPU KV tier, which lives there on NVIDIA."""
        base = quantity.parse(self.options["model_service"]["model_service_shm_size"])
        tier = (pool.get("kv_offload") or {}).get("shm_gib_per_pod") or 0
        return quantity.format_bytes(base + quantity.parse(quantity.gib(tier)) if tier else base)

    def _image(self) -> dict:
        """``{"image": ...}`` for the engine container ``main`` when the site pins the engine image, else {}.

        KServe v0.20.0 merges the service's spec over its well-known presets with a strategic merge
        patch (pkg/controller/v1alpha2/llmisvc/config_merge.go, ``mergeSpecs``): ``template`` and
        ``worker`` are PodSpecs, whose ``containers`` merge by ``name``, so the image set on our
        ``main`` replaces the preset's (config/llmisvcconfig/config-llm-*.yaml run
        ghcr.io/llm-d/llm-d-cuda:v0.8.0; OpenShift AI replaces it with its ``kserve-llm-d`` image,
        red-hat-data-services/kserve config/overlays/odh) while the preset's command, probes and
        the rest of ``main`` stay. Left out, the preset's image runs."""
        return {"image": self.engine_image} if self.engine_image else {}

    @staticmethod
    def _worker(template: dict) -> dict:
        """``spec.worker`` (``spec.prefill.worker``) of a data-parallel pool: the same pod as the leader's.

        The presence of the field selects KServe's data-parallel preset (config_merge.go
        ``combineBaseRefsConfig``). KServe v0.20.0 defaults an empty worker to ``containers: []``
        (``LLMInferenceServiceSpec.SetDefaults``), and a strategic merge of an empty list changes
        nothing: the preset's worker would run as it ships, with no GPU request, no
        ``VLLM_ADDITIONAL_ARGS`` (another ``--max-model-len``, KV cache dtype and speculative config
        than the leader's ranks) and an 8Gi /dev/shm. Each worker pod runs ``dataLocal`` ranks of the
        same engine as the leader (the preset adds ``--headless`` and the start rank from
        ``LWS_WORKER_INDEX``), so it gets the leader's container ``main`` (image, engine arguments and
        environment, GPUs, RDMA device, memory) and volumes, merged by name over the preset's worker as
        the template is over its leader (workload_multi_node.go copies ``spec.worker`` into the
        LeaderWorkerSet's workerTemplate)."""
        return copy.deepcopy(template)

    def _pod(self, pool: dict, dp_preset: bool, gpus_per_pod: int) -> dict:
        ms = self.options["model_service"]
        container: dict = {
            "name": "main",
            **self._image(),
            "env": self._env(pool, dp_preset),
            "resources": self._resources(pool, gpus_per_pod),
        }
        mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
        volumes = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": self._shm(pool)}}]
        if self.lmcache():
            mounts += [
                {"name": "lmcache-config", "mountPath": LMCACHE_CONFIG_DIR, "readOnly": True},
                {"name": "lmcache-metrics", "mountPath": "/tmp/lmcache_prometheus"},
            ]
            volumes += [
                {"name": "lmcache-config", "configMap": {"name": names(self.name, False)["lmcache_config"]}},
                {"name": "lmcache-metrics", "emptyDir": {}},
            ]
        container["volumeMounts"] = mounts
        if self.rdma() and not dp_preset:
            # RDMA memory registration needs locked memory. The data-parallel presets add IPC_LOCK
            # themselves (with SYS_RAWIO and NET_RAW); capabilities.add is replaced, not merged.
            container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
        spec: dict = {"containers": [container], "volumes": volumes}
        tolerations = self.site.get("spot_tolerations") or []
        if tolerations:
            spec["tolerations"] = tolerations
        if self.mixed_gpus:
            # several GPU types in the site (a decode pool of its own, or models on their own pools):
            # each pool lands on its GPU type
            products = (ms.get("model_service_gpu_products") or {}).get(pool.get("gpu") or self.hardware["gpu"]) or []
            if products:
                spec["affinity"] = {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "nvidia.com/gpu.product", "operator": "In", "values": products}
                                    ]
                                }
                            ]
                        }
                    }
                }
        return spec

    def workload(self, key: str, autoscaled: bool) -> dict:
        pool = self.pools[key]
        role = self.roles[key]
        par, dp_preset = self.layouts[key]
        gpus_per_replica = int(pool.get("gpus_per_replica") or 1)
        tp = par["tensor"]
        gpus_per_pod = par.get("dataLocal", 1) * tp if dp_preset else gpus_per_replica
        template = self._pod(pool, dp_preset, gpus_per_pod)
        out = {
            "role": role,
            "replicas": None if autoscaled else int(pool.get("replicas") or 1),
            "parallelism": par,
            "labels": {"inference.blueprints/model": self.name, "inference.blueprints/pool": role},
            "template": template,
            # `worker` selects KServe's data-parallel presets (LeaderWorkerSet); their group size is
            # data/dataLocal, 1 when one node holds every rank. Every worker pod runs the leader's pod.
            "worker": self._worker(template) if dp_preset else None,
            "gpus_per_pod": gpus_per_pod,
            # the RDMA devices each pod of the pool asks for (resources of container main)
            "rdma_per_pod": 1 if self.rdma() else 0,
            "planned_replicas": int(pool.get("replicas") or 1),
            "gpus_per_replica": gpus_per_replica,
            "pods_per_replica": max(1, gpus_per_replica // gpus_per_pod),
            "gpu": pool.get("gpu") or self.hardware["gpu"],
            "vllm_port": VLLM_DECODE_PORT if role == "decode" else VLLM_PORT,
        }
        if dp_preset:
            _decision(
                self.decisions,
                self.name,
                f"{role} workload",
                f"LeaderWorkerSet, data={par['data']} dataLocal={par['dataLocal']}"
                + (" expert" if par.get("expert") else ""),
                "data parallelism through spec.parallelism and a worker, so KServe's data-parallel preset starts "
                "the DP ranks (--data-parallel-*, --api-server-count, IPC_LOCK/SYS_RAWIO); every worker pod runs "
                "the leader's engine arguments, GPUs, memory and /dev/shm",
            )
        return out

    # ------------------------------------------------------------------ the rest
    def autoscaling(self) -> dict | None:
        auto = self.plan.get("autoscaling") or {}
        policy = self.plan.get("policy") or {}
        main = self.pools["main"]
        replicas = int(main.get("replicas") or 1)
        scale_to_zero = bool(auto.get("scale_to_zero", policy.get("scale_to_zero", False)))
        min_replicas = int(auto.get("min_replicas", 0 if scale_to_zero else 1))
        max_replicas = max(int(auto.get("max_replicas") or replicas), replicas, 1)
        if "serving_autoscaling" not in self.components or not (scale_to_zero or max_replicas > replicas):
            return None
        out = {
            "scale_to_zero": scale_to_zero,
            "min_replicas": min_replicas,
            "max_replicas": max_replicas,
            # the load the plan sized the pools for: the per-replica trigger thresholds derive from it
            "arrival_rate_rps": float((self.plan.get("traffic") or {}).get("arrival_rate_rps") or 0) or None,
            "prefill": None,
        }
        if self.disaggregated and self.pools.get("prefill"):
            # prefill scales with decode at the plan's ratio (intent/scaling.py), so KServe leaves its replicas too
            out["prefill"] = scaling.prefill_bounds(out, int(self.pools["prefill"].get("replicas") or 1), replicas)
        return out

    def build(self) -> dict:
        auto = self.autoscaling()
        main = self.workload("main", autoscaled=auto is not None)
        prefill = self.workload("prefill", autoscaled=bool(auto and auto["prefill"])) if self.disaggregated else None
        nm = names(self.name, main["worker"] is not None, bool(prefill and prefill["worker"] is not None))
        sched_on = "inference_scheduler" in self.components
        served = inventory.served_name(self.model)
        annotations = {
            "inference.blueprints/model-id": self.model["id"],
            # the same words as the plan summary (summary.pool_text)
            "inference.blueprints/layout": ", ".join(
                summary.pool_text(
                    w["role"],
                    {
                        "replicas": w["planned_replicas"],
                        "gpus_per_replica": w["gpus_per_replica"],
                        "gpu": w["gpu"],
                        "pods_per_replica": w["pods_per_replica"],
                        "autoscaled": w["replicas"] is None,
                    },
                )
                for w in ([prefill] if prefill else []) + [main]
            ),
        }
        if not self.options["openshift_ai"]["openshift_ai_auth"]:
            # OpenShift AI's KServe protects every service with Connectivity Link's AuthPolicy unless it opts
            # out; without the AuthPolicy CRD (openshift_ai_auth: false installs no rhcl-operator) it deletes the
            # HTTPRoute and the service never routes (rhoai-3.5 router_preconditions_odh.go, IsAuthEnabled)
            annotations[OPENSHIFT_AI_AUTH_ANNOTATION] = "false"
        attach = self.rdma_attachment() if self.rdma() else {}
        if attach.get("network"):
            # Multus secondary network on the RDMA NIC: KServe copies k8s.v1.cni.cncf.io annotations of the
            # service to every pod template it creates (Deployments: propagateDeploymentMetadata; leader and
            # worker of a LeaderWorkerSet: propagateTopLevelLeaderWorkerSetMetadata).
            annotations["k8s.v1.cni.cncf.io/networks"] = f"{attach['network_namespace']}/{attach['network']}"
        _decision(
            self.decisions,
            self.name,
            "RDMA",
            self.rdma(),
            "; ".join(self.rdma_why)
            or "no traffic of this model crosses nodes over RDMA (no P/D KV over RDMA, no engine spans pods)",
        )
        out = {
            "name": self.name,
            "model_id": self.model["id"],
            "served_name": served,
            "uri": self._uri(),
            "labels": self.labels,
            "annotations": annotations,
            "names": nm,
            "disaggregated": self.disaggregated,
            "main": main,
            "prefill": prefill,
            "kv_cache_offloading": self.kserve_offloading(),
            "scheduler": self._scheduler() if sched_on else None,
            "autoscaling": auto,
            "nixl": self.nixl(),
            "rdma": self.rdma(),
            "rdma_why": "; ".join(self.rdma_why) or None,
            "lmcache": self.lmcache() and "kv_cache" in self.components,
            "offload": self.offload() or None,
            "speculative": self.plan.get("speculative"),
            "expert_parallel": any(w["parallelism"].get("expert") for w in (prefill, main) if w),
            "roles": [w["role"] for w in (prefill, main) if w],
            "slo": self.plan.get("slo") or {},
            "policy": self.plan.get("policy") or {},
        }
        out["kv_cache"] = self._kv_cache(nm) if out["lmcache"] else None
        out["scc_grant"] = scc_grant.grant(out, self.decisions)
        out["monitoring"] = monitoring.model_rules(out, self.site, self.options["observability"])
        out["decisions"] = self.decisions
        return out

    def _uri(self) -> str | None:
        """The site's artifact, else the Hugging Face repository the plan serves (planner/checkpoint.py): the one
        that holds the sized weights, never a name standing for a checkpoint no one published."""
        given = (self.model.get("artifact") or {}).get("uri")
        if given:
            return given
        pools = self.plan.get("pools") or {}
        served = (pools.get("decode") or pools.get("serve") or {}).get("served_model")
        return f"hf://{served}" if served and not served.startswith("<") else None

    def _kv_cache(self, nm: dict) -> dict:
        """LMCache (in-process LMCacheConnectorV1, attention-only models): its configuration and, for a
        pool every worker shares, the LMCache server they reach over lm://."""
        kc = self.options["kv_cache"]
        off = self.offload()
        cfg: dict = {"chunk_size": kc["kv_cache_chunk_size"], "local_cpu": off.get("tier") in ("dram", "nvme")}
        # max_local_cpu_size is per LMCache engine, one per vLLM worker (the plan sizes it per rank)
        cfg["max_local_cpu_size"] = float(off.get("lmcache_max_local_cpu_size") or 5.0)
        if off.get("tier") == "nvme":
            cfg.update(local_disk=f"file://{kc['kv_cache_disk_path']}/", max_local_disk_size=float(off["gib_per_rank"]))
        server = None
        if off.get("shared"):
            port = kc["kv_cache_server_port"]
            ns = self.site["serving_namespace"]
            cfg.update(remote_url=f"lm://{nm['lmcache_server']}.{ns}.svc:{port}", remote_serde="naive")
            server = {
                "name": nm["lmcache_server"],
                "image": kc["kv_cache_server_image"],
                "port": port,
                "replicas": kc["kv_cache_server_replicas"],
                "resources": kc["kv_cache_server_resources"],
                "labels": {
                    **self.labels,
                    "app.kubernetes.io/name": nm["lmcache_server"],
                    "app.kubernetes.io/component": "kv-cache",
                },
            }
        return {"config_map": nm["lmcache_config"], "config": cfg, "server": server}

    def _scheduler(self) -> dict:
        opts = self.options["inference_scheduler"]
        weights = self.site.get("scorer_weights") or opts["inference_scheduler_weights"]
        # AI grid tiers, or the sovereign burst's regulated and burstable bands: flow control queues requests
        # in priority bands (intent/grid.py, intent/burst_routes.py)
        flow = grid.flow_control(self.site, self.plan) or burst.flow_control(self.site, self.plan)
        # A pool that scales to zero queues requests in the EPP while it has no endpoint: with flow control
        # the router holds them (saturation is 1.0 with no candidates) and counts them in
        # llm_d_epp_flow_control_queue_size, the one router metric that moves at zero pods, which wakes the
        # pool (monitoring.autoscaling_common). Without it the EPP answers 503 before counting anything.
        auto = self.autoscaling()
        queue_at_zero = bool(auto and auto["scale_to_zero"])
        try:
            cfg = scheduler.epp_config(
                self.disaggregated,
                weights,
                int(self.plan.get("pd_non_cached_tokens") or opts["inference_scheduler_pd_non_cached_tokens"]),
                {"bands": flow["bands"], "request_ttl": flow["request_ttl"]}
                if flow
                else ({} if queue_at_zero else None),
            )
        except scheduler.SchedulerConfigError as e:
            raise scheduler.SchedulerConfigError(
                e.errors,
                f"host {self.site['host']}, model {self.name}: llm-d router {scheduler.ROUTER} would refuse "
                "its scheduler config",
            ) from None
        return {
            "config": cfg,
            "objectives": [
                {
                    "name": f"{self.name}-{c['name']}",
                    "class": c["name"],
                    "priority": int(c["priority"]),
                    "labels": {**self.labels, "inference.blueprints/priority-class": c["name"]},
                }
                for c in self.site.get("priority_classes") or []
            ],
            "objective_api_version": scheduler.OBJECTIVE_API_VERSION,
            "objective_header": scheduler.OBJECTIVE_HEADER,
            "pool_group": scheduler.POOL_GROUP,
            "router": scheduler.ROUTER,
            "flow_control": flow,
            "queue_at_zero": queue_at_zero,
        }


def build(site: dict, plans: list[dict], intent: dict) -> dict:
    models = [_Model(site, entry, intent["labels"]).build() for entry in plans]
    for m in models:
        intent["decisions"].extend(m.pop("decisions"))
    ns = site["serving_namespace"]
    return {
        "namespace": ns,
        "models": models,
        "autoscaling": monitoring.autoscaling_common(site, models),
        "metrics_reader": monitoring.metrics_reader(site, models),
        "escalation": escalation.build(site, models, plans),  # edge: intent/escalation.py
    }
