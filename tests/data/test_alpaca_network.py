"""Networks fail fast: a connection that cannot be made is one line within seconds, and only
rate limits and server errors get the long backoff, each wait shown. Against the loopback
replay server of :mod:`tests.data.test_alpaca` and a loopback port with nothing listening;
the ``yfinance`` source through a proxy on such a port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from cli_runner import one_error_line

from . import test_alpaca as replay
from .test_alpaca import END, REPO, START

#: The replay server's fixtures (keys, server, private cache; the CLI in process).
alpaca_env, finpod_cli = replay.alpaca_env, replay.finpod_cli


def closed_port() -> int:
    """A loopback port with nothing listening (bound once, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _download(finpod_cli, url: str, out, backoff: str = "2"):
    return finpod_cli(
        "download", "--source", "alpaca", "--tickers", "AAA", "--start", START, "--end", END,
        "--bar", "1min", "--out", str(out), "--cache-dir", str(out) + "-cache",
        env={"APCA_API_KEY_ID": "k", "APCA_API_SECRET_KEY": "s",
             "FINPOD_ALPACA_DATA_URL": url, "FINPOD_ALPACA_BACKOFF_S": backoff},
    )  # fmt: skip


def test_a_refused_connection_is_one_line_within_15_s(finpod_cli, tmp_path):
    port = closed_port()
    t0 = time.monotonic()
    out = _download(finpod_cli, f"http://127.0.0.1:{port}", tmp_path / "ds")
    took = time.monotonic() - t0
    line = one_error_line(  # after the retries' lines (stderr: stdout holds only a path)
        out, "cannot reach Alpaca", f"127.0.0.1:{port}", "connection refused", alone=False
    )
    print(f"{took:.1f} s: {line}")
    assert took < 15, took  # the long backoff (2 s doubling) would take a minute
    assert "try 2/3" in out.stderr and "try 3/3" in out.stderr  # the brief retries, shown
    assert not (tmp_path / "ds").exists()


def test_each_rate_limit_and_server_busy_wait_is_shown(alpaca_env, finpod_cli, tmp_path):
    srv = alpaca_env(script=[429, 503])
    out = _download(finpod_cli, srv.url, tmp_path / "ds", backoff="0.01")
    assert out.returncode == 0, out.stderr
    waits = [ln for ln in out.stderr.splitlines() if "waiting" in ln]
    assert waits == [
        "rate limited (HTTP 429), waiting 0.01 s (try 2/6)",
        "server busy (HTTP 503), waiting 0.02 s (try 3/6)",
    ], out.stderr
    assert srv.requests[0] == srv.requests[1] == srv.requests[2]  # the same request again


def test_a_retry_after_header_sets_the_wait(alpaca_env, finpod_cli, tmp_path):
    srv = alpaca_env(script=[429])
    srv.retry_after = "1"
    out = _download(finpod_cli, srv.url, tmp_path / "ds", backoff="0.01")
    assert out.returncode == 0, out.stderr
    assert "rate limited (HTTP 429), waiting 1 s (try 2/6)" in out.stderr


def test_yfinance_without_a_network_is_one_line_at_the_first_ticker(tmp_path):
    # Every request goes through a proxy on a port with nothing listening. yfinance logs
    # the failure and returns nothing; finpod says so once, at the first ticker, instead
    # of trying each of the ~110 members of 2019 in turn.
    proxy = f"http://127.0.0.1:{closed_port()}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.update({k: proxy for k in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")})
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "finpod", "download", "--source", "yfinance", "--tickers",
         "nasdaq100", "--start", "2019-01-02", "--end", "2019-12-31",
         "--out", str(tmp_path / "ds"), "--cache-dir", str(tmp_path / "cache")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    took = time.monotonic() - t0
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("error:")]
    print(f"{took:.1f} s: {errors}")
    assert out.returncode == 1 and len(errors) == 1, out.stderr
    assert "cannot reach Yahoo Finance" in errors[0] and "curl error" in errors[0], errors
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "ds").exists()
