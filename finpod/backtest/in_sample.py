"""Whether the bars a backtest trades lie inside the period its run trained or selected on.

A run trains on its dataset's train split and selects on its validation split; the
dataset's own backtest split never overlaps them (a dataset's splits are disjoint). A
backtest on another dataset (``finpod backtest RUN --data DIR``) can: a ticker's bars on a
session the run trained or selected on say nothing of an edge. :func:`check_run_bars`
compares, ticker by ticker, the sessions the backtest trades with the sessions of the
run's train and validation bars (read from the run's own dataset directory, two columns of
its bars file) and returns :class:`InSample`: what overlaps, or why it could not be
compared. The backtest refuses an overlap in one line unless asked with
:data:`ALLOW_IN_SAMPLE`; its verdict is then IN-SAMPLE and the run's DSR and PBO are
marked not applicable (:data:`NOT_APPLICABLE`).

Sessions are compared, not bar times: a daily bar and the minute bars of its session hold
the same market. A ticker is present on a bar where the bar is tradable (listed, not a
filled gap).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from finpod.data import load_manifest, load_split
from finpod.data.calendar import TZ, session_of
from finpod.data.market import MarketData
from finpod.data.store import ROWS_PER_GROUP_BARS
from finpod.errors import FinpodError

#: The option that runs a backtest whose bars overlap its run's train or validation bars.
ALLOW_IN_SAMPLE = "--allow-in-sample"
#: The run's splits its agent learned from (train) or was selected on (validation).
TRAINED_SPLITS = ("train", "validation")
#: Tickers a line names before it counts the rest.
NAMED_TICKERS = 5
#: The note the selection statistics carry on in-sample bars.
NOT_APPLICABLE = (
    "not applicable: the backtest bars lie inside the run's train or validation period, so "
    "the selection on validation is not tested on them"
)


@dataclass(frozen=True)
class Presence:
    """The bars of one split: which ticker has a bar on which session."""

    sessions: np.ndarray
    """(T,) int64 session date (ns of the naive date) of each bar."""
    tickers: tuple[str, ...]
    """(N,) the column order of :attr:`present`."""
    present: np.ndarray
    """(T, N) bool: the ticker has a tradable bar there."""

    @classmethod
    def of_market(cls, market: MarketData) -> Presence:
        """The bars of ``market`` (e.g. the backtest split a backtest trades)."""
        return cls(
            session_of(market.timestamps),
            tuple(str(t) for t in market.tickers),
            market.tradable.cpu().numpy().astype(bool, copy=False),
        )

    def ticker_sessions(self) -> dict[str, np.ndarray]:
        """Each ticker's sessions with a bar (sorted; tickers with none left out)."""
        if not len(self.sessions):
            return {}
        # Bars are in time order: each session's bars are one run of rows.
        days, first = np.unique(self.sessions, return_index=True)
        per_day = np.logical_or.reduceat(self.present, np.sort(first), axis=0)  # (S, N)
        return {t: days[per_day[:, i]] for i, t in enumerate(self.tickers) if per_day[:, i].any()}


def split_presence(
    dataset_dir: str | Path, split: str, manifest: Mapping[str, Any] | None = None
) -> Presence:
    """The :class:`Presence` of ``split`` of a dataset, read from the timestamp and tradable
    columns of its bars file alone (a dataset whose manifest holds no row ranges, or no
    bars file, is loaded whole). ``manifest``: the dataset's (read when not given)."""
    manifest = load_manifest(dataset_dir) if manifest is None else manifest
    rows = (manifest.get("splits") or {}).get(split)
    name = (manifest.get("files") or {}).get("bars") or "bars.parquet"
    path = Path(dataset_dir) / str(name)
    if not isinstance(rows, Mapping) or "start_index" not in rows or not path.is_file():
        return Presence.of_market(load_split(dataset_dir, split))
    r0, r1 = int(rows["start_index"]), int(rows["stop_index"])
    n = len(manifest["tickers"])
    group = int(manifest.get("rows_per_group_bars") or ROWS_PER_GROUP_BARS)
    g0, g1 = r0 // group, (r1 - 1) // group + 1
    try:
        table = pq.ParquetFile(path).read_row_groups(
            list(range(g0, g1)), columns=["timestamp", "tradable"]
        )
    except (OSError, pa.ArrowInvalid, IndexError) as err:
        raise FinpodError(
            f"cannot read {path}: {err}", "the file is damaged; rebuild the dataset"
        ) from err
    table = table.slice((r0 - g0 * group) * n, (r1 - r0) * n)
    if table.num_rows != (r1 - r0) * n:
        raise FinpodError(
            f"{path} has {table.num_rows} rows of the {split} split where {(r1 - r0) * n} "
            "were expected",
            "rebuild the dataset",
        )
    stamps = table.column("timestamp").to_numpy().astype("datetime64[ns]")[::n]
    times = pd.DatetimeIndex(stamps).tz_localize("UTC").tz_convert(TZ)
    present = table.column("tradable").to_numpy().astype(bool).reshape(r1 - r0, n)
    return Presence(session_of(times), tuple(str(t) for t in manifest["tickers"]), present)


def _day(ns: int) -> str:
    return f"{pd.Timestamp(int(ns)):%Y-%m-%d}"


def ticker_names(tickers: Sequence[str], every: bool) -> str:
    """``every ticker``, ``AAPL only``, or the first :data:`NAMED_TICKERS` and a count."""
    if every:
        return "every ticker"
    if len(tickers) == 1:
        return f"{tickers[0]} only"
    named = ", ".join(tickers[:NAMED_TICKERS])
    more = len(tickers) - NAMED_TICKERS
    return f"{named} and {more} more" if more > 0 else named


@dataclass(frozen=True)
class Overlap:
    """The backtest bars inside one of the run's trained splits."""

    split: str
    """``train`` or ``validation``: the run's split."""
    first: str
    """First overlapping session (YYYY-MM-DD)."""
    last: str
    """Last overlapping session."""
    sessions: int
    """Sessions on which at least one ticker overlaps."""
    tickers: tuple[str, ...]
    """The tickers with an overlapping bar, in the backtest's order."""
    every_ticker: bool
    """Every ticker the backtest trades overlaps."""

    def text(self) -> str:
        """``its train split on 2014-01-02 → 2016-12-30: 756 sessions, every ticker``."""
        count = f"{self.sessions} session{'' if self.sessions == 1 else 's'}"
        who = ticker_names(self.tickers, self.every_ticker)
        return f"its {self.split} split on {self.first} → {self.last}: {count}, {who}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "split": self.split,
            "first": self.first,
            "last": self.last,
            "sessions": self.sessions,
            "tickers": list(self.tickers),
            "every_ticker": self.every_ticker,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Overlap:
        return cls(
            split=str(d.get("split")),
            first=str(d.get("first")),
            last=str(d.get("last")),
            sessions=int(d.get("sessions") or 0),
            tickers=tuple(str(t) for t in d.get("tickers") or ()),
            every_ticker=bool(d.get("every_ticker")),
        )


def find_overlap(split: str, trained: Presence, bars: Presence) -> Overlap | None:
    """The sessions on which a ticker of ``bars`` has a bar and the same ticker has one
    in ``trained`` (the run's ``split``); None when there are none."""
    seen = trained.ticker_sessions()
    traded = bars.ticker_sessions()
    days: list[np.ndarray] = []
    tickers = []
    for ticker in bars.tickers:
        if ticker in seen and ticker in traded:
            common = np.intersect1d(seen[ticker], traded[ticker], assume_unique=True)
            if len(common):
                days.append(common)
                tickers.append(ticker)
    if not tickers:
        return None
    union = np.unique(np.concatenate(days))
    return Overlap(
        split=split,
        first=_day(union[0]),
        last=_day(union[-1]),
        sessions=len(union),
        tickers=tuple(tickers),
        every_ticker=set(tickers) == set(traded),
    )


@dataclass(frozen=True)
class InSample:
    """What the bars of a backtest share with its run's train and validation bars."""

    run_id: str
    overlaps: tuple[Overlap, ...] = ()
    """One per trained split the bars overlap (empty: out of sample)."""
    trained_until: str | None = None
    """The last session of the run's validation split (YYYY-MM-DD), when known."""
    unchecked: str | None = None
    """Why the bars could not be compared (None: they were)."""

    @property
    def found(self) -> bool:
        """The bars overlap the run's train or validation bars."""
        return bool(self.overlaps)

    def what(self) -> str:
        """The overlaps in words: ``its train split on … ; its validation split on …``."""
        return "; ".join(o.text() for o in self.overlaps)

    def refusal(self, where: str) -> FinpodError:
        """The one-line refusal of a backtest of the bars of ``where`` (a dataset)."""
        after = (
            f"after {self.trained_until}, the run's validation end, "
            if self.trained_until
            else "after the run's validation end "
        )
        if self.unchecked:
            return FinpodError(
                f"cannot tell whether the bars of {where} overlap run {self.run_id}'s train "
                f"and validation bars: {self.unchecked}",
                f"restore the run's dataset, or pass {ALLOW_IN_SAMPLE} to backtest anyway",
            )
        return FinpodError(
            f"the bars of {where} overlap those run {self.run_id} trained or was selected "
            f"on: {self.what()}",
            f"backtest on bars {after}or pass {ALLOW_IN_SAMPLE} to run it anyway: its "
            "verdict is then IN-SAMPLE",
        )

    def sentence(self) -> str:
        """The verdict's line on in-sample bars."""
        return (
            f"In-sample: run {self.run_id} was trained or selected on these bars "
            f"({self.what()}); the numbers below measure how it fits bars it has seen, "
            "not an edge."
        )

    def unchecked_note(self) -> str:
        """The report's note on bars that could not be compared."""
        return (
            f"Bars not checked against run {self.run_id}'s train and validation bars "
            f"({self.unchecked}): backtested with {ALLOW_IN_SAMPLE}; they may be in-sample."
        )

    def to_info(self) -> dict[str, Any]:
        """The record a result keeps in ``info["in_sample"]`` (JSON)."""
        return {
            "run_id": self.run_id,
            "overlaps": [o.to_dict() for o in self.overlaps],
            "trained_until": self.trained_until,
        }

    @classmethod
    def from_info(cls, d: Mapping[str, Any]) -> InSample:
        return cls(
            run_id=str(d.get("run_id") or "?"),
            overlaps=tuple(Overlap.from_dict(o) for o in d.get("overlaps") or ()),
            trained_until=d.get("trained_until"),
        )


def unused_allow(dataset: str | Path | None = None) -> FinpodError:
    """The refusal of :data:`ALLOW_IN_SAMPLE` where it would change nothing: the run's own
    dataset (``dataset``, or the one it recorded when None)."""
    which = "the run's own dataset" if dataset is None else f"{dataset} is the run's own dataset"
    return FinpodError(
        f"{ALLOW_IN_SAMPLE} applies to another dataset's bars (--data): {which}, whose "
        "backtest split never overlaps its train and validation splits",
        f"leave out {ALLOW_IN_SAMPLE}",
    )


def validation_end(manifest: Mapping[str, Any]) -> str | None:
    """The last session of a dataset's validation split (YYYY-MM-DD), None if it has none."""
    end = ((manifest.get("splits") or {}).get("validation") or {}).get("end")
    return f"{pd.Timestamp(end):%Y-%m-%d}" if end else None


def run_manifest(run: Any) -> tuple[Path | None, Mapping[str, Any] | None, str | None]:
    """(directory, manifest, None) of the run's own dataset, or (None, None, why it cannot
    be read). ``run``: a :class:`~finpod.backtest.run_record.RunRecord`."""
    try:
        path = run.dataset_dir(None)
    except FinpodError:
        return None, None, f"its dataset {run.dataset.path} is not on disk"
    try:
        return path, load_manifest(path), None
    except FinpodError as err:
        return None, None, f"its dataset's manifest cannot be read ({err.message})"


def check_run_bars(run: Any, bars: Presence) -> InSample:
    """Compare ``bars`` with the train and validation bars of ``run`` (a
    :class:`~finpod.backtest.run_record.RunRecord`), read from the run's own dataset
    directory as it is on disk."""
    path, manifest, why = run_manifest(run)
    if path is None or manifest is None:
        return InSample(run.run_id, unchecked=why)
    overlaps = []
    try:
        for split in TRAINED_SPLITS:
            found = find_overlap(split, split_presence(path, split, manifest), bars)
            if found is not None:
                overlaps.append(found)
    except FinpodError as err:
        return InSample(run.run_id, unchecked=f"its dataset {path} cannot be read ({err.message})")
    return InSample(run.run_id, tuple(overlaps), validation_end(manifest))
