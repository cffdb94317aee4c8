"""Issue 34 items 4a/4b: what KEDA and the HPA decide from the RENDERED ScaledObjects at the plan's load.

The replica arithmetic below is the HPA's for External metrics as KEDA feeds them (KEDA v2.21 pkg/scaling,
kube-controller-manager pkg/controller/podautoscaler/replica_calculator.go, tolerance 0.1):
AverageValue (KEDA's default when a trigger names no metricType): ceil(value / threshold);
Value: ceil(current x value / threshold) unless within the tolerance; the HPA takes the largest
trigger's count, clamped to min/max. tests/autoscaling runs the real engines on the same objects.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.plugin_utils import render

ROOT = Path(__file__).resolve().parents[3]
TOLERANCE = 0.1


def _objects(site: str) -> tuple[dict, list[dict]]:
    intent = next(iter(cli.site_intents(str(ROOT / "inventories" / site), None).values()))
    return intent, list(render.render_components(intent["stages"]["serving"], intent))


def _scaled(objs: list[dict], workload: str) -> dict | None:
    found = [o for o in objs if o["kind"] == "ScaledObject" and o["spec"]["scaleTargetRef"]["name"] == workload]
    assert len(found) <= 1, f"KEDA refuses two ScaledObjects on {workload}"
    return found[0] if found else None


def hpa_replicas(so: dict, current: int, values: dict) -> int:
    """The replicas KEDA's HPA asks for, given each trigger's query value."""
    spec = so["spec"]
    desired = []
    for t in spec["triggers"]:
        value = values.get(t["name"], 0.0)
        thr = float(t["metadata"]["threshold"])
        if t.get("metricType", "AverageValue") == "AverageValue":
            ratio = value / (thr * current)
            desired.append(current if abs(1 - ratio) <= TOLERANCE else math.ceil(value / thr))
        else:
            ratio = value / thr
            desired.append(current if abs(1 - ratio) <= TOLERANCE else math.ceil(current * ratio))
    return max(spec["minReplicaCount"], min(spec["maxReplicaCount"], max(desired)))


def _plan(intent: dict) -> dict:
    return intent["plans"][0]["plan"]


def _ramp(so: dict, rate: float, start: int = 1) -> int:
    """Replicas after the HPA settled at a steady request rate (queues empty: the plan meets its SLO there)."""
    current = start
    for _ in range(20):
        nxt = hpa_replicas(so, current, {"request-arrivals": rate})
        if nxt == current:
            return current
        current = nxt
    return current


@pytest.mark.parametrize(
    ("site", "expect"),
    [("example-chat", 3), ("example-batch", 4)],
)
def test_the_plans_load_asks_for_the_plans_replicas(site, expect):
    """Chat decode at 120 req/s needs 3 replicas, batch at 40 req/s 4 GPUs: main asked for 7 and 16 (threshold 1)."""
    intent, objs = _objects(site)
    plan = _plan(intent)
    main = plan["pools"]["decode"] or plan["pools"]["serve"]
    assert main["replicas"] == expect
    m = intent["serving"]["models"][0]
    so = _scaled(objs, m["names"]["main_workload"])
    rate = plan["traffic"]["arrival_rate_rps"]
    assert _ramp(so, rate) == expect
    # a little more load than planned adds a replica (the SLO needs it), a little less keeps the count
    assert _ramp(so, rate * 1.2, start=expect) == expect + 1
    assert _ramp(so, rate * 0.95, start=expect) == expect
    # the threshold says why, in the intent
    trig = next(t for a in intent["serving"]["autoscaling"]["scaled_objects"] for t in a["triggers"])
    assert trig["why"]


def test_epp_queue_is_a_per_pod_average_not_a_total():
    """4 pods each with 8 queued: the average is 8 = the threshold, the pool keeps 4 (main: 8/4/8 -> scale in to 1)."""
    intent, objs = _objects("example-batch")
    so = _scaled(objs, intent["serving"]["models"][0]["names"]["main_workload"])
    epp = next(t for t in so["spec"]["triggers"] if t["name"] == "epp-queue")
    assert epp.get("metricType") == "Value"
    thr = float(epp["metadata"]["threshold"])
    assert hpa_replicas(so, 4, {"epp-queue": thr}) == 4
    # twice the threshold on every pod doubles the pool
    assert hpa_replicas(so, 4, {"epp-queue": 2 * thr}) == 8


def test_prefill_follows_decode_at_the_plans_ratio():
    """Chat plans 2 prefill : 3 decode. On main prefill had no ScaledObject and stayed at 2 while decode grew."""
    intent, objs = _objects("example-chat")
    plan = _plan(intent)
    p, d = plan["pools"]["prefill"]["replicas"], plan["pools"]["decode"]["replicas"]
    m = intent["serving"]["models"][0]
    dso = _scaled(objs, m["names"]["main_workload"])
    pso = _scaled(objs, m["names"]["prefill_workload"])
    assert pso is not None, "the prefill workload has no ScaledObject"
    rate = plan["traffic"]["arrival_rate_rps"]
    assert (_ramp(pso, rate), _ramp(dso, rate)) == (p, d)
    for factor in (0.5, 1.5, 2.0):
        dr, pr = _ramp(dso, rate * factor), _ramp(pso, rate * factor)
        # the prefill count is the decode count at the plan's ratio, rounded up
        assert pr == math.ceil(round(rate * factor / (rate / p), 6)), (factor, pr, dr)
        assert abs(pr / dr - p / d) <= 1 / dr + 1e-9, (factor, pr, dr)
    # KServe must leave the prefill replicas to KEDA, as it does for the main workload
    svc = next(o for o in objs if o["kind"] == "LLMInferenceService" and o["metadata"]["name"] == m["name"])
    assert "replicas" not in svc["spec"]["prefill"]
    assert "replicas" not in svc["spec"]


def test_a_site_that_shortens_the_cooldown_keeps_the_blueprints_queue_threshold():
    """batch.yml sets {queue_threshold: 8, cooldown_seconds: 900}; a site giving only the cooldown got the schema's
    default threshold (4) in place of the blueprint's 8: the mapping's keys are independent knobs."""
    extra = {"autoscaling_trigger": {"cooldown_seconds": 30}}
    site_dir = str(ROOT / "inventories" / "example-batch")
    intent = next(iter(cli.site_intents(site_dir, None, extra).values()))
    objs = list(render.render_components(intent["stages"]["serving"], intent))
    so = _scaled(objs, intent["serving"]["models"][0]["names"]["main_workload"])
    assert so["spec"]["cooldownPeriod"] == 30
    held = next(t for t in so["spec"]["triggers"] if t["name"] == "epp-held-requests")
    assert held["metadata"]["threshold"] == "8"


def _rendered_scaled(site: str, extra: dict) -> dict:
    intent = next(iter(cli.site_intents(str(ROOT / "inventories" / site), None, extra).values()))
    objs = list(render.render_components(intent["stages"]["serving"], intent))
    return _scaled(objs, intent["serving"]["models"][0]["names"]["main_workload"])


def test_a_key_the_site_leaves_out_comes_from_the_roles_option_and_zero_is_kept():
    """The chat blueprint sets no autoscaling_trigger: a site giving only the cooldown got the schema's own
    threshold (4) where a site giving nothing gets the role's serving_autoscaling_queue_threshold (8); a cooldown of
    0 fell back to the role's 600 (``or``)."""
    base = _rendered_scaled("example-chat", {})
    some = _rendered_scaled("example-chat", {"autoscaling_trigger": {"cooldown_seconds": 0}})
    thr = {t["name"]: t["metadata"]["threshold"] for t in base["spec"]["triggers"]}
    assert {t["name"]: t["metadata"]["threshold"] for t in some["spec"]["triggers"]} == thr
    assert some["spec"]["cooldownPeriod"] == 0 and base["spec"]["cooldownPeriod"] == 600
