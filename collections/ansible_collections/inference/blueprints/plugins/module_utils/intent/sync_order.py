# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The order in which a GitOps tree's Applications sync (their sync waves).

The apply path applies a whole stage at once, so the blueprint's component order is enough there. Argo CD
applies one wave at a time and starts the next only once every object of the current one is healthy: an
object that reads another component's object must sync after that component. The blueprint order puts
``observability`` last, but it renders the metrics reader (ServiceAccount and its token Secret) that the
TriggerAuthentications of ``serving_autoscaling`` and ``burst_routing`` read: synced first, KEDA's scaler
build fails on the missing Secret, the ScaledObject never becomes Ready and the wave never ends (issue 34).

``ordered`` keeps the blueprint order except where a component needs another: a stable topological order.
"""

from __future__ import annotations

# The components whose objects read the metrics reader's ServiceAccount or token Secret: the TriggerAuthentication
# (serving_autoscaling, and the burst cluster's local triggers in burst_routing) and the ServiceMonitor's credentials
# (observability). The one that renders it is the reader's owner (monitoring.metrics_reader).
READS_METRICS_READER = ("burst_routing", "serving_autoscaling", "observability")
# The metrics reader's TriggerAuthentication is rendered by serving_autoscaling; the burst cluster's ScaledObjects
# (burst_routing, intent/burst.py) name it for their local triggers.
READS_SERVING_AUTOSCALING = ("burst_routing",)


def needs(intent: dict) -> dict[str, set[str]]:
    """{component: the components whose objects it reads}, from the intent's facts."""
    out: dict[str, set[str]] = {}
    reader = (intent.get("serving") or {}).get("metrics_reader")
    if reader:
        for consumer in READS_METRICS_READER:
            if consumer != reader["owner"]:
                out.setdefault(consumer, set()).add(reader["owner"])
        for consumer in READS_SERVING_AUTOSCALING:
            out.setdefault(consumer, set()).add("serving_autoscaling")
    return out


def ordered(components: list[str], wanted: dict[str, set[str]]) -> list[str]:
    """``components`` in their own order, each moved after the components it needs (those in the list).

    Raises ValueError on a cycle (a component that needs itself through others): no order would sync."""
    present = set(components)
    placed: list[str] = []
    left = list(components)
    while left:
        ready = next((c for c in left if not (wanted.get(c, set()) & present) - set(placed)), None)
        if ready is None:
            raise ValueError(f"components need each other, no sync order exists: {', '.join(left)}")
        placed.append(ready)
        left.remove(ready)
    return placed
