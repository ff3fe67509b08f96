"""``sample``: NASDAQ-100 daily bars 2010–2019 (95 members of 2019-12-31) and the ^NDX
index, shipped in the repository's ``data/sample`` folder; works offline."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from finpod.data.benchmark import BENCHMARK_KIND, align_benchmark
from finpod.data.calendar import normalize_bar
from finpod.data.clean import clean_long
from finpod.data.sources.loaded import LoadedSource, check_known, ticker_list
from finpod.data.universe import SAMPLE_DIR, apply_membership, universe_info
from finpod.errors import FinpodError

SAMPLE_DAILY = "nasdaq100_daily_2010-2019.csv.gz"
SAMPLE_INDEX = "ndx_index_daily_1985-2019.csv"
SAMPLE_UNIVERSE = "nasdaq100_daily_2010-2019.universe.json"

#: Default sample splits. Train 2010–2016 (7 years: a full cycle incl. the 2011 and 2015–16
#: drawdowns), validation 2017–2018 (two years ≈ 500 sessions, enough for a Sharpe estimate
#: with a standard error near 0.7 and containing the late-2018 sell-off, so selection is
#: not rewarded for pure beta), backtest 2019 (the last year, untouched until the backtest).
SAMPLE_SPLITS: dict[str, tuple[str, str]] = {
    "train": ("2010-01-01", "2016-12-31"),
    "validation": ("2017-01-01", "2018-12-31"),
    "backtest": ("2019-01-01", "2019-12-31"),
}


def load_sample(
    tickers: list[str] | str | None = None,
    start: str | None = None,
    end: str | None = None,
    bar: str | None = None,
    adjust: str = "split",
    point_in_time: bool = False,
    min_coverage: float = 0.8,
    calendar: str = "XNYS",
    progress: Any = None,
) -> LoadedSource:
    """The shipped NASDAQ-100 daily sample.

    Args:
        adjust: ``"split"`` (prices as shipped: split-adjusted, comparable with the ^NDX
            price index) or ``"total"`` (OHLC scaled by adj_close/close: dividends
            reinvested).
        point_in_time: a ticker outside its NASDAQ-100 membership can be sold but not bought
            (``buyable`` False); it keeps its real prices. The sample holds the 2019-12-31
            members only, so this does not remove survivorship bias.
    """
    if bar is not None and normalize_bar(bar) != "1d":
        raise FinpodError(
            f"the sample has daily bars only, not {bar}", "use --bar 1d or another source"
        )
    if adjust not in ("split", "total"):
        raise FinpodError(f"unknown adjustment {adjust!r}", "use split or total")
    path = SAMPLE_DIR / SAMPLE_DAILY
    if not path.exists():
        raise FinpodError(
            f"sample data not found at {path}", "run finpod from a checkout that has data/sample"
        )
    df = pd.read_csv(path)
    tick = ticker_list(tickers)
    known = sorted(df["tic"].unique())
    check_known(tick, known, "the sample")
    if tick is not None:
        df = df[df["tic"].isin(tick)]
    if adjust == "total":
        f = df["adj_close"] / df["close"]
        for c in ("open", "high", "low", "close"):
            df[c] = df[c] * f
    df = df.drop(columns=["adj_close"])
    bars, report = clean_long(
        df,
        "1d",
        start=start,
        end=end,
        min_coverage=min_coverage,
        calendar=calendar,
        where="the sample",
    )
    universe = json.loads((SAMPLE_DIR / SAMPLE_UNIVERSE).read_text(encoding="utf-8"))
    missing = universe.get("skipped_not_in_source", [])
    notes = [
        "survivorship: the tickers are the NASDAQ-100 members of 2019-12-31; earlier leavers are absent",
        f"members without data in the source (absent): {' '.join(missing)}",
        "prices split-adjusted as of download (2024-03)"
        + ("; dividends reinvested" if adjust == "total" else ""),
    ]
    years = f"{bars.timestamps[0].year}–{bars.timestamps[-1].year}"
    note = (
        f"members as of 2019-12-31 used for {years}: survivorship bias "
        "(companies that left the NASDAQ-100 earlier are absent)"
    )
    if point_in_time:
        apply_membership(bars, report)
        notes.append("point-in-time membership: outside the index a stock can be sold, not bought")
        note += "; each stock is buyable only while an index member"
    idx = pd.read_csv(SAMPLE_DIR / SAMPLE_INDEX, usecols=["Date", "Close"])
    idx_series = pd.Series(idx["Close"].to_numpy(), index=pd.Index(idx["Date"]))
    bench = align_benchmark(idx_series, bars.timestamps, bars.bar, calendar=calendar)
    default = SAMPLE_SPLITS if start is None and end is None else None
    return LoadedSource(
        bars=bars,
        report=report,
        options={
            "tickers": tick,
            "start": start,
            "end": end,
            "adjust": adjust,
            "point_in_time": point_in_time,
        },
        universe=(
            f"NASDAQ-100 members on 2019-12-31 ({len(bars.tickers)} with data)"
            if tick is None
            else f"{len(bars.tickers)} of the NASDAQ-100 members on 2019-12-31"
        ),
        universe_info=universe_info(False, note),
        benchmark=bench,
        benchmark_info={
            "name": "^NDX",
            "kind": BENCHMARK_KIND,
            "source": f"data/sample/{SAMPLE_INDEX} (NASDAQ-100 price index, daily close)",
        },
        default_splits=default,
        notes=notes,
    )
