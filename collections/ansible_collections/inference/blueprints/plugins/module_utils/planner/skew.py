# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""How many routed experts a step's tokens touch, with the router's skew (policy ``expert_routing_skew``, issue 36
item 4; docs/planner.md "Expert routing skew").

A real MoE router does not spread tokens evenly: a few experts take most of them. aiconfigurator measures its MoE
kernels with per-expert token counts drawn from a power law, P(load x) ~ x^-alpha (its collector's
"Power-Law Distribution in MoE Workload Simulation": alpha 1.01 estimated for DeepSeek-V3/R1 and 1.2 for
Qwen3-235B on CNN/DailyMail and OpenOrca, by matching measured latency). The planner takes the same description:
the E experts' loads at the power law's E equal-probability quantiles (bounds as that collector draws them: 1 to
0.8 x tokens when the step routes more pairs than there are experts, else 0.01 to 2), scaled to the step's
tokens x top-k pairs; an expert is touched when its share rounds to at least one pair. Uniform routing (alpha 0)
touches the most experts, so it reads the most expert weights: the conservative option.
"""

from __future__ import annotations

import math

# alpha of the default ("auto"): the milder of the two measured skews (DeepSeek-V3/R1); 1.2 was measured on Qwen3-235B
AUTO_ALPHA = 1.01
MAX_ALPHA = 3.0


def alpha_of(value) -> float:
    """The power-law exponent of a policy value: ``auto`` (AUTO_ALPHA), ``uniform`` (0) or a number (> 1)."""
    if value in (None, "auto"):
        return AUTO_ALPHA
    if value == "uniform":
        return 0.0
    return float(value)


def _cdf(x: float, alpha: float, lo: float, hi: float) -> float:
    """P(load <= x) of the power law on [lo, hi]."""
    x = min(max(x, lo), hi)
    if abs(alpha - 1.0) < 1e-9:  # the density 1/x: log-uniform
        return math.log(x / lo) / math.log(hi / lo)
    a = 1.0 - alpha
    return (x**a - lo**a) / (hi**a - lo**a)


def _mean(alpha: float, lo: float, hi: float) -> float:
    """Mean load of the power law on [lo, hi]."""
    a = 1.0 - alpha
    if abs(a) < 1e-9:
        return (hi - lo) / math.log(hi / lo)
    if abs(alpha - 2.0) < 1e-9:
        return math.log(hi / lo) / (1 / lo - 1 / hi)
    return a / (hi**a - lo**a) * (hi ** (a + 1) - lo ** (a + 1)) / (a + 1)


def touched_share(experts: int, k: int, tokens: float, alpha: float) -> float:
    """Expected share of the ``experts`` routed experts at least one of ``tokens`` tokens (``k`` experts each)
    selects: uniform routing when ``alpha`` is 0, else the power-law loads above."""
    if tokens <= 0 or experts <= 0:
        return 0.0
    uniform = 1.0 - (1.0 - k / experts) ** tokens
    if alpha <= 0:
        return uniform
    return min(uniform, _skewed(int(experts), k, tokens, alpha))


def _skewed(experts: int, k: int, tokens: float, alpha: float) -> float:
    """The E loads at the quantiles (i + 0.5) / E sum to about E x the mean load; an expert is touched when its
    load x pairs / that sum is at least half a pair: the experts above the threshold's quantile."""
    pairs = tokens * k
    lo, hi = (1.0, max(1.0 + 1e-6, 0.8 * tokens)) if pairs > experts else (0.01, 2.0)
    threshold = 0.5 * experts * _mean(alpha, lo, hi) / pairs
    below = max(0, math.ceil(experts * _cdf(threshold, alpha, lo, hi) - 0.5))
    touched = experts - min(experts, below)
    # at least the k experts one token picks (the caller caps it at the uniform spread: skew never touches more)
    return max(min(experts, math.ceil(k)) / experts, touched / experts)
