"""Fuzzing the ``files`` source: malformed vendor tables through ``finpod download``.

Hypothesis writes tables a careless or hostile user could hand finpod: random column
names and sets, types, encodings, separators, timestamp styles, duplicates, non-finite and
impossible values, lengths and file layouts. The property, for every table:

- either ``finpod download`` fails with one red line (exit 1, no traceback) about the
  input, and leaves no output directory (nor a temporary one) behind;
- or it writes a dataset that passes the dataset checks, read back from its Parquet file:
  finite, positive prices on every listed bar; timestamps strictly increasing and inside
  the exchange's sessions; masks consistent (a bar is real or filled, never both; nothing
  before a ticker's first bar; finite, non-negative volume);
- and the ticker rule's oracle: every ticker of the generated input is in that dataset
  with its true closes (each real bar's close is one the input gave that ticker at that
  time), or the manifest lists it as dropped with its cause. A ticker never vanishes.

The benchmark and reference weights readers get the same kind of oracle: a file is one
error line, or every level (weight) of the input is read at its own date (ticker).

The cleaner's own safety net (``check_bars`` at build time) does not count as a clean
error: a table that reaches it is a cleaning bug the fuzzer must report.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import re
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from finpod.data.calendar import TZ, sessions
from finpod.data.sources.files import FILE_NAME_PATTERN

#: Examples per run of the default suite (deterministic: ``derandomize``), kept under a
#: minute on a laptop; raise it locally with FINPOD_FUZZ_EXAMPLES for a longer search.
FUZZ_EXAMPLES = 100

#: Mostly good symbols; now and then one no symbol has (zero-width, euro sign, blank).
TICKERS = [*["AAA", "BBB", "CCC", "brk.b"] * 6, "X\u200bY", "\u20acUR", "", " DD "]
STAMPS = [*["iso", "iso_time", "iso_offset"] * 3, "dmy", "mdy", "epoch", "compact", "garbage"]
CORRUPT = ["nan", "inf", "-inf", "neg", "zero", "text", "swap_hl", "overflow", "empty"]
PRICE = ["open", "high", "low", "close"]
ALIASES = {
    "timestamp": [*["date", "Date", "datetime", "TIME", "timestamp"] * 3, "when"],
    "tic": [*["tic", "Ticker", "SYMBOL"] * 3, "name"],
    "open": ["open", "Open", "o"],
    "high": ["high", "HIGH", "h"],
    "low": ["low", "Low", "l"],
    "close": ["close", "Close", "last", "c"],
    "volume": ["volume", "Vol", "v"],
}


#: Hidden columns of a drawn table (never written): each row's New York wall time and the
#: close a correct reader reads from its close cell (NaN: none).
WHEN, TRUE_CLOSE = "_when", "_true_close"


def _wall_times(bar: str, start: pd.Timestamp, n: int) -> pd.DatetimeIndex:
    if bar == "1d":
        return pd.bdate_range(start, periods=n)  # holidays included: the cleaner drops them
    step = {"1min": "1min", "5min": "5min"}[bar]
    return pd.date_range(start + pd.Timedelta("9h30min"), periods=n, freq=step)


def _stamps(kind: str, bar: str, start: pd.Timestamp, n: int) -> list[object]:
    t = _wall_times(bar, start, n)
    if kind == "iso":
        return list(t.strftime("%Y-%m-%d"))
    if kind == "iso_time":
        return list(t.strftime("%Y-%m-%d %H:%M:%S"))
    if kind == "iso_offset":
        return list(t.tz_localize(TZ).tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%S%z"))
    if kind == "dmy":
        return list(t.strftime("%d/%m/%Y %H:%M"))
    if kind == "mdy":
        return list(t.strftime("%m/%d/%Y"))
    if kind == "epoch":
        utc = t.tz_localize(TZ).tz_convert("UTC")
        return [int(x.timestamp()) for x in utc]
    if kind == "compact":
        return [int(x) for x in t.strftime("%Y%m%d")]
    return [f"day {i}" for i in range(n)]


@st.composite
def tables(draw) -> dict:
    """A malformed table and how it is written: ``{"files": {name: DataFrame}, ...}``.

    Every draw's simplest value (the one Hypothesis tries first and shrinks towards) is the
    well-formed choice, so the examples mix good tables, tables with one defect and
    tables with several.
    """
    n_tic = draw(st.integers(1, 3))
    # the same ticker twice (every row a conflicting duplicate) now and then
    tickers = draw(
        st.lists(st.sampled_from(TICKERS), min_size=n_tic, max_size=n_tic, unique=True)
        | st.lists(st.sampled_from(TICKERS), min_size=n_tic, max_size=n_tic)
    )
    length = draw(st.integers(80, 160) | st.sampled_from([0, 1, 2, 29, 40]))
    bar = draw(st.sampled_from(["1d", "1d", "1min", "5min"]))
    kind = draw(st.sampled_from(STAMPS))
    start = pd.Timestamp(draw(st.dates(dt.date(2018, 1, 2), dt.date(2020, 6, 30))))
    if draw(st.integers(0, 9)) < 9:  # mostly a weekday (holidays stay possible)
        start = pd.offsets.BDay().rollforward(start)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    frames = []
    for tic in tickers:
        n = max(0, length + draw(st.integers(-5, 5)))
        close = 50 * np.exp(np.cumsum(0.02 * rng.standard_normal(n)))
        open_ = close * np.exp(0.005 * rng.standard_normal(n))
        frame = pd.DataFrame(
            {
                WHEN: _wall_times(bar, start, n),
                TRUE_CLOSE: close,
                "timestamp": _stamps(kind, bar, start, n),
                "tic": tic,
                "open": open_,
                "high": np.maximum(open_, close) * 1.01,
                "low": np.minimum(open_, close) * 0.99,
                "close": close,
                "volume": rng.integers(0, 5000, n).astype(float),
            }
        )
        frames.append(frame)
    df = pd.concat(frames, ignore_index=True).astype({c: object for c in PRICE})
    if len(df) and draw(st.integers(0, 4)) == 4:  # one ticker's every close unreadable
        ruined = df["tic"] == draw(st.sampled_from(tickers))
        how = draw(st.sampled_from(["text", "decimal_comma"]))
        if how == "text":
            df.loc[ruined, "close"], df.loc[ruined, TRUE_CLOSE] = "n/a", np.nan
        else:  # the true value, written with a decimal comma
            df.loc[ruined, "close"] = [f"{x:.4f}".replace(".", ",") for x in df[TRUE_CLOSE][ruined]]
    for _ in range(draw(st.integers(0, 6)) if len(df) else 0):
        row = draw(st.integers(0, len(df) - 1))
        how = draw(st.sampled_from(CORRUPT))
        col = draw(st.sampled_from([*PRICE, "volume"]))
        value = {
            "nan": np.nan,
            "inf": np.inf,
            "-inf": -np.inf,
            "neg": -1.0,
            "zero": 0.0,
            "text": "n/a",
            "overflow": "1e999",
            "empty": None,
        }.get(how)
        if how == "swap_hl":
            df.loc[row, ["high", "low"]] = df.loc[row, ["low", "high"]].to_numpy()
        else:
            df[col] = df[col].astype(object)
            df.loc[row, col] = value
            if col == "close":
                df.loc[row, TRUE_CLOSE] = pd.to_numeric(pd.Series([value]), errors="coerce")[0]
    if len(df) and draw(st.booleans()):  # duplicates: exact copies or conflicting rows
        dup = df.sample(n=min(len(df), draw(st.integers(1, 5))), random_state=0)
        if draw(st.booleans()):
            dup = dup.assign(close=pd.to_numeric(dup["close"], errors="coerce") * 1.1)
            dup[TRUE_CLOSE] = dup["close"]
        df = pd.concat([df, dup], ignore_index=True)
    if draw(st.booleans()):
        df = df.sample(frac=1.0, random_state=1).reset_index(drop=True)
    rename = {c: draw(st.sampled_from(a)) for c, a in ALIASES.items()}
    if draw(st.integers(0, 19)) == 19:
        df = df.drop(columns=[draw(st.sampled_from(list(ALIASES)))])
    if draw(st.booleans()):
        df["extra"] = draw(st.sampled_from(["x", 1.5, None]))
    truth = df.pop(WHEN).to_frame().assign(close=df.pop(TRUE_CLOSE).astype(float))
    truth["spelling"] = df["tic"] if "tic" in df.columns else None
    df = df.rename(columns=rename)
    per_file = draw(st.booleans()) and rename["tic"] in df.columns
    if per_file:
        files = {
            f"{tic}.csv": part.drop(columns=[rename["tic"]])
            for tic, part in df.groupby(rename["tic"], sort=False)
        }
    else:
        files = {"bars.csv": df}
    return {
        "files": files,
        "sep": draw(st.sampled_from([*[","] * 8, ";", "\t"])),
        "encoding": draw(st.sampled_from([*["utf-8"] * 8, "utf-8-sig", "utf-16", "latin-1"])),
        "parquet": draw(st.integers(0, 5)) == 5,
        "daily": bar == "1d",
        "per_file": per_file,
        "truth": truth if "tic" in rename and rename["tic"] in df.columns or per_file else None,
        "drop_bad_tickers": draw(st.integers(0, 3)) == 3,
    }


def _write(case: dict, folder: Path) -> None:
    folder.mkdir()
    for name, frame in case["files"].items():
        path = folder / name
        if case["parquet"]:
            frame.astype(str).to_parquet(path.with_suffix(".parquet"), index=False)
        else:
            frame.to_csv(
                path, index=False, sep=case["sep"], encoding=case["encoding"], errors="replace"
            )


def _download(source: Path, out: Path, drop: bool = False) -> tuple[int, str]:
    from finpod.cli import main

    err, sink = io.StringIO(), io.StringIO()
    args = ["download", "--source", "files", "--path", str(source), "--out", str(out)]
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(sink):
        try:
            main(args + (["--drop-bad-tickers"] if drop else []))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, err.getvalue()


def dataset_problems(out: Path) -> list[str]:
    """The dataset checks, on the written Parquet file (independent of the builder's)."""
    df = pq.read_table(out / "bars.parquet").to_pandas()
    problems = []
    stamps = pd.DatetimeIndex(df["timestamp"].unique())
    if not stamps.is_monotonic_increasing or not stamps.is_unique:
        problems.append("timestamps not strictly increasing")
    days = sessions(stamps[0].tz_localize(None).normalize(), stamps[-1].tz_localize(None))
    if not pd.DatetimeIndex(stamps.tz_localize(None).normalize()).isin(days).all():
        problems.append("a timestamp outside the exchange's sessions")
    minutes = stamps.hour * 60 + stamps.minute
    if not ((minutes == 0) | ((minutes >= 570) & (minutes < 960))).all():
        problems.append("an intraday timestamp outside regular hours")
    df = df.sort_values(["tic", "timestamp"])
    listed = df.groupby("tic", observed=True)["tradable"].cummax().to_numpy(dtype=bool)
    prices = df[PRICE].to_numpy(dtype=np.float64)
    if not (np.isfinite(prices[listed]) & (prices[listed] > 0)).all():
        problems.append("a non-finite or non-positive price on a listed bar")
    if not np.isnan(prices[~listed]).all():
        problems.append("a price before a ticker's first bar")
    tradable, filled = df["tradable"].to_numpy(bool), df["filled"].to_numpy(bool)
    if (tradable & filled).any() or (filled & ~listed).any():
        problems.append("inconsistent tradable/filled masks")
    vol = df["volume"].to_numpy(np.float64)
    if not (np.isfinite(vol) & (vol >= 0)).all():
        problems.append("non-finite or negative volume")
    if "delisted" in df and (df["delisted"].to_numpy(bool) & tradable).any():
        problems.append("a delisted bar is tradable")
    return problems


def _written_ticker(spelling: object, case: dict) -> str:
    """The ticker finpod should read from a row's spelling, as the file holds it."""
    text = "" if spelling is None or spelling is pd.NA else str(spelling)
    if case["per_file"]:  # the ticker is the file's name
        match = re.match(FILE_NAME_PATTERN, text)
        return match.group(1).upper() if match else ""
    if not case["parquet"]:
        text = text.encode(case["encoding"], errors="replace").decode(case["encoding"])
    return text.strip().upper()


def ticker_problems(case: dict, out: Path) -> list[str]:
    """The ticker rule's oracle: every ticker of the input is in the dataset with its
    true closes, or listed in the manifest as dropped with a cause."""
    truth = case["truth"]
    if truth is None:  # no ticker column: the tickers are not the drawn ones
        return []
    truth = truth.assign(tic=[_written_ticker(s, case) for s in truth["spelling"]])
    truth = truth[truth["tic"] != ""]
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    dropped = (manifest.get("cleaning") or {}).get("tickers_dropped") or {}
    df = pq.read_table(out / "bars.parquet").to_pandas()
    df = df[df["tradable"].to_numpy(bool) & ~df["filled"].to_numpy(bool)]
    wall = pd.DatetimeIndex(df["timestamp"]).tz_convert(TZ).tz_localize(None)
    truth_key = pd.DatetimeIndex(truth[WHEN])
    if case["daily"]:
        wall, truth_key = wall.normalize(), truth_key.normalize()
    closes: dict[tuple[str, pd.Timestamp], list[float]] = {}
    for tic, key, close in zip(truth["tic"], truth_key, truth["close"], strict=True):
        closes.setdefault((tic, key), []).append(close)
    problems = []
    for tic in sorted(set(truth["tic"])):
        if tic in dropped:
            if not str(dropped[tic]).strip():
                problems.append(f"{tic} dropped without a cause")
            continue
        if tic not in manifest["tickers"]:
            problems.append(f"{tic} vanished: not in the dataset, not listed as dropped")
            continue
        mine = (df["tic"] == tic).to_numpy()
        for key, close in zip(wall[mine], df["close"].to_numpy(np.float64)[mine], strict=True):
            given = closes.get((tic, key), [])
            if not np.isclose(close, given, rtol=1e-5).any():
                problems.append(f"{tic} at {key}: close {close} where the input gave {given}")
                break
    for tic in set(manifest["tickers"]) - set(truth["tic"]):
        problems.append(f"{tic} is in the dataset but not in the input")
    return problems


@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=tables())
def test_a_malformed_table_is_one_clean_line_or_a_dataset_that_passes_the_checks(case):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _write(case, root / "in")
        out = root / "ds"
        code, err = _download(root / "in", out, case["drop_bad_tickers"])
        lines = [line for line in err.splitlines() if line.strip()]
        # what the examples covered (pytest --hypothesis-show-statistics)
        event("dataset" if code == 0 else " ".join(lines[:1]).replace(tmp, "")[:60])
        if code == 0:
            assert out.is_dir()
            assert dataset_problems(out) == []
            assert ticker_problems(case, out) == []
        else:
            assert code == 1, err
            assert len(lines) == 1 and lines[0].startswith("error: "), err
            assert "Traceback" not in err
            # the builder's safety net is a cleaning bug, not a clean error
            assert "fail the dataset checks" not in lines[0], lines[0]
            assert not out.exists()
        assert sorted(p.name for p in root.iterdir()) == (["ds", "in"] if code == 0 else ["in"])
