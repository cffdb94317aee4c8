"""Shared helpers for the serving tests (render, integration, benchmarks)."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
PLAYBOOKS = ROOT / "playbooks"
INVENTORIES = ROOT / "inventories"
COLLECTION = ROOT / "collections/ansible_collections/inference/blueprints"
FLAGS_CATALOG = COLLECTION / "plugins/module_utils/planner/catalog/vllm_flags_0.33.yaml"

# example inventory -> local control plane profile its hardware matches
EXAMPLES = {
    "example-chat": "h100-8x2-rdma",
    "example-rag": "h100-8x2-rdma",
    "example-batch": "h100-8x2-rdma",
    "example-edge-fleet": "sno-rtx-pro-6000",
    "example-ai-grid": "grid-h100",
    "example-sovereign-burst": "h100-8x2-rdma",  # both clusters' hardware; one control plane holds both trees
}

# Kinds the local control plane cannot serve because the Go module proxy here does not carry
# the upstream version that defines them (tests/controlplane/README.md, "Upstream versions").
NOT_SERVED_LOCALLY = {
    ("nv-ipam.nvidia.com", "IPPool"): "network-operator v26 CRDs (nv-ipam) not available to the local control plane",
    ("nv-ipam.nvidia.com", "CIDRPool"): "network-operator v26 CRDs (nv-ipam) not available to the local control plane",
    ("operator.openshift.io", "LeaderWorkerSetOperator"): "openshift/lws-operator CRDs not available locally",
    (
        "argoproj.io",
        "ArgoCD",
    ): "the OpenShift GitOps operator's ArgoCD CRD: its Go modules (argoproj-labs/argocd-operator, "
    "redhat-developer/gitops-operator) are refused by the module proxy here",
    ("datasciencecluster.opendatahub.io", "DataScienceCluster"): "locally opendatahub-operator v2.35: DSC v1 only",
    ("dscinitialization.opendatahub.io", "DSCInitialization"): "locally opendatahub-operator v2.35: DSCI v1 only",
}

# Fields the upstream version the project targets has but the older CRD the local control plane
# loads lacks (rendering without cluster facts writes the target version's shape).
LOCAL_SCHEMA_GAPS = {
    ("nvidia.com", "ClusterPolicy"): ".spec.driver.kernelModuleType",  # GPU operator v26 field; v24.3 CRD locally
    ("mellanox.com", "NicClusterPolicy"): ".spec.nvIpam",  # network-operator v26 field; v1.4.0 CRD locally
}


def load_rendered(render_dir: Path) -> list[tuple[Path, dict]]:
    out = []
    for path in sorted(Path(render_dir).rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append((path, doc))
    return out


def group_of(obj: dict) -> str:
    api = obj["apiVersion"]
    return api.split("/")[0] if "/" in api else ""


def vllm_flags(value: str) -> list[str]:
    """Split VLLM_ADDITIONAL_ARGS the way the KServe preset's shell eval does; return the flags."""
    return [tok for tok in shlex.split(value) if tok.startswith("--")]


def engine_args_of(svc: dict) -> list[tuple[str, str]]:
    """(workload, VLLM_ADDITIONAL_ARGS) of every workload (main and prefill) of an LLMInferenceService."""
    found = []
    spec = svc.get("spec", {})
    for workload, section in (("main", spec), ("prefill", spec.get("prefill") or {})):
        for c in (section.get("template") or {}).get("containers", []):
            for env in c.get("env", []):
                if env.get("name") == "VLLM_ADDITIONAL_ARGS":
                    found.append((workload, env.get("value", "")))
    return found


def known_vllm_flags() -> dict[str, object]:
    """vLLM 0.33 flags with their value type: the planner's catalog (checked against the 0.33.0 parser)."""
    return dict(yaml.safe_load(FLAGS_CATALOG.read_text())["flags"])


def flag_name(token: str) -> str:
    return token.split("=", 1)[0].replace("_", "-").split(".", 1)[0]


def _value_ok(kind, value: str) -> bool:
    if kind == "int":
        return value.lstrip("-").isdigit()
    if kind == "float":
        try:
            float(value)
        except ValueError:
            return False
        return True
    if kind == "json":
        try:
            json.loads(value)
        except ValueError:
            return False
        return True
    if isinstance(kind, list):
        return value in [str(k) for k in kind]
    return True


def check_engine_args(svc: dict, flags: dict) -> list[str]:
    """Problems with the engine arguments of one LLMInferenceService (empty list: all good)."""
    problems = []
    for workload, value in engine_args_of(svc):
        for tok in shlex.split(value):
            if not tok.startswith("--"):
                problems.append(f"{svc['metadata']['name']}/{workload}: stray token {tok!r}")
                continue
            name = flag_name(tok)
            where = f"{svc['metadata']['name']}/{workload}: {name}"
            if name not in flags:
                problems.append(f"{where} is not a vLLM 0.33 flag")
                continue
            kind = flags[name]
            if "=" in tok:
                val = tok.split("=", 1)[1]
                if name in ("--kv-transfer-config", "--speculative-config", "--kv-events-config"):
                    kind = "json"
                if kind == "bool":
                    problems.append(f"{where} is a switch but has a value")
                elif not _value_ok(kind, val):
                    problems.append(f"{where}={val} is not a valid {kind}")
            elif kind not in (None, "bool"):
                problems.append(f"{where} needs a value ({kind})")
    return problems


def blueprint_signature(objs: list[dict], blueprint: str) -> list[str]:
    """What makes each blueprint what it is; returns the list of missing properties."""
    missing = []
    svcs = [o for o in objs if o["kind"] == "LLMInferenceService"]
    scaled = [o for o in objs if o["kind"] == "ScaledObject"]
    if not svcs:
        return ["no LLMInferenceService"]
    if blueprint == "chat":
        # P/D with NIXL where the planner finds that disaggregation pays (else one pool, same routing)
        for s in svcs:
            args = dict(engine_args_of(s))
            if "prefill" in s["spec"] and not all("NixlConnector" in v for v in args.values()):
                missing.append(f"{s['metadata']['name']}: disaggregated without NixlConnector on both pools")
            if not any("--enable-prefix-caching" in v for v in args.values()):
                missing.append(f"{s['metadata']['name']}: no prefix caching")
            if "scheduler" not in (s["spec"].get("router") or {}):
                missing.append(f"{s['metadata']['name']}: no llm-d scheduler (cache-aware routing)")
    elif blueprint == "rag":
        for s in svcs:
            pcp = any("--prefill-context-parallel-size" in v for _, v in engine_args_of(s))
            sections = [s["spec"]] + ([s["spec"]["prefill"]] if "prefill" in s["spec"] else [])
            tp = max(int((sec.get("parallelism") or {}).get("tensor", 1)) for sec in sections)
            if not (pcp or tp > 1):
                missing.append(f"{s['metadata']['name']}: neither PCP nor TP > 1 on prefill")
    elif blueprint == "batch":
        if not any(o["spec"].get("minReplicaCount") == 0 for o in scaled):
            missing.append("no ScaledObject with minReplicaCount 0")
    elif blueprint == "edge_sno":
        for s in svcs:
            if s["spec"].get("replicas") != 1:
                missing.append(f"{s['metadata']['name']}: replicas is {s['spec'].get('replicas')}, not 1")
            if "prefill" in s["spec"]:
                missing.append(f"{s['metadata']['name']}: disaggregated")
            if "@sha256:" not in s["spec"]["model"]["uri"]:
                missing.append(f"{s['metadata']['name']}: model not pinned by digest")
            if "scheduler" in (s["spec"].get("router") or {}):
                missing.append(f"{s['metadata']['name']}: router.scheduler is set")
    elif blueprint == "ai_grid":
        # many models, each with its own scheduler, behind one tenant-aware front door
        if len(svcs) < 2:
            missing.append(f"{len(svcs)} LLMInferenceService, a grid serves several model classes")
        for s in svcs:
            if "scheduler" not in (s["spec"].get("router") or {}):
                missing.append(f"{s['metadata']['name']}: no llm-d scheduler (flow control by tier)")
        for kind in ("AIGatewayRoute", "SecurityPolicy", "BackendTrafficPolicy"):
            if not any(o["kind"] == kind for o in objs):
                missing.append(f"no {kind} (tenant routing, API keys, token budgets)")
    elif blueprint == "sovereign_burst":
        # the front door with its admission-policy pin on the sovereign cluster, scale from zero on the
        # sovereign queue and pinned images on the burst cluster
        if not any(o["kind"] == "Backend" and o["spec"].get("fallback") for o in objs):
            missing.append("no fallback Backend (the burst cluster behind the front door)")
        if not any(o["kind"] == "ValidatingAdmissionPolicy" for o in objs):
            missing.append("no ValidatingAdmissionPolicy (the regulated pin)")
        remote = [
            o
            for o in scaled
            if o["spec"].get("minReplicaCount") == 0
            and any(t["name"] == "sovereign-queue" for t in o["spec"]["triggers"])
        ]
        if not remote:
            missing.append("no ScaledObject from zero on the sovereign cluster's queue")
        if not any(o["kind"] == "PinnedImageSet" and "prewarm" in o["metadata"]["name"] for o in objs):
            missing.append("no PinnedImageSet of the burst cluster's prewarm digests")
    return missing


def blueprint_of(inventory: str) -> str:
    for f in (INVENTORIES / inventory / "group_vars").rglob("*.yml"):
        data = yaml.safe_load(f.read_text()) or {}
        if "blueprint" in data:
            return data["blueprint"]
    raise LookupError(f"{inventory}: no blueprint variable")


def kubectl_apply(cluster, objs: list[dict], manager: str, dry_run: bool = False):
    """Server-side apply of ``objs`` with kubectl of the plane's Kubernetes version, as ``manager`` (the
    CompletedProcess: tests assert on its returncode and stderr, a refusal included)."""
    text = yaml.safe_dump_all(objs, sort_keys=False)
    args = ["apply", "--server-side", f"--field-manager={manager}", "--force-conflicts", "-f", "-"]
    if dry_run:
        args.append("--dry-run=server")
    return cluster.kubectl(*args, input=text)


def until(cond, timeout: float, what: str, seen=None, poll: float = 0.5):
    """Poll ``cond`` until it returns something true and return that; fail naming what was awaited and, with
    ``seen``, what was there instead."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(poll)
    raise AssertionError(f"not within {timeout:.0f} s: {what}" + (f"; saw {seen()}" if seen else ""))
