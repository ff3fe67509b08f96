"""``synthetic``: the seeded generator of :mod:`finpod.data.synthetic_market` as a source."""

from __future__ import annotations

from typing import Any

from finpod.data.calendar import normalize_bar
from finpod.data.sources.loaded import LoadedSource, progress_advance
from finpod.data.synthetic_market import synthetic_bars
from finpod.data.universe import universe_info
from finpod.errors import FinpodError


def load_synthetic(
    tickers: list[str] | str | None = None,
    start: str | None = None,
    end: str | None = None,
    bar: str | None = None,
    n_tickers: int = 10,
    n_bars: int | None = None,
    years: float | None = None,
    regime: str = "null",
    seed: int = 0,
    late_listings: int = 0,
    alpha_strength: float = 0.1,
    signal_persistence: float = 0.9,
    min_coverage: float = 0.8,
    calendar: str = "XNYS",
    progress: Any = None,
) -> LoadedSource:
    """A seeded synthetic market (see :mod:`finpod.data.synthetic_market`); default 1 year."""
    if tickers is not None:
        raise FinpodError(
            "the synthetic source makes its own tickers", "use --n-tickers instead of --tickers"
        )
    if end is not None:
        raise FinpodError("the synthetic source takes --years or --n-bars, not --end")
    bar = normalize_bar(bar or "1d")
    if n_bars is None and years is None:
        years = 1.0
    bars = synthetic_bars(
        n_tickers,
        n_bars,
        years=years,
        bar=bar,
        regime=regime,
        seed=seed,
        start=start or "2015-01-02",
        late_listings=late_listings,
        alpha_strength=alpha_strength,
        signal_persistence=signal_persistence,
        progress=None if progress is None else progress_advance(progress, "generate bars"),
    )
    report = {
        "input_rows": int(bars.tradable.sum()),
        "dropped": {},
        "repaired": {},
        "tickers": len(bars.tickers),
        "bars": len(bars.timestamps),
    }
    return LoadedSource(
        bars=bars,
        report=report,
        options={
            "n_tickers": n_tickers,
            "n_bars": n_bars,
            "years": years,
            "regime": regime,
            "seed": seed,
            "late_listings": late_listings,
            "alpha_strength": alpha_strength,
            "signal_persistence": signal_persistence,
            "bar": bar,
            "feature_columns": ["alpha_signal"],
        },
        universe=f"synthetic ({regime}), {n_tickers} tickers",
        universe_info=universe_info(
            True,
            "synthetic market: tickers are generated, none chosen with hindsight (no survivorship bias)",
        ),
        notes=[
            f"synthetic market, regime {regime}; feature alpha_signal predicts close[t+1]→close[t+2]",
            "alpha_signal is a user column: checked, placed and scaled as any --feature-column",
        ],
    )
