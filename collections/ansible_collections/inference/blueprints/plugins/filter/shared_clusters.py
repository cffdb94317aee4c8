# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: shared_clusters
short_description: The hosts of a site that reach one cluster
version_added: 0.2.0
description:
  - Groups the hosts of a site by what preflight read of their clusters' identity (OpenShift's ClusterVersion
    C(spec.clusterID), else the UID of the kube-system namespace) and returns one line for every group of two or more
    hosts on one cluster, naming them, unless each host of the group names the others in O(intended).
  - Two hosts of one site on one cluster would apply their objects over each other's (the second host's autoscaler
    replacing the first one's), so preflight stops on any line this returns.
author:
  - inference.blueprints contributors
positional: _input
options:
  _input:
    description:
      - "C({host: identity}): each host's C(cluster_facts.identity) (C(cluster_id), C(kube_system_uid)), or null
        when not read."
    type: dict
    required: true
  intended:
    description: "C({host: [hosts]}): each host's C(same_cluster_as) site variable."
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: No two hosts of the site on one cluster
  ansible.builtin.fail:
    msg: "{{ shared | join('; ') }}"
  vars:
    shared: >-
      {{ {'onprem': {'kube_system_uid': 'a'}, 'burst': {'kube_system_uid': 'a'}}
         | inference.blueprints.shared_clusters }}
  when: shared | length > 0
"""

RETURN = r"""
_value:
  description: One line per group of hosts on one cluster (empty when every host has a cluster of its own).
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.inference.blueprints.plugins.module_utils import cluster_facts  # noqa: E402


def shared_clusters(identities, intended=None):
    if not isinstance(identities, dict):
        raise AnsibleFilterError("shared_clusters: expected {host: identity}")
    return cluster_facts.shared_clusters(identities, intended or {})


class FilterModule:
    def filters(self):
        return {"shared_clusters": shared_clusters}
