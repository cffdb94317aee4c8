# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Stage: speculative decoding (seed section 6), with the n-gram fallback when draft/MTP weights do not fit."""

from __future__ import annotations

from .engine import EngineCtx
from .errors import PlanError
from .layout import Precision, choose_layout, try_layout
from .structs import Run


def ngram_spec() -> dict:
    return {
        "method": "ngram",
        "model": None,
        "num_speculative_tokens": 4,
        "prompt_lookup_max": 4,
        "prompt_lookup_min": 2,
    }


def spec_name(spec: dict | None) -> str:
    return spec["method"] if spec else "off"


def _mtp(model: dict) -> dict:
    return {"method": model.get("mtp_method"), "model": None, "num_speculative_tokens": 2}


def _eagle(model: dict) -> dict:
    return {"method": "eagle3", "model": model.get("eagle3_draft"), "num_speculative_tokens": 3}


def _explicit(run: Run, p: str) -> dict | None:
    model, dec = run.model, run.dec
    if p == "off":
        dec.add("speculative decoding", "off", "policy speculative: off")
        return None
    if p == "mtp":
        if not model.get("mtp_method"):
            raise PlanError(
                "policy.speculative", f"{model['id']} has no trained MTP head; use eagle3 (with a draft), ngram or off"
            )
        dec.add("speculative decoding", model["mtp_method"], "policy speculative: mtp")
        return _mtp(model)
    if p == "eagle3":
        if not model.get("eagle3_draft"):
            raise PlanError(
                "policy.speculative", f"no EAGLE-3 draft for {model['id']} in the catalog; use mtp, ngram or off"
            )
        dec.add("speculative decoding", "eagle3", f"policy speculative: eagle3 (draft {model['eagle3_draft']})")
        return _eagle(model)
    dec.add("speculative decoding", "ngram", "policy speculative: ngram")
    return ngram_spec()


def _auto(run: Run) -> dict | None:
    model, pol, dec = run.model, run.pol, run.dec
    if pol["tool_calling_heavy"]:
        why = "heavy tool-calling traffic: constrained decoding collapses acceptance (seed section 6: disable or test)"
        dec.add("speculative decoding", "off", why)
        return None
    if pol["code_completion"]:
        why = (
            "code completion: repetitive structure gives n-gram/prompt-lookup a high hit rate, no draft to "
            "host (seed section 6)"
        )
        dec.add("speculative decoding", "ngram", why)
        return ngram_spec()
    if model["kind"] == "moe" and model.get("mtp_method"):
        why = "MoE model with a trained MTP head: native MTP (seed section 6, MoE flagship row)"
        dec.add("speculative decoding", model["mtp_method"], why)
        return _mtp(model)
    if model.get("eagle3_draft"):
        why = f"dense model with a public EAGLE-3 draft ({model['eagle3_draft']}); seed recommends EAGLE 3.x"
        dec.add("speculative decoding", "eagle3", why)
        return _eagle(model)
    if model.get("mtp_method"):
        why = (
            "seed recommends EAGLE 3.1 for dense Qwen3.6, but the catalog has no EAGLE draft for it; the "
            "checkpoint ships a trained MTP head, which the seed calls the natural choice for MTP-trained models"
        )
        dec.add("speculative decoding", model["mtp_method"], why)
        return _mtp(model)
    why = "no MTP head or EAGLE draft in the catalog; n-gram only pays on repetitive text (set speculative: ngram)"
    dec.add("speculative decoding", "off", why)
    return None


def _engine_method(run: Run, spec: dict | None) -> dict | None:
    """The method name the engine version wants (deprecated aliases such as qwen3_5_mtp become mtp)."""
    if not spec:
        return spec
    method, note = run.sup.spec_method(spec["method"])
    if note:
        run.dec.add(
            "speculative method", method, f"{note}; vLLM rewrites it with a deprecation warning (engine_compat.yaml)"
        )
    ok, why = run.sup.spec_ok(method)
    if not ok:
        raise PlanError("policy.speculative", f"vLLM {run.sup.version} refuses it: {why}")
    return dict(spec, method=method)


def choose_speculative(run: Run, prec: Precision) -> EngineCtx:
    """Stage 2: the speculative method (seed section 6); returns the main engine context with it."""
    p = run.pol["speculative"]
    spec = _engine_method(run, _explicit(run, p) if p != "auto" else _auto(run))
    c = EngineCtx(run.n, run.gpu, prec.weights, prec.kv_dtype, spec)
    c_plain = c.with_spec(None)
    gpn, nodes = run.gpn, run.nodes
    # speculative heads cost memory; a strict budget falls back to n-gram (seed: no draft to host)
    if spec and spec["method"] != "ngram" and p == "auto":
        lay_spec, lay_plain = try_layout(c, gpn, nodes), try_layout(c_plain, gpn, nodes)
        if lay_plain and (not lay_spec or (lay_spec["tp"] * lay_spec["pp"] > lay_plain["tp"] * lay_plain["pp"])):
            spec = ngram_spec()
            run.dec.add(
                "speculative decoding",
                "ngram",
                f"{spec_name(spec)}: the draft/MTP weights would not fit the minimum layout (seed: strict "
                "memory budget -> n-gram)",
            )
            c = c.with_spec(spec)
    if spec and try_layout(c, gpn, nodes) is None and try_layout(c_plain, gpn, nodes) is None:
        choose_layout(c_plain, gpn, nodes, run.dec, "engine")  # raises: report the model's own weights
    return c
