# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Catalog loading. PyYAML is imported lazily (ansible-test imports module_utils without it)."""

from __future__ import annotations

import copy
import functools
import os

CATALOG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "catalog")
# The engine version a plan is written for when its inputs name none (catalog/vllm_flags_<minor>.yaml).
DEFAULT_VLLM_VERSION = "0.33.0"


@functools.cache
def _load(name: str) -> dict:
    import yaml  # lazy: not needed to import the package

    # libyaml's loader when PyYAML has it: the catalogs load in every Ansible worker process
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(os.path.join(CATALOG_DIR, name), encoding="utf-8") as fh:
        return yaml.load(fh, Loader=loader)  # noqa: S506 - a safe loader


def load(name: str) -> dict:
    """A catalog file as loaded and cached (shared: callers must not modify it)."""
    return _load(name)


def models() -> dict:
    return copy.deepcopy(_load("models.yaml"))


def gpus() -> dict:
    return copy.deepcopy(_load("gpus.yaml"))


def policies() -> dict:
    return copy.deepcopy(_load("policies.yaml"))


def vllm_flags(version: str) -> dict:
    """The flags the planner may emit for a vLLM minor version ("0.33.0" -> vllm_flags_0.33.yaml)."""
    minor = ".".join(str(version).split(".")[:2])
    return copy.deepcopy(_load(f"vllm_flags_{minor}.yaml"))


def supported_vllm_versions() -> list[str]:
    out = []
    for fn in sorted(os.listdir(CATALOG_DIR)):
        if fn.startswith("vllm_flags_") and fn.endswith(".yaml"):
            out.append(fn[len("vllm_flags_") : -len(".yaml")])
    return out
