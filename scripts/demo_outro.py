"""The end of ``make demo`` (issue 33 item 5): where each model of the converged site is served, one request a
user can paste, and how to remove the site and stop the plane.

The endpoint is each LLMInferenceService's ``status.url`` as KServe set it, read from the cluster; the request
is a chat completion to it, with the name the intent says clients send (``served_name``). A cluster-internal
URL is asked from a one-off pod inside the cluster (the command module_utils/slo/inside.py names for verify).

    python scripts/demo_outro.py --site inventories/example-chat --kubeconfig .cluster/kubeconfig
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys

from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils.slo import inside


def _status_url(kubectl: list[str], namespace: str, name: str) -> str:
    res = subprocess.run(
        [*kubectl, "-n", namespace, "get", "llminferenceservice", name, "-o", "jsonpath={.status.url}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return res.stdout.strip() if res.returncode == 0 else ""


def request_line(url: str, served: str, namespace: str, model: str) -> str:
    """One chat completion to ``url`` as a command to paste: curl, from a pod inside the cluster."""
    body = json.dumps({"model": served, "messages": [{"role": "user", "content": "Say hello"}], "max_tokens": 32})
    curl = (
        f"curl -sS -m 60 {shlex.quote(url.rstrip('/') + '/v1/chat/completions')} "
        f"-H 'Content-Type: application/json' -d {shlex.quote(body)}"
    )
    return (
        f"kubectl -n {namespace} run ask-{model}"[:80].rstrip("-")
        + f" --rm -i --restart=Never --image={inside.PROBE_IMAGE} -- {curl}"
    )


def lines(site: str, kubeconfig: str, kubectl: str) -> list[str]:
    intents = cli.site_intents(site, None)
    ctl = [kubectl, f"--kubeconfig={kubeconfig}"]
    out = []
    for host, intent in intents.items():
        ns = intent["serving"]["namespace"]
        for m in intent["serving"]["models"]:
            url = _status_url(ctl, ns, m["name"])
            served = m.get("served_name") or m.get("model_id") or m["name"]
            out.append(f"Endpoint of {m['name']} ({host}): {url or 'no status.url yet (not Ready)'}")
            if url:
                out.append(f"  Ask it (from a pod inside the cluster): {request_line(url, served, ns, m['name'])}")
    out.append(
        "  (on the local control plane the pods are kwok's and run no engine, so nothing answers there; on a "
        "cluster that command asks the model)"
    )
    out.append(f"Remove the site: K8S_AUTH_KUBECONFIG={kubeconfig} ansible-playbook -i {site} playbooks/teardown.yml")
    out.append("Stop the local control plane: make cluster-down")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", required=True)
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--kubectl", default="kubectl")
    args = ap.parse_args(argv)
    print("\n".join(lines(args.site, args.kubeconfig, args.kubectl)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
