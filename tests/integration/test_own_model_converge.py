"""Issue 31 item 6 on the local control plane: a site serves two models outside the catalog.

The example chat site, copied, serves Llama-3.1-8B-Instruct (dense) and Mixtral-8x7B-Instruct-v0.1
(MoE), each named by its published config.json next to the inventory. Its serving stage converges
through the real playbook: the API server (and KServe's controller with KCP_KSERVE=1) takes both
LLMInferenceServices, their artifacts and
served names are the site's, their engine arguments are the plan's (FP8 quantized by vLLM at load:
--quantization=fp8, the BF16 checkpoints sized as FP8), and a second run changes nothing.
"""

from __future__ import annotations

import shlex

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from kubernetes import dynamic

from tests.ansible_run import run_playbook
from tests.own_models import OWN, ROOT, own_site
from tests.serving_helpers import PLAYBOOKS, check_engine_args, engine_args_of, known_vllm_flags

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NS = "own-model-test"
EXTRA = {"serving_namespace": NS, "model_service_wait": False}


@pytest.fixture
def own_namespace(cluster):
    """The namespace the serving stage goes into, deleted after the test (KServe keeps reconciling a service
    whose Gateway this plane does not have)."""
    yield NS
    cluster.kubectl("delete", "namespace", NS, "--wait=false", "--ignore-not-found")


def _serving(cluster, inv):
    return run_playbook(PLAYBOOKS / "serving.yml", inv, kubeconfig=cluster.kubeconfig, extravars=EXTRA)


def test_own_models_converge_with_the_plans_engine_args(cluster, own_namespace, tmp_path):
    inv = own_site(tmp_path, ["llama", "mixtral"])
    first = _serving(cluster, inv)
    assert first.rc == 0, first.failure_messages() or first.stdout[-4000:]
    second = _serving(cluster, inv)
    assert second.rc == 0, second.failure_messages() or second.stdout[-4000:]
    assert second.changed == 0, [(r[0], r[1]) for r in second.results if r[3] == "ok" and r[4].get("changed")]

    intent = cli.site_intents(str(inv), str(ROOT / "blueprints"), {"serving_namespace": NS})["chat-east-1"]
    plans = {e["model"]["name"]: e["plan"] for e in intent["plans"]}
    dyn = dynamic.DynamicClient(cluster.new_api_client())
    res = dyn.resources.get(api_version="serving.kserve.io/v1alpha2", kind="LLMInferenceService")
    live = {o["metadata"]["name"]: o for o in (i.to_dict() for i in res.get(namespace=NS).items)}
    assert set(live) == {"llama-chat", "mixtral-chat"}
    flags = known_vllm_flags()
    for which, own in OWN.items():
        svc, plan = live[f"{which}-chat"], plans[f"{which}-chat"]
        assert svc["spec"]["model"]["uri"] == own["uri"]
        assert svc["spec"]["model"]["name"] == own["uri"][len("hf://") :]
        assert plan["model"]["kind"] == ("moe" if which == "mixtral" else "dense")
        assert not check_engine_args(svc, flags)
        for _workload, value in engine_args_of(svc):
            args = shlex.split(value)
            assert "--quantization=fp8" in args, args
            pools = [p for p in plan["pools"].values() if p]
            assert any(f"--max-num-seqs={p['max_num_seqs']}" in args for p in pools), args
