"""The README's reliability table, from what the reliability tests measured.

``python -m tests.reliability.summary`` reads ``.cache/reliability/results.json`` (written by the
tests in tests/reliability through results.record) and the bad-input catalogue of
docs/reliability.md, and prints the table the README's "Reliability" section holds. A figure the
tests have not measured yet reads "not run". Exit code 1 when a must-be-zero figure is not zero.
"""

from __future__ import annotations

import sys

from tests.reliability import results
from tests.reliability.harness import read_table

NOT_RUN = "not run"


def rows(doc: dict) -> tuple[list[tuple[str, str, str]], bool]:
    """(what, measured, must) rows, and whether every must-be-zero figure is zero."""
    ok = True
    out: list[tuple[str, str, str]] = []
    catalogue = read_table("Bad input catalogue")
    bad = doc.get("bad_input") or {}
    tried = [v for k, v in bad.items() if k in {r["id"] for r in catalogue}]
    out.append(("Bad-input cases tried (docs/reliability.md)", f"{len(tried)} of {len(catalogue)}", "all"))
    clear = sum(1 for v in tried if v.get("failed") and v.get("clear"))
    out.append(("Clear errors (path, what was wrong, what is valid; no traceback)", f"{clear} of {len(tried)}", "all"))
    written = sum(int(v.get("objects_written") or 0) for v in tried)
    ok &= written == 0
    out.append(("Objects written by failed runs", str(written) if tried else NOT_RUN, "0"))

    faults = doc.get("faults") or {}
    cases = [k for k in faults if k != "rerun"]
    fclear = sum(1 for k in cases if faults[k].get("clear"))
    out.append(("Operator and API faults with a clear message (timeout, admission, conflict, 409, 429, no CRD)",
                f"{fclear} of {len(cases)}" if cases else NOT_RUN, "all"))  # fmt: skip

    inter = (doc.get("interruptions") or {}).get("example-chat")
    if inter:
        measured = (
            f"{inter['survived']} of {inter['kills']} ({inter['killed']} still running at their kill point; "
            f"seed {inter['seed']}; full re-run compared after every 5th)"
        )
        out.append(("site.yml runs SIGKILLed at seeded-random tasks, then converged on re-run", measured, "all"))
        ok &= inter["survived"] == inter["kills"] and inter.get("teardown_left", 0) == 0
        out.append(("teardown.yml runs killed part-way, then a full teardown left", f"{inter['teardown_left']} objects "
                    f"after {inter['teardown_kills']} kills", "0"))  # fmt: skip
    else:
        out.append(("site.yml runs killed with SIGKILL, then converged on re-run", NOT_RUN, "all"))

    secrets = doc.get("secrets") or {}
    leaked = sum(int(v.get("leaked") or 0) for v in secrets.values())
    ok &= leaked == 0
    files = sum(int(v.get("files") or 0) for v in secrets.values())
    out.append(("Secrets leaked (canaries in -vvv output, artifacts, trees, reports, objects)",
                f"{leaked} (in {files} files and the objects)" if secrets else NOT_RUN, "0"))  # fmt: skip

    teardown = doc.get("teardown") or {}
    left = sum(int(v.get("labelled_left") or 0) + int(v.get("orphans") or 0) for v in teardown.values())
    extra = sum(int(v.get("objects_after_teardown", 0)) - int(v.get("objects_before", 0)) for v in teardown.values())
    ok &= left == 0 and extra == 0
    runs = f"{len(teardown)} converges (every example; the sovereign burst cluster by cluster)"
    out.append(("Teardown leftovers (labelled objects, orphans, objects above the start) over every example",
                f"{left + max(extra, 0)} over {runs}" if teardown else NOT_RUN, "0"))  # fmt: skip

    ok &= _access_rows(doc, out)

    procs = (doc.get("processes") or {}).get("sigkill_parent")
    if procs:
        ok &= procs["survivors"] == 0
        measured = f"{procs['survivors']} of {procs['children']} (gone in {procs['gone_in_seconds']} s)"
        out.append(("Processes left after the tests' parent is SIGKILLed", measured, "0"))
    else:
        out.append(("Processes left after the tests' parent is SIGKILLed", NOT_RUN, "0"))
    return out, ok


def _access_rows(doc: dict, out: list) -> bool:
    """Least privilege: the sites converged as the deployer bound to access.yml's roles, and the
    namespace-only refusal."""
    teardown = doc.get("teardown") or {}
    granted = [v for v in teardown.values() if v.get("access_roles")]
    ok = len(granted) == len(teardown)
    what = "Example sites converged, drift-fixed and torn down as a ServiceAccount bound only to its access.yml roles"
    out.append((what, f"{len(granted)} of {len(teardown)}" if teardown else NOT_RUN, "all"))
    refused = (doc.get("access") or {}).get("serving_namespace_only")
    measured = NOT_RUN
    if refused:
        ok &= bool(refused.get("named")) and int(refused.get("objects_written", 1)) == 0
        named = "named" if refused.get("named") else "not named"
        measured = f"{named}, {refused.get('objects_written')} objects written"
    out.append(("Serving stage with namespace rights only, asked for cluster work: missing right, writes",
                measured, "named, 0"))  # fmt: skip
    return ok


def table(doc: dict) -> tuple[str, bool]:
    body, ok = rows(doc)
    lines = ["| What | Measured | Must be |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in body]
    return "\n".join(lines), ok


def main() -> int:
    text, ok = table(results.load())
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
