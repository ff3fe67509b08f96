"""``files``: a directory (or one file) of vendor CSV/Parquet bars, one file per ticker or
one long table, with an optional ``benchmark`` file of index levels.

Vendor formats understood: see :mod:`finpod.data.vendor` (bracketed headers, separate
date and time columns, compact ``YYYYMMDD``/``HHMMSS`` values, symbol suffixes through
``ticker_pattern``). Files that mix offset-aware and naive stamps are repaired the
documented way: naive stamps are read in ``timezone``, aware ones converted, and the
cleaning report counts both (``mixed_naive_and_aware``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from finpod.data.bars import (
    PRICE_COLUMNS,
    Bars,
    check_tickers,
    normalize_columns,
    ticker_problem,
)
from finpod.data.benchmark import (
    BENCHMARK_KIND,
    align_benchmark,
    check_benchmark_gaps,
    check_benchmark_span,
    level_times,
    read_benchmark_file,
)
from finpod.data.calendar import TZ
from finpod.data.clean import clean_long
from finpod.data.columns import (
    feature_names,
    place_feature_columns,
    price_changing_columns,
    refuse_ambiguous_columns,
    refuse_feature_columns,
    unnamed_columns,
    unused_note,
)
from finpod.data.sources.folder import LAYOUT_HINT, layout_problem, list_bar_files, skipped_note
from finpod.data.sources.loaded import LoadedSource, check_known, ticker_list
from finpod.data.ticker_rule import LINE, ORIGIN, SPELLING
from finpod.data.universe import universe_info
from finpod.data.vendor import (
    apply_ticker_pattern,
    compile_ticker_pattern,
    read_table,
)
from finpod.errors import FinpodError

#: Columns every file needs (``tic`` may come from the file name).
NEEDED = ("timestamp", *PRICE_COLUMNS, "volume")
#: Ticker from a file name when no pattern is given: the part before the first ``_``
#: (``AAPL_1min.csv`` → ``AAPL``).
FILE_NAME_PATTERN = r"^([A-Za-z0-9.\-^]+?)(?:_.*)?$"


def _stem(name: str) -> str:
    return re.sub(r"(\.csv\.gz|\.csv|\.parquet|\.pq|\.txt)$", "", name, flags=re.I)


def _rename_example(df: pd.DataFrame, missing: list[str]) -> str:
    """``--column VENDOR=close`` for a file that lacks ``missing``: the one column it has
    that finpod does not read, when there is exactly one of each."""
    known = (ORIGIN, SPELLING, LINE, "tic", *NEEDED)
    unknown = [str(c) for c in df.columns if c not in known]
    if len(missing) == 1 and len(unknown) == 1:
        return f"--column '{unknown[0]}={missing[0]}'"
    return f"--column VENDOR={missing[0]}"


def _common_stamp_type(frames: list[pd.DataFrame]) -> list[pd.DataFrame]:
    """Frames whose timestamp columns can be concatenated without losing a zone.

    When files disagree (one aware, one naive, or two zones), every datetime stamp travels
    as text with its offset, so each is read by its own rule (naive = ``timezone``).
    """
    kinds = {str(f["timestamp"].dtype) for f in frames if "timestamp" in f.columns}
    if len(kinds) <= 1:
        return frames
    out = []
    for f in frames:
        col = f.get("timestamp")
        if col is not None and isinstance(col.dtype, pd.DatetimeTZDtype):
            f = f.assign(timestamp=col.dt.strftime("%Y-%m-%d %H:%M:%S%z"))
        elif col is not None and pd.api.types.is_datetime64_dtype(col.dtype):
            f = f.assign(timestamp=col.dt.strftime("%Y-%m-%d %H:%M:%S"))
        out.append(f)
    return out


def clean_vendor_bars(
    df: pd.DataFrame,
    bar: str | None,
    *,
    benchmark: str | Path | None = None,
    benchmark_bar_label: str | None = None,
    **clean_opts: Any,
) -> tuple[Bars, dict, pd.Series | None, dict | None]:
    """A long table of vendor bars → cleaned bars, report and the aligned ``benchmark`` file.

    The one path from a long table (``timestamp, tic, open, high, low, close, volume``) to a
    source's bars, shared by the sources that read vendor rows (``files``, ``alpaca``).
    ``clean_opts`` go to :func:`~finpod.data.clean.clean_long` (``timezone``, ``bar_label``,
    ``start``, ``end``, ``min_coverage``, ``calendar``, ``where``, ``date_format``); the
    benchmark file is read in the same ``timezone`` and ``calendar``, its intraday stamps
    labelled ``benchmark_bar_label`` (default: as the bars). Returns
    ``(bars, report, benchmark, benchmark_info)``.
    """
    bars, report = clean_long(df, bar, **clean_opts)
    bench = bench_info = None
    if benchmark is not None:
        series, name = read_benchmark_file(benchmark, columns=None)
        known, _, _ = level_times(
            series,
            calendar=clean_opts.get("calendar", "XNYS"),
            timezone=clean_opts.get("timezone", TZ),
            bar_label=benchmark_bar_label or clean_opts.get("bar_label", "auto"),
            where=str(benchmark),
        )
        check_benchmark_span(
            known, bars.timestamps, bars.bar, str(benchmark), clean_opts.get("calendar", "XNYS")
        )
        check_benchmark_gaps(
            known,
            bars.timestamps,
            bars.tradable,
            str(benchmark),
            clean_opts.get("calendar", "XNYS"),
        )
        bench = align_benchmark(
            series,
            bars.timestamps,
            bars.bar,
            calendar=clean_opts.get("calendar", "XNYS"),
            timezone=clean_opts.get("timezone", TZ),
            bar_label=benchmark_bar_label or clean_opts.get("bar_label", "auto"),
        )
        covered = int(np.isfinite(bench.to_numpy()).sum())
        if covered == 0:
            raise FinpodError(
                f"the benchmark {benchmark} has no level on or before any bar "
                f"({bars.timestamps[0]} → {bars.timestamps[-1]})",
                "give index levels covering the bars' dates",
            )
        report["benchmark_bars_without_level"] = int(len(bench) - covered)
        bench_info = {"name": name, "kind": BENCHMARK_KIND, "source": str(benchmark)}
    return bars, report, bench, bench_info


def load_files(
    path: str | Path | None = None,
    bar: str | None = None,
    tickers: list[str] | str | None = None,
    start: str | None = None,
    end: str | None = None,
    columns: dict[str, str] | None = None,
    timezone: str = TZ,
    bar_label: str = "auto",
    ticker_pattern: str | None = None,
    benchmark: str | Path | None = None,
    min_coverage: float = 0.8,
    calendar: str = "XNYS",
    progress: Any = None,
    date_format: str | None = None,
    drop_bad_tickers: bool = False,
    feature_columns: list[str] | str | None = None,
) -> LoadedSource:
    """Vendor bars from ``path`` (a directory of files or one file).

    A file with a ticker column is a long table; otherwise its ticker is read from the file
    name without extension.

    Args:
        columns: vendor → canonical column renames, e.g. ``{"Date": "timestamp"}``.
        timezone: zone of naive timestamps (aware ones are converted).
        bar_label: intraday timestamps mark the bar ``"start"``/``"end"``/``"auto"``.
        ticker_pattern: a regular expression whose first group is the ticker, applied
            (case-insensitively) to file names and to ticker columns, e.g. ``^(.*)\\.US$``
            for ``AAPL.US``. Default: file names up to the first ``_``; columns unchanged.
        benchmark: a CSV/Parquet file of index levels (daily or intraday), aligned causally
            (see :mod:`finpod.data.benchmark`).
        date_format: ``strftime`` pattern of the timestamps (``%d/%m/%Y``), for dates whose
            day/month order the values do not prove.
        drop_bad_tickers: build without the tickers whose file lacks a needed column or
            that lose most of their bars in cleaning (listed in ``tickers_dropped`` with
            their cause) instead of failing (see :mod:`finpod.data.ticker_rule`).
        feature_columns: extra numeric columns to use as per-ticker features, each at its
            own bar (see :mod:`finpod.data.user_features`); every file must hold them.
            Other extra columns are listed as unused in the report and the notes.

    Every column of a file is used or refused (see :mod:`finpod.data.columns`): two
    columns read as one field, a split-ratio, adjustment-factor or dividend column that
    would change prices, and numbers with thousands separators are each one error line.

    Sort order does not matter: rows are sorted (and the report says so).
    """
    if path is None:
        raise FinpodError("the files source needs a path", "pass --path DIR")
    root = Path(path)
    if not root.exists():
        raise FinpodError(
            f"{root} does not exist", "pass --path with a directory of CSV/Parquet bars"
        )
    if not (root.is_file() or root.is_dir()):
        raise FinpodError(
            f"{root} is neither a directory nor a regular file (a device, a pipe or a socket)",
            "pass --path with a directory of CSV/Parquet bars, or one such file",
        )
    skipped: dict[str, str] = {}
    if root.is_file():
        files = [root]
    else:
        files, skipped = list_bar_files(root)
    if benchmark is not None:
        bench_path = Path(benchmark).resolve()
        files = [f for f in files if f.resolve() != bench_path]
    if not files:
        raise FinpodError(
            f"no CSV or Parquet files in {root}", "put one file per ticker or one long table there"
        )
    name_rx = compile_ticker_pattern(ticker_pattern or FILE_NAME_PATTERN)
    tick = ticker_list(tickers)
    wanted = feature_names(feature_columns)
    frames = []
    unused_columns: dict[str, dict[str, str]] = {}
    files_dropped: dict[str, str] = {}
    task = progress.add_task("read files", total=len(files)) if progress is not None else None
    for f in files:
        try:
            df = read_table(f, columns)
        except FinpodError as err:
            layout = layout_problem(f, columns)
            if layout is None:
                raise
            raise FinpodError(f"{f}: {layout}", LAYOUT_HINT) from err
        if len(df) == 0:
            raise FinpodError(f"{f} has no rows", "remove it or fill it with bars")
        replaced = refuse_ambiguous_columns(df, columns, str(f))
        df = normalize_columns(df, columns)
        unused = {**replaced, **price_changing_columns(df, str(f))}
        refuse_feature_columns(df, wanted, str(f))
        unused.update(unnamed_columns(df, {*unused, *wanted, SPELLING}))
        if unused:
            unused_columns[f.name] = unused
        if "tic" not in df.columns:
            m = name_rx.match(_stem(f.name))
            if not m or not m.group(1):
                bad = ticker_problem(_stem(f.name).upper())
                why = f" (it {bad})" if bad else ""
                raise FinpodError(
                    f"cannot read a ticker from the file name {f.name!r}{why}",
                    "rename the file to TICKER.csv, add a tic column or pass --ticker-pattern",
                )
            name = m.group(1).upper()
            bad = ticker_problem(name)
            if bad is not None:
                raise FinpodError(
                    f"the ticker {name!r} read from the file name {f.name!r} {bad}",
                    "rename the file to TICKER.csv (letters, digits and . - ^ = / _ & : + only)",
                )
            df["tic"] = name
            df[SPELLING] = ""  # the ticker is the file's name
        else:
            df[SPELLING] = df["tic"]
            if ticker_pattern is not None:
                df["tic"] = apply_ticker_pattern(df["tic"], ticker_pattern)
            # Row numbers as a spreadsheet shows them: the header is line 1.
            check_tickers(df["tic"].astype("string").str.strip().str.upper(), str(f), 2)
        df[ORIGIN] = str(f)
        # Rows as a spreadsheet numbers them: a CSV's header is row 1.
        first = 1 if f.name.lower().endswith((".parquet", ".pq")) else 2
        df[LINE] = np.arange(first, first + len(df), dtype=np.int64)
        missing = [c for c in NEEDED if c not in df.columns]
        if missing:
            found = ", ".join(
                str(c) for c in df.columns if c not in (ORIGIN, SPELLING, LINE, "tic")
            )
            names = sorted(set(df["tic"].dropna().astype("string").str.strip().str.upper()))
            layout = layout_problem(f, columns)
            if layout is not None:
                if not drop_bad_tickers:
                    raise FinpodError(f"{f}: {layout}", LAYOUT_HINT)
                why = layout
            else:
                why = f"{f.name} has no {', '.join(missing)} column (found: {found})"
            if not drop_bad_tickers:
                raise FinpodError(
                    f"{f}: ticker {', '.join(names[:5])} would vanish: the file has no "
                    f"{', '.join(missing)} column (found: {found})",
                    f"rename its columns, e.g. {_rename_example(df, missing)}, or pass "
                    "--drop-bad-tickers to build without it",
                )
            files_dropped.update({n: why for n in names if n})
            if task is not None:
                progress.advance(task, 1)
            continue
        frames.append(df)
        if task is not None:
            progress.advance(task, 1)
    if not frames:
        raise FinpodError(
            f"no file in {root} has the columns a bar needs ({', '.join(NEEDED)})",
            "rename the columns, or pass --column VENDOR=canonical",
        )
    df = pd.concat(_common_stamp_type(frames), ignore_index=True)
    df[ORIGIN] = df[ORIGIN].astype("category")  # one file name per file, not per row
    names = df["tic"].astype("string").str.strip().str.upper() if "tic" in df.columns else None
    # An empty ticker cell (or a trailing junk line) is no ticker: the cleaner drops and counts it.
    known = sorted(str(t) for t in names.dropna().unique() if t) if names is not None else []
    check_known(tick, known, str(root))
    if tick is not None:
        df = df[names.isin(tick).fillna(False).to_numpy(dtype=bool)]
    bars, report, bench, bench_info = clean_vendor_bars(
        df,
        bar,
        timezone=timezone,
        bar_label=bar_label,
        start=start,
        end=end,
        min_coverage=min_coverage,
        calendar=calendar,
        where=str(root),
        date_format=date_format,
        benchmark=benchmark,
        drop_bad_tickers=drop_bad_tickers,
    )
    bars.extra.update(
        place_feature_columns(
            df,
            wanted,
            bars,
            report,
            timezone=timezone,
            bar_label=bar_label,
            date_format=date_format,
        )
    )
    if files_dropped:
        report["tickers_dropped"] = {**files_dropped, **report.get("tickers_dropped", {})}
    if unused_columns:
        report["unused_columns"] = unused_columns
    report["files"] = [f.name for f in files]
    if skipped:
        report["files_skipped"] = skipped
    delisted = sorted(report.get("delisted", {}))
    note = (
        f"universe from the files in {root.name} ({len(bars.tickers)} tickers): finpod cannot "
        "tell whether it is point-in-time; if it holds only companies that survived to the "
        "end, results carry survivorship bias"
    )
    if delisted:
        note += f"; {len(delisted)} ticker(s) end inside the range and are treated as delisted"
    return LoadedSource(
        bars=bars,
        report=report,
        options={
            "path": str(root),
            "tickers": tick,
            "start": start,
            "end": end,
            "timezone": timezone,
            "bar_label": bar_label,
            "columns": columns,
            "ticker_pattern": ticker_pattern,
            "benchmark": None if benchmark is None else str(benchmark),
            "date_format": date_format,
            "drop_bad_tickers": drop_bad_tickers or None,
            "feature_columns": wanted or None,
        },
        universe=f"{len(bars.tickers)} tickers from {root.name}",
        universe_info=universe_info(False, note),
        benchmark=bench,
        benchmark_info=bench_info,
        notes=[n for n in (*unused_note(unused_columns), skipped_note(skipped)) if n],
    )
