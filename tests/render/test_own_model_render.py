"""Issue 31 item 6 through the real playbook: ``site.yml -e delivery=render`` of a site whose models are
outside the catalog (Llama-3.1-8B-Instruct, Mixtral-8x7B-Instruct-v0.1, each named by its config.json next
to the inventory, tests/own_models.py). The site action reads the config through the host's inventory
directory, plans each model and renders LLMInferenceServices with the site's artifacts and served names
and engine arguments that are vLLM 0.33 flags, the BF16 checkpoints quantized to FP8 at load. No cluster.
"""

from __future__ import annotations

import os
import shlex

from tests.ansible_run import run_playbook
from tests.own_models import OWN, own_site
from tests.serving_helpers import PLAYBOOKS, check_engine_args, engine_args_of, known_vllm_flags, load_rendered


def test_own_models_render_through_the_site_playbook(tmp_path):
    inv = own_site(tmp_path, ["llama", "mixtral"])
    env_before = os.environ.pop("K8S_AUTH_KUBECONFIG", None)
    try:
        run = run_playbook(
            PLAYBOOKS / "site.yml",
            inv,
            extravars={
                "delivery": "render",
                "render_dir": str(tmp_path / "render"),
                "report_dir": str(tmp_path / "reports"),
            },
        )
    finally:
        if env_before is not None:
            os.environ["K8S_AUTH_KUBECONFIG"] = env_before
    assert run.rc == 0, run.failure_messages() or run.stdout[-3000:]
    svcs = {
        o["metadata"]["name"]: o for _, o in load_rendered(tmp_path / "render") if o["kind"] == "LLMInferenceService"
    }
    assert set(svcs) == {"llama-chat", "mixtral-chat"}
    flags = known_vllm_flags()
    for which, own in OWN.items():
        svc = svcs[f"{which}-chat"]
        assert svc["spec"]["model"] == {"uri": own["uri"], "name": own["uri"][len("hf://") :]}
        assert not check_engine_args(svc, flags)
        for _workload, value in engine_args_of(svc):
            assert "--quantization=fp8" in shlex.split(value)
    report = next((tmp_path / "reports").rglob("report.md")).read_text()
    for own in OWN.values():
        # the printed serve line names the checkpoint the site loads and the flag that quantizes it
        assert f"vllm serve {own['uri'][len('hf://') :]}" in report
    assert "--quantization=fp8" in report
