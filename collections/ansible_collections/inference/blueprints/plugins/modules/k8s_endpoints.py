#!/usr/bin/python
# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: k8s_endpoints
short_description: Where each model is served, whether it answers, and one smoke request to each that does
version_added: 0.3.0
description:
  - Reads the LLMInferenceService of every model in O(models) for C(status.url), which KServe sets once
    the route is ready. The services are read concurrently.
  - Probes each URL with C(GET /v1/models). An endpoint this host cannot reach (a cluster-internal name,
    a route not exposed here) is reported, not failed.
  - With O(smoke_prompt), sends one chat completion to every endpoint that answered the probe, and fails
    naming the model, the URL and the answer when one does not succeed.
  - With O(placement), lists the serving pods of the namespace (by the C(inference.blueprints/model) label KServe
    copies to every pod template it creates) and reports per model and pool where they run (pods, the node
    each is bound to, the GPUs and RDMA devices each asks for) against the intent's plan (C(planned_replicas) x
    C(pods_per_replica) pods of C(gpus_per_pod) GPUs and C(rdma_per_pod) RDMA devices).
  - Fails when a model's service does not exist, or the credentials may not read it (naming the verb and resource).
  - Runs on the controller (an action plugin of the same name, no module transfer) when the host's
    connection is C(local); otherwise, or with E(INFERENCE_BLUEPRINTS_K8S_EXECUTION=module), as a module on
    the target, which then sends the probes.
author:
  - inference.blueprints contributors (@inference-blueprints)
extends_documentation_fragment:
  - inference.blueprints.k8s_auth
  - inference.blueprints.k8s_auth.ATTRIBUTES
attributes:
  check_mode:
    support: full
    details: Reads and probes; sends no smoke request.
  diff_mode:
    support: none
options:
  namespace:
    description: The namespace of the services.
    type: str
    required: true
  models:
    description:
      - The models, as the deployment intent lists them (C(site_intent.serving.models)).
      - Each needs C(name), the name of its service; C(served_name), the model name clients send, defaults
        to it. Other keys are ignored.
    type: list
    elements: dict
    required: true
  api_version:
    description: The API version of the services.
    type: str
    default: serving.kserve.io/v1alpha2
  kind:
    description: The kind of the services.
    type: str
    default: LLMInferenceService
  probe_timeout:
    description: Seconds each C(GET /v1/models) may take.
    type: float
    default: 10.0
  smoke_prompt:
    description:
      - A prompt to send to every reachable endpoint (at most 8 tokens are asked for).
      - Without it, no smoke request is sent.
    type: str
  smoke_timeout:
    description: Seconds each smoke request may take.
    type: float
    default: 120.0
  endpoint_validate_certs:
    description: Verify the endpoints' TLS certificates (the routes of a test cluster often have self-signed ones).
    type: bool
    default: false
  placement:
    description: Read and report where the serving pods run (needs C(list) on Pods in O(namespace)).
    type: bool
    default: true
  placement_enforce:
    description:
      - Fail when the placement has problems, naming each. Problems are pods bound to no node, a pool with other
        than its planned pods (a pool an autoscaler moves only when it has none), a pod asking for other GPUs or
        RDMA devices than planned, and an RDMA pod without the secondary network annotation.
    type: bool
    default: false
seealso:
  - module: inference.blueprints.k8s_wait
  - module: inference.blueprints.slo_benchmark
"""

EXAMPLES = r"""
- name: Probe every model's endpoint and smoke-test the reachable ones
  inference.blueprints.k8s_endpoints:
    namespace: "{{ site_intent.serving.namespace }}"
    models: "{{ site_intent.serving.models }}"
    smoke_prompt: "Reply with the single word: ready"
  register: endpoints

- name: Benchmark what answered
  inference.blueprints.slo_benchmark:
    endpoints: "{{ endpoints.reachable }}"
"""

RETURN = r"""
endpoints:
  description: One entry per model, in the order of O(models).
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The model's service.
      type: str
    url:
      description: Its C(status.url) (empty when KServe has not set one).
      type: str
    reachable:
      description: Whether C(GET /v1/models) answered 200.
      type: bool
    status:
      description: The probe's HTTP status (0 when the endpoint could not be reached).
      type: int
    models:
      description: The model ids the endpoint lists.
      type: list
      elements: str
    error:
      description: Why the probe failed.
      type: str
    smoke:
      description: The smoke request (status, answer, error, url, model), when one was sent.
      type: dict
      returned: when O(smoke_prompt) is set and the endpoint is reachable
reachable:
  description: The base URL of every reachable model, by model name.
  returned: success
  type: dict
placement:
  description:
    - Per model (in the order of O(models)), C(name), C(problems) and C(pools), each pool with C(role),
      C(planned_pods), C(autoscaled), C(gpus_per_pod), C(rdma_per_pod) (the plan's), C(pods), C(bound), C(ready),
      C(gpus), C(rdma) (what the live pods ask for) and C(nodes) (C(node), C(pods), C(gpus), C(rdma) per node).
  returned: success, with O(placement)
  type: list
  elements: dict
placement_lines:
  description: One readable line per model of the placement.
  returned: success
  type: list
  elements: str
placement_problems:
  description: Every placement problem, one line each.
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.inference.blueprints.plugins.module_utils.k8s_endpoints import ARGUMENT_SPEC, run  # noqa: E402


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    result = run(module.params, check_mode=module.check_mode)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
