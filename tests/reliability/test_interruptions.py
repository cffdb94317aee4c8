"""Interrupted runs are safe to run again (docs/reliability.md, "Interruptions").

On the example chat site (the smallest full site): a clean converge is recorded (every object with
the collection's label, dumped, and the object count of every resource), then taken down. Then
``site.yml`` is started again and again and each run is killed with SIGKILL (its whole process
group and every Ansible worker, which leave the group: harness.ansible_playbook) once a seeded-random
task has started, after a seeded-random delay of up to 1.5 s. The kills are chained: each killed run
starts from what the previous killed run left. After every fifth kill a full re-run must converge
(rc 0) to the clean run's objects, field for field (metadata the API server owns, status and
allocated addresses aside), with the same number of objects in every resource (nothing duplicated)
and no object naming an owner that is gone (nothing orphaned). Then ``teardown.yml`` is killed the
same way part-way, twice, and a full teardown must leave exactly the objects held before the clean
run and nothing with the label.
"""

from __future__ import annotations

import json
import random
import time

import pytest

from tests.reliability import results
from tests.reliability.harness import (
    LABEL_MANAGED_BY,
    PLAYBOOKS,
    ansible_env,
    ansible_playbook,
    copy_inventory,
    quiet_total,
)
from tests.reliability.test_teardown import dangling_owners

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SITE = "example-chat"
SEED = 15  # the number: the kill points are reproducible
KILLS = 20
CHECK_EVERY = 5
TEARDOWN_KILLS = 2
# after the kill point's task has started: a converge of an already converged site now takes about 3 s for its
# 17 tasks, so a delay of up to 1.5 s after one of its last tasks outlived the run at 6 of 20 kill points
MAX_DELAY = 0.5
# counts that move without anyone's run (controllers' bookkeeping)
NOT_COMPARED = {"events", "events.events.k8s.io", "leases.coordination.k8s.io"}
VOLATILE = ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation", "selfLink")


SCC_ALLOCATION = "openshift.io/sa.scc."


def normalize(obj: dict) -> dict:
    o = json.loads(json.dumps(obj))
    o.pop("status", None)
    meta = o.get("metadata") or {}
    for k in VOLATILE:
        meta.pop(k, None)
    for ref in meta.get("ownerReferences") or []:
        ref.pop("uid", None)
    annotations = meta.get("annotations") or {}
    for k in [k for k in annotations if k.startswith(SCC_ALLOCATION)]:
        # the namespace's UID range, supplemental groups and MCS labels: allocated by OpenShift per namespace as it
        # is created (played by the local plane's SCC admission), another value for a namespace made again
        annotations.pop(k)
    if o.get("type") == "kubernetes.io/service-account-token":
        # the token controller fills these in: a token for the account's uid of this run
        o.pop("data", None)
        (meta.get("annotations") or {}).pop("kubernetes.io/service-account.uid", None)
    spec = o.get("spec")
    if isinstance(spec, dict):
        for k in ("clusterIP", "clusterIPs"):  # allocated by the API server
            spec.pop(k, None)
    return o


def snapshot(census) -> tuple[dict[str, dict], dict[str, int]]:
    objects = {}
    for o in census.objects(LABEL_MANAGED_BY):
        meta = o["metadata"]
        key = f"{o.get('apiVersion', '')}/{o.get('kind')} {meta.get('namespace', '')}/{meta['name']}"
        assert key not in objects, f"{key} listed twice"
        objects[key] = normalize(o)
    counts = {k: v for k, v in census.count().items() if k not in NOT_COMPARED and v}
    return objects, counts


def differences(clean, now) -> list[str]:
    (c_obj, c_count), (n_obj, n_count) = clean, now
    out = [f"missing: {k}" for k in sorted(set(c_obj) - set(n_obj))]
    out += [f"extra: {k}" for k in sorted(set(n_obj) - set(c_obj))]
    out += [f"differs: {k}" for k in sorted(set(c_obj) & set(n_obj)) if c_obj[k] != n_obj[k]]
    out += [f"count of {r}: {c_count.get(r, 0)} -> {n_count.get(r, 0)}" for r in sorted(set(c_count) | set(n_count))
            if c_count.get(r, 0) != n_count.get(r, 0)]  # fmt: skip
    return out


def test_killed_runs_converge_on_rerun_like_a_clean_run(plane, tmp_path):
    env = ansible_env(plane.kubeconfig)
    try:
        chain_of_kills(plane, tmp_path, env)
    except BaseException:
        # leave the package's control plane as this test found it for the tests after it
        ansible_playbook(PLAYBOOKS / "teardown.yml", tmp_path / SITE, env=env)
        raise


def chain_of_kills(plane, tmp_path, env) -> None:
    t0 = time.monotonic()
    census = plane.census
    inventory = copy_inventory(SITE, tmp_path)
    extravars = [f"report_dir={tmp_path / 'reports'}"]
    before = quiet_total(census)

    clean_run = ansible_playbook(PLAYBOOKS / "site.yml", inventory, env=env, extravars=extravars)
    assert clean_run.rc == 0, clean_run.output[-3000:]
    quiet_total(census)
    clean = snapshot(census)
    assert clean[0], "the clean run wrote nothing with the label"
    down = ansible_playbook(PLAYBOOKS / "teardown.yml", inventory, env=env)
    assert down.rc == 0, down.output[-3000:]
    assert quiet_total(census, expect=before) == before

    rng = random.Random(SEED)
    n_tasks = len(clean_run.tasks)
    kills, checks = [], []
    for i in range(1, KILLS + 1):
        at, delay = rng.randint(1, n_tasks), round(rng.uniform(0, MAX_DELAY), 2)
        r = ansible_playbook(PLAYBOOKS / "site.yml", inventory, env=env, extravars=extravars, kill_at_task=at,
                             kill_delay=delay)  # fmt: skip
        kills.append({"at": at, "delay": delay, "killed": r.killed, "task": r.tasks[-1] if r.tasks else "",
                      "seconds": round(r.seconds, 1)})  # fmt: skip
        if i % CHECK_EVERY == 0:
            rerun = ansible_playbook(PLAYBOOKS / "site.yml", inventory, env=env, extravars=extravars)
            assert rerun.rc == 0, f"re-run after kill {i} failed:\n" + rerun.output[-3000:]
            quiet_total(census)
            now = snapshot(census)
            diff = differences(clean, now)
            orphans = dangling_owners(census.objects(""))
            checks.append({"after_kill": i, "differences": len(diff), "orphans": len(orphans),
                           "seconds": round(rerun.seconds, 1)})  # fmt: skip
            assert not diff, f"after kill {i} the re-run differs from a clean run: {diff[:20]}"
            assert not orphans, f"after kill {i}: objects whose owner is gone: {orphans}"

    # teardown interrupted part-way, then a full one
    down_tasks = len(down.tasks)
    teardown_kills = []
    for _ in range(TEARDOWN_KILLS):
        at, delay = rng.randint(1, down_tasks), round(rng.uniform(0, MAX_DELAY), 2)
        r = ansible_playbook(PLAYBOOKS / "teardown.yml", inventory, env=env, kill_at_task=at, kill_delay=delay)
        teardown_kills.append({"at": at, "delay": delay, "killed": r.killed, "seconds": round(r.seconds, 1)})
    final = ansible_playbook(PLAYBOOKS / "teardown.yml", inventory, env=env)
    assert final.rc == 0, final.output[-3000:]
    after = quiet_total(census, expect=before)
    left = census.objects(LABEL_MANAGED_BY)
    orphans = dangling_owners(census.objects(""))

    killed = sum(k["killed"] for k in kills)
    results.record(
        "interruptions",
        SITE,
        {
            "seed": SEED,
            "kills": len(kills),
            "killed": killed,
            "rerun_checks": len(checks),
            "survived": sum(1 for c in checks if not c["differences"] and not c["orphans"]) * CHECK_EVERY,
            "teardown_kills": sum(k["killed"] for k in teardown_kills),
            "teardown_left": len(left) + (after - before),
            "kill_points": kills,
            "checks": checks,
            "seconds": round(time.monotonic() - t0, 1),
            "kill_seconds": round(sum(k["seconds"] for k in kills), 1),
        },
    )
    print(f"\n{len(kills)} kills ({killed} killed mid-run), {len(checks)} re-run checks, "
          f"{sum(k['killed'] for k in teardown_kills)} teardown kills: {time.monotonic() - t0:.0f} s "
          f"(killed runs {sum(k['seconds'] for k in kills):.0f} s)")  # fmt: skip
    assert not left, f"labelled objects after the interrupted teardowns and a full one: {len(left)}"
    assert after == before, f"{after - before} objects more than before the clean run"
    assert not orphans, orphans
    assert killed >= KILLS * 3 // 4, f"only {killed} of {KILLS} runs were still running at their kill point"
