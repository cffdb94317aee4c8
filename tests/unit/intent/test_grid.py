"""The AI grid (blueprint ai_grid): tenants, tiers, the cascade and the gateway objects.

The front-door properties are checked on the rendered objects the gateway controllers read
(Envoy Gateway's ClientTrafficPolicy, SecurityPolicy and BackendTrafficPolicy, Envoy AI
Gateway's AIGatewayRoute), by walking a request through them the way the upstream documents
these objects to act: early header removal, API key authentication with the key's client id
forwarded in a header, then Gateway API rule precedence (most header matches first, then rule
order) over every route attached to the Gateway. The intent's own data is never the witness.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli, router_registry
from ansible_collections.inference.blueprints.plugins.module_utils.intent import build, grid
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import SchemaError
from ansible_collections.inference.blueprints.plugins.plugin_utils import render

ROOT = Path(__file__).resolve().parents[3]
SITE = ROOT / "inventories" / "example-ai-grid"
HOST = "grid-central-1"
BDIR = [str(ROOT / "blueprints")]


def _values():
    values, names = cli.load_site_vars(str(SITE))[HOST]
    return json.loads(json.dumps(values)), list(names)


def _intent(**changes) -> dict:
    values, names = _values()
    values.update(changes)
    return build.site_intent(HOST, values, names + list(changes), BDIR)


@pytest.fixture(scope="module")
def intent():
    return _intent()


@pytest.fixture(scope="module")
def objects(intent):
    return render.render_components(intent["stages"]["serving"], intent)


def kind(objs, k):
    return [o for o in objs if o["kind"] == k]


# ------------------------------------------------------------------ a request through the gateway
class Gateway:
    """What the rendered gateway objects do with one request (see the module docstring)."""

    def __init__(self, objs: list[dict], keys: dict[str, dict[str, str]]):
        (self.gw,) = kind(objs, "Gateway")
        name = self.gw["metadata"]["name"]

        def on_gateway(policy):
            return any(r["kind"] == "Gateway" and r["name"] == name for r in policy["spec"]["targetRefs"])

        self.strip = [
            h.lower()
            for p in kind(objs, "ClientTrafficPolicy")
            if on_gateway(p)
            for h in p["spec"]["headers"]["earlyRequestHeaders"]["remove"]
        ]
        self.auth = [p["spec"]["apiKeyAuth"] for p in kind(objs, "SecurityPolicy") if on_gateway(p)]
        self.keys = keys  # Secret name -> {client id: key}, as the tenants' Secrets would hold them
        self.routes = [
            r for r in kind(objs, "AIGatewayRoute") if any(p["name"] == name for p in r["spec"]["parentRefs"])
        ]
        self.limits = {b["spec"]["targetRefs"][0]["name"]: b for b in kind(objs, "BackendTrafficPolicy")}
        self.rewrites = kind(objs, "InferenceModelRewrite")

    def _authenticate(self, headers: dict) -> str | None:
        """Envoy Gateway apiKeyAuth: the client id whose key the request carries, forwarded in a header."""
        (auth,) = self.auth
        key = next((headers.get(h.lower()) for src in auth["extractFrom"] for h in src["headers"]), None)
        client = None
        for ref in auth["credentialRefs"]:
            for cid, secret in self.keys.get(ref["name"], {}).items():
                if key is not None and key == secret:
                    client = cid
        if client is None:
            return None
        headers[auth["forwardClientIDHeader"].lower()] = client
        if auth.get("sanitize"):
            for src in auth["extractFrom"]:
                for h in src["headers"]:
                    headers.pop(h.lower(), None)
        return client

    def handle(self, headers: dict[str, str], model: str, body_bytes: int = 200):
        headers = {k.lower(): v for k, v in headers.items() if k.lower() not in self.strip}
        if not self.auth:
            return 200, None, headers
        client = self._authenticate(headers)
        if client is None:
            return 401, None, headers
        headers[grid.MODEL_HEADER] = model  # Envoy AI Gateway: from the body's "model"
        headers["content-length"] = str(body_bytes)
        best = None
        for route in self.routes:
            for i, rule in enumerate(route["spec"]["rules"]):
                for match in rule["matches"]:
                    if all(self._matches(m, headers) for m in match["headers"]):
                        rank = (len(match["headers"]), -i)
                        if best is None or rank > best[0]:
                            best = (rank, route, rule)
        if best is None:
            return 404, None, headers
        _, route, rule = best
        return 200, {"route": route["metadata"]["name"], **rule["backendRefs"][0]}, headers

    def engine_model(self, backend: dict, model: str) -> str:
        """The body's model the pool's endpoint picker forwards (llm-d-router v0.9.0 director.go): the target of
        the first rule, among the InferenceModelRewrites of that pool, whose match names the model; else as
        sent. Envoy AI Gateway leaves the body of an InferencePool backend alone (modelNameOverride ignored)."""
        for w in self.rewrites:
            ref = w["spec"]["poolRef"]
            if ref["name"] != backend["name"] or ref.get("group", "inference.networking.k8s.io") != backend["group"]:
                continue
            for rule in w["spec"]["rules"]:
                if any(m["model"]["value"] == model for m in rule.get("matches") or []) or not rule.get("matches"):
                    return rule["targets"][0]["modelRewrite"]
        return model

    @staticmethod
    def _matches(m: dict, headers: dict) -> bool:
        have = headers.get(m["name"].lower())
        if have is None:
            return False
        if m.get("type", "Exact") == "Exact":
            return have == m["value"]
        return re.fullmatch(m["value"], have) is not None


def _keys(intent):
    return {t["secret"]: {t["name"]: f"key-of-{t['name']}"} for t in intent["gateway"]["tenants"]}


@pytest.fixture(scope="module")
def gateway(intent, objects):
    return Gateway(objects, _keys(intent))


def _tenant(intent, name):
    return next(t for t in intent["gateway"]["tenants"] if t["name"] == name)


def _pool(intent, model):
    return next(m["names"]["pool"] for m in intent["serving"]["models"] if m["name"] == model)


def _class_of(intent, pool):
    return next(m["name"] for m in intent["serving"]["models"] if m["names"]["pool"] == pool)


def _served(intent, model):
    return next(m["served_name"] for m in intent["serving"]["models"] if m["name"] == model)


# ------------------------------------------------------------------ the example grid
def test_example_grid_has_three_classes_and_four_tenants_over_three_tiers(intent):
    assert [m["model_id"] for m in intent["serving"]["models"]] == [
        "Qwen3.6-27B",
        "Qwen3.5-35B-A3B",
        "Qwen3.5-397B-A17B",
    ]
    tenants = intent["gateway"]["tenants"]
    assert len(tenants) >= 4
    assert {t["tier"] for t in tenants} == {"gold", "silver", "bronze"}


def cfg_bands(cfg: dict) -> list[dict]:
    return [
        {"priority": b["priority"], "max_requests": int(b["maxRequests"])} for b in cfg["flowControl"]["priorityBands"]
    ]


def test_one_kserve_pool_and_scheduler_per_class_with_flow_control(intent, objects):
    svcs = kind(objects, "LLMInferenceService")
    assert len(svcs) == 3
    prio = {c["name"]: c["priority"] for c in intent["blueprint"]["defaults"]["priority_classes"]}
    for svc in svcs:
        sched = svc["spec"]["router"]["scheduler"]
        assert "pool" not in sched, "KServe creates the pool and the EPP only without a pool ref"
        cfg = sched["config"]["inline"]
        assert cfg["featureGates"] == ["flowControl"]
        # the router loads it and orders the tiers: tests/dataplane/test_config_loader.py, test_priority.py
        assert router_registry.precheck({}, cfg_bands(cfg), cfg["flowControl"].get("defaultRequestTTL"), 0) == []
        bands = {b["priority"]: int(b["maxRequests"]) for b in cfg["flowControl"]["priorityBands"]}
        assert set(bands) == {prio["gold"], prio["silver"], prio["bronze"]}
        # a band holds what its tier may wait for: the gold queue is the shortest
        assert bands[prio["gold"]] < bands[prio["silver"]] < bands[prio["bronze"]]
        # nothing waits in a queue past what the most patient tier tolerates
        longest = max(t["queue_seconds"] for t in intent["gateway"]["tiers"])
        assert cfg["flowControl"]["defaultRequestTTL"] == f"{longest:g}s"
        assert any(p["type"] == "prefix-cache-scorer" for p in cfg["plugins"]), "prefix-aware routing"
    objectives = kind(objects, "InferenceObjective")
    for svc in svcs:
        mine = {
            o["metadata"]["name"]: o["spec"]["priority"]
            for o in objectives
            if o["spec"]["poolRef"]["name"] == f"{svc['metadata']['name']}-inference-pool"
        }
        assert sorted(mine.values()) == sorted(prio.values())


def test_the_flagship_is_multi_node_through_kserve_data_parallel_workers(intent, objects):
    svc = next(s for s in kind(objects, "LLMInferenceService") if s["metadata"]["name"] == "qwen-397b-a17b")
    for section in [svc["spec"], svc["spec"].get("prefill") or {}]:
        if not section:
            continue
        par = section["parallelism"]
        if par.get("data"):
            assert "worker" in section
            assert par["data"] // par["dataLocal"] > 1, "a LeaderWorkerSet group spans more than one node"
            assert par.get("expert") is True
    assert any((s or {}).get("worker") is not None for s in (svc["spec"], svc["spec"].get("prefill")))


# ------------------------------------------------------------------ the front door
def test_a_tenant_without_a_credential_is_refused(gateway, intent):
    assert gateway.handle({}, "Qwen3.6-27B")[0] == 401
    assert gateway.handle({"x-api-key": "guess"}, "Qwen3.6-27B")[0] == 401
    # a client naming a tenant itself gets nothing either: the header is stripped, the key decides
    assert gateway.handle({"x-ai-grid-tenant": "acme-support"}, "Qwen3.6-27B")[0] == 401
    status, backend, _ = gateway.handle({"x-api-key": "key-of-acme-support"}, "Qwen3.6-27B")
    assert status == 200 and backend["name"] == _pool(intent, "qwen-27b")


def test_every_route_is_behind_the_authenticated_gateway(objects):
    (gw,) = kind(objects, "Gateway")
    (sp,) = kind(objects, "SecurityPolicy")
    assert sp["spec"]["targetRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gw["metadata"]["name"]}
    ]
    for route in kind(objects, "AIGatewayRoute"):
        assert [p["name"] for p in route["spec"]["parentRefs"]] == [gw["metadata"]["name"]]
    secrets = {r["name"] for r in sp["spec"]["apiKeyAuth"]["credentialRefs"]}
    assert len(secrets) == len(kind(objects, "AIGatewayRoute")), "one Secret per tenant"
    assert sp["spec"]["apiKeyAuth"]["sanitize"] is True, "the key is not sent on to the models"
    assert not kind(objects, "Secret") or all(
        "key" not in json.dumps(s.get("data", {})) for s in kind(objects, "Secret")
    )


def test_a_bronze_tenant_reaches_the_flagship_only_when_its_policy_allows(gateway, intent):
    flagship = _pool(intent, "qwen-397b-a17b")
    for tenant, allowed in (("hooli-batch", False), ("umbrella-lab", True)):
        assert _tenant(intent, tenant)["tier"] == "bronze"
        key = {"x-api-key": f"key-of-{tenant}"}
        direct = gateway.handle(key, _served(intent, "qwen-397b-a17b"))
        escalated = gateway.handle({**key, "x-ai-grid-escalate": "2"}, "auto")
        if allowed:
            assert direct[1]["name"] == flagship and escalated[1]["name"] == flagship
        else:
            assert direct[0] == 404, "no rule of the tenant routes to the flagship"
            assert escalated[1]["name"] != flagship, "the cascade stops at the tenant's last class"
    hooli = next(
        r
        for r in kind(render.render_components(["ai_gateway"], intent), "AIGatewayRoute")
        if r["metadata"]["name"] == "tenant-hooli-batch"
    )
    assert flagship not in json.dumps(hooli)


def test_identity_headers_set_by_the_gateway_are_stripped_from_the_client(gateway, intent, objects):
    (ctp,) = kind(objects, "ClientTrafficPolicy")
    removed = ctp["spec"]["headers"]["earlyRequestHeaders"]["remove"]
    for h in ("x-ai-grid-tenant", "x-ai-grid-tier", "x-llm-d-inference-objective", "x-llm-d-inference-fairness-id"):
        assert h in removed
    spoof = {
        "x-api-key": "key-of-hooli-batch",
        "x-ai-grid-tenant": "acme-support",
        "x-ai-grid-tier": "gold",
        "x-llm-d-inference-objective": "qwen-397b-a17b-gold",
    }
    status, backend, headers = gateway.handle(spoof, _served(intent, "qwen-397b-a17b"))
    assert status == 404 and headers["x-ai-grid-tenant"] == "hooli-batch"
    assert "x-ai-grid-tier" not in headers and "x-llm-d-inference-objective" not in headers
    assert "x-api-key" not in headers


def test_token_budgets_per_tenant_and_tier_are_counted_from_the_response(intent, objects):
    tiers = intent["blueprint"]["defaults"]["tiers"]
    (sp,) = kind(objects, "SecurityPolicy")
    tenant_header = sp["spec"]["apiKeyAuth"]["forwardClientIDHeader"]
    routes = {r["metadata"]["name"]: r for r in kind(objects, "AIGatewayRoute")}
    values, _ = _values()
    for t in values["tenants"]:
        route = routes[f"tenant-{t['name']}"]
        (cost_key,) = [c["metadataKey"] for c in route["spec"]["llmRequestCosts"] if c["type"] == "TotalToken"]
        (btp,) = [
            b
            for b in kind(objects, "BackendTrafficPolicy")
            if b["spec"]["targetRefs"]
            == [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": route["metadata"]["name"]}]
        ]
        (rule,) = btp["spec"]["rateLimit"]["global"]["rules"]
        assert btp["spec"]["rateLimit"]["type"] == "Global"
        assert rule["clientSelectors"] == [{"headers": [{"type": "Exact", "name": tenant_header, "value": t["name"]}]}]
        want = t.get("tokens_per_minute") or tiers[t["tier"]]["tokens_per_minute"]
        assert rule["limit"] == {"requests": want, "unit": "Minute"}
        assert rule["cost"]["request"] == {"from": "Number", "number": 0}
        assert rule["cost"]["response"] == {
            "from": "Metadata",
            "metadata": {"namespace": "io.envoy.ai_gateway", "key": cost_key},
        }


def test_max_tokens_is_capped_per_tier_at_the_door(intent, objects):
    (eep,) = kind(objects, "EnvoyExtensionPolicy")
    script = eep["spec"]["lua"][0]["inline"]
    tiers = intent["blueprint"]["defaults"]["tiers"]
    for t in intent["gateway"]["tenants"]:
        entry = re.search(rf'\["{t["name"]}"\] = {{tier = "(\w+)", max_tokens = (\d+)', script)
        assert entry and entry.group(1) == t["tier"] and int(entry.group(2)) == tiers[t["tier"]]["max_tokens"]
    assert 'refuse(handle, 400, "tier_limit"' in script and 'refuse(handle, 403, "model_not_allowed"' in script
    assert "function envoy_on_request(handle)" in script


def test_cascade_order_and_escalation(gateway, intent):
    order = intent["gateway"]["cascade"]["order"]
    assert order == ["qwen-27b", "qwen-35b-a3b", "qwen-397b-a17b"]
    for t in intent["gateway"]["tenants"]:
        key = {"x-api-key": f"key-of-{t['name']}"}
        allowed = [m for m in order if m in t["models"]]
        reached = []
        for level in ("0", "1", "2"):
            hdr = {**key, "x-ai-grid-escalate": level} if level != "0" else key
            status, backend, _ = gateway.handle(hdr, "auto")
            assert status == 200
            reached.append(backend["name"])
            # the class's endpoint picker hands its engine the class's own model name, not the cascade's
            assert gateway.engine_model(backend, "auto") == _served(intent, _class_of(intent, backend["name"]))
        want = [_pool(intent, allowed[min(i, len(allowed) - 1)]) for i in range(3)]
        assert reached == want, t["name"]
        big = gateway.handle(key, "auto", body_bytes=40000)[1]["name"]
        assert big == want[1], "a large request starts one class up"
        assert gateway.handle(key, "auto", body_bytes=31999)[1]["name"] == want[0]


def test_changing_the_cascade_redeploys_no_model(intent):
    before = kind(render.render_components(intent["stages"]["serving"], intent), "LLMInferenceService")
    values, _ = _values()
    for cascade in (
        {**values["cascade"], "order": ["qwen-35b-a3b", "qwen-397b-a17b"]},
        {**values["cascade"], "enabled": False},
        {**values["cascade"], "escalate_prompt_bytes": 8000},
    ):
        other = _intent(cascade=cascade)
        after = render.render_components(other["stages"]["serving"], other)
        assert kind(after, "LLMInferenceService") == before
        assert kind(after, "AIGatewayRoute") != kind(render.render_components(["ai_gateway"], intent), "AIGatewayRoute")


def test_keda_scales_a_gold_queue_faster_than_bronze_on_the_same_pool(intent, objects):
    scaled = kind(objects, "ScaledObject")
    assert scaled
    targets = {(m["names"]["main_workload_kind"], m["names"]["main_workload"]) for m in intent["serving"]["models"]}
    # a disaggregated model's prefill pool scales with its decode pool (issue 34 item 4b)
    targets |= {
        ("LeaderWorkerSet" if m["prefill"]["worker"] is not None else "Deployment", m["names"]["prefill_workload"])
        for m in intent["serving"]["models"]
        if m["prefill"]
    }
    prio = {c["name"]: c["priority"] for c in intent["blueprint"]["defaults"]["priority_classes"]}
    for so in scaled:
        assert (so["spec"]["scaleTargetRef"]["kind"], so["spec"]["scaleTargetRef"]["name"]) in targets
        by_tier = {t["name"]: t["metadata"] for t in so["spec"]["triggers"]}
        assert set(by_tier) == {"queue-gold", "queue-silver", "queue-bronze"}
        for tier in ("gold", "silver", "bronze"):
            assert f'priority="{prio[tier]}"' in by_tier[f"queue-{tier}"]["query"]
            assert "llm_d_epp_flow_control_queue_size" in by_tier[f"queue-{tier}"]["query"]
        assert float(by_tier["queue-gold"]["threshold"]) < float(by_tier["queue-bronze"]["threshold"])


def test_the_grid_report_comes_from_the_plans(intent):
    rep = intent["gateway"]["report"]
    plans = {p["model"]["name"]: p["plan"] for p in intent["plans"]}
    for c in rep["classes"]:
        pools = [p for p in plans[c["model"]]["pools"].values() if p]
        assert c["gpus"] == sum(p["gpus"] for p in pools)
        assert c["why"]
    assert rep["gpus"] == sum(c["gpus"] for c in rep["classes"])
    assert abs(sum(t["share"] for t in rep["tiers"]) - 1) < 0.01
    cas = rep["cascade"]
    assert cas["answered_share"] == [0.7, 0.2, 0.1]
    assert cas["decided_at_the_gateway"] <= cas["after_a_smaller_answer"] <= cas["all_on_flagship"]
    assert 0 < cas["saves"] < 1


@pytest.mark.parametrize("n", [1, 7, 10, 99, 100, 32000, 123456])
def test_at_least_regex(n):
    rx = re.compile(grid.at_least_regex(n))
    for i in list(range(0, 2000)) + list(range(max(0, n - 2000), n + 2000)) + [n * 10, n * 100]:
        assert bool(rx.fullmatch(str(i))) == (i >= n), (n, i)


# ------------------------------------------------------------------ bad input
def _tenants(**change):
    values, _ = _values()
    tenants = copy.deepcopy(values["tenants"])
    tenants[0].update(change)
    return tenants


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"tenants[0]": {"models": ["qwen-27b", "qwen-70b"]}}, "tenants[0].models[1]: unknown model 'qwen-70b'"),
        ({"tenants[0]": {"tier": "platinum"}}, "tenants[0].tier: unknown tier 'platinum'"),
        ({"tenants[0]": {"tokens_per_minute": 0}}, "tenants[0].tokens_per_minute: must be > 0, got 0"),
        ({"tenants[0]": {"tokens_per_minute": -5}}, "tenants[0].tokens_per_minute: must be > 0"),
        ({"tenants[0]": {"credential": "sk-live-123456"}}, "tenants[0].credential: an inline credential"),
        (
            {"tenants[0]": {"credential": {"secret": "s", "api_key": "sk-live-123456"}}},
            "tenants[0].credential: an inline credential (api_key) is not accepted",
        ),
        ({"tenants[0]": {"credential": None}}, "tenants[0].credential: required"),
        ({"tenants": []}, "tenants: required by the ai_gateway component"),
        (
            {
                "tiers": {
                    "gold": {"max_tokens": 1, "tokens_per_minute": 1, "queue_seconds": 1},
                    "platinum": {"max_tokens": 1, "tokens_per_minute": 1, "queue_seconds": 1},
                }
            },
            "tiers.platinum: is not a priority class",
        ),
        (
            {"cascade": {"enabled": True, "order": ["qwen-27b", "qwen-7b"], "easy_fraction": 0.5}},
            "cascade.order[1]: unknown model 'qwen-7b'",
        ),
        (
            {
                "cascade": {
                    "enabled": True,
                    "order": ["qwen-27b", "qwen-35b-a3b"],
                    "easy_fraction": 0.8,
                    "hard_fraction": 0.5,
                }
            },
            "cascade.hard_fraction: easy_fraction + hard_fraction must be <= 1",
        ),
    ],
)
def test_bad_grid_input_names_the_field(changes, expected):
    changes = dict(changes)
    if "tenants[0]" in changes:  # a change to the first tenant (read here, not at collection time)
        changes["tenants"] = _tenants(**changes.pop("tenants[0]"))
    with pytest.raises(SchemaError) as err:
        _intent(**changes)
    assert expected in str(err.value)
    assert "sk-live-123456" not in str(err.value), "a key is never echoed"


def test_plan_report_and_summary_carry_the_grid_figures(tmp_path, capsys):
    """plan.yml (site action report) and `blueprints plan --site` show what only the grid knows:
    GPUs per class, each tier's share of the cost and what the cascade saves."""
    from ansible_collections.inference.blueprints.plugins.module_utils.intent import summary

    inv = str(SITE)
    intents = cli.site_intents(inv, None)
    (intent,) = intents.values()
    rep = intent["gateway"]["report"]
    lines = summary.lines(intent)
    assert any(line.startswith(f"grid: {rep['gpus']} GPUs") for line in lines), lines
    assert any(line.startswith("grid cost share: gold") for line in lines)
    md = summary.write_site_report(intents, str(tmp_path))[0]
    text = Path(md).read_text(encoding="utf-8")
    for c in rep["classes"]:
        assert f"| {c['model']} | {c['gpus']} |" in text
    assert f"saves {rep['cascade']['saves'] * 100:.0f}%" in text
    assert cli.main(["plan", "--site", inv, "--format", "md", "--report", str(tmp_path / "cli")]) == 0
    assert "AI grid" in capsys.readouterr().out
    assert "AI grid" in (tmp_path / "cli" / "report.md").read_text()


def _with_model_hardware(index: int, hardware: dict) -> dict:
    values, _ = _values()
    models = copy.deepcopy(values["models"])
    models[index]["hardware"] = hardware
    return _intent(models=models)


def test_a_class_on_its_own_gpu_type_is_planned_pinned_and_checked_on_it():
    """A site may mix GPU types per class: the 27B on an L40S pool is planned on L40S, its pods land
    on L40S nodes (and the others on H100), and preflight asks the cluster for both."""
    l40s = {"gpu": "l40s", "gpus_per_node": 4, "nodes": 2}
    intent = _with_model_hardware(0, l40s)
    plans = {p["model"]["name"]: p["plan"] for p in intent["plans"]}
    first = intent["plans"][0]["model"]["name"]
    assert plans[first]["hardware"]["gpu"] == "l40s"
    assert {p["hardware"]["gpu"] for n, p in plans.items() if n != first} == {"h100"}
    products = {}
    for svc in kind(render.render_components(intent["stages"]["serving"], intent), "LLMInferenceService"):
        for section in [svc["spec"]] + ([svc["spec"]["prefill"]] if "prefill" in svc["spec"] else []):
            terms = section["template"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            (expr,) = terms["nodeSelectorTerms"][0]["matchExpressions"]
            assert expr["key"] == "nvidia.com/gpu.product"
            products.setdefault(svc["metadata"]["name"], set()).update(expr["values"])
    assert products[first] == {"NVIDIA-L40S"}
    assert all("NVIDIA-H100-80GB-HBM3" in v for n, v in products.items() if n != first)
    needs = {n["gpu"]: n for n in intent["platform"]["requirements"]["gpus"]}
    assert set(needs) == {"l40s", "h100"} and first in needs["l40s"]["for"]


def test_a_single_gpu_type_site_pins_nothing(intent, objects):
    for svc in kind(objects, "LLMInferenceService"):
        assert "affinity" not in svc["spec"]["template"], svc["metadata"]["name"]


@pytest.mark.parametrize(
    ("hardware", "path", "needle"),
    [
        ({"gpu": "l40z", "gpus_per_node": 4, "nodes": 1}, "models[0].hardware.gpu", "l40s"),
        ({"gpu": "l40s", "nodes": 1}, "models[0].hardware.gpus_per_node", "required"),
        ({"gpu": "l40s", "gpus_per_node": 0, "nodes": 1}, "models[0].hardware.gpus_per_node", ">= 1"),
        ({"gpu": "l40s", "gpus_per_node": 4, "nodes": 1, "gpus": 4}, "models[0].hardware.gpus", "gpus_per_node"),
    ],
)
def test_bad_model_hardware_names_its_path(hardware, path, needle):
    with pytest.raises(SchemaError) as err:
        _with_model_hardware(0, hardware)
    text = str(err.value)
    assert path in text and needle in text, text


def test_the_stage_waits_for_the_front_door_to_be_programmed(intent):
    from ansible_collections.inference.blueprints.plugins.module_utils.intent import waits

    gw = [w for w in waits.for_components(intent, intent["stages"]["serving"]) if w["kind"] == "Gateway"]
    assert gw == [
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "namespace": intent["gateway"]["namespace"],
            "name": intent["gateway"]["name"],
            "condition": "Programmed",
            "timeout": intent["options"]["ai_gateway"]["ai_gateway_wait_timeout"],
            "component": "ai_gateway",
        }
    ]
