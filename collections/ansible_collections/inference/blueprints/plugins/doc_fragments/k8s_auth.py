# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connection options shared by the collection's Kubernetes modules."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path to a kubeconfig file, or the kubeconfig content as a dictionary.
      - Falls back to the E(K8S_AUTH_KUBECONFIG) environment variable, then to the
        in-cluster service account (when running in a pod, for example in an AAP
        execution environment), then to C(~/.kube/config).
    type: raw
  context:
    description:
      - The kubeconfig context to use. Falls back to E(K8S_AUTH_CONTEXT).
    type: str
  host:
    description:
      - URL of the Kubernetes API server, used with O(api_key). Falls back to E(K8S_AUTH_HOST).
    type: str
  api_key:
    description:
      - Bearer token for O(host). Falls back to E(K8S_AUTH_API_KEY).
    type: str
  validate_certs:
    description:
      - Whether to verify the API server's certificate. Falls back to E(K8S_AUTH_VERIFY_SSL).
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description:
      - Path to a CA bundle for the API server. Falls back to E(K8S_AUTH_SSL_CA_CERT).
    type: path
    aliases: [ssl_ca_cert]
requirements:
  - python >= 3.11
  - kubernetes >= 24.2.0
"""

    ATTRIBUTES = r"""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: all
"""
