# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: vllm_args
short_description: Turn a plan's vLLM engine arguments into a safe C(VLLM_ADDITIONAL_ARGS) value
version_added: 0.1.0
description:
  - Joins a list of vLLM engine arguments (C(--flag) or C(--flag=value)), as the planner writes them
    in C(plan.pools.<role>.engine_args), into one string for the C(VLLM_ADDITIONAL_ARGS) environment
    variable of a KServe LLMInferenceService.
  - KServe's presets C(eval) the vLLM command line, so every value that is not a plain word (JSON for
    C(--kv-transfer-config) or C(--speculative-config), anything with spaces, quotes or shell
    characters) is wrapped in single quotes, with embedded single quotes escaped.
  - Flags that the LLMInferenceService already sets from its own fields (C(--served-model-name),
    C(--port), C(--host), C(--model), C(--tensor-parallel-size)) are dropped, as are any in O(drop).
  - Every flag is checked against the flags this collection emits for the engine's vLLM version (the planner's
    C(catalog/vllm_flags_<minor>.yaml), the list the serving stage checks too); an unknown flag is an error naming
    it, so a typo in a plan never reaches a pod that would crash-loop.
author:
  - inference.blueprints contributors
positional: _input
options:
  _input:
    description: "Engine arguments, each C(--flag), C(--flag=value) or a dict C({flag: value})."
    type: list
    elements: raw
    required: true
  drop:
    description: Extra flags (with leading C(--)) to leave out.
    type: list
    elements: str
    default: []
  strict:
    description: Fail on a flag that is not in the flag set of O(vllm_version).
    type: bool
    default: true
  vllm_version:
    description: The engine's vLLM version (the plan's C(vllm_version)); 0.24.x and 0.33.x have flag sets.
    type: str
    default: 0.33.0
  output:
    description:
      - V(string) returns the quoted string for C(VLLM_ADDITIONAL_ARGS); V(list) returns the
        normalised C(--flag=value) list; V(names) returns only the flag names.
    type: str
    choices: [string, list, names]
    default: string
"""

EXAMPLES = r"""
- name: Build the engine argument string of the decode pool
  ansible.builtin.set_fact:
    decode_args: "{{ plan.pools.decode.engine_args | inference.blueprints.vllm_args }}"
  # ['--max-model-len=32768', '--kv-transfer-config={"kv_connector":"NixlConnector","kv_role":"kv_both"}']
  # -> --max-model-len=32768 --kv-transfer-config='{"kv_connector":"NixlConnector","kv_role":"kv_both"}'

- name: Only the flag names, for checks
  ansible.builtin.debug:
    msg: "{{ plan.engine_args | inference.blueprints.vllm_args(output='names') }}"
"""

RETURN = r"""
_value:
  description: The argument string (default), the normalised list, or the flag names.
  type: raw
"""

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.inference.blueprints.plugins.module_utils.intent import engine  # noqa: E402
from ansible_collections.inference.blueprints.plugins.module_utils.planner import data  # noqa: E402


def vllm_args(args, drop=None, strict=True, output="string", vllm_version=data.DEFAULT_VLLM_VERSION):
    """The serving stage's own normalisation (intent/engine.py), for templates of the user's own."""
    if args is None:
        args = []
    if not isinstance(args, (list, tuple)):
        raise AnsibleFilterError(f"vllm_args: expected a list of engine arguments, got {type(args).__name__}")
    if output not in ("string", "list", "names"):
        raise AnsibleFilterError(f"vllm_args: output must be string, list or names, not {output!r}")
    minor = ".".join(str(vllm_version).split(".")[:2])
    if strict and minor not in data.supported_vllm_versions():
        raise AnsibleFilterError(
            f"vllm_args: no flag set for vLLM {vllm_version}; supported: {', '.join(data.supported_vllm_versions())}"
        )
    try:
        pairs = engine.normalise(
            args, drop=sorted(engine.KSERVE_OWNED) + list(drop or []), vllm_version=str(vllm_version), strict=strict
        )
    except engine.EngineArgsError as e:
        raise AnsibleFilterError(f"vllm_args: {e}") from e
    if output == "names":
        return ["--" + engine.flag_name(flag) for flag, _v in pairs]
    if output == "list":
        return [f if v is None else f"{f}={v}" for f, v in pairs]
    return " ".join(f if v is None else f"{f}={engine.shell_quote(v)}" for f, v in pairs)


class FilterModule:
    def filters(self):
        return {"vllm_args": vllm_args}
