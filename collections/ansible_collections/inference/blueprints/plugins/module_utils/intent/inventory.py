# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The site inventory's variables: the one definition every reader validates against.

A site is an inventory whose hosts are clusters. Its variables are of three kinds:

* site variables (``SITE_FIELDS``): blueprint, site_name, hardware, models, ...;
* component options: ``<role>_<option>`` variables of the collection's roles, defined
  (type, choices, default) by each role's ``meta/argument_specs.yml`` and nowhere else;
* connection variables (``k8s_kubeconfig``, ``k8s_context``) and Ansible's own.

Precedence for every value: the inventory (host_vars over group_vars; ``-e`` over both),
then the blueprint file's ``defaults``, then the default written here or in the role's
argument spec.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re

from .. import ownership
from ..planner import data as catalog
from ..planner import hf_config
from ..planner import inputs as planner_inputs
from . import front_door_tls
from .schema import (
    DNS_LABEL,
    DNS_SUBDOMAIN,
    IMAGE_BY_DIGEST,
    MISSING,
    Field,
    dns_label,
    from_argument_spec,
    suggest,
    unique_names,
)

COLLECTION_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES_DIR = os.path.join(COLLECTION_DIR, "roles")

# Roles that are not components of a blueprint (shared helpers).
HELPER_ROLES = ("deploy", "olm_operator")

# Longest model name: KServe derives child names with kmeta.ChildName, which hashes a name once
# <name> + its longest suffix (-kserve-self-signed-certs, 25 characters) passes 63 characters.
MODEL_NAME_MAX = 38


def _artifact_uri(value: str) -> str | None:
    if value.startswith("oci://"):
        if not IMAGE_BY_DIGEST.match(value[len("oci://") :]):
            return (
                f"{value!r} is an OCI artifact without a digest; pin it as "
                "oci://<registry>/<repository>@sha256:<64 hex digits> (a tag can change under you)"
            )
        return None
    if value.startswith(("pvc://", "hf://", "s3://", "gs://", "https://")):
        return None
    return (
        f"{value!r} has no known scheme; valid: oci://...@sha256:<digest>, pvc://<claim>/<path>, "
        "hf://<org>/<model>, s3://, gs://"
    )


# Component options that name an image a cluster pulls, as a full reference: pinned by digest, as
# everything that reaches a cluster is (an empty value leaves the operator's own default, which its
# bundle pins). Options named *_image(s) that are not full references (the GPU operator composes the
# driver image from repository, name and version plus the node's OS) are listed apart;
# tests/reliability/test_static.py checks that every *_image(s) option is one or the other.
PINNED_IMAGE_OPTIONS = (
    "nfd_operand_image",
    "kv_cache_server_image",
    "image_prewarm_images",
    "image_prewarm_pause_image",
    "image_prewarm_stage_image",
)
IMAGE_NAME_OPTIONS = ("gpu_operator_driver_image",)


def _pinned_image(value) -> str | None:
    if value in (None, "") or IMAGE_BY_DIGEST.match(str(value)):
        return None
    return (
        f"{value!r} is not pinned by digest; valid: <registry>/<repository>@sha256:<64 hex digits> "
        "(a tag can change under you; leave it empty for the operator's pinned default)"
    )


def _pinned(rule: Field) -> Field:
    if rule.type == "list":
        element = dataclasses.replace(rule.elements or Field("str"), check=_pinned_image)
        return dataclasses.replace(rule, elements=element)
    return dataclasses.replace(rule, check=_pinned_image)


def catalog_id_error(value: str) -> str | None:
    """Why ``value`` is not a model catalog id (None: it is one)."""
    models = catalog.models()
    if value in models:
        return None
    return f"unknown model {value!r}{suggest(value, models)}; catalog ids: {', '.join(models)}"


def _gpu_ids() -> tuple:
    return tuple(catalog.gpus())


def _gpu_id(value: str) -> str | None:
    gpus = _gpu_ids()
    return None if value in gpus else f"unknown GPU {value!r}{suggest(value, gpus)}; catalog ids: {', '.join(gpus)}"


def _http_url(value: str) -> str | None:
    if not value or re.match(r"^https?://[^/\s]+", value):
        return None
    return f"{value!r} is not an http(s) URL; valid: https://<host>[:<port>][/<path>]"


def _traffic_check(t: dict) -> str | None:
    if t.get("concurrent_sessions") is None and t.get("arrival_rate_rps") is None:
        return "give concurrent_sessions or arrival_rate_rps (or both)"
    return None


_POSITIVE_INT = Field("int", minimum=1)
_POSITIVE_NUM = Field("float", minimum=0, exclusive_minimum=True)

TRAFFIC = Field(
    "dict",
    options={
        "prompt_tokens_mean": Field("int", minimum=1, doc="mean prompt length, tokens"),
        "prompt_tokens_p95": Field("int", minimum=1, doc="95th percentile prompt length, tokens"),
        "output_tokens_mean": Field("int", minimum=1, doc="mean output length, tokens"),
        "output_tokens_p95": Field("int", minimum=1, doc="95th percentile output length, tokens"),
        "concurrent_sessions": Field("int", minimum=1, doc="sessions open at once at peak"),
        "arrival_rate_rps": Field(
            "float", minimum=0, exclusive_minimum=True, doc="requests per second at peak (Poisson arrivals)"
        ),
    },
    check=_traffic_check,
    doc="traffic shape: prompt/output token means and p95s, concurrent_sessions, arrival_rate_rps",
)
if set(TRAFFIC.options) != set(planner_inputs.TRAFFIC_KEYS):  # one list of traffic keys (the planner's)
    raise AssertionError("intent.inventory TRAFFIC and planner.inputs.TRAFFIC_KEYS differ")

SLO = Field(
    "dict",
    options={
        "ttft_p95_ms": Field(
            "float", minimum=0, exclusive_minimum=True, doc="time to first token, 95th percentile, ms"
        ),
        "tpot_p95_ms": Field(
            "float", minimum=0, exclusive_minimum=True, doc="time per output token, 95th percentile, ms"
        ),
    },
    doc="service level objectives in milliseconds",
)
if set(SLO.options) != set(planner_inputs.SLO_KEYS):
    raise AssertionError("intent.inventory SLO and planner.inputs.SLO_KEYS differ")

HARDWARE = Field(
    "dict",
    required=True,
    options={
        "gpu": Field("str", required=True, check=_gpu_id, doc=lambda: "the GPU of the nodes: " + ", ".join(_gpu_ids())),
        "gpus_per_node": Field("int", required=True, minimum=1, doc="GPUs of one node"),
        "nodes": Field("int", required=True, minimum=1, doc="GPU nodes of the cluster"),
        "interconnect": Field(
            "str",
            default="nvlink",
            choices=planner_inputs.INTERCONNECTS,
            doc="between the nodes' GPUs: nvlink (one node only), rdma, ethernet",
        ),
        "rdma_fabric": Field(
            "str",
            default="roce",
            choices=("roce", "infiniband"),
            doc="with interconnect rdma: RoCE (Ethernet; pods get the RDMA secondary network and GID detection) "
            "or InfiniBand",
        ),
        "decode_gpu": Field("str", check=_gpu_id, doc="a second node pool for the P/D decode engines: its GPU"),
        "decode_gpus_per_node": Field("int", minimum=1, doc="GPUs of one decode node (default: gpus_per_node)"),
        "decode_nodes": Field("int", minimum=1, doc="decode nodes (default 1)"),
    },
    doc="the cluster's GPU pools: gpu, gpus_per_node, nodes, interconnect, decode_*",
)

# A model served on its own node pool (a site mixing GPU types per model class): the planner
# sizes it on these GPUs and its pods are pinned to them by GPU feature discovery's product label.
MODEL_HARDWARE = Field(
    "dict",
    options={
        "gpu": Field("str", required=True, check=_gpu_id, doc="the GPU of the pool's nodes"),
        "gpus_per_node": Field("int", required=True, minimum=1, doc="GPUs of one node of the pool"),
        "nodes": Field("int", required=True, minimum=1, doc="nodes of the pool"),
        "interconnect": Field("str", choices=planner_inputs.INTERCONNECTS, doc="default: hardware.interconnect"),
    },
    doc="the node pool this model runs on, when not the site's hardware (gpu, gpus_per_node, nodes)",
)


def _model_id_doc() -> str:
    """Read when a message needs it: importing the schema loads no catalog (ansible-test imports it without PyYAML)."""
    return "a model catalog id (" + ", ".join(catalog.models()) + "), or any name for a model given by architecture"


def _architecture(value) -> str | None:
    if isinstance(value, str) and value.strip():
        return None
    if isinstance(value, dict) and value:
        return None
    return (
        f"must be the path of the model's Hugging Face config.json (relative to the inventory directory) or its "
        f"fields as a mapping, got {type(value).__name__}"
    )


MODEL = Field(
    "dict",
    options={
        "name": Field(
            "str",
            required=True,
            pattern=DNS_LABEL,
            pattern_doc="a DNS-1123 label (lower case letters, digits and '-', starting and ending alphanumeric)",
            max_length=MODEL_NAME_MAX,
            doc="the model's Kubernetes name (its LLMInferenceService and pods)",
        ),
        # a catalog id, checked with the other keys of the model (own_model.model_errors): a model given by architecture
        # is named freely
        "id": Field("str", required=True, doc=_model_id_doc),
        "architecture": Field(
            "raw",
            check=_architecture,
            doc="a model outside the catalog: its Hugging Face config.json, as a path relative to the inventory "
            "directory (outside it, e.g. ../models/<name>/config.json, or under a directory named .*: Ansible parses "
            "other files there as inventory) or its fields inline (model_type, num_hidden_layers, hidden_size, ...)",
        ),
        "quantization": Field(
            "str",
            choices=tuple(hf_config.QUANTIZATIONS),
            doc="with architecture: the checkpoint's precision when its config.json has no quantization_config",
        ),
        "served_name": Field("str", doc="the model name clients send (default: the model's id); unique in the site"),
        "weights": Field(
            "str",
            choices=planner_inputs.WEIGHTS + tuple(planner_inputs.WEIGHT_ALIASES),
            doc="precision of the weights (default auto: the first the blueprint allows that the GPU runs and fits)",
        ),
        "kv_cache_dtype": Field(
            "str",
            choices=planner_inputs.KV_DTYPES + tuple(planner_inputs.KV_ALIASES),
            doc="precision of the KV cache (auto: the model's; unset: the planner decides)",
        ),
        "max_model_len": Field("int", minimum=1, doc="longest context (prompt + output) an engine accepts, tokens"),
        "contexts": Field(
            "list",
            elements=_POSITIVE_INT,
            min_items=1,
            doc="context lengths the plan reports the sessions that fit for",
        ),
        "gpu_memory_utilization": Field(
            "float", minimum=0, exclusive_minimum=True, maximum=1, doc="share of GPU memory vLLM may use (default 0.92)"
        ),
        "artifact": Field(
            "dict",
            options={"uri": Field("str", required=True, check=_artifact_uri, doc="the weights' location")},
            doc="where the weights come from: uri (oci://...@sha256:<digest>, pvc://, hf://); a catalog model "
            "without it loads hf://<its published repository of the planned weights>; required with architecture",
        ),
        "traffic": TRAFFIC,
        "slo": SLO,
        "policy": Field("dict", doc="planner policy overrides for this model (docs/planner.md)"),
        "hardware": MODEL_HARDWARE,
    },
)


def served_name(model: dict) -> str:
    """The model name clients send for a models[] entry: its served_name, else its id."""
    return model.get("served_name") or model["id"]


PRIORITY_CLASS = Field(
    "dict",
    options={
        "name": Field("str", required=True, doc="the class requests name in their objective header", **dns_label()),
        "priority": Field("int", required=True, doc="higher is served first; negative is shed first"),
    },
)

TOLERATION = Field(
    "dict",
    options={
        "key": Field("str"),
        "operator": Field("str", choices=("Exists", "Equal")),
        "value": Field("str"),
        "effect": Field("str", choices=("NoSchedule", "PreferNoSchedule", "NoExecute")),
        "tolerationSeconds": Field("int"),
    },
    drop_unset=True,
)

# AI grid (blueprint ai_grid, intent/grid.py): tenants, their tiers and the model cascade. The
# cross-field rules (a tenant's tier is a tier, its models are the site's, ...) are in grid.validate.
_INLINE_CREDENTIAL_KEYS = ("key", "api_key", "apiKey", "token", "value", "password", "secret_key", "data")


def _credential(value, how: str = "") -> str | None:
    """A credential is a Secret reference, never the key itself (the value is never echoed)."""
    how = (
        how or "give a Secret reference {secret: <name>} whose data holds the tenant's API key under the tenant's name"
    )
    if isinstance(value, str):
        return f"an inline credential is not accepted (value not shown); {how}"
    if not isinstance(value, dict):
        return f"must be a Secret reference; {how}"
    inline = [k for k in value if k in _INLINE_CREDENTIAL_KEYS]
    if inline:
        return f"an inline credential ({', '.join(map(str, inline))}) is not accepted (value not shown); {how}"
    unknown = [k for k in value if k != "secret"]
    if unknown:
        return f"unknown key(s) {', '.join(map(str, unknown))}; valid keys: secret"
    name = value.get("secret")
    if not isinstance(name, str) or not DNS_SUBDOMAIN.match(name) or len(name) > 253:
        return f"secret must name a Secret (a DNS-1123 subdomain); {how}"
    return None


def _escalation_credential(value) -> str | None:
    """An edge escalation's credential: a Secret reference (key 'credential') and the header it goes in."""
    how = (
        "give {secret: <name>} (optionally header: <the grid's API-key header>), a Secret whose key 'credential' holds "
        "this site's API key of the regional grid"
    )
    if isinstance(value, dict) and set(value) <= {"secret", "header"}:
        header = value.get("header", "x-api-key")
        if not isinstance(header, str) or not re.match(r"^[A-Za-z0-9-]+$", header):
            return f"header must be an HTTP header name; {how}"
        return _credential({"secret": value.get("secret")}, how)
    return _credential(value, how)


TENANT = Field(
    "dict",
    options={
        "name": Field("str", required=True, **{**dns_label(), "max_length": 50}),
        "tier": Field("str", required=True, doc="one of the site's tiers (gold, silver, bronze)"),
        "models": Field("list", required=True, elements=Field("str"), min_items=1, doc="models[].name it may use"),
        "tokens_per_minute": Field(
            "int", minimum=0, exclusive_minimum=True, doc="token budget per minute (> 0; default: its tier's)"
        ),
        "credential": Field("raw", required=True, check=_credential, secret=True, doc="{secret: <Secret name>}"),
    },
)

TIER = Field(
    "dict",
    required=True,
    options={
        "max_tokens": Field(
            "int", required=True, minimum=1, doc="the largest max_tokens a request of the tier may ask"
        ),
        "tokens_per_minute": Field("int", required=True, minimum=0, exclusive_minimum=True),
        "queue_seconds": Field("float", required=True, minimum=0, exclusive_minimum=True),
    },
)

CASCADE = Field(
    "dict",
    options={
        "enabled": Field("bool", default=False),
        "model": Field("str", default="auto", doc="the model name clients send to enter the cascade"),
        "order": Field("list", elements=Field("str"), min_items=2, doc="models[].name, smallest first"),
        "easy_fraction": Field("float", minimum=0, exclusive_minimum=True, maximum=1),
        "hard_fraction": Field("float", minimum=0, maximum=1, default=0),
        "escalate_prompt_bytes": Field("int", minimum=1, doc="requests at least this large start one class up"),
    },
    doc="AI grid model cascade: order (smallest first), easy_fraction, hard_fraction, escalate_prompt_bytes",
)

# issue 13 (docs/verify.md): bounds and shape options of the SLO benchmark, and the canary's gates and change.
SLO_BENCHMARK = Field(
    "dict",
    options={
        "max_requests": Field("int", minimum=1, maximum=100000, default=200, doc="requests per entry point, at most"),
        "max_seconds": Field("float", minimum=1, maximum=3600, default=120, doc="seconds per entry point, at most"),
        "max_concurrency": Field("int", minimum=1, maximum=10000, default=256, doc="requests in flight, at most"),
        "rate_scale": Field("float", minimum=0, exclusive_minimum=True, default=1.0, doc="x the planned arrival rate"),
        "shared_prefix_fraction": Field(
            "float", minimum=0, maximum=0.95, default=0.0, doc="share of the mean prompt that every request shares"
        ),
        "max_error_rate": Field("float", minimum=0, maximum=1, default=0.01),
        "request_timeout": Field("float", minimum=1, default=300),
        "worker_processes": Field("int", minimum=1, maximum=16, default=1, doc="guidellm worker processes"),
    },
    doc="verify's SLO benchmark: bounds (requests, seconds, concurrency) and traffic options",
)


# Namespaces the cluster and its platform own: models are never served there, and no teardown may take them.
SYSTEM_NAMESPACE_PREFIXES = ("kube-", "openshift-")
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", "openshift")


def _user_namespace(value: str) -> str | None:
    if value in SYSTEM_NAMESPACES or value.startswith(SYSTEM_NAMESPACE_PREFIXES):
        return (
            f"{value!r} is a namespace of the cluster itself (default, kube-*, openshift-*): the serving stage "
            "would label it and a teardown would delete it; valid: a namespace of your own, e.g. llm-serving"
        )
    return None


def _dns_name(doc: str) -> Field:
    """A required public DNS name (a gateway's hostname)."""
    return Field("str", required=True, pattern=DNS_SUBDOMAIN, pattern_doc="a DNS name (lower case)", doc=doc)


def _image_digest(value: str) -> str | None:
    return (
        None if IMAGE_BY_DIGEST.match(value) else f"{value!r} is not an image pinned by digest (<repo>@sha256:<64 hex>)"
    )


def _vllm_version(value: str) -> str | None:
    """vllm_version: a released vLLM version whose flag set and compatibility table the planner has."""
    have = catalog.supported_vllm_versions()
    if not re.match(r"^\d+\.\d+(\.\d+)?([+.-][0-9A-Za-z.+-]*)?$", value):
        return f"{value!r} is not a vLLM version (valid: <major>.<minor>[.<patch>], one of {', '.join(have)})"
    minor = ".".join(value.split(".")[:2])
    if minor not in have:
        return (
            f"vLLM {value}: the collection has no flag set or compatibility table for {minor} (supported: "
            f"{', '.join(have)}); the engine would be given flags it may refuse"
        )
    return None


def _engine_image(value: str) -> str | None:
    """sovereign_burst.engine_image: a full reference pinned by digest, <registry>/<repository>@sha256:<64 hex>."""
    valid = (
        "valid: <registry>/<repository>@sha256:<64 hex digits> (skopeo inspect docker://<image>:<tag> gives a "
        "tag's digest)"
    )
    name, at, digest = value.partition("@")
    if not at:
        what = "is pinned by a tag, not a digest" if ":" in name.rsplit("/", 1)[-1] else "has no digest"
        return (
            f"{value!r} {what}: both clusters must run the same engine bytes and the burst nodes pin them, and a "
            f"tag can move; {valid}"
        )
    if not IMAGE_BY_DIGEST.match(value):
        return f"{value!r} has no valid digest ({digest!r} is not sha256:<64 lowercase hex digits>); {valid}"
    host = name.split("/", 1)[0]
    if "/" not in name or not ("." in host or ":" in host or host == "localhost"):
        return (
            f"{value!r} names no registry: the container runtime would resolve it through its search list, so the "
            f"two clusters could pull different images; {valid}"
        )
    return None


CANARY = Field(
    "dict",
    options={
        "ttft_regression_pct": Field(
            "float", minimum=0, default=10, doc="largest TTFT increase over the baseline at the gate percentile, %"
        ),
        "tpot_regression_pct": Field(
            "float", minimum=0, default=10, doc="largest TPOT increase over the baseline at the gate percentile, %"
        ),
        "percentile": Field("str", choices=("p50", "p95", "p99"), default="p95"),
        "max_error_rate": Field("float", minimum=0, maximum=1, default=0.01),
        "ready_timeout": Field("float", minimum=1, default=900, doc="seconds a changed pool may take to be ready"),
        "models": Field("list", elements=Field("str"), doc="models[].name to canary (default: every model)"),
        "image": Field("str", check=_image_digest, doc="new engine image of each pool, by digest"),
        "engine_args": Field(
            "list", elements=Field("str"), doc="engine flags set on each pool (--flag=value replaces --flag)"
        ),
        "model_uri": Field("str", check=_artifact_uri, doc="new model artifact (one field for both pools)"),
    },
    doc="canary.yml: the change (image, engine_args, model_uri) and its TTFT/TPOT gates",
)

# Sovereign burst (blueprint sovereign_burst, intent/burst.py): the clusters of the site with their
# roles, the request classes and which are regulated, the burst clusters' prewarm digests and the
# warm-up budget's inputs. One variable both clusters read (group_vars/all); the rules between its
# fields and the hosts' own variables are in burst.validate.
BURST_CLUSTER = Field(
    "dict",
    options={
        "name": Field("str", required=True, doc="the cluster's inventory host", **dns_label()),
        "role": Field("str", required=True, choices=("sovereign", "burst")),
        "models": Field(
            "list",
            elements=Field("str"),
            doc="models[].name this cluster serves (sovereign default: every model; burst default: every model a "
            "burstable class uses)",
        ),
        "gateway": Field(
            "dict",
            options={
                "hostname": _dns_name(
                    "public DNS name of the cluster's inference gateway: its TLS listener's hostname and the Host "
                    "and SNI the front door sends"
                ),
                "port": Field("int", minimum=1, maximum=65535, default=443),
                "certificate": Field(
                    "dict",
                    options={"secret": Field("str", required=True, pattern=DNS_SUBDOMAIN, pattern_doc="a Secret name")},
                    doc="the kubernetes.io/tls Secret (by name, in the burst cluster's serving namespace) its listener "
                    "serves; required for a burst cluster",
                ),
            },
            doc="burst: where the sovereign front door reaches this cluster's inference gateway (TLS)",
        ),
        "metrics_url": Field(
            "str",
            check=_http_url,
            doc="sovereign: its Thanos querier as the burst clusters reach it (KEDA reads the on-prem queue there)",
        ),
        "prewarm": Field(
            "list",
            elements=Field("str", check=_image_digest),
            doc="burst: every image its GPU nodes pin before a spike, by digest: the engine image and each model's "
            "ModelCar, exactly the digests the sovereign cluster runs",
        ),
    },
)

REQUEST_CLASS = Field(
    "dict",
    options={
        "name": Field("str", required=True, **dns_label()),
        "regulated": Field("bool", required=True, doc="true: never leaves the sovereign cluster"),
        "models": Field("list", required=True, elements=Field("str"), min_items=1, doc="models[].name it uses"),
    },
)

WARMUP = Field(
    "dict",
    options={
        "registry_gbit_per_s": Field(
            "float",
            minimum=0,
            exclusive_minimum=True,
            default=10,
            doc="pull bandwidth of a burst node from the "
            "shared registry, Gbit/s (default 10: a round figure; measure yours)",
        ),
        "disk_gbyte_per_s": Field(
            "float",
            minimum=0,
            exclusive_minimum=True,
            default=2,
            doc="read bandwidth of a node's image storage, "
            "GB/s, where a pinned ModelCar is read from (default 2: a round figure for one NVMe; measure yours)",
        ),
        "engine_image_gb": Field(
            "float",
            minimum=0,
            default=10,
            doc="compressed size of the engine image, GB (default 10: an assumption; skopeo inspect gives yours)",
        ),
        "engine_start_seconds": Field(
            "float",
            minimum=0,
            default=60,
            doc="engine start after the weights are read: CUDA graphs, KV pool, "
            "compile (default 60: an assumption; the first start's log gives yours)",
        ),
    },
    doc="inputs of the warm-up budget (intent/burst.py warmup)",
)

SOVEREIGN_BURST = Field(
    "dict",
    options={
        "clusters": Field(
            "list",
            required=True,
            elements=BURST_CLUSTER,
            min_items=2,
            check=unique_names("name"),
            doc="every cluster of the site: name (its inventory host), role, models, gateway, metrics_url, prewarm",
        ),
        "request_classes": Field(
            "list",
            required=True,
            elements=REQUEST_CLASS,
            min_items=1,
            check=unique_names("name"),
            doc="name, regulated, models: a regulated class never leaves the sovereign cluster",
        ),
        "peak_factor": Field(
            "float",
            required=True,
            minimum=1,
            exclusive_minimum=True,
            doc="peak traffic over the models' traffic (the base the sovereign cluster is sized for); the burst "
            "clusters are sized for the difference",
        ),
        "engine_image": Field(
            "str",
            check=_engine_image,
            doc="the engine image (container main) of every LLMInferenceService on both clusters, "
            "<registry>/<repository>@sha256:<64 hex>; the burst clusters' prewarm must hold it (empty: the "
            "OpenShift AI preset's own, not pinned)",
        ),
        "warmup": WARMUP,
    },
    doc="sovereign_burst: clusters, request_classes, peak_factor, engine_image, warmup (docs/sovereign-burst.md)",
)


# Site variables. The blueprint file's `defaults` may set any of these except the ones in
# SITE_ONLY (they describe the site, not the traffic shape).
SITE_FIELDS: dict[str, Field] = {
    "blueprint": Field("str", required=True, doc="name of a data file in blueprints/"),
    "site_name": Field(
        "str", required=True, doc="the site's name: labels, ownership and default directories", **dns_label()
    ),
    "delivery": Field(
        "str",
        default="apply",
        choices=("apply", "render", "gitops"),
        doc="apply to the clusters, render object files, or write a GitOps repository tree",
    ),
    "render_dir": Field(
        "path",
        doc="delivery=render/gitops: output directory (default render/<site_name>), outside every inventory directory",
    ),
    "report_dir": Field(
        "path",
        doc="where plan.yml writes the sizing report (default reports/<site_name>), outside every inventory directory",
    ),
    "serving_namespace": Field(
        "str",
        default="llm-serving",
        check=_user_namespace,
        aliases=("namespace",),
        doc="the namespace the models are served in (not default, kube-* or openshift-*)",
        **dns_label(),
    ),
    "blueprints_dir": Field("path", doc="directory of the blueprint data files"),
    "hardware": HARDWARE,
    "models": Field("list", required=True, elements=MODEL, min_items=1, check=unique_names("name")),
    "priority_classes": Field(
        "list",
        elements=PRIORITY_CLASS,
        check=unique_names("name"),
        default=[],
        doc="request priorities of the llm-d scheduler (one InferenceObjective each): name, priority",
    ),
    "scorer_weights": Field(
        "dict",
        options={
            "prefix_cache": Field("float", minimum=0, default=3),
            "queue": Field("float", minimum=0, default=2),
            "kv_cache": Field("float", minimum=0, default=2),
        },
        doc="llm-d scheduler scorer weights",
    ),
    "autoscaling_trigger": Field(
        "dict",
        options={
            "queue_threshold": Field(
                "float",
                minimum=0,
                exclusive_minimum=True,
                doc="queued requests per replica that add one (default: serving_autoscaling_queue_threshold)",
            ),
            "cooldown_seconds": Field(
                "int",
                minimum=0,
                doc="seconds before a replica is removed (default: serving_autoscaling_cooldown_seconds)",
            ),
        },
        doc="KEDA scaling of the engines on the scheduler's queue; a site's keys go over the blueprint's",
    ),
    "spot_tolerations": Field(
        "list", elements=TOLERATION, default=[], doc="tolerations of the engine pods (spot or preemptible nodes)"
    ),
    "escalation": Field(
        "dict",
        options={
            "enabled": Field("bool", default=False),
            "endpoint": Field("str", check=_http_url),
            "model": Field("str", doc="the regional class's served name: the escalated body's model"),
            "credential": Field(
                "raw",
                check=_escalation_credential,
                secret=True,
                doc="this site's key of the regional grid: {secret: <name>, header: <the grid's API-key header, "
                "default x-api-key>}; the Secret's key 'credential' holds it (an inline key is not accepted)",
            ),
        },
        doc="edge: forward hard queries to a regional endpoint",
    ),
    "slo": Field(
        "dict",
        options=SLO.options,
        doc="fallback SLO for models without their own (usually a blueprint default)",
    ),
    "traffic": Field(
        "dict",
        options=TRAFFIC.options,
        doc="fallback traffic for models without their own (usually a blueprint default)",
    ),
    "tenants": Field(
        "list",
        elements=TENANT,
        check=unique_names("name"),
        default=[],
        doc="AI grid tenants: name, tier, models, tokens_per_minute, credential {secret}",
    ),
    "tiers": Field(
        "dict",
        values=TIER,
        default={},
        doc="AI grid tiers by priority class name: max_tokens, tokens_per_minute, queue_seconds",
    ),
    "cascade": CASCADE,
    "ingress": Field(
        "dict",
        options={
            "hostname": _dns_name(
                "public DNS name of the AI grid's front door (the edge sites' escalation endpoint's host)"
            ),
            "port": Field("int", minimum=1, maximum=65535, default=443),
            "certificate": Field(
                "dict",
                required=True,
                options={"secret": Field("str", required=True, pattern=DNS_SUBDOMAIN, pattern_doc="a Secret name")},
                doc="the kubernetes.io/tls Secret (by name, in the serving namespace) the HTTPS listener serves",
            ),
        },
        doc="ai_grid: the front door's HTTPS listener for callers outside the cluster (edge escalation)",
    ),
    "front_door_tls": front_door_tls.FIELD,
    "gitops": Field(
        "dict",
        options={
            "repo_url": Field(
                "str",
                doc="Git repository Argo CD syncs from (the render_dir is its working tree), without credentials",
            ),
            "revision": Field("str", default="HEAD"),
            "path": Field("str", default="", doc="where render_dir lies inside the repository"),
            "project": Field("str", pattern=DNS_LABEL, pattern_doc="a DNS-1123 label", doc="default: site_name"),
            "destination_server": Field(
                "str",
                default="https://kubernetes.default.svc",
                check=_http_url,
                doc="API server of this cluster as Argo CD knows it (its own cluster by default)",
            ),
        },
        doc="delivery=gitops: the repository and the Argo CD that delivers it",
    ),
    # issue 13: the SLO benchmark of verify.yml, the canary's gates and change, the measured calibration
    "slo_benchmark": SLO_BENCHMARK,
    "canary": CANARY,
    "calibration": Field(
        "list",
        elements=Field("dict"),
        doc="measured engine figures verify writes to host_vars/<cluster>/calibration.yml; the planner checks "
        "each entry (docs/planner.md, Calibration)",
    ),
    "sovereign_burst": SOVEREIGN_BURST,
    "vllm_version": Field(
        "str",
        check=_vllm_version,
        doc="the vLLM version of the engine image the site runs: the planner writes only that version's flags and "
        "features (supported: 0.24, 0.33; default 0.33.0). OpenShift AI 3.5.0's presets run vLLM 0.24.0 "
        "(docs/planner.md, Engine versions)",
    ),
    "k8s_kubeconfig": Field("path", doc="kubeconfig of this cluster (default: K8S_AUTH_KUBECONFIG)"),
    "k8s_context": Field("str", doc="kubeconfig context of this cluster"),
    "adopt": Field(
        "list",
        elements=Field("str", check=ownership.check_entry),
        default=[],
        doc="objects that exist on the cluster before the site's first converge and that it may take over, as "
        f"{ownership.ADOPT_DOC}: updated by a converge, never deleted by a teardown (everything else that exists "
        "and was not created by the site stops the converge before its first write)",
    ),
    "accept_missed_slo": Field(
        "bool",
        default=False,
        doc="true: a converge applies plans that miss their SLOs on the given hardware (the plan summary says so); "
        "false (default): it stops before applying anything and says which model misses which SLO and how many GPUs "
        "would meet it. A render (delivery render) is never stopped; plan.yml only prints the plan",
    ),
    "same_cluster_as": Field(
        "list",
        elements=Field("str"),
        default=[],
        doc="the other hosts of this site that are meant to reach the same cluster as this one (preflight stops a "
        "site whose hosts reach one cluster unless each names the other here)",
    ),
}
SITE_ONLY = (
    "blueprint",
    "site_name",
    "hardware",
    "models",
    "blueprints_dir",
    "k8s_kubeconfig",
    "k8s_context",
    "adopt",
    "same_cluster_as",
    "tenants",
    "cascade",
    "ingress",
    "front_door_tls",
    "calibration",
    "sovereign_burst",
    "vllm_version",
    "accept_missed_slo",
)


@functools.cache
def component_names() -> tuple[str, ...]:
    """Every role of the collection that can be a blueprint component."""
    return tuple(
        sorted(
            d
            for d in os.listdir(ROLES_DIR)
            if d not in HELPER_ROLES and os.path.isfile(os.path.join(ROLES_DIR, d, "meta", "argument_specs.yml"))
        )
    )


@functools.cache
def _component_specs() -> dict[str, dict[str, Field]]:
    import yaml  # lazy

    out: dict[str, dict[str, Field]] = {}
    for role in component_names():
        with open(os.path.join(ROLES_DIR, role, "meta", "argument_specs.yml"), encoding="utf-8") as fh:
            spec = yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 or {}
        options = ((spec.get("argument_specs") or {}).get("main") or {}).get("options") or {}
        # a component's tunables are its `<role>_*` options; anything else in a spec is an internal input
        fields = {name: from_argument_spec(opt or {}) for name, opt in options.items() if name.startswith(role + "_")}
        out[role] = {name: _pinned(f) if name in PINNED_IMAGE_OPTIONS else f for name, f in fields.items()}
    return out


def component_options(role: str) -> dict[str, Field]:
    """The ``<role>_*`` variables of a component role, from its argument spec."""
    return _component_specs()[role]


def all_variables() -> dict[str, Field]:
    """Every variable a site inventory may set (site variables and component options)."""
    out = dict(SITE_FIELDS)
    for role in component_names():
        out.update(component_options(role))
    return out


def defaults_of(options: dict[str, Field]) -> dict:
    return {k: f.default for k, f in options.items() if f.default is not MISSING}
