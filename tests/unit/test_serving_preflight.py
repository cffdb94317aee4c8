"""Preflight of what serving reads when its pods start (module_utils/serving_preflight.py, issue 33 item 1).

The claims of pvc:// artifacts, the Secrets the objects name and the GPUs other pods hold are checked before
anything is applied; each unmet need names the object, what was found and what to do. Reads are dicts here
(the same ``get(path)`` shape preflight reads the cluster through); the evaluation is pure.
"""

from __future__ import annotations

import copy
import functools

from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.module_utils import serving_preflight as sp

from tests.serving_helpers import INVENTORIES
from tests.unit.test_placement_preflight import cluster, node

RAG_CLAIM = "/api/v1/namespaces/llm-rag/persistentvolumeclaims/models-qwen3-6-27b"


@functools.cache
def _rag_requirements() -> dict:
    (intent,) = cli.site_intents(str(INVENTORIES / "example-rag"), None).values()
    return intent["platform"]["requirements"]


def rag_requirements() -> dict:
    return copy.deepcopy(_rag_requirements())


def pvc(phase="Bound", size="1Ti", modes=("ReadWriteMany",), storage_class="") -> dict:
    return {
        "spec": {
            "accessModes": list(modes),
            "resources": {"requests": {"storage": size}},
            "storageClassName": storage_class,
            "volumeName": "pv-1" if phase == "Bound" else None,
        },
        "status": {
            "phase": phase,
            **({"capacity": {"storage": size}, "accessModes": list(modes)} if phase == "Bound" else {}),
        },
    }


def gpu_pod(ns, name, node_name, gpus, rdma=0) -> dict:
    req = {"nvidia.com/gpu": str(gpus), **({"rdma/rdma_shared_device_a": str(rdma)} if rdma else {})}
    return {
        "metadata": {"namespace": ns, "name": name},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {"requests": req, "limits": req}}]},
        "status": {"phase": "Running"},
    }


def reader(objects: dict):
    def get(path):
        return objects.get(path)

    return get


def check(req, facts, objects) -> list[str]:
    serving = sp.gather(reader(objects), req["serving"])
    return sp.evaluate(facts, serving, req, [])


def test_the_rag_intent_names_its_claim_with_the_weights_size():
    (claim,) = rag_requirements()["serving"]["claims"]
    assert claim["namespace"] == "llm-rag" and claim["name"] == "models-qwen3-6-27b"
    assert 20 < claim["weights_gib"] < 40 and claim["pods"] == 2 and claim["models"] == ["qwen-rag"]
    assert rag_requirements()["serving"]["own_namespaces"] == ["llm-rag"]


def test_a_missing_claim_is_named_with_what_to_do():
    req = rag_requirements()
    (line,) = check(req, cluster(node("gpu-a", 8), node("gpu-b", 8)), {})
    assert line.startswith("PersistentVolumeClaim llm-rag/models-qwen3-6-27b (the weights of qwen-rag"), line
    assert 'persistentvolumeclaim "models-qwen3-6-27b" not found' in line and "README" in line


def test_a_bound_claim_of_the_right_size_passes_and_a_small_or_unshared_one_does_not():
    req, facts = rag_requirements(), cluster(node("gpu-a", 8), node("gpu-b", 8))
    assert check(req, facts, {RAG_CLAIM: pvc()}) == []
    (small,) = check(req, facts, {RAG_CLAIM: pvc(size="10Gi")})
    assert "holds 10Gi (10 GiB)" in small and "the copy cannot fit" in small
    (rwo,) = check(req, facts, {RAG_CLAIM: pvc(modes=("ReadWriteOnce",))})
    assert "is ReadWriteOnce; 2 pods of qwen-rag" in rwo and "ReadWriteMany or ReadOnlyMany" in rwo


def test_an_unbound_claim_stops_unless_its_class_binds_at_first_consumer():
    req = rag_requirements()
    facts = cluster(node("gpu-a", 8), node("gpu-b", 8))
    (line,) = check(req, facts, {RAG_CLAIM: pvc(phase="Pending", storage_class="slow")})
    assert "is Pending (storage class 'slow', volume none)" in line
    facts["storage_classes"] = [{"name": "slow", "binding_mode": "WaitForFirstConsumer"}]
    assert check(req, facts, {RAG_CLAIM: pvc(phase="Pending", storage_class="slow")}) == []


def test_gpus_held_by_another_sites_pods_stop_with_who_holds_them():
    req = rag_requirements()
    facts = cluster(node("gpu-a", 8), node("gpu-b", 8))
    objects = {
        RAG_CLAIM: pvc(),
        sp.PODS_PATH: {
            "items": [
                gpu_pod("other-site", "engine-0", "gpu-a", 8),
                gpu_pod("other-site", "engine-1", "gpu-b", 4),
                gpu_pod("llm-rag", "qwen-rag-old", "gpu-b", 4),  # the site's own: its GPUs are the site's
                {**gpu_pod("x", "unbound", "", 8)},  # not bound to a node: holds nothing
            ]
        },
    }
    (line,) = check(req, facts, objects)
    assert line.startswith("GPUs free now: the plan's h100 pods (qwen-rag serve 2 x 8) need 16 x h100"), line
    assert "4 of 16 are free now (gpu-a 0 of 8, gpu-b 4 of 8)" in line
    assert "held by other-site/engine-0 holds 8 on gpu-a, other-site/engine-1 holds 4 on gpu-b" in line
    assert "llm-rag/qwen-rag-old" not in line


def test_a_cordoned_node_has_no_free_gpus():
    req = rag_requirements()
    cordoned = node("gpu-b", 8)
    cordoned["spec"] = {"unschedulable": True}
    (line,) = check(req, cluster(node("gpu-a", 8), cordoned), {RAG_CLAIM: pvc()})
    assert "8 of 16 are free now (gpu-a 8 of 8, gpu-b 0 of 8 (cordoned))" in line


def test_the_free_check_is_left_to_the_static_one_when_the_gpus_are_not_there():
    req = rag_requirements()
    serving = sp.gather(reader({RAG_CLAIM: pvc()}), req["serving"])
    assert sp.evaluate(cluster(node("gpu-a", 8)), serving, req, ["GPUs: 16 x h100 needed ..."]) == []


def test_pod_requests_count_limits_and_the_largest_init_container():
    pod = {
        "spec": {
            "containers": [
                {"resources": {"limits": {"nvidia.com/gpu": "2"}}},
                {"resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "4"}}},
            ],
            "initContainers": [{"resources": {"requests": {"nvidia.com/gpu": "4"}}}],
        }
    }
    assert sp.pod_requests(pod) == {"nvidia.com/gpu": 4}


def test_secrets_missing_keys_stop_missing_optional_ones_warn_and_values_are_never_read():
    needs = {
        "secrets": [
            {"namespace": "g", "name": "tenant-a", "keys": ["a"], "for": "tenant a's API key", "required": False},
            {"namespace": "g", "name": "tls", "keys": ["tls.crt", "tls.key"], "for": "the listener", "required": False},
            {"namespace": "g", "name": "esc", "keys": ["credential"], "for": "the grid key", "required": True},
        ]
    }
    objects = {"/api/v1/namespaces/g/secrets/tls": {"type": "kubernetes.io/tls", "data": {"tls.crt": "c2VjcmV0"}}}
    serving = sp.gather(reader(objects), needs)
    assert serving["secrets"]["g/tls"] == {"type": "kubernetes.io/tls", "keys": ["tls.crt"]}
    assert "c2VjcmV0" not in repr(serving)
    warnings: list = []
    unmet = sp.secret_gaps(serving, needs, warnings)
    assert unmet[0].startswith(
        "Secret g/tls has keys tls.crt; the site reads tls.crt, tls.key (the listener): add tls.key"
    )
    assert unmet[1].startswith("Secret g/esc does not exist") and len(unmet) == 2
    (warning,) = warnings
    assert warning.startswith("Secret g/tenant-a does not exist") and "keys: a" in warning
