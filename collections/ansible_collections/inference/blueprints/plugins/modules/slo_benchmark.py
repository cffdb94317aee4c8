#!/usr/bin/python
# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slo_benchmark
short_description: Benchmark each model's endpoints against its SLOs with guidellm, report and calibrate
version_added: 0.3.0
description:
  - Drives each model's OpenAI-compatible endpoints with guidellm (its scheduler and OpenAI HTTP backend) in
    the traffic shape of the deployment intent (prompt and output length distributions, arrival rate or
    concurrency, shared-prefix fraction), bounded in requests and seconds (site variable C(slo_benchmark)).
  - Reports TTFT and TPOT p50/p95/p99, throughput, goodput and the error rate per model and per pool, as
    Markdown and JSON with SVG charts, and fails naming the model, the percentile and the figure when an
    SLO is missed (unless O(enforce=false)).
  - Writes the measured engine figures into C(host_vars/<cluster>/calibration.yml) of the inventory; the
    planner then uses them in place of its efficiency assumptions. See docs/verify.md.
  - Runs on the controller as an action plugin; needs guidellm in the controller's Python.
author:
  - inference.blueprints contributors (@inference-blueprints)
options:
  endpoints:
    description:
      - Per model name, its endpoints. A URL or a list of URLs is the model's entry point (a gateway, or
        replicas reached directly, round robin); a mapping of pool (C(serve), C(prefill), C(decode)) to URLs
        benchmarks each pool directly. Models without endpoints are not benchmarked.
    type: dict
    default: {}
  enforce:
    description: Fail when an SLO is missed.
    type: bool
    default: true
  report_dir:
    description: Where the report goes (default C(<report_dir>/slo/<cluster>) of the intent).
    type: path
  calibrate:
    description: Write the measured figures into the inventory's C(host_vars/<cluster>/calibration.yml).
    type: bool
    default: true
  inventory_dir:
    description: The inventory directory (default the host's C(inventory_dir)).
    type: path
  require:
    description:
      - Fail when no model was measured (no endpoint reachable from here), with the commands that measure
        each model from inside the cluster; otherwise the task is skipped and says the same.
    type: bool
    default: false
  probes:
    description:
      - The C(endpoints) list of M(inference.blueprints.k8s_endpoints) (each model's C(name) and C(url)), the
        addresses the commands for a model that was not measured are made of.
    type: list
    elements: dict
    default: []
notes:
  - Check mode sends no load.
"""

EXAMPLES = r"""
- name: Benchmark every reachable model against its SLOs
  inference.blueprints.slo_benchmark:
    endpoints:
      qwen-edge: http://127.0.0.1:8000
    enforce: true
"""

RETURN = r"""
report:
  description: Path of the Markdown report.
  returned: when a model was benchmarked
  type: str
findings:
  description: Every SLO miss, each with model, metric, percentile, value_ms, slo_ms, pool and msg.
  returned: when a model was benchmarked
  type: list
  elements: dict
models:
  description: Per model its figures (TTFT/TPOT percentiles and the pool they come from) and goodput.
  returned: when a model was benchmarked
  type: dict
nothing_measured:
  description: True when no model was measured.
  returned: when no model was measured
  type: bool
how_to_measure:
  description: Per model not measured, the commands that measure it from inside the cluster (port-forward, a pod).
  returned: when no model was measured
  type: list
  elements: str
calibration:
  description: The calibration file written, its new entries and the plan before and after.
  returned: when calibrate is true and a figure was measured
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def main():
    module = AnsibleModule(
        argument_spec={
            "endpoints": {"type": "dict", "default": {}},
            "enforce": {"type": "bool", "default": True},
            "report_dir": {"type": "path"},
            "calibrate": {"type": "bool", "default": True},
            "inventory_dir": {"type": "path"},
            "require": {"type": "bool", "default": False},
            "probes": {"type": "list", "elements": "dict", "default": []},
        },
        supports_check_mode=True,
    )
    module.fail_json(msg="inference.blueprints.slo_benchmark runs on the controller through its action plugin")


if __name__ == "__main__":
    main()
