# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine of inference.blueprints.k8s_endpoints (action plugin and module share it).

Where each model is served and whether it answers: every model's LLMInferenceService is read for
``status.url`` (KServe sets it once the route is ready), each URL is probed with ``GET /v1/models``
(an endpoint this host cannot reach, by name or by route, is reported, not failed) and, with a
``smoke_prompt``, every endpoint that answered gets one chat completion, which must succeed.

The services are read concurrently through the collection's client, and the probes are sent
concurrently from this process. The verify playbook used to read each service with a
kubernetes.core.k8s_info task and probe it with ansible.builtin.uri, one module process per
model and step. That was about 1.7 s of a 5 s no-op re-run of the chat site.
"""

from __future__ import annotations

import json
import urllib.error
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.urls import open_url
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_client as kc

ARGUMENT_SPEC = dict(
    namespace=dict(type="str", required=True),
    # the intent's model entries as they are (name and served_name are read; the rest is ignored)
    models=dict(type="list", elements="dict", required=True),
    api_version=dict(type="str", default="serving.kserve.io/v1alpha2"),
    kind=dict(type="str", default="LLMInferenceService"),
    probe_timeout=dict(type="float", default=10.0),
    smoke_prompt=dict(type="str"),
    smoke_timeout=dict(type="float", default=120.0),
    endpoint_validate_certs=dict(type="bool", default=False),
    **kc.AUTH_ARG_SPEC,
)
WORKERS = 8
SMOKE_MAX_TOKENS = 8


def _http(method: str, url: str, body, timeout: float, validate: bool):
    """(status, parsed JSON or None, error text): status 0 when the endpoint could not be reached."""
    data = json.dumps(body).encode() if body is not None else None
    try:
        resp = open_url(
            url,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
            timeout=timeout,
            validate_certs=validate,
        )
        raw, status = resp.read(), resp.status
    except urllib.error.HTTPError as exc:
        return exc.code, None, f"HTTP {exc.code} {exc.reason}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return 0, None, str(getattr(exc, "reason", exc))
    try:
        return status, json.loads(raw or b"null"), ""
    except ValueError:
        return status, None, "the answer is not JSON"


def _base(url: str) -> str:
    return url.rstrip("/")


def _probe(model: dict, url: str, params: dict) -> dict:
    out = {"name": model["name"], "url": url, "reachable": False, "status": 0, "models": [], "error": ""}
    if not url:
        out["error"] = "the service has no status.url yet"
        return out
    if not url.startswith(("http://", "https://")):
        out["error"] = f"status.url {url!r} is not an http(s) URL"
        return out
    status, doc, err = _http(
        "GET", _base(url) + "/v1/models", None, params["probe_timeout"], params["endpoint_validate_certs"]
    )
    out.update(status=status, error=err, reachable=status == 200)
    if status == 200 and isinstance(doc, dict):
        out["models"] = [m.get("id") for m in doc.get("data") or [] if isinstance(m, dict)]
    return out


def _smoke(model: dict, probe: dict, params: dict) -> dict:
    served = model.get("served_name") or model["name"]
    body = {
        "model": served,
        "messages": [{"role": "user", "content": params["smoke_prompt"]}],
        "max_tokens": SMOKE_MAX_TOKENS,
    }
    url = _base(probe["url"]) + "/v1/chat/completions"
    status, doc, err = _http("POST", url, body, params["smoke_timeout"], params["endpoint_validate_certs"])
    answer = ""
    if status == 200 and isinstance(doc, dict):
        choices = doc.get("choices") or [{}]
        answer = ((choices[0] or {}).get("message") or {}).get("content") or ""
    return {"status": status, "answer": answer, "error": err, "url": url, "model": served}


def _map(fn, items):
    if len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(WORKERS, len(items))) as pool:
        return list(pool.map(fn, items))


def run(params, check_mode=False, diff=False, env=None):
    """The k8s_endpoints task: a result dict (``failed``/``msg`` on failure)."""
    del diff
    if not kc.HAS_KUBERNETES:
        return {
            "failed": True,
            "msg": f"k8s_endpoints needs the kubernetes Python package: {kc.KUBERNETES_IMPORT_ERROR}",
        }
    models = params["models"]
    unnamed = [str(i) for i, m in enumerate(models) if not isinstance(m.get("name"), str) or not m["name"]]
    if unnamed:
        return {"failed": True, "msg": f"models[{unnamed[0]}]: no name; every model needs the name of its service"}
    if not models:
        return {"changed": False, "endpoints": [], "reachable": {}, "msg": "no models"}
    try:
        client = kc.get_client(params, env)
        resource = client.resource(params["api_version"], params["kind"])

        def read(model):
            try:
                return client.get(resource, model["name"], params["namespace"])
            except kc.ApiError as exc:
                what = f"{params['kind']} {params['namespace']}/{model['name']}"
                raise kc.ClientError(kc.explain(exc, "get", what, resource, params["namespace"])) from exc

        services = _map(read, models)
    except kc.ClientError as exc:
        return {"failed": True, "msg": str(exc)}
    missing = [m["name"] for m, svc in zip(models, services, strict=True) if svc is None]
    if missing:
        return {
            "failed": True,
            "msg": f"{params['kind']} {', '.join(missing)} not found in namespace {params['namespace']}: "
            "converge the serving stage first",
        }
    urls = [kc.lookup(svc, "status.url") or "" for svc in services]
    probes = _map(lambda pair: _probe(pair[0], pair[1], params), list(zip(models, urls, strict=True)))
    failures = []
    if params.get("smoke_prompt") and not check_mode:
        reachable = [(m, p) for m, p in zip(models, probes, strict=True) if p["reachable"]]
        smokes = _map(lambda pair: _smoke(pair[0], pair[1], params), reachable)
        for (model, probe), smoke in zip(reachable, smokes, strict=True):
            probe["smoke"] = smoke
            if smoke["status"] != 200:
                failures.append(
                    f"{model['name']}: POST {smoke['url']} (model {smoke['model']!r}) answered "
                    f"{smoke['error'] or smoke['status']}"
                )
    answered = sum(1 for p in probes if (p.get("smoke") or {}).get("status") == 200)
    result = {
        "changed": False,
        "endpoints": probes,
        "reachable": {p["name"]: _base(p["url"]) for p in probes if p["reachable"]},
        "msg": f"{len(models)} model(s) in {params['namespace']}; reachable from here: "
        f"{sum(p['reachable'] for p in probes)}; smoke requests answered: {answered}",
    }
    if failures:
        result.update(failed=True, msg="smoke request failed: " + "; ".join(failures))
    return result
