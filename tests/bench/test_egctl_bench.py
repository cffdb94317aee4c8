"""Benchmark of Envoy Gateway's egctl (mk/egctl.mk): the build time recorded when .cache/bin/egctl was built
(cold when the Go build cache was), a warm rebuild (Go's build cache as it is now) and one translation of the
sovereign front door. Printed, not asserted."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EGCTL = ROOT / ".cache" / "bin" / "egctl"


def test_egctl_build_and_translate_times(tmp_path):
    recorded = (
        (EGCTL.parent / "egctl.seconds").read_text().strip() if (EGCTL.parent / "egctl.seconds").exists() else "?"
    )
    with tempfile.TemporaryDirectory() as out:
        t0 = time.monotonic()
        res = subprocess.run(
            ["go", "build", "-trimpath", "-o", f"{out}/egctl", "github.com/envoyproxy/gateway/cmd/egctl"],
            cwd=ROOT / "tests" / "egctl",
            env={**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "", "CGO_ENABLED": "0"},
            capture_output=True,
            text=True,
            check=False,
        )
        warm = time.monotonic() - t0
    assert res.returncode == 0, res.stderr
    from tests.integration.test_egctl_translate import _egctl, _rendered

    intent, objs = _rendered("example-sovereign-burst", "onprem-fra-1", ["burst_routing"])
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": intent["burst"]["namespace"]}}
    t0 = time.monotonic()
    _egctl([ns, *objs], tmp_path)
    translate = time.monotonic() - t0
    print(
        f"\n[bench] egctl (envoyproxy/gateway v1.9.0 cmd/egctl): build recorded by make egctl {recorded} s; "
        f"warm rebuild {warm:.1f} s; x translate of the sovereign front door {translate:.2f} s"
    )
