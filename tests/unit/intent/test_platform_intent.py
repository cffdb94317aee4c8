"""The platform part of the deployment intent (intent/platform.py), its bind step and its templates.

No cluster: intents come from the example inventories as the site action builds them; cluster
reads are dicts in the shape inference.blueprints.cluster_facts returns.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli, ownership
from ansible_collections.inference.blueprints.plugins.module_utils import cluster_facts as cf
from ansible_collections.inference.blueprints.plugins.module_utils.intent import platform
from ansible_collections.inference.blueprints.plugins.module_utils.intent.schema import SchemaError
from ansible_collections.inference.blueprints.plugins.plugin_utils import platform as render_platform

from tests.simulator.simulator import csv_object

ROOT = Path(__file__).resolve().parents[3]
INVENTORIES = ROOT / "inventories"
ROLES = ROOT / "collections/ansible_collections/inference/blueprints/roles"
PLATFORM_ROLES = (
    "nfd",
    "network_operator",
    "gpu_operator",
    "openshift_ai",
    "autoscaling",
    "image_prewarm",
    "olm_operator",
)


@pytest.fixture(scope="module")
def chat():
    return cli.site_intents(str(INVENTORIES / "example-chat"), None)["chat-east-1"]


@pytest.fixture(scope="module")
def edge():
    return cli.site_intents(str(INVENTORIES / "example-edge-fleet"), None)["store-berlin-001"]


def rebuilt(intent: dict, facts=None, **changes) -> dict:
    """The intent with ``changes`` (dotted paths) applied and its platform part built again."""
    out = copy.deepcopy(intent)
    for path, value in changes.items():
        *head, last = path.split(".")
        node = out
        for key in head:
            node = node[int(key)] if key.isdigit() else node[key]
        node[last] = value
    return platform.bind(out, facts)


def facts(**over) -> dict:
    """A cluster read of an OpenShift 4.22 cluster that serves what ``served`` says."""
    out = {
        "source": "cluster",
        "openshift": True,
        "openshift_version": "4.22.0",
        "single_node": False,
        "served": {"operators.coreos.com": ["v1alpha1", "v1"], "machineconfiguration.openshift.io": ["v1"]},
        "api_resources": {},
        "crd_fields": {},
        "nodes": [],
        "subscriptions": {},
        "csvs": {},
        "packagemanifests": {},
        "machine_config_pools": [{"name": "worker", "role": "worker", "machine_count": 2}],
        "cluster_monitoring_config": None,
        "warnings": [],
    }
    out.update(over)
    return out


def objects(intent: dict, phase: str = "all", **kw) -> list[dict]:
    return render_platform.render_phase(intent, phase, **kw)["objects"]


def one(objs: list[dict], kind: str) -> dict:
    found = [o for o in objs if o["kind"] == kind]
    assert len(found) == 1, (kind, [o["metadata"]["name"] for o in found])
    return found[0]


# ---------------------------------------------------------------------------------- RDMA, once


def test_rdma_is_decided_once_chat_needs_it_edge_does_not(chat, edge):
    for intent, needed in ((chat, True), (edge, False)):
        p = intent["platform"]
        assert p["rdma"]["needed"] is needed
        # every reader of the decision follows it: the components, GPUDirect, the requirement
        assert ("network_operator" in p["components"]) is needed
        assert p["gpu_operator"]["rdma"] is needed
        assert bool(p["requirements"]["rdma"]) is needed
        policy = one(objects(intent, "operands"), "ClusterPolicy")
        assert policy["spec"]["driver"]["rdma"]["enabled"] is needed
    # the chat site's P/D KV crosses nodes over NIXL/UCX on RDMA: that, not its RDMA NICs, installs the stack
    assert "qwen-chat moves KV between pods over RDMA" in chat["platform"]["rdma"]["why"]
    assert "hardware.interconnect" not in chat["platform"]["rdma"]["why"]


def test_rdma_nics_alone_install_no_network_operator(chat):
    """A site with RDMA NICs whose models keep their traffic inside a node (no P/D KV over RDMA, no engine
    over pods): no network operator, no GPUDirect RDMA, no RDMA requirement (issue 24)."""
    assert chat["hardware"]["interconnect"] == "rdma"
    p = rebuilt(chat, **{"serving.models.0.rdma": False, "serving.models.0.rdma_why": None})["platform"]
    assert p["rdma"]["needed"] is False
    assert p["rdma"]["why"].startswith("the nodes have RDMA NICs (hardware.interconnect rdma), but no model")
    assert "network_operator" not in p["components"]
    assert p["gpu_operator"]["rdma"] is False and p["requirements"]["rdma"] is False


def test_rdma_follows_a_model_that_moves_kv_over_rdma(edge):
    # an edge site whose model moves KV over RDMA (the serving intent's per-model decision)
    why = f"{edge['serving']['models'][0]['name']} moves KV between pods over RDMA (NixlConnector, ucx-rdma)"
    p = rebuilt(edge, **{"serving.models.0.rdma": True, "serving.models.0.rdma_why": why})["platform"]
    assert p["rdma"]["needed"] is True
    assert p["rdma"]["why"] == why
    assert p["gpu_operator"]["rdma"] is True
    # the edge blueprint has no network operator: the driver comes from the host
    assert "network_operator" not in p["components"] and p["gpu_operator"]["use_host_mofed"] is True
    assert p["requirements"]["rdma"] == {"nodes": 1, "why": p["rdma"]["why"]}


def test_rdma_options_override_the_decision(chat):
    p = rebuilt(chat, **{"options.gpu_operator.gpu_operator_rdma": "false"})["platform"]
    assert p["rdma"]["needed"] is True and p["gpu_operator"]["rdma"] is False


# ---------------------------------------------------------------------------------- bind


def test_bind_without_facts_takes_the_newest_apis(chat):
    p = chat["platform"]
    assert p["cluster"]["source"] is None and p["cluster"]["served"] is None
    assert p["openshift_ai"]["api_version"] == "v2"
    assert p["gpu_operator"]["kernel_module_field"] == "kernelModuleType"
    assert p["network_operator"]["nv_ipam"] is not None
    assert p["nfd"]["rule"]["api_version"] == "nfd.k8s-sigs.io/v1alpha1"
    assert p["image_prewarm"]["mode"] == "pinned"
    # nothing is known about the catalog: OLM resolves the default channel, nothing names the CSV
    assert all(o["channel"] is None and o["csv"] is None for o in p["operators"])
    objs = objects(chat)
    assert one(objs, "DataScienceCluster")["apiVersion"] == "datasciencecluster.opendatahub.io/v2"
    assert "kernelModuleType" in one(objs, "ClusterPolicy")["spec"]["driver"]
    assert "channel" not in one([o for o in objs if o["metadata"]["name"] == "nfd"], "Subscription")["spec"]


def test_bind_picks_the_served_versions_and_schemas(chat):
    old = facts(
        served={
            **facts()["served"],
            "datasciencecluster.opendatahub.io": ["v1"],
            "dscinitialization.opendatahub.io": ["v1"],
            "nfd.openshift.io": ["v1", "v1alpha1"],
        },
        crd_fields={
            platform.CLUSTERPOLICY_CRD: ["spec.driver", "spec.driver.useOpenKernelModules"],
            platform.NICCLUSTERPOLICY_CRD: ["spec.ofedDriver"],
            platform.DSC_CRD: ["spec.components.kserve", "spec.components.ray", "spec.components.codeflare"],
        },
    )
    p = platform.bind(chat, old)["platform"]
    assert p["openshift_ai"]["api_version"] == "v1"
    assert p["openshift_ai"]["dsc"]["raw_deployment"] is True
    # only the components the served DataScienceCluster schema knows
    assert p["openshift_ai"]["dsc"]["removed"] == ["ray", "codeflare"] and p["openshift_ai"]["dsc"]["nim"] is False
    assert p["gpu_operator"]["kernel_module_field"] == "useOpenKernelModules"
    assert p["network_operator"]["nv_ipam"] is None
    assert p["nfd"]["rule"]["api_version"] == "nfd.openshift.io/v1alpha1"
    objs = objects(platform.bind(chat, old))
    dsc = one(objs, "DataScienceCluster")
    assert dsc["apiVersion"] == "datasciencecluster.opendatahub.io/v1"
    assert set(dsc["spec"]["components"]) == {"dashboard", "kserve", "ray", "codeflare"}
    assert one(objs, "DSCInitialization")["spec"]["serviceMesh"] == {"managementState": "Removed"}
    assert one(objs, "ClusterPolicy")["spec"]["driver"]["useOpenKernelModules"] is True
    assert "nvIpam" not in one(objs, "NicClusterPolicy")["spec"]
    # the waits follow the chosen version
    dsc_wait = next(w for w in p["waits"]["operands"] if w["kind"] == "DataScienceCluster")
    assert dsc_wait["apiVersion"] == "datasciencecluster.opendatahub.io/v1"


def test_bind_reads_the_catalog_and_the_installed_operators(chat):
    manifests = {
        "nfd": {"default_channel": "stable", "heads": {"stable": "nfd.v4.22.0"}},
        "rhods-operator": {"default_channel": "stable-2.25", "heads": {"stable-2.25": "rhods-operator.2.25.1"}},
    }
    subs = {"openshift-nfd/nfd": {"installed_csv": "nfd.v4.21.3", "state": "AtLatestKnown", "created_by": None}}
    csvs = {"openshift-nfd/nfd.v4.21.3": {"phase": "Succeeded"}}
    p = platform.bind(chat, facts(packagemanifests=manifests, subscriptions=subs, csvs=csvs))["platform"]
    ops = {o["package"]: o for o in p["operators"]}
    # channel from the catalog, the CSV to wait for: installed and at the latest, or the channel's head
    assert ops["nfd"]["channel"] == "stable" and ops["nfd"]["csv"] == "nfd.v4.21.3" and ops["nfd"]["ready"]
    assert ops["rhods-operator"]["channel"] == "stable-2.25" and ops["rhods-operator"]["csv"] == "rhods-operator.2.25.1"
    # OpenShift AI 2.x is about to be installed: DSC v1 although nothing serves it yet
    assert p["openshift_ai"]["api_version"] == "v1"
    # a Subscription the collection did not create is not removed by the teardown
    assert ops["nfd"]["ours"] is False and ops["rhods-operator"]["ours"] is True
    assert p["operators_pending"] == [c for c in p["components"] if c not in ("nfd", "image_prewarm")]
    waits = {(w["kind"], w["name"]): w for w in p["waits"]["operators"]}
    assert waits[("ClusterServiceVersion", "nfd.v4.21.3")]["value"] == "Succeeded"
    assert waits[("Subscription", "nfd")]["value"] == "AtLatestKnown"
    assert waits[("Subscription", "nfd")]["timeout"] == chat["options"]["nfd"]["nfd_timeout"]
    assert ("ClusterServiceVersion", "rhods-operator.2.25.1") in waits


def test_a_subscription_moved_to_another_channel_waits_for_the_new_head(chat):
    """Its status still says AtLatestKnown with the old channel's CSV until OLM resolves the new channel."""
    manifests = {"nfd": {"default_channel": "stable", "heads": {"stable": "nfd.v4.22.0", "beta": "nfd.v4.23.0"}}}
    subs = {
        "openshift-nfd/nfd": {
            "installed_csv": "nfd.v4.22.0",
            "state": "AtLatestKnown",
            "channel": "stable",
            "created_by": None,
        }
    }
    csvs = {"openshift-nfd/nfd.v4.22.0": {"phase": "Succeeded"}}
    read = facts(packagemanifests=manifests, subscriptions=subs, csvs=csvs)
    same = {o["package"]: o for o in platform.bind(chat, read)["platform"]["operators"]}["nfd"]
    assert same["csv"] == "nfd.v4.22.0" and same["ready"]
    moved = copy.deepcopy(chat)
    moved["options"]["nfd"]["nfd_channel"] = "beta"
    op = {o["package"]: o for o in platform.bind(moved, read)["platform"]["operators"]}["nfd"]
    assert op["channel"] == "beta" and op["csv"] == "nfd.v4.23.0" and not op["ready"]


def test_bind_is_a_pure_function_of_the_intent_and_the_read(chat):
    f1 = facts(single_node=True)
    f2 = facts(served={**facts()["served"], "datasciencecluster.opendatahub.io": ["v1"]})
    assert platform.bind(platform.bind(chat, f1), f2) == platform.bind(chat, f2)
    assert platform.bind(platform.bind(chat, f1), None) == chat


def test_topology_from_the_read_or_the_inventory(chat, edge):
    assert edge["platform"]["image_prewarm"]["pools"] == ["master"]  # one node in the inventory
    assert chat["platform"]["image_prewarm"]["pools"] == ["worker"]
    sno = platform.bind(chat, facts(single_node=True))["platform"]
    assert sno["image_prewarm"]["pools"] == ["master"]
    assert sno["network_operator"]["ofed"]["auto_upgrade"] is False  # DOCA auto-upgrade fails on SNO
    old = platform.bind(chat, facts(openshift_version="4.18.9"))["platform"]["image_prewarm"]
    assert old["mode"] == "daemonset" and old["daemonset"]["pulls"][0]["image"] == old["images"][0]


def test_operands_of_unserved_apis_are_left_out_once_their_operator_is_installed(chat):
    served = {
        **facts()["served"],
        "mellanox.com": ["v1alpha1"],
        "nvidia.com": ["v1"],
        "nfd.openshift.io": ["v1"],
        "nfd.k8s-sigs.io": ["v1alpha1"],
        "operator.openshift.io": ["v1"],
        "keda.sh": ["v1alpha1"],
        "gateway.networking.k8s.io": ["v1"],
        "datasciencecluster.opendatahub.io": ["v1"],
        "dscinitialization.opendatahub.io": ["v1"],
    }
    # operator.openshift.io is served (Ingress controllers) but has no LeaderWorkerSetOperator yet
    kinds = {"operator.openshift.io/v1/IngressController": {}}
    before = platform.bind(chat, facts(served=served, api_resources=kinds))
    assert render_platform.render_phase(before, "operands")["dropped"] == []  # operators not installed yet
    after = platform.bind(chat, facts(served=served, api_resources=kinds), operators_ready=True)
    out = render_platform.render_phase(after, "operands")
    dropped = {d["kind"]: d["why"] for d in out["dropped"]}
    assert dropped == {
        "IPPool": "the cluster does not serve nv-ipam.nvidia.com/v1alpha1",
        "LeaderWorkerSetOperator": "the cluster serves operator.openshift.io/v1 without a kind LeaderWorkerSetOperator",
    }
    assert {o["kind"] for o in out["objects"]} >= {"NicClusterPolicy", "ClusterPolicy", "DataScienceCluster"}
    dry = platform.bind(chat, facts(served=served, api_resources=kinds), dry_run=True)
    assert "check mode" in render_platform.render_phase(dry, "operands")["dropped"][0]["why"]


# ---------------------------------------------------------------------------------- requirements


def test_requirements_list_what_the_plans_need(chat, edge):
    req = chat["platform"]["requirements"]
    plan_gpus = sum(
        int(p.get("gpus") or 0) or int(p.get("replicas") or 1) * int(p.get("gpus_per_replica") or 1)
        for e in chat["plans"]
        for p in (e["plan"]["pools"] or {}).values()
        if isinstance(p, dict)
    )
    assert req["gpus"] == [
        {
            "gpu": "h100",
            "count": plan_gpus,
            "per_pod": max(
                w["gpus_per_pod"] for m in chat["serving"]["models"] for w in (m["main"], m["prefill"]) if w
            ),
            "for": req["gpus"][0]["for"],
        }
    ]
    assert (req["openshift_min"], req["openshift_max"]) == ("4.19", "4.22")
    assert {(a["group"], a["kind"]) for a in req["apis"]} == {
        ("operators.coreos.com", "Subscription"),
        ("monitoring.coreos.com", "ServiceMonitor"),
        ("gateway.networking.k8s.io", "Gateway"),
    }
    # the serving APIs come with OpenShift AI and KEDA on this site: their CRDs are waited for instead
    installed = {a["kind"]: a["installed_by"] for a in req["apis_installed_here"]}
    assert installed["LLMInferenceService"] == "openshift_ai"
    crd_waits = {
        w["name"]: w["component"]
        for w in chat["platform"]["waits"]["operands"]
        if w["kind"] == "CustomResourceDefinition"
    }
    assert crd_waits["llminferenceservices.serving.kserve.io"] == "openshift_ai"
    assert edge["platform"]["requirements"]["rdma"] is False


def test_serving_apis_follow_what_the_models_use(edge):
    base = {a["kind"] for a in edge["platform"]["requirements"]["apis_installed_here"]}
    assert base == {"LLMInferenceService"}
    changes = {
        "serving.models.0.disaggregated": True,
        "serving.models.0.main.worker": {},
        "serving.models.0.scheduler": {"objectives": [{"name": "x"}]},
    }
    req = rebuilt(edge, **changes)["platform"]["requirements"]
    got = {(a["group"], a["kind"]) for a in req["apis_installed_here"]}
    assert got == {
        ("serving.kserve.io", "LLMInferenceService"),
        ("inference.networking.k8s.io", "InferencePool"),
        ("inference.networking.x-k8s.io", "InferencePool"),  # KServe v0.20.0's P/D sidecar looks it up there
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"),
        ("llm-d.ai", "InferenceObjective"),
    }
    # autoscaled models: KEDA comes with the autoscaling component, which serving_autoscaling brings
    auto = rebuilt(
        edge,
        **{
            "serving.autoscaling": {"scaled_objects": [{"name": "x"}]},
            "components": [*edge["components"], "serving_autoscaling"],
        },
    )["platform"]
    assert "autoscaling" in auto["components"]
    keda = [a for a in auto["requirements"]["apis_installed_here"] if a["kind"] == "ScaledObject"]
    assert keda == [{**keda[0], "group": "keda.sh", "installed_by": "autoscaling", "crd": "scaledobjects.keda.sh"}]
    # a site without OpenShift AI: preflight checks that something else serves LLMInferenceService
    bare = rebuilt(edge, components=["preflight", "model_service"])["platform"]
    gap = [a for a in bare["requirements"]["apis"] if a["kind"] == "LLMInferenceService"]
    assert gap and "no platform component of this site installs it" in gap[0]["for"]
    assert bare["requirements"]["apis_installed_here"] == []


def test_preflight_evaluates_the_intent_requirements(chat):
    req = cf.requirements_from_plans([], {}, [], chat["platform"]["requirements"])
    assert req["gpus"] == chat["platform"]["requirements"]["gpus"]
    sno = cf.summarize(
        facts(
            nodes=[
                {
                    "name": "sno",
                    "gpu": {"present": True, "product": "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "count": 1,
                            "count_known": True},
                    "nic": {"rdma": False, "mellanox": False},
                }
            ],
            storage_classes=[],
        )
    )  # fmt: skip
    unmet = cf.evaluate(sno, req)
    assert any("x h100 needed" in u and "0 found" in u for u in unmet), unmet
    assert any(u.startswith("RDMA: the plan uses RDMA (qwen-chat moves KV between pods over RDMA") for u in unmet)
    assert any("API group gateway.networking.k8s.io is not served" in u for u in unmet), unmet


def test_preflight_checks_gpus_per_node_and_kinds():
    node = {"name": "n", "gpu": {"present": True, "product": "NVIDIA-H100-80GB-HBM3", "count": 4, "count_known": True},
            "nic": {"rdma": False, "mellanox": False}}  # fmt: skip
    f = cf.summarize(facts(nodes=[node, {**node, "name": "m"}], storage_classes=[]))
    unmet = cf.evaluate(f, {"gpus": [{"gpu": "h100", "count": 8, "per_pod": 8, "for": "m decode 1x8"}]})
    assert unmet == ["GPUs: a pod needs 8 x h100 on one node (m decode 1x8); the most h100 GPUs on one node is 4"]
    f["served"]["operator.openshift.io"] = ["v1"]
    f["api_resources"] = {"operator.openshift.io/v1/IngressController": {}}
    api = {"group": "operator.openshift.io", "versions": ["v1"], "kind": "LeaderWorkerSetOperator", "for": "LWS"}
    assert cf.evaluate(f, {"apis": [api]}) == [
        "API operator.openshift.io/v1 is served without the kind LeaderWorkerSetOperator (needed for LWS)"
    ]


# ---------------------------------------------------------------------------------- operands


def test_prewarm_images_pinned_split_per_pool_and_chunk(chat):
    images = [f"quay.io/x/i{i}@sha256:{str(i) * 64}" for i in range(3)]
    p = rebuilt(
        chat,
        **{
            "options.image_prewarm.image_prewarm_images": images,
            "options.image_prewarm.image_prewarm_max_per_set": 2,
            "options.image_prewarm.image_prewarm_pools": ["worker", "gpu"],
        },
    )["platform"]["image_prewarm"]
    assert p["images"][:3] == images  # then the model artifacts (oci://, without the scheme)
    assert p["images"][3].startswith("registry.redhat.io/") and len(p["images"]) == 4
    assert [(s["name"], len(s["images"])) for s in p["pinned_image_sets"]] == [
        ("inference-blueprints-worker-0", 2),
        ("inference-blueprints-worker-1", 2),
        ("inference-blueprints-gpu-0", 2),
        ("inference-blueprints-gpu-1", 2),
    ]
    with pytest.raises(SchemaError, match="pinned by digest.*quay.io/x/tagged:1"):
        rebuilt(chat, **{"options.image_prewarm.image_prewarm_images": ["quay.io/x/tagged:1"]})


def test_pinned_images_are_waited_for_on_every_machine_of_the_pool(chat):
    p = platform.bind(chat, facts())["platform"]
    wait = next(w for w in p["waits"]["operands"] if w["kind"] == "MachineConfigPool")
    assert (wait["name"], wait["field"], wait["value"]) == ("worker", platform.PINNED_SYNC_FIELD, 2)


def test_monitoring_config_keeps_other_settings_and_is_kept_by_the_teardown(chat):
    theirs = "prometheusK8s:\n  retention: 15d\n"
    p = platform.bind(chat, facts(cluster_monitoring_config=theirs))["platform"]["autoscaling"]["monitoring"]
    assert p["config"] == "enableUserWorkload: true\nprometheusK8s:\n  retention: 15d\n"
    assert p["removable"] is False
    bound = platform.bind(chat, facts(cluster_monitoring_config=theirs))
    removal = render_platform.render_phase(bound, "operands", state="absent")["objects"]
    assert not [o for o in removal if o["kind"] == "ConfigMap"]
    ours = platform.bind(chat, facts(cluster_monitoring_config="enableUserWorkload: true\n"))
    removal = render_platform.render_phase(ours, "operands", state="absent")["objects"]
    assert [o["metadata"]["name"] for o in removal if o["kind"] == "ConfigMap"] == ["cluster-monitoring-config"]


def test_removal_lists_installed_csvs_of_our_operators_only(chat):
    subs = {
        "openshift-nfd/nfd": {"installed_csv": "nfd.v4.22.0", "state": "AtLatestKnown", "created_by": None},
        "nvidia-gpu-operator/gpu-operator-certified": {
            "installed_csv": "gpu-operator-certified.v26.7.0",
            "state": "AtLatestKnown",
            "created_by": "example-chat",
        },
    }
    bound = platform.bind(chat, facts(subscriptions=subs))
    out = render_platform.render_phase(bound, "operators", state="absent")
    assert out["waits"] == []
    csvs = [o["metadata"]["name"] for o in out["objects"] if o["kind"] == "ClusterServiceVersion"]
    assert csvs == ["gpu-operator-certified.v26.7.0"]
    # NFD's Subscription was not created by the collection: nothing of that operator is removed
    assert not [o for o in out["objects"] if o["metadata"].get("namespace") == "openshift-nfd"]
    # present: no CSV among the objects
    assert not [o for o in objects(bound, "operators") if o["kind"] == "ClusterServiceVersion"]


def test_components_select_operators_and_operands(chat):
    out = render_platform.render_phase(chat, "all", components=["gpu_operator"])
    assert {o["kind"] for o in out["objects"]} == {"Namespace", "OperatorGroup", "Subscription", "ClusterPolicy"}
    assert {w["component"] for w in out["waits"]} == {"gpu_operator"}
    with pytest.raises(SchemaError, match="not platform components of this site: gitops"):
        render_platform.render_phase(chat, "all", components=["gitops"])


def test_gitops_delivery_brings_the_gitops_operator(chat):
    p = rebuilt(chat, **{"site.delivery": "gitops"})["platform"]
    assert "gitops" in p["components"]
    assert [o["package"] for o in p["operators"] if o["component"] == "gitops"] == ["openshift-gitops-operator"]


# ---------------------------------------------------------------------------------- templates


@pytest.mark.parametrize("role", PLATFORM_ROLES)
def test_platform_templates_are_shape_only(role):
    text = (ROLES / role / "templates" / "objects.yml.j2").read_text()
    # the only filter places a value; no arithmetic, no string building, no JSON from strings
    assert set(re.findall(r"\|\s*(\w+)", text)) <= {"to_json"}, role
    for expr in re.findall(r"{{(.*?)}}", text):
        assert not re.search(r"[+*/%~]|\s-\s", expr.replace("st.command + [m.repo]", "")), (role, expr)
    for stmt in re.findall(r"{%-?\s*set\s+(.*?)-?%}", text):
        assert re.fullmatch(r"\w+ = (intent\.platform(\.\w+)?|\w+\.\w+)\s*", stmt), (role, stmt)
    assert not (ROLES / role / "defaults").exists(), f"{role}: defaults live in meta/argument_specs.yml only"


@pytest.mark.parametrize("role", [r for r in PLATFORM_ROLES if r != "olm_operator"] + ["preflight"])
def test_argument_specs_hold_only_the_roles_own_options(role):
    import yaml

    spec = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]
    names = list(spec.get("options") or {})
    assert names and all(n.startswith(f"{role}_") for n in names), names
    assert all("default" in o for o in spec["options"].values()), role


# ---------------------------------------------------------------------------------- the engine's vLLM version

RHODS_350 = {
    **csv_object(
        "redhat-ods-operator",
        "rhods-operator.3.5.0",
        "3.5.0",
        {
            "OTHER": "x",
            cf.ENGINE_IMAGE_ENV: "registry.redhat.io/rhaii/vllm-cuda-rhel9@sha256:" + "b" * 64,
            cf.ENGINE_VERSION_ENV: "0.24.0+rhaiv.9",
        },
    ),
    "status": {"phase": "Succeeded"},
}


def _with_csv(csv: dict) -> dict:
    key = f"{csv['metadata']['namespace']}/{csv['metadata']['name']}"
    entry = {"name": csv["metadata"]["name"], "phase": csv["status"]["phase"], "engine": cf.csv_engine(csv)}
    return cf.summarize(facts(csvs={key: entry}, storage_classes=[]))


def test_the_csv_names_the_presets_engine_and_a_csv_without_it_names_none():
    assert cf.csv_engine(RHODS_350) == {
        "image": "registry.redhat.io/rhaii/vllm-cuda-rhel9@sha256:" + "b" * 64,
        "vllm_version": "0.24.0+rhaiv.9",
    }
    bare = copy.deepcopy(RHODS_350)
    bare["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"][0]["env"] = []
    assert cf.csv_engine(bare) is None
    assert cf.csv_engine({"spec": {}}) is None


def test_plans_for_another_vllm_than_openshift_ais_presets_are_unmet_with_the_fix(chat):
    engine = chat["platform"]["requirements"]["engine"]
    # the example chat site states no version: its plans are the planner's default, vLLM 0.33.0
    assert engine["vllm_version"] == "0.33.0" and engine["stated"] is False and engine["image"] is None
    assert set(engine["supported"]) == {"0.24", "0.33"}
    unmet = cf.evaluate(_with_csv(RHODS_350), {"engine": engine})
    assert unmet == [
        "vLLM engine: the plans are written for vLLM 0.33.0 (the default; the site sets no vllm_version), but the "
        "LLMInferenceService presets of rhods-operator.3.5.0 (redhat-ods-operator/rhods-operator.3.5.0) run vLLM "
        f'0.24.0+rhaiv.9 ({cf.ENGINE_VERSION_ENV}), which may refuse their flags; set vllm_version: "0.24.0" so '
        "the plans use that engine's flags and features"
    ]
    # the site states the presets' version: met; a pinned engine image: the site's statement holds
    assert cf.evaluate(_with_csv(RHODS_350), {"engine": {**engine, "vllm_version": "0.24.0", "stated": True}}) == []
    assert cf.evaluate(_with_csv(RHODS_350), {"engine": {**engine, "image": "r/x@sha256:" + "c" * 64}}) == []
    # a release whose engine the collection has no flags for: say which releases would do
    newer = copy.deepcopy(RHODS_350)
    newer["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"][0]["env"][2][
        "value"
    ] = "0.40.1"
    (line,) = cf.evaluate(_with_csv(newer), {"engine": engine})
    assert "run vLLM 0.40.1" in line and "no flag set for vLLM 0.40 (supported: 0.24, 0.33)" in line


def test_an_unreadable_presets_engine_is_a_warning_not_a_pass_in_silence(chat):
    f = cf.summarize(facts(storage_classes=[]))
    assert cf.evaluate(f, {"engine": chat["platform"]["requirements"]["engine"]}) == []
    assert any(w.startswith("vLLM engine: no CSV names the vLLM version") for w in f["warnings"]), f["warnings"]


def test_the_platform_takes_over_what_its_own_operators_make_and_what_it_merges_into(chat):
    """OpenShift AI's operator creates default-dsci itself once installed: when this site installs the operator,
    the DSCI is the site's (derived), so the operand apply does not stop on it and a teardown removes it; when
    someone else installed the operator, it is not. An existing cluster-monitoring-config is merged into by design
    (adopted: kept, its settings with it); one the cluster lacks is created, and so the site's."""
    theirs = "prometheusK8s:\n  retention: 15d\n"
    bound = platform.bind(chat, facts(cluster_monitoring_config=theirs))
    own = ownership.of_intent(bound)
    assert "DSCInitialization/default-dsci" in own["derived"]
    assert "ConfigMap/openshift-monitoring/cluster-monitoring-config" in own["adopt"]
    dsci = next(o for o in objects(bound, "operands") if o["kind"] == "DSCInitialization")
    assert ownership.classify(dsci, {**dsci, "metadata": {"name": "default-dsci"}}, own) == ownership.OURS
    subs = {"redhat-ods-operator/rhods-operator": {"installed_csv": "rhods-operator.3.5.0", "created_by": None}}
    foreign = ownership.of_intent(platform.bind(chat, facts(subscriptions=subs)))
    assert "DSCInitialization/default-dsci" not in foreign["derived"]
    assert ownership.classify(dsci, {**dsci, "metadata": {"name": "default-dsci"}}, foreign) == ownership.FOREIGN
    none = ownership.of_intent(platform.bind(chat, facts()))
    assert not [a for a in none["adopt"] if "cluster-monitoring-config" in a]
