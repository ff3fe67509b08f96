"""The ``alpaca`` source's feed and requests against the loopback replay server of
:mod:`tests.data.test_alpaca`: SIP by default, requests ending 15 minutes before now, IEX
against SIP on the same replayed month (the server's IEX set is sparser, as IEX's is), a
chunk asked session by session when that takes fewer pages (no extended-hours bar asked),
and the request plan that counts those pages."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from backtest.fakes import make_run_dir  # tests/ is on the path (no __init__ there)

from finpod.backtest import run_backtest
from finpod.data import build_dataset, load_manifest, load_split
from finpod.data.calendar import TZ, sessions
from finpod.data.sources.alpaca_fetch import fetch_bars
from finpod.data.sources.alpaca_plan import request_plan

from . import test_alpaca as replay
from .test_alpaca import _load

#: The replay server's fixtures (keys, server, private cache; the CLI in process).
alpaca_env, finpod_cli = replay.alpaca_env, replay.finpod_cli


def test_sip_is_the_feed_of_every_request_by_default(alpaca_env, tmp_path):
    srv = alpaca_env()
    loaded = _load(tmp_path / "cache")
    assert srv.requests and {r["feed"] for r in srv.requests} == {"sip"}
    assert loaded.options["feed"] == "sip"


def test_sip_requests_end_15_minutes_before_now_and_the_console_says_so(
    alpaca_env, tmp_path, capsys
):
    now = pd.Timestamp("2024-02-06 11:00", tz=TZ)  # the range's last session is today
    srv = alpaca_env()
    _load(tmp_path / "cache", now=now)
    ends = pd.DatetimeIndex([pd.Timestamp(r["end"]) for r in srv.requests])
    assert ends.max() == now - pd.Timedelta(minutes=15)
    said = [ln for ln in capsys.readouterr().err.splitlines() if "before now" in ln]
    assert len(said) == 1 and "2024-02-06 10:45 New York" in said[0], said
    # IEX has no such delay: today's request runs to the end of the day.
    iex = alpaca_env()
    _load(tmp_path / "cache", now=now, feed="iex")
    assert max(pd.Timestamp(r["end"]) for r in iex.requests) > now
    assert "before now" not in capsys.readouterr().err


def month_of_minutes(symbols, start="2024-03-01", end="2024-03-28", hours=(9.5, 16.0), seed=5):
    """1-minute bars of ``symbols`` (Alpaca's fields) in ``hours`` of each session, New York."""
    rng = np.random.default_rng(seed)
    days = sessions(start, end)
    per_day = int(round((hours[1] - hours[0]) * 60))
    first = pd.DatetimeIndex(days).tz_localize(TZ) + pd.Timedelta(hours=hours[0])
    stamps = (first.asi8[:, None] + np.arange(per_day) * 60_000_000_000).ravel()
    idx = pd.DatetimeIndex(stamps).tz_localize("UTC")
    text = idx.strftime("%Y-%m-%dT%H:%M:%SZ")
    out = {}
    for k, sym in enumerate(symbols):
        close = (20.0 + 5 * k) * np.exp(np.cumsum(0.001 * rng.standard_normal(len(idx))))
        out[sym] = pd.DataFrame(
            {
                "t": text,
                "o": close.round(4),
                "h": (close * 1.001).round(4),
                "l": (close * 0.999).round(4),
                "c": close.round(4),
                "v": rng.integers(20_000, 80_000, len(idx)),
                "n": rng.integers(50, 400, len(idx)),
                "vw": close.round(4),
            }
        )
    return out


#: Share of the minutes with an IEX trade, per replayed ticker (two liquid, two thin).
IEX_SHARE = {"LIQA": 0.99, "LIQB": 0.95, "THIN": 0.70, "TINY": 0.45}


def iex_of(sip: dict[str, pd.DataFrame], seed: int = 9) -> dict[str, pd.DataFrame]:
    """The IEX view of SIP bars: ~3.5 % of the volume, and no bar in a minute without an
    IEX trade (a share :data:`IEX_SHARE` of the minutes kept, the first of each day always)."""
    rng = np.random.default_rng(seed)
    out = {}
    for sym, df in sip.items():
        keep = rng.random(len(df)) < IEX_SHARE[sym]
        keep[::390] = True
        v = np.maximum(1, (df["v"] * 0.035).round()).astype("int64")
        out[sym] = df.assign(v=v)[keep].reset_index(drop=True)
    return out


def _regular_rows(cache_root) -> pd.Series:
    """Bars per symbol in the cache under ``cache_root`` (every cached row)."""
    rows = pd.concat([pq.read_table(f).to_pandas() for f in sorted(cache_root.rglob("*.parquet"))])
    return rows.groupby("symbol")["v"].agg(["size", "sum"])


def test_iex_and_sip_bar_counts_side_by_side_on_a_replayed_month(
    alpaca_env, finpod_cli, tmp_path, capsys
):
    sip = month_of_minutes(list(IEX_SHARE))
    alpaca_env(bars=sip, iex_bars=iex_of(sip))
    counts, kept = {}, {}
    for feed in ("sip", "iex"):
        out = build_dataset(
            "alpaca",
            tmp_path / feed,
            tickers=",".join(IEX_SHARE),
            start="2024-03-01",
            end="2024-03-28",
            bar="1min",
            feed=feed,
            cache_dir=tmp_path / "cache",
            drop_bad_tickers=True,
        )
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["source_options"]["feed"] == feed
        kept[feed] = manifest["tickers"]
        counts[feed] = _regular_rows(tmp_path / "cache" / feed)
    table = pd.DataFrame(
        {
            "sip bars": counts["sip"]["size"],
            "iex bars": counts["iex"]["size"],
            "iex/sip bars": (counts["iex"]["size"] / counts["sip"]["size"]).round(3),
            "iex/sip volume": (counts["iex"]["sum"] / counts["sip"]["sum"]).round(4),
            "in sip dataset": [t in kept["sip"] for t in counts["sip"].index],
            "in iex dataset": [t in kept["iex"] for t in counts["sip"].index],
        }
    )
    with capsys.disabled():
        print(f"\n20 sessions × 390 minutes = {20 * 390} per ticker\n{table.to_string()}")
    assert (table["sip bars"] == 20 * 390).all()
    assert (table["iex bars"] < table["sip bars"]).all()
    for sym, share in IEX_SHARE.items():
        assert abs(table.loc[sym, "iex/sip bars"] - share) < 0.03, (sym, table.loc[sym])
    assert (table["iex/sip volume"] < 0.04).all()
    # Under the 80 % coverage rule the thin names leave the IEX dataset, not the SIP one.
    assert kept == {"sip": list(IEX_SHARE), "iex": ["LIQA", "LIQB"]}
    # finpod info names the feed of each dataset.
    for feed, words in (("sip", "consolidated"), ("iex", "IEX's own trades")):
        shown = finpod_cli("info", str(tmp_path / feed))
        assert shown.returncode == 0, shown.stderr
        (row,) = [ln for ln in shown.stdout.splitlines() if " feed " in ln]
        assert feed in row and words in row, row


def test_a_month_of_many_symbols_is_asked_session_by_session_in_fewer_pages(alpaca_env, tmp_path):
    # 30 symbols × 5 sessions, each with Alpaca's extended day (04:00-20:00, 960 bars): a
    # whole-chunk request carries 2.5 bars for each one kept; one request per session
    # from the open to the close carries none. Pages are Alpaca's 10,000 bars.
    symbols = [f"S{i:02d}" for i in range(30)]
    start, end = "2024-03-04", "2024-03-08"
    bars = month_of_minutes(symbols, start, end, hours=(4.0, 20.0))
    days = sessions(start, end)
    got, asked = {}, {}
    for mode in ("span", None):
        srv = alpaca_env(bars=bars, page_size=10_000)
        long = fetch_bars(
            symbols, days, "1min", cache_dir=tmp_path / f"cache-{mode}", mode=mode,
            now=pd.Timestamp("2024-04-01", tz=TZ),
        )  # fmt: skip
        asked[mode] = srv.requests
        t = long["timestamp"]
        got[mode] = long[(t.dt.hour * 60 + t.dt.minute >= 570) & (t.dt.hour < 16)]
    plan = request_plan(len(symbols), days, "1min", "sip", 200)
    print(
        f"\npages: whole chunks {len(asked['span'])}, session by session {len(asked[None])}; "
        f"plan {plan.requests} (whole chunks {plan.span_requests})"
    )
    assert len(asked[None]) < len(asked["span"])
    assert (plan.requests, plan.span_requests) == (len(asked[None]), len(asked["span"]))
    for r in asked[None]:
        lo, hi = (pd.Timestamp(r[k]).tz_convert(TZ) for k in ("start", "end"))
        assert lo.date() == hi.date() and (lo.hour, lo.minute) == (9, 30) and hi.hour == 15
    # The same regular-session bars either way.
    key = ["tic", "timestamp"]
    pd.testing.assert_frame_equal(
        got["span"].sort_values(key).reset_index(drop=True),
        got[None].sort_values(key).reset_index(drop=True),
    )
    assert len(got[None]) == len(symbols) * len(days) * 390


def test_the_plan_of_5_years_of_101_symbols_at_sip(finpod_cli):
    tickers = ",".join(f"S{i:03d}" for i in range(101))
    out = finpod_cli(
        "download", "--source", "alpaca", "--plan", "--tickers", tickers,
        "--start", "2021-01-01", "--end", "2025-12-31", "--bar", "1min",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr  # no keys needed, nothing requested
    (line,) = [ln for ln in out.stdout.splitlines() if ln.strip()]
    print(line)
    # 1,255 sessions × 5 requests of 25 symbols' regular session (9,750 bars ≤ a page).
    assert "101 symbols × 1,255 sessions" in line and "sip" in line
    assert "at most 6,275 requests" in line and "31.4 min at 200 requests/min" in line


def test_the_backtest_report_names_the_feed(alpaca_env, tmp_path):
    alpaca_env(bars=month_of_minutes(["LIQA", "LIQB"]))
    dataset = build_dataset(
        "alpaca", tmp_path / "ds", tickers="LIQA,LIQB", start="2024-03-01", end="2024-03-28",
        bar="1min", cache_dir=tmp_path / "cache",
    )  # fmt: skip
    run = make_run_dir(
        tmp_path, load_split(dataset, "backtest"), num_entries=1,
        dataset_path=str(dataset), dataset_hash=load_manifest(dataset)["hash"], env={},
    )  # fmt: skip
    result = run_backtest(run)
    assert result.disclosures["feed"] == "Market data feed: sip (consolidated: every US exchange)."
    page = result.to_html(tmp_path / "tearsheet.html").read_text()
    assert "Market data feed: sip (consolidated: every US exchange)." in page
