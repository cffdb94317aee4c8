# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What serving will need from the cluster that the site does not create: decided once, here, from the intent.

``serving_needs(intent)`` is ``intent.platform.requirements.serving``; preflight (module_utils/serving_preflight.py)
reads these objects and checks them before anything is applied:

- ``claims``: the PersistentVolumeClaim of every ``pvc://<claim>/<path>`` artifact, in the serving namespace
  (KServe mounts it in every pod of the model), with the size of the weights the plan sized (``plan.weights``)
  and the number of pods that mount it (more than one needs a claim several nodes can mount).
- ``secrets``: every Secret the rendered objects name by reference, with the keys they read and whether a
  missing one stops the site (``required``) or only the feature that reads it (the site documents creating
  it before or after the first converge: a tenant's key, a listener's certificate).
- ``own_namespaces``: where the site's own pods run: their GPUs are the site's to reuse, not taken.
"""

from __future__ import annotations

PVC_SCHEME = "pvc://"


def claims(intent: dict) -> list[dict]:
    """One entry per (namespace, claim) of the serving intent's pvc:// artifacts."""
    serving = intent.get("serving") or {}
    ns = serving.get("namespace")
    plans = {(e.get("model") or {}).get("name"): e.get("plan") or {} for e in intent.get("plans") or []}
    pods = {}
    for p in _pods(serving):
        pods[p["model"]] = pods.get(p["model"], 0) + int(p["count"])
    out: dict[tuple, dict] = {}
    for m in serving.get("models") or []:
        uri = m.get("uri") or ""
        if not uri.startswith(PVC_SCHEME):
            continue
        name, _sep, path = uri[len(PVC_SCHEME) :].partition("/")
        weights = float((plans.get(m["name"]) or {}).get("weights", {}).get("total_gib") or 0)
        entry = out.setdefault(
            (ns, name), {"namespace": ns, "name": name, "weights_gib": 0.0, "pods": 0, "models": [], "paths": []}
        )
        entry["weights_gib"] = max(entry["weights_gib"], round(weights, 3))
        entry["pods"] += pods.get(m["name"], 0)
        entry["models"].append(m["name"])
        entry["paths"].append(path)
    return [out[k] for k in sorted(out)]


def _pods(serving: dict) -> list[dict]:
    return [
        {"model": m["name"], "count": int(w["planned_replicas"]) * int(w["pods_per_replica"])}
        for m in serving.get("models") or []
        for w in (m.get("prefill"), m.get("main"))
        if w
    ]


def _secret(namespace, name, keys, why, required) -> dict:
    return {"namespace": namespace, "name": name, "keys": list(keys), "for": why, "required": required}


def secrets(intent: dict) -> list[dict]:
    """Every Secret the site's objects read and the site does not create (each rendered object that names one is
    cited)."""
    serving = intent.get("serving") or {}
    out = []
    gw = intent.get("gateway") or {}
    for t in gw.get("tenants") or []:
        # roles/ai_gateway/templates/objects.yml.j2: apiKeyAuth credentialRefs; a key is the client id Envoy Gateway
        # forwards, which the tenant's routes match: the tenant's name (intent/grid.py)
        out.append(
            _secret(
                gw["namespace"],
                t["secret"],
                [t["name"]],
                f"tenant {t['name']}'s API key (the gateway answers that tenant 401 until it exists)",
                False,
            )
        )
    ingress = gw.get("ingress") or {}
    if ingress.get("certificate"):
        out.append(
            _secret(
                gw["namespace"],
                ingress["certificate"],
                ["tls.crt", "tls.key"],
                f"the certificate of the front door's HTTPS listener ({ingress.get('hostname')})",
                False,
            )
        )
    esc = serving.get("escalation") or {}
    if (esc.get("credential") or {}).get("secret"):
        # roles/model_service/templates/objects.yml.j2: the HTTPRouteFilter's credentialInjection, key "credential"
        out.append(
            _secret(
                serving.get("namespace"),
                esc["credential"]["secret"],
                ["credential"],
                "this site's key of the regional grid (escalated requests are refused 401 without it)",
                False,
            )
        )
    burst = intent.get("burst") or {}
    cert = ((burst.get("ingress") or {}).get("gateway") or {}).get("certificate")
    if cert:
        out.append(_secret(burst.get("namespace"), cert, ["tls.crt", "tls.key"], "the burst ingress listener", False))
    zero = burst.get("scale_from_zero") or {}
    if zero.get("secret"):
        # roles/burst_routing/templates/objects.yml.j2: the TriggerAuthentication's secretTargetRef
        out.append(
            _secret(
                burst.get("namespace"),
                zero["secret"],
                ["token", "ca.crt"],
                "KEDA's read of the sovereign cluster's queue (scale from zero never triggers without it)",
                False,
            )
        )
    return out


def serving_needs(intent: dict) -> dict:
    """``intent.platform.requirements.serving``."""
    serving = intent.get("serving") or {}
    own = {serving.get("namespace"), (intent.get("burst") or {}).get("namespace")}
    return {
        "claims": claims(intent),
        "secrets": secrets(intent),
        "own_namespaces": sorted(n for n in own if n),
    }
