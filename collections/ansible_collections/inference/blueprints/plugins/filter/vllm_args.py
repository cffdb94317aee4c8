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
  - Every flag is checked against the vLLM 0.33 C(vllm serve) flags this collection may emit; an
    unknown flag is an error naming it, so a typo in a plan never reaches a pod that would crash-loop.
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
    description: Fail on a flag that is not a known vLLM 0.33 flag.
    type: bool
    default: true
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

import json  # noqa: E402
import re  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402

# Long flags of `vllm serve` in vLLM 0.33.0 that plans and blueprints may use (checked against the
# 0.33.0 parser: engine flags plus the OpenAI frontend flags). Not every vLLM flag: a flag missing
# here is added once it has been checked against the release.
VLLM_033_FLAGS = frozenset(
    (
        "all2all-backend",
        "api-server-count",
        "async-scheduling",
        "no-async-scheduling",
        "block-size",
        "compilation-config",
        "cp-kv-cache-interleave-size",
        "cpu-offload-gb",
        "data-parallel-address",
        "data-parallel-backend",
        "data-parallel-external-lb",
        "data-parallel-hybrid-lb",
        "data-parallel-multi-port-external-lb",
        "data-parallel-rank",
        "data-parallel-rpc-port",
        "data-parallel-size",
        "data-parallel-size-local",
        "data-parallel-start-rank",
        "data-parallel-supervisor-port",
        "dbo-decode-token-threshold",
        "dbo-prefill-token-threshold",
        "dcp-kv-cache-interleave-size",
        "decode-context-parallel-size",
        "disable-access-log-for-endpoints",
        "disable-chunked-prefill",
        "disable-hybrid-kv-cache-manager",
        "disable-log-requests",
        "disable-log-stats",
        "disable-prefix-caching",
        "distributed-executor-backend",
        "dtype",
        "enable-auto-tool-choice",
        "enable-chunked-prefill",
        "enable-dbo",
        "enable-eplb",
        "enable-expert-parallel",
        "enable-hybrid-kv-cache-manager",
        "enable-prefix-caching",
        "enable-prompt-tokens-details",
        "enforce-eager",
        "eplb-config",
        "generation-config",
        "gpu-memory-utilization",
        "headless",
        "host",
        "kv-cache-dtype",
        "kv-cache-memory-bytes",
        "kv-cache-metrics",
        "kv-events-config",
        "kv-offloading-backend",
        "kv-offloading-size",
        "kv-transfer-config",
        "load-format",
        "long-prefill-token-threshold",
        "max-cudagraph-capture-size",
        "max-log-len",
        "max-logprobs",
        "max-lora-rank",
        "max-loras",
        "max-cpu-loras",
        "max-model-len",
        "max-num-batched-tokens",
        "max-num-seqs",
        "max-num-queued-reqs",
        "max-parallel-loading-workers",
        "model",
        "moe-backend",
        "no-disable-hybrid-kv-cache-manager",
        "no-enable-chunked-prefill",
        "no-enable-prefix-caching",
        "no-enable-auto-tool-choice",
        "override-generation-config",
        "pipeline-parallel-size",
        "port",
        "prefill-context-parallel-size",
        "prefix-caching-hash-algo",
        "quantization",
        "reasoning-parser",
        "revision",
        "scheduling-policy",
        "seed",
        "served-model-name",
        "speculative-config",
        "stream-interval",
        "tensor-parallel-size",
        "tokenizer",
        "tokenizer-mode",
        "tool-call-parser",
        "trust-remote-code",
        "uvicorn-log-level",
    )
)

# Set by the LLMInferenceService itself (model name, port, spec.parallelism.tensor).
KSERVE_OWNED = frozenset({"served-model-name", "port", "host", "model", "tensor-parallel-size"})

_PLAIN = re.compile(r"^[A-Za-z0-9_./:,+@%=-]*$")


def _split(arg):
    if isinstance(arg, dict):
        if len(arg) != 1:
            raise AnsibleFilterError(f"vllm_args: a dict argument needs exactly one flag, got {arg!r}")
        flag, value = next(iter(arg.items()))
        if isinstance(value, (dict, list)):
            value = json.dumps(value, separators=(",", ":"), sort_keys=True)
        elif isinstance(value, bool):
            value = None if value else False
        return str(flag), value
    if not isinstance(arg, str):
        raise AnsibleFilterError(f"vllm_args: expected '--flag' or '--flag=value', got {arg!r}")
    arg = arg.strip()
    if "=" in arg:
        flag, value = arg.split("=", 1)
        return flag, value
    if " " in arg:
        flag, value = arg.split(" ", 1)
        return flag, value.strip()
    return arg, None


def _name(flag):
    if not flag.startswith("--"):
        raise AnsibleFilterError(f"vllm_args: '{flag}' is not a long flag (expected '--flag')")
    return flag[2:].replace("_", "-").split(".", 1)[0]


def shell_quote(value):
    """Single-quote a value for a POSIX shell `eval`, unless it is a plain word."""
    value = str(value)
    if value and _PLAIN.match(value):
        return value
    return "'" + value.replace("'", "'\"'\"'") + "'"


def vllm_args(args, drop=None, strict=True, output="string"):
    if args is None:
        args = []
    if not isinstance(args, (list, tuple)):
        raise AnsibleFilterError(f"vllm_args: expected a list of engine arguments, got {type(args).__name__}")
    dropped = KSERVE_OWNED | {_name(d) for d in (drop or [])}
    seen, pairs = set(), []
    for arg in args:
        flag, value = _split(arg)
        name = _name(flag)
        if value is False:
            continue
        if strict and name not in VLLM_033_FLAGS:
            raise AnsibleFilterError(
                f"vllm_args: '--{name}' is not a vLLM 0.33 'vllm serve' flag this collection knows; "
                "check the plan's engine_args"
            )
        if name in dropped:
            continue
        if name in seen:
            raise AnsibleFilterError(f"vllm_args: '--{name}' is given twice")
        seen.add(name)
        pairs.append((flag if "." in flag else "--" + name, value))
    if output == "names":
        return ["--" + _name(pair[0]) for pair in pairs]
    if output == "list":
        return [f if v is None else f"{f}={v}" for f, v in pairs]
    if output != "string":
        raise AnsibleFilterError(f"vllm_args: output must be string, list or names, not {output!r}")
    return " ".join(f if v is None else f"{f}={shell_quote(v)}" for f, v in pairs)


class FilterModule:
    def filters(self):
        return {"vllm_args": vllm_args}
