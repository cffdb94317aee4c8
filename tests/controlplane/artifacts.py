#!/usr/bin/env python3
"""What a site's operators stage before the first converge: the volumes of ``pvc://`` model artifacts.

A model whose ``artifact.uri`` is ``pvc://<claim>/<path>`` (the example AI grid and RAG sites: weights
pre-staged once on an RWX volume, see their inventories) needs that PersistentVolumeClaim, Bound, in
the serving namespace before KServe's pods can be scheduled: kube-scheduler leaves a pod whose claim
does not exist, or is unbound, Pending. On a cluster the site's storage team made it. Here
:func:`stage` makes it for each cluster of a site: the serving namespace, a statically provisioned
PersistentVolume (RWX NFS, never mounted: kwok runs no containers) reserved for the claim, and the
claim; kube-controller-manager's persistentvolume-binder controller binds them, as on a cluster.

Used by the tests that converge such sites and by molecule's create step::

    artifacts.py --site inventories/example-ai-grid --kubeconfig K   # each host on the context of its
                                                                     # name when the kubeconfig has one
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
for p in (REPO, HERE.parent):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

SIZE = "1Ti"  # the claim's request and the volume's capacity: nothing here stores the weights


def claims(intent: dict) -> list[tuple[str, str]]:
    """(namespace, claim) of every pvc:// artifact of one cluster's serving intent."""
    ns = intent["serving"]["namespace"]
    out = []
    for m in intent["serving"]["models"]:
        uri = m.get("uri") or ""
        if uri.startswith("pvc://"):
            out.append((ns, uri[len("pvc://") :].split("/", 1)[0]))
    return sorted(set(out))


def volume_name(namespace: str, claim: str) -> str:
    """The PersistentVolume made for a staged claim (left Released when its namespace goes)."""
    return f"staged-{namespace}-{claim}"[:253]


def _post(api, path: str, body: dict) -> None:
    from kubernetes.client.rest import ApiException
    from simulator.kube import request

    try:
        request(api, "POST", path, body=body)
    except ApiException as e:
        if e.status != 409:
            raise


def adopted(intents) -> list[str]:
    """The ``adopt`` entries for what ``stage`` creates before its first converge: the serving namespace that holds
    the staged claims. A site adopts it without them (intent/platform.py ``ownership``: the namespace of its
    pvc:// claims); tests that still pass them show that listing it too changes nothing."""
    return sorted({f"Namespace/{ns}" for intent in intents for ns, _claim in claims(intent)})


def stage(api, intent: dict, timeout: float = 120) -> list[str]:
    """Create the Bound claims of one cluster's pvc:// artifacts; returns ``namespace/claim`` of each."""
    from simulator.kube import request

    made = []
    for ns, claim in claims(intent):
        pv = volume_name(ns, claim)
        _post(api, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        _post(
            api,
            "/api/v1/persistentvolumes",
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": pv, "labels": {"inference.blueprints/staged-artifact": claim}},
                "spec": {
                    "capacity": {"storage": SIZE},
                    "accessModes": ["ReadWriteMany"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": "",
                    "nfs": {"server": "nfs.models.example", "path": f"/models/{claim}"},
                    "claimRef": {"namespace": ns, "name": claim},
                },
            },
        )
        _post(
            api,
            f"/api/v1/namespaces/{ns}/persistentvolumeclaims",
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": claim, "namespace": ns},
                "spec": {
                    "accessModes": ["ReadWriteMany"],
                    "resources": {"requests": {"storage": SIZE}},
                    "storageClassName": "",
                    "volumeName": pv,
                },
            },
        )
        made.append(f"{ns}/{claim}")
    deadline = time.monotonic() + timeout
    for item in made:
        ns, claim = item.split("/")
        while True:
            pvc = request(api, "GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{claim}")
            phase = (pvc.get("status") or {}).get("phase")
            if phase == "Bound":
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"PersistentVolumeClaim {item} not Bound after {timeout:.0f}s (phase {phase})")
            time.sleep(0.2)
    return made


def main(argv=None) -> int:
    from ansible_collections.inference.blueprints.plugins.module_utils import cli
    from kubernetes import config

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", required=True)
    ap.add_argument("--kubeconfig", required=True)
    a = ap.parse_args(argv)
    contexts = {c["name"] for c in config.list_kube_config_contexts(config_file=a.kubeconfig)[0]}
    for host, intent in cli.site_intents(a.site, None).items():
        api = config.new_client_from_config(config_file=a.kubeconfig, context=host if host in contexts else None)
        for item in stage(api, intent):
            print(f"{host}: staged PersistentVolumeClaim {item} (Bound)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
