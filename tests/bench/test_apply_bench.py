"""Benchmark of the fast apply path (prints figures, asserts only that runs succeed).

For N = 30 and 100 objects of 9 kinds (one Namespace, the rest namespaced), on the local
control plane:

* ``ansible-playbook`` converge and no-op re-run with the k8s_apply action plugin, the objects
  in one task and in 10 tasks (per-task overhead),
* the same with the modules as they were before the action plugins (the collection at
  ``BEFORE``, from git history; skipped when git or that commit is not available),
* ``kubectl apply --server-side`` of the same objects (converge, then re-run).

Every converge goes into a fresh namespace, so it creates from nothing; each figure is the
median of APPLY_BENCH_REPEAT runs (default 3), the machine being shared.

    .venv/bin/python -m pytest -q -s tests/bench/test_apply_bench.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import time
import uuid
from io import BytesIO
from pathlib import Path
from statistics import median

import pytest
import yaml

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
# The last commit before the k8s_apply/k8s_wait/cluster_facts action plugins (modules only).
BEFORE = "fb964324a2bc3b973fe3fae1e15955dde4f08fa3"
COLLECTION = "collections/ansible_collections/inference/blueprints"
SIZES = [int(n) for n in os.environ.get("APPLY_BENCH_SIZES", "30,100").split(",")]
# Each figure is the median of this many runs (a converge each time into a fresh namespace).
REPEAT = int(os.environ.get("APPLY_BENCH_REPEAT", "3"))


def objects(ns: str, n: int) -> list[dict]:
    labels = {"app": "bench"}
    out = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}]
    makers = [
        lambda i: {"apiVersion": "v1", "kind": "ConfigMap", "data": {"index": str(i), "text": "x" * 200}},
        lambda i: {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "stringData": {"token": f"t{i}"}},
        lambda i: {"apiVersion": "v1", "kind": "ServiceAccount"},
        lambda i: {
            "apiVersion": "v1",
            "kind": "Service",
            "spec": {"selector": {"app": f"b{i}"}, "ports": [{"name": "http", "port": 80, "targetPort": 8000}]},
        },
        lambda i: {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
        },
        lambda i: {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"o{i - 1}"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}],
        },
        lambda i: {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": f"b{i}"}},
                "template": {
                    "metadata": {"labels": {"app": f"b{i}"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "c",
                                "image": "registry.example.com/bench:1",
                                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                            }
                        ]
                    },
                },
            },
        },
        lambda i: {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "spec": {"selector": {"matchLabels": labels}, "endpoints": [{"port": "http", "interval": "30s"}]},
        },
        lambda i: {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "spec": {"groups": [{"name": f"g{i}", "rules": [{"alert": f"A{i}", "expr": "up == 0"}]}]},
        },
    ]
    for i in range(n - 1):
        obj = makers[i % len(makers)](i)
        obj["metadata"] = {"name": f"o{i}", "namespace": ns, "labels": labels}
        out.append(obj)
    return out


def playbook(objs: list[dict], tasks: int, path: Path) -> Path:
    """One play: the Namespace in the first task, the other objects split over ``tasks`` tasks."""
    chunks = [objs[1:][i::tasks] for i in range(tasks)] if tasks > 1 else [objs[1:]]
    chunks[0] = [objs[0], *chunks[0]]
    play = {
        "hosts": "localhost",
        "gather_facts": False,
        "tasks": [
            {"name": f"apply {i}", "inference.blueprints.k8s_apply": {"objects": chunk}}
            for i, chunk in enumerate(chunks)
        ],
    }
    path.write_text(yaml.safe_dump([play], sort_keys=False))
    return path


def timed_ansible(play: Path, kubeconfig: str, collections: Path | None, cache: Path) -> tuple[float, str]:
    env = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join(
            [str(p) for p in (collections, ROOT / ".cache" / "collections") if p is not None]
        ),
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "K8S_AUTH_KUBECONFIG": kubeconfig,
        "INFERENCE_BLUEPRINTS_CACHE_DIR": str(cache),
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
    }
    env.pop("INFERENCE_BLUEPRINTS_K8S_EXECUTION", None)
    cmd = [
        os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
        "-i",
        "localhost,",
        "-c",
        "local",
        "-e",
        f"ansible_python_interpreter={sys.executable}",
        str(play),
    ]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    wall = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    recap = next((line for line in proc.stdout.splitlines() if line.startswith("localhost") and "ok=" in line), "")
    changed = recap.split("changed=")[1].split()[0] if "changed=" in recap else "?"
    return wall, changed


def timed_kubectl(cluster, objs: list[dict], path: Path) -> float:
    path.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    start = time.monotonic()
    res = cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", "--field-manager=bench-kubectl", "-f", str(path)
    )
    wall = time.monotonic() - start
    assert res.returncode == 0, res.stderr
    return wall


def collection_before(dest: Path) -> Path | None:
    """The collection as of BEFORE, extracted from git (None when that is not possible)."""
    try:
        blob = subprocess.run(
            ["git", "archive", "--format=tar", BEFORE, COLLECTION], cwd=ROOT, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(dest, filter="data")
    return dest / "collections"


def test_apply_converge_and_noop_vs_kubectl(cluster, tmp_path):
    run_id = uuid.uuid4().hex[:6]
    before = collection_before(tmp_path / "before")
    cache = tmp_path / "discovery-cache"
    rows, namespaces = [], []
    variants = [("action plugin", None)] + ([("modules before", before)] if before else [])

    def fresh(prefix, n):
        ns = f"bench-{prefix}-{n}-{len(namespaces)}-{run_id}"
        namespaces.append(ns)
        return ns

    try:
        for n in SIZES:
            converge, noop = [], []
            for _ in range(REPEAT):
                objs = objects(fresh("k", n), n)
                converge.append(timed_kubectl(cluster, objs, tmp_path / f"kubectl-{n}.yaml"))
                noop.append(timed_kubectl(cluster, objs, tmp_path / f"kubectl-{n}.yaml"))
            rows.append((n, "kubectl apply --server-side", "-", median(converge), "-", median(noop), "-"))
            for name, collections in variants:
                for tasks in (1, 10):
                    converge, noop, changed = [], [], set()
                    for _ in range(REPEAT):
                        ns = fresh("a" if collections is None else "m", n)
                        play = playbook(objects(ns, n), tasks, tmp_path / f"play-{ns}.yml")
                        wall, ch1 = timed_ansible(play, cluster.kubeconfig, collections, cache)
                        converge.append(wall)
                        wall, ch2 = timed_ansible(play, cluster.kubeconfig, collections, cache)
                        assert ch2 == "0", f"{name}: the re-run changed {ch2} task(s)"
                        noop.append(wall)
                        changed.add((ch1, ch2))
                    ch1, ch2 = sorted(changed)[0]
                    rows.append((n, f"ansible, {name}", tasks, median(converge), ch1, median(noop), ch2))
    finally:
        for ns in namespaces:
            cluster.kubectl("delete", "namespace", ns, "--wait=false", "--ignore-not-found")
    print()
    print(f"median of {REPEAT} runs; ratio = against kubectl apply --server-side of the same objects")
    print(f"{'N':>4}  {'variant':32s} {'tasks':>5}  {'converge':>9} {'ratio':>6}  {'no-op':>7} {'ratio':>6}  changed")
    kubectl = {r[0]: r for r in rows if r[1].startswith("kubectl")}
    for n, name, tasks, c1, ch1, c2, ch2 in rows:
        k = kubectl[n]
        print(
            f"{n:4d}  {name:32s} {tasks!s:>5}  {c1:8.2f}s {c1 / k[3]:5.1f}x  {c2:6.2f}s {c2 / k[5]:5.1f}x  "
            f"{ch1}/{ch2} tasks"
        )
