"""Every rank of an engine runs the same pod.

No cluster: the example sites' intents, rendered with the roles' templates. What KServe's controller
makes of these services (its merge with the data-parallel presets) is checked on a control plane with
the real controller (tests/kserve_checks.py).
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.plugin_utils import render

ROOT = Path(__file__).resolve().parents[3]
INVENTORIES = ROOT / "inventories"
EXAMPLES = sorted(p.name for p in INVENTORIES.iterdir() if (p / "hosts.yml").exists())


@pytest.fixture(scope="module")
def intents():
    return {site: cli.site_intents(str(INVENTORIES / site), None) for site in EXAMPLES}


def rendered(intent: dict, stage: str = "serving") -> list[dict]:
    return render.render_components(intent["stages"][stage], intent)


def services(intent: dict) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in rendered(intent) if o["kind"] == "LLMInferenceService"}


def pools(svc: dict) -> list[dict]:
    return [p for p in (svc["spec"], svc["spec"].get("prefill")) if p]


def main(pod: dict) -> dict:
    return next(c for c in pod["containers"] if c["name"] == "main")


def env(container: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def args(container: dict) -> list[str]:
    return shlex.split(env(container)["VLLM_ADDITIONAL_ARGS"])


def shm(pod: dict) -> str:
    return next(v for v in pod["volumes"] if v["name"] == "dshm")["emptyDir"]["sizeLimit"]


# ---------------------------------------------------------------------------------- ranks


def test_the_397b_worker_asks_for_its_gpus_and_runs_the_leaders_engine(intents):
    """The grid's flagship: TP=4 x DP=2 on 4-GPU nodes, a LeaderWorkerSet of a leader and one worker pod.
    The worker used to be ``{}``, which KServe's data-parallel preset filled with no GPU request, no engine
    arguments and an 8Gi /dev/shm (issue 24)."""
    intent = intents["example-ai-grid"]["grid-central-1"]
    svc = services(intent)["qwen-397b-a17b"]
    spec = svc["spec"]
    assert spec["parallelism"] == {"tensor": 4, "data": 2, "dataLocal": 1, "expert": True}
    leader, worker = main(spec["template"]), main(spec["worker"])
    plan = next(e["plan"] for e in intent["plans"] if e["model"]["name"] == "qwen-397b-a17b")
    gpus_per_pod = plan["pools"]["serve"]["tp"]  # dataLocal 1: one rank of TP GPUs per pod
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
