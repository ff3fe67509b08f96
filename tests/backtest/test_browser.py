"""A real browser opens the tearsheet from disk: every image loads, the console stays clean."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from finpod.backtest import backtest_market
from finpod.env import EnvConfig

from .browser import find_chromium, inspect_page
from .fakes import make_market

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

#: CI sets FINPOD_REQUIRE_BROWSER=1: there a missing Chromium fails the check, never skips it.
REQUIRED = os.environ.get("FINPOD_REQUIRE_BROWSER") == "1"
pytestmark = pytest.mark.skipif(
    find_chromium() is None and not REQUIRED, reason="chromium is not installed"
)


def test_chromium_is_installed():
    assert find_chromium() is not None, "FINPOD_REQUIRE_BROWSER=1 but chromium is not on PATH"


def test_tearsheet_opens_in_headless_chromium(tmp_path):
    market = make_market(num_bars=260)
    gen = torch.Generator().manual_seed(0)
    policy = lambda obs: torch.rand(1, market.num_stocks, generator=gen) * 2 - 1  # noqa: E731
    result = backtest_market(market, policy, EnvConfig(), run_id="browser-check", num_trials=8)
    page = result.to_html(tmp_path / "tearsheet.html")
    shot = ARTIFACTS / "tearsheet.png"
    shot.unlink(missing_ok=True)
    report = inspect_page(page.resolve().as_uri(), screenshot=shot)
    assert report.title == "finpod backtest: browser-check"
    assert len(report.images) >= 5
    assert all(img["complete"] and img["naturalWidth"] > 0 for img in report.images), report.images
    assert report.errors == [], report.errors
    assert shot.is_file() and shot.stat().st_size > 10_000


def test_the_browser_check_catches_a_broken_image_and_a_console_error(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>b</title></head><body>"
        '<img alt="bad" src="data:image/png;base64,AAAA">'
        "<script>console.error('boom')</script></body></html>"
    )
    report = inspect_page(page.as_uri())
    assert report.images[0]["naturalWidth"] == 0
    assert any("boom" in e for e in report.errors)
