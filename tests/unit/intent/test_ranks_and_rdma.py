"""Every rank of an engine runs the same pod, and RDMA is used where, and only where, traffic crosses nodes.

No cluster: the example sites' intents, rendered with the roles' templates. What KServe's controller
makes of these services (its merge with the data-parallel presets) is checked on a control plane with
the real controller (tests/kserve_checks.py, tests/integration/test_kserve_workloads.py).
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils.intent import placement, summary
from ansible_collections.inference.blueprints.plugins.plugin_utils import render

ROOT = Path(__file__).resolve().parents[3]
INVENTORIES = ROOT / "inventories"
EXAMPLES = sorted(p.name for p in INVENTORIES.iterdir() if (p / "hosts.yml").exists())
NETWORKS = "k8s.v1.cni.cncf.io/networks"


@pytest.fixture(scope="module")
def intents():
    return {site: cli.site_intents(str(INVENTORIES / site), None) for site in EXAMPLES}


def rendered(intent: dict, stage: str = "serving") -> list[dict]:
    return render.render_components(intent["stages"][stage], intent)


def services(intent: dict) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in rendered(intent) if o["kind"] == "LLMInferenceService"}


def pools(svc: dict) -> list[dict]:
    return [p for p in (svc["spec"], svc["spec"].get("prefill")) if p]


def pods(pool: dict) -> list[dict]:
    """The pod specs KServe runs for a pool: the leader's (template) and, with a worker, the workers'."""
    return [p for p in (pool.get("template"), pool.get("worker")) if p is not None]


def main(pod: dict) -> dict:
    return next(c for c in pod["containers"] if c["name"] == "main")


def env(container: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def args(container: dict) -> list[str]:
    return shlex.split(env(container)["VLLM_ADDITIONAL_ARGS"])


def shm(pod: dict) -> str:
    return next(v for v in pod["volumes"] if v["name"] == "dshm")["emptyDir"]["sizeLimit"]


def rdma_devices(container: dict) -> int:
    limits = container["resources"]["limits"]
    return sum(int(v) for k, v in limits.items() if k.startswith(("rdma/", "openshift.io/")))


# ---------------------------------------------------------------------------------- ranks


def test_the_397b_worker_asks_for_its_gpus_and_runs_the_leaders_engine(intents):
    """The grid's flagship: data-parallel ranks of TP GPUs, more of them than one 4-GPU node holds, so an
    engine is a LeaderWorkerSet of a leader and worker pods. The worker used to be ``{}``, which KServe's
    data-parallel preset filled with no GPU request, no engine arguments and an 8Gi /dev/shm (issue 24)."""
    intent = intents["example-ai-grid"]["grid-central-1"]
    svc = services(intent)["qwen-397b-a17b"]
    spec = svc["spec"]
    plan = next(e["plan"] for e in intent["plans"] if e["model"]["name"] == "qwen-397b-a17b")
    serve = plan["pools"]["serve"]
    par = spec["parallelism"]
    assert (par["tensor"], par["data"], par.get("expert")) == (serve["tp"], serve["dp"], True)
    assert par["data"] > par["dataLocal"], "the engine spans pods: a leader and its workers"
    leader, worker = main(spec["template"]), main(spec["worker"])
    gpus_per_pod = serve["tp"] * par["dataLocal"]  # dataLocal ranks of TP GPUs per pod
    for c in (leader, worker):
        assert c["resources"]["requests"]["nvidia.com/gpu"] == str(gpus_per_pod)
        assert c["resources"]["limits"]["nvidia.com/gpu"] == str(gpus_per_pod)
    assert args(worker) == args(leader)
    for flag in ("--max-model-len=32768", "--kv-cache-dtype=fp8"):
        assert flag in args(worker)
    assert any(a.startswith("--speculative-config=") for a in args(worker))
    assert shm(spec["worker"]) == shm(spec["template"]) != "8Gi"
    assert worker["resources"]["requests"]["memory"] == leader["resources"]["requests"]["memory"]


@pytest.mark.parametrize("site", EXAMPLES)
def test_every_rank_of_every_engine_runs_the_leaders_pod(intents, site):
    """Leader and worker pods of a data-parallel pool (KServe's LeaderWorkerSet) are the same pod: image,
    engine arguments and environment, GPUs, RDMA device, memory, /dev/shm, placement."""
    for intent in intents[site].values():
        for name, svc in services(intent).items():
            for pool in pools(svc):
                if pool.get("worker") is None:
                    continue
                assert pool["worker"] == pool["template"], f"{site} {name}: the worker differs from the leader"
                assert main(pool["worker"])["resources"]["limits"].get("nvidia.com/gpu"), f"{site} {name}"
                assert args(main(pool["worker"])), f"{site} {name}: a worker without engine arguments"


# ---------------------------------------------------------------------------------- RDMA


def test_the_chat_site_moves_kv_between_nodes_over_rdma(intents):
    """example-chat at its traffic: P/D pays, prefill and decode engines in pods of their own (the scheduler
    may put them on different nodes of the two), NixlConnector over UCX on RDMA. Every prefill and decode pod
    asks for the RDMA device, names the secondary network, may lock memory and exports the UCX and RoCE
    settings."""
    intent = intents["example-chat"]["chat-east-1"]
    (model,) = intent["serving"]["models"]
    assert model["disaggregated"] and model["nixl"] and model["rdma"]
    pods_planned = sum(w["planned_replicas"] * w["pods_per_replica"] for w in (model["prefill"], model["main"]))
    assert pods_planned > 1 and intent["hardware"]["nodes"] > 1, "KV may cross nodes between the pools' pods"
    svc = services(intent)["qwen-chat"]
    attach = intent["platform"]["network_operator"]["rdma"]
    assert svc["metadata"]["annotations"][NETWORKS] == f"{attach['network_namespace']}/{attach['network']}"
    (net,) = [o for o in rendered(intent, "platform") if o["kind"] == "MacvlanNetwork"]
    assert (net["spec"]["networkNamespace"], net["metadata"]["name"]) == (
        attach["network_namespace"],
        attach["network"],
    )
    for pool in pools(svc):
        dp_preset = pool.get("worker") is not None
        for pod in pods(pool):
            c = main(pod)
            assert c["resources"]["limits"][attach["resource"]] == "1"
            assert c["resources"]["requests"][attach["resource"]] == "1"
            e = env(c)
            assert e["UCX_TLS"].startswith("rc"), "NIXL's UCX over RDMA (reliable connection)"
            assert e["KSERVE_INFER_ROCE"] == "true", "the presets export NCCL_IB_HCA, UCX_NET_DEVICES, GID index"
            # KServe's data-parallel presets add IPC_LOCK (with SYS_RAWIO, NET_RAW); capabilities.add is
            # replaced by a merge, so only the single-node presets get ours
            caps = (c.get("securityContext") or {}).get("capabilities", {}).get("add")
            assert caps == (None if dp_preset else ["IPC_LOCK"])


def test_the_grid_uses_rdma_for_the_models_whose_traffic_crosses_nodes_and_only_those(intents):
    """The flagship's expert-parallel ranks span nodes and the P/D model moves KV between pods: those pods
    ask for the RDMA device; the single-GPU model's do not."""
    intent = intents["example-ai-grid"]["grid-central-1"]
    svcs = services(intent)
    models = {m["name"]: m for m in intent["serving"]["models"]}
    assert models["qwen-397b-a17b"]["rdma"]
    par = models["qwen-397b-a17b"]["main"]["parallelism"]
    nodes = par["data"] // par["dataLocal"]
    assert nodes > 1
    assert (
        f"{par['data']} data-parallel ranks (expert parallel) on {nodes} nodes" in models["qwen-397b-a17b"]["rdma_why"]
    )
    for name, svc in svcs.items():
        used = [rdma_devices(main(pod)) for pool in pools(svc) for pod in pods(pool)]
        if models[name]["rdma"]:
            assert used and all(n == 1 for n in used), name
            assert NETWORKS in svc["metadata"]["annotations"], name
        else:
            assert not any(used) and NETWORKS not in svc["metadata"]["annotations"], name
    assert not models["qwen-35b-a3b"]["rdma"]
    assert intent["platform"]["rdma"]["why"] == "; ".join(
        m["rdma_why"] for m in intent["serving"]["models"] if m["rdma"]
    )


def test_an_engine_over_nodes_without_rdma_nics_uses_the_pod_network():
    """The same grid on Ethernet: the flagship's ranks still span nodes (NCCL over TCP), no pod asks for
    an RDMA device and no network operator is installed."""
    site = yaml.safe_load((INVENTORIES / "example-ai-grid/group_vars/all/site.yml").read_text())
    for m in site["models"]:
        m.pop("slo", None)  # the flagship's TTFT SLO assumes RDMA between its ranks
    intent = cli.site_intents(
        str(INVENTORIES / "example-ai-grid"),
        None,
        {"hardware": {**site["hardware"], "interconnect": "ethernet"}, "models": site["models"]},
    )["grid-central-1"]
    flagship = next(m for m in intent["serving"]["models"] if m["name"] == "qwen-397b-a17b")
    assert flagship["main"]["parallelism"]["data"] // flagship["main"]["parallelism"]["dataLocal"] > 1
    assert not flagship["rdma"]
    assert not intent["platform"]["rdma"]["needed"]
    assert "network_operator" not in intent["platform"]["components"]


@pytest.mark.parametrize("site", EXAMPLES)
def test_the_network_operator_runs_only_where_some_pod_uses_rdma(intents, site):
    """No site installs the network operator (or turns GPUDirect RDMA on) unless a pod it renders asks for an
    RDMA device, and every pod that does names the secondary network the operator renders."""
    for host, intent in intents[site].items():
        users = []
        for name, svc in services(intent).items():
            for pool in pools(svc):
                for pod in pods(pool):
                    if rdma_devices(main(pod)):
                        users.append(name)
                        assert NETWORKS in svc["metadata"]["annotations"], f"{site} {host} {name}"
        p = intent["platform"]
        assert ("network_operator" in p["components"]) is bool(users), (site, host, users, p["rdma"]["why"])
        assert p["rdma"]["needed"] is bool(users)


# ---------------------------------------------------------------------------------- placement (plan report)


@pytest.mark.parametrize("site", EXAMPLES)
def test_the_plan_report_places_every_planned_pod(intents, site):
    """The placement section of the plan report: every pool's pods, GPUs and RDMA devices per pod, and the node
    each is planned on; its GPUs add up to the plan's, and RDMA pods sit on nodes with RDMA NICs."""
    for host, intent in intents[site].items():
        plan = placement.planned(intent)
        assert not plan["unplaced"], (site, host, plan["unplaced"])
        placed = [p for n in plan["nodes"] for p in n["pods"]]
        plans = {e["model"]["name"]: e["plan"] for e in intent["plans"]}
        for m in intent["serving"]["models"]:
            pools = [w for w in (m["prefill"], m["main"]) if w]
            want = sum(int(plans[m["name"]]["pools"][w["role"]]["gpus"]) for w in pools)
            assert sum(p["gpus"] for p in placed if p["model"] == m["name"]) == want, (site, host, m["name"])
            for w in pools:
                mine = [p for p in placed if p["model"] == m["name"] and p["role"] == w["role"]]
                assert len(mine) == w["planned_replicas"] * w["pods_per_replica"]
                assert {p["rdma"] for p in mine} == {1 if m["rdma"] else 0}
        for n in plan["nodes"]:
            assert n["used"] <= n["gpus"] and (n["rdma"] or not any(p["rdma"] for p in n["pods"]))
        text = "\n".join(summary.site_markdown(intents[site]).splitlines())
        assert f"## {host}: placement" in text


def test_the_chat_report_says_where_the_pd_pods_go(intents):
    intent = intents["example-chat"]["chat-east-1"]
    text = summary.site_markdown(intents["example-chat"])
    assert "| qwen-chat | prefill | 2 | 1 h100 | 1 |" in text
    assert "| qwen-chat | decode | 3 | 2 h100 | 1 |" in text
    nodes = placement.planned(intent)["nodes"]
    assert sum(n["used"] for n in nodes) == 8, "2 x 1 + 3 x 2 H100"
    assert any(
        line.startswith("qwen-chat: placement decode 3 pod(s) x 2 h100 + 1 RDMA device; planned on")
        for line in summary.lines(intent)
    )
