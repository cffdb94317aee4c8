# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM engine arguments as KServe's LLMInferenceService presets take them.

KServe v0.20.0's vLLM presets start ``vllm serve`` through ``bash -c 'eval "exec vllm serve ...
${VLLM_ADDITIONAL_ARGS} $@"'`` (config/llmisvcconfig/config-llm-template.yaml), so:

* flags the service sets from its own fields are dropped here (``--served-model-name``,
  ``--port``, ``--tensor-parallel-size`` from ``spec.parallelism.tensor``; with a ``worker`` the
  data-parallel preset also sets the ``--data-parallel-*`` flags, ``--enable-expert-parallel`` from
  ``spec.parallelism.expert`` and ``--api-server-count``);
* every value that is not a plain word (JSON for ``--kv-transfer-config``) is single-quoted, so
  the ``eval`` sees one word.

Every flag is checked against the planner's catalog of flags for the plan's vLLM version
(planner/catalog/vllm_flags_<minor>.yaml): the one list of flags this collection emits.
"""

from __future__ import annotations

import json
import re

from ..planner import data as catalog

# Set by every vLLM preset (model name and alias, port) or from spec.parallelism.tensor.
KSERVE_OWNED = frozenset({"served-model-name", "port", "host", "model", "tensor-parallel-size"})
# Also set by the *-worker-data-parallel presets from spec.parallelism.{data,dataLocal,expert}.
KSERVE_DP_OWNED = frozenset(
    {
        "data-parallel-size",
        "data-parallel-size-local",
        "data-parallel-address",
        "data-parallel-rpc-port",
        "data-parallel-start-rank",
        "enable-expert-parallel",
        "api-server-count",
        "headless",
    }
)

_PLAIN = re.compile(r"^[A-Za-z0-9_./:,+@%=-]*$")


class EngineArgsError(ValueError):
    pass


def split(arg) -> tuple[str, str | None]:
    """``--flag=value`` / ``--flag value`` / ``--flag`` / ``{--flag: value}`` -> (flag, value or None)."""
    if isinstance(arg, dict):
        if len(arg) != 1:
            raise EngineArgsError(f"a dict argument needs exactly one flag, got {arg!r}")
        flag, value = next(iter(arg.items()))
        if isinstance(value, (dict, list)):
            value = json.dumps(value, separators=(",", ":"), sort_keys=True)
        elif isinstance(value, bool):
            value = None if value else False
        return str(flag), value
    if not isinstance(arg, str):
        raise EngineArgsError(f"expected '--flag' or '--flag=value', got {arg!r}")
    arg = arg.strip()
    if "=" in arg:
        flag, value = arg.split("=", 1)
        return flag, value
    if " " in arg:
        flag, value = arg.split(" ", 1)
        return flag, value.strip()
    return arg, None


def flag_name(flag: str) -> str:
    if not flag.startswith("--"):
        raise EngineArgsError(f"'{flag}' is not a long flag (expected '--flag')")
    return flag[2:].replace("_", "-").split(".", 1)[0]


def known_flags(vllm_version: str = catalog.DEFAULT_VLLM_VERSION) -> frozenset[str]:
    return frozenset(f[2:] for f in catalog.vllm_flags(vllm_version)["flags"])


def shell_quote(value) -> str:
    """Single-quote a value for a POSIX shell ``eval``, unless it is a plain word."""
    value = str(value)
    if value and _PLAIN.match(value):
        return value
    return "'" + value.replace("'", "'\"'\"'") + "'"


def normalise(
    args, drop=(), vllm_version: str = catalog.DEFAULT_VLLM_VERSION, strict: bool = True
) -> list[tuple[str, str | None]]:
    """(flag, value) pairs without the dropped flags; unknown or repeated flags are errors."""
    known = known_flags(vllm_version) if strict else None
    dropped = {flag_name(d) if d.startswith("--") else d for d in drop}
    seen, pairs = set(), []
    for arg in args or []:
        flag, value = split(arg)
        name = flag_name(flag)
        if value is False:
            continue
        if known is not None and name not in known:
            raise EngineArgsError(
                f"'--{name}' is not a vLLM {vllm_version} flag this collection emits "
                "(planner/catalog/vllm_flags_*.yaml lists them)"
            )
        if name in dropped:
            continue
        if name in seen:
            raise EngineArgsError(f"'--{name}' is given twice")
        seen.add(name)
        pairs.append((flag if "." in flag else "--" + name, value))
    return pairs


def additional_args(
    args, data_parallel_preset: bool = False, drop=(), vllm_version: str = catalog.DEFAULT_VLLM_VERSION
) -> str:
    """The ``VLLM_ADDITIONAL_ARGS`` value for a workload of an LLMInferenceService."""
    owned = set(KSERVE_OWNED) | (KSERVE_DP_OWNED if data_parallel_preset else set()) | set(drop)
    pairs = normalise(args, drop=owned, vllm_version=vllm_version)
    return " ".join(f if v is None else f"{f}={shell_quote(v)}" for f, v in pairs)


def value_of(args, flag: str):
    """The value of ``--flag`` in an argument list (``True`` for a bare flag), or None."""
    want = flag_name(flag)
    for arg in args or []:
        f, v = split(arg)
        if flag_name(f) == want:
            return True if v is None else v
    return None
