# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``from_intent`` of k8s_apply and k8s_wait: a stage's objects and readiness waits taken from the
cluster's deployment intent and applied (or waited for) in the same task.

A stage is then one task, not a render task whose result the next task applies: every task costs
an Ansible worker and the copy of its variables and result, which on a no-op re-run weighs more
than the requests themselves.

- ``stage: serving``: the serving components' objects, one apply, every wait at once (what the
  render task followed by the apply task did).
- ``stage: platform``: the two-phase platform flow of roles/deploy/tasks/platform.yml in one task:
  the operators in one apply and one wait; when operators were installed or were not seen
  installed at preflight, one new read of the cluster and the intent bound to the APIs they serve
  now (the new intent becomes the host's ``site_intents`` fact); the operands in one apply and one
  wait. In check mode both phases go in one dry run and nothing is waited for. When no preflight
  bound the intent to the cluster yet, the cluster is read and checked first, as preflight does.

The apply and the reads run through the same engines as k8s_apply and cluster_facts (in-process on
the controller, or as those modules when the host's connection is not local). The result has
k8s_apply's shape (``objects``, ``changed``, ``waited``, ``wait_elapsed``; ``diff`` with --diff),
so whatever reads k8s_apply results reads these too, plus ``phases`` (what each step did),
``notes`` and ``dropped`` for the platform stage.
"""

from __future__ import annotations

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.utils.display import Display
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_apply as apply_mod
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_client as kc
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_facts as facts_mod
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_wait as wait_mod
from ansible_collections.inference.blueprints.plugins.module_utils import ownership
from ansible_collections.inference.blueprints.plugins.module_utils.intent import platform as platform_mod
from ansible_collections.inference.blueprints.plugins.module_utils.intent import slo_gate
from ansible_collections.inference.blueprints.plugins.module_utils.intent import waits as waits_mod
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import SchemaError
from ansible_collections.inference.blueprints.plugins.plugin_utils import intents as intents_mod
from ansible_collections.inference.blueprints.plugins.plugin_utils import platform as render_platform
from ansible_collections.inference.blueprints.plugins.plugin_utils import render as render_mod

display = Display()

AUTH_KEYS = tuple(kc.AUTH_ARG_SPEC)


class StageError(Exception):
    """Bad input to from_intent, said before anything is applied."""


class _Engines:
    """k8s_apply, k8s_wait and cluster_facts for one task: in-process, or the modules (remote host)."""

    def __init__(self, action, task_vars: dict, env: dict, in_process: bool):
        self.action, self.task_vars, self.env, self.in_process = action, task_vars, env, in_process
        self.check = bool(action._task.check_mode)
        self.diff = bool(action._task.diff)

    def _run(self, module: str, spec: dict, run, params: dict, bulky: tuple = ()) -> dict:
        params = {k: v for k, v in params.items() if v is not None}
        if not self.in_process:
            return self.action._execute_module(module_name=module, module_args=params, task_vars=self.task_vars)
        # the validator deep-copies every value: the bulky lists (already mappings) go around it
        held = {k: params.pop(k) for k in bulky if k in params}
        checked = ArgumentSpecValidator(spec).validate(params)
        if checked.error_messages:
            raise StageError("; ".join(checked.error_messages))
        args = {**checked.validated_parameters, **held}
        return run(args, check_mode=self.check, diff=self.diff, env=self.env)

    def apply(self, params: dict) -> dict:
        return self._run(
            "inference.blueprints.k8s_apply",
            apply_mod.ARGUMENT_SPEC,
            apply_mod.run,
            params,
            ("objects", "wait_for", "claim_objects", "references"),
        )

    def wait(self, params: dict) -> dict:
        return self._run("inference.blueprints.k8s_wait", wait_mod.ARGUMENT_SPEC, wait_mod.run, params, ("objects",))

    def read(self, params: dict) -> dict:
        return self._run("inference.blueprints.cluster_facts", facts_mod.ARGUMENT_SPEC, facts_mod.run, params)


def _intent(action, task_vars: dict) -> dict:
    me = task_vars["inventory_hostname"]
    return intents_mod.get(task_vars, [me], variable_manager=action._task.get_variable_manager())[me]


def _roles(intent: dict, spec: dict) -> list[str]:
    return list(spec.get("components") or intent["stages"][spec["stage"]])


def _failure(error) -> dict:
    if isinstance(error, SchemaError):
        errors = [{"path": p, "msg": m} for p, m in error.errors]
        return {"failed": True, "msg": str(error), "errors": errors, **slo_gate.failure_fields(error)}
    return {"failed": True, "msg": f"from_intent: {error}"}


def run_apply(action, task_vars: dict, params: dict, env: dict, in_process: bool) -> dict:
    """k8s_apply with ``from_intent``: the stage's objects rendered from the intent, applied, waited for."""
    spec = params.pop("from_intent")
    for key in ("objects", "definition", "wait_for"):
        if params.get(key):
            return {
                "failed": True,
                "msg": f"from_intent and {key} are mutually exclusive: the intent gives the objects",
            }
    if params["state"] != "present" or params["delivery"] != "apply":
        return {
            "failed": True,
            "msg": "from_intent applies the intent's objects (state=present, delivery=apply); valid: leave state and "
            "delivery unset. The intent's own delivery decides render and GitOps (the render action), and "
            "playbooks/teardown.yml removes a site",
        }
    engines = _Engines(action, task_vars, env, in_process)
    try:
        intent = _intent(action, task_vars)
        if intent["site"]["delivery"] != "apply":
            return {"changed": False, "objects": [], "msg": f"delivery {intent['site']['delivery']}: nothing to apply"}
        if spec["stage"] == "platform":
            return _platform(engines, intent, spec, params, task_vars["inventory_hostname"])
        roles = _roles(intent, spec)
        objects = render_mod.render_components(roles, intent)
        waits = waits_mod.for_components(intent, roles)
        if not objects and not waits:
            return {"changed": False, "objects": []}
        return engines.apply(
            {
                **params,
                "objects": objects,
                "wait_for": waits_mod.specs(waits),
                "wait_timeout": waits_mod.timeout_of(waits),
                "ownership": ownership.of_intent(intent),
                "references": waits_mod.references(intent, roles),
                # the whole stage: what an earlier converge applied and this one no longer renders is pruned
                "record": None if spec.get("components") else serving_record(intent),
            }
        )
    except (SchemaError, render_mod.RenderError, StageError) as e:
        return _failure(e)


def serving_record(intent: dict) -> dict:
    """Where the serving stage records what it applied (module_utils/applied_record.py)."""
    return {"stage": "serving", "namespace": intent["serving"]["namespace"]}


def run_wait(action, task_vars: dict, params: dict, env: dict, in_process: bool) -> dict:
    """k8s_wait with ``from_intent``: everything the stage's objects are waited for, at once."""
    spec = params.pop("from_intent")
    if params.get("objects"):
        return {"failed": True, "msg": "from_intent and objects are mutually exclusive: the intent gives the waits"}
    try:
        intent = _intent(action, task_vars)
        waits = waits_mod.for_components(intent, _roles(intent, spec))
        if not waits or action._task.check_mode:
            return {"changed": False, "objects": [], "msg": "nothing to wait for"}
        return _Engines(action, task_vars, env, in_process).wait({**params, "objects": waits_mod.specs(waits)})
    except (SchemaError, StageError) as e:
        return _failure(e)


def _auth(params: dict) -> dict:
    return {k: params.get(k) for k in AUTH_KEYS}


def _preflight(engines: _Engines, intent: dict, params: dict, checks: bool = True) -> tuple[dict, dict]:
    """Read the cluster (or the inventory stand-in) for what the intent needs, check the site's
    requirements, bind the intent to the read: (the cluster_facts result, the intent)."""
    pre = intent["platform"]["preflight"]
    read = engines.read(
        {
            **_auth(params),
            "source": pre["source"],
            "hardware": intent["hardware"],
            "openshift_version": pre["openshift_version"] or None,
            "packages": pre["packages"],
            "requirements": intent["platform"]["requirements"] if checks else {},
            "fail_on_unmet": intent["options"]["preflight"]["preflight_fail_on_unmet"] and checks,
        }
    )
    # render/gitops delivery reads no cluster: the intent stays bound to the newest APIs and the inventory
    if not read.get("failed") and read["cluster_facts"]["source"] == "cluster":
        intent = platform_mod.bind(intent, read["cluster_facts"], dry_run=engines.check)
    return read, intent


def run_read(action, task_vars: dict, params: dict, env: dict, in_process: bool) -> dict:
    """cluster_facts with ``from_intent``: the preflight of the host's intent (read, check, bind) in one task."""
    spec = params.pop("from_intent")
    me = task_vars["inventory_hostname"]
    try:
        intent = _intent(action, task_vars)
        read, intent = _preflight(_Engines(action, task_vars, env, in_process), intent, params, spec["checks"])
    except (SchemaError, StageError) as e:
        return _failure(e)
    if read.get("failed"):
        return read
    return {
        **read,
        # only this host's entry (every reader takes a host's intent from that host's facts)
        "ansible_facts": {"site_intents": {me: intent}},
        "platform": platform_mod.summary(intent["platform"]),
        # the hosts meant to share this cluster: preflight's check that no two hosts reach one cluster reads it
        "same_cluster_as": intent["site"]["same_cluster_as"],
    }


def _merge(steps: list[dict]) -> dict:
    """One k8s_apply-shaped result from the applies of several steps (in order)."""
    out = {"changed": False, "objects": []}
    for step in steps:
        out["changed"] |= bool(step.get("changed"))
        out["objects"].extend(step.get("objects") or [])
        if "waited" in step:
            out.setdefault("waited", []).extend(step["waited"])
            out["wait_elapsed"] = round(out.get("wait_elapsed", 0.0) + float(step.get("wait_elapsed") or 0), 3)
        if "diff" in step:
            out.setdefault("diff", []).extend(step["diff"] if isinstance(step["diff"], list) else [step["diff"]])
        if step.get("failed"):
            out.update(failed=True, msg=step.get("msg", "failed"))
            break
    return out


def _platform(engines: _Engines, intent: dict, spec: dict, params: dict, me: str) -> dict:
    comps = spec.get("components")
    phases: dict = {}
    rebound = False
    if intent["platform"]["cluster"]["source"] is None:
        read, intent = _preflight(engines, intent, params)
        if read.get("failed"):
            return read
        rebound = intent["platform"]["cluster"]["source"] is not None
        phases["preflight"] = {"source": intent["platform"]["cluster"]["source"]}

    ops = render_platform.render_phase(intent, "operators", comps, "present")
    pending = [c for c in intent["platform"]["operators_pending"] if c in ops["components"]]
    steps = []
    if not engines.check and (ops["objects"] or ops["waits"]):
        later = render_platform.render_phase(intent, "operands", comps, "present")
        first = engines.apply(
            {
                **params,
                "objects": ops["objects"],
                "wait_for": waits_mod.specs(ops["waits"]),
                "wait_timeout": waits_mod.timeout_of(ops["waits"], ops["timeout"]),
                "ownership": render_platform.policy(ops, later),
                # the operands (as far as they can be rendered now) and the serving objects: one the site may not
                # take over (a namespace of the user's), or a shared one another site set otherwise, stops the site
                # before its operators are written
                "claim_objects": later["objects"] + render_mod.render_components(intent["stages"]["serving"], intent),
            }
        )
        steps.append(first)
        phases["operators"] = {"objects": len(ops["objects"]), "changed": bool(first.get("changed"))}
        if first.get("failed"):
            return {**_merge(steps), "phases": phases}
        if first.get("changed") or pending:
            # operators were installed (or preflight did not see them): the APIs they serve now, and the engine
            # of OpenShift AI's presets, which preflight could not read before its CSV existed
            engine = intent["platform"]["requirements"].get("engine")
            read = engines.read(
                {
                    **_auth(params),
                    "packages": intent["platform"]["preflight"]["packages"],
                    "requirements": {"engine": engine} if engine else {},
                    "fail_on_unmet": bool(engine) and intent["options"]["preflight"]["preflight_fail_on_unmet"],
                }
            )
            if read.get("failed"):
                msg = read.get("msg")
                if read.get("unmet"):  # what preflight could not see before the operators ran
                    lines = "\n".join(f"  - {u}" for u in read["unmet"])
                    msg = (
                        f"platform: the operators above are installed; read again, the cluster has "
                        f"{len(read['unmet'])} requirement(s) not met, so no operand and no serving object was "
                        f"applied:\n{lines}"
                    )
                return {**_merge(steps), "failed": True, "msg": msg, "phases": phases}
            intent = platform_mod.bind(intent, read["cluster_facts"], operators_ready=True, dry_run=engines.check)
            rebound = True
            phases["reread"] = {"pending": pending}

    opd = render_platform.render_phase(intent, "operands", comps, "present")
    notes = intent["platform"]["notes"]
    lines = list(notes) + (
        ["not applied, the cluster does not serve their API: " + "; ".join(d["message"] for d in opd["dropped"])]
        if opd["dropped"]
        else []
    )
    for line in lines:
        display.display(f"{me}: {line}")
    objects = (ops["objects"] if engines.check else []) + opd["objects"]
    if objects or opd["waits"]:
        second = engines.apply(
            {
                **params,
                "objects": objects,
                "wait_for": waits_mod.specs(opd["waits"]),
                "wait_timeout": waits_mod.timeout_of(opd["waits"], opd["timeout"]),
                "ownership": render_platform.policy(ops, opd) if engines.check else opd["ownership"],
            }
        )
        steps.append(second)
        phases["operands"] = {"objects": len(objects), "changed": bool(second.get("changed"))}
    out = {
        **_merge(steps),
        "phases": phases,
        "notes": notes,
        "dropped": opd["dropped"],
        "components": opd["components"],
    }
    if rebound:
        # only this host's entry (every reader takes a host's intent from that host's facts)
        out["ansible_facts"] = {"site_intents": {me: intent}}
    return out
