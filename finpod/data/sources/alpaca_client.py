"""The HTTP side of the ``alpaca`` source: the SDK client with the keys from the environment,
requests paced to the plan's rate limit, and what a failure costs:

- HTTP 429 (rate limit) and 502/503/504 (busy), or no answer within :data:`READ_TIMEOUT_S`:
  the long backoff (2 s, doubling, at most 60 s, ``Retry-After`` when sent), each wait
  shown in one line, :data:`TRIES` tries in all;
- a connection that cannot be made (refused, unknown host, nothing answering within
  :data:`CONNECT_TIMEOUT_S`): :data:`CONNECT_TRIES` quick tries, then one line, well within
  15 s;
- anything else (403, 401, 400…): one line at once.

``alpaca-py`` (0.44) retries inside ``RESTClient._request``: a fixed, silent wait
(``retry_wait_seconds``, 3 s) on ``retry_exception_codes`` (429 and 504), never on a
connection error, and ``StockHistoricalDataClient`` does not pass these settings on. Its
``retry_attempts`` is therefore set to 0 here and the retries happen in the HTTP session,
where the wait can follow ``Retry-After`` and be shown."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

import requests

from finpod.errors import FinpodError

#: Environment variables of the keys (the SDK's own names).
KEY_ENV, SECRET_ENV = "APCA_API_KEY_ID", "APCA_API_SECRET_KEY"
#: Environment variable of the data server's base URL (default: Alpaca's).
URL_ENV = "FINPOD_ALPACA_DATA_URL"
#: Environment variable of the first backoff wait after an HTTP 429, in seconds.
BACKOFF_ENV = "FINPOD_ALPACA_BACKOFF_S"
#: Requests per minute of the free plan.
FREE_RATE_PER_MIN = 200
#: Tries of a request answered 429/502/503/504 (the first and 5 retries), and the longest
#: wait between two.
TRIES, MAX_WAIT_S = 6, 60.0
RETRY_STATUS = (429, 502, 503, 504)
#: Tries of a connection that cannot be made, and the wait before the second (doubling).
CONNECT_TRIES, CONNECT_WAIT_S = 3, 0.5
#: Seconds to make a connection, and to wait for an answer on one that is made.
CONNECT_TIMEOUT_S, READ_TIMEOUT_S = 4.0, 30.0


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


def data_url() -> str:
    """The data server's base URL as configured (``FINPOD_ALPACA_DATA_URL``), for messages."""
    return os.environ.get(URL_ENV, "").strip().rstrip("/") or "https://data.alpaca.markets"


def backoff_s() -> float:
    """The first backoff wait, seconds (``FINPOD_ALPACA_BACKOFF_S``, default 2)."""
    try:
        return max(0.0, float(os.environ.get(BACKOFF_ENV, "2")))
    except ValueError as err:
        raise FinpodError(f"{BACKOFF_ENV} must be a number of seconds", "e.g. 2") from err


def _chain(err: BaseException):
    """``err`` and every exception behind it (causes, contexts, urllib3's ``reason``, args)."""
    todo, seen = [err], set()
    while todo:
        e = todo.pop()
        if not isinstance(e, BaseException) or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [e.__cause__, e.__context__, getattr(e, "reason", None), *e.args]


def network_cause(err: BaseException) -> str:
    """What stopped a connection, in a few words (``connection refused``, ``unknown host``…)."""
    for e in _chain(err):
        if isinstance(e, ConnectionRefusedError):
            return "connection refused (nothing listening there)"
        if isinstance(e, ConnectionResetError):
            return "connection reset by the server"
        if "NameResolution" in type(e).__name__ or "getaddrinfo" in str(e):
            return "unknown host (no DNS answer: offline?)"
    if isinstance(err, requests.ConnectTimeout):
        return f"no connection within {CONNECT_TIMEOUT_S:g} s"
    return type(err).__name__


def paced_session(
    rate_per_min: float,
    backoff_s: float,
    counter: dict,
    say: Callable[[str], None],
    server: tuple[str, str] | None = None,
):
    """A ``requests.Session`` that paces requests to ``rate_per_min`` (a token bucket of one
    minute's requests), sets timeouts, and retries as the module says; the final answer goes
    back to the SDK, a connection that cannot be made is one :class:`FinpodError`.
    ``server``: (base URL, its environment variable) that messages name (default: the
    data server's)."""

    url, url_env = server or (data_url(), URL_ENV)

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

        def _wait(self, wait: float, why: str, attempt: int, tries: int) -> None:
            say(f"{why}, waiting {wait:.3g} s (try {attempt + 1}/{tries})")
            counter["retries"] += 1
            counter["waited_s"] += wait
            time.sleep(wait)

        def request(self, method, url, **kwargs):  # type: ignore[override]
            kwargs.setdefault("timeout", (CONNECT_TIMEOUT_S, READ_TIMEOUT_S))
            t0, attempt, refused = time.monotonic(), 0, 0
            while True:
                attempt += 1
                self._take()
                counter["requests"] += 1
                try:
                    resp = super().request(method, url, **kwargs)
                except requests.ReadTimeout as err:  # connected, then silent: a busy server
                    if attempt >= TRIES:
                        raise FinpodError(
                            f"Alpaca at {url} gave no answer in {attempt} tries "
                            f"({READ_TIMEOUT_S:g} s each)",
                            "wait a few minutes and rerun: days already fetched are cached",
                        ) from err
                    wait = min(MAX_WAIT_S, backoff_s * 2 ** (attempt - 1))
                    self._wait(wait, f"no answer in {READ_TIMEOUT_S:g} s", attempt, TRIES)
                    continue
                except (requests.ConnectionError, requests.ConnectTimeout) as err:
                    refused += 1
                    cause = network_cause(err)
                    if refused >= CONNECT_TRIES:
                        raise FinpodError(
                            f"cannot reach Alpaca at {url}: {cause} ({refused} tries "
                            f"in {time.monotonic() - t0:.1f} s)",
                            f"check the network connection (and {url_env} if set); "
                            "days already fetched are cached",
                        ) from err
                    wait = CONNECT_WAIT_S * 2 ** (refused - 1)
                    self._wait(wait, f"cannot connect: {cause}", refused, CONNECT_TRIES)
                    continue
                if resp.status_code not in RETRY_STATUS or attempt >= TRIES:
                    return resp
                wait = min(MAX_WAIT_S, backoff_s * 2 ** (attempt - 1))
                if resp.headers.get("Retry-After", "").isdigit():
                    wait = min(MAX_WAIT_S, float(resp.headers["Retry-After"]))
                why = "rate limited" if resp.status_code == 429 else "server busy"
                self._wait(wait, f"{why} (HTTP {resp.status_code})", attempt, TRIES)

    return PacedSession()


def make_client(
    rate_per_min: float = FREE_RATE_PER_MIN,
    counter: dict | None = None,
    say: Callable[[str], None] | None = None,
):
    """The SDK's ``StockHistoricalDataClient`` with the keys from the environment, the URL of
    ``FINPOD_ALPACA_DATA_URL`` if set, and the paced, retrying HTTP session; ``say`` shows
    each wait (one line)."""
    key, secret = need_keys()
    # lazy: the Alpaca SDK loads only to download (tests/test_boundaries.py)
    from alpaca.data.historical import StockHistoricalDataClient

    url = os.environ.get(URL_ENV, "").strip().rstrip("/") or None
    client = StockHistoricalDataClient(key, secret, raw_data=True, url_override=url)
    counter = counter if counter is not None else {}
    for k in ("requests", "retries", "waited_s"):
        counter.setdefault(k, 0)
    client._session = paced_session(rate_per_min, backoff_s(), counter, say or (lambda s: None))
    # The SDK's retry_attempts (its constructor does not take it): 0, so that its own fixed,
    # silent 3 s retry of 429/504 never stacks on the session's shown backoff.
    client._retry = 0
    return client


def api_error(err: Exception, feed: str, symbols: list[str], a, b) -> FinpodError:
    """The one-line finpod error for an Alpaca API failure on ``symbols`` from ``a`` to ``b``,
    with the HTTP status as its ``status`` attribute."""
    out = _api_error(err, feed, symbols, a, b)
    out.status = getattr(err, "status_code", None)
    return out


def _api_error(err: Exception, feed: str, symbols: list[str], a, b) -> FinpodError:
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
            "the free plan serves SIP bars only up to 15 minutes ago (requests end there): "
            "check that the keys are for market data, or use --feed iex",
        )
    if status == 401:
        return FinpodError(
            f"Alpaca rejected the API keys (HTTP 401: {msg})",
            f"check {KEY_ENV} and {SECRET_ENV} (alpaca.markets → API keys)",
        )
    if status in RETRY_STATUS:
        return FinpodError(
            f"Alpaca kept answering HTTP {status} (rate limit or busy) for {what} after "
            f"{TRIES} tries with backoff",
            "wait a few minutes and rerun the same command: the days already fetched are "
            "cached and are not requested again",
        )
    return FinpodError(
        f"Alpaca request for {what} failed (HTTP {status}: {msg})",
        "check the symbols, --feed and dates; days already fetched are cached",
    )
