# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a front door must hold and wait for, decided once from the plans (issue 35 item 1).

Every front door on Envoy Gateway (the AI grid, the sovereign front door and a burst cluster's listener, the edge
escalation) buffers request bodies: the Lua filters call ``handle:body()``, Envoy AI Gateway's ext_proc reads the
whole body, a retry replays it. Envoy answers 413 to a body larger than the listener's per-connection buffer,
which Envoy Gateway sets to 32768 bytes unless a ClientTrafficPolicy says ``connection.bufferLimit``
(v1.9.0 internal/xds/translator/listener.go ``tcpListenerPerConnectionBufferLimitBytes``). A route without a
timeout gets Envoy's 15 s route default, and an answer that takes longer is cut with 504; with an HTTPRoute
``timeouts.request`` Envoy Gateway sets the route's timeout and an idle timeout of at least it (route.go
``idleTimeout``).

* ``body``: the p95 prompt of a class in bytes is ``prompt_tokens_p95 x BYTES_PER_TOKEN``; the buffer holds it
  BODY_MARGIN times over plus ENVELOPE_BYTES (the JSON around the prompt: messages, roles, parameters), in whole
  64 KiB. The margin covers text that needs more bytes a token than English (UTF-8 scripts, JSON escapes).
* ``answer``: the p95 end-to-end time of a class is its TTFT p95 plus ``output_tokens_p95`` TPOT p95 steps, each
  the larger of the SLO and the plan's model at the planned load, plus the longest the router may queue it;
  the route waits TIME_MARGIN times that, in whole seconds.
"""

from __future__ import annotations

import math

from . import quantity

ENVOY_DEFAULT_BUFFER = 32768  # Envoy Gateway v1.9.0 listener.go tcpListenerPerConnectionBufferLimitBytes
ENVOY_DEFAULT_ROUTE_TIMEOUT_S = 15  # Envoy's RouteAction.timeout default
BYTES_PER_TOKEN = 4  # a BPE token of English text is about 4 bytes
BODY_MARGIN = 2
ENVELOPE_BYTES = 16 * 1024
BUFFER_STEP = 64 * 1024
TIME_MARGIN = 1.5
# An escalated request is answered by a larger class at the regional grid, with the backhaul in between: the edge
# waits this many times its own p95 answer for it.
ESCALATION_FACTOR = 2


def _plans_of(plans: list[dict], models: list[str]) -> list[dict]:
    """The plans of the named models this cluster has (a model served only elsewhere has none here)."""
    return [e["plan"] for e in plans if e["model"]["name"] in models]


def prompt_bytes_p95(plan: dict) -> int:
    """The p95 prompt of the plan's traffic in bytes (BYTES_PER_TOKEN a token)."""
    return int((plan.get("traffic") or {}).get("prompt_tokens_p95") or 0) * BYTES_PER_TOKEN


def answer_p95_s(plan: dict) -> float:
    """The p95 end-to-end seconds of one request, without queueing: TTFT p95 + output_tokens_p95 x TPOT p95, each
    the larger of the SLO and the plan's figure at the planned load."""
    slo, lat = plan.get("slo") or {}, plan.get("latency") or {}
    ttft = max(float(slo.get("ttft_p95_ms") or 0), float(lat.get("ttft_p95_ms") or 0))
    tpot = max(float(slo.get("tpot_p95_ms") or 0), float(lat.get("tpot_p95_ms") or 0))
    out = int((plan.get("traffic") or {}).get("output_tokens_p95") or 0)
    return (ttft + out * tpot) / 1000.0


def buffer(plans: list[dict], models: list[str], floor=None) -> dict:
    """The listener buffer for the classes behind it: {bytes, quantity, prompt_bytes_p95, why}."""
    worst = max((prompt_bytes_p95(p) for p in _plans_of(plans, models)), default=0)
    need = worst * BODY_MARGIN + ENVELOPE_BYTES
    size = max(ENVOY_DEFAULT_BUFFER, math.ceil(need / BUFFER_STEP) * BUFFER_STEP)
    why = (
        f"p95 prompt {worst} B ({BYTES_PER_TOKEN} B a token) x {BODY_MARGIN} + {ENVELOPE_BYTES} B of JSON around it, "
        f"in whole {BUFFER_STEP // 1024} KiB"
    )
    if floor is not None and quantity.parse(floor) > size:
        size = quantity.parse(floor)
        why += f"; the site's {floor} is more"
    return {"bytes": size, "quantity": quantity.format_bytes(size), "prompt_bytes_p95": worst, "why": why}


def timeout(plans: list[dict], models: list[str], queue_s: float = 0.0, factor: float = 1.0, floor=None) -> dict:
    """A route's request timeout for the classes it reaches: {seconds, duration, answer_p95_s, why}.
    ``queue_s`` is the longest the router may queue the request, ``factor`` the share of answers it waits for
    (ESCALATION_FACTOR for a request answered elsewhere)."""
    worst = max((answer_p95_s(p) for p in _plans_of(plans, models)), default=0.0)
    need = (worst * factor + queue_s) * TIME_MARGIN
    seconds = max(ENVOY_DEFAULT_ROUTE_TIMEOUT_S, math.ceil(need))
    why = f"p95 answer {worst:.1f} s"
    if factor != 1:
        why += f" x {factor:g} (answered elsewhere)"
    if queue_s:
        why += f" + {queue_s:g} s the router may queue it"
    why += f", x {TIME_MARGIN:g}"
    if floor is not None and duration_s(floor) > seconds:
        seconds = math.ceil(duration_s(floor))
        why += f"; the site's {floor} is more"
    return {"seconds": seconds, "duration": f"{seconds}s", "answer_p95_s": round(worst, 3), "why": why}


def duration_s(value) -> float:
    """Seconds of a Gateway API duration (``300s``, ``5m``, ``1h30m``, ``250ms``) or a number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text, total, num = str(value).strip(), 0.0, ""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isdigit() or ch == ".":
            num += ch
            i += 1
            continue
        unit = "ms" if text[i : i + 2] == "ms" else ch
        if unit not in units or not num:
            raise ValueError(f"{value!r} is not a duration (e.g. 300s, 5m, 1h)")
        total += float(num) * units[unit]
        num, i = "", i + len(unit)
    if num:
        raise ValueError(f"{value!r} is not a duration (e.g. 300s, 5m, 1h): a number needs its unit")
    return total
