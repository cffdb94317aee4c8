# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The readiness waits of each component, from the intent (inference.blueprints.k8s_wait specs).

A wait is part of the intent: which object, which condition, how long. The render action
returns the waits of the components it renders, and the stage waits for all of them at once.
"""

from __future__ import annotations

LLMISVC_API = "serving.kserve.io/v1alpha2"


def _serving(intent: dict, role: str) -> list[dict]:
    s = intent.get("serving") or {}
    ns = s.get("namespace")
    out = []
    if role == "model_service" and intent["options"]["model_service"]["model_service_wait"]:
        timeout = intent["options"]["model_service"]["model_service_wait_timeout"]
        for m in s.get("models", []):
            # KServe's controller sets Ready once the workloads, the scheduler, the pool and the
            # route are ready (WorkloadsReady and RouterReady).
            out.append(
                {
                    "apiVersion": LLMISVC_API,
                    "kind": "LLMInferenceService",
                    "namespace": ns,
                    "name": m["name"],
                    "condition": "Ready",
                    "timeout": timeout,
                    "component": role,
                }
            )
    if role == "kv_cache" and intent["options"]["kv_cache"]["kv_cache_wait"]:
        timeout = intent["options"]["kv_cache"]["kv_cache_wait_timeout"]
        for m in s.get("models", []):
            if (m.get("kv_cache") or {}).get("server"):
                out.append(
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "namespace": ns,
                        "name": m["names"]["lmcache_server"],
                        "timeout": timeout,
                        "component": role,
                    }
                )
    gw = intent.get("gateway")
    if role == "ai_gateway" and gw and intent["options"]["ai_gateway"]["ai_gateway_wait"]:
        # the front door serves once its controller (Envoy Gateway) has programmed the data plane
        out.append(
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway",
                "namespace": gw["namespace"],
                "name": gw["name"],
                "condition": "Programmed",
                "timeout": intent["options"]["ai_gateway"]["ai_gateway_wait_timeout"],
                "component": role,
            }
        )
    return out


def references(intent: dict, roles) -> list[dict]:
    """Objects the components' objects name but the site does not create (the operator creates them out of band:
    a Vault, External Secrets): the stage checks that they exist and warns, naming what breaks, when one does not.
    Each: apiVersion, kind, namespace, name, why."""
    gw = intent.get("gateway")
    out = []
    if "ai_gateway" in roles and gw:
        for t in gw["tenants"]:
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "namespace": gw["namespace"],
                    "name": t["secret"],
                    "why": f"tenant {t['name']}'s API key: the gateway refuses every request of that tenant with 401 "
                    "until it exists (docs/ai-grid.md, Adding a tenant)",
                }
            )
    return out


def for_components(intent: dict, roles) -> list[dict]:
    out = []
    for role in roles:
        out.extend(_serving(intent, role))
    return out


def timeout_of(waits: list[dict], default: int = 600) -> int:
    """One deadline for a stage's concurrent waits: the longest any component asks for."""
    return max([w.get("timeout", default) for w in waits] or [default])


def specs(waits: list[dict]) -> list[dict]:
    """The waits as k8s_wait object specs."""
    return [{k: v for k, v in w.items() if k not in ("timeout", "component")} for w in waits]
