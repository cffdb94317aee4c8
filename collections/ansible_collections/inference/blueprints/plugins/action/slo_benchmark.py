# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for inference.blueprints.slo_benchmark: guidellm against each model's endpoints, the
report, the SLO verdict and the calibration written into the inventory (docs/verify.md)."""

from __future__ import annotations

import os

from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import SchemaError
from ansible_collections.inference.blueprints.plugins.module_utils.slo import calib, inside, report
from ansible_collections.inference.blueprints.plugins.module_utils.slo import spec as slo_spec
from ansible_collections.inference.blueprints.plugins.plugin_utils import intents as intents_mod
from ansible_collections.inference.blueprints.plugins.plugin_utils.slo import bench

ARGUMENT_SPEC = {
    "endpoints": {"type": "dict", "default": {}},
    "enforce": {"type": "bool", "default": True},
    "report_dir": {"type": "path"},
    "calibrate": {"type": "bool", "default": True},
    "inventory_dir": {"type": "path"},
    # measuring nothing fails the task (verify.yml asked for a measurement); the probes say how to measure instead
    "require": {"type": "bool", "default": False},
    "probes": {"type": "list", "elements": "dict", "default": []},
}


def model_benchmarks(intent: dict, endpoints: dict) -> tuple[list[dict], list[str]]:
    """Run every model that has endpoints; (results, names of models without any)."""
    bench_opts = intent["verify"]["benchmark"]
    results, skipped = [], []
    for served in intent["serving"]["models"]:
        eps = endpoints.get(served["name"])
        if not eps:
            skipped.append(served["name"])
            continue
        results.append(bench.run_model(intent, served["name"], eps, bench_opts))
    return results, skipped


class ActionModule(intents_mod.IntentAction):
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
        result["changed"] = False
        if self._task.check_mode:
            result.update(skipped=True, msg="check mode: no load is sent")
            return result
        try:
            models, skipped = model_benchmarks(intent, args["endpoints"] or {})
        except (bench.BenchmarkError, ValueError) as e:
            result.update(failed=True, msg=f"inference.blueprints.slo_benchmark: {e}")
            return result
        result["not_benchmarked"] = skipped
        if not models:
            return self._nothing_measured(result, intent, args, skipped)
        directory = args["report_dir"] or os.path.join(intent["site"]["report_dir"], "slo", host)
        # the engine each model's endpoint runs: its version against the plan's, and the calibration's KV blocks
        engines = {m["model"]: bench.engine_facts(m["runs"][0]["endpoints"][0]) for m in models}
        warnings = [
            w
            for m in models
            for w in [
                calib.engine_mismatch(
                    m["model"], slo_spec.model_entry(intent, m["model"])[1], engines[m["model"]]["version"]
                )
            ]  # fmt: skip
            if w
        ]
        cal = None
        if args["calibrate"]:
            inventory_dir = args["inventory_dir"] or task_vars.get("inventory_dir")
            cal = self._calibrate(intent, host, models, inventory_dir, task_vars, engines=engines)
            result["changed"] = bool(cal and cal.get("entries"))
            warnings += [
                f"the calibration written to {cal['file']} leaves no plan for this cluster: {row['error']} (measure "
                "again, or edit or remove the entry, before the next run)"
                for row in (cal or {}).get("before_after", [])
                if "error" in row
            ]
        meta = {"cluster": host, "site": intent["site"]["name"], "enforce": args["enforce"]}
        written = report.write(directory, meta, models, cal)
        doc = written["document"]
        findings = [f for m in doc["models"] for f in m["findings"]]
        result.update(
            report=written["markdown"],
            report_json=written["json"],
            charts=written["charts"],
            models={
                m["model"]: {"figures": m["figures"], "goodput": m["goodput"], "findings": m["findings"]}
                for m in doc["models"]
            },
            findings=findings,
            calibration=cal,
            passed=doc["passed"],
        )
        if findings:
            lines = "; ".join(f["msg"] for f in findings)
            result["msg"] = f"SLO missed: {lines} (report: {written['markdown']})"
            if args["enforce"]:
                result["failed"] = True
            else:
                result["warnings"] = [result["msg"] + " (not enforced: verify_slo_enforce=false)"]
        else:
            result["msg"] = f"{len(models)} model(s) within their SLOs (report: {written['markdown']})"
        if warnings:  # Ansible prints each as a warning
            result["warnings"] = [*result.get("warnings", []), *warnings]
        return result

    @staticmethod
    def _nothing_measured(result: dict, intent: dict, args: dict, skipped: list[str]) -> dict:
        """No endpoint was reachable: say how to measure each model; fail when a measurement was asked for."""
        how = inside.hints(args["probes"], intent["serving"]["namespace"], skipped)
        msg = f"no endpoint reachable from here for {', '.join(skipped)}: nothing measured"
        result.update(how_to_measure=how, nothing_measured=True)
        if args["require"]:
            result.update(
                failed=True,
                msg=f"{msg}. How to measure it (from inside the cluster, or through a port-forward): "
                + "; ".join(how)
                + " (or -e verify_slo_require=false to verify readiness only)",
            )
        else:
            result.update(skipped=True, msg=f"{msg}; to measure: " + "; ".join(how))
        return result

    def _calibrate(  # noqa: PLR0913 - the run's pieces, each read once
        self, intent: dict, host: str, models: list[dict], inventory_dir: str | None, task_vars: dict, *, engines: dict
    ):
        """Measured figures into host_vars/<cluster>/calibration.yml, and the plan before and after."""
        if not inventory_dir:
            return None
        site = f"{intent['site']['name']}/{host}"
        new, kv = [], {}
        for m in models:
            served, plan = slo_spec.model_entry(intent, m["model"])
            facts = engines[m["model"]]
            stats = {r["pool"]: r for r in m["runs"]}
            requests = sum(r["completed"] for r in m["runs"])
            origin = {**facts, "source": f"verify run {site}, {requests} requests"}
            entries = calib.entries(served["model_id"], plan, slo_spec.pools_of(served), stats, origin)
            new += entries
            if facts["kv_blocks"] is not None:
                for e in entries:
                    kv[e["model"] + "/" + e["gpu"]] = facts["kv_blocks"]
        if not new:
            return None
        out = calib.write(inventory_dir, host, new)
        out["kv_blocks"] = kv
        out["before_after"] = self._before_after(intent, host, out["all_entries"], task_vars)
        return out

    def _before_after(self, intent: dict, host: str, entries: list[dict], task_vars: dict) -> list[dict]:
        from ansible.module_utils.common.text.converters import to_text
        from ansible_collections.inference.blueprints.plugins.module_utils.intent import build

        hv = task_vars["hostvars"][host]
        names = [to_text(n) for n in hv]
        values = {n: hv[n] for n in names if n in build.variable_names()}
        values["calibration"] = entries
        values["inventory_dir"] = hv.get("inventory_dir")  # where a model's config.json path is relative to
        ignore = intents_mod.ansible_names()
        ignore |= intents_mod.runtime_names(self._task.get_variable_manager(), host)
        try:
            after = build.site_intent(host, values, names, intents_mod.blueprint_dirs(task_vars), ignore=ignore)
        except SchemaError as e:
            return [{"model": "-", "error": str(e)}]
        rows = []
        for before_p, after_p in zip(intent["plans"], after["plans"], strict=False):
            rows.append(
                {
                    "model": before_p["model"]["name"],
                    "before": bench.plan_row(before_p["plan"]),
                    "after": bench.plan_row(after_p["plan"]),
                    "why": [
                        d["why"]
                        for d in after_p["plan"].get("decisions", [])
                        if "calibrated from measurements" in d["why"]
                    ],
                }
            )
        return rows
