# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Two small SVG charts written by hand (no plotting dependency): a latency CDF with the SLO line, and
throughput over time."""

from __future__ import annotations

from xml.sax.saxutils import escape

W, H, L, R, T, B = 560, 300, 60, 20, 30, 45
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b")


def _frame(title: str, labels: tuple[str, str], xmax: float, ymax: float, yfmt="{:g}") -> list[str]:
    xlabel, ylabel = labels
    xfmt = "{:g}"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="13">{escape(title)}</text>',
        f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>',
        f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>',
        f'<text x="{(L + W - R) / 2}" y="{H - 8}" text-anchor="middle">{escape(xlabel)}</text>',
        f'<text x="14" y="{(T + H - B) / 2}" text-anchor="middle" transform="rotate(-90 14 {(T + H - B) / 2})">'
        f"{escape(ylabel)}</text>",
    ]
    for i in range(5):
        x = L + (W - L - R) * i / 4
        y = H - B - (H - T - B) * i / 4
        out.append(f'<text x="{x:.1f}" y="{H - B + 14}" text-anchor="middle">{xfmt.format(xmax * i / 4)}</text>')
        out.append(f'<text x="{L - 4}" y="{y + 4:.1f}" text-anchor="end">{yfmt.format(ymax * i / 4)}</text>')
        out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#eee"/>')
    return out


def _xy(x: float, y: float, xmax: float, ymax: float) -> tuple[float, float]:
    return L + (W - L - R) * x / (xmax or 1), H - B - (H - T - B) * y / (ymax or 1)


def cdf(title: str, series: dict[str, list[float]], slo_ms: float | None, unit: str = "ms") -> str:
    """Empirical CDF of each series (sorted values), with a vertical line at the SLO and the 0.95 level."""
    values = [v for vs in series.values() for v in vs]
    xmax = max([*values, slo_ms or 0, 1.0]) * 1.05
    out = _frame(title, (f"latency ({unit})", "fraction of requests"), xmax, 1.0, yfmt="{:.2f}")
    for k, (name, vs) in enumerate(series.items()):
        vs = sorted(vs)
        pts = [_xy(v, (i + 1) / len(vs), xmax, 1.0) for i, v in enumerate(vs)]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        colour = COLOURS[k % len(COLOURS)]
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{path}"/>')
        out.append(
            f'<text x="{W - R - 4}" y="{T + 14 + 14 * k}" text-anchor="end" fill="{colour}">{escape(name)}</text>'
        )
    x95, y95 = _xy(0, 0.95, xmax, 1.0)
    out.append(f'<line x1="{L}" y1="{y95:.1f}" x2="{W - R}" y2="{y95:.1f}" stroke="#999" stroke-dasharray="2,3"/>')
    out.append(f'<text x="{L + 4}" y="{y95 - 3:.1f}" fill="#666">p95</text>')
    del x95
    if slo_ms:
        xs, dummy = _xy(slo_ms, 0, xmax, 1.0)
        out.append(f'<line x1="{xs:.1f}" y1="{T}" x2="{xs:.1f}" y2="{H - B}" stroke="red" stroke-dasharray="5,3"/>')
        out.append(f'<text x="{xs + 3:.1f}" y="{T + 12}" fill="red">SLO {slo_ms:g} {unit}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def throughput(title: str, series: dict[str, list[dict]]) -> str:
    """Output tokens/s per time bucket of each entry point."""
    pts_all = [b for bs in series.values() for b in bs]
    xmax = max([b["t_s"] for b in pts_all] + [1.0])
    ymax = max([b["output_tokens_per_s"] for b in pts_all] + [1.0]) * 1.1
    out = _frame(title, ("time since start (s)", "output tokens/s"), xmax, ymax, yfmt="{:.0f}")
    for k, (name, bs) in enumerate(series.items()):
        colour = COLOURS[k % len(COLOURS)]
        path = " ".join("{:.1f},{:.1f}".format(*_xy(b["t_s"], b["output_tokens_per_s"], xmax, ymax)) for b in bs)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{path}"/>')
        out.append(
            f'<text x="{W - R - 4}" y="{T + 14 + 14 * k}" text-anchor="end" fill="{colour}">{escape(name)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"
