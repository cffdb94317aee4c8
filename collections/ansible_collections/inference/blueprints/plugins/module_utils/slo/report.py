# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SLO report of one cluster: Markdown, JSON and SVG charts in one directory."""

from __future__ import annotations

import json
import os

from . import charts


def _fmt(v, unit=""):
    return "-" if v is None else f"{v:g}{unit}" if isinstance(v, (int, float)) else str(v)


def _pct(d: dict | None, q: int):
    return "-" if not d else _fmt(d.get(f"p{q}"))


def document(host: str, site: str, models: list[dict], calibration: dict | None, enforce: bool) -> dict:
    """The JSON report: per model its verdict and entry points (without the raw samples)."""
    out = {"cluster": host, "site": site, "enforce": enforce, "models": [], "calibration": calibration}
    for m in models:
        runs = [{k: v for k, v in r.items() if not k.startswith("_") and not k.endswith("_values")} for r in m["runs"]]
        out["models"].append({**m["verdict"], "runs": runs})
    out["passed"] = not any(m["verdict"]["findings"] for m in models)
    return out


def markdown(doc: dict, chart_files: dict) -> str:
    lines = [f"# SLO benchmark: {doc['site']} / {doc['cluster']}", ""]
    lines.append(
        "Verdict: **"
        + ("all SLOs met" if doc["passed"] else "SLO missed")
        + "**"
        + ("" if doc["enforce"] else " (not enforced: `verify_slo_enforce=false`)")
    )
    lines.append("")
    for m in doc["models"]:
        slo = m["slo"]
        lines += [f"## {m['model']}", "", f"SLO: TTFT p95 <= {_fmt(slo.get('ttft_p95_ms'))} ms, "
                  f"TPOT p95 <= {_fmt(slo.get('tpot_p95_ms'))} ms", ""]  # fmt: skip
        for f in m["findings"]:
            lines.append(f"- **missed**: {f['msg']}")
        if m["findings"]:
            lines.append("")
        lines += [
            "| entry point | requests | errors | TTFT p50 / p95 / p99 (ms) | TPOT p50 / p95 / p99 (ms) | req/s | "
            "output tok/s | goodput |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in m["runs"]:
            g = r.get("goodput")
            good = f"{g['fraction']:.1%} ({g['requests_per_s']:g} req/s)" if g else "-"
            ttft = " / ".join(_pct(r["ttft"], q) for q in (50, 95, 99))
            tpot = " / ".join(_pct(r["tpot"], q) for q in (50, 95, 99))
            lines.append(
                f"| {r['pool']} ({len(r['endpoints'])} endpoint{'s' if len(r['endpoints']) != 1 else ''}) | "
                f"{r['requests']} | {r['errors']} ({r['error_rate']:.1%}) | {ttft} | {tpot} | "
                f"{r['throughput']['requests_per_s']:g} | {r['throughput']['output_tokens_per_s']:g} | {good} |"
            )
        lines.append("")
        load = m["runs"][0]["load"] if m["runs"] else {}
        bounds = m["runs"][0]["bounds"] if m["runs"] else {}
        lines.append(
            "Load: "
            + (
                f"Poisson arrivals at {_fmt(round(load['rate_rps'], 3))} req/s"
                if load.get("rate_rps")
                else "closed loop"
            )
            + f", at most {load.get('max_concurrency')} in flight; bounded by {bounds.get('max_requests')} requests "
            + f"and {_fmt(bounds.get('max_seconds'))} s per entry point."
        )
        lines.append("")
        for kind, path in chart_files.get(m["model"], {}).items():
            lines.append(f"![{m['model']} {kind}]({os.path.basename(path)})")
        lines.append("")
    cal = doc.get("calibration")
    if cal:
        lines += [
            "## Calibration",
            "",
            f"Written to `{cal['file']}`" + (f" ({cal['note']})" if cal.get("note") else "") + ".",
            "",
        ]
        lines += ["| model | GPU | vLLM | layout | prefill tok/s @ prompt | decode tok/s/seq @ batch | KV blocks |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        for e in cal["entries"]:
            lay = e.get("layout") or {}
            pre = (
                f"{_fmt(e.get('prefill_tokens_per_s'))} @ {_fmt(e.get('prompt_tokens'))}"
                if e.get("prefill_tokens_per_s")
                else "-"
            )
            dec = (f"{_fmt(e.get('decode_tokens_per_s_per_seq'))} @ {_fmt(e.get('batch'))}"
                   if e.get("decode_tokens_per_s_per_seq") else "-")  # fmt: skip
            kv = (cal.get("kv_blocks") or {}).get(e["model"] + "/" + e["gpu"])
            lines.append(
                f"| {e['model']} | {e['gpu']} | {e['vllm_version']} | TP={lay.get('tp')} PP={lay.get('pp')} "
                f"DP={lay.get('dp')} | {pre} | {dec} | {_fmt(kv)} |"
            )
        lines.append("")
        if cal.get("before_after"):
            lines += ["### The plan before and after calibration", "",
                      "| model | | GPUs needed | replicas | batch per rank | TTFT p95 (ms) | TPOT p95 (ms) "
                      "| efficiency |",
                      "|---|---|---|---|---|---|---|---|"]  # fmt: skip
            for row in cal["before_after"]:
                if "before" not in row:
                    lines.append(f"| {row['model']} | not re-planned: {row.get('error')} | | | | | | |")
                    continue
                for when in ("before", "after"):
                    p = row[when]
                    lines.append(
                        f"| {row['model']} | {when} | {_fmt(p['gpus_needed'])} | {_fmt(p['replicas'])} | "
                        f"{_fmt(p['batch_per_rank'])} | {_fmt(p['ttft_p95_ms'])} | {_fmt(p['tpot_p95_ms'])} | "
                        f"{p['efficiency']} |"
                    )
            lines.append("")
    return "\n".join(lines) + "\n"


def write(directory: str, meta: dict, models: list[dict], calibration: dict | None) -> dict:
    """Write report.md, report.json and the charts; return the paths and the JSON document. ``meta``: cluster,
    site, enforce."""
    os.makedirs(directory, exist_ok=True)
    chart_files: dict = {}
    for m in models:
        files = chart_files.setdefault(m["model"], {})
        slo = m["verdict"]["slo"]
        for metric, key in (("ttft", "ttft_p95_ms"), ("tpot", "tpot_p95_ms")):
            series = {r["pool"]: r[f"{metric}_values"] for r in m["runs"] if r.get(f"{metric}_values")}
            if series:
                path = os.path.join(directory, f"{m['model']}-{metric}-cdf.svg")
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(charts.cdf(f"{m['model']}: {metric.upper()} CDF", series, slo.get(key)))
                files[f"{metric} CDF"] = path
        series = {r["pool"]: r["series"] for r in m["runs"] if r.get("series")}
        if series:
            path = os.path.join(directory, f"{m['model']}-throughput.svg")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(charts.throughput(f"{m['model']}: throughput over time", series))
            files["throughput"] = path
    doc = document(meta["cluster"], meta["site"], models, calibration, meta["enforce"])
    md_path, json_path = os.path.join(directory, "report.md"), os.path.join(directory, "report.json")
    with open(json_path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
    with open(md_path, "w", encoding="utf-8") as fh:
        fh.write(markdown(doc, chart_files))
    return {"markdown": md_path, "json": json_path, "charts": chart_files, "document": doc}
