"""Edge fleet render for 10, 50 and 200 generated sites: wall time and slope (printed, not asserted).

Target (issue 10): the fleet of 200 sites plans and renders, whole site.yml, in 30 s or less on a
2-core machine, growing linearly. Both the serving stage (playbooks/serving.yml, which renders a
uniform fleet in one pass) and the whole site playbook (plan, platform and serving stages) are
measured at 10, 50 and 200 sites (FLEET_SIZES and FLEET_SITE_SIZES to change them).
No cluster is involved: delivery=render.
"""

from __future__ import annotations

import os

import pytest

from tests.bench.bench_helpers import count_files, generate_fleet, timed_playbook
from tests.serving_helpers import INVENTORIES, PLAYBOOKS

pytestmark = [pytest.mark.slow]

SIZES = {
    "serving.yml": [int(s) for s in os.environ.get("FLEET_SIZES", "10,50,200").split(",")],
    "site.yml": [int(s) for s in os.environ.get("FLEET_SITE_SIZES", "10,50,200").split(",")],
}


@pytest.mark.parametrize("playbook", sorted(SIZES))
def test_fleet_render_scaling(tmp_path, playbook):
    points = []
    for n in SIZES[playbook]:
        inv = generate_fleet(n, tmp_path / f"fleet-{n}", INVENTORIES / "example-edge-fleet")
        out = tmp_path / f"render-{playbook}-{n}"
        res = timed_playbook(
            PLAYBOOKS / playbook,
            inv,
            extravars={"delivery": "render", "render_dir": str(out), "report_dir": str(tmp_path / "rep")},
        )
        assert res["rc"] == 0, res["tail"]
        points.append((n, res["wall"], count_files(out)))
        wall = res["wall"]
        print(f"\n{playbook:12s} {n:4d} sites: {wall:7.1f} s, {wall / n:5.2f} s/site, {points[-1][2]} files")
    if len(points) >= 2:
        (n0, t0, _), (n1, t1, _) = points[0], points[-1]
        slope = (t1 - t0) / (n1 - n0)
        projected = t0 + slope * (200 - n0)
        print(f"{playbook:12s} slope {slope:.2f} s/site; projected 200 sites: {projected:.0f} s (target 30 s)")
