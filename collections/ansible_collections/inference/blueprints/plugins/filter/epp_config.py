# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: epp_config
short_description: Build the llm-d endpoint picker (EPP) configuration for a planned model
version_added: 0.1.0
description:
  - Returns an C(EndpointPickerConfig) (C(apiVersion llm-d.ai/v1alpha1), llm-d-router 0.9+) as a dict,
    ready to be dumped into the ConfigMap that the LLMInferenceService's C(router.scheduler.config.ref)
    points at.
  - Every profile scores endpoints with the prefix-cache scorer (cache-aware routing) and the load
    scorers (queue depth and KV-cache utilisation), then picks the best score.
  - When the model is disaggregated, the C(disagg-profile-handler) runs a C(prefill) and a C(decode)
    profile (pods told apart by the C(llm-d.ai/role) label through the prefill and decode filters) and
    the C(prefix-based-pd-decider) sends a request to a prefill worker only when its uncached part is
    longer than O(non_cached_tokens). The decider is listed before the handler, and the
    C(prepareDataPlugins) feature gate it needs is turned on.
author:
  - inference.blueprints contributors
positional: _input
options:
  _input:
    description: The model's view from P(inference.blueprints.serving_view#filter) (needs C(disaggregated)).
    type: dict
    required: true
  weights:
    description: Scorer weights, keys C(prefix_cache), C(queue), C(kv_cache).
    type: dict
    default: {prefix_cache: 3, queue: 2, kv_cache: 2}
  non_cached_tokens:
    description: Uncached prompt tokens above which a request is prefilled on the prefill pool.
    type: int
    default: 256
  api_version:
    description: EPP config API version.
    type: str
    default: llm-d.ai/v1alpha1
"""

EXAMPLES = r"""
- name: EPP config of the first model
  ansible.builtin.debug:
    msg: >-
      {{ site_plans[0] | inference.blueprints.serving_view(site_blueprint)
         | inference.blueprints.epp_config | to_nice_yaml }}
"""

RETURN = r"""
_value:
  description: The EndpointPickerConfig.
  type: dict
"""

from ansible.errors import AnsibleFilterError  # noqa: E402

DEFAULT_WEIGHTS = {"prefix_cache": 3, "queue": 2, "kv_cache": 2}


def _num(value, what):
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"epp_config: weight {what} must be a number, got {value!r}") from exc
    if number < 0:
        raise AnsibleFilterError(f"epp_config: weight {what} must not be negative, got {value!r}")
    return int(number) if number.is_integer() else number


def epp_config(view, weights=None, non_cached_tokens=256, api_version="llm-d.ai/v1alpha1"):
    if not isinstance(view, dict) or "disaggregated" not in view:
        raise AnsibleFilterError("epp_config: expected the output of inference.blueprints.serving_view")
    w = dict(DEFAULT_WEIGHTS)
    unknown = set(weights or {}) - set(DEFAULT_WEIGHTS)
    if unknown:
        raise AnsibleFilterError(
            f"epp_config: unknown scorer weight(s) {', '.join(sorted(unknown))}; valid: prefix_cache, queue, kv_cache"
        )
    w.update({k: _num(v, k) for k, v in (weights or {}).items()})

    scorers = [
        ("prefix-cache-scorer", w["prefix_cache"]),
        ("queue-scorer", w["queue"]),
        ("kv-cache-utilization-scorer", w["kv_cache"]),
    ]
    scorers = [(name, weight) for name, weight in scorers if weight > 0]
    plugins = [{"type": scorer[0]} for scorer in scorers] + [{"type": "max-score-picker"}]
    profile_plugins = [{"pluginRef": name, "weight": weight} for name, weight in scorers]
    profile_plugins.append({"pluginRef": "max-score-picker"})
    config = {"apiVersion": api_version, "kind": "EndpointPickerConfig"}

    if view["disaggregated"]:
        config["featureGates"] = ["prepareDataPlugins"]
        plugins = (
            [{"type": "prefill-filter"}, {"type": "decode-filter"}]
            + plugins
            + [
                {"type": "prefix-based-pd-decider", "parameters": {"nonCachedTokens": int(non_cached_tokens)}},
                {"type": "disagg-profile-handler", "parameters": {"deciders": {"prefill": "prefix-based-pd-decider"}}},
            ]
        )
        profiles = [
            {"name": "prefill", "plugins": [{"pluginRef": "prefill-filter"}] + profile_plugins},
            {"name": "decode", "plugins": [{"pluginRef": "decode-filter"}] + profile_plugins},
        ]
    else:
        plugins.append({"type": "single-profile-handler"})
        profiles = [{"name": "default", "plugins": profile_plugins}]
    config["plugins"] = plugins
    config["schedulingProfiles"] = profiles
    return config


class FilterModule:
    def filters(self):
        return {"epp_config": epp_config}
