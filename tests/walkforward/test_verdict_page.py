"""The walk-forward page opens with the same verdict as the tearsheet: the active return
against equal weight with its HAC t, the folds' DSR and PBO against their thresholds, what
the folds × seeds spent; a synthetic market without a planted signal says so."""

from __future__ import annotations

import pytest

from .tiny import run_tiny_walkforward


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    result = run_tiny_walkforward(tmp_path_factory.mktemp("wf-verdict"), 512)
    return result.report.read_text()


def test_walkforward_page_opens_with_the_verdict_before_any_table(page):
    start = page.index("class='verdict")
    assert start < page.index("<table")
    box = page[start : page.index("</p></div>", start)]
    assert ">NULL MARKET<" in box  # the tiny run's synthetic market has no planted signal
    assert "equal weight (buy-and-hold)" in box and "HAC t" in box and "after costs" in box
    assert "DSR" in box and "of 2 folds" in box and "PBO" in box
    assert "Spent: 2 jobs (folds × seeds)" in box
