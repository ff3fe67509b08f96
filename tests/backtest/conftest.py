"""Fixtures of the backtest tests."""

from __future__ import annotations

import pytest

from finpod.data.market import MarketData

from .fakes import make_market


@pytest.fixture
def market() -> MarketData:
    return make_market()
