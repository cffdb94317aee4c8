"""Small kubectl helpers of tests/autoscaling (TEST-SIDE ONLY)."""

from __future__ import annotations

import json

from tests.serving_helpers import until  # noqa: F401 - the package's wait


def kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


def get(cp, *args: str) -> dict:
    res = cp.kubectl(*args, "-o", "json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def apply(cp, objs: list[dict]) -> None:
    if not objs:
        return
    body = "\n".join(json.dumps(o) for o in objs)
    res = cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=body)
    assert res.returncode == 0, res.stderr


def stand_in(ref: dict, ns: str) -> dict:
    """A scale target of the kind and name a ScaledObject names (a Deployment or a LeaderWorkerSet), at 0."""
    labels = {"app": ref["name"]}
    pod = {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
    }
    if ref["kind"] == "Deployment":
        spec = {"replicas": 0, "selector": {"matchLabels": labels}, "template": pod}
    else:  # LeaderWorkerSet
        spec = {"replicas": 0, "leaderWorkerTemplate": {"size": 1, "workerTemplate": pod}}
    return {
        "apiVersion": ref["apiVersion"],
        "kind": ref["kind"],
        "metadata": {"name": ref["name"], "namespace": ns},
        "spec": spec,
    }
