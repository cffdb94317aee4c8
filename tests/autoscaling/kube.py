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


def stand_in(ref: dict, ns: str, template: dict | None = None) -> dict:
    """A scale target of the kind and name a ScaledObject names (a Deployment or a LeaderWorkerSet), at 0.

    With ``template`` (the LLMInferenceService's ``spec.template``, from which KServe builds the workload's
    pods) its pods ask for what KServe's would: the main container's resources (the GPUs), the tolerations,
    node selector and affinity; the real scheduler places them and kwok starts them."""
    labels = {"app": ref["name"]}
    main = {"name": "main", "image": "registry.k8s.io/pause:3.10"}
    spec: dict = {"containers": [main]}
    if template:
        rendered = next(c for c in template["containers"] if c["name"] == "main")
        main["resources"] = rendered.get("resources") or {}
        spec.update({k: template[k] for k in ("tolerations", "nodeSelector", "affinity") if k in template})
    pod = {"metadata": {"labels": labels}, "spec": spec}
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
