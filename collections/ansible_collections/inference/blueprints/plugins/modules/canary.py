#!/usr/bin/python
# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: canary
short_description: Canary a serving change one pool at a time with TTFT and TPOT gates
version_added: 0.3.0
description:
  - Applies the change the site variable C(canary) describes (a new engine image by digest, engine
    arguments, or a new model artifact) to each model's LLMInferenceService one pool at a time (the prefill
    pool before the decode pool, or the single pool), then the model artifact, which both pools share.
  - Before the first step it measures a baseline with the SLO benchmark
    (P(inference.blueprints.slo_benchmark#module)); after each step (and the rollout it waits for,
    C(status.observedGeneration) and C(Ready)) it benchmarks again and compares TTFT and TPOT at the gate
    percentile with the baseline.
  - A step whose figures pass the gates is promoted; one that trips a gate is rolled back to the exact
    previous object and the canary stops, failing with the gate that tripped.
  - Runs on the controller as an action plugin. See docs/verify.md.
author:
  - inference.blueprints contributors (@inference-blueprints)
options:
  endpoints:
    description: Per model name, its endpoints, as for P(inference.blueprints.slo_benchmark#module).
    type: dict
    required: true
  kubeconfig:
    description: Kubeconfig of the cluster (path or mapping); default K8S_AUTH_KUBECONFIG.
    type: raw
  context:
    description: Kubeconfig context.
    type: str
  wait:
    description: Wait for each rollout before benchmarking (default the model_service_wait option).
    type: bool
  report_dir:
    description: Where C(canary.md) goes (default C(<report_dir>/canary/<cluster>) of the intent).
    type: path
"""

EXAMPLES = r"""
- name: Canary new engine arguments on every pool
  inference.blueprints.canary:
    endpoints:
      qwen-chat: {prefill: http://127.0.0.1:8100, decode: [http://127.0.0.1:8200]}
"""

RETURN = r"""
models:
  description: Per model its result, baseline and steps (pool, change, result, tripped gates, identical).
  returned: always
  type: list
  elements: dict
tripped:
  description: Every gate that tripped, with gate, pool, baseline_ms, after_ms and msg.
  returned: always
  type: list
  elements: dict
report:
  description: Path of the Markdown report.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def main():
    module = AnsibleModule(
        argument_spec={
            "endpoints": {"type": "dict", "required": True},
            "kubeconfig": {"type": "raw"},
            "context": {"type": "str"},
            "wait": {"type": "bool"},
            "report_dir": {"type": "path"},
        },
    )
    module.fail_json(msg="inference.blueprints.canary runs on the controller through its action plugin")


if __name__ == "__main__":
    main()
