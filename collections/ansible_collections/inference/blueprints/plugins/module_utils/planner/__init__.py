# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""Sizing planner for vLLM on OpenShift: ``plan(inputs) -> dict``; raises ``PlanError`` on bad input.

Pure Python (stdlib + PyYAML, imported lazily). See docs/planner.md and docs/contracts.md section 3.
"""

from __future__ import annotations

from .core import plan
from .errors import PlanError

__all__ = ["PlanError", "plan"]
