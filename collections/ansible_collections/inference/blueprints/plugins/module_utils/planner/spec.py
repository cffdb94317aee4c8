# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Argument spec of the inference.blueprints.plan module (plain data; shared by the module and its action)."""

from __future__ import annotations

from .data import DEFAULT_VLLM_VERSION
from .hf_config import QUANTIZATIONS

ARGUMENT_SPEC = {
    "model": {"type": "str"},
    "model_architecture": {"type": "dict"},
    "model_quantization": {"type": "str", "choices": list(QUANTIZATIONS)},
    "artifact": {"type": "str"},
    "name": {"type": "str"},
    "blueprint": {"type": "str", "default": "chat"},
    "gpu": {"type": "str", "required": True},
    "gpus_per_node": {"type": "int", "default": 1},
    "nodes": {"type": "int", "default": 1},
    "interconnect": {"type": "str", "choices": ["nvlink", "rdma", "ethernet"]},
    "decode_gpu": {"type": "str"},
    "decode_gpus_per_node": {"type": "int"},
    "decode_nodes": {"type": "int"},
    "weights": {"type": "str", "default": "auto", "choices": ["auto", "bf16", "fp8", "fp4", "nvfp4", "int4", "w4a16"]},
    "kv_cache_dtype": {"type": "str", "choices": ["auto", "bf16", "bfloat16", "fp8", "nvfp4"]},
    "max_model_len": {"type": "int"},
    "contexts": {"type": "list", "elements": "int"},
    "traffic": {"type": "dict"},
    "traffic_defaults": {"type": "dict"},
    "slo": {"type": "dict"},
    "policy": {"type": "dict", "default": {}},
    "gpu_memory_utilization": {"type": "float", "default": 0.92},
    "kv_cache_memory_bytes": {"type": "int"},
    "quantized_checkpoint": {"type": "bool", "default": True},
    "vllm_version": {"type": "str", "default": DEFAULT_VLLM_VERSION},
}
REQUIRED_ONE_OF = [["model", "model_architecture"]]
