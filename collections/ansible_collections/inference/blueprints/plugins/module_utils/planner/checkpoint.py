# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""What vLLM loads for the weights the plan sized: the one decision of the served checkpoint and its flag.

``served(model, weights, ...)`` returns ``{"model", "quantization", "why"}``: the repository (or the
site's artifact) ``vllm serve`` names, and ``--quantization`` when vLLM must quantize at load. The
engine arguments (engine_args) and the printed ``vllm serve`` line (report) both read it; the
precision stage reads it too, since weights vLLM quantizes online are priced as per-tensor FP8.

vLLM quantizes online only to FP8 and only from a 16-bit checkpoint (``--quantization fp8``:
``Fp8Config`` with ``is_checkpoint_fp8_serialized`` false, per-tensor weight scales); a checkpoint
already quantized (its config.json's ``quantization_config``) is served as it is, without the flag.
"""

from __future__ import annotations

from .errors import PlanError

ONLINE = "fp8"  # the one precision vLLM quantizes a BF16 checkpoint to at load time


def _published(model: dict) -> dict:
    """weights -> repository id of the model's published checkpoints (catalog ``checkpoints``)."""
    out = dict(model.get("checkpoints") or {})
    if model.get("hf_repo"):
        out.setdefault(model.get("native_dtype", "bf16"), model["hf_repo"])
    return out


def _online(model: dict, weights: str, source: str, why: str) -> dict:
    native = model.get("native_dtype", "bf16")
    if weights != ONLINE or native != "bf16":
        have = f"{source} holds {native} weights" if source else f"{model['id']} has no {weights} checkpoint"
        raise PlanError(
            "weights",
            f"{weights} weights cannot be served: {have} and vLLM quantizes online only from bf16 to fp8 "
            f"(--quantization=fp8); valid: {native}"
            + (", fp8" if native == "bf16" else "")
            + f", or an artifact that holds {weights} weights",
        )
    return {
        "model": source,
        "quantization": ONLINE,
        "why": f"{why}: vLLM quantizes the BF16 weights to FP8 at load (--quantization=fp8, per-tensor scales)",
    }


def _from_artifact(model: dict, weights: str, artifact: str, quantized: bool) -> dict:
    for w, repo in _published(model).items():
        if artifact.rstrip("/") in (f"hf://{repo}", repo) and w != weights:
            if w == model.get("native_dtype", "bf16"):
                return _online(model, weights, artifact, f"{artifact} is the {w} checkpoint")
            raise PlanError(
                "artifact",
                f"{artifact} holds {w} weights but the plan sizes {weights}; valid: weights {w}"
                + (f", or the artifact hf://{_published(model)[weights]}" if weights in _published(model) else ""),
            )
    if model.get("checkpoint_quantization") or not quantized:
        # an own model's config describes its artifact: a checkpoint in another precision is quantized online
        return _online(model, weights, artifact, f"{artifact} holds {model.get('native_dtype', 'bf16')} weights")
    return {"model": artifact, "quantization": None, "why": f"the artifact holds {weights} weights (as stated)"}


def served(model: dict, weights: str, quantized_checkpoint: bool = True, artifact: str | None = None) -> dict:
    """The checkpoint ``vllm serve`` loads for ``weights`` and its ``--quantization`` (None: as stored).
    An ``hf://org/name`` artifact is served by its repository id, as ``vllm serve`` names it."""
    out = _served(model, weights, quantized_checkpoint, artifact)
    if out["model"].startswith("hf://"):
        out["model"] = out["model"][len("hf://") :].rstrip("/")
    return out


def _served(model: dict, weights: str, quantized_checkpoint: bool, artifact: str | None) -> dict:
    native = model.get("native_dtype", "bf16")
    repos = _published(model)
    if weights == native:
        src = artifact or repos.get(native) or model["id"]
        return {"model": src, "quantization": None, "why": f"{src} holds {native} weights"}
    if artifact:
        return _from_artifact(model, weights, artifact, quantized_checkpoint)
    base = repos.get(native) or model["id"]
    if quantized_checkpoint and weights in repos:
        return {"model": repos[weights], "quantization": None, "why": f"the published {weights} checkpoint"}
    if quantized_checkpoint and not model.get("checkpoint_quantization"):
        # the caller states a checkpoint of these weights exists but none is known: name what is needed (priced as
        # the model's fp8_format says), never a repository that may not exist
        return {
            "model": f"<a {weights} checkpoint of {base}>",
            "quantization": None,
            "why": f"no published {weights} checkpoint of {model['id']} in the catalog: give its artifact",
        }
    if model.get("checkpoint_quantization"):
        reason = f"the checkpoint its config.json describes holds {model.get('native_dtype', 'bf16')} weights"
    else:
        reason = "quantized_checkpoint: false"
    return _online(model, weights, base, reason)


def servable(model: dict, weights: str, quantized_checkpoint: bool = True, artifact: str | None = None) -> bool:
    try:
        served(model, weights, quantized_checkpoint, artifact)
    except PlanError:
        return False
    return True
