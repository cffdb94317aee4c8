"""Benchmark (prints figures, asserts only that runs succeed): the platform stage of example-chat
(playbooks/platform.yml: preflight, every operator in one apply and one wait, every operand in one
apply and one wait) against `kubectl apply --server-side` of the same objects.

One control plane at a time: the ansible converge and its no-op re-runs on a fresh instance, then
kubectl on another fresh one of the same profile. The converge is printed with and without the
time spent in readiness waits (the simulator plays the operators, so waits measure its pace, not
ours). No-op figures are medians of PLATFORM_BENCH_REPEAT runs (default 3): the machine is shared.

    make bench          # or: .venv/bin/python -m pytest -q -s tests/bench/test_platform_bench.py
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from statistics import median

import pytest
import yaml
from controlplane.cluster import ControlPlane

from tests.ansible_run import run_playbook
from tests.bench.bench_helpers import timed_cli_playbook

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PLATFORM = ROOT / "playbooks" / "platform.yml"
CHAT = ROOT / "inventories" / "example-chat"
PROFILE = "h100-8x2-rdma"
REPEAT = int(os.environ.get("PLATFORM_BENCH_REPEAT", "3"))
SERVER_FIELDS = ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation", "selfLink")


def _timed(fn):
    start = time.monotonic()
    out = fn()
    return out, time.monotonic() - start


def _applied_objects(run, cp) -> list[dict]:
    """The live objects the ansible run applied (both phases, in apply order), stripped to what a
    user would write."""
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


def test_platform_converge_and_noop_vs_kubectl_server_side(tmp_path):
    cp = ControlPlane(PROFILE, kserve=True).start()
    try:
        first, t_converge = _timed(lambda: run_playbook(PLATFORM, CHAT, kubeconfig=cp.kubeconfig))
        assert first.rc == 0, first.failure_messages()
        t_waits = sum(float(r.get("elapsed") or 0) for r in first.results_of("inference.blueprints.k8s_wait")) + sum(
            float(r.get("wait_elapsed") or 0) for r in first.results_of("inference.blueprints.k8s_apply")
        )
        noop = []
        for _ in range(REPEAT):
            again, seconds = _timed(lambda: run_playbook(PLATFORM, CHAT, kubeconfig=cp.kubeconfig))
            assert again.rc == 0 and again.changed == 0, again.failure_messages()
            noop.append(seconds)
        # and as a user runs it: ansible-playbook itself, no ansible-runner in between
        cli = []
        for _ in range(REPEAT):
            r = timed_cli_playbook(PLATFORM, CHAT, kubeconfig=cp.kubeconfig)
            assert r["rc"] == 0 and r["changed"] == 0, r["tail"]
            cli.append(r["wall"])
        k8s_tasks = [r[2] for r in first.results if (r[2] or "").startswith("inference.blueprints.k8s_")]
        objs = _applied_objects(first, cp)
    finally:
        cp.stop()
    manifest = tmp_path / "platform.yaml"
    manifest.write_text(yaml.safe_dump_all(objs, sort_keys=False))

    cp = ControlPlane(PROFILE, kserve=True).start()
    try:
        args = ("apply", "--server-side", "--field-manager=bench", "-f", str(manifest))
        res, k_converge = _timed(lambda: cp.kubectl(*args))
        assert res.returncode == 0, res.stderr
        k_noop = []
        for _ in range(REPEAT):
            res, seconds = _timed(lambda: cp.kubectl(*args))
            assert res.returncode == 0, res.stderr
            k_noop.append(seconds)
    finally:
        cp.stop()

    work = t_converge - t_waits
    print()
    print(
        f"platform objects applied: {len(objs)}; k8s tasks in the converge: "
        f"{k8s_tasks.count('inference.blueprints.k8s_apply')} k8s_apply (each applies, then waits), "
        f"{k8s_tasks.count('inference.blueprints.k8s_wait')} k8s_wait"
    )
    print(f"ansible converge, whole run:               {t_converge:7.2f} s (readiness waits {t_waits:.2f} s)")
    print(
        f"ansible converge, waits excluded:          {work:7.2f} s   ratio {work / k_converge:5.1f}x"
        f" to kubectl apply --server-side {k_converge:.2f} s"
    )
    ratio = median(cli) / median(k_noop)
    print(
        f"no-op re-run, ansible-playbook (median of {REPEAT}): {median(cli):7.2f} s   ratio {ratio:5.1f}x"
        f" to kubectl re-run {median(k_noop):.2f} s"
    )
    print(
        f"no-op re-run via ansible-runner (AAP's executor): {median(noop):7.2f} s   ratio "
        f"{median(noop) / median(k_noop):5.1f}x"
    )
