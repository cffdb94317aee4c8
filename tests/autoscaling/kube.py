"""Small kubectl helpers of tests/autoscaling (TEST-SIDE ONLY)."""

from __future__ import annotations

import json
import time


def kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


def get(cp, *args: str) -> dict:
    res = cp.kubectl(*args, "-o", "json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def apply(cp, objs: list[dict]) -> None:
    body = "\n".join(json.dumps(o) for o in objs)
    res = cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=body)
    assert res.returncode == 0, res.stderr


def until(cond, timeout: float, what: str, seen=None, poll: float = 0.5):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(poll)
    raise AssertionError(f"not within {timeout:.0f} s: {what}" + (f"; saw {seen()}" if seen else ""))


def stand_in(ref: dict, ns: str) -> dict:
    labels = {"app": ref["name"]}
    pod = {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": ref["name"], "namespace": ns},
        "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": pod},
    }
