"""Cutting a ``MarketData`` by bars or by tickers, or moving it to a device, carries every
field: each tensor (all are time-major, (T, N, ...)) is cut on the cut's axis or moved, and
the rest is kept. The market here fills every field of the class, so a field added later is
checked without a new test."""

from __future__ import annotations

from dataclasses import fields, replace

import pandas as pd
import pytest
import torch

from finpod.data.market import MarketData

#: Bars, tickers and features differ, so a cut along the wrong axis shows as a wrong shape.
T, N, F = 7, 3, 2
#: Shapes of the tensor fields that are not (T, N).
SHAPES = {"features": (T, N, F), "liquidity": (T, N, 2)}
#: Rows taken: fewer than T, out of order, one repeated.
ROWS = torch.tensor([4, 0, 4, 6, 2])
#: Devices a market is moved to: ``meta`` (shapes and dtypes, no values) runs on any machine.
DEVICES = [
    "meta",
    pytest.param(
        "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
    ),
]
#: Dtypes given to the tensor fields in turn, so that a move which casts shows.
DTYPES = (torch.float64, torch.bool, torch.int64, torch.float32)


def full_market() -> MarketData:
    """A market with every field set; each tensor's entries are distinct."""
    stamps = pd.date_range("2024-01-02", periods=T, freq="D", tz="America/New_York")
    values = {
        "timestamps": stamps,
        "tickers": ["AAA", "BBB", "CCC"],
        "feature_names": ["f0", "f1"],
        "benchmark": pd.Series(100.0 + torch.arange(T).numpy(), index=stamps),
        "bars_per_year": 252.0,
    }
    for k, f in enumerate(fields(MarketData)):
        if f.name not in values and "Tensor" in str(f.type):
            shape = SHAPES.get(f.name, (T, N))
            numel = torch.Size(shape).numel()
            values[f.name] = (1000.0 * k + torch.arange(numel, dtype=torch.float32)).reshape(shape)
    market = MarketData(**values)
    unset = [f.name for f in fields(MarketData) if getattr(market, f.name) is None]
    assert unset == [], f"give {unset} a value in full_market so that cuts are checked on it"
    return market


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and bool(torch.equal(a, b))
    if isinstance(a, pd.Series):
        return a.index.equals(b.index) and (a.to_numpy() == b.to_numpy()).all()
    if isinstance(a, pd.Index):
        return a.equals(b)
    return a == b


@pytest.mark.parametrize(
    ("cut", "rows"),
    [
        (lambda m: m.take_bars(ROWS), ROWS),
        (lambda m: m.slice(2, 6), torch.arange(2, 6)),
    ],
    ids=["take_bars", "slice"],
)
def test_a_cut_by_bars_cuts_every_per_bar_field_and_keeps_the_rest(cut, rows):
    market = full_market()
    out = cut(market)
    at = rows.numpy()
    for f in fields(MarketData):
        before, after = getattr(market, f.name), getattr(out, f.name)
        if isinstance(before, torch.Tensor):
            want = before.index_select(0, rows)
        elif isinstance(before, pd.Series):
            want = before.iloc[at]
        elif isinstance(before, pd.Index):
            want = before[at]
        else:
            want = before  # per-ticker and scalar fields
        assert _same(want, after), f"{f.name} is not cut to the bars taken"


def test_take_tickers_cuts_every_tensor_along_the_ticker_axis_in_the_order_asked():
    market = full_market()
    out = market.take_tickers(["CCC", "AAA"])
    cols = torch.tensor([2, 0])
    assert out.tickers == ["CCC", "AAA"]
    for f in fields(MarketData):
        before, after = getattr(market, f.name), getattr(out, f.name)
        if f.name == "tickers":
            continue
        want = before.index_select(1, cols) if isinstance(before, torch.Tensor) else before
        assert _same(want, after), f"{f.name} is not cut to the tickers taken"


@pytest.mark.parametrize("device", DEVICES)
def test_to_moves_every_tensor_field_with_its_dtype_and_keeps_the_rest(device):
    market = full_market()
    names = [
        f.name for f in fields(MarketData) if isinstance(getattr(market, f.name), torch.Tensor)
    ]
    market = replace(
        market, **{k: getattr(market, k).to(DTYPES[i % len(DTYPES)]) for i, k in enumerate(names)}
    )
    out = market.to(device)
    kind = torch.device(device).type
    assert out.device.type == kind
    for f in fields(MarketData):
        before, after = getattr(market, f.name), getattr(out, f.name)
        if not isinstance(before, torch.Tensor):
            assert after is before, f"{f.name} is not kept"
            continue
        assert after.device.type == kind, f"{f.name} is not moved to {device}"
        assert (after.dtype, after.shape) == (before.dtype, before.shape), f"{f.name} changed"
        if kind != "meta":
            assert torch.equal(after.cpu(), before), f"{f.name} changed values on the way"
