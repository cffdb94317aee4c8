# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine of inference.blueprints.k8s_wait (action plugin and module share it).

Every object still waiting is read concurrently on each poll, against one deadline. Polls
start 0.25 s apart and slow down (doubling) to the task's ``sleep``, so objects that are
ready at once cost one round trip. On timeout the message names every object still
waiting, the test it waited for and what it last saw.

A CustomResourceDefinition waited on for ``Established=True`` is first looked up in one live
aggregated discovery read (``GET /apis``) per poll: the apiextensions discovery controller lists
a CRD's resource only once the CRD is Established (k8s.io/apiextensions-apiserver v0.36,
pkg/apiserver/customresource_discovery_controller.go, ``sync``), so a listed resource is an
Established CRD. That read is a few KB where some CRDs are most of a megabyte (KServe's
LLMInferenceService CRD is ~740 KB of schema); a CRD not listed is read in full, so a timeout
still reports its conditions.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.inference.blueprints.plugins.module_utils import k8s_client as kc
from ansible_collections.inference.blueprints.plugins.module_utils import wait_causes

DEFAULT_SLEEP = 2.0  # the longest pause between polls (k8s_wait's ``sleep`` default; k8s_apply's wait_for)

# from_intent (k8s_apply and k8s_wait): a stage of the host's deployment intent gives the objects
# and waits; the action plugins resolve it on the controller, where the intent is
FROM_INTENT_SPEC = dict(
    type="dict",
    options=dict(
        stage=dict(type="str", required=True, choices=["platform", "serving"]),
        components=dict(type="list", elements="str"),
    ),
)
FROM_INTENT_ONLY = (
    "from_intent is resolved by the action plugin on the controller, where the deployment intent is; "
    "the module takes objects"
)

ARGUMENT_SPEC = dict(
    objects=dict(
        type="list",
        elements="dict",
        options=dict(
            apiVersion=dict(type="str", required=True),
            kind=dict(type="str", required=True),
            name=dict(type="str", required=True),
            namespace=dict(type="str"),
            condition=dict(type="str"),
            status=dict(type="str", default="True"),
            field=dict(type="str"),
            value=dict(type="raw"),
        ),
    ),
    timeout=dict(type="int", default=600),
    sleep=dict(type="float", default=DEFAULT_SLEEP),
    from_intent=FROM_INTENT_SPEC,
    **kc.AUTH_ARG_SPEC,
)
REQUIRED_ONE_OF = [("objects", "from_intent")]
MUTUALLY_EXCLUSIVE = [("objects", "from_intent")]

WORKERS = 8
FIRST_PAUSE = 0.25
# A kind that is not served yet (an operator still installing its CRDs) is looked up again
# with a fresh discovery at most this often.
REDISCOVER_AFTER = 10.0


def describe_test(spec):
    if spec.get("condition"):
        return f"condition {spec['condition']}={spec.get('status') or 'True'}"
    if spec.get("field"):
        want = spec.get("value")
        shown = " or ".join(repr(v) for v in want) if isinstance(want, list) else repr(want)
        return f"{spec['field']} == {shown}"
    return "built-in readiness of " + spec["kind"]


def builtin_ready(kind, obj):
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    if kind in ("Deployment", "StatefulSet"):
        want = spec.get("replicas", 1)
        have = status.get("availableReplicas" if kind == "Deployment" else "readyReplicas", 0) or 0
        current = status.get("observedGeneration", 0) >= obj["metadata"].get("generation", 0)
        return current and have >= want, f"{have}/{want} replicas ready"
    if kind == "DaemonSet":
        want = status.get("desiredNumberScheduled")
        have = status.get("numberReady", 0)
        return want is not None and have >= want, f"{have}/{want} pods ready"
    return True, "exists"


def evaluate(spec, obj):
    """Return (ready, what was seen) for one object."""
    if obj is None:
        return False, "the object does not exist"
    if spec.get("condition"):
        wanted = str(spec.get("status") or "True")
        conditions = kc.lookup(obj, "status.conditions") or []
        for cond in conditions:
            if cond.get("type") == spec["condition"]:
                seen = f"{cond['type']}={cond.get('status')}"
                if cond.get("reason"):
                    seen += f" reason={cond['reason']}"
                if cond.get("message"):
                    seen += f" message={cond['message']!r}"
                return str(cond.get("status")) == wanted, seen
        types = ", ".join(c.get("type", "?") for c in conditions) or "none"
        return False, f"no {spec['condition']} condition (conditions: {types})"
    if spec.get("field"):
        value = kc.lookup(obj, spec["field"])
        want = spec.get("value")
        ok = value in want if isinstance(want, list) else value == want
        return ok, f"{spec['field']}={value!r}"
    return builtin_ready(spec["kind"], obj)


def spec_ref(spec):
    return kc.ref(
        {
            "apiVersion": spec["apiVersion"],
            "kind": spec["kind"],
            "metadata": {"name": spec["name"], "namespace": spec.get("namespace")},
        }
    )


def timeout_message(timeout, specs, state, causes=(), passed=()):
    """``timed out after N s: <ref>: waited for <test>; last saw <seen>; ...`` (every object still waiting), led by
    the first cause its pods showed (``causes``: wait_causes.diagnose's), else by the one recorded last of those
    that passed (``passed``: wait_causes.passed_causes)."""
    lines = [
        f"{spec_ref(spec)}: waited for {describe_test(spec)}; last saw {state[i][1]}"
        for i, spec in enumerate(specs)
        if not state[i][0]
    ]
    first = next((c for c in causes if not state[c["spec"]][0]), None)
    earlier = next((c for c in passed if not state[c["spec"]][0]), None)
    if first:
        lead = f"first blocking cause: {wait_causes.describe(first)}; "
    elif earlier:
        lead = f"last recorded cause ({earlier['ago']:g} s before the timeout): {wait_causes.describe(earlier)}; "
    else:
        lead = ""
    return f"timed out after {timeout} s: {lead}" + "; ".join(lines)


def early_message(elapsed, timeout, specs, fatal):
    """The wait stopped before its deadline on causes that waiting does not resolve: each, and its object."""
    lines = []
    for c in fatal[:5]:
        why = "refused" if c["at_once"] else f"for {c['age']:g} s"
        lines.append(f"{wait_causes.describe(c)} ({why}; {spec_ref(specs[c['spec']])})")
    more = f"; and {len(fatal) - 5} more" if len(fatal) > 5 else ""
    return (
        f"stopped waiting after {elapsed:g} s of {timeout} s: " + "; ".join(lines) + more + ". Waiting longer does "
        "not resolve this: fix the cause named, then converge again"
    )


# Pods and events behind the waited workloads are read at most this often, and a progress line is shown this often
DIAGNOSE_EVERY = 5.0
PROGRESS_EVERY = 15.0
# A callable taking one line, set while an action plugin runs the wait on the controller (reporting()): the
# serving progress is shown during the wait. A module on a target has no live output: None.
PROGRESS = None


class reporting:  # noqa: N801 - used as a context manager, like a function
    """``with reporting(display_fn):`` the waits of the block show their progress lines through ``display_fn``."""

    def __init__(self, fn):
        self.fn = fn

    def __enter__(self):
        global PROGRESS
        self.saved, PROGRESS = PROGRESS, self.fn
        return self

    def __exit__(self, *exc):
        global PROGRESS
        PROGRESS = self.saved


def grace_of(env):
    """Seconds a cause that may still resolve is given (INFERENCE_BLUEPRINTS_WAIT_GRACE, default wait_causes.GRACE)."""
    try:
        return float((env or {}).get(GRACE_ENV) or wait_causes.GRACE)
    except ValueError:
        return wait_causes.GRACE


GRACE_ENV = "INFERENCE_BLUEPRINTS_WAIT_GRACE"


def read_pods(client, specs, pending):
    """The pods and Warning events of the namespaces of the pending workloads (an unreadable one is skipped)."""
    spaces = sorted(
        {specs[i].get("namespace") for i in pending if specs[i]["kind"] in wait_causes.WORKLOAD_KINDS} - {None}
    )
    pods, events = [], []
    for ns in spaces:
        try:
            pods += client.request("GET", f"/api/v1/namespaces/{ns}/pods").get("items") or []
            found = client.request("GET", f"/api/v1/namespaces/{ns}/events", query={"fieldSelector": "type=Warning"})
            events += found.get("items") or []
        except (kc.ApiError, kc.ClientError):
            continue
    return pods, events


def report(specs, state):
    return [
        {"ref": spec_ref(spec), "ready": state.get(i, (False,))[0], "seen": state.get(i, (False, "not checked"))[1]}
        for i, spec in enumerate(specs)
    ]


CRD_API_VERSION = "apiextensions.k8s.io/v1"


def established_by_discovery(spec):
    """(group, plural) for a wait on a CRD's ``Established=True``, else None."""
    if spec["kind"] != "CustomResourceDefinition" or spec["apiVersion"] != CRD_API_VERSION:
        return None
    if spec.get("condition") != "Established" or str(spec.get("status") or "True") != "True":
        return None
    plural, dot, group = spec["name"].partition(".")
    return (group, plural) if dot and group else None


def served_resources(client):
    """{(group, plural)} the server lists now in aggregated discovery; None when it has none."""
    try:
        doc = client.request("GET", "/apis", accept=kc.AGGREGATED_ACCEPT)
    except (kc.ApiError, kc.ClientError):
        return None
    if doc.get("kind") != "APIGroupDiscoveryList":
        return None
    resources, stale = kc.parse_aggregated(doc)[1:]
    served = set()
    for gv, kinds in resources.items():
        if gv in stale:
            continue
        group = gv.rpartition("/")[0]
        served.update((group, entry[0]) for entry in kinds.values())
    return served


def wait(client, specs, timeout, sleep, grace=wait_causes.GRACE):
    """Poll every object until all are ready or the deadline passes; return the task result. The pods behind
    waited workloads are read on the way (wait_causes): a cause that waiting does not resolve ends the wait
    early, naming the pod and the reason; progress lines go to PROGRESS."""
    start = time.monotonic()
    deadline = start + timeout
    state = {i: (False, "not checked") for i in range(len(specs))}
    watch = Diagnosis(client, specs, start, grace)
    by_discovery = {i: established_by_discovery(spec) for i, spec in enumerate(specs)}
    served = set()

    def check(i):
        spec = specs[i]
        if by_discovery[i] in served:
            state[i] = (True, "Established=True (its resource is served)")
            return None
        try:
            resource = client.resource(spec["apiVersion"], spec["kind"], refresh_after=REDISCOVER_AFTER)
        except kc.KindNotServed as exc:
            state[i] = (False, str(exc))
            return None
        remaining = max(1.0, deadline - time.monotonic())
        try:
            obj = client.get(resource, spec["name"], spec.get("namespace"), timeout=min(kc.REQUEST_TIMEOUT, remaining))
        except kc.ApiError as exc:
            return kc.explain(exc, "get", spec_ref(spec), resource, spec.get("namespace"))
        except kc.ClientError as exc:
            return str(exc)
        state[i] = evaluate(spec, obj)
        return None

    pause = min(FIRST_PAUSE, sleep)
    with ThreadPoolExecutor(max_workers=max(1, min(WORKERS, len(specs)))) as pool:
        while True:
            pending = [i for i in range(len(specs)) if not state[i][0]]
            if any(by_discovery[i] for i in pending):
                served = served_resources(client) or set()
            errors = [e for e in pool.map(check, pending) if e]
            elapsed = round(time.monotonic() - start, 1)
            if errors:
                return {"failed": True, "msg": "; ".join(errors), "objects": report(specs, state), "elapsed": elapsed}
            if all(state[i][0] for i in range(len(specs))):
                return {"changed": False, "objects": report(specs, state), "elapsed": elapsed}
            now = time.monotonic()
            fatal = watch.poll([i for i in range(len(specs)) if not state[i][0]], now, final=now >= deadline)
            if fatal:
                return {
                    "failed": True,
                    "msg": early_message(elapsed, timeout, specs, fatal),
                    "objects": report(specs, state),
                    "elapsed": elapsed,
                    "causes": [wait_causes.describe(c) for c in watch.causes],
                }
            if now >= deadline:
                return {
                    "failed": True,
                    "msg": timeout_message(timeout, specs, state, watch.causes, watch.passed(now)),
                    "objects": report(specs, state),
                    "elapsed": elapsed,
                    "causes": [wait_causes.describe(c) for c in watch.causes],
                }
            time.sleep(min(pause, deadline - now))
            pause = min(pause * 2, sleep)


class Diagnosis:
    """The pods behind a wait's workloads, read every DIAGNOSE_EVERY seconds (wait_causes.diagnose)."""

    def __init__(self, client, specs, start, grace):
        self.client, self.specs, self.start = client, specs, start
        self.state = {"grace": grace}
        self.causes, self.pending = [], []
        self.read_at, self.shown_at = None, start
        self.workloads = any(s["kind"] in wait_causes.WORKLOAD_KINDS for s in specs)

    def poll(self, pending, now, final=False):
        """The fatal causes (a list, empty while waiting may still help); shows a progress line now and then."""
        if not self.workloads or (not final and self.read_at is not None and now - self.read_at < DIAGNOSE_EVERY):
            return []
        self.read_at, self.pending = now, pending
        pods, events = read_pods(self.client, self.specs, pending)
        diag = wait_causes.diagnose(self.specs, pods, events, self.state, now)
        self.causes = [c for c in diag["causes"] if c["spec"] in pending]
        if PROGRESS is not None and now - self.shown_at >= PROGRESS_EVERY:
            self.shown_at = now
            for line in wait_causes.progress_lines(self.specs, pending, diag, spec_ref):
                PROGRESS(f"waiting {now - self.start:.0f} s: {line}")
        return [c for c in diag["fatal"] if c["spec"] in pending]

    def passed(self, now):
        """Event causes that passed, for the objects still waited for (wait_causes.passed_causes)."""
        return wait_causes.passed_causes(self.specs, self.state, self.pending, now)


def run(params, check_mode=False, diff=False, env=None):
    """The k8s_wait task: a result dict (``failed``/``msg`` on failure)."""
    del diff
    if params.get("from_intent"):
        return {"failed": True, "msg": FROM_INTENT_ONLY}
    if check_mode:
        return {"changed": False, "elapsed": 0.0, "objects": [], "msg": "check mode: nothing to wait for"}
    if not kc.HAS_KUBERNETES:
        return {"failed": True, "msg": f"k8s_wait needs the kubernetes Python package: {kc.KUBERNETES_IMPORT_ERROR}"}
    specs = params["objects"]
    if not specs:
        return {"changed": False, "elapsed": 0.0, "objects": []}
    try:
        client = kc.get_client(params, env)
        return wait(client, specs, params["timeout"], params["sleep"], grace_of(env))
    except kc.ClientError as exc:
        return {"failed": True, "msg": str(exc)}
