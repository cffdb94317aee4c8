# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""The ``blueprints`` command.

    blueprints plan --model Qwen3.6-27B --gpu rtx-pro-6000 [--weights fp8 --kv-dtype fp8 ...] [--format json|yaml|md]
    blueprints plan --site inventories/example-chat [--blueprints-dir blueprints] [--report reports/chat]
    blueprints converge --site inventories/example-chat [--stage serving] [-e VAR=VALUE] [--json]

Errors exit with status 2 and one line naming the option or inventory variable.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ansible_collections.inference.blueprints.plugins.module_utils import inventory_files
from ansible_collections.inference.blueprints.plugins.module_utils.intent import blueprint as bp_mod
from ansible_collections.inference.blueprints.plugins.module_utils.intent import build, gitops, schema, summary
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import SchemaError
from ansible_collections.inference.blueprints.plugins.module_utils.planner import PlanError, hf_config, plan
from ansible_collections.inference.blueprints.plugins.module_utils.planner import report as report_mod

# planner input field -> CLI option (for error messages in explicit mode)
OPTION_NAMES = {
    "model": "--model",
    "model_architecture": "--architecture",
    "model_quantization": "--quantization",
    "quantization": "--quantization",
    "artifact": "--artifact",
    "gpu": "--gpu",
    "gpus_per_node": "--gpus-per-node",
    "nodes": "--nodes",
    "interconnect": "--interconnect",
    "decode_gpu": "--decode-gpu",
    "decode_gpus_per_node": "--decode-gpus-per-node",
    "decode_nodes": "--decode-nodes",
    "weights": "--weights",
    "kv_cache_dtype": "--kv-dtype",
    "max_model_len": "--max-model-len",
    "contexts": "--context",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "kv_cache_memory_bytes": "--kv-cache-memory-bytes",
    "vllm_version": "--vllm-version",
    "blueprint": "--blueprint",
    "traffic.arrival_rate_rps": "--arrival-rate",
    "slo.ttft_p95_ms": "--ttft-p95-ms",
    "slo.tpot_p95_ms": "--tpot-p95-ms",
}
TRAFFIC_OPTS = (
    "prompt_tokens_mean",
    "prompt_tokens_p95",
    "output_tokens_mean",
    "output_tokens_p95",
    "concurrent_sessions",
)


# Variables Ansible defines for every host (never site variables; see the site action plugin).
MAGIC_VARS = frozenset(
    (
        "hostvars",
        "groups",
        "group_names",
        "inventory_hostname",
        "inventory_hostname_short",
        "inventory_dir",
        "inventory_file",
        "playbook_dir",
        "play_hosts",
        "role_names",
        "omit",
        "environment",
        "vars",
    )
)


class CliError(Exception):
    """One-line user error (exit status 2)."""


def _option(field: str) -> str:
    if field in OPTION_NAMES:
        return OPTION_NAMES[field]
    if field.startswith("model_architecture."):
        return "--architecture " + field.split(".", 1)[1]
    if field.startswith("traffic."):
        return "--" + field.split(".", 1)[1].replace("_", "-")
    if field.startswith("policy."):
        return f"--policy {field.split('.', 1)[1]}"
    return field


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="blueprints", description="inference.blueprints tools")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "plan",
        help="size a vLLM deployment (layout, memory, KV capacity, pools, engine arguments)",
        description="Plan one model on explicit hardware, or every (cluster, model) pair of a site inventory.",
    )
    src = p.add_argument_group("source")
    src.add_argument(
        "--site", metavar="INVENTORY_DIR", help="site inventory directory (hosts are clusters, docs/contracts.md)"
    )
    src.add_argument(
        "--blueprints-dir", metavar="DIR", help="directory with <blueprint>.yml (default: searched upward)"
    )
    src.add_argument(
        "-e",
        "--extra-vars",
        action="append",
        default=[],
        metavar="VARS",
        help="with --site: variables that win over the inventory, as for ansible-playbook (KEY=VALUE, YAML, @FILE)",
    )
    ex = p.add_argument_group("explicit inputs")
    ex.add_argument("--model", help="model catalog id, e.g. Qwen3.6-27B")
    ex.add_argument(
        "--architecture",
        metavar="FILE",
        help="the model's Hugging Face config.json (or a YAML file with the catalog's architecture fields)",
    )
    ex.add_argument(
        "--quantization",
        choices=tuple(hf_config.QUANTIZATIONS),
        help="the checkpoint's precision when its config.json has no quantization_config",
    )
    ex.add_argument("--artifact", metavar="URI", help="what vLLM loads (hf://org/name, pvc://, oci://)")
    ex.add_argument("--name", help="Kubernetes name of the model service")
    ex.add_argument(
        "--blueprint", default=None, help="take policy, traffic and SLO defaults from blueprints/<BLUEPRINT>.yml"
    )
    ex.add_argument("--gpu", help="GPU catalog id: h100, h200, b200, a100-80gb, l40s, mi300x, rtx-pro-6000")
    ex.add_argument("--gpus-per-node", type=int, default=None)
    ex.add_argument("--nodes", type=int, default=None)
    ex.add_argument("--interconnect", choices=("nvlink", "rdma", "ethernet"))
    ex.add_argument("--decode-gpu")
    ex.add_argument("--decode-gpus-per-node", type=int)
    ex.add_argument("--decode-nodes", type=int)
    ex.add_argument("--weights", help="bf16 | fp8 | fp4 (nvfp4) | auto")
    ex.add_argument("--kv-dtype", help="auto | bf16 | fp8 | nvfp4 (default: planner decides)")
    ex.add_argument("--max-model-len", type=int)
    ex.add_argument("--context", type=int, action="append", help="context length for the capacity table (repeatable)")
    ex.add_argument("--gpu-memory-utilization", type=float)
    ex.add_argument("--kv-cache-memory-bytes", type=int)
    ex.add_argument("--vllm-version")
    for t in TRAFFIC_OPTS:
        ex.add_argument("--" + t.replace("_", "-"), type=int, dest=t)
    ex.add_argument("--arrival-rate", type=float, dest="arrival_rate_rps", help="requests per second")
    ex.add_argument("--ttft-p95-ms", type=float)
    ex.add_argument("--tpot-p95-ms", type=float)
    ex.add_argument(
        "--policy", action="append", metavar="KEY=VALUE", default=[], help="policy override (repeatable; YAML value)"
    )
    out = p.add_argument_group("output")
    out.add_argument("--format", choices=("json", "yaml", "md"), default="json")
    out.add_argument("--report", metavar="DIR", help="also write a Markdown report with SVG charts into DIR")
    from ansible_collections.inference.blueprints.plugins.plugin_utils import converge  # stdlib-only at import

    converge.add_parser(sub)
    return ap


def _yaml():
    import yaml  # lazy

    return yaml


def _load_yaml(source, what: str, valid: str = "a YAML (or JSON) mapping"):
    """YAML from a text or an open file; a syntax error becomes one line naming ``what``, the line and the problem."""
    yaml = _yaml()
    try:
        return yaml.safe_load(source)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise CliError(f"{what}: not valid YAML{where}: {problem}; valid: {valid}") from None


def find_blueprints_dir(start: str, explicit: str | None) -> str | None:
    if explicit:
        if not os.path.isdir(explicit):
            raise CliError(f"--blueprints-dir: {explicit} is not a directory")
        return explicit
    d = os.path.abspath(start)
    while True:
        cand = os.path.join(d, "blueprints")
        if os.path.isdir(cand) and any(f.endswith(".yml") for f in os.listdir(cand)):
            return cand
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def load_blueprint(blueprint: str, bdir: str | None) -> dict:
    """The validated blueprint file (its policy and defaults), the same loader the playbooks use."""
    try:
        return bp_mod.load(blueprint, bdir)
    except SchemaError as e:
        raise CliError(f"--blueprint: {e}") from None


def _parse_policy(items: list[str]) -> dict:
    out = {}
    for it in items:
        if "=" not in it:
            raise CliError(f"--policy: expected KEY=VALUE, got {it!r}")
        k, v = it.split("=", 1)
        out[k.strip()] = _load_yaml(v, f"--policy {k.strip()}", "a YAML value (quote text)")
    return out


def _architecture_file(path: str):
    """An --architecture file: a Hugging Face config.json (JSON is YAML) or the catalog's fields as YAML."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as e:
        raise CliError(f"--architecture: cannot read {path}: {e.strerror}") from None
    try:
        return json.loads(text)  # YAML 1.1 would read a config.json's 1e-05 as text
    except ValueError:
        return _load_yaml(text, f"--architecture {path}")


def explicit_inputs(a: argparse.Namespace) -> dict:
    if not a.model and not a.architecture:
        raise CliError("--model: required (a catalog id such as Qwen3.6-27B) unless --site or --architecture is given")
    if not a.gpu:
        raise CliError("--gpu: required (h100, h200, b200, a100-80gb, l40s, mi300x, rtx-pro-6000)")
    policy, source, example = {}, "planner defaults (policies.yaml common)", {}
    if a.blueprint:
        bp = load_blueprint(a.blueprint, find_blueprints_dir(os.getcwd(), a.blueprints_dir))
        policy, source = dict(bp["policy"]), bp["path"]
        example = {k: bp["defaults"][k] for k in ("traffic", "slo") if bp["defaults"].get(k)}
    policy.update(_parse_policy(a.policy))
    inp = {
        "model": a.model,
        "gpu": a.gpu,
        "blueprint": a.blueprint or "custom",
        "policy": policy,
        "policy_source": source,
    }
    if a.architecture:
        inp["model_architecture"] = _architecture_file(a.architecture)
    for k in (
        "name",
        "gpus_per_node",
        "nodes",
        "interconnect",
        "decode_gpu",
        "decode_gpus_per_node",
        "decode_nodes",
        "weights",
        "max_model_len",
        "gpu_memory_utilization",
        "kv_cache_memory_bytes",
        "vllm_version",
        "artifact",
    ):
        v = getattr(a, k)
        if v is not None:
            inp[k] = v
    if a.kv_dtype is not None:
        inp["kv_cache_dtype"] = a.kv_dtype
    if a.quantization is not None:
        inp["model_quantization"] = a.quantization
    if a.context:
        inp["contexts"] = a.context
    traffic = {k: getattr(a, k) for k in (*TRAFFIC_OPTS, "arrival_rate_rps") if getattr(a, k) is not None}
    if traffic:
        inp["traffic"] = traffic
    if example.get("traffic"):
        inp["traffic_defaults"] = example["traffic"]
    slo = {**(example.get("slo") or {})}
    slo.update({k: getattr(a, k) for k in ("ttft_p95_ms", "tpot_p95_ms") if getattr(a, k) is not None})
    if slo:
        inp["slo"] = slo
    return inp


def _parse_extra_vars(items: list[str]) -> dict:
    """``-e`` values as ansible-playbook reads them: ``@file.yml``, a YAML/JSON mapping, or ``k=v k2=v2``."""
    out: dict = {}
    for raw in items:
        item = raw.strip()
        if item.startswith("@"):
            try:
                with open(item[1:], encoding="utf-8") as fh:
                    doc = _load_yaml(fh, f"-e {item}") or {}
            except OSError as e:
                raise CliError(f"-e {item}: cannot read {item[1:]}: {e.strerror}") from None
        elif item.startswith("{"):
            doc = _load_yaml(item, f"-e {item!r}")
        else:
            doc = {}
            for pair in item.split():
                if "=" not in pair:
                    raise CliError(f"-e {item!r}: expected KEY=VALUE, @FILE or a YAML mapping")
                k, v = pair.split("=", 1)
                doc[k] = _load_yaml(v, f"-e {k}", "a YAML value (quote text)") if v else ""
        if not isinstance(doc, dict):
            raise CliError(f"-e {item!r}: must give a mapping of variables")
        out.update(doc)
    return out


def load_site_vars(site: str, extra_vars: dict | None = None) -> dict[str, tuple[dict, list]]:
    """``{host: (variables, names)}`` of a site inventory, templated as ansible-playbook sees them.

    Extra variables (``-e``) win over everything, as they do for ansible-playbook.
    """
    if not os.path.isdir(site):
        raise CliError(f"--site: {site} is not a directory")
    dups = inventory_files.duplicate_key_errors([site])
    if dups:
        raise CliError(str(SchemaError(dups)))
    # lazy imports: the planner itself needs no Ansible
    from ansible.errors import AnsibleError  # pylint: disable=ansible-bad-module-import
    from ansible.inventory.manager import InventoryManager  # pylint: disable=ansible-bad-module-import
    from ansible.parsing.dataloader import DataLoader  # pylint: disable=ansible-bad-module-import
    from ansible.template import Templar  # pylint: disable=ansible-bad-module-import
    from ansible.vars.manager import VariableManager  # pylint: disable=ansible-bad-module-import

    try:
        from ansible.plugins.loader import init_plugin_loader  # pylint: disable=ansible-bad-module-import

        init_plugin_loader()
    except ImportError:  # ansible-core < 2.15 initialises on import
        pass
    _adopt_collection_package()
    wanted = build.variable_names()
    out = {}
    try:
        loader = DataLoader()
        inv = InventoryManager(loader=loader, sources=[site])
        vm = VariableManager(loader=loader, inventory=inv)
        for host in inv.get_hosts():
            hv = dict(vm.get_vars(host=host))
            hv.update(extra_vars or {})
            try:  # before templating: an alias bomb would take minutes there
                schema.check_sizes({k: v for k, v in hv.items() if k in wanted})
            except SchemaError as e:
                raise CliError(str(e)) from None
            templar = Templar(loader=loader, variables=hv)
            values = {k: templar.template(v) for k, v in hv.items() if k in wanted}
            values["inventory_dir"] = hv.get("inventory_dir")  # where a model's config.json path is relative to
            out[host.name] = (values, list(hv))
    except AnsibleError as e:
        raise CliError(f"--site: cannot read inventory {site}: {e}") from None
    if not out:
        raise CliError(f"--site: {site} has no hosts (hosts are clusters)")
    return out


def blueprint_dir_candidates(site: str, explicit: str | None) -> list[str]:
    found = find_blueprints_dir(site, None)
    return [d for d in (explicit, found) if d]


def _adopt_collection_package() -> None:
    """This collection's package was imported as a plain Python package (pip install, the
    ``blueprints`` command) before Ansible's collection finder was installed, so it carries no
    collection metadata, and the finder then refuses every later import of one of its
    subpackages ("collection metadata was not loaded"). Give it the metadata the finder would
    have read: its own meta/runtime.yml."""
    import sys

    pkg = sys.modules.get("ansible_collections.inference.blueprints")
    if pkg is None or getattr(pkg, "_collection_meta", None) is not None:
        return
    try:
        from ansible.utils.collection_loader._collection_meta import _meta_yml_to_dict  # pylint: disable=ansible-bad-module-import
    except ImportError:
        return
    runtime = os.path.join(next(iter(pkg.__path__)), "meta", "runtime.yml")
    with open(runtime, "rb") as fh:
        pkg._collection_meta = _meta_yml_to_dict(fh.read(), ("inference.blueprints", "runtime.yml"))


def site_intents(site: str, blueprints_dir: str | None, extra_vars: dict | None = None) -> dict[str, dict]:
    """The deployment intent of every cluster of a site inventory (the function the playbooks run)."""
    candidates = blueprint_dir_candidates(site, blueprints_dir)
    out = {}
    for host, (values, names) in load_site_vars(site, extra_vars).items():
        try:
            inventory_dirs = [site if os.path.isdir(site) else os.path.dirname(site)]
            out[host] = build.site_intent(
                host, values, names, candidates, ignore=MAGIC_VARS, inventory_dirs=inventory_dirs
            )
        except SchemaError as e:
            raise CliError(str(e)) from None
    try:
        gitops.check_destinations(out)  # between the clusters: one destination per GitOps cluster
    except SchemaError as e:
        raise CliError(str(e)) from None
    return out


def render(entries: list[tuple[str, dict]], fmt: str, single: bool) -> str:
    if fmt == "md":
        return "\n".join(report_mod.to_markdown(p, label) for label, p in entries)
    data = entries[0][1] if single else [{"target": label, "plan": p} for label, p in entries]
    if fmt == "yaml":
        return _yaml().safe_dump(data, sort_keys=False, width=1000)
    return json.dumps(data, indent=2) + "\n"


def cmd_plan(a: argparse.Namespace) -> int:
    entries, intents = [], {}
    why = schema.unwritable_dir(a.report) if a.report else None
    if why:
        raise CliError(f"--report: {why}; valid: a directory this user can create and write")
    if a.site:
        intents = site_intents(a.site, a.blueprints_dir, _parse_extra_vars(a.extra_vars))
        for host, intent in intents.items():
            entries.extend((f"{host}/{p['model']['name']}", p["plan"]) for p in intent["plans"])
        single = False
    else:
        inp = explicit_inputs(a)
        try:
            entries.append((inp.get("name") or inp.get("model") or "plan", plan(inp)))
        except PlanError as e:
            raise CliError(f"{_option(e.field)}: {e.message}") from None
        single = True
    sys.stdout.write(render(entries, a.format, single))
    if a.format == "md" and intents:
        sys.stdout.write(summary.site_markdown(intents))
    if a.report:
        paths = summary.write_site_report(intents, a.report) if intents else report_mod.write_report(entries, a.report)
        sys.stderr.write(f"report: {paths[0]}\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    a = ap.parse_args(argv)
    try:
        if a.command == "plan":
            return cmd_plan(a)
        if a.command == "converge":
            from ansible_collections.inference.blueprints.plugins.plugin_utils import converge

            return converge.run_cli(a, _parse_extra_vars)
    except CliError as e:
        sys.stderr.write(f"blueprints {a.command}: error: {e}\n")
        return 2
    except OSError as e:
        sys.stderr.write(f"blueprints {a.command}: error: {e}\n")
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())  # pylint: disable=ansible-bad-function
