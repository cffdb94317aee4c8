# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""The small typed structures the planning stages pass along (inputs -> layout -> rates -> pools -> output)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from . import compat, data, units


def r(x: float, n: int = 2) -> float:
    return round(float(x), n)


def num(x: float):
    """An int when the value is whole (byte counts), else rounded to 0.1."""
    return int(round(x)) if abs(x - round(x)) < 1e-6 else round(float(x), 1)


class Decisions(list):
    """The plan's decisions, each {what, choice, why}, and ``unit`` when the choice is a number with one."""

    def add(self, what: str, choice, why: str) -> None:
        d = {"what": what, "choice": choice, "why": why}
        unit = units.of_decision(what, choice)
        if unit:
            d["unit"] = unit
        self.append(d)


@dataclass
class Run:
    """One planning run: the normalized inputs and what the stages record (decisions, warnings, seed notes)."""

    n: dict
    dec: Decisions = field(default_factory=Decisions)
    warnings: list = field(default_factory=list)
    seed: list = field(default_factory=list)
    comparison: dict = field(default_factory=dict)  # aggregated vs disaggregated, side by side

    @property
    def model(self) -> dict:
        return self.n["model"]

    @property
    def gpu(self) -> dict:
        return self.n["gpu"]

    @property
    def pol(self) -> dict:
        return self.n["policy"]

    @property
    def traffic(self) -> dict:
        return self.n["traffic"]

    @property
    def slo(self) -> dict:
        return self.n["slo"]

    @property
    def gpn(self) -> int:
        return self.n["gpus_per_node"]

    @property
    def nodes(self) -> int:
        return self.n["nodes"]

    @property
    def total_gpus(self) -> int:
        return self.n["gpus_per_node"] * self.n["nodes"]

    @cached_property
    def flagset(self) -> dict:
        return data.vllm_flags(self.n["vllm_version"])

    @cached_property
    def sup(self) -> compat.Support:
        """The engine compatibility row for this model's attention type and engine version."""
        return compat.support(self.model["attention"], self.n["vllm_version"])


@dataclass(frozen=True)
class Layout:
    """One engine's parallel layout (one vLLM instance: TP x PP x PCP x DP GPUs) and how many engines run."""

    tp: int
    pp: int = 1
    dp: int = 1
    ep: int = 1
    dcp: int = 1
    pcp: int = 1
    replicas: int = 1

    @property
    def world(self) -> int:
        """GPUs of one engine."""
        return self.tp * self.pp * self.pcp * self.dp

    def doc(self) -> dict:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp, "ep": self.ep, "dcp": self.dcp, "pcp": self.pcp}


@dataclass
class Rates:
    """The traffic the plan serves and what the layout search found for it (search.Search / disagg.Disagg)."""

    lam: float  # arrival rate (given, or sessions / E2E)
    sessions: int  # concurrent sessions (given, or arrival rate x E2E)
    inflight: float  # requests in the engines at once (Little's law)
    serve: object  # search.Search for the aggregated pool
    disagg: object = None  # disagg.Disagg, when the P/D option was sized
    pd_refused: str = ""  # why the engine would refuse the sized P/D pools (engine_compat.yaml), if it would


@dataclass
class PoolSpec:
    """What one pool's plan entry is built from."""

    role: str
    gpu: dict
    lay: Layout
    mem: dict
    ctx: object  # engine.EngineCtx
    spec: dict | None = None
    block_size: int | None = None
    batch: float | None = None


@dataclass
class Pools:
    """The pools stage's result: the pools and the main pool's (decode, else serve) sizing."""

    pools: dict
    main_mem: dict
    main_lay: Layout
    main_ctx: object  # engine.EngineCtx
    ratio: float | None = None
