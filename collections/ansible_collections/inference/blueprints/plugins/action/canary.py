# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for inference.blueprints.canary: change one pool at a time, benchmark it against the
baseline, promote it or roll it back to the exact previous object (docs/verify.md, "Canary")."""

from __future__ import annotations

import os
import time

from ansible_collections.inference.blueprints.plugins.module_utils import k8s_client as kc
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import SchemaError
from ansible_collections.inference.blueprints.plugins.module_utils.slo import canary as rules
from ansible_collections.inference.blueprints.plugins.plugin_utils import intents as intents_mod
from ansible_collections.inference.blueprints.plugins.plugin_utils.slo import bench

ARGUMENT_SPEC = {
    "endpoints": {"type": "dict", "required": True},
    "kubeconfig": {"type": "raw"},
    "context": {"type": "str"},
    "wait": {"type": "bool"},
    "report_dir": {"type": "path"},
}
KIND = "LLMInferenceService"
API_VERSIONS = ("serving.kserve.io/v1alpha2", "serving.kserve.io/v1alpha1")
FIELD_MANAGER = "inference-blueprints-canary"


class CanaryError(RuntimeError):
    pass


class Cluster:
    """The LLMInferenceServices of one namespace: read, replace, wait for a rollout."""

    def __init__(self, client, namespace: str, api_version: str):
        self.client, self.namespace = client, namespace
        versions = API_VERSIONS if api_version == "auto" else (f"serving.kserve.io/{api_version}",)
        self.resource = None
        for version in versions:
            try:
                self.resource = client.resource(version, KIND)
                break
            except kc.KindNotServed:
                continue
        if self.resource is None:
            raise CanaryError(f"the cluster serves no {KIND} ({', '.join(versions)})")

    def get(self, name: str) -> dict:
        obj = self.client.get(self.resource, name, self.namespace)
        if obj is None:
            raise CanaryError(f"{KIND} {self.namespace}/{name} does not exist: converge the site first")
        return obj

    def replace(self, obj: dict) -> dict:
        """PUT ``obj``'s spec and metadata over the live object (the exact object, not a merge)."""
        live = self.get(obj["metadata"]["name"])
        body = rules.restorable(obj)
        body["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
        path = kc.resource_path(self.resource, obj["metadata"]["name"], self.namespace)
        return self.client.request("PUT", path, query={"fieldManager": FIELD_MANAGER}, body=body)

    def wait_ready(self, name: str, generation: int, timeout: float) -> dict:
        """Until KServe has seen ``generation`` (status.observedGeneration) and says Ready."""
        deadline = time.monotonic() + timeout
        last = {}
        while time.monotonic() < deadline:
            last = self.get(name)
            status = last.get("status") or {}
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
            if ready and int(status.get("observedGeneration") or 0) >= generation:
                return last
            time.sleep(1.0)
        conds = [
            (c.get("type"), c.get("status"), c.get("reason"))
            for c in (last.get("status") or {}).get("conditions") or []
        ]
        raise CanaryError(
            f"{KIND} {self.namespace}/{name} generation {generation} not Ready in {timeout:g} s "
            f"(observedGeneration {(last.get('status') or {}).get('observedGeneration')}, conditions {conds})"
        )


def run_model(cluster: Cluster, intent: dict, name: str, endpoints, wait: bool) -> dict:
    """Baseline, then each step: change, (wait), benchmark, gates, promote or roll back."""
    opts = intent["verify"]
    can, bench_opts = opts["canary"], opts["benchmark"]
    live = cluster.get(name)
    original = rules.restorable(live)
    baseline = bench.run_model(intent, name, endpoints, bench_opts)
    out = {"model": name, "baseline": baseline, "steps": [], "result": "promoted"}
    for step in rules.steps(live, can):
        before = cluster.get(name)
        changed = cluster.replace(rules.apply_step(before, step))
        if wait:
            cluster.wait_ready(name, int(changed["metadata"]["generation"]), can["ready_timeout"])
        after = bench.run_model(intent, name, endpoints, bench_opts)
        tripped = rules.gates(baseline, after, can)
        record = {"pool": step["role"], "change": step["what"], "after": after, "tripped": tripped}
        if not tripped:
            record["result"] = "promoted"
            out["steps"].append(record)
            continue
        restored = cluster.replace(before)
        if wait:
            cluster.wait_ready(name, int(restored["metadata"]["generation"]), can["ready_timeout"])
        record["result"] = "rolled back"
        record["identical"] = rules.same(cluster.get(name), before)
        out["steps"].append(record)
        out["result"] = f"rolled back at {step['role']}"
        break
    out["original"] = original
    return out


def _row(run: dict, q: str) -> str:
    ttft = run["ttft"][q] if run.get("ttft") else None
    tpot = run["tpot"][q] if run.get("tpot") else None
    shown = [f"{v} ms" if v is not None else "-" for v in (ttft, tpot)]
    return f"{run['pool']}: TTFT {q} {shown[0]}, TPOT {q} {shown[1]}"


def markdown(results: list[dict], can: dict) -> str:
    q = can["percentile"]
    gates = f"TTFT +{can['ttft_regression_pct']:g} %, TPOT +{can['tpot_regression_pct']:g} %"
    lines = ["# Canary", "", f"Gates at {q}: {gates}, error rate <= {can['max_error_rate']:.1%}.", ""]
    for r in results:
        lines += [
            f"## {r['model']}: {r['result']}",
            "",
            "Baseline: " + "; ".join(_row(x, q) for x in r["baseline"]["runs"]),
            "",
        ]
        for s in r["steps"]:
            lines.append(
                f"- **{s['pool']}** ({s['change']}): {s['result']}; "
                + "; ".join(_row(x, q) for x in s["after"]["runs"])
            )
            for t in s["tripped"]:
                lines.append(f"  - gate tripped: {t['msg']}")
            if "identical" in s:
                lines.append(f"  - restored object identical to before: {s['identical']}")
        lines.append("")
    return "\n".join(lines) + "\n"


class ActionModule(intents_mod.IntentAction):
    _supports_check_mode = False  # a canary changes objects and benchmarks them: nothing to preview
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = self._args()
        task_vars = task_vars or {}
        host = task_vars["inventory_hostname"]
        try:
            intent = self._intents(task_vars, [host])[host]
        except SchemaError as e:
            return self._schema_failure(result, e)
        can = intent["verify"]["canary"]
        if not (can.get("image") or can.get("engine_args") or can.get("model_uri")):
            result.update(
                failed=True, msg="canary: nothing to change; set canary.image, canary.engine_args or canary.model_uri"
            )
            return result
        ms = intent["options"]["model_service"]
        wait = ms["model_service_wait"] if args["wait"] is None else args["wait"]
        names = can.get("models") or [m["name"] for m in intent["serving"]["models"]]
        unknown = sorted(set(names) - {m["name"] for m in intent["serving"]["models"]})
        missing = [n for n in names if n not in args["endpoints"]]
        if unknown or missing:
            result.update(failed=True, msg=f"canary: unknown models {unknown}" if unknown else
                          f"canary: no endpoints for {', '.join(missing)} (canary_endpoints)")  # fmt: skip
            return result
        env = dict(os.environ)
        try:
            client = kc.get_client({"kubeconfig": args["kubeconfig"], "context": args["context"]}, env)
            cluster = Cluster(client, intent["serving"]["namespace"], ms["model_service_api_version"])
            results = [run_model(cluster, intent, n, args["endpoints"][n], wait) for n in names]
        except (CanaryError, bench.BenchmarkError, kc.ClientError, ValueError) as e:
            result.update(failed=True, msg=f"canary: {e}")
            return result
        finally:
            kc.release()
        directory = args["report_dir"] or os.path.join(intent["site"]["report_dir"], "canary", host)
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, "canary.md")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(markdown(results, can))
        summary = []
        for r in results:
            steps = [
                {k: v for k, v in s.items() if k != "after"}
                | {"after": [{k: x[k] for k in ("pool", "ttft", "tpot", "error_rate")} for x in s["after"]["runs"]]}
                for s in r["steps"]
            ]
            base = [{k: x[k] for k in ("pool", "ttft", "tpot", "error_rate")} for x in r["baseline"]["runs"]]
            summary.append({"model": r["model"], "result": r["result"], "baseline": base, "steps": steps})
        tripped = [t for r in results for s in r["steps"] for t in s["tripped"]]
        result.update(changed=any(s["result"] == "promoted" for r in results for s in r["steps"]), models=summary,
                      tripped=tripped, report=path)  # fmt: skip
        if tripped:
            result["failed"] = True
            result["msg"] = "canary rolled back: " + "; ".join(t["msg"] for t in tripped) + f" (report: {path})"
        else:
            result["msg"] = "canary promoted: " + "; ".join(
                f"{r['model']} ({len(r['steps'])} step(s))" for r in results
            )
        return result
