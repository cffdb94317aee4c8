"""Benchmark (prints figures, asserts only that runs succeed): platform converge and no-op re-run
with ansible (playbooks/platform.yml) against `kubectl apply --server-side` of the same objects,
each on a fresh control plane of the same profile.

    make bench          # or: .venv/bin/python -m pytest -q -s tests/bench/test_platform_bench.py
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from tests.ansible_run import run_playbook

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PLATFORM = ROOT / "playbooks" / "platform.yml"
CHAT = ROOT / "inventories" / "example-chat"
# The simulator does not play these two; the same switches as tests/integration/test_platform.py.
EXTRAVARS: dict = {}
SERVER_FIELDS = ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation", "selfLink")


def _timed(fn):
    start = time.monotonic()
    out = fn()
    return out, time.monotonic() - start


def _applied_objects(run, cp):
    """The live objects the ansible run applied, stripped to what a user would write."""
    refs, seen = [], set()
    for result in run.results_of("inference.blueprints.k8s_apply"):
        for o in result.get("objects", []):
            key = (o["apiVersion"], o["kind"], o.get("namespace") or "", o["name"])
            if key not in seen:
                seen.add(key)
                refs.append(key)
    objs = []
    for api_version, kind, ns, name in refs:
        live = cp.dynamic.resources.get(api_version=api_version, kind=kind).get(name=name, namespace=ns or None)
        obj = live.to_dict()
        obj.pop("status", None)
        for f in SERVER_FIELDS:
            obj["metadata"].pop(f, None)
        (obj["metadata"].get("annotations") or {}).pop("kubectl.kubernetes.io/last-applied-configuration", None)
        objs.append(obj)
    return objs


def test_platform_converge_and_noop_vs_kubectl_server_side(cluster_factory, tmp_path):
    cp_ansible = cluster_factory("h100-8x2-rdma", name="bench-platform-ansible")
    first, t_converge = _timed(
        lambda: run_playbook(PLATFORM, CHAT, kubeconfig=cp_ansible.kubeconfig, extravars=EXTRAVARS)
    )
    assert first.rc == 0, first.failure_messages()
    second, t_noop = _timed(lambda: run_playbook(PLATFORM, CHAT, kubeconfig=cp_ansible.kubeconfig, extravars=EXTRAVARS))
    assert second.rc == 0 and second.changed == 0
    k8s_tasks = len([r for r in first.results if (r[2] or "").startswith("inference.blueprints.k8s_")])

    objs = _applied_objects(first, cp_ansible)
    manifest = tmp_path / "platform.yaml"
    manifest.write_text(yaml.safe_dump_all(objs, sort_keys=False))

    cp_kubectl = cluster_factory("h100-8x2-rdma", name="bench-platform-kubectl")
    args = ("apply", "--server-side", "--field-manager=bench", "-f", str(manifest))
    res1, k_converge = _timed(lambda: cp_kubectl.kubectl(*args))
    assert res1.returncode == 0, res1.stderr
    res2, k_noop = _timed(lambda: cp_kubectl.kubectl(*args))
    assert res2.returncode == 0, res2.stderr

    print()
    print(f"platform objects applied: {len(objs)} (k8s_apply/k8s_wait tasks in the converge: {k8s_tasks})")
    print(f"ansible converge (with readiness waits):  {t_converge:7.2f} s")
    print(f"kubectl apply --server-side (no waits):   {k_converge:7.2f} s   ratio {t_converge / k_converge:5.1f}x")
    print(f"ansible no-op re-run:                     {t_noop:7.2f} s")
    print(f"kubectl apply --server-side re-run:       {k_noop:7.2f} s   ratio {t_noop / k_noop:5.1f}x")
