# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Markdown report and SVG charts (per-GPU memory breakdown, pool sizes) for plans. Stdlib only (and the planner's
own constants)."""

from __future__ import annotations

import json
import os
import re
from xml.sax.saxutils import escape

from . import units

COLORS = {"weights": "#4e79a7", "kv": "#59a14f", "overhead": "#f28e2b", "reserved": "#bab0ac"}


def _svg_open(width: int, height: int) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">'
    )


def _title(text: str) -> str:
    return f'<text x="10" y="22" font-size="14" font-weight="bold">{escape(text)}</text>'


def _pools(plan: dict) -> list[tuple[str, dict]]:
    return [(k, v) for k, v in plan["pools"].items() if v]


def _required_gpus(pool: dict) -> int | None:
    """GPUs the traffic needs in a pool (the plan gives GPUs for P/D pools, replicas for serve pools)."""
    if pool.get("required_gpus") is not None:
        return pool["required_gpus"]
    if pool.get("required_replicas") is not None:
        return pool["required_replicas"] * pool["gpus_per_replica"]
    return None


def _capacity(plan: dict, pool: dict) -> int:
    """GPUs of the pool's type the hardware has (the decode pool's own type when it has one)."""
    hw = plan["hardware"]
    if hw.get("decode_gpu") and pool["gpu"] == hw["decode_gpu"] and pool["gpu"] != hw["gpu"]:
        return hw["decode_nodes"] * hw["decode_gpus_per_node"]
    return hw.get("gpus_total") or hw["nodes"] * hw["gpus_per_node"]


def _engine_layout(pool: dict) -> str:
    return " ".join(f"{k.upper()}={pool[k]}" for k in ("tp", "pp", "dp", "ep", "dcp", "pcp"))


def _shell_line(arg: str) -> str:
    """One engine argument as a shell reads it: values quoted the way the deployment quotes them."""
    from ..intent import engine  # the one shell quoting rule (VLLM_ADDITIONAL_ARGS uses it too)

    flag, value = engine.split(arg)
    return flag if value is None else f"{flag}={engine.shell_quote(value)}"


def memory_svg(plan: dict) -> str:
    """Stacked bar per pool: weights, KV pool, overhead and the share vLLM leaves unused (1 - utilization)."""
    rows = _pools(plan)
    width, left, bar_h, gap, top = 760, 150, 26, 18, 40
    height = top + len(rows) * (bar_h + gap) + 50
    out = [
        _svg_open(width, height),
        _title(f"Per-GPU memory (GiB): {plan['model']['id']}"),
    ]
    scale_max = max(v["memory"]["gpu_memory_gib"] for _role, v in rows)
    span = width - left - 150
    y = top
    for role, pool in rows:
        m = pool["memory"]
        cap_x = left + span * m["gpu_memory_gib"] / scale_max
        out.append(
            f'<line x1="{cap_x:.1f}" y1="{y - 4}" x2="{cap_x:.1f}" y2="{y + bar_h + 4}" stroke="black" '
            'stroke-dasharray="4,3"><title>GPU memory (capacity)</title></line>'
        )
        used = m["weights_gib_per_gpu"] + m["kv_pool_gib_per_gpu"] + m["overhead_gib_per_gpu"]
        out.append(
            f'<text x="{cap_x + 6:.1f}" y="{y + bar_h * 0.7:.1f}">{used:.1f} of {m["gpu_memory_gib"]:.1f} GiB</text>'
        )
        parts = [
            ("weights", m["weights_gib_per_gpu"]),
            ("kv", m["kv_pool_gib_per_gpu"]),
            ("overhead", m["overhead_gib_per_gpu"]),
            ("reserved", max(0.0, m["gpu_memory_gib"] - m["budget_gib_per_gpu"])),
        ]
        out.append(f'<text x="10" y="{y + bar_h * 0.7:.1f}">{escape(role)} ({escape(pool["gpu"])})</text>')
        x = float(left)
        for name, val in parts:
            w = span * val / scale_max
            if w <= 0:
                continue
            out.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{COLORS[name]}">'
                f"<title>{name}: {val:.2f} GiB</title></rect>"
            )
            if w > 38:
                out.append(f'<text x="{x + 4:.1f}" y="{y + bar_h * 0.7:.1f}" fill="white">{val:.1f}</text>')
            x += w
        y += bar_h + gap
    lx = left
    for name, label in (
        ("weights", "weights"),
        ("kv", "KV pool"),
        ("overhead", "activations/graphs/NCCL"),
        ("reserved", "not budgeted"),
    ):
        out.append(f'<rect x="{lx}" y="{y}" width="12" height="12" fill="{COLORS[name]}"/>')
        out.append(f'<text x="{lx + 16}" y="{y + 11}">{label}</text>')
        lx += 30 + 7 * len(label)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def pools_svg(plan: dict) -> str:
    """GPUs per pool: planned and (when known) required by the traffic."""
    rows = _pools(plan)
    width, left, bar_h, gap, top = 760, 150, 22, 22, 40
    height = top + len(rows) * (2 * bar_h + gap) + 40
    height += 20 * len({p["gpu"] for _r, p in rows})
    vals = [(p["gpus"], _required_gpus(p), _capacity(plan, p)) for _role, p in rows]
    scale_max = max([v for trio in vals for v in trio if v] + [1])
    span = width - left - 140
    out = [
        _svg_open(width, height),
        _title(f"Pool sizes (GPUs): {plan['model']['id']}"),
    ]
    y = top
    for (role, p), (planned, req, cap) in zip(rows, vals, strict=True):
        out.append(f'<text x="10" y="{y + bar_h * 0.75:.1f}">{escape(role)} ({escape(p["gpu"])})</text>')
        w = span * planned / scale_max
        out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="#4e79a7"/>')
        out.append(f'<text x="{left + w + 6:.1f}" y="{y + bar_h * 0.75:.1f}">{planned} planned</text>')
        if req is not None:
            met = planned >= req
            w2 = span * req / scale_max
            colour = "#59a14f" if met else "#e15759"
            out.append(f'<rect x="{left}" y="{y + bar_h}" width="{w2:.1f}" height="{bar_h}" fill="{colour}"/>')
            label = f"{req} required" + ("" if met else f" (short by {req - planned})")
            out.append(f'<text x="{left + w2 + 6:.1f}" y="{y + bar_h * 1.75:.1f}">{label}</text>')
        cap_x = left + span * cap / scale_max
        out.append(
            f'<line x1="{cap_x:.1f}" y1="{y - 4}" x2="{cap_x:.1f}" y2="{y + 2 * bar_h + 4}" stroke="black" '
            f'stroke-dasharray="4,3"><title>capacity: {cap} {escape(p["gpu"])}</title></line>'
        )
        out.append(f'<text x="{cap_x + 4:.1f}" y="{y - 6}" font-size="10">capacity {cap}</text>')
        y += 2 * bar_h + gap
    for gpu in sorted({p["gpu"] for _r, p in rows}):
        mine = [(p, v) for (_r, p), v in zip(rows, vals, strict=True) if p["gpu"] == gpu]
        planned = sum(v[0] for _p, v in mine)
        reqs = [v[1] for _p, v in mine if v[1] is not None]
        total = f"total {gpu}: {planned} planned of {mine[0][1][2]}"
        if reqs:
            total += f", {sum(reqs)} required"
        out.append(f'<text x="10" y="{y + 4}" font-weight="bold">{escape(total)}</text>')
        y += 20
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _table(headers: list[str], rows: list[list]) -> str:
    def cell(v):
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def _connector(plan: dict) -> str:
    conn = plan["kv_connector"] or {}
    children = [c["name"] for c in conn.get("connectors") or []]
    return conn.get("name", "none") + (f"({', '.join(children)})" if children else "")


def _offload(off: dict | None) -> str:
    if not off:
        return "none"
    return (
        f"{off['tier']} via {off['connector']}: {off['gib_per_rank']} GiB per rank, {off['gib_per_pod']} GiB per pod"
        + (f" (/dev/shm {off['shm_gib_per_pod']} GiB)" if off.get("shm_gib_per_pod") else "")
    )


def _option_cell(opt: dict | None, key: str) -> str:
    if not opt or opt.get("rejected"):
        return (opt or {}).get("rejected", "not sized")
    value = opt.get(key)
    return (
        "n/a (no arrival rate)" if value is None and key == "cost_per_million_tokens" else units.with_unit(value, None)
    )


def _pd_md(plan: dict) -> list[str]:
    """Aggregated and disaggregated options side by side (plan.disaggregation_options)."""
    opts = plan.get("disaggregation_options") or {}
    if not opts:
        return []
    agg, dis = opts.get("aggregated"), opts.get("disaggregated")
    rows = []
    keys = (
        ("GPUs", "gpus"),
        (f"cost ({units.COST_PER_HOUR})", "cost_per_hour"),
        (f"cost ({units.COST_PER_MTOK})", "cost_per_million_tokens"),
    )
    for label, key in keys:
        rows.append([label, _option_cell(agg, key), _option_cell(dis, key)])
    if agg and agg.get("serve"):
        a = agg["serve"]
        rows.append(["layout", f"{a['replicas']} x {a['gpu_layout']}", ""])
    if dis and dis.get("prefill"):
        rows.append(
            [
                "P/D pools",
                "",
                f"{dis['prefill']['replicas']} x {dis['prefill']['gpu_layout']} prefill + "
                f"{dis['decode']['replicas']} x {dis['decode']['gpu_layout']} decode "
                f"(P:D {dis['prefill_to_decode_gpus']})",
            ]
        )
    for label, metric in (("TTFT p95 (ms)", "ttft_p95_ms"), ("TPOT p95 (ms)", "tpot_p95_ms")):
        rows.append([label, _option_cell(agg, metric), _option_cell(dis, metric)])
    out = ["", "### Aggregated vs disaggregated (modelled, at the SLOs)", ""]
    out.append(_table(["", "aggregated", "disaggregated"], rows))
    out += ["", f"Choice: **{opts.get('choice')}**: {opts.get('why', '')}"]
    return out


def _slots_md(lat: dict) -> list[str]:
    """One line on the wait for a sequence slot (open traffic only)."""
    rank, where = lat.get("per_rank") or {}, "counted in TTFT above"
    if not rank.get("slot_utilization") and (lat.get("decode_per_rank") or {}).get("slot_utilization"):
        rank, where = lat["decode_per_rank"], "the decode pool's; counted in TTFT above"
    if rank.get("slot_utilization") is None:
        return []
    if rank["slot_utilization"] >= 1:
        return [
            "",
            f"Sequence slots (max_num_seqs) of a rank: overloaded, offered {rank['slot_utilization'] * 100:.0f} % of "
            "what they hold; the queue grows without bound (more replicas or GPUs are needed).",
        ]
    return [
        "",
        f"Sequence slots (max_num_seqs) of a rank: {rank['slot_utilization'] * 100:.0f} % busy, "
        f"{rank['slot_wait_probability'] * 100:.0f} % of arrivals wait for one, p95 wait "
        f"{rank['slot_wait_p95_ms']} ms ({where}).",
    ]


def _figure(c: dict, value, key: str) -> str:
    """A candidate's figure: the value, blank for a layout that was not sized (its row says why), or n/a with the
    reason for what its pool does not do (a P/D prefill pool decodes nothing, a decode pool prefills nothing)."""
    if value is not None:
        return str(value)
    if c.get("rejected") or not c.get("latency"):
        return ""
    return f"n/a ({c['role']} pool)" if key in NA_FIGURES.get(c["role"], ()) else "n/a"


NA_FIGURES = {"prefill": ("batch_per_rank", "tpot_p95_ms"), "decode": ("ttft_p95_ms",)}


def _candidates_md(cands: list[dict]) -> list[str]:
    if not cands:
        return []
    rows = []
    for c in cands:
        lay, lat = c["layout"], c.get("latency") or {}
        rows.append(
            [
                f"TP={lay['tp']} PP={lay['pp']} DP={lay['dp']} EP={lay['ep']}",
                c.get("gpus_needed") or "",
                _figure(c, c.get("batch_per_rank"), "batch_per_rank"),
                _figure(c, lat.get("ttft_p95_ms"), "ttft_p95_ms"),
                _figure(c, lat.get("tpot_p95_ms"), "tpot_p95_ms"),
                c.get("cost_per_hour", ""),
                ("chosen: " if c.get("chosen") else "") + c.get("why", ""),
            ]
        )
    head = ["layout", "GPUs", "batch (sequences per DP rank)", "TTFT p95 (ms)", "TPOT p95 (ms)"]
    head += [f"cost ({units.COST_PER_HOUR})", "why"]
    notes = sorted({(c.get("latency") or {}).get("not_applicable") for c in cands} - {None})
    return ["", "### Layout candidates", "", _table(head, rows)] + [f"\nn/a: {n}." for n in notes]


def _latency_md(plan: dict) -> list[str]:
    lat = plan.get("latency") or {}
    if not lat:
        return []
    slo = plan["slo"]
    out = ["", "### Latency at the planned load (model)", ""]
    out.append(
        _table(
            ["metric", "p50", "p95", "SLO (p95)"],
            [
                ["TTFT ms", lat.get("ttft_p50_ms"), lat.get("ttft_p95_ms"), slo["ttft_p95_ms"]],
                ["TPOT ms", lat.get("tpot_p50_ms"), lat.get("tpot_p95_ms"), slo["tpot_p95_ms"]],
            ],
        )
    )
    out += _slots_md(lat)
    out += ["", f"Queueing: {lat.get('queueing_model')}", "", f"Efficiencies: {lat.get('efficiency')}"]
    out += _candidates_md(plan.get("layout_candidates") or [])
    spare = plan.get("spare_gpus") or {}
    if spare:
        out += ["", f"Spare GPUs: {spare.get('count')} ({spare.get('why')})"]
    return out + _pd_md(plan)


def to_markdown(plan: dict, title: str | None = None, images: dict | None = None) -> str:
    m, hw, mem, kv = plan["model"], plan["hardware"], plan["memory"], plan["kv"]
    out = [f"## {title or m['name'] + ' (' + m['id'] + ')'}", ""]
    between = {"nvlink": "no RDMA NICs", "rdma": "RDMA", "ethernet": "Ethernet"}.get(hw["interconnect"], "?")
    hw_s = (
        f"{hw['nodes']} node(s) x {hw['gpus_per_node']} {hw['gpu']} "
        f"(in a node: {hw.get('gpu_link') or '?'}; between nodes: {between})"
    )
    if hw.get("decode_gpu"):
        hw_s += f"; decode pool {hw['decode_nodes']} x {hw['decode_gpus_per_node']} {hw['decode_gpu']}"
    out.append(
        _table(
            ["item", "value"],
            [
                ["blueprint", f"{plan['blueprint']} ({plan['policy_source']})"],
                ["hardware", hw_s],
                ["weights", f"{plan['weights']['precision']}, {plan['weights']['total_gib']} GiB in all"],
                [
                    "layout",
                    "; ".join(
                        f"{role}: {p['replicas']} replica(s) of {p['gpus_per_replica']} GPUs ({_engine_layout(p)})"
                        for role, p in _pools(plan)
                    ),
                ],
                ["disaggregated", plan["disaggregated"]],
                ["speculative", (plan["speculative"] or {}).get("method", "off")],
                ["KV connector", _connector(plan)],
                ["KV offload", _offload(plan.get("kv_offload"))],
                ["vLLM", plan["vllm_version"]],
            ],
        )
    )
    out += ["", "### Memory per GPU (main pool)", ""]
    out.append(
        _table(
            ["GPU memory", "budget (x util)", "weights", "overhead", "KV pool"],
            [
                [
                    f"{mem['gpu_memory_gib']} GiB",
                    f"{mem['budget_gib_per_gpu']} GiB (x {mem['gpu_memory_utilization']})",
                    f"{mem['weights_gib_per_gpu']} GiB",
                    f"{mem['overhead_gib_per_gpu']} GiB",
                    f"{mem['kv_pool_gib_per_gpu']} GiB",
                ]
            ],
        )
    )
    if images and images.get("memory"):
        out += ["", f"![per-GPU memory]({images['memory']})"]
    out += ["", "### KV cache", ""]
    out.append(
        _table(
            [
                "dtype",
                "bytes/token (model)",
                "bytes/token/GPU",
                "block size (tokens)",
                "blocks",
                "tokens",
                "vLLM log tokens",
            ],
            [
                [
                    kv["dtype"],
                    int(kv["bytes_per_token"]),
                    kv["bytes_per_token_per_gpu"],
                    kv["block_size"]
                    if kv["block_size"] == kv["block_size_no_spec"]
                    else f"{kv['block_size']} ({kv['block_size_no_spec']} without speculative tokens)",
                    kv["blocks"],
                    kv["tokens"],
                    kv["reported_tokens"],
                ]
            ],
        )
    )
    out += ["", "Max concurrent sequences per engine:", ""]
    out.append(_table(["context (tokens)", "sequences"], [[c, n] for c, n in kv["max_concurrency"].items()]))
    out += ["", "### Pools", ""]
    prow = []
    for role, p in _pools(plan):
        prow.append(
            [
                role,
                p["gpu"],
                p["replicas"],
                p["gpus_per_replica"],
                p["gpus"],
                "" if _required_gpus(p) is None else _required_gpus(p),
                _engine_layout(p),
                p["max_num_seqs"],
            ]
        )
    out.append(
        _table(
            [
                "pool",
                "GPU",
                "replicas",
                "GPUs/replica",
                "GPUs",
                "required GPUs",
                "layout",
                "max_num_seqs (per DP rank)",
            ],
            prow,
        )
    )
    if images and images.get("pools"):
        out += ["", f"![pool sizes]({images['pools']})"]
    out += _latency_md(plan)
    est, eff = plan["estimates"], plan["efficiency"]
    out += ["", "### Estimates (step-latency model)", ""]
    out.append(
        _table(
            ["factor", "value", "unit"],
            [[k, _unset(k, v), units.of(k) or ""] for k, v in [*eff.items(), *est.items()]],
        )
    )
    out += ["", "### Decisions", ""]
    out.append(
        _table(["what", "choice", "why"], [[d["what"], decision_choice(d), d["why"]] for d in plan["decisions"]])
    )
    if plan["seed_comparison"]:
        out += ["", "### Where the seed article and vLLM's arithmetic differ", ""]
        out.append(
            _table(
                ["seed claim", "seed", "plan", "why"],
                [[r["claim"], r["seed"], r["plan"], r["note"]] for r in plan["seed_comparison"]],
            )
        )
    if plan["warnings"]:
        out += ["", "### Warnings", ""] + [f"- {w}" for w in plan["warnings"]]
    out += ["", "### Engine arguments", ""]
    for role, p in _pools(plan):
        out += [
            f"{role}:",
            "",
            "```",
            " \\\n  ".join(
                ["vllm serve " + _shell_line(p.get("served_model") or m.get("hf_repo") or m["id"])]
                + [_shell_line(a) for a in p["engine_args"]]
            ),
            "```",
            "",
        ]
    return "\n".join(out) + "\n"


UNSET = {
    "prefill_mfu": "not set (the measured efficiencies)",
    "decode_mbu": "not set (the measured efficiencies)",
    "moe_compute": "n/a (dense model)",
    "moe_bandwidth": "n/a (dense model)",
    "moe_fit": "n/a (dense model)",
}


def _unset(key: str, value):
    """An estimate or efficiency figure as printed: a missing one says why."""
    return UNSET.get(key, "n/a") if value is None else value


def decision_choice(d: dict) -> str:
    """A decision's choice as printed: with its unit when it is a number that has one ("1 rank", "4 ranks")."""
    unit = d.get("unit")
    if not unit:
        return str(d["choice"])
    head, _sep, rest = unit.partition(" ")
    if d["choice"] == 1 and head.endswith("s"):
        unit = head[:-1] + (" " + rest if rest else "")
    return f"{d['choice']} {unit}"


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", s).strip("-").lower() or "plan"


def write_report(entries: list[tuple[str, dict]], directory: str) -> list[str]:
    """Write ``report.md`` plus one memory and one pool SVG per plan into ``directory``; return the paths."""
    os.makedirs(directory, exist_ok=True)
    paths, parts = [], ["# Sizing plan report", ""]
    for label, plan in entries:
        slug = _slug(label)
        mem_fn, pool_fn = f"{slug}-memory.svg", f"{slug}-pools.svg"
        for fn, body in ((mem_fn, memory_svg(plan)), (pool_fn, pools_svg(plan))):
            path = os.path.join(directory, fn)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(body)
            paths.append(path)
        parts.append(to_markdown(plan, label, {"memory": mem_fn, "pools": pool_fn}))
        with open(os.path.join(directory, f"{slug}.json"), "w", encoding="utf-8") as fh:
            json.dump(plan, fh, indent=2, sort_keys=True)
        paths.append(os.path.join(directory, f"{slug}.json"))
    md = os.path.join(directory, "report.md")
    with open(md, "w", encoding="utf-8") as fh:
        fh.write("\n".join(parts))
    return [md, *paths]
