"""The deployment intent: one function from inventory to everything the templates render.

No cluster: the intent is built from the example inventories exactly as the site action plugin
builds it (same variables through Ansible's inventory API) and rendered with the roles'
templates through plugin_utils.render.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli, router_registry
from ansible_collections.inference.blueprints.plugins.module_utils.intent import build
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import SchemaError
from ansible_collections.inference.blueprints.plugins.plugin_utils import render

ROOT = Path(__file__).resolve().parents[3]
INVENTORIES = ROOT / "inventories"
EXAMPLES = sorted(p.name for p in INVENTORIES.iterdir() if (p / "hosts.yml").exists())


@pytest.fixture(scope="module")
def intents():
    return {site: cli.site_intents(str(INVENTORIES / site), None) for site in EXAMPLES}


def objects_of(intent: dict, stage: str = "serving") -> list[dict]:
    return render.render_components(intent["stages"][stage], intent)


def by_kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


def env_of(container: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def workloads(svc: dict) -> list[tuple[str, dict]]:
    spec = svc["spec"]
    out = [("main", spec)]
    if spec.get("prefill"):
        out.append(("prefill", spec["prefill"]))
    return out


# ---------------------------------------------------------------------------------- shape


@pytest.mark.parametrize("site", EXAMPLES)
def test_every_example_site_builds_a_json_intent(intents, site):
    for host, intent in intents[site].items():
        assert intent["host"] == host
        json.dumps(intent)  # plain data only: the action plugin returns it as a fact
        assert intent["serving"]["models"], "every example serves at least one model"
        assert intent["stages"]["serving"][-1] == "observability"


def test_cli_and_action_share_the_mapping_and_honour_extra_vars():
    base = cli.site_intents(str(INVENTORIES / "example-chat"), None)["chat-east-1"]
    over = cli.site_intents(
        str(INVENTORIES / "example-chat"), None, {"serving_namespace": "team-a", "delivery": "render"}
    )["chat-east-1"]
    assert base["serving"]["namespace"] == "llm-chat"
    assert over["serving"]["namespace"] == "team-a"
    assert over["site"]["delivery"] == "render"
    svc = by_kind(objects_of(over), "LLMInferenceService")[0]
    assert svc["metadata"]["namespace"] == "team-a"


def test_a_fleet_plans_each_distinct_model_once(intents):
    fleet = intents["example-edge-fleet"]
    plans = [json.dumps(i["plans"][0]["plan"], sort_keys=True) for i in fleet.values()]
    assert len(set(plans)) == 1 and len(plans) == 3
    assert {i["serving"]["namespace"] for i in fleet.values()} == {f"llm-edge-{h}" for h in fleet}


# ---------------------------------------------------------------------------------- bad input


def _site_values(**changes):
    values, names = cli.load_site_vars(str(INVENTORIES / "example-chat"))["chat-east-1"]
    values = json.loads(json.dumps(values))
    names = list(names)
    for key, value in changes.items():
        if value is _DROP:
            values.pop(key, None)
            names.remove(key)
        else:
            values[key] = value
            names.append(key)
    return values, names


_DROP = object()
BDIR = [str(ROOT / "blueprints")]


def _errors(**changes) -> str:
    values, names = _site_values(**changes)
    with pytest.raises(SchemaError) as err:
        build.site_intent("chat-east-1", values, names, BDIR)
    return str(err.value)


def _model(**changes):
    values, _ = _site_values()
    model = dict(values["models"][0])
    model.update(changes)
    return [model]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"serving_namspace": "llm-chat"}, "serving_namspace: unknown variable (did you mean 'serving_namespace'?)"),
        ({"blueprint": "chatt"}, "blueprint: unknown blueprint 'chatt' (did you mean 'chat'?)"),
        ({"site_name": "Example_Chat"}, "site_name: 'Example_Chat' is not a DNS-1123 label"),
        ({"serving_namespace": "LLM_Chat"}, "serving_namespace: 'LLM_Chat' is not a DNS-1123 label"),
        ({"delivery": "kubectl"}, "delivery: unknown value 'kubectl'"),
        (
            {"hardware": {"gpu": "h10", "gpus_per_node": 8, "nodes": 2}},
            "hardware.gpu: unknown GPU 'h10' (did you mean 'h100'?)",
        ),
        ({"hardware": {"gpu": "h100", "gpus_per_node": 0, "nodes": 2}}, "hardware.gpus_per_node: must be >= 1, got 0"),
        ({"hardware": {"gpu": "h100", "gpus_per_node": 8, "nodes": 2, "gpus": 16}}, "hardware.gpus: unknown key"),
        ({"models": []}, "models: needs at least 1 item(s), got 0"),
        ("model:name=Qwen_Chat", "models[0].name: 'Qwen_Chat' is not a DNS-1123 label"),
        ("model:name=" + "q" * 39, "models[0].name: must be at most 38 characters"),
        ("model:id=Qwen3.5-35B-A3", "models[0].id: unknown model 'Qwen3.5-35B-A3' (did you mean 'Qwen3.5-35B-A3B'?)"),
        ("model:trafic={}", "models[0].trafic: unknown key (did you mean 'traffic'?)"),
        (
            "model:artifact={'uri': 'oci://registry.redhat.io/rhai/modelcar-qwen3-5-35b-a3b-fp8-dynamic:3.0'}",
            "models[0].artifact.uri: 'oci://registry.redhat.io/rhai/modelcar-qwen3-5-35b-a3b-fp8-dynamic:3.0' is an "
            "OCI artifact without a digest",
        ),
        ("model:max_model_len=0", "models[0].max_model_len: must be >= 1, got 0"),
        ("duplicate", "models: duplicate name(s): qwen-chat"),
    ],
)
def test_bad_input_names_the_variable(changes, expected):
    if changes == "duplicate":
        values, _ = _site_values()
        changes = {"models": values["models"] * 2}
    elif isinstance(changes, str):
        key, _, raw = changes[len("model:") :].partition("=")
        value = eval(raw) if raw.startswith(("{", "[")) else (int(raw) if raw.isdigit() else raw)  # noqa: S307
        changes = {"models": _model(**{key: value})}
    assert expected in _errors(**changes)


def test_traffic_zero_sessions_is_refused_with_its_path():
    values, _ = _site_values()
    model = json.loads(json.dumps(values["models"][0]))
    model["traffic"]["concurrent_sessions"] = 0
    assert "models[0].traffic.concurrent_sessions: must be >= 1, got 0" in _errors(models=[model])


def test_every_error_is_reported_at_once():
    msg = _errors(serving_namspace="x", delivery="kubectl", models=_model(name="Bad_Name"))
    assert "3 problems" in msg
    for part in ("serving_namspace", "delivery", "models[0].name"):
        assert part in msg


def test_planner_errors_name_the_inventory_path():
    model = _model(max_model_len=10_000_000)
    assert "models[0].max_model_len" in _errors(models=model)


# ---------------------------------------------------------------------------------- blueprint is the source


def _mutate(value, choices=None):
    if isinstance(value, bool):
        return not value
    if choices:
        return next(c for c in choices if c != value)
    if isinstance(value, (int, float)):
        return value * 2 if value else 1
    return None


def _fingerprint(site: str, blueprints_dir: Path) -> str:
    out = cli.site_intents(str(INVENTORIES / site), str(blueprints_dir))
    parts = []
    for intent in out.values():
        parts.append(json.dumps([p["plan"] for p in intent["plans"]], sort_keys=True))
        parts.append(json.dumps(objects_of(intent), sort_keys=True))
    return "".join(parts)


def _changed_value(section: str, key: str, value):
    """Another valid value for a blueprint key (None: no sensible change)."""
    from ansible_collections.inference.blueprints.plugins.module_utils.planner import inputs as pin

    if key == "allowed_weights":
        return list(reversed(value)) if len(value) > 1 else ["bf16"]
    if key == "escalation":
        return {"enabled": True, "endpoint": "https://grid.example.com/v1", "model": "m"}
    if isinstance(value, list):
        return value[:-1] if value else [{"name": "extra", "priority": 1}]
    if isinstance(value, dict):
        first = next(iter(value))
        sub = value[first]
        return {**value, first: sub + "x" if isinstance(sub, str) else _mutate(sub)}
    return _mutate(value, pin.POLICY_ENUMS.get(key) if section == "policy" else None)


SITE_OF_BLUEPRINT = {
    "chat": "example-chat",
    "rag": "example-rag",
    "batch": "example-batch",
    "edge_sno": "example-edge-fleet",
    "ai_grid": "example-ai-grid",
}


@pytest.mark.parametrize("blueprint", sorted(SITE_OF_BLUEPRINT))
def test_every_blueprint_key_reaches_the_plan_or_the_objects(tmp_path, blueprint):
    """Change one key of the blueprint file at a time: the plan or the rendered objects change.

    A key that changes nothing is a promise the product does not keep."""
    import yaml

    src = ROOT / "blueprints"
    doc = yaml.safe_load((src / f"{blueprint}.yml").read_text())
    site = SITE_OF_BLUEPRINT[blueprint]
    # the inventory's own values win over blueprint defaults: those keys are tested without them
    values, _ = cli.load_site_vars(str(INVENTORIES / site))[next(iter(cli.load_site_vars(str(INVENTORIES / site))))]
    bdir = tmp_path / "blueprints"
    bdir.mkdir(parents=True)
    for f in src.glob("*.yml"):
        (bdir / f.name).write_text(f.read_text())
    base = _fingerprint(site, bdir)
    dead = []
    for section in ("policy", "defaults"):
        for key, value in (doc.get(section) or {}).items():
            if section == "defaults" and key in values:
                continue  # the example inventory sets it: the blueprint default cannot show
            if section == "defaults" and key in ("slo", "traffic") and all(m.get(key) for m in values["models"]):
                continue  # every example model sets its own (test_blueprint_slo_default_applies covers it)
            if section == "policy" and all(key in (m.get("policy") or {}) for m in values["models"]):
                continue  # every example model overrides it
            new = _changed_value(section, key, value)
            if new is None:
                continue
            changed = {**doc, section: {**doc[section], key: new}}
            (bdir / f"{blueprint}.yml").write_text(yaml.safe_dump(changed, sort_keys=False))
            try:
                after = _fingerprint(site, bdir)
            except cli.CliError:
                after = "error"  # a value the planner refuses still shows the key is read
            if after == base:
                dead.append(f"{section}.{key}")
    (bdir / f"{blueprint}.yml").write_text((src / f"{blueprint}.yml").read_text())
    assert not dead, f"blueprints/{blueprint}.yml keys that change neither the plan nor any object: {dead}"


def test_blueprint_slo_default_applies_to_models_without_their_own():
    values, _ = _site_values()
    model = {k: v for k, v in values["models"][0].items() if k != "slo"}
    intent = build.site_intent("chat-east-1", {**values, "models": [model]}, list(values), BDIR)
    import yaml

    chat = yaml.safe_load((ROOT / "blueprints" / "chat.yml").read_text())
    assert intent["plans"][0]["plan"]["slo"] == chat["defaults"]["slo"]


# ---------------------------------------------------------------------------------- issue 8 defects


def _services(intents):
    for site, hosts in intents.items():
        for intent in hosts.values():
            for svc in by_kind(objects_of(intent), "LLMInferenceService"):
                yield site, intent, svc


def test_defect1_kserve_creates_the_scheduler_no_pool_ref(intents):
    for site, intent, svc in _services(intents):
        sched = (svc["spec"].get("router") or {}).get("scheduler")
        if "inference_scheduler" in intent["components"]:
            assert sched is not None, site
            assert "pool" not in sched, f"{site}: pool.ref/spec makes KServe skip its scheduler preset"
            assert "inline" in sched["config"]
        else:
            assert sched is None


def test_defect2_and_scheduler_configs_load_in_the_router_kserve_runs(intents):
    router = router_registry.KSERVE_ROUTER["v0.20.0"]["router"]
    seen = 0
    for site, _intent, svc in _services(intents):
        sched = (svc["spec"].get("router") or {}).get("scheduler")
        if not sched:
            continue
        cfg = sched["config"]["inline"]
        assert "prepareDataPlugins" not in (cfg.get("featureGates") or [])
        # that the router loads it is shown by the router itself: tests/dataplane/test_config_loader.py
        assert cfg["apiVersion"] == router_registry.router_version_info(router)["config_api_version"], site
        seen += 1
    assert seen >= 3


def test_defect9_parallelism_through_kserve_fields(intents):
    for site, _intent, svc in _services(intents):
        for name, wl in workloads(svc):
            par = wl.get("parallelism") or {}
            for c in wl["template"]["containers"]:
                flags = [t.split("=")[0] for t in shlex.split(env_of(c)["VLLM_ADDITIONAL_ARGS"])]
                assert "--tensor-parallel-size" not in flags
                if par.get("data"):
                    assert "worker" in wl, f"{site} {name}: data parallelism needs KServe's DP preset (worker)"
                    for f in ("--data-parallel-size", "--enable-expert-parallel", "--data-parallel-size-local"):
                        assert f not in flags, f"{site} {name}: {f} belongs to spec.parallelism"
                assert "qwen3_5_mtp" not in env_of(c)["VLLM_ADDITIONAL_ARGS"], "deprecated alias of mtp"


def test_defect10_objectives_in_the_group_the_router_watches(intents):
    seen = 0
    for hosts in intents.values():
        for intent in hosts.values():
            for obj in by_kind(objects_of(intent), "InferenceObjective"):
                assert obj["apiVersion"] == "llm-d.ai/v1alpha2"
                assert obj["spec"]["poolRef"] == {
                    "group": "inference.networking.k8s.io",
                    "kind": "InferencePool",
                    "name": f"{obj['metadata']['labels']['inference.blueprints/model']}-inference-pool",
                }
                seen += 1
    assert seen >= 3


def test_defect8_epp_metrics_scraped_with_a_token_the_epp_accepts(intents):
    for site, hosts in intents.items():
        for intent in hosts.values():
            objs = objects_of(intent)
            monitors = [m for m in by_kind(objs, "ServiceMonitor") if m["metadata"]["name"].endswith("-epp")]
            if not any(m.get("scheduler") for m in intent["serving"]["models"]):
                continue
            assert monitors, site
            for mon in monitors:
                auth = mon["spec"]["endpoints"][0]["authorization"]
                secret = [s for s in by_kind(objs, "Secret") if s["metadata"]["name"] == auth["credentials"]["name"]]
                assert secret and secret[0]["type"] == "kubernetes.io/service-account-token"
                sa = secret[0]["metadata"]["annotations"]["kubernetes.io/service-account.name"]
                roles = {r["metadata"]["name"]: r for r in by_kind(objs, "ClusterRole")}
                bound = [
                    b
                    for b in by_kind(objs, "ClusterRoleBinding")
                    if any(s["name"] == sa for s in b["subjects"]) and b["roleRef"]["name"] in roles
                ]
                assert bound, f"{site}: no ClusterRole binds {sa}"
                rules = roles[bound[0]["roleRef"]["name"]]["rules"]
                assert {"nonResourceURLs": ["/metrics"], "verbs": ["get"]} in rules


def _disaggregated_chat(tmp_path: Path, extra: dict) -> dict:
    """example-chat with its blueprint's policy set to disaggregation: always (the planner picks
    NIXL over RDMA on its ConnectX hardware), so the RDMA path is tested whatever the planner
    would choose for the example's own traffic."""
    bdir = tmp_path / "blueprints"
    bdir.mkdir(parents=True)
    for f in (ROOT / "blueprints").glob("*.yml"):
        (bdir / f.name).write_text(f.read_text())
    chat = (bdir / "chat.yml").read_text()
    assert "disaggregation: auto" in chat
    (bdir / "chat.yml").write_text(chat.replace("disaggregation: auto", "disaggregation: always", 1))
    return cli.site_intents(str(INVENTORIES / "example-chat"), str(bdir), extra)["chat-east-1"]


def test_defect7_roce_pods_get_the_rdma_network_and_gid_detection(tmp_path):
    intent = _disaggregated_chat(tmp_path, {"network_operator_macvlan_master": "ens8f0np0"})
    (model,) = intent["serving"]["models"]
    assert model["disaggregated"] and model["rdma"], "disaggregation: always on ConnectX moves KV over RDMA"
    svc = by_kind(objects_of(intent), "LLMInferenceService")[0]
    # the MacvlanNetwork the network operator creates in the serving namespace, by the name it gives it
    platform_objs = objects_of(intent, "platform")
    (net,) = by_kind(platform_objs, "MacvlanNetwork")
    assert svc["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == (
        f"{net['spec']['networkNamespace']}/{net['metadata']['name']}"
    )
    for _name, wl in workloads(svc):
        container = wl["template"]["containers"][0]
        assert env_of(container)["KSERVE_INFER_ROCE"] == "true"
        # the device resource the network operator's shared device plugin advertises
        assert container["resources"]["limits"]["rdma/rdma_shared_device_a"] == "1"


def test_rdma_pods_name_the_network_the_platform_creates(tmp_path):
    """Every RDMA pod's Multus annotation names a NetworkAttachmentDefinition the platform makes the
    operator render: the MacvlanNetwork's (shared mode, on the ConnectX port the site names) or the
    SriovNetwork's. A name nobody creates would keep every pod from starting."""
    intent = _disaggregated_chat(tmp_path, {})
    (net,) = by_kind(objects_of(intent, "platform"), "MacvlanNetwork")
    assert net["spec"]["master"] == "ens8f0np0"
    svc = by_kind(objects_of(intent), "LLMInferenceService")[0]
    assert svc["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == (
        f"{net['spec']['networkNamespace']}/{net['metadata']['name']}"
    )
    sriov = _disaggregated_chat(tmp_path / "sriov", {"network_operator_mode": "sriov"})
    svc = by_kind(objects_of(sriov), "LLMInferenceService")[0]
    assert not by_kind(objects_of(sriov, "platform"), "MacvlanNetwork")
    (net,) = by_kind(objects_of(sriov, "platform"), "SriovNetwork")
    assert svc["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == (
        f"{net['spec']['networkNamespace']}/{net['metadata']['name']}"
    )
    for _name, wl in workloads(svc):
        limits = wl["template"]["containers"][0]["resources"]["limits"]
        assert [k for k in limits if k.startswith("openshift.io/")], limits


def test_defect6_escalation_outranks_kserve_and_originates_tls(intents):
    intent = intents["example-edge-fleet"]["store-berlin-001"]
    objs = objects_of(intent)
    ns = intent["serving"]["namespace"]
    route = next(r for r in by_kind(objs, "HTTPRoute") if r["metadata"]["name"].endswith("-escalation"))
    kserve_prefixes = {
        f"/{ns}/qwen-edge/v1/{ep}" for ep in ("completions", "chat/completions", "responses", "messages")
    }
    prefixes = set()
    for rule in route["spec"]["rules"]:
        (match,) = rule["matches"]
        assert match["headers"] == [{"type": "Exact", "name": "x-llm-escalate", "value": "true"}]
        prefixes.add(match["path"]["value"])
    assert prefixes == kserve_prefixes, "equal prefixes plus one header match outrank KServe's rules"
    # TLS to the regional grid is originated by the gateway (Envoy Gateway Backend, SNI = the grid's name)
    (ref,) = {b["name"] for r in route["spec"]["rules"] for b in r["backendRefs"]}
    backend = next(b for b in by_kind(objs, "Backend") if b["metadata"]["name"] == ref)
    assert backend["spec"]["tls"]["sni"] == backend["spec"]["endpoints"][0]["fqdn"]["hostname"]
    assert backend["spec"]["tls"]["wellKnownCACertificates"] == "System"
    # sites without escalation get no route
    assert not by_kind(objects_of(intents["example-edge-fleet"]["clinic-lyon-002"]), "HTTPRoute")


def test_no_go_template_text_reaches_kserve(intents):
    """KServe runs text/template over the merged spec: a stray '{{' would break every reconcile."""
    for site, _intent, svc in _services(intents):
        assert "{{" not in json.dumps(svc["spec"]), site


def _nulls(value, path=""):
    if value is None:
        yield path
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _nulls(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _nulls(v, f"{path}[{i}]")


def test_no_rendered_object_carries_a_null(intents):
    """A null is never what a site meant: the API server refuses typed fields set to null."""
    for site, hosts in intents.items():
        for host, intent in hosts.items():
            for obj in objects_of(intent):
                assert not list(_nulls(obj)), f"{site}/{host}: {obj['kind']} {obj['metadata']['name']}"


def test_the_layout_annotation_says_what_the_plan_summary_says(intents):
    """One wording of a pool (summary.pool_text): the object's annotation and the printed plan
    agree on replicas, GPUs per replica, the pods a replica spans and autoscaling."""
    from ansible_collections.inference.blueprints.plugins.module_utils.intent import summary

    for site, by_host in intents.items():
        for intent in by_host.values():
            lines = summary.lines(intent)
            for svc in by_kind(objects_of(intent), "LLMInferenceService"):
                name = svc["metadata"]["name"]
                layout = svc["metadata"]["annotations"]["inference.blueprints/layout"]
                (line,) = [x for x in lines if x.startswith(f"{name} (") and "pools: " in x]
                assert line.split("pools: ", 1)[1] == layout, (site, name)
                plan = next(p["plan"] for p in intent["plans"] if p["model"]["name"] == name)
                for role, pool in plan["pools"].items():
                    if pool:
                        assert f"{role} {pool['replicas']} x {pool['gpus_per_replica']} {pool['gpu']}" in layout


def test_a_roce_site_that_does_not_name_the_connectx_port_is_refused(tmp_path):
    """Issue 32 item 4: the MacvlanNetwork was rendered without master, so macvlan enslaved each node's
    default-route interface and the pods had no RoCE path. No cluster fact names the port: the site must."""
    with pytest.raises(cli.CliError) as err:
        _disaggregated_chat(tmp_path, {"network_operator_macvlan_master": ""})
    msg = str(err.value)
    assert msg.startswith("network_operator_macvlan_master: required")
    assert "default-route interface" in msg and "ConnectX port" in msg
    # SR-IOV mode enslaves no host interface: nothing to name
    sriov = _disaggregated_chat(
        tmp_path / "sriov", {"network_operator_macvlan_master": "", "network_operator_mode": "sriov"}
    )
    assert by_kind(objects_of(sriov, "platform"), "SriovNetwork")
