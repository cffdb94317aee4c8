"""Waits that report the cause as soon as it is known (module_utils/wait_causes.py, k8s_wait's loop; issue 33 item 2).

The pods behind a waited workload are read while waiting: a cause waiting does not resolve ends the wait early,
naming the pod and the reason (an admission refusal or an invalid image at once; Unschedulable, a failing pull or
a crash loop after the grace period); a timeout names the first blocking cause. Pods and events are shaped like
the API's (the scheduler's condition message, the kubelet's waiting reasons, a ReplicaSet's FailedCreate).
"""

from __future__ import annotations

from ansible_collections.inference.blueprints.plugins.module_utils import k8s_wait
from ansible_collections.inference.blueprints.plugins.module_utils import wait_causes as wc

LLMISVC = {"apiVersion": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceService", "namespace": "llm-rag"}
SPECS = [{**LLMISVC, "name": "qwen-rag", "condition": "Ready"}, {**LLMISVC, "name": "qwen", "condition": "Ready"}]
NO_PVC = '0/5 nodes are available: persistentvolumeclaim "models-qwen3-6-27b" not found. preemption: 0/5 nodes'


def pod(name, phase="Pending", *, unschedulable=None, waiting=None, ready=False):
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    if unschedulable:
        conditions.append(
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unschedulable}
        )
    statuses = []
    if waiting:
        reason, message = waiting
        statuses.append(
            {
                "name": "main",
                "restartCount": 4,
                "state": {"waiting": {"reason": reason, "message": message}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}} if reason == "CrashLoopBackOff" else {},
            }
        )
    return {
        "metadata": {"namespace": "llm-rag", "name": name},
        "status": {"phase": phase, "conditions": conditions, "containerStatuses": statuses},
    }


def event(uid, kind, name, reason, message):
    return {
        "metadata": {"uid": uid, "resourceVersion": "1"},
        "involvedObject": {"kind": kind, "namespace": "llm-rag", "name": name},
        "reason": reason,
        "message": message,
        "type": "Warning",
    }


def test_pods_belong_to_the_waited_object_whose_name_starts_theirs():
    names = ["qwen-rag", "qwen", ""]
    assert wc.owner("qwen-rag-kserve-7d9f-abcde", names) == 0
    assert wc.owner("qwen-kserve-router-scheduler-5c-xyz", names) == 1
    assert wc.owner("qwen-rag", names) == 0 and wc.owner("other-1", names) is None


def test_unschedulable_names_the_pod_and_the_scheduler_and_fails_after_the_grace():
    state = {"grace": 30}
    pods = [pod("qwen-rag-kserve-abc-1", unschedulable=NO_PVC), pod("qwen-rag-kserve-abc-2", "Running", ready=True)]
    first = wc.diagnose(SPECS, pods, [], state, now=100.0)
    assert first["fatal"] == [] and first["progress"][0] == (1, 2, {"Pending": 1, "Running": 1})
    (cause,) = first["causes"]
    assert wc.describe(cause) == f"pod llm-rag/qwen-rag-kserve-abc-1: Unschedulable: {NO_PVC}"
    later = wc.diagnose(SPECS, pods, [], state, now=131.0)
    assert [c["where"] for c in later["fatal"]] == ["pod llm-rag/qwen-rag-kserve-abc-1"] and later["fatal"][0][
        "age"
    ] == 31


def test_a_cause_that_went_away_starts_its_grace_anew():
    state = {"grace": 30}
    stuck = [pod("qwen-rag-kserve-abc-1", unschedulable="0/5 nodes are available: 2 Insufficient nvidia.com/gpu")]
    wc.diagnose(SPECS, stuck, [], state, now=0.0)
    wc.diagnose(SPECS, [pod("qwen-rag-kserve-abc-1", "Running")], [], state, now=20.0)
    assert wc.diagnose(SPECS, stuck, [], state, now=40.0)["fatal"] == []


def test_an_invalid_image_fails_at_once_and_a_crash_loop_after_the_grace():
    state = {"grace": 60}
    pods = [
        pod("qwen-kserve-1", waiting=("InvalidImageName", 'couldn\'t parse image name "vllm:"')),
        pod("qwen-rag-kserve-1", "Running", waiting=("CrashLoopBackOff", "back-off 40s restarting failed container")),
    ]
    diag = wc.diagnose(SPECS, pods, [], state, now=0.0)
    assert [(c["spec"], c["reason"]) for c in diag["fatal"]] == [(1, "InvalidImageName")]
    crash = next(c for c in diag["causes"] if c["reason"] == "CrashLoopBackOff")
    assert wc.describe(crash) == (
        "pod llm-rag/qwen-rag-kserve-1 container main: CrashLoopBackOff: last exit code 1 (Error), 4 restarts"
    )
    assert [c["reason"] for c in wc.diagnose(SPECS, pods, [], state, now=61.0)["fatal"]] == [
        "InvalidImageName",
        "CrashLoopBackOff",
    ]


def test_an_admission_refusal_fails_at_once_but_not_an_older_runs_event():
    refused = 'pods "qwen-rag-kserve-abc-" is forbidden: admission webhook "gpu.policy.example" denied the request'
    old = event("e1", "ReplicaSet", "qwen-rag-kserve-abc", "FailedCreate", refused)
    state = {"grace": 60}
    assert wc.diagnose(SPECS, [], [old], state, now=0.0)["fatal"] == []  # there before the wait: not this run's
    again = {**old, "metadata": {"uid": "e1", "resourceVersion": "2"}}  # the controller retried: the same refusal
    (cause,) = wc.diagnose(SPECS, [], [again], state, now=5.0)["fatal"]
    assert cause["reason"] == "FailedCreate (refused)" and cause["spec"] == 0
    assert cause["where"] == "ReplicaSet llm-rag/qwen-rag-kserve-abc" and "denied the request" in cause["message"]


TIMED_OUT = (
    'Internal error occurred: failed calling webhook "scc-admit.security.openshift.io": failed to call webhook: '
    'Post "https://127.0.0.1:38065/mutate?timeout=13s": context deadline exceeded'
)


def _recorded(ev, version):
    """The same Event after the recorder counted one more recurrence (a new resourceVersion)."""
    return {**ev, "metadata": {**ev["metadata"], "resourceVersion": str(version)}}


def test_a_webhook_timeout_recorded_once_is_not_why_the_wait_waits():
    """Seen in an emulation of CI (molecule ai_grid, load 20 on 2 cores): the SCC webhook timed out for a
    StatefulSet's pod, the controller's next try created it, and the Event (listed for an hour) failed the wait 60 s
    later as if the failure went on."""
    message = f"create Pod qwen-kserve-mn-0 failed: {TIMED_OUT}"
    ev = event("e2", "StatefulSet", "qwen-kserve-mn", "FailedCreate", message)
    state = {"grace": 60}
    wc.diagnose(SPECS, [], [], state, now=0.0)  # the first read is the baseline: nothing listed yet
    (cause,) = wc.diagnose(SPECS, [], [ev], state, now=22.0)["causes"]
    assert cause["reason"] == "FailedCreate" and not cause["at_once"] and cause["spec"] == 1
    for now in (40.0, 65.0, 82.0):  # the same Event, never recorded again
        assert wc.diagnose(SPECS, [], [ev], state, now=now)["fatal"] == []
    assert wc.diagnose(SPECS, [], [ev], state, now=83.0)["causes"] == []  # no recurrence for the grace: it passed


def test_a_webhook_failure_the_controller_keeps_recording_fails_after_the_grace():
    ev = event("e3", "ReplicaSet", "qwen-rag-kserve-abc", "FailedCreate", f"Error creating: {TIMED_OUT}")
    state = {"grace": 60}
    wc.diagnose(SPECS, [], [], state, now=0.0)
    # the controller's retries back off (5 ms doubling): each recurrence updates the one Event
    for version, now in ((1, 5.0), (2, 15.0), (3, 25.0), (4, 46.0)):
        assert wc.diagnose(SPECS, [], [_recorded(ev, version)], state, now=now)["fatal"] == []
    assert wc.diagnose(SPECS, [], [_recorded(ev, 4)], state, now=60.0)["fatal"] == []  # recurring for 41 s
    (cause,) = wc.diagnose(SPECS, [], [_recorded(ev, 5)], state, now=87.0)["fatal"]
    assert cause["age"] == 82.0 and cause["where"] == "ReplicaSet llm-rag/qwen-rag-kserve-abc"
    assert "context deadline exceeded" in wc.describe(cause)


def test_a_failure_recorded_as_new_events_still_counts_as_one_that_recurs():
    """The recorder makes a new Event when the message differs (the webhook's remaining timeout is in it): the
    recurrence is the cause's (its controller and reason), not one Event's; and one that passed starts anew."""
    state = {"grace": 60}
    wc.diagnose(SPECS, [], [], state, now=0.0)
    for n, now in enumerate((5.0, 20.0, 41.0)):
        message = f"Error creating: {TIMED_OUT.replace('timeout=13s', f'timeout={13 - n}s')}"
        events = [event(f"e{4 + n}", "ReplicaSet", "qwen-rag-kserve-abc", "FailedCreate", message)]
        assert wc.diagnose(SPECS, [], events, state, now=now)["fatal"] == []
    events.append(event("e9", "ReplicaSet", "qwen-rag-kserve-abc", "FailedCreate", f"Error creating: {TIMED_OUT}"))
    (cause,) = wc.diagnose(SPECS, [], events, state, now=70.0)["fatal"]
    assert cause["age"] == 65.0
    # it passed (no new recording for the grace), then came back: its grace starts again
    assert wc.diagnose(SPECS, [], events, state, now=131.0)["causes"] == []
    events.append(event("e10", "ReplicaSet", "qwen-rag-kserve-abc", "FailedCreate", f"Error creating: {TIMED_OUT}."))
    diag = wc.diagnose(SPECS, [], events, state, now=140.0)
    assert diag["fatal"] == [] and [c["age"] for c in diag["causes"]] == [0.0]


def test_progress_lines_count_ready_pods_per_object():
    diag = wc.diagnose(
        SPECS, [pod("qwen-rag-kserve-1", unschedulable=NO_PVC), pod("qwen-kserve-1", "Running")], [], {}, now=0.0
    )
    lines = wc.progress_lines(SPECS, [0, 1], diag, k8s_wait.spec_ref)
    assert lines[0].startswith(
        "LLMInferenceService llm-rag/qwen-rag (serving.kserve.io/v1alpha2): 0/1 pods ready (1 Pending); "
        "pod llm-rag/qwen-rag-kserve-1: Unschedulable"
    )
    assert lines[1] == "LLMInferenceService llm-rag/qwen (serving.kserve.io/v1alpha2): 0/1 pods ready (1 Running)"


class FakeClient:
    """What k8s_wait.wait reads: the waited objects (never ready here), and the namespace's pods and events."""

    def __init__(self, pods, events=()):
        self.pods, self.events = pods, list(events)

    def resource(self, api_version, kind, refresh_after=None):
        return (api_version, kind)

    def get(self, resource, name, namespace, timeout=None):
        return {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "ProgressDeadlineExceeded"}]}}

    def request(self, method, path, query=None, **_kw):
        return {"items": self.pods if path.endswith("/pods") else self.events}


def test_the_wait_stops_early_naming_the_pod_and_a_timeout_names_the_first_cause(monkeypatch):
    monkeypatch.setattr(k8s_wait, "DIAGNOSE_EVERY", 0.0)
    stuck = FakeClient([pod("qwen-rag-kserve-abc-1", unschedulable=NO_PVC)])
    out = k8s_wait.wait(stuck, SPECS[:1], timeout=30, sleep=0.05, grace=0.2)
    assert out["failed"] and out["elapsed"] < 5, out
    assert out["msg"].startswith("stopped waiting after "), out["msg"]
    assert f"pod llm-rag/qwen-rag-kserve-abc-1: Unschedulable: {NO_PVC}" in out["msg"]
    assert "LLMInferenceService llm-rag/qwen-rag" in out["msg"]
    timed_out = k8s_wait.wait(stuck, SPECS[:1], timeout=1, sleep=0.05, grace=60)
    assert timed_out["msg"].startswith(
        f"timed out after 1 s: first blocking cause: pod llm-rag/qwen-rag-kserve-abc-1: Unschedulable: {NO_PVC}; "
        "LLMInferenceService llm-rag/qwen-rag (serving.kserve.io/v1alpha2): waited for condition Ready=True"
    ), timed_out["msg"]


class LateEvents(FakeClient):
    """The events appear after the wait's first read (its baseline), then never change."""

    def request(self, method, path, query=None, **_kw):
        if path.endswith("/events"):
            self.reads = getattr(self, "reads", 0) + 1
            return {"items": self.events if self.reads > 1 else []}
        return super().request(method, path, query)


def test_a_timeout_names_the_failure_recorded_last_when_it_passed(monkeypatch):
    """A failure recorded less often than the grace (the recorder's spam filter lets one Event of an object through
    every five minutes after a burst) is not a current cause; the timeout still names it, saying when it was."""
    monkeypatch.setattr(k8s_wait, "DIAGNOSE_EVERY", 0.0)
    ev = event("e11", "ReplicaSet", "qwen-rag-kserve-abc", "FailedCreate", f"Error creating: {TIMED_OUT}")
    out = k8s_wait.wait(LateEvents([], [ev]), SPECS[:1], timeout=1, sleep=0.05, grace=0.2)
    assert out["msg"].startswith("timed out after 1 s: last recorded cause ("), out["msg"]
    assert "s before the timeout): ReplicaSet llm-rag/qwen-rag-kserve-abc: FailedCreate: Error creating: " in out["msg"]


def test_one_cause_per_object_and_reason_with_the_message_recorded_last():
    state = {"grace": 60}
    wc.diagnose(SPECS, [], [], state, now=0.0)
    old = event("e12", "ReplicaSet", "qwen-rag-kserve-abc", "FailedCreate", "Error creating: first message")
    new = event("e13", "ReplicaSet", "qwen-rag-kserve-abc", "FailedCreate", "Error creating: second message")
    wc.diagnose(SPECS, [], [old], state, now=5.0)
    (cause,) = wc.diagnose(SPECS, [], [old, new], state, now=10.0)["causes"]
    assert cause["message"] == "Error creating: second message" and cause["age"] == 5.0


def test_progress_lines_reach_the_reporter_during_the_wait(monkeypatch):
    monkeypatch.setattr(k8s_wait, "DIAGNOSE_EVERY", 0.0)
    monkeypatch.setattr(k8s_wait, "PROGRESS_EVERY", 0.0)
    lines: list = []
    with k8s_wait.reporting(lines.append):
        k8s_wait.wait(FakeClient([pod("qwen-rag-kserve-abc-1", "Running")]), SPECS[:1], timeout=1, sleep=0.1)
    assert (
        lines
        and lines[0].startswith("waiting ")
        and "LLMInferenceService llm-rag/qwen-rag (serving.kserve.io/v1alpha2): 0/1 pods ready" in lines[0]
    )
    assert k8s_wait.PROGRESS is None
