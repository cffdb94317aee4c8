"""The real KServe LLMInferenceService controller on the local control plane (issue 8).

One instance with the controller on (``cluster_factory(..., kserve=True)``): hand-written
LLMInferenceServices go in, and the tests assert on what KServe itself creates from them and
from its own presets (read from the same pinned KServe module), and on the status KServe
concludes from the pods kube-scheduler binds and kwok runs (and the LeaderWorkerSet controller makes)
and from what the simulator plays for the Gateway controller.

This module is the upstream-only path: it runs upstream KServe v0.20.0 (``kserve_flavor="upstream"``,
``kserve/go.mod``), not OpenShift AI's build that the other serving tests run (docs/upstream.md;
tests/controlplane/test_kserve_rhoai.py shows what OpenShift AI's build does on top).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from kubernetes.utils.quantity import parse_quantity

from controlplane import kserve_controller
from controlplane.cluster import DEFAULT_PROFILE, ControlPlane, ControlPlaneError, _alive

pytestmark = pytest.mark.cluster

HERE = Path(__file__).resolve().parent
UPSTREAM = "upstream"
GW_NS, GW_NAME = kserve_controller.INGRESS_GATEWAY.split("/")
IMAGE = "registry.example/vllm@sha256:" + "2" * 64
RESOURCES = {
    "limits": {"nvidia.com/gpu": "1", "cpu": "8", "memory": "64Gi"},
    "requests": {"nvidia.com/gpu": "1", "cpu": "4", "memory": "32Gi"},
}
ROUTER = {"gateway": {}, "route": {}, "scheduler": {}}
# An inline scheduler config of our own (EndpointPickerConfig, as the inference_scheduler role
# writes them): KServe must pass it to the endpoint picker instead of generating one.
EPP_CONFIG = {
    "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
    "kind": "EndpointPickerConfig",
    "plugins": [
        {"type": "single-profile-handler"},
        {"type": "prefix-cache-scorer"},
        {"type": "queue-scorer"},
        {"type": "max-score-picker"},
    ],
    "schedulingProfiles": [
        {
            "name": "default",
            "plugins": [
                {"pluginRef": "prefix-cache-scorer", "weight": 5},
                {"pluginRef": "queue-scorer", "weight": 1},
                {"pluginRef": "max-score-picker"},
            ],
        }
    ],
}


# ---------------------------------------------------------------------- helpers
def wait_for(pred, timeout=60.0, interval=0.2, what="condition"):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def get(cp, *args) -> dict | None:
    res = cp.kubectl("get", *args, "-o", "json")
    return json.loads(res.stdout) if res.returncode == 0 else None


def must_get(cp, *args) -> dict:
    obj = wait_for(lambda: get(cp, *args), timeout=30, what=" ".join(args))
    return obj


def apply(cp, *objs: dict):
    return cp.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objs))


def container(name="main", **extra) -> dict:
    return {"name": name, "image": IMAGE, "resources": RESOURCES} | extra


def llmisvc(name: str, ns: str, **spec) -> dict:
    return {
        "apiVersion": "serving.kserve.io/v1alpha2",
        "kind": "LLMInferenceService",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"model": {"uri": "hf://Qwen/Qwen3-0.6B", "name": "Qwen/Qwen3-0.6B"}} | spec,
    }


def contains(have, want, quantities: bool = False) -> bool:
    """have holds every field of want (the API server adds defaults, canonicalizes quantities)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(
            k in have and contains(have[k], v, quantities or k in ("limits", "requests")) for k, v in want.items()
        )
    if isinstance(want, list):
        return isinstance(have, list) and len(have) == len(want) and all(map(contains, have, want))
    if quantities:
        return parse_quantity(have) == parse_quantity(want)
    return have == want


def create_raw(cp, obj: dict) -> tuple[int, str]:
    """POST obj to the API server; (HTTP status, Status message) of the answer."""
    from kubernetes.client.rest import ApiException
    from simulator.kube import request

    md = obj["metadata"]
    path = f"/apis/{obj['apiVersion']}/namespaces/{md['namespace']}/llminferenceservices"
    try:
        request(cp.api_client, "POST", path, body=obj)
    except ApiException as e:
        return e.status, json.loads(e.body)["message"]
    return 201, ""


def conditions(obj: dict) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


def wait_ready(cp, ns: str, name: str, timeout=90.0) -> dict:
    def ready():
        obj = get(cp, "llminferenceservice", name, "-n", ns)
        return obj if obj and conditions(obj).get("Ready") == "True" else None

    try:
        return wait_for(ready, timeout=timeout, what=f"LLMInferenceService {ns}/{name} Ready")
    except AssertionError:
        obj = get(cp, "llminferenceservice", name, "-n", ns) or {}
        raise AssertionError(
            f"{ns}/{name} not Ready: {json.dumps((obj.get('status') or {}).get('conditions'), indent=1)}\n"
            f"{cp.kserve.log_tail(20)}"
        ) from None


def main_container(pod_spec: dict) -> dict:
    return next(c for c in pod_spec["containers"] if c["name"] == "main")


def script(c: dict) -> str:
    """The shell script KServe's preset runs as the vLLM command (bash -c <script> --)."""
    assert c["command"][:2] == ["/bin/bash", "-c"], c["command"][:2]
    return c["command"][2]


_NAMESPACES: list[str] = []


@pytest.fixture(scope="module")
def kcluster(cluster_factory):
    # its own instance: the session's "kserve" plane runs the default flavor (OpenShift AI's) with the SCC admission;
    # this is upstream Kubernetes with upstream KServe, which binds no SCC (docs/upstream.md)
    cp = cluster_factory(DEFAULT_PROFILE, name="kserve-upstream", kserve=True, kserve_flavor=UPSTREAM, scc=False)
    res = apply(cp, *kserve_controller.ingress_gateway())  # the platform's Gateway KServe's config names
    assert res.returncode == 0, res.stderr
    yield cp
    _NAMESPACES.clear()
    cluster_factory.release("kserve-upstream")  # this module's own: an idle plane costs CPU for the rest of the session


@pytest.fixture(scope="module")
def presets() -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in kserve_controller.presets()}


def namespace(cp, ns: str) -> str:
    cp.kubectl("create", "namespace", ns)
    _NAMESPACES.append(ns)
    return ns


# ---------------------------------------------------------------------- installation
def test_presets_and_global_config_come_from_the_kserve_module(kcluster, presets):
    """Every well-known preset of the pinned module is installed and accepted by KServe itself."""
    assert kcluster.kserve is not None and kcluster.kserve.proc.poll() is None
    assert len(presets) >= 10
    for name in presets:
        obj = must_get(kcluster, "llminferenceserviceconfig", name, "-n", kserve_controller.NAMESPACE)
        wait_for(
            lambda name=name: (
                conditions(
                    get(kcluster, "llminferenceserviceconfig", name, "-n", kserve_controller.NAMESPACE) or {}
                ).get("Ready")
                == "True"
            ),
            what=f"preset {name} Ready",
        )
        assert contains(obj["spec"], presets[name]["spec"]), (
            f"{name} differs from kserve {kserve_controller.module_version()}"
        )
    cm = must_get(kcluster, "configmap", "inferenceservice-config", "-n", kserve_controller.NAMESPACE)
    assert json.loads(cm["data"]["ingress"])["kserveIngressGateway"] == kserve_controller.INGRESS_GATEWAY


def test_conversion_webhook_serves_v1alpha1(kcluster, presets):
    """The CRDs send v1alpha1 reads to KServe's /convert: the pool comes back in the GIE v1alpha2 shape."""
    name = "kserve-config-llm-scheduler"
    want = presets[name]["spec"]["router"]["scheduler"]["pool"]["spec"]["targetPorts"][0]["number"]

    def converted():
        obj = get(
            kcluster, "llminferenceserviceconfigs.v1alpha1.serving.kserve.io", name, "-n", kserve_controller.NAMESPACE
        )
        pool = obj["spec"]["router"]["scheduler"]["pool"]["spec"] if obj else {}
        return obj if pool.get("targetPortNumber") == want and "targetPorts" not in pool else None

    # (the API server switches a CRD to its new conversion settings asynchronously)
    obj = wait_for(converted, timeout=30, what="v1alpha1 read converted by KServe")
    assert obj["apiVersion"] == "serving.kserve.io/v1alpha1"
    crd = must_get(kcluster, "crd", "llminferenceservices.serving.kserve.io")
    hook = crd["spec"]["conversion"]["webhook"]["clientConfig"]
    assert crd["spec"]["conversion"]["strategy"] == "Webhook"
    assert hook["url"] == f"https://127.0.0.1:{kcluster.kserve.webhook_port}/convert"
    # A plane restored from its etcd snapshot gets both CRDs' conversion from kcp before kube-apiserver starts
    # (cmd/kcp/conversions.go), not from a PATCH through the API (no field manager owns spec.conversion then);
    # the first start of a bundle has no snapshot and PATCHes them.
    names = set(kserve_controller.CONVERSION_PATCHES)
    if kcluster.restored:
        assert kcluster.conversions_set == names
        for name in names:
            managed = must_get(kcluster, "crd", name)["metadata"].get("managedFields") or []
            assert not [m for m in managed if "f:conversion" in json.dumps(m.get("fieldsV1", {}))], managed
    else:
        assert kcluster.conversions_set == set()


def test_validating_webhook_refuses_through_the_api_server(kcluster):
    ns = namespace(kcluster, "kserve-invalid")
    webhook = 'admission webhook "llminferenceservice.kserve-webhook-server.v1alpha2.validator" denied the request'
    # parallelism.data without dataLocal: only KServe's validator knows this rule.
    bad = llmisvc("bad-dp", ns, parallelism={"data": 4}, template={"containers": [container()]})
    status, message = create_raw(kcluster, bad)
    assert status == 422 and message.startswith(webhook), message
    assert "dataLocal must be set when data is set" in message
    res = apply(kcluster, bad)  # what a kubectl user sees
    assert res.returncode != 0 and "dataLocal must be set when data is set" in res.stderr
    # worker without parallelism: refused by the validator too.
    status, message = create_raw(kcluster, llmisvc("bad-worker", ns, worker={"containers": [container()]}))
    assert status == 422 and message.startswith(webhook), message
    assert "when worker is specified, parallelism must be configured" in message
    # replicas together with scaling: the CRD's own rule (CEL) refuses it before the webhook.
    scaling = {"maxReplicas": 4, "wva": {"hpa": {}}}
    status, message = create_raw(kcluster, llmisvc("bad-scaling", ns, replicas=2, scaling=scaling))
    assert status == 422 and "replicas and scaling are mutually exclusive" in message, message
    assert get(kcluster, "llminferenceservice", "-n", ns)["items"] == []


# ---------------------------------------------------------------------- what KServe creates
def test_single_node_with_scheduler(kcluster, presets):
    ns, name = namespace(kcluster, "kserve-single"), "qwen"
    args = ["--max-model-len=32768", "--enable-prefix-caching"]
    env = [{"name": "VLLM_ADDITIONAL_ARGS", "value": "--gpu-memory-utilization=0.9"}]
    router = ROUTER | {"scheduler": {"config": {"inline": EPP_CONFIG}}}
    obj = llmisvc(name, ns, replicas=2, template={"containers": [container(args=args, env=env)]}, router=router)
    res = apply(kcluster, obj)
    assert res.returncode == 0, res.stderr
    svc = wait_ready(kcluster, ns, name)

    # The vLLM Deployment: the preset's command, our image, args, env and resources.
    dep = must_get(kcluster, "deployment", f"{name}-kserve", "-n", ns)
    assert dep["spec"]["replicas"] == 2
    pod = dep["spec"]["template"]
    main = main_container(pod["spec"])
    assert main["image"] == IMAGE
    assert main["args"] == args
    assert main["resources"] == RESOURCES
    env_by_name = {e["name"]: e.get("value") for e in main["env"]}
    assert env_by_name["VLLM_ADDITIONAL_ARGS"] == "--gpu-memory-utilization=0.9"
    preset_main = main_container(presets["kserve-config-llm-template"]["spec"]["template"])
    for e in preset_main["env"]:  # the preset's env is merged in, not replaced
        assert env_by_name[e["name"]] == e["value"]
    sh = script(main)
    assert "exec vllm serve /mnt/models" in sh
    assert f'--served-model-name "Qwen/Qwen3-0.6B" "publishers/{ns}/models/Qwen/Qwen3-0.6B"' in sh
    assert "${VLLM_ADDITIONAL_ARGS}" in sh and main["command"][3] == "--"
    init = {c["name"]: c for c in pod["spec"].get("initContainers") or []}
    assert init["storage-initializer"]["args"] == ["hf://Qwen/Qwen3-0.6B", "/mnt/models"]
    labels = pod["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == name and labels["kserve.io/component"] == "workload"

    # The scheduler: EPP Deployment with our config, its Service, ServiceAccount and RBAC.
    epp = must_get(kcluster, "deployment", f"{name}-kserve-router-scheduler", "-n", ns)
    epp_main = main_container(epp["spec"]["template"]["spec"])
    preset_epp = main_container(presets["kserve-config-llm-scheduler"]["spec"]["router"]["scheduler"]["template"])
    assert epp_main["image"] == preset_epp["image"]
    assert epp_main["command"][:5] == ["/app/epp", "--pool-name", f"{name}-inference-pool", "--pool-namespace", ns]
    i = epp_main["args"].index("--config-text")
    assert yaml.safe_load(epp_main["args"][i + 1]) == EPP_CONFIG
    assert epp["spec"]["template"]["spec"]["serviceAccountName"] == f"{name}-epp-sa"
    epp_svc = must_get(kcluster, "service", f"{name}-epp-service", "-n", ns)
    assert 9002 in [p["port"] for p in epp_svc["spec"]["ports"]]
    must_get(kcluster, "serviceaccount", f"{name}-epp-sa", "-n", ns)
    role = must_get(kcluster, "role", f"{name}-epp-role", "-n", ns)
    assert any("inferencepools" in (r.get("resources") or []) for r in role["rules"])
    rb = must_get(kcluster, "rolebinding", f"{name}-epp-rb", "-n", ns)
    assert rb["subjects"][0]["name"] == f"{name}-epp-sa"
    crb = must_get(kcluster, "clusterrolebinding", f"{ns}-{name}-epp-auth-rb")
    assert crb["roleRef"]["name"] == "system:auth-delegator"

    # The InferencePool selects the serving pods and names the EPP Service.
    pool = must_get(kcluster, "inferencepool", f"{name}-inference-pool", "-n", ns)
    sel = pool["spec"]["selector"]["matchLabels"]
    assert sel and all(labels.get(k) == v for k, v in sel.items()), (sel, labels)
    assert pool["spec"]["endpointPickerRef"]["name"] == f"{name}-epp-service"
    assert pool["spec"]["targetPorts"] == [{"number": 8000}]

    # The HTTPRoute on the platform Gateway, through the pool.
    route = must_get(kcluster, "httproute", f"{name}-kserve-route", "-n", ns)
    assert [(p["namespace"], p["name"]) for p in route["spec"]["parentRefs"]] == [(GW_NS, GW_NAME)]
    pool_rules = [
        m["path"]["value"]
        for r in route["spec"]["rules"]
        if any(b.get("kind") == "InferencePool" and b["name"] == f"{name}-inference-pool" for b in r["backendRefs"])
        for m in r["matches"]
        if "path" in m
    ]
    assert f"/{ns}/{name}/v1/chat/completions" in pool_rules

    # Status is KServe's: Ready, with the URL of the Gateway and the presets it applied.
    cond = conditions(svc)
    for t in ("MainWorkloadReady", "SchedulerWorkloadReady", "HTTPRoutesReady", "InferencePoolReady", "RouterReady"):
        assert cond[t] == "True", t
    assert svc["status"]["url"] == f"http://{GW_NAME}.{GW_NS}.svc.cluster.local/{ns}/{name}"
    applied = {(c["name"], c["namespace"]) for c in svc["status"]["appliedConfigs"]}
    for p in ("kserve-config-llm-template", "kserve-config-llm-scheduler", "kserve-config-llm-router-route"):
        assert (p, kserve_controller.NAMESPACE) in applied


def test_readiness_follows_the_workload(kcluster):
    """KServe's Ready comes from the Deployment's status: while no node takes its pod (every node
    cordoned), kube-scheduler leaves it Pending and KServe does not report Ready; uncordoned, it is."""
    ns, name = namespace(kcluster, "kserve-held"), "held"
    with kcluster.hold_scheduling():
        res = apply(kcluster, llmisvc(name, ns, template={"containers": [container()]}))
        assert res.returncode == 0, res.stderr
        must_get(kcluster, "deployment", f"{name}-kserve", "-n", ns)

        def not_ready():
            c = conditions(get(kcluster, "llminferenceservice", name, "-n", ns) or {})
            return c.get("MainWorkloadReady") == "False" and c.get("Ready") == "False"

        wait_for(not_ready, what="MainWorkloadReady False while the pod cannot be scheduled")
        time.sleep(2)
        assert not_ready(), "KServe must not report Ready while its Deployment is unavailable"
    wait_ready(kcluster, ns, name)


def test_prefill_decode(kcluster, presets):
    ns, name = namespace(kcluster, "kserve-pd"), "pd"
    obj = llmisvc(
        name,
        ns,
        replicas=1,
        template={"containers": [container()]},
        prefill={"replicas": 2, "template": {"containers": [container()]}},
        router=ROUTER,
    )
    res = apply(kcluster, obj)
    assert res.returncode == 0, res.stderr
    svc = wait_ready(kcluster, ns, name)
    prefill = must_get(kcluster, "deployment", f"{name}-kserve-prefill", "-n", ns)
    assert prefill["spec"]["replicas"] == 2
    assert prefill["spec"]["template"]["metadata"]["labels"]["llm-d.ai/role"] == "prefill"
    assert main_container(prefill["spec"]["template"]["spec"])["resources"] == RESOURCES
    decode = must_get(kcluster, "deployment", f"{name}-kserve", "-n", ns)
    dspec = decode["spec"]["template"]
    assert dspec["metadata"]["labels"]["llm-d.ai/role"] == "decode"
    # Decode: vLLM moves to 8001 behind KServe's routing sidecar (a native sidecar on 8000).
    assert "--port 8001" in script(main_container(dspec["spec"]))
    sidecar = {c["name"]: c for c in dspec["spec"].get("initContainers") or []}["llm-d-routing-sidecar"]
    preset_sidecar = presets["kserve-config-llm-decode-template"]["spec"]["template"]["initContainers"][0]
    assert sidecar["image"] == preset_sidecar["image"] and sidecar["restartPolicy"] == "Always"
    assert "--vllm-port=8001" in sidecar["command"]
    assert f"--inference-pool={ns}/{name}-inference-pool" in sidecar["command"]
    assert {"name": "INFERENCE_POOL_NAME", "value": f"{name}-inference-pool"} in sidecar["env"]
    assert conditions(svc)["PrefillWorkloadReady"] == "True"
    assert svc["status"]["workloads"]["prefill"]["name"] == f"{name}-kserve-prefill"


def test_multi_node_data_parallel(kcluster):
    ns, name = namespace(kcluster, "kserve-dp"), "dp"
    obj = llmisvc(
        name,
        ns,
        replicas=1,
        parallelism={"data": 16, "dataLocal": 8, "expert": True},
        template={"containers": [container()]},
        worker={"containers": [container()]},
        router=ROUTER,
    )
    res = apply(kcluster, obj)
    assert res.returncode == 0, res.stderr
    svc = wait_ready(kcluster, ns, name)
    lws = must_get(kcluster, "leaderworkerset", f"{name}-kserve-mn", "-n", ns)
    tmpl = lws["spec"]["leaderWorkerTemplate"]
    assert tmpl["size"] == 2  # data / dataLocal
    assert lws["spec"]["replicas"] == 1
    for role in ("leaderTemplate", "workerTemplate"):
        c = main_container(tmpl[role]["spec"])
        assert c["image"] == IMAGE and c["resources"] == RESOURCES
        sh = script(c)
        assert "--data-parallel-size 16" in sh and "--data-parallel-size-local 8" in sh, role
        assert "--enable-expert-parallel" in sh, role
    assert tmpl["leaderTemplate"]["metadata"]["labels"]["kserve.io/component"] == "workload"
    assert conditions(svc)["WorkerWorkloadReady"] == "True"
    assert svc["status"]["workloads"]["primary"]["kind"] == "LeaderWorkerSet"
    pool = must_get(kcluster, "inferencepool", f"{name}-inference-pool", "-n", ns)
    leader_labels = tmpl["leaderTemplate"]["metadata"]["labels"]
    assert all(leader_labels.get(k) == v for k, v in pool["spec"]["selector"]["matchLabels"].items())


def test_scaling_with_wva_and_hpa(kcluster):
    """spec.scaling: KServe creates the WVA VariantAutoscaling and an HPA on its metric."""
    ns, name = namespace(kcluster, "kserve-scaling"), "scaled"
    scaling = {"minReplicas": 1, "maxReplicas": 4, "wva": {"hpa": {}}}
    res = apply(kcluster, llmisvc(name, ns, scaling=scaling, template={"containers": [container()]}))
    assert res.returncode == 0, res.stderr
    svc = wait_ready(kcluster, ns, name)
    assert conditions(svc)["ScalingReady"] == "True"
    va = must_get(kcluster, "variantautoscaling.llmd.ai", f"{name}-kserve-va", "-n", ns)
    assert va["spec"]["scaleTargetRef"]["name"] == f"{name}-kserve"
    assert (va["spec"]["minReplicas"], va["spec"]["maxReplicas"]) == (1, 4)
    hpa = must_get(kcluster, "hpa", f"{name}-kserve-hpa", "-n", ns)
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": f"{name}-kserve"}
    metric = hpa["spec"]["metrics"][0]["external"]["metric"]
    assert metric["name"] == "wva_desired_replicas"
    assert metric["selector"]["matchLabels"] == {"variant_name": f"{name}-kserve-va"}


def test_scaling_with_keda_needs_the_platform_prometheus(kcluster):
    """With KEDA as actuator, KServe v0.20.0 reads Prometheus from inferenceservice-config.

    KServe's own ConfigMap has no autoscaling-wva-controller-config key, so the service
    stays not Ready with KServe's reason (and no ScaledObject is created).
    """
    ns, name = namespace(kcluster, "kserve-keda"), "keda"
    scaling = {"minReplicas": 1, "maxReplicas": 4, "wva": {"keda": {}}}
    res = apply(kcluster, llmisvc(name, ns, scaling=scaling, template={"containers": [container()]}))
    assert res.returncode == 0, res.stderr

    def refused():
        c = {
            x["type"]: x
            for x in (get(kcluster, "llminferenceservice", name, "-n", ns) or {}).get("status", {}).get("conditions")
            or []
        }
        return c.get("Ready", {}).get("status") == "False" and "prometheus.url is required" in c["Ready"].get(
            "message", ""
        )

    wait_for(refused, what="KServe's refusal to build a ScaledObject without Prometheus")
    assert get(kcluster, "scaledobject", "-n", ns)["items"] == []


# ---------------------------------------------------------------------- process
def test_missing_controller_binary_fails_loudly(tmp_path, monkeypatch):
    monkeypatch.setattr(kserve_controller, "BINARY", tmp_path / "llmisvc")
    with pytest.raises(ControlPlaneError, match="make controlplane"):
        ControlPlane(kserve=True, kserve_flavor=UPSTREAM, scc=False).start()


def test_controller_that_does_not_start_fails_with_its_log(tmp_path, monkeypatch):
    fake = tmp_path / "llmisvc"
    fake.write_text("#!/bin/sh\necho 'setup: unable to start manager: boom' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setattr(kserve_controller, "BINARY", fake)
    cp = ControlPlane(kserve=True, kserve_flavor=UPSTREAM, scc=False, workdir=tmp_path / "cp")
    with pytest.raises(ControlPlaneError, match=r"(?s)llmisvc exited with 3.*unable to start manager: boom"):
        cp.start()
    assert cp.proc.poll() is not None, "the control plane is stopped when the controller fails"


def test_controller_dies_with_its_parent_on_sigkill(tmp_path):
    """`cluster.py up --kserve`, then SIGKILL of the manager: no llmisvc (nor kcp) is left."""
    script_path = str(HERE / "cluster.py")
    wd = tmp_path / "cluster"
    env = {k: v for k, v in os.environ.items() if k != kserve_controller.ENV_SWITCH}
    env[kserve_controller.FLAVOR_SWITCH] = UPSTREAM
    up = subprocess.run(
        [sys.executable, script_path, "up", "--kserve", "--profile", "sno-rtx-pro-6000", "--dir", str(wd)],
        capture_output=True,
        text=True,
        check=False,
        timeout=420,
        env=env,
    )
    try:
        assert up.returncode == 0, up.stderr + up.stdout
        state = json.loads((wd / "state.json").read_text())
        ctl = state["kserve"]["pid"]
        assert _alive(ctl)
        cmdline = Path(f"/proc/{ctl}/cmdline").read_bytes().split(b"\0")[0].decode()
        assert cmdline.endswith("llmisvc")
        os.kill(state["manager_pid"], signal.SIGKILL)
        wait_for(lambda: not _alive(ctl) and not _alive(state["kcp_pid"]), timeout=15, what="children to die")
    finally:
        subprocess.run(
            [sys.executable, script_path, "down", "--dir", str(wd)], check=False, capture_output=True, timeout=60
        )
