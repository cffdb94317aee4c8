"""Fixtures of the SLO tests: guidellm mock servers standing in for vLLM (tests/slo/mockservers.py)."""

from __future__ import annotations

import pytest

from tests.slo.mockservers import MockFleet


@pytest.fixture
def mocks(tmp_path):
    fleet = MockFleet(tmp_path)
    yield fleet
    fleet.stop()
