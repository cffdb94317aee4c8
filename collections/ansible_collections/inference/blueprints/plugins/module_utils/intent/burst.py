# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sovereign burst (blueprint sovereign_burst, seed 002 section 7.5): one regulated on-prem cluster,
one or more cold cloud burst clusters, decided once per cluster from the site's ``sovereign_burst``
variable (inventory.SOVEREIGN_BURST) and the plans.

* ``validate(site)``: the rules between the clusters, the request classes, the models and this
  host's own variables (its kubeconfig context, its models' digests against the burst clusters'
  prewarm lists), every problem with its path, before anything is planned or applied.
* ``fit(site)``: this cluster's share of the site: the models it serves, the traffic it is sized for
  (the sovereign the base, a burst cluster the spike over it) and its standing footprint (a burst
  cluster scales from zero).
* ``build(site, intent)``: ``intent["burst"]``, everything the ``burst_routing`` role renders: on the
  sovereign cluster the front door (intent/burst_routes.py: Envoy Gateway Backends, route, Host rewrite,
  spill-over retry and passive health check) and the regulated pin (intent/burst_pin.py, a
  ValidatingAdmissionPolicy); on a burst cluster the TLS listener and route the front door reaches, the
  KEDA ScaledObjects that scale from zero on the sovereign cluster's queue, the PinnedImageSet and the
  warm-up budget.
* ``flow_control(site, plan)``: the sovereign endpoint picker's bands, whose full burstable band answers
  429 and spills over (intent/burst_routes.py).
* ``digest_differences(intents)``: the model digests two clusters' intents run differently.

Facts about the upstream objects are cited where they are used (burst_routes.py, burst_pin.py) and:
KEDA (github.com/kedacore/keda/v2 v2.21.0 scaledobject_types.go) activates a ScaledObject from zero when a
trigger's value passes its ``activationThreshold``; llm-d-router v0.9.0 exports the flow-control queue as
``llm_d_epp_flow_control_queue_size{inference_pool, priority, ...}`` (pkg/epp/metrics), the queue a
request waits in under flow control.
"""

from __future__ import annotations

import math
import os
import re

from ..planner import data as catalog
from . import burst_routes, inventory, limits, scaling
from .schema import SchemaError, suggest
from .schema import validate as schema_validate

COMPONENT = "burst_routing"
SOVEREIGN, BURST = "sovereign", "burst"
flow_control = burst_routes.flow_control  # the sovereign EPP's bands (serving.py reads them)
# The sovereign cluster stands at its planned replicas: the planner clamps min_replicas to them
# (planner/assemble.py, min(policy.min_replicas, replicas)).
SOVEREIGN_MIN_REPLICAS = 1 << 16
MODELCAR = re.compile(r"^oci(\+native)?://([^@\s]+@sha256:[0-9a-f]{64})$")
GIB = 1024**3 / 1e9  # GB per GiB


def enabled(site: dict) -> bool:
    return COMPONENT in site["components"]


def engine_image(site: dict) -> str | None:
    """The engine image every LLMInferenceService of a sovereign-burst site runs on both clusters
    (``sovereign_burst.engine_image``, by digest; the burst clusters pin it through ``prewarm``), or
    None: the OpenShift AI preset's own. serving.py puts it on each pool's container ``main``."""
    if not enabled(site):
        return None
    return (site.get("sovereign_burst") or {}).get("engine_image") or None


def _modelcar(model: dict) -> str | None:
    m = MODELCAR.match(((model.get("artifact") or {}).get("uri")) or "")
    return m.group(2) if m else None


def _served(sb: dict, models: list[dict]) -> dict[str, list[str]]:
    """{cluster: models[].name it serves}, defaults filled (sovereign: every model; burst: the burstable ones)."""
    names = [m["name"] for m in models]
    burstable = {n for c in sb["request_classes"] if not c["regulated"] for n in c["models"]}
    out = {}
    for c in sb["clusters"]:
        given = c.get("models")
        if given is not None:
            out[c["name"]] = list(given)
        elif c["role"] == SOVEREIGN:
            out[c["name"]] = names
        else:
            out[c["name"]] = [n for n in names if n in burstable]
    return out


# ------------------------------------------------------------------------------------------ checks
def kubeconfig_path(site: dict, env=None) -> str:
    """The kubeconfig this cluster is reached with: k8s_kubeconfig, else K8S_AUTH_KUBECONFIG, KUBECONFIG,
    ~/.kube/config (the order of kubernetes.core and k8s_client.load_configuration)."""
    env = os.environ if env is None else env
    path = site.get("k8s_kubeconfig") or env.get("K8S_AUTH_KUBECONFIG") or env.get("KUBECONFIG") or "~/.kube/config"
    return os.path.expanduser(str(path))


def _context_error(site: dict, env=None) -> tuple[str, str] | None:
    context = site.get("k8s_context")
    if not context:
        return None
    path = kubeconfig_path(site, env)
    if os.pathsep in path:
        return None  # a KUBECONFIG list: kubernetes' own loader merges it and names a missing context
    try:
        import yaml  # lazy: module_utils import without PyYAML

        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh) or {}
    except OSError as e:
        return ("k8s_kubeconfig", f"{path} cannot be read ({e.strerror}); k8s_context {context!r} needs it")
    except Exception as e:  # noqa: BLE001 - any YAML error is a bad kubeconfig
        return ("k8s_kubeconfig", f"{path} is not a kubeconfig ({type(e).__name__})")
    names = [c.get("name") for c in (data.get("contexts") or []) if isinstance(c, dict)]
    if context in names:
        return None
    return (
        "k8s_context",
        f"{context!r} is not a context of {path}{suggest(context, names)}; valid: {', '.join(names) or '(none)'}",
    )


def validate(site: dict, env=None) -> None:
    """Raise SchemaError with every problem of the sovereign_burst variables, from this host's view."""
    sb = site.get("sovereign_burst")
    where = f"host {site['host']}"
    if sb and not enabled(site):
        raise SchemaError([("sovereign_burst", f"blueprint {site['blueprint']!r} has no {COMPONENT} component")], where)
    if not enabled(site):
        return
    if not sb:
        raise SchemaError(
            [("sovereign_burst", f"required by the {COMPONENT} component: clusters, request_classes, peak_factor")],
            where,
        )
    errors: list[tuple[str, str]] = []
    models = {m["name"]: (i, m) for i, m in enumerate(site["models"])}
    clusters = sb["clusters"]
    names = [c["name"] for c in clusters]
    sovereigns = [c["name"] for c in clusters if c["role"] == SOVEREIGN]
    if len(sovereigns) != 1:
        errors.append(("sovereign_burst.clusters", f"exactly one cluster has role sovereign; found {len(sovereigns)}"))
    if not any(c["role"] == BURST for c in clusters):
        errors.append(("sovereign_burst.clusters", "no cluster has role burst"))
    if site["host"] not in names:
        errors.append(
            (
                "sovereign_burst.clusters",
                f"host {site['host']!r} is not one of the clusters ({', '.join(names)}); each inventory host is one "
                "cluster and is named here",
            )
        )
    served = _served(sb, site["models"])
    errors += _cluster_errors(sb, served, models)
    errors += _class_errors(sb, served, models, sovereigns[0] if len(sovereigns) == 1 else None)
    errors += _digest_errors(site, sb, served, models)
    if sb.get("engine_image") and not site.get("vllm_version"):
        errors.append(
            (
                "vllm_version",
                "required with sovereign_burst.engine_image: the planner writes engine flags for one vLLM version and "
                "cannot read it from an image digest; give the image's vLLM version (0.24.0 for OpenShift AI "
                "3.5.0's image, RELATED_IMAGE_RHAII_VLLM_CUDA_IMAGE_UPSTREAM_VERSION in its CSV; supported: "
                + ", ".join(catalog.supported_vllm_versions())
                + ")",
            )
        )
    ctx = _context_error(site, env)
    if ctx:
        errors.append(ctx)
    if errors:
        raise SchemaError(errors, where)


def _cluster_errors(sb: dict, served: dict, models: dict) -> list[tuple[str, str]]:
    errors = []
    for i, c in enumerate(sb["clusters"]):
        p = f"sovereign_burst.clusters[{i}]"
        for j, n in enumerate(c.get("models") or []):
            if n not in models:
                errors.append((f"{p}.models[{j}]", f"unknown model {n!r}{suggest(n, models)}"))
        if not served[c["name"]]:
            errors.append((f"{p}.models", f"cluster {c['name']!r} serves no model"))
        if c["role"] == BURST:
            if not c.get("gateway"):
                errors.append(
                    (f"{p}.gateway", "required for a burst cluster: the public name of its inference gateway")
                )
            elif not (c["gateway"].get("certificate") or {}).get("secret"):
                errors.append(
                    (
                        f"{p}.gateway.certificate",
                        f"required for a burst cluster: {{secret: <name>}}, the kubernetes.io/tls Secret (in the "
                        f"serving namespace of {c['name']!r}) whose certificate its TLS listener serves for "
                        f"{c['gateway']['hostname']}; the front door verifies it against the system CAs",
                    )
                )
            if not c.get("prewarm"):
                errors.append(
                    (
                        f"{p}.prewarm",
                        "required for a burst cluster: the digests its GPU nodes pin before a spike (each ModelCar "
                        "it serves and the engine image), else the first requests wait for a registry pull",
                    )
                )
        elif not c.get("metrics_url"):
            errors.append(
                (f"{p}.metrics_url", "required for the sovereign cluster: the burst clusters scale on its queue")
            )
    return errors


def _class_errors(sb: dict, served: dict, models: dict, sov: str | None) -> list[tuple[str, str]]:
    errors = []
    on_prem = set(served.get(sov) or [])
    off_prem = {n for c in sb["clusters"] if c["role"] == BURST for n in served[c["name"]]}
    for i, cls in enumerate(sb["request_classes"]):
        for j, n in enumerate(cls["models"]):
            path = f"sovereign_burst.request_classes[{i}].models[{j}]"
            if n not in models:
                errors.append((path, f"unknown model {n!r}{suggest(n, models)}"))
            elif cls["regulated"] and n not in on_prem:
                errors.append(
                    (
                        path,
                        f"{n!r} is served only on burst cluster(s) and class {cls['name']!r} is regulated: a "
                        f"regulated class never leaves the sovereign cluster {sov!r}; serve {n!r} there or drop it "
                        "from the class",
                    )
                )
            elif n not in on_prem and n not in off_prem:
                errors.append((path, f"no cluster serves {n!r}"))
    return errors


def _digest_errors(site: dict, sb: dict, served: dict, models: dict) -> list[tuple[str, str]]:
    """Every model a burst cluster serves is a ModelCar by digest, and this host runs exactly the digests
    the burst clusters pin: the shared prewarm lists anchor both clusters to one digest per model."""
    errors = []
    engine = sb.get("engine_image") or None
    me = site["host"]
    role = next((c["role"] for c in sb["clusters"] if c["name"] == me), None)
    for i, c in enumerate(sb["clusters"]):
        if c["role"] != BURST:
            continue
        p = f"sovereign_burst.clusters[{i}].prewarm"
        prewarm = list(c.get("prewarm") or [])
        for n in served[c["name"]]:
            if n not in models:
                continue
            k, m = models[n]
            ref = _modelcar(m)
            if ref is None:
                errors.append(
                    (
                        f"models[{k}].artifact.uri",
                        f"{n!r} is served on burst cluster {c['name']!r}: it must be a ModelCar pinned by digest "
                        "(oci://<registry>/<repository>@sha256:<64 hex>) from the one shared registry, so both "
                        "clusters run the same bytes and the burst cluster can pin them",
                    )
                )
                continue
            if prewarm and ref not in prewarm and (me == c["name"] or role == SOVEREIGN):
                whose = "this burst cluster" if me == c["name"] else f"burst cluster {c['name']!r}"
                errors.append(
                    (
                        f"models[{k}].artifact.uri",
                        f"{ref} is not the digest {whose} pins ({p}: {', '.join(prewarm)}): the two clusters would run "
                        f"different builds of {n!r}; use one digest of the shared registry on both",
                    )
                )
        if engine and prewarm and engine not in prewarm and (me == c["name"] or role == SOVEREIGN):
            errors.append(
                (
                    p,
                    f"lacks the engine image {engine} (sovereign_burst.engine_image): every LLMInferenceService "
                    f"of both clusters runs it, so burst cluster {c['name']!r} pins it before a spike; add it",
                )
            )
        if me == c["name"] and prewarm:
            runs = {_modelcar(models[n][1]) for n in served[c["name"]] if n in models} | ({engine} if engine else set())
            extra = [img for img in prewarm if img not in runs]
            if extra:
                errors.append(
                    (p, f"holds {', '.join(extra)}, which this cluster does not run: pin exactly the digests it runs")
                )
    return errors


def digest_differences(intents: dict) -> list[str]:
    """The models two clusters of one sovereign-burst site run from different artifacts (empty: aligned)."""
    seen: dict[str, tuple[str, str]] = {}
    out = []
    for host, intent in sorted(intents.items()):
        if not intent.get("burst"):
            continue
        for m in intent["serving"]["models"]:
            first = seen.setdefault(m["name"], (host, m["uri"]))
            if first[1] != m["uri"]:
                out.append(f"{m['name']}: {first[0]} runs {first[1]}, {host} runs {m['uri']}")
    return out


# ------------------------------------------------------------------------------------------ sizing
def _scaled(traffic: dict, factor: float) -> dict:
    out = dict(traffic)
    if out.get("concurrent_sessions") is not None:
        out["concurrent_sessions"] = max(1, math.ceil(out["concurrent_sessions"] * factor))
    if out.get("arrival_rate_rps") is not None:
        out["arrival_rate_rps"] = round(out["arrival_rate_rps"] * factor, 6)
    return out


def fit(site: dict) -> dict:
    """This cluster's share of the site (models, traffic, standing footprint), before it is planned."""
    if not enabled(site):
        return site
    sb = site["sovereign_burst"]
    me = next(c for c in sb["clusters"] if c["name"] == site["host"])
    served = _served(sb, site["models"])[me["name"]]
    models = []
    for m in site["models"]:
        if m["name"] not in served:
            continue
        m = dict(m)
        if me["role"] == SOVEREIGN:
            # sized for the base (the models' traffic), standing at its planned replicas
            m["policy"] = {**m["policy"], "scale_to_zero": False, "min_replicas": SOVEREIGN_MIN_REPLICAS}
        else:
            # sized for the spike over the base, standing at zero
            base = m.get("traffic") or site.get("traffic") or {}
            m["traffic"] = _scaled(base, sb["peak_factor"] - 1) or None
            m["policy"] = {**m["policy"], "scale_to_zero": True, "min_replicas": 0}
        models.append(m)
    given = site.get("slo_given") or [[] for model in site["models"]]
    keep = [i for i, m in enumerate(site["models"]) if m["name"] in served]
    return {
        **site,
        "models": models,
        "slo_given": [given[i] for i in keep if i < len(given)],
        # what every cluster serves, from the whole site's models (this host plans only its own)
        "burst_served": _served(sb, site["models"]),
        "burst_warmup": sb.get("warmup") or schema_validate({}, inventory.WARMUP),
    }


# ------------------------------------------------------------------------------------------ warm-up
def warmup(plan: dict, w: dict, pinned: bool, engine_pinned: bool = True) -> dict:
    """Seconds from a scale-from-zero decision to a serving engine on a burst node, with the reason.

    ``pinned``: the ModelCar is pinned on the node; ``engine_pinned``: so is the engine image (only when
    ``sovereign_burst.engine_image`` names it: the preset's own image is not in ``prewarm``, so the
    first pod on a node pulls it)."""
    layout = plan.get("layout") or {}
    mem = plan.get("memory") or {}
    weights_gb = float(mem.get("weights_gib_per_gpu") or 0) * int(layout.get("tp") or 1) * int(layout.get("pp") or 1)
    weights_gb *= GIB
    read_s = weights_gb / w["disk_gbyte_per_s"]
    pull_s = (w["engine_image_gb"] + weights_gb) * 8 / w["registry_gbit_per_s"]
    engine_pull_s = 0.0 if engine_pinned else w["engine_image_gb"] * 8 / w["registry_gbit_per_s"]
    warm = math.ceil(engine_pull_s + read_s + w["engine_start_seconds"])
    cold = math.ceil(pull_s + read_s + w["engine_start_seconds"])
    engine_pull = (
        ""
        if engine_pinned
        else f"{w['engine_image_gb']:g} GB engine image pulled at {w['registry_gbit_per_s']:g} Gbit/s "
        f"({engine_pull_s:.0f} s: the preset's image is not pinned; set sovereign_burst.engine_image) + "
    )
    why = (
        f"{engine_pull}{weights_gb:.1f} GB of weights read from the node's pinned ModelCar at "
        f"{w['disk_gbyte_per_s']:g} GB/s ({read_s:.0f} s) + {w['engine_start_seconds']:g} s engine start"
        if pinned
        else f"{w['engine_image_gb']:g} GB engine image + {weights_gb:.1f} GB ModelCar pulled at "
        f"{w['registry_gbit_per_s']:g} Gbit/s ({pull_s:.0f} s) + read at {w['disk_gbyte_per_s']:g} GB/s "
        f"({read_s:.0f} s) + {w['engine_start_seconds']:g} s engine start"
    )
    return {
        "seconds": warm if pinned else cold,
        "pinned": pinned,
        "engine_pinned": engine_pinned,
        "unpinned_seconds": cold,
        "weights_gb": round(weights_gb, 1),
        "why": why
        + (f"; without the pinned images {cold} s (pulls at {w['registry_gbit_per_s']:g} Gbit/s)" if pinned else ""),
    }


# ------------------------------------------------------------------------------------------ build
def build(site: dict, intent: dict) -> dict | None:
    """intent["burst"]: what burst_routing renders on this cluster, and the plan's burst figures."""
    if not enabled(site):
        return None
    sb = site["sovereign_burst"]
    opts = site["options"][COMPONENT]
    ns = site["serving_namespace"]
    me = next(c for c in sb["clusters"] if c["name"] == site["host"])
    sov = next(c for c in sb["clusters"] if c["role"] == SOVEREIGN)
    bursts = [c for c in sb["clusters"] if c["role"] == BURST]
    header = opts["burst_routing_class_header"]
    classes = [
        {"name": c["name"], "regulated": c["regulated"], "models": list(c["models"])} for c in sb["request_classes"]
    ]
    burstable = [c["name"] for c in classes if not c["regulated"]]
    out = {
        "role": me["role"],
        "cluster": me["name"],
        "sovereign": sov["name"],
        "bursts": [b["name"] for b in bursts],
        "namespace": ns,
        "class_header": header,
        "classes": classes,
        "burstable": burstable,
        "peak_factor": sb["peak_factor"],
        "sizing": _sizing(intent, me["role"], sb["peak_factor"]),
        "front_door": None,
        "spill": None,
        "ingress": None,
        "scale_from_zero": None,
        "pinned_image_sets": [],
        "warmup": [],
    }
    if me["role"] == SOVEREIGN:
        out["front_door"] = burst_routes.front_door(site, intent, out, sov, bursts)
        out["spill"] = _spill(intent) or None
    else:
        out["ingress"] = burst_routes.ingress(site, intent, out, me)
        out["scale_from_zero"] = _scale_from_zero(site, intent, opts, ns, sov)
        pools = list(site["options"]["image_prewarm"]["image_prewarm_pools"]) or ["worker"]
        out["pinned_image_sets"] = [
            {"name": burst_routes.backend_name(site, f"prewarm-{pool}"), "pool": pool, "images": list(me["prewarm"])}
            for pool in pools
        ]
        w = site["burst_warmup"]
        seen = detection(site)
        for entry in intent["plans"]:
            ref = _modelcar(entry["model"])
            budget = warmup(
                entry["plan"],
                w,
                pinned=bool(ref and ref in me["prewarm"]),
                engine_pinned=bool(engine_image(site) in me["prewarm"]),
            )
            out["warmup"].append(
                {
                    "model": entry["model"]["name"],
                    **budget,
                    "detect_seconds": seen["seconds"],
                    "first_token_seconds": budget["seconds"] + seen["seconds"],
                    "detect_why": seen["why"],
                }
            )
    return out


def detection(site: dict) -> dict:
    """The wait between a queue passing the activation threshold and KEDA's scale-from-zero decision: Prometheus
    sees the queue at its next scrape of the router, KEDA at its next poll, then its query and the scale take
    under a second (measured 15.5-30.7 s with both at 15 s: tests/autoscaling/test_activation.py, which checks
    the decision against this figure). The burst cluster's ``sovereign-queue`` trigger reads the sovereign's
    Prometheus: this reads this cluster's ``observability_scrape_interval``, which the two clusters share when it
    is set in group_vars as the example does."""
    poll = int(site["options"]["serving_autoscaling"]["serving_autoscaling_polling_seconds"])
    interval = site["options"]["observability"]["observability_scrape_interval"]
    try:
        scrape = math.ceil(limits.duration_s(interval))
    except ValueError as e:
        raise SchemaError([("observability_scrape_interval", str(e))], site["host"]) from None
    return {
        "seconds": poll + scrape,
        "why": f"the decision comes about {poll + scrape} s at most after the queue passes the threshold: "
        f"Prometheus scrapes the router every {interval}, KEDA polls every {poll} s",
    }


def _sizing(intent: dict, role: str, peak: float) -> list[dict]:
    out = []
    served = {m["name"]: m for m in intent["serving"]["models"]}
    for entry in intent["plans"]:
        plan, name = entry["plan"], entry["model"]["name"]
        main = (plan.get("pools") or {}).get("decode") or (plan.get("pools") or {}).get("serve") or {}
        auto = (served.get(name) or {}).get("autoscaling") or {}
        traffic = plan.get("traffic") or {}
        out.append(
            {
                "model": name,
                "replicas": int(main.get("replicas") or 1),
                "gpus_per_replica": int(main.get("gpus_per_replica") or 1),
                "standing_replicas": int(auto.get("min_replicas", main.get("replicas") or 1)),
                "max_replicas": int(auto.get("max_replicas", main.get("replicas") or 1)),
                "concurrent_sessions": traffic.get("concurrent_sessions"),
                "arrival_rate_rps": traffic.get("arrival_rate_rps"),
                "why": "the base traffic (the models' traffic): on-prem capacity is bought for it and stands"
                if role == SOVEREIGN
                else f"the spike over the base ({peak:g} x base - base), standing at zero: KEDA scales it from zero on "
                "the sovereign cluster's queue",
            }
        )
    return out


def _spill(intent: dict) -> list[dict]:
    """Per model on the sovereign cluster: the burstable queue bound beyond which requests spill over."""
    out = []
    for m in intent["serving"]["models"]:
        fc = (m.get("scheduler") or {}).get("flow_control") or {}
        if fc.get("spill_bound"):
            out.append(
                {
                    "model": m["name"],
                    "bound": fc["spill_bound"],
                    "activation": fc["activation"],
                    "why": fc["bands"][-1]["why"],
                }
            )
    return out


def _scale_from_zero(site, intent, opts, ns, sov) -> dict:
    sa = site["options"]["serving_autoscaling"]
    auto = intent["serving"].get("autoscaling") or {}
    local = auto.get("scaled_objects") or []
    secret = f"{opts['burst_routing_metrics_secret']}-{sov['name']}"[:253]
    queue = scaling.trigger_settings(site)["queue_threshold"]
    models = {m["name"]: m for m in intent["serving"]["models"]}
    for name in models:
        if not any(a["model"] == name for a in local):
            raise SchemaError(
                [(f"models.{name}", "a burst cluster scales from zero: needs the serving_autoscaling component")]
            )
    scaled = []
    for a in local:
        m = models[a["model"]]
        # a total over the sovereign pool, per replica of this ScaledObject's pool (prefill: x decode/prefill)
        threshold = scaling.fmt(scaling.milli_up(queue * a["share"]))
        remote = {
            "name": "sovereign-queue",
            "server": sov["metrics_url"],
            "auth": secret,
            # the flow-control queue of the same model's pool on the sovereign cluster (same namespace and name
            # on both clusters): under flow control requests wait there, below the spill bound
            "query": f'sum(llm_d_epp_flow_control_queue_size{{inference_pool="{m["names"]["pool"]}"}})',
            "threshold": threshold,
            "activation": f"{queue:g}",
            "metric_type": scaling.AVERAGE,
        }
        triggers = [remote] + [
            {
                **t,
                "server": sa["serving_autoscaling_prometheus_url"],
                "auth": intent["serving"]["metrics_reader"]["service_account"],
                "activation": "0",
            }
            for t in a["triggers"]
        ]
        scaled.append({**a, "triggers": triggers})
    # the burst cluster's ScaledObjects are these (one per workload: KEDA refuses a second one)
    auto["scaled_objects"] = []
    return {"secret": secret, "trigger_auth": secret, "scaled_objects": scaled}


# ------------------------------------------------------------------------------------------ report
def summary_lines(intent: dict) -> list[str]:
    """The burst figures of one cluster, next to the plan's (playbook output, CLI, report)."""
    b = intent.get("burst")
    if not b:
        return []
    out = []
    regulated = [c["name"] for c in b["classes"] if c["regulated"]]
    if b["role"] == SOVEREIGN:
        out.append(
            f"burst: {b['cluster']} is the sovereign cluster; classes {', '.join(regulated) or '(none)'} and any "
            f"request without a burstable {b['class_header']} stay on it; {', '.join(b['burstable']) or '(none)'} "
            f"spill over to {', '.join(b['bursts'])} when on-prem refuses them (a full queue: 429) and fail over "
            "when it is ejected"
        )
    for sp in b.get("spill") or []:
        out.append(
            f"burst {sp['model']}: spill-over beyond {sp['bound']} queued burstable requests on-prem; the burst "
            f"cluster starts warming at a queue of {sp['activation']:g} | {sp['why']}"
        )
    for s in b["sizing"]:
        out.append(
            f"burst {s['model']}: {s['replicas']} x {s['gpus_per_replica']} GPU replica(s) planned for "
            f"{s['concurrent_sessions']} sessions / {s['arrival_rate_rps']} req/s, standing {s['standing_replicas']}, "
            f"up to {s['max_replicas']} | {s['why']}"
        )
    for w in b["warmup"]:
        out.append(
            f"burst {w['model']}: warm-up {w['seconds']} s, first token from zero about {w['first_token_seconds']} s"
            f" | {w['why']}; {w['detect_why']}"
        )
    return out


def site_markdown(intents: dict) -> list[str]:
    parts = []
    for host, intent in sorted(intents.items()):
        b = intent.get("burst")
        if not b:
            continue
        parts += [f"## {host}: sovereign burst ({b['role']})", ""]
        parts += [f"- {line.removeprefix('burst ')}" for line in summary_lines(intent)]
        parts.append("")
    return parts
