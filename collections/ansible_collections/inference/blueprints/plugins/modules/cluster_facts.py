#!/usr/bin/python
# Copyright: (c) 2026, inference.blueprints maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cluster_facts
short_description: Read the cluster facts preflight needs in one call and compare them with the plan
version_added: 0.1.0
description:
  - Reads ClusterVersion, Infrastructure, the served versions of every API group, the nodes with their
    GPU and NIC labels and capacity, storage classes, OLM Subscriptions and ClusterServiceVersions,
    PackageManifests (when served) and MachineConfigPools, and returns them as one dict.
  - Optionally compares the facts with a requirements dict and fails with one message listing every
    unmet requirement.
  - Never writes to the cluster.
  - With O(source=inventory) builds the same shape from inventory values only, without cluster access
    (used with C(delivery=render)).
  - Runs on the controller (an action plugin of the same name, no module transfer) when the host's
    connection is C(local); otherwise, or with E(INFERENCE_BLUEPRINTS_K8S_EXECUTION=module), as a
    module on the target.
author:
  - inference.blueprints maintainers (@inference-blueprints)
options:
  source:
    description:
      - V(cluster) reads the live cluster; V(inventory) uses O(hardware) only.
    type: str
    choices: [cluster, inventory]
    default: cluster
  gather_subset:
    description:
      - V(all) reads everything; V(api) only the served API groups and versions and the CRD schema fields
        (used after operators are installed, to learn the APIs they added). Requirements are not
        evaluated with V(api).
    type: str
    choices: [all, api]
    default: all
  hardware:
    description:
      - The inventory C(hardware) dict (gpu, gpus_per_node, nodes, interconnect, decode_*).
      - Used for the RDMA node count, and as the facts themselves with O(source=inventory).
    type: dict
    default: {}
  openshift_version:
    description:
      - OpenShift version to assume with O(source=inventory).
    type: str
  groups:
    description:
      - API groups whose resources (kinds, scope) are listed in C(api_resources). Served versions are
        recorded for every group regardless.
    type: list
    elements: str
  packages:
    description:
      - OLM package names whose PackageManifest (default channel, channels) is read when
        C(packages.operators.coreos.com) is served.
    type: list
    elements: str
    default: []
  plans:
    description:
      - The site plans (C(site_plans), a list of C({model, plan})). GPUs per type, RDMA and storage needs
        are derived from them.
    type: list
    elements: dict
    default: []
  components:
    description:
      - The blueprint's components (C(site_components)); decide which APIs must already be served.
    type: list
    elements: str
    default: []
  requirements:
    description:
      - Overrides and additions to the requirements derived from O(plans). Keys C(openshift_min),
        C(openshift_max), C(apis) (extra APIs, a list of C({group, versions, for})), C(gpus) (list of
        C({gpu, count, for})), C(pods) (list of C({model, role, gpu, gpus, rdma, count}), the planned pods, packed
        on the GPU nodes so that each fits a node with room for all of its GPUs), C(rdma) (C({nodes, why}) or false),
        C(single_node) (bool or null),
        C(storage_class) (bool), C(allow_unobserved_gpus) (bool), C(engine) (C({vllm_version, stated, image,
        supported}), the vLLM version the plans are written for, checked against the version OpenShift AI's CSV
        names for its LLMInferenceService presets unless C(image) pins the site's own engine).
    type: dict
    default: {}
  fail_on_unmet:
    description:
      - Fail, listing every unmet requirement, when any requirement is unmet.
    type: bool
    default: true
  from_intent:
    description:
      - Take O(source), O(hardware), O(openshift_version), O(packages), O(requirements) and
        O(fail_on_unmet) from the host's deployment intent (the C(site_intents) fact, or computed from
        the inventory when no earlier task set it), then bind the intent to what was read and set it
        as the host's C(site_intents) fact (the preflight of the site in one task).
      - Resolved by the action plugin on the controller, where the intent is; the module alone
        refuses it.
    type: dict
    suboptions:
      checks:
        description: Check the site's requirements (V(false) reads and binds only, as a removal does).
        type: bool
        default: true
extends_documentation_fragment:
  - inference.blueprints.k8s_auth
  - inference.blueprints.k8s_auth.ATTRIBUTES
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: all
notes:
  - Read-only; safe in check mode.
"""

EXAMPLES = r"""
- name: Read the cluster and compare with the plan
  inference.blueprints.cluster_facts:
    packages: [gpu-operator-certified, nfd]
    plans: "{{ site_plans }}"
    components: "{{ site_components }}"
    hardware: "{{ hardware }}"
    requirements:
      openshift_min: "4.19"
      openshift_max: "4.22"
  register: facts
"""

RETURN = r"""
cluster_facts:
  description: The facts (openshift_version, single_node, api_groups, served, api_resources, nodes, gpus, rdma,
    storage_classes, subscriptions, csvs (each with the preset engine its deployment names, or null), operators,
    packagemanifests, machine_config_pools, identity (the ClusterVersion clusterID and the kube-system namespace
    UID, which tell one cluster from another), warnings).
  returned: always
  type: dict
same_cluster_as:
  description: With O(from_intent), the hosts the site says share this host's cluster (its C(same_cluster_as)).
  returned: with O(from_intent)
  type: list
  elements: str
requirements:
  description: The requirements that were checked (derived from the plans, plus overrides).
  returned: always
  type: dict
unmet:
  description: One line per unmet requirement.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.inference.blueprints.plugins.module_utils.k8s_facts import ARGUMENT_SPEC, run  # noqa: E402


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    result = run(module.params, check_mode=module.check_mode)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
