"""``finpod download --source alpaca`` against a real HTTP server on loopback that answers
GET /v2/stocks/bars in Alpaca's documented shape (multi-symbol ``bars`` dict of
``{t, o, h, l, c, v, n, vw}`` lists, ``next_page_token`` pagination), built here from a
fixed seeded table: pagination, 429 retries, 403 and missing keys as one line, resume after a
kill, and a dataset identical to the ``files`` source's on the same bars."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from cli_runner import one_error_line
from loopback import JsonHandler, LoopbackServer, bar_window, plain

from finpod.data import build_dataset
from finpod.data.calendar import TZ, sessions

REPO = Path(__file__).resolve().parents[2]
SYMBOLS = ("AAA", "BBB", "NEWCO")
#: Two calendar months → two chunks per symbol (January: 3 sessions, February: 4).
START, END = "2024-01-29", "2024-02-06"
#: Bars per page the server sends (Alpaca sends up to the request's limit; fewer is legal).
PAGE = 1000


def make_bars(seed: int = 7) -> dict[str, pd.DataFrame]:
    """Seeded 1-minute bars, Alpaca's fields, ``t`` as UTC ISO strings: the regular session,
    a few pre-market bars (the cleaner drops them), a missing minute (forward-filled), and
    NEWCO listing in February (nothing in January: empty answers for it)."""
    rng = np.random.default_rng(seed)
    days = sessions(START, END)
    out = {}
    for k, sym in enumerate(SYMBOLS):
        stamps = []
        for d in days:
            if sym == "NEWCO" and d.month == 1:
                continue
            open_ = pd.Timestamp(d).tz_localize(TZ) + pd.Timedelta(hours=9, minutes=30)
            pre = [open_ - pd.Timedelta(minutes=m) for m in (90, 60, 30)]
            stamps += pre + [open_ + pd.Timedelta(minutes=i) for i in range(390)]
        idx = pd.DatetimeIndex(stamps).tz_convert("UTC")
        if sym == "BBB":
            idx = idx.delete(500)  # one minute without a trade
        n = len(idx)
        close = 20.0 * (k + 1) * np.exp(np.cumsum(0.001 * rng.standard_normal(n)))
        open_p = close * np.exp(0.0005 * rng.standard_normal(n))
        out[sym] = pd.DataFrame(
            {
                "t": idx.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "o": open_p.round(4),
                "h": (np.maximum(open_p, close) * 1.001).round(4),
                "l": (np.minimum(open_p, close) * 0.999).round(4),
                "c": close.round(4),
                "v": rng.integers(100, 5000, n),
                "n": rng.integers(1, 60, n),
                "vw": close.round(4),
            }
        )
    return out


BARS = make_bars()


class AlpacaReplay(LoopbackServer):
    """A loopback server for GET /v2/stocks/bars. ``script`` is a list of status codes for the
    first requests (e.g. ``[429]``); ``forbid_feed`` answers 403 to that feed; ``stall_after``
    holds the (n+1)-th request open until released; ``bars`` replaces :data:`BARS`;
    ``iex_bars`` are served to ``feed=iex`` (default: ``bars``); ``page_size`` bars a page at
    most (Alpaca's is 10,000). Every request is recorded."""

    def __init__(
        self,
        script=(),
        forbid_feed=None,
        stall_after=None,
        always=None,
        bars=None,
        iex_bars=None,
        page_size=PAGE,
    ):
        self.bars = BARS if bars is None else bars
        self.iex_bars = self.bars if iex_bars is None else iex_bars
        self.page_size = page_size
        self.retry_after: str | None = None
        self.times: dict[int, np.ndarray] = {}
        self.script = list(script)
        self.forbid_feed = forbid_feed
        self.stall_after = stall_after
        self.always = always
        self.requests: list[dict] = []
        self.stalled = threading.Event()
        server = self

        class Handler(JsonHandler):
            def do_GET(self):
                path, q = self.query()
                q["path"] = path
                q["key"] = self.headers.get("APCA-API-KEY-ID")
                server.requests.append(q)
                if server.stall_after is not None and len(server.requests) > server.stall_after:
                    server.stalled.set()
                    server.release.wait(30)
                    return
                status = server.always or (server.script.pop(0) if server.script else 200)
                if q.get("feed") == server.forbid_feed:
                    status = 403
                if path != "/v2/stocks/bars":
                    status = 404
                if status != 200:
                    msg = {
                        429: "too many requests.",
                        403: "subscription does not permit querying recent SIP data",
                    }.get(status, "not found")
                    retry = server.retry_after if status == 429 else None
                    return self.send_json(
                        status,
                        {"code": 40000000 + status, "message": msg},
                        None if retry is None else {"Retry-After": retry},
                    )
                return self.send_json(200, server.page(q))

        super().__init__(Handler)

    def page(self, q: dict) -> dict:
        """Rows of the asked symbols in [start, end], by symbol then time, one page of them."""
        lo, hi = bar_window(q)
        assert q["timeframe"] == "1Min", q
        asked = []
        source = self.iex_bars if q.get("feed") == "iex" else self.bars
        for sym in sorted(q["symbols"].split(",")):
            df = source.get(sym)
            if df is None:
                continue
            if id(df) not in self.times:  # parsed once: a month of many symbols is served fast
                self.times[id(df)] = (
                    pd.DatetimeIndex(pd.to_datetime(df["t"], utc=True)).as_unit("ns").asi8
                )
            t = self.times[id(df)]
            asked.append(df[(t >= lo.value) & (t <= hi.value)].assign(symbol=sym))
        rows = pd.concat(asked, ignore_index=True) if asked else pd.DataFrame()
        offset = int(base64.b64decode(q["page_token"])) if q.get("page_token") else 0
        limit = min(int(q.get("limit") or 10_000), self.page_size)
        bars: dict[str, list] = {}
        for rec in rows.iloc[offset : offset + limit].to_dict("records"):
            sym = rec.pop("symbol")
            bars.setdefault(sym, []).append({k: plain(v) for k, v in rec.items()})
        nxt = offset + limit
        token = base64.b64encode(str(nxt).encode()).decode() if nxt < len(rows) else None
        return {"bars": bars, "next_page_token": token}


@pytest.fixture
def alpaca_env(monkeypatch, tmp_path):
    """Keys, a fast backoff and a private cache; yields a function that starts a server."""
    servers = []
    monkeypatch.setenv("APCA_API_KEY_ID", "test-key")
    monkeypatch.setenv("APCA_API_SECRET_KEY", "test-secret")
    monkeypatch.setenv("FINPOD_ALPACA_BACKOFF_S", "0.01")

    def start(**kw) -> AlpacaReplay:
        srv = AlpacaReplay(**kw)
        servers.append(srv)
        monkeypatch.setenv("FINPOD_ALPACA_DATA_URL", srv.url)
        return srv

    yield start
    for s in servers:
        s.close()


def _load(cache: Path, **kw):
    from finpod.data.sources import load_source

    opts = dict(tickers=",".join(SYMBOLS), start=START, end=END, bar="1min", cache_dir=cache)
    opts.update(kw)
    return load_source("alpaca", **opts)


@pytest.fixture
def finpod_cli(finpod_cli, monkeypatch):
    """The shared ``finpod ARGS`` runner; ``env`` replaces the Alpaca variables."""

    def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        for k in list(os.environ):
            if k.startswith(("APCA_", "FINPOD_ALPACA")):
                monkeypatch.delenv(k)
        return finpod_cli(*args, **(env or {}))

    return run


def test_pages_are_followed_and_every_bar_arrives(alpaca_env, tmp_path):
    srv = alpaca_env()
    loaded = _load(tmp_path / "cache")
    tokens = [r.get("page_token") for r in srv.requests]
    assert sum(t is not None for t in tokens) >= 5, tokens  # pages 2.. of both months
    # Every regular-session bar the server has is on the grid with its close.
    b = loaded.bars
    for j, sym in enumerate(b.tickers):
        df = BARS[sym]
        t = pd.to_datetime(df["t"], utc=True).dt.tz_convert(TZ)
        reg = (t.dt.hour * 60 + t.dt.minute >= 570).to_numpy()
        got = pd.Series(b.close[:, j], index=b.timestamps)
        np.testing.assert_allclose(
            got.reindex(pd.DatetimeIndex(t[reg])).to_numpy(), df["c"][reg], rtol=1e-6
        )
    assert loaded.report["alpaca_requests"] == len(srv.requests)
    assert srv.requests[0]["key"] == "test-key"
    assert srv.requests[0]["adjustment"] == "all"


def extended_month(symbol: str = "BIG", start: str = "2024-03-01", end: str = "2024-03-28"):
    """One symbol's month of 1-minute bars with extended hours (04:00-20:00 New York, 960 a
    session): 19,200 rows over 20 sessions, about twice the 10,000 bars of one page."""
    rng = np.random.default_rng(3)
    days = sessions(start, end)
    stamps = [
        pd.Timestamp(d).tz_localize(TZ) + pd.Timedelta(hours=4, minutes=i)
        for d in days
        for i in range(960)
    ]
    idx = pd.DatetimeIndex(stamps).tz_convert("UTC")
    close = 50.0 * np.exp(np.cumsum(0.001 * rng.standard_normal(len(idx))))
    df = pd.DataFrame(
        {
            "t": idx.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "o": close.round(4),
            "h": (close * 1.001).round(4),
            "l": (close * 0.999).round(4),
            "c": close.round(4),
            "v": rng.integers(100, 5000, len(idx)),
            "n": rng.integers(1, 60, len(idx)),
            "vw": close.round(4),
        }
    )
    return {symbol: df}


def test_a_month_larger_than_one_page_arrives_whole(alpaca_env, tmp_path):
    # 19,200 rows for one symbol and one month: one request, which the SDK must follow page
    # by page to the end. A request that asked for at most PAGE_LIMIT rows in total would
    # get only the first 10,000 and stop (the replay sends pages of 1,000).
    bars = extended_month()
    srv = alpaca_env(bars=bars)
    cache = tmp_path / "cache"
    loaded = _load(cache, tickers="BIG", start="2024-03-01", end="2024-03-28")
    rows = len(bars["BIG"])
    assert rows == 19_200 and {r["start"][:10] for r in srv.requests} == {"2024-03-01"}
    assert len(srv.requests) == -(-rows // PAGE)  # one request, followed to its last page
    (cached,) = cache.rglob("*.parquet")
    assert len(pq.read_table(cached)) == rows
    t = pd.to_datetime(bars["BIG"]["t"], utc=True).dt.tz_convert(TZ)
    reg = ((t.dt.hour * 60 + t.dt.minute >= 570) & (t.dt.hour < 16)).to_numpy()
    got = pd.Series(loaded.bars.close[:, 0], index=loaded.bars.timestamps)
    assert len(got) == reg.sum()  # the whole regular session of every day, nothing else
    np.testing.assert_allclose(
        got.reindex(pd.DatetimeIndex(t[reg])).to_numpy(), bars["BIG"]["c"][reg], rtol=1e-6
    )


def test_a_winter_evening_bar_at_midnight_utc_is_a_minute_bar(alpaca_env, tmp_path):
    # 19:00 New York in January is 00:00 UTC: an extended-hours minute bar, not a date.
    bars = extended_month(start="2024-01-02", end="2024-01-03")
    t = pd.to_datetime(bars["BIG"]["t"], utc=True)
    assert ((t.dt.hour == 0) & (t.dt.minute == 0)).sum() == 2
    alpaca_env(bars=bars)
    loaded = _load(tmp_path / "cache", tickers="BIG", start="2024-01-02", end="2024-01-03")
    assert loaded.bars.close.shape == (2 * 390, 1)


def test_rate_limit_429_is_retried_then_succeeds(alpaca_env, tmp_path):
    srv = alpaca_env(script=[429, 429])
    loaded = _load(tmp_path / "cache")
    assert loaded.report["alpaca_retries"] == 2
    # The retried request is the same request again, not a skipped page.
    assert srv.requests[0] == srv.requests[1] == srv.requests[2]
    assert loaded.bars.tickers == sorted(SYMBOLS)


def test_rate_limit_that_never_ends_is_one_line_saying_rerun(alpaca_env, finpod_cli, tmp_path):
    srv = alpaca_env(always=429)
    out = finpod_cli(
        "download", "--source", "alpaca", "--tickers", "AAA", "--start", START, "--end", END,
        "--bar", "1min", "--out", str(tmp_path / "ds"),
        env={"APCA_API_KEY_ID": "k", "APCA_API_SECRET_KEY": "s",
             "FINPOD_ALPACA_DATA_URL": srv.url, "FINPOD_ALPACA_BACKOFF_S": "0.001"},
    )  # fmt: skip
    # the plan and each wait are said on stderr too (progress): one error line among them
    one_error_line(out, "HTTP 429", "rerun", alone=False)
    assert len(srv.requests) == 6  # one try + 5 retries, then it stops
    assert not (tmp_path / "ds").exists()


def test_403_on_sip_is_one_line_naming_the_feed(alpaca_env, finpod_cli, tmp_path):
    srv = alpaca_env(forbid_feed="sip")
    out = finpod_cli(
        "download", "--source", "alpaca", "--tickers", "AAA,BBB", "--start", START, "--end",
        END, "--bar", "1min", "--feed", "sip", "--out", str(tmp_path / "ds"),
        env={"APCA_API_KEY_ID": "k", "APCA_API_SECRET_KEY": "s",
             "FINPOD_ALPACA_DATA_URL": srv.url},
    )  # fmt: skip
    print(one_error_line(out, "sip", "HTTP 403", "--feed iex", "15 minutes", alone=False))
    assert len(srv.requests) == 1  # a 403 is not retried


def test_missing_keys_is_one_line_saying_how_to_get_them(finpod_cli, tmp_path):
    out = finpod_cli(
        "download", "--source", "alpaca", "--tickers", "AAA", "--start", START,
        "--out", str(tmp_path / "ds"),
    )  # fmt: skip
    one_error_line(out, "APCA_API_KEY_ID", "APCA_API_SECRET_KEY", "alpaca.markets", "paper")


def test_resume_after_a_kill_fetches_only_the_missing_days(alpaca_env, tmp_path):
    cache = tmp_path / "cache"
    srv = alpaca_env(stall_after=5)  # January = 3 pages, then February's 3rd page hangs
    proc = subprocess.Popen(
        [sys.executable, "-m", "finpod", "download", "--source", "alpaca", "--tickers",
         ",".join(SYMBOLS), "--start", START, "--end", END, "--bar", "1min",
         "--out", str(tmp_path / "ds1"), "--cache-dir", str(cache)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert srv.stalled.wait(90), "the download never reached the stalled request"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert all(pd.Timestamp(r["start"]).month == 1 for r in srv.requests[:3])
    jan = sorted(p.name for p in cache.rglob("*.parquet"))
    assert len(jan) == 3 and all(n.startswith("20240129_20240131") for n in jan), jan
    assert not list(cache.rglob("*.tmp")), "a half-written cache file was left"

    again = alpaca_env()
    loaded = _load(cache)
    assert len(again.requests) == 5  # February's 4,716 bars in 1,000-bar pages
    assert all(
        pd.Timestamp(r["start"]) >= pd.Timestamp("2024-02-01", tz=TZ) for r in again.requests
    )
    assert loaded.bars.tickers == sorted(SYMBOLS)
    # A third run is all cache: no request at all.
    third = alpaca_env()
    _load(cache)
    assert third.requests == []


def test_dataset_equals_the_files_source_on_the_same_bars(alpaca_env, tmp_path):
    alpaca_env()
    a = build_dataset(
        "alpaca",
        tmp_path / "alpaca",
        tickers=",".join(SYMBOLS),
        start=START,
        end=END,
        bar="1min",
        cache_dir=tmp_path / "cache",
    )
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    for sym, df in BARS.items():
        df.rename(columns={"t": "timestamp", "o": "open", "h": "high", "l": "low", "c": "close",
                           "v": "volume"})[
            ["timestamp", "open", "high", "low", "close", "volume"]
        ].to_csv(vendor / f"{sym}.csv", index=False)  # fmt: skip
    f = build_dataset(
        "files",
        tmp_path / "files",
        path=vendor,
        bar="1min",
        bar_label="start",
        start=START,
        end=END,
    )
    ma = json.loads((a / "manifest.json").read_text())
    mf = json.loads((f / "manifest.json").read_text())
    assert ma["hash"] == mf["hash"]
    assert ma["splits"] == mf["splits"] and ma["tickers"] == mf["tickers"]
    ta, tf = pq.read_table(a / "bars.parquet"), pq.read_table(f / "bars.parquet")
    assert ta.schema == tf.schema
    # Same bars, NaN where the same (prices before NEWCO's first bar): exact equality.
    pd.testing.assert_frame_equal(ta.to_pandas(), tf.to_pandas(), check_exact=True)
    ra = json.loads((a / "cleaning_report.json").read_text())
    rf = json.loads((f / "cleaning_report.json").read_text())
    for k in ("dropped", "repaired", "listed_late", "tickers", "bars", "kept_rows"):
        assert ra[k] == rf[k], k
    assert ra["dropped"]["outside_sessions"] == 3 * (7 + 7 + 4)  # the pre-market bars


def test_todays_partial_day_is_fetched_but_never_cached(alpaca_env, tmp_path):
    cache = tmp_path / "cache"
    now = pd.Timestamp("2024-02-06 11:00", tz=TZ)  # the range's last session is today
    alpaca_env()
    _load(cache, now=now)
    names = sorted({p.name for p in cache.rglob("*.parquet")})
    assert names == ["20240129_20240131.parquet", "20240201_20240205.parquet"], names
    again = alpaca_env()
    _load(cache, now=now)
    assert again.requests and all(
        pd.Timestamp(r["start"]) >= pd.Timestamp("2024-02-06", tz=TZ) for r in again.requests
    )


def test_the_universe_counts_the_tickers_of_the_dataset_not_those_asked(alpaca_env, tmp_path):
    alpaca_env()
    loaded = _load(tmp_path / "cache", tickers=",".join([*SYMBOLS, "NODATA"]))
    assert loaded.bars.tickers == sorted(SYMBOLS)
    assert loaded.universe == f"{len(SYMBOLS)} tickers of the {len(SYMBOLS) + 1} asked"
