"""The bad-input catalogue (docs/reliability.md, "Bad input catalogue"): every row is a real
playbook run on a carelessly edited copy of an example inventory, against the package's control
plane. Each must fail before the first write (the API server's objects counted before and after),
name the variable by its path, say what was wrong and what would be valid, and show no traceback.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.reliability import results
from tests.reliability.harness import (
    PLAYBOOKS,
    TRACEBACK,
    ansible_env,
    ansible_playbook,
    apply_edit,
    copy_inventory,
    read_table,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROWS = read_table("Bad input catalogue")
COLUMNS = ("id", "site", "playbook", "mistake", "edit", "path", "wrong", "valid")


def test_the_catalogue_is_well_formed():
    ids = [r["id"] for r in ROWS]
    assert len(ids) == len(set(ids)), "ids must be unique"
    assert len(ROWS) >= 40, f"issue 15 asks for at least 40 cases, the catalogue has {len(ROWS)}"
    for row in ROWS:
        assert tuple(row) == COLUMNS, row
        assert all(row[c] for c in COLUMNS), f"{row['id']}: every column is needed"
        assert (PLAYBOOKS / row["playbook"]).exists(), row
    sites = {r["site"] for r in ROWS}
    for site in ("example-chat", "example-rag", "example-batch", "example-edge-fleet", "example-ai-grid"):
        assert site in sites, f"no case for {site}"


@pytest.fixture(scope="module")
def baseline(plane):
    return {"count": plane.census.count()}


def _fragment(text: str, fragment: str) -> bool:
    if "<line>" in fragment:
        pattern = re.escape(fragment).replace(re.escape("<line>"), r"\d+")
        return re.search(pattern, text) is not None
    return fragment in text


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_bad_input_fails_early_and_clearly(row, plane, baseline, broken_kubeconfigs, tmp_path):
    inventory = copy_inventory(row["site"], tmp_path)
    kubeconfig = plane.kubeconfig
    extravars = [f"report_dir={tmp_path / 'reports'}", f"render_dir={tmp_path / 'render'}"]
    for edit in (e.strip() for e in row["edit"].split(";")):
        if edit.startswith("kubeconfig "):
            kubeconfig = broken_kubeconfigs[edit.split()[1]]
        elif edit.startswith("extravar "):
            extravars.append(edit[len("extravar ") :].strip())  # after the harness's own: it wins
        elif edit == "none":
            continue
        else:
            apply_edit(inventory, edit)
    before = baseline["count"]
    run = ansible_playbook(
        PLAYBOOKS / row["playbook"],
        inventory,
        env=ansible_env(kubeconfig),
        extravars=extravars,
        timeout=300,
    )
    t0 = time.monotonic()
    after = plane.census.count()
    baseline["count"] = after
    written = {k: after.get(k, 0) - before.get(k, 0) for k in set(before) | set(after)}
    written = {k: v for k, v in written.items() if v}
    error = run.error_text()
    problems = []
    if run.rc == 0:
        problems.append("the run succeeded")
    if written:
        problems.append(f"objects written by the failed run (per resource): {written}")
    for column in ("path", "wrong", "valid"):
        if not _fragment(error, row[column]):
            problems.append(f"the error does not contain the {column} {row[column]!r}")
    if TRACEBACK.search(run.output):
        problems.append("a Python traceback is in the output")
    if written:  # leave the control plane as the next case expects it
        ansible_playbook(
            PLAYBOOKS / "teardown.yml",
            copy_inventory(row["site"], tmp_path / "clean"),
            env=ansible_env(plane.kubeconfig),
            timeout=600,
        )
        baseline["count"] = plane.census.count()
    results.record(
        "bad_input",
        row["id"],
        {
            "failed": run.rc != 0,
            "objects_written": sum(written.values()),
            "clear": not problems,
            "seconds": round(run.seconds, 1),
            "count_seconds": round(time.monotonic() - t0, 2),
        },
    )
    assert not problems, (
        "\n".join(problems) + f"\n--- error ({run.seconds:.1f}s):\n{error[-3000:] or run.output[-3000:]}"
    )
