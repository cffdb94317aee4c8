# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009
"""The planner's one exception type."""

from __future__ import annotations


class PlanError(ValueError):
    """An input the planner cannot plan for.

    field names the input (dotted path, e.g. traffic.arrival_rate_rps); the message says what
    was wrong, by how much, and what would work.
    """

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")
