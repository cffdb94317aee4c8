# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How to measure a model whose endpoint the controller host cannot reach (docs/verify.md, "Measuring from
inside the cluster").

KServe's ``status.url`` of a service is usually a cluster-internal name (``<svc>.<namespace>.svc.cluster.local``)
or a gateway address only the cluster's network reaches. Verify then measured nothing; instead of saying only
that, it names, per model, the exact commands that measure it: a port-forward to the service and the verify
run that benchmarks through it, and a one-off pod that asks the endpoint from inside the cluster. Pure Python.
"""

from __future__ import annotations

import json
import shlex
from urllib.parse import urlsplit

LOCAL_PORT = 8000
PROBE_IMAGE = "registry.access.redhat.com/ubi9/ubi-minimal"  # ships curl


def _service(url: str) -> tuple[str, str, int] | None:
    """``(service, namespace, port)`` of a cluster-internal service URL, None for any other address."""
    parts = urlsplit(url)
    labels = (parts.hostname or "").split(".")
    if len(labels) < 3 or labels[2] != "svc":
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return labels[0], labels[1], port


def model_hint(name: str, url: str | None, namespace: str) -> list[str]:
    """The lines that tell how to measure model ``name`` served at ``url`` (its ``status.url``; None: not read)."""
    if url is None:
        endpoints = shlex.quote(json.dumps({"verify_slo_endpoints": {name: f"http://127.0.0.1:{LOCAL_PORT}"}}))
        return [
            f"{name}: its endpoint was not read (the verify tag did not run): name a URL that reaches it, e.g. "
            f"through kubectl -n {namespace} port-forward: -e {endpoints}"
        ]
    if not url:
        return [f"{name}: KServe has set no status.url yet: nothing to measure until the service is Ready"]
    lines = []
    svc = _service(url)
    if svc:
        service, ns, port = svc
        scheme = urlsplit(url).scheme
        local = f"{scheme}://127.0.0.1:{LOCAL_PORT}{urlsplit(url).path.rstrip('/')}"
        endpoints = shlex.quote(json.dumps({"verify_slo_endpoints": {name: local}}))
        lines.append(
            f"{name}: measure it through a port-forward: kubectl -n {ns} port-forward svc/{service} "
            f"{LOCAL_PORT}:{port} & ansible-playbook -i <inventory> playbooks/verify.yml --tags slo -e {endpoints}"
        )
    probe = f"verify-{name}"[:63].rstrip("-")
    lines.append(
        f"{name}: ask it from inside the cluster: kubectl -n {namespace} run {probe} --rm -i --restart=Never "
        f"--image={PROBE_IMAGE} -- curl -sS -m 10 {shlex.quote(url.rstrip('/') + '/v1/models')}"
    )
    return lines


def hints(endpoints: list[dict], namespace: str, skipped: list[str]) -> list[str]:
    """Every line for the models that were not measured, from ``k8s_endpoints``' ``endpoints`` entries."""
    urls = {e.get("name"): e.get("url") or "" for e in endpoints or []}
    return [line for name in skipped for line in model_hint(name, urls.get(name), namespace)]
