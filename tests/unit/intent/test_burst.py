"""Sovereign burst (blueprint sovereign_burst): bad input refused by path before anything is planned,
the per-cluster sizing, the regulated pin at render time (on the rendered HTTPRoute, walked the way
Gateway API picks a rule), the engine image on every engine container, the pinned images and the
warm-up budget.

The cluster-side half of the pin (the ValidatingAdmissionPolicy refusing a route on a real
kube-apiserver) is tests/integration/test_sovereign_burst.py.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils.intent import build, burst, burst_pin
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import SchemaError
from ansible_collections.inference.blueprints.plugins.plugin_utils import render

ROOT = Path(__file__).resolve().parents[3]
SITE = ROOT / "inventories" / "example-sovereign-burst"
SOV, BURST = "onprem-fra-1", "burst-aws-1"
BDIR = [str(ROOT / "blueprints")]
OTHER_DIGEST = "registry.redhat.io/rhai/modelcar-qwen3-5-35b-a3b-fp8-dynamic@sha256:" + "1" * 64


@pytest.fixture(scope="module")
def site_vars():
    return {h: (json.loads(json.dumps(v)), list(n)) for h, (v, n) in cli.load_site_vars(str(SITE)).items()}


def _intent(site_vars, host, mutate=None, env=None, **changes):
    values, names = copy.deepcopy(site_vars[host])
    values.update(copy.deepcopy(changes))
    if mutate:
        mutate(values)
    if env is not None:
        # the kubeconfig check reads the process environment through burst.kubeconfig_path
        import os

        old = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        try:
            return build.site_intent(host, values, names + list(changes), BDIR)
        finally:
            os.environ.clear()
            os.environ.update(old)
    return build.site_intent(host, values, names + list(changes), BDIR)


def _refused(site_vars, host, **kw) -> dict[str, str]:
    with pytest.raises(SchemaError) as e:
        _intent(site_vars, host, **kw)
    out: dict[str, str] = {}
    for path, msg in e.value.errors:
        out[path] = f"{out[path]}; {msg}" if path in out else msg
    return out


@pytest.fixture(scope="module")
def intents(site_vars):
    return {h: _intent(site_vars, h) for h in (SOV, BURST)}


@pytest.fixture(scope="module")
def objects(intents):
    return {h: render.render_components(i["stages"]["serving"], i) for h, i in intents.items()}


def kind(objs, k):
    return [o for o in objs if o["kind"] == k]


# ------------------------------------------------------------------ bad input, by path
def test_a_regulated_class_routed_to_a_burst_only_model_is_refused(site_vars):
    def burst_only(v):
        sb = v["sovereign_burst"]
        v["models"].append({**v["models"][0], "name": "qwen-burst-only", "served_name": "qwen-burst-only"})
        sb["clusters"][0]["models"] = ["qwen-35b-a3b"]  # the sovereign does not serve it
        sb["clusters"][1]["models"] = ["qwen-35b-a3b", "qwen-burst-only"]
        sb["request_classes"][0]["models"] = ["qwen-35b-a3b", "qwen-burst-only"]  # the regulated class

    for host in (SOV, BURST):
        errors = _refused(site_vars, host, mutate=burst_only)
        msg = errors["sovereign_burst.request_classes[0].models[1]"]
        assert "regulated" in msg and "qwen-burst-only" in msg and SOV in msg


def test_two_clusters_with_the_same_name_are_refused(site_vars):
    def same(v):
        v["sovereign_burst"]["clusters"][1]["name"] = SOV

    errors = _refused(site_vars, SOV, mutate=same)
    assert "sovereign_burst.clusters" in errors and SOV in errors["sovereign_burst.clusters"]


def test_a_burst_cluster_without_prewarm_digests_is_refused(site_vars):
    def no_prewarm(v):
        del v["sovereign_burst"]["clusters"][1]["prewarm"]

    for host in (SOV, BURST):
        errors = _refused(site_vars, host, mutate=no_prewarm)
        assert "registry pull" in errors["sovereign_burst.clusters[1].prewarm"]


def test_a_prewarm_entry_not_pinned_by_digest_is_refused(site_vars):
    def tagged(v):
        v["sovereign_burst"]["clusters"][1]["prewarm"] = ["registry.redhat.io/rhai/modelcar:3.0"]

    errors = _refused(site_vars, BURST, mutate=tagged)
    assert any(p.startswith("sovereign_burst.clusters[1].prewarm") for p in errors)


def test_a_kubeconfig_context_that_does_not_exist_is_refused(site_vars, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "onprem-fra-1", "context": {"cluster": "c", "user": "u"}}],
            }
        )
    )
    env = {"K8S_AUTH_KUBECONFIG": str(kubeconfig)}
    # the context exists: accepted
    assert _intent(site_vars, SOV, env=env, k8s_context="onprem-fra-1")["burst"]["role"] == "sovereign"
    errors = _refused(site_vars, BURST, env=env, k8s_context="burst-aws-1")
    assert "'burst-aws-1' is not a context of" in errors["k8s_context"] and "onprem-fra-1" in errors["k8s_context"]
    errors = _refused(site_vars, BURST, k8s_kubeconfig=str(tmp_path / "missing"), k8s_context="burst-aws-1")
    assert "cannot be read" in errors["k8s_kubeconfig"]


def test_model_digests_that_differ_between_the_clusters_are_refused(site_vars):
    """One cluster's models pinned to another digest (a host_vars override) is refused on that host."""

    def other_digest(v):
        v["models"][0]["artifact"]["uri"] = "oci://" + OTHER_DIGEST

    for host in (SOV, BURST):
        errors = _refused(site_vars, host, mutate=other_digest)
        msg = errors["models[0].artifact.uri"]
        assert OTHER_DIGEST in msg and "different builds" in msg


def test_a_burst_model_without_a_digest_is_refused(site_vars):
    def hf(v):
        v["models"][0]["artifact"]["uri"] = "hf://RedHatAI/Qwen3.5-35B-A3B-FP8-dynamic"

    errors = _refused(site_vars, BURST, mutate=hf)
    assert "ModelCar pinned by digest" in errors["models[0].artifact.uri"]


def test_prewarm_holding_what_the_cluster_does_not_run_is_refused(site_vars):
    def extra(v):
        v["sovereign_burst"]["clusters"][1]["prewarm"].append(OTHER_DIGEST)

    errors = _refused(site_vars, BURST, mutate=extra)
    assert OTHER_DIGEST in errors["sovereign_burst.clusters[1].prewarm"]


def test_a_host_that_is_not_a_cluster_and_two_sovereigns_are_refused(site_vars):
    def renamed(v):
        v["sovereign_burst"]["clusters"][1]["name"] = "burst-aws-2"

    errors = _refused(site_vars, BURST, mutate=renamed)
    assert "'burst-aws-1' is not one of the clusters" in errors["sovereign_burst.clusters"]

    def two_sovereigns(v):
        v["sovereign_burst"]["clusters"][1]["role"] = "sovereign"

    errors = _refused(site_vars, SOV, mutate=two_sovereigns)
    assert "exactly one cluster has role sovereign; found 2" in errors["sovereign_burst.clusters"]


# ------------------------------------------------------------------ digests across the two intents
def test_the_two_clusters_run_the_same_digest_and_the_check_sees_a_difference(intents):
    assert burst.digest_differences(intents) == []
    broken = copy.deepcopy(intents)
    broken[BURST]["serving"]["models"][0]["uri"] = "oci://" + OTHER_DIGEST
    (diff,) = burst.digest_differences(broken)
    assert OTHER_DIGEST in diff and SOV in diff and BURST in diff


# ------------------------------------------------------------------ sizing and standing footprint
def test_sovereign_sized_for_the_base_and_burst_for_the_spike_standing_at_zero(intents, objects):
    sov, bst = intents[SOV]["burst"]["sizing"][0], intents[BURST]["burst"]["sizing"][0]
    assert sov["arrival_rate_rps"] == 8 and sov["concurrent_sessions"] == 400
    assert bst["arrival_rate_rps"] == pytest.approx(8 * 1.5) and bst["concurrent_sessions"] == 600
    assert sov["standing_replicas"] == sov["replicas"] >= 1
    assert bst["standing_replicas"] == 0
    (so,) = kind(objects[BURST], "ScaledObject")
    assert so["spec"]["minReplicaCount"] == 0
    triggers = {t["name"]: t for t in so["spec"]["triggers"]}
    remote = triggers["sovereign-queue"]["metadata"]
    # scale from zero on the sovereign cluster's queue, read from its Thanos querier
    assert remote["serverAddress"].startswith("https://thanos-querier-openshift-monitoring.apps.onprem-fra-1")
    assert "llm_d_epp_flow_control_queue_size" in remote["query"] and float(remote["activationThreshold"]) > 0
    (auth,) = [a for a in kind(objects[BURST], "TriggerAuthentication") if a["metadata"]["name"].endswith(SOV)]
    assert triggers["sovereign-queue"]["authenticationRef"]["name"] == auth["metadata"]["name"]
    assert not any("data" in s or "stringData" in s for s in kind(objects[BURST], "Secret") if "sovereign" in str(s))
    # one ScaledObject per workload: serving_autoscaling renders none for the burst model
    assert len(kind(objects[BURST], "ScaledObject")) == 1
    # the burst cluster renders no front door (no pin, no fallback Backend), the sovereign no scale-from-zero
    assert not kind(objects[BURST], "ValidatingAdmissionPolicy") and not kind(objects[SOV], "PinnedImageSet")
    assert not [b for b in kind(objects[BURST], "Backend") if b["spec"].get("fallback")]


def test_pinned_images_are_exactly_the_digests_the_sovereign_runs(intents, objects):
    """The ModelCars and the engine image the sovereign's rendered services run, no more, no less."""
    runs = {m["uri"].removeprefix("oci://") for m in intents[SOV]["serving"]["models"]}
    runs |= {c["image"] for svc in kind(objects[SOV], "LLMInferenceService") for _, c in _engine_containers(svc)}
    (pis,) = [p for p in kind(objects[BURST], "PinnedImageSet") if "prewarm" in p["metadata"]["name"]]
    assert {i["name"] for i in pis["spec"]["pinnedImages"]} == runs
    assert ENGINE in runs and len(runs) == 2


# ------------------------------------------------------------------ the engine image
ENGINE = (
    "registry.redhat.io/rhaii/vllm-cuda-rhel9@sha256:ba060ec145e1b7ac3a3b25b89fc75f7d146746156990ff5858235eaa9d158e32"
)
# the burst cluster of this variant plans P/D with a data-parallel decode pool (a worker), the
# sovereign a data-parallel single pool: every pod template KServe's presets merge into
BIG = {"concurrent_sessions": 5000, "arrival_rate_rps": 25}


def _engine_templates(svc: dict) -> dict[str, dict]:
    """Every pod template of an LLMInferenceService whose container main runs the engine, by its path."""
    spec = svc["spec"]
    out = {}
    for path, pool in (("spec", spec), ("spec.prefill", spec.get("prefill") or {})):
        for key in ("template", "worker"):
            if pool.get(key) is not None:
                out[f"{path}.{key}"] = pool[key]
    return out


def _engine_containers(svc: dict) -> list[tuple[str, dict]]:
    out = []
    for path, pod in _engine_templates(svc).items():
        mains = [c for c in pod.get("containers") or [] if c["name"] == "main"]
        out += [(path, c) for c in mains] or [(path, {})]
    return out


def _rendered(site_vars, host, mutate=None) -> list[dict]:
    intent = _intent(site_vars, host, mutate=mutate)
    return render.render_components(intent["stages"]["serving"], intent)


def _bigger(policy=None):
    def mutate(v):
        v["models"][0]["traffic"].update(BIG)
        v["models"][0].setdefault("policy", {}).update(policy or {})

    return mutate


def _no_engine_image(v):
    sb = v["sovereign_burst"]
    engine = sb.pop("engine_image")
    sb["clusters"][1]["prewarm"].remove(engine)


def test_every_engine_container_of_both_clusters_runs_the_engine_image(site_vars, objects):
    """spec.template, spec.worker, spec.prefill.template: container main carries exactly engine_image."""
    assert site_vars[SOV][0]["sovereign_burst"]["engine_image"] == ENGINE
    seen = set()
    cases = [(h, objects[h]) for h in (SOV, BURST)] + [
        (h, _rendered(site_vars, h, _bigger(policy)))
        for h in (SOV, BURST)
        for policy in ({}, {"disaggregation": "always"})
    ]
    for host, objs in cases:
        svcs = kind(objs, "LLMInferenceService")
        assert svcs, host
        for svc in svcs:
            containers = _engine_containers(svc)
            assert containers, (host, svc["metadata"]["name"])
            for path, main in containers:
                assert main.get("image") == ENGINE, (host, path)
                seen.add(path)
    # the variants reach every kind of template the intent renders
    assert seen == {"spec.template", "spec.worker", "spec.prefill.template"}


def test_an_engine_image_by_tag_or_without_a_registry_is_refused_by_name(site_vars):
    for bad, what in (
        ("registry.redhat.io/rhaii/vllm-cuda-rhel9:3.5.0", "pinned by a tag, not a digest"),
        ("registry.redhat.io/rhaii/vllm-cuda-rhel9", "has no digest"),
        ("rhaii/vllm-cuda-rhel9@sha256:" + "a" * 64, "names no registry"),
        ("registry.redhat.io/rhaii/vllm-cuda-rhel9@sha256:ABC", "has no valid digest"),
    ):

        def mutate(v, bad=bad):
            v["sovereign_burst"]["engine_image"] = bad

        for host in (SOV, BURST):
            errors = _refused(site_vars, host, mutate=mutate)
            msg = errors["sovereign_burst.engine_image"]
            assert bad in msg and what in msg and "valid: <registry>/<repository>@sha256:<64 hex digits>" in msg, msg


def test_an_engine_image_the_burst_cluster_does_not_pin_is_refused_on_both_clusters(site_vars):
    def unpinned(v):
        v["sovereign_burst"]["clusters"][1]["prewarm"].remove(ENGINE)

    for host in (SOV, BURST):
        msg = _refused(site_vars, host, mutate=unpinned)["sovereign_burst.clusters[1].prewarm"]
        assert f"lacks the engine image {ENGINE} (sovereign_burst.engine_image)" in msg


def test_without_an_engine_image_the_presets_image_stays_and_its_pull_is_in_the_budget(site_vars):
    for host in (SOV, BURST):
        for mutate in (_no_engine_image, lambda v: (_no_engine_image(v), _bigger({"disaggregation": "always"})(v))):
            for svc in kind(_rendered(site_vars, host, mutate), "LLMInferenceService"):
                for path, main in _engine_containers(svc):
                    assert "image" not in main, (host, path)
                # a data-parallel pool's worker runs the leader's pod, and the preset's image like it
                for pool in (svc["spec"], svc["spec"].get("prefill") or {}):
                    assert pool.get("worker") in (None, pool.get("template"))
    objs = _rendered(site_vars, BURST, _no_engine_image)
    (pis,) = kind(objs, "PinnedImageSet")
    assert [i["name"] for i in pis["spec"]["pinnedImages"]] == [site_vars[BURST][0]["models"][0]["artifact"]["uri"][6:]]
    # the first pod on a burst node pulls the preset's image: 10 GB at 10 Gbit/s (8 s) on top of 79 s
    (w,) = _intent(site_vars, BURST, mutate=_no_engine_image)["burst"]["warmup"]
    assert w["pinned"] and not w["engine_pinned"] and w["seconds"] == 87 and w["unpinned_seconds"] == 117
    assert "engine image pulled at 10 Gbit/s" in w["why"] and "sovereign_burst.engine_image" in w["why"]


def test_the_plan_states_the_warm_up_budget_with_its_reason(intents):
    (w,) = intents[BURST]["burst"]["warmup"]
    # 37.5 GB of FP8 weights at 2 GB/s + 60 s start (the engine image is pinned too); unpinned adds
    # (10 + 37.5) GB at 10 Gbit/s
    assert w["pinned"] and w["engine_pinned"] and w["seconds"] == 79 and w["unpinned_seconds"] == 117
    assert "2 GB/s" in w["why"] and "60 s engine start" in w["why"]
    lines = "\n".join(build_summary(intents[BURST]))
    assert "warm-up 79 s" in lines and w["why"] in lines
    # the budget starts at KEDA's decision, which comes up to a scrape and a poll (15 s each) after the queue
    # passed the threshold (measured 15.5-30.7 s: tests/autoscaling/test_activation.py)
    assert (w["detect_seconds"], w["first_token_seconds"]) == (30, 109)
    assert "first token from zero about 109 s" in lines and w["detect_why"] in lines


def test_the_first_token_from_zero_follows_the_polling_and_scrape_intervals(site_vars):
    def slower(v):
        v["serving_autoscaling_polling_seconds"] = 30
        v["observability_scrape_interval"] = "1m"

    (w,) = _intent(site_vars, BURST, mutate=slower)["burst"]["warmup"]
    assert (w["detect_seconds"], w["first_token_seconds"]) == (90, 79 + 90), w


def build_summary(intent):
    from ansible_collections.inference.blueprints.plugins.module_utils.intent import summary

    return summary.lines(intent)


# ------------------------------------------------------------------ the pin at render time
def _route_for(route: dict, path: str, headers: dict[str, str]) -> list[str]:
    """Backends of the rule Gateway API picks for a request: longest path prefix, then most header matches."""
    best, key = None, None
    for r in route["spec"]["rules"]:
        for m in r["matches"]:
            prefix = m["path"]["value"]
            if not path.startswith(prefix):
                continue
            if not all(
                headers.get(h["name"].lower()) == h["value"] for h in m.get("headers") or [] if h["type"] == "Exact"
            ):
                continue
            k = (len(prefix), len(m.get("headers") or []))
            if key is None or k > key:
                best, key = r, k
    return [b["name"] for b in best["backendRefs"]] if best else []


def test_only_burstable_classes_can_reach_the_burst_backend(objects):
    (route,) = kind(objects[SOV], "HTTPRoute")
    backends = {b["metadata"]["name"]: b for b in kind(objects[SOV], "Backend")}
    off = {n for n, b in backends.items() if b["spec"].get("fallback")}
    (onprem,) = set(backends) - off
    path = "/llm-sovereign/qwen-35b-a3b/v1/chat/completions"
    assert set(_route_for(route, path, {"x-inference-class": "public"})) == {onprem, *off}
    for headers in ({"x-inference-class": "regulated"}, {}, {"x-inference-class": "Public"}, {"x-other": "public"}):
        assert _route_for(route, path, headers) == [onprem], headers
    assert burst_pin.pin_violations(route["spec"]["rules"], onprem, "x-inference-class", ["public"]) == []


@pytest.mark.parametrize(
    "breaks",
    [
        "catch_all_to_burst",
        "regulated_header_to_burst",
        "regex_header_to_burst",
        "no_header_match_to_burst",
    ],
)
def test_the_render_time_pin_check_fails_on_a_regulated_route_to_a_burst_backend(objects, breaks):
    (route,) = kind(objects[SOV], "HTTPRoute")
    rules = copy.deepcopy(route["spec"]["rules"])
    burst_ref = rules[0]["backendRefs"][-1]
    if breaks == "catch_all_to_burst":
        rules[-1]["backendRefs"].append(burst_ref)
    elif breaks == "regulated_header_to_burst":
        rules[0]["matches"][0]["headers"][0]["value"] = "regulated"
    elif breaks == "regex_header_to_burst":
        rules[0]["matches"][0]["headers"][0].update(type="RegularExpression", value=".*")
    else:
        del rules[0]["matches"][0]["headers"]
    onprem = rules[-1]["backendRefs"][0]["name"]
    assert burst_pin.pin_violations(rules, onprem, "x-inference-class", ["public"])


def test_the_build_refuses_to_render_a_route_the_pin_check_rejects(site_vars, monkeypatch):
    real = burst_pin.pin_violations
    monkeypatch.setattr(
        burst_pin,
        "pin_violations",
        lambda rules, *a: real(
            [
                {
                    **rules[-1],
                    "backendRefs": [
                        *rules[-1]["backendRefs"],
                        {"group": "gateway.envoyproxy.io", "kind": "Backend", "name": "elsewhere"},
                    ],
                }
            ],
            *a,
        ),
    )
    errors = _refused(site_vars, SOV)
    assert "matches" in " ".join(errors.values()) or "burstable" in " ".join(errors.values())


def test_the_admission_policy_names_the_on_prem_backend_and_the_burstable_classes(objects):
    # the sovereign namespace's policy, and the one over other namespaces' routes on the shared gateway
    vap, shared = sorted(kind(objects[SOV], "ValidatingAdmissionPolicy"), key=lambda o: len(o["metadata"]["name"]))
    binding, _ = sorted(
        kind(objects[SOV], "ValidatingAdmissionPolicyBinding"), key=lambda o: len(o["metadata"]["name"])
    )
    assert shared["metadata"]["name"] == vap["metadata"]["name"] + "-shared-gateway"
    assert "namespace" not in shared["metadata"]  # cluster-scoped
    assert binding["spec"]["policyName"] == vap["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"] and vap["spec"]["failurePolicy"] == "Fail"
    route_rule = vap["spec"]["validations"][0]["expression"]
    assert "h.value in ['public']" in route_rule and "example-sovereign-burst-onprem" in route_rule
    (pol,) = kind(objects[SOV], "BackendTrafficPolicy")
    assert pol["spec"]["healthCheck"]["passive"]["maxEjectionPercent"] == 100


def test_an_engine_image_needs_its_vllm_version_and_the_plans_follow_the_stated_version(site_vars, intents):
    """The planner cannot read a version from a digest: with engine_image the site says which vLLM it is, and every
    plan of both clusters is written for that version (vLLM 0.24: --no-enable-X, no DCP on the hybrid model)."""
    for host in (SOV, BURST):
        values = copy.deepcopy(site_vars[host][0])
        values.pop("vllm_version")
        names = [n for n in site_vars[host][1] if n != "vllm_version"]
        with pytest.raises(SchemaError) as e:
            build.site_intent(host, values, names, BDIR)
        msg = dict(e.value.errors)["vllm_version"]
        assert "required with sovereign_burst.engine_image" in msg and "supported: 0.24, 0.33" in msg, msg
        assert intents[host]["engine"] == {"vllm_version": "0.24.0", "stated": True, "image": ENGINE}
        for entry in intents[host]["plans"]:
            assert entry["plan"]["vllm_version"] == "0.24.0"
    # without an engine image the presets' engine runs, and the default version needs no statement
    values = copy.deepcopy(site_vars[SOV][0])
    values.pop("vllm_version")
    _no_engine_image(values)
    names = [n for n in site_vars[SOV][1] if n != "vllm_version"]
    assert build.site_intent(SOV, values, names, BDIR)["engine"]["vllm_version"] == "0.33.0"


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("0.10.0", "no flag set or compatibility table for 0.10 (supported: 0.24, 0.33)"),
        ("latest", "is not a vLLM version"),
    ],
)
def test_a_vllm_version_without_a_flag_set_is_refused_by_name(site_vars, value, says):
    refused = _refused(site_vars, SOV, vllm_version=value)
    assert says in refused["vllm_version"], refused
