"""The HTTP side of the ``alpaca`` source: the SDK client with the keys from the environment,
requests paced to the plan's rate limit and retried with exponential backoff, and one-line
errors for the answers that stop a download."""

from __future__ import annotations

import os
import threading
import time

from finpod.errors import FinpodError

#: Environment variables of the keys (the SDK's own names).
KEY_ENV, SECRET_ENV = "APCA_API_KEY_ID", "APCA_API_SECRET_KEY"
#: Environment variable of the data server's base URL (default: Alpaca's).
URL_ENV = "FINPOD_ALPACA_DATA_URL"
#: Environment variable of the first backoff wait after an HTTP 429, in seconds.
BACKOFF_ENV = "FINPOD_ALPACA_BACKOFF_S"
#: Requests per minute of the free plan.
FREE_RATE_PER_MIN = 200
#: Retries of a request answered 429/502/503/504, and the longest wait between two.
RETRIES, MAX_WAIT_S = 7, 60.0
RETRY_STATUS = (429, 502, 503, 504)
#: Seconds before a silent connection is given up (then retried like a 503).
TIMEOUT_S = 60.0


def need_keys() -> tuple[str, str]:
    """The API key id and secret from the environment, or a one-line error saying how to set them."""
    key, secret = os.environ.get(KEY_ENV, "").strip(), os.environ.get(SECRET_ENV, "").strip()
    if not key or not secret:
        missing = " and ".join(n for n, v in ((KEY_ENV, key), (SECRET_ENV, secret)) if not v)
        raise FinpodError(
            f"the alpaca source needs API keys: {missing} not set",
            "make a free account at alpaca.markets (paper-trading keys work for market data), "
            f"then export {KEY_ENV}=... {SECRET_ENV}=...",
        )
    return key, secret


def _backoff_s() -> float:
    try:
        return max(0.0, float(os.environ.get(BACKOFF_ENV, "2")))
    except ValueError as err:
        raise FinpodError(f"{BACKOFF_ENV} must be a number of seconds", "e.g. 2") from err


def _paced_session(rate_per_min: float, backoff_s: float, counter: dict):
    """A ``requests.Session`` that paces requests to ``rate_per_min`` (a token bucket of one
    minute's requests), sets a timeout, and retries 429/5xx-busy answers and dropped
    connections with exponential backoff; the final answer goes back to the SDK."""
    import requests

    class PacedSession(requests.Session):
        def __init__(self) -> None:
            super().__init__()
            self.tokens = float(rate_per_min)
            self.stamp = time.monotonic()
            self.lock = threading.Lock()

        def _take(self) -> None:
            with self.lock:
                while True:
                    now = time.monotonic()
                    self.tokens = min(
                        rate_per_min, self.tokens + (now - self.stamp) * rate_per_min / 60.0
                    )
                    self.stamp = now
                    if self.tokens >= 1.0:
                        self.tokens -= 1.0
                        return
                    time.sleep((1.0 - self.tokens) * 60.0 / rate_per_min)

        def request(self, method, url, **kwargs):  # type: ignore[override]
            kwargs.setdefault("timeout", TIMEOUT_S)
            for attempt in range(RETRIES + 1):
                self._take()
                counter["requests"] += 1
                try:
                    resp = super().request(method, url, **kwargs)
                except (requests.ConnectionError, requests.Timeout):
                    if attempt == RETRIES:
                        raise
                    resp = None
                if resp is not None and (
                    resp.status_code not in RETRY_STATUS or attempt == RETRIES
                ):
                    return resp
                wait = min(MAX_WAIT_S, backoff_s * 2**attempt)
                if resp is not None and resp.headers.get("Retry-After", "").isdigit():
                    wait = min(MAX_WAIT_S, float(resp.headers["Retry-After"]))
                counter["retries"] += 1
                counter["waited_s"] += wait
                time.sleep(wait)
            raise AssertionError("unreachable")

    return PacedSession()


def make_client(rate_per_min: float = FREE_RATE_PER_MIN, counter: dict | None = None):
    """The SDK's ``StockHistoricalDataClient`` with the keys from the environment, the URL of
    ``FINPOD_ALPACA_DATA_URL`` if set, and the paced, retrying HTTP session."""
    key, secret = need_keys()
    from alpaca.data.historical import StockHistoricalDataClient

    url = os.environ.get(URL_ENV, "").strip().rstrip("/") or None
    client = StockHistoricalDataClient(key, secret, raw_data=True, url_override=url)
    counter = counter if counter is not None else {}
    for k in ("requests", "retries", "waited_s"):
        counter.setdefault(k, 0)
    # The SDK's own retry waits a fixed 3 s on 429/504; the session above retries with
    # exponential backoff instead, so the SDK's is switched off (it then raises at once).
    client._session = _paced_session(rate_per_min, _backoff_s(), counter)
    client._retry_codes = [0]
    return client


def api_error(err: Exception, feed: str, symbols: list[str], a, b) -> FinpodError:
    """The one-line finpod error for an Alpaca API failure on ``symbols`` from ``a`` to ``b``."""
    status = getattr(err, "status_code", None)
    try:
        msg = str(getattr(err, "message", "") or err)
    except Exception:  # noqa: BLE001 - the SDK parses the body as JSON here
        msg = str(err)
    msg = " ".join(msg.split())[:160]
    what = f"{','.join(symbols[:3])}{'…' if len(symbols) > 3 else ''} {a.date()}→{b.date()}"
    if status == 403:
        return FinpodError(
            f"Alpaca refused the {feed} feed data for {what} (HTTP 403: {msg})",
            "the free plan has no SIP data of the last 15 minutes: use --feed iex, or an --end "
            "earlier than 15 minutes ago; check that the keys are for market data",
        )
    if status == 401:
        return FinpodError(
            f"Alpaca rejected the API keys (HTTP 401: {msg})",
            f"check {KEY_ENV} and {SECRET_ENV} (alpaca.markets → API keys)",
        )
    if status in RETRY_STATUS:
        return FinpodError(
            f"Alpaca kept answering HTTP {status} (rate limit or busy) for {what} after "
            f"{RETRIES} retries with backoff",
            "wait a few minutes and rerun the same command: the days already fetched are "
            "cached and are not requested again",
        )
    return FinpodError(
        f"Alpaca request for {what} failed (HTTP {status}: {msg})",
        "check the symbols, --feed and dates; days already fetched are cached",
    )
