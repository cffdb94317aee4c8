# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why a waited workload is not ready yet, read from its pods and events while waiting (k8s_wait's loop).

Pure: ``diagnose`` takes the objects waited for, the pods and Warning events of their namespaces (as the API
lists them), the time and what was seen before, and returns the causes found: each names the pod (or the
controller) and the reason, and says whether waiting longer can help. The wait stops at once on a cause that
cannot resolve by itself and after ``grace`` seconds on one that may (a pod Unschedulable for a minute is not a
rolling update any more).

Sources (kubernetes v1.36):
- a pod the scheduler cannot place has condition ``PodScheduled=False`` reason ``Unschedulable`` whose message is
  the scheduler's (``0/5 nodes are available: 2 Insufficient nvidia.com/gpu ...``, ``persistentvolumeclaim "x"
  not found``; pkg/scheduler/schedule_one.go handleSchedulingFailure), and a ``FailedScheduling`` event;
- the kubelet's container waiting reasons (pkg/kubelet/images/types.go ``ErrImagePull``, ``ImagePullBackOff``,
  ``InvalidImageName``, ``ErrImageNeverPull``; pkg/kubelet/container ``CrashLoopBackOff``,
  ``CreateContainerConfigError``);
- a workload controller that cannot create its pods records ``FailedCreate`` on itself (ReplicaSet, StatefulSet,
  Job; pkg/controller/controller_utils.go), with the API server's refusal (an admission webhook's denial, a
  quota, a policy): the controller retries, the refusal stays. An event is history, not state: it stays listed
  (for an hour) after the failure it records has passed, and the controller's recorder updates the same Event
  (its count, so its resourceVersion) each time the failure recurs (client-go tools/record, EventCorrelator). A
  FailedCreate that is not a refusal (a webhook that timed out or was unreachable, the API server busy) is
  therefore a cause only while it recurs: it fails the wait when it kept being recorded for the grace period (its
  Event updated, or a new one for the same object and reason: the recorder makes a new Event when the message
  differs), and stops being a cause when nothing was recorded for that long (a webhook that timed out once on a
  busy machine while the controller's next try succeeded is not why the wait is still waiting).
Pods and controllers belong to the waited object whose name starts theirs (KServe names its workloads
``<service>-kserve...``; a Deployment's pods ``<deployment>-<hash>-<id>``; a LeaderWorkerSet's ``<lws>-<group>``).
"""

from __future__ import annotations

GRACE = 60.0  # seconds a cause that may resolve (Unschedulable, a failing pull or start) is given
# kinds whose readiness is their pods': the wait reads the pods behind them
WORKLOAD_KINDS = ("LLMInferenceService", "Deployment", "StatefulSet", "DaemonSet", "LeaderWorkerSet", "Job")
FAIL_AT_ONCE = ("InvalidImageName", "ErrImageNeverPull")
FAIL_AFTER_GRACE = (
    "ErrImagePull",
    "ImagePullBackOff",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
)
POD_EVENTS = ("FailedMount", "FailedAttachVolume")
# FailedCreate messages of a refusal (admission, quota, policy): the controller's retries meet the same answer
REFUSED = ("forbidden", "denied", "admission webhook", "is invalid", "exceeded quota")


def owner(name: str, names: list[str]) -> int | None:
    """The index of the waited object whose name starts ``name`` (the longest such), else None."""
    best = None
    for i, n in enumerate(names):
        if n and (name == n or name.startswith(n + "-")) and (best is None or len(n) > len(names[best])):
            best = i
    return best


def _pod_ready(pod: dict) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def _cause(where: str, reason: str, message: str, at_once: bool = False) -> dict:
    return {"where": where, "reason": reason, "message": " ".join(str(message or "").split()), "at_once": at_once}


def pod_causes(pod: dict) -> list[dict]:
    """What keeps one pod from being ready, from its status."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    where = f"pod {meta.get('namespace')}/{meta.get('name')}"
    out = []
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            out.append(_cause(where, "Unschedulable", c.get("message")))
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason in FAIL_AT_ONCE or reason in FAIL_AFTER_GRACE:
            last = ((cs.get("lastState") or {}).get("terminated")) or {}
            detail = waiting.get("message") or ""
            if reason == "CrashLoopBackOff" and last:
                detail = (
                    f"last exit code {last.get('exitCode')} ({last.get('reason')}), {cs.get('restartCount')} restarts"
                )
            out.append(_cause(f"{where} container {cs.get('name')}", reason, detail, reason in FAIL_AT_ONCE))
    return out


def _version(ev: dict) -> tuple:
    meta = ev.get("metadata") or {}
    return meta.get("uid"), meta.get("resourceVersion")


def _changed(ev: dict, state: dict) -> bool:
    """Whether this read finds the event new or with a new resourceVersion (the recorder updates one Event per
    recurrence). ``state["events"]`` carries {uid: resourceVersion} between reads."""
    uid, version = _version(ev)
    seen = state.setdefault("events", {})
    changed = seen.get(uid) != version
    seen[uid] = version
    return changed


def _event_cause(ev: dict) -> dict | None:
    obj = ev.get("involvedObject") or {}
    reason, message = ev.get("reason"), ev.get("message") or ""
    if reason == "FailedCreate" and obj.get("kind") != "Pod":
        refused = any(r in message.lower() for r in REFUSED)
        where = f"{obj.get('kind')} {obj.get('namespace')}/{obj.get('name')}"
        return _cause(where, "FailedCreate" + (" (refused)" if refused else ""), message, refused)
    if reason in POD_EVENTS and obj.get("kind") == "Pod":
        return _cause(f"pod {obj.get('namespace')}/{obj.get('name')}", reason, message)
    return None


def event_causes(events: list[dict], state: dict, now: float) -> list[dict]:
    """Warning events that are new since the wait began, or recorded again since (an event seen again is the same
    object updated: its count or series grows): a controller's FailedCreate, a pod's volume that does not mount.
    ``state["baseline"]``: {uid: resourceVersion} at the first read (an older run's events are not this run's
    causes). One cause per object and reason, with the message recorded last. A refusal is a cause at once; any
    other is one while it recurs (module docstring): its ``age`` is how long it kept recurring
    (``state["recurring"]``: {(where, reason): [first, last, cause]}, the local times of the reads that found one of
    its events new or updated; the recorder makes a new Event when the message differs, as a webhook's remaining
    timeout in it does). One not recorded again for the grace period has passed: it moves to ``state["passed"]``
    ({(where, reason): (cause, last)}), which a timeout still names when nothing else is known."""
    baseline, grace = state["baseline"], float(state.get("grace", GRACE))
    recurring = state.setdefault("recurring", {})
    passed = state.setdefault("passed", {})
    here = []
    for ev in events:
        uid, version = _version(ev)
        if uid in baseline and baseline[uid] == version:
            continue
        cause = _event_cause(ev)
        if cause is None:
            continue
        key, changed = (cause["where"], cause["reason"]), _changed(ev, state)
        span = recurring.get(key)
        if span is None or (changed and now - span[1] > grace):  # first seen, or back after it had passed
            span = recurring[key] = [now, now, cause]
            passed.pop(key, None)
        elif changed:
            span[1], span[2] = now, cause
        if key not in here:
            here.append(key)
    out = []
    for key in here:
        first, last, cause = recurring[key]
        if not cause["at_once"]:
            if now - last > grace:
                passed[key] = (cause, last)  # not recorded again for the grace period: it passed
                continue
            cause = {**cause, "age": round(last - first, 1)}
        out.append(cause)
    return out


def diagnose(specs: list[dict], pods: list[dict], events: list[dict], state: dict, now: float) -> dict:
    """The causes behind the waited objects (``specs``, k8s_wait specs) and their pods' progress.

    ``state`` carries what earlier reads saw, and is updated: ``first_seen`` {(where, reason): time}, ``baseline``
    {event uid: resourceVersion} (set at the first call), ``grace`` seconds. Returns ``{"fatal": [cause], "causes":
    [cause], "progress": {spec index: (ready, total, phases)}}``; a cause carries ``spec`` (its object's index)
    and ``age`` (seconds since first seen)."""
    names = [s["name"] if s["kind"] in WORKLOAD_KINDS else "" for s in specs]
    if "baseline" not in state:
        state["baseline"] = dict(_version(e) for e in events)
        events = []
    seen = state.setdefault("first_seen", {})
    grace = float(state.get("grace", GRACE))
    progress: dict = {}
    found = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        i = owner(meta.get("name") or "", names)
        if i is None or specs[i].get("namespace") not in (None, meta.get("namespace")) or meta.get("deletionTimestamp"):
            continue
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        if phase in ("Succeeded", "Failed"):
            continue
        ready, total, phases = progress.get(i, (0, 0, {}))
        phases[phase] = phases.get(phase, 0) + 1
        progress[i] = (ready + _pod_ready(pod), total + 1, phases)
        found += [{**c, "spec": i} for c in pod_causes(pod)]
    for c in event_causes(events, state, now):
        i = owner(c["where"].rsplit("/", 1)[-1], names)
        if i is not None:
            found.append({**c, "spec": i})
    current = set()
    for c in found:
        key = (c["where"], c["reason"])
        current.add(key)
        if "age" not in c:  # an event's age is how long it kept recurring (event_causes)
            c["age"] = round(now - seen.setdefault(key, now), 1)
    for key in [k for k in seen if k not in current]:
        del seen[key]  # resolved: a cause seen again later starts its grace anew
    fatal = [c for c in found if c["at_once"] or c["age"] >= grace]
    return {"fatal": fatal, "causes": found, "progress": progress}


def passed_causes(specs: list[dict], state: dict, pending: list[int], now: float) -> list[dict]:
    """Event causes that passed (not recorded again for the grace period) for objects still waited for, latest
    first, each with ``ago``: seconds since it was last recorded. A timeout names one when no current cause is
    known: a failure recorded less often than the grace (the recorder's spam filter lets one Event of an object
    through every five minutes after a burst) is not a current cause, but it may still be why."""
    names = [s["name"] if s["kind"] in WORKLOAD_KINDS else "" for s in specs]
    out = []
    for cause, last in (state.get("passed") or {}).values():
        i = owner(cause["where"].rsplit("/", 1)[-1], names)
        if i is not None and i in pending:
            out.append({**cause, "spec": i, "ago": round(now - last, 1)})
    return sorted(out, key=lambda c: c["ago"])


def describe(cause: dict) -> str:
    text = f"{cause['where']}: {cause['reason']}"
    return text + (f": {cause['message']}" if cause["message"] else "")


def progress_lines(specs: list[dict], pending: list[int], diag: dict, ref) -> list[str]:
    """One line per waited workload still not ready: its pods ready of those that exist, by phase."""
    out = []
    for i in pending:
        if specs[i]["kind"] not in WORKLOAD_KINDS:
            continue
        ready, total, phases = diag["progress"].get(i, (0, 0, {}))
        shown = ", ".join(f"{n} {p}" for p, n in sorted(phases.items()))
        cause = next((c for c in diag["causes"] if c["spec"] == i), None)
        out.append(
            f"{ref(specs[i])}: {ready}/{total} pods ready"
            + (f" ({shown})" if shown else " (no pod yet)")
            + (f"; {describe(cause)}" if cause else "")
        )
    return out
