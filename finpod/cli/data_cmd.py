"""``finpod download`` (build a dataset directory) and ``finpod info`` (show its manifest)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from datetime import datetime
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from finpod.cli.backtest_cmd import show_run_info
from finpod.cli.interrupted import same_command
from finpod.cli.stop_signals import Stopped, stop_signals_raise
from finpod.dates import check_date_format, iso_text, parse_date, parse_date_range
from finpod.errors import FinpodError

if TYPE_CHECKING:
    from finpod.data.manifest import Manifest

console = Console()
err_console = Console(stderr=True)


def _split_dates(
    value: str | None, name: str, date_format: str | None
) -> tuple[str | None, str | None] | None:
    """``--<name> FIRST:LAST`` as ISO dates (``None`` for an open side), read once here."""
    if value is None:
        return None
    first, last = parse_date_range(value, f"--{name}", date_format)
    return (
        None if first is None else iso_text(first),
        None if last is None else iso_text(last),
    )


def _check_split_order(dates: dict[str, tuple[str | None, str | None]]) -> None:
    """Refuse splits that overlap or come out of order (train → validation → backtest)."""
    names = list(dates)
    # Neighbours first: the message names the two splits that touch.
    pairs = sorted(combinations(names, 2), key=lambda p: names.index(p[1]) - names.index(p[0]))
    for prev, nxt in pairs:
        (p0, p1), (n0, n1) = dates[prev], dates[nxt]
        if n1 is not None and p0 is not None and n1 < p0:
            raise FinpodError(
                f"--{nxt} ({n0 or '…'}:{n1}) comes before --{prev} ({p0}:{p1 or '…'})",
                "the splits go train → validation → backtest in time",
            )
        if n0 is not None and p1 is not None and n0 <= p1:
            raise FinpodError(
                f"the {prev} and {nxt} splits overlap (--{prev} ends {p1}, --{nxt} starts {n0})",
                f"make --{nxt} start after --{prev} ends",
            )


def _one_date(value: str | None, flag: str, date_format: str | None) -> datetime | None:
    """``--start``/``--end``, read once here."""
    return None if value is None else parse_date(value, flag, date_format)


def _columns(values: list[str] | None) -> dict[str, str] | None:
    if not values:
        return None
    out = {}
    for v in values:
        if "=" not in v:
            raise FinpodError(
                f"--column must be VENDOR=canonical, got {v!r}", "e.g. --column Date=timestamp"
            )
        a, b = v.split("=", 1)
        out[a] = b
    return out


Opt = typer.Option


def download(
    out: Annotated[
        Path | None,
        Opt("--out", "-o", help=r"Dataset directory to write [default: data/datasets/<source>]."),
    ] = None,
    source: Annotated[
        str, Opt("--source", help="sample | yfinance | alpaca | files | synthetic.")
    ] = "sample",
    path: Annotated[
        Path | None, Opt("--path", help="files: directory (or file) of CSV/Parquet bars.")
    ] = None,
    tickers: Annotated[
        str | None,
        Opt(
            "--tickers",
            help="Comma-separated symbols; 'nasdaq100' = yfinance/alpaca point-in-time universe.",
        ),
    ] = None,
    start: Annotated[
        str | None, Opt("--start", help="First date, YYYY-MM-DD (a time as YYYY-MM-DD HH:MM).")
    ] = None,
    end: Annotated[str | None, Opt("--end", help="Last date (inclusive), YYYY-MM-DD.")] = None,
    bar: Annotated[
        str | None, Opt("--bar", help="Bar size: 1d, 1min, 5min, 1h … (source default).")
    ] = None,
    train: Annotated[
        str | None,
        Opt(
            "--train",
            help="Train dates FIRST:LAST, YYYY-MM-DD:YYYY-MM-DD (all three splits or none).",
        ),
    ] = None,
    validation: Annotated[
        str | None, Opt("--validation", help="Validation dates FIRST:LAST.")
    ] = None,
    backtest: Annotated[str | None, Opt("--backtest", help="Backtest dates FIRST:LAST.")] = None,
    embargo: Annotated[
        int | None, Opt("--embargo", help="Sessions between splits (default 5 daily, 1 intraday).")
    ] = None,
    min_coverage: Annotated[
        float,
        Opt(
            "--min-coverage",
            help="Drop tickers with bars on less than this share of their listed life.",
        ),
    ] = 0.8,
    calendar: Annotated[str, Opt("--calendar", help="Exchange calendar: XNYS or XNAS.")] = "XNYS",
    column: Annotated[
        list[str] | None,
        Opt("--column", help="files: rename a vendor column, VENDOR=canonical (repeatable)."),
    ] = None,
    feature_column: Annotated[
        list[str] | None,
        Opt("--feature-column", help="files/alpaca: a numeric feature column (repeatable)."),
    ] = None,
    feature_file: Annotated[
        Path | None, Opt("--feature-file", help="alpaca: CSV/Parquet of timestamp, tic, columns.")
    ] = None,
    timezone: Annotated[
        str | None,
        Opt("--timezone", help="files: zone of naive timestamps (default America/New_York)."),
    ] = None,
    bar_label: Annotated[
        str | None,
        Opt("--bar-label", help="files: intraday stamps mark the bar start, end, or auto."),
    ] = None,
    ticker_pattern: Annotated[
        str | None,
        Opt(
            "--ticker-pattern",
            help="files: regex whose first group is the ticker, applied to file names and "
            r"ticker columns, e.g. '^(.*)\.US$' for AAPL.US [default: file name up to '_'].",
        ),
    ] = None,
    benchmark: Annotated[
        str | None,
        Opt(
            "--benchmark",
            help="files: CSV/Parquet of index levels (daily or intraday), aligned causally; "
            r"yfinance: index symbol [default: ^NDX; 'none' for no index]; alpaca: a "
            "file of index levels or a fund symbol (e.g. QQQ) used as a labelled proxy.",
        ),
    ] = None,
    n_tickers: Annotated[
        int | None, Opt("--n-tickers", help="synthetic: number of tickers.")
    ] = None,
    years: Annotated[
        float | None, Opt("--years", help="synthetic: length in years (default 1).")
    ] = None,
    regime: Annotated[str | None, Opt("--regime", help="synthetic: null or alpha.")] = None,
    seed: Annotated[int | None, Opt("--seed", help="synthetic: random seed.")] = None,
    alpha_strength: Annotated[
        float | None,
        Opt("--alpha-strength", help="synthetic alpha: strength of the planted signal (0.1)."),
    ] = None,
    signal_persistence: Annotated[
        float | None,
        Opt(
            "--signal-persistence",
            help="synthetic alpha: AR(1) persistence of the signal per bar (0.9; 0.99 for "
            "a signal that outlives 0.2 % costs on minute bars).",
        ),
    ] = None,
    cache_dir: Annotated[
        Path | None,
        Opt(
            "--cache-dir",
            help=r"yfinance/alpaca: download cache [default: data/cache/<source>]; a rerun "
            "requests only what is not there.",
        ),
    ] = None,
    feed: Annotated[
        str | None,
        Opt(
            "--feed",
            help="alpaca: sip (default: all US exchanges; ends 15 min before now) or iex.",
        ),
    ] = None,
    adjustment: Annotated[
        str | None,
        Opt(
            "--adjustment",
            help="alpaca: all (splits + dividends, default), split, dividend or raw.",
        ),
    ] = None,
    adjust: Annotated[
        str | None, Opt("--adjust", help="sample: split (default) or total (dividends reinvested).")
    ] = None,
    point_in_time: Annotated[
        bool,
        Opt(
            "--point-in-time",
            help="sample: outside its index membership a stock can be sold, not bought.",
        ),
    ] = False,
    date_format: Annotated[
        str | None,
        Opt(
            "--date-format",
            help="strftime pattern, e.g. '%d/%m/%Y' or '%m/%d/%Y %H:%M', that --start, --end "
            "and the split dates are read with instead of YYYY-MM-DD; files: also the "
            "timestamps, for dates whose day/month order the values do not prove.",
        ),
    ] = None,
    drop_bad_tickers: Annotated[
        bool,
        Opt(
            "--drop-bad-tickers",
            help="files, yfinance, alpaca: build without a ticker whose rows cannot be read (or that loses "
            "most of its bars in cleaning) instead of failing; the manifest lists each with "
            "its cause.",
        ),
    ] = False,
    plan: Annotated[
        bool,
        Opt("--plan", help="alpaca: print the request plan (requests, minutes) and exit."),
    ] = False,
    overwrite: Annotated[
        bool,
        Opt("--overwrite", help="Replace an existing dataset at --out (in one atomic swap)."),
    ] = False,
) -> None:
    """Build a ready dataset directory (Parquet + manifest.json) from a source.

    An existing dataset at --out is an error unless --overwrite is given.
    """
    for flag, value in (
        ("--min-coverage", min_coverage),
        ("--years", years),
        ("--alpha-strength", alpha_strength),
        ("--signal-persistence", signal_persistence),
    ):
        if value is not None and not math.isfinite(value):
            raise FinpodError(f"{flag} must be a finite number, got {value}", "e.g. 0.8")

    # Every date of the command line is read here, one way: ISO, or --date-format strictly.
    if date_format is not None:
        check_date_format(date_format)
    first, last = _one_date(start, "--start", date_format), _one_date(end, "--end", date_format)
    if first is not None and last is not None and last < first:
        raise FinpodError(
            f"--end {iso_text(last)} is before --start {iso_text(first)}", "swap them"
        )
    start = None if first is None else iso_text(first)
    end = None if last is None else iso_text(last)
    dates = {
        k: _split_dates(v, k, date_format)
        for k, v in (("train", train), ("validation", validation), ("backtest", backtest))
    }
    given = {k: v for k, v in dates.items() if v is not None}
    _check_split_order(given)
    if given and len(given) != 3:
        missing = ", ".join(f"--{k}" for k in dates if k not in given)
        raise FinpodError(
            f"split dates are incomplete: missing {missing}",
            "give --train, --validation and --backtest together, or none",
        )
    opts = {
        "path": path,
        "columns": _columns(column),
        "feature_columns": feature_column or None,
        "feature_file": feature_file,
        "timezone": timezone,
        "bar_label": bar_label,
        "ticker_pattern": ticker_pattern,
        "benchmark": benchmark,
        "n_tickers": n_tickers,
        "years": years,
        "regime": regime,
        "seed": seed,
        "alpha_strength": alpha_strength,
        "signal_persistence": signal_persistence,
        "adjust": adjust,
        "point_in_time": point_in_time or None,
        # The files' own timestamps are read with it too; other sources have no text dates.
        "date_format": date_format if source == "files" else None,
        "drop_bad_tickers": drop_bad_tickers or None,
        "cache_dir": cache_dir,
        "feed": feed,
        "adjustment": adjustment,
    }
    opts = {k: v for k, v in opts.items() if v is not None}
    # lazy: `finpod --help` and usage errors answer without loading torch and pandas
    from finpod.data.dataset import SPLIT_GAP, build_dataset
    from finpod.data.manifest import Manifest

    if plan:
        # lazy: `finpod --help` and usage errors answer without loading torch and pandas
        from finpod.data.sources.alpaca import plan_download

        if source != "alpaca":
            raise FinpodError("--plan applies to --source alpaca", "add --source alpaca")
        console.print(
            plan_download(tickers, start, end, bar, feed, calendar).line(), soft_wrap=True
        )
        return
    t0 = time.perf_counter()
    out = out if out is not None else Path("data") / "datasets" / source
    try:
        with stop_signals_raise():
            result = build_dataset(
                source,
                out,
                bar=bar,
                tickers=tickers,
                start=start,
                end=end,
                splits=given or None,
                embargo=embargo,
                min_coverage=min_coverage,
                calendar=calendar,
                progress=True,
                overwrite=overwrite,
                **opts,
            )
    except KeyboardInterrupt as stop:
        # Ctrl-C and SIGTERM alike; build_dataset has removed its temporary folder.
        how = f"stopped by {stop.name}" if isinstance(stop, Stopped) else "interrupted"
        err_console.print(
            f"[bold red]error:[/] {how}; nothing was written to {out} "
            f"(continue with: {escape(same_command())})",
            highlight=False,
            soft_wrap=True,
        )
        code = 128 + stop.signum if isinstance(stop, Stopped) else 130
        raise typer.Exit(code) from None
    manifest = Manifest.load(result)
    for note in manifest.notes or ():
        if note.startswith(SPLIT_GAP):
            err_console.print(f"[yellow]notice:[/] {escape(note)}", highlight=False, soft_wrap=True)
    err_console.print(
        f"[green]dataset written[/] to {result} in {time.perf_counter() - t0:.1f} s: "
        f"{len(manifest.tickers)} tickers × {manifest.bars} {manifest.bar} bars, hash {manifest.hash[:12]}"
    )
    _print_manifest(manifest, err_console)
    # The dataset folder alone on stdout, so `DATA=$(finpod download …)` captures it.
    typer.echo(str(result))


def info(
    dataset: Annotated[Path, typer.Argument(help="A dataset directory, or a run: its verdict.")],
    verify: Annotated[
        bool, Opt("--verify", help="Recompute the content hash from the files and check it.")
    ] = False,
) -> None:
    """Print a dataset's manifest as a table (a run's verdict, given a run)."""
    if not verify and show_run_info(dataset):
        return
    # lazy: `finpod --help` and usage errors answer without loading torch and pandas
    from finpod.data.dataset import verify_dataset
    from finpod.data.manifest import Manifest

    _print_manifest(Manifest.load(dataset))
    if verify:
        digest = verify_dataset(dataset)
        console.print(f"[green]content hash verified[/] {digest}")


def _print_manifest(m: Manifest, console: Console = console) -> None:
    """The manifest's tables on ``console`` (stdout for ``finpod info``, stderr after a
    download, whose stdout holds only the dataset folder)."""
    table = Table(title="dataset", show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    table.add_row("source", str(m.source))
    # lazy: `finpod --help` and usage errors answer without loading torch and pandas
    from finpod.data.manifest import dataset_bars_per_year

    uni = m.universe_disclosure()
    table.add_row("universe", str(uni.get("name")))
    pit = uni.get("point_in_time")
    table.add_row("point-in-time", "unknown" if pit is None else "yes" if pit else "no")
    table.add_row("survivorship", str(uni.get("note")))
    bench = m.benchmark
    if isinstance(bench, Mapping):
        bench = f"{bench.get('name')} ({bench.get('kind')}; {bench.get('source')})"
    table.add_row("benchmark", str(bench or "none"))
    table.add_row("bar", str(m.bar))
    if m.feed:
        table.add_row("feed", m.feed)
    table.add_row(
        "bars / year",
        f"{dataset_bars_per_year(m):g} (counted on the {m.calendar or 'XNYS'} calendar)",
    )
    table.add_row("range", f"{m.start} → {m.end} ({m.bars} bars)")
    tick = m.tickers
    table.add_row("tickers", f"{len(tick)}: {', '.join(tick[:12])}{' …' if len(tick) > 12 else ''}")
    table.add_row("features", ", ".join(m.features))
    table.add_row("embargo", f"{m.embargo_sessions} sessions")
    table.add_row("hash", str(m.hash))
    for note in m.notes or []:
        table.add_row("note", note)
    console.print(table)
    splits = Table(title="splits")
    for c in ("split", "first bar", "last bar", "bars", "sessions"):
        splits.add_column(c)
    order = ("train", "validation", "backtest")
    for name, s in sorted(
        m.splits.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 9
    ):
        splits.add_row(name, s.start, s.end, str(s.bars), str(s.sessions))
    console.print(splits)
    clean = m.cleaning or {}
    ct = Table(title="cleaning")
    ct.add_column("what")
    ct.add_column("count")
    for group in ("dropped", "repaired"):
        for k, v in (clean.get(group) or {}).items():
            ct.add_row(f"{group}: {k}", str(v))
    for k in (
        "tickers_dropped",
        "listed_late",
        "ended_early",
        "delisted",
        "sell_only_outside_membership",
        "mixed_naive_and_aware",
        "large_moves",
    ):
        if k == "tickers_dropped" and isinstance(clean.get(k), Mapping):
            for tic, why in clean[k].items():
                ct.add_row(f"ticker dropped: {tic}", str(why))
        elif k in clean:
            ct.add_row(k, str(clean[k]))
    console.print(ct)


def register(app: typer.Typer) -> None:
    """Add ``download`` and ``info`` to the finpod app."""
    app.command("download")(download)
    app.command("info")(info)
