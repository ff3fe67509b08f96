"""The paper account as ``finpod paper`` sees it: alpaca-py's ``TradingClient`` (paper=True)
with the keys from the environment, requests paced and retried like the data client's, and
every failure sorted into one of a few kinds the trader acts on.

An order (``POST /v2/orders``) is sent once and never re-sent by the HTTP layer: a lost
answer (dropped connection, timeout, HTTP 5xx or 429) is the trader's to settle, by
looking the order up by its client order id. Every other request (reads, cancels) is
retried with backoff like the data client's (:mod:`finpod.data.sources.alpaca_client`).

Kinds of :class:`BrokerError` (``kind``): ``"rate_limit"`` (HTTP 429 after the retries),
``"connection"`` (no answer: refused, reset, timed out, after the retries), ``"server"``
(HTTP 5xx), ``"duplicate"`` (HTTP 422 "client_order_id must be unique": the account has
the order already), ``"rejected"`` (the account refused an order: 403/422, e.g.
insufficient buying power, a halted or inactive asset), ``"not_found"`` (404), ``"auth"``
(401: the keys) and ``"other"``. Answers are JSON dicts (raw data):
finpod reads the documented fields only (``status``, ``qty``, ``filled_qty``,
``filled_avg_price``, ``client_order_id``, ...).
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

import requests

from finpod.data.sources.alpaca_client import (
    CONNECT_TIMEOUT_S,
    FREE_RATE_PER_MIN,
    KEY_ENV,
    READ_TIMEOUT_S,
    SECRET_ENV,
    backoff_s,
    need_keys,
    paced_session,
)
from finpod.errors import FinpodError

#: Environment variable of the trading server's base URL (default: Alpaca's paper server).
TRADING_URL_ENV = "FINPOD_ALPACA_TRADING_URL"
#: Alpaca's paper trading server.
PAPER_URL = "https://paper-api.alpaca.markets"
#: Order states after which nothing more happens to an order.
FINAL_STATES = ("filled", "canceled", "expired", "rejected", "replaced", "done_for_day")
#: Order states of an order that may still fill.
OPEN_STATES = (
    "new",
    "accepted",
    "pending_new",
    "accepted_for_bidding",
    "partially_filled",
    "held",
    "calculated",
    "pending_cancel",
    "pending_replace",
)


def trading_url() -> str:
    """The trading server's base URL as configured (``FINPOD_ALPACA_TRADING_URL``)."""
    return os.environ.get(TRADING_URL_ENV, "").strip().rstrip("/") or PAPER_URL


class BrokerError(FinpodError):
    """A failure of a trading request, with its ``kind`` (module docstring) and HTTP status."""

    def __init__(self, message: str, hint: str | None, kind: str, status: int | None = None):
        super().__init__(message, hint)
        self.kind = kind
        self.status = status


def _api_message(err: Exception) -> str:
    text = str(getattr(err, "_error", "") or err)
    with contextlib.suppress(ValueError, AttributeError):
        text = str(json.loads(text).get("message") or text)
    return " ".join(text.split())[:160]


def broker_error(err: Exception, what: str) -> BrokerError:
    """The :class:`BrokerError` of an exception raised by a trading request about ``what``."""

    if isinstance(err, BrokerError):
        return err
    if isinstance(err, requests.ConnectionError | requests.Timeout | ConnectionError):
        return BrokerError(
            f"lost the connection to the trading server {trading_url()} during {what}: "
            f"{type(err).__name__}",
            f"nothing is sent twice: the order is looked up by its client order id "
            f"(check the network, and {TRADING_URL_ENV} if set)",
            "connection",
        )
    status = getattr(err, "status_code", None)
    msg = _api_message(err)
    if status == 429:
        return BrokerError(
            f"Alpaca rate limit (HTTP 429) on {what} after the retries",
            "waiting for the next poll; no order of this decision is sent twice",
            "rate_limit",
            429,
        )
    if status == 422 and "client_order_id must be unique" in msg:
        return BrokerError(
            f"{what}: the account has this client order id already", None, "duplicate", 422
        )
    if status in (403, 422):
        return BrokerError(f"{what} rejected (HTTP {status}: {msg})", None, "rejected", status)
    if status == 404:
        return BrokerError(f"{what}: not found (HTTP 404)", None, "not_found", 404)
    if status == 401:
        return BrokerError(
            f"Alpaca rejected the API keys (HTTP 401: {msg})",
            "use the paper account's keys (alpaca.markets → Paper → API keys)",
            "auth",
            401,
        )
    if status is not None and 500 <= int(status) < 600:
        return BrokerError(
            f"{what} failed: the trading server answered HTTP {status} ({msg})",
            "a server error: the next poll tries again",
            "server",
            int(status),
        )
    return BrokerError(f"{what} failed (HTTP {status}: {msg})", None, "other", status)


class Broker:
    """The paper account: clock, account, positions and orders, as dicts (module docstring)."""

    def __init__(self, rate_per_min: float = FREE_RATE_PER_MIN) -> None:
        try:
            key, secret = need_keys()
        except FinpodError as err:
            raise FinpodError(
                "finpod paper needs the paper account's API keys: "
                + err.message.split(": ", 1)[-1],
                f"alpaca.markets → Paper Trading → API keys, then export {KEY_ENV}=... "
                f"{SECRET_ENV}=...",
            ) from None
        # lazy: alpaca-py loads only to trade (tests/test_boundaries.py)
        from alpaca.trading.client import TradingClient

        url = os.environ.get(TRADING_URL_ENV, "").strip().rstrip("/") or None
        self.client = TradingClient(key, secret, paper=True, raw_data=True, url_override=url)
        self.counter: dict[str, float] = {"requests": 0, "retries": 0, "waited_s": 0.0}
        # The data client's HTTP session: paced to the plan's rate, 429/5xx and dropped
        # connections retried with exponential backoff (FINPOD_ALPACA_BACKOFF_S), messages
        # naming the trading server. The SDK's own fixed retry is switched off so the session
        # alone decides when to try again, and an order is never retried (module docstring).
        paced = paced_session(
            rate_per_min,
            backoff_s(),
            self.counter,
            lambda line: None,
            (trading_url(), TRADING_URL_ENV),
        )
        self.client._session = _OrdersOnce(paced, self.counter)
        self.client._retry_codes = [0]

    def _call(self, what: str, fn, *args) -> Any:
        # lazy: alpaca-py loads only to trade (tests/test_boundaries.py)
        from alpaca.common.exceptions import APIError

        try:
            return fn(*args)
        except (APIError, OSError) as err:
            raise broker_error(err, what) from None
        except BrokerError:
            raise
        except FinpodError as err:  # the session's own: no connection after its tries
            raise BrokerError(err.message, err.hint, "connection") from None

    def clock(self) -> dict[str, Any]:
        """``GET /v2/clock``: ``timestamp``, ``is_open``, ``next_open``, ``next_close``."""
        return self._call("the clock request", self.client.get_clock)

    def account(self) -> dict[str, Any]:
        """``GET /v2/account``: ``cash``, ``equity``, ``buying_power``, ``status``..."""
        return self._call("the account request", self.client.get_account)

    def positions(self) -> dict[str, float]:
        """``GET /v2/positions`` as ``{symbol: signed qty}``."""
        rows = self._call("the positions request", self.client.get_all_positions) or []
        return {str(p["symbol"]): float(p["qty"]) for p in rows}

    def order_by_client_id(self, client_order_id: str) -> dict[str, Any] | None:
        """``GET /v2/orders:by_client_order_id``: the order, or None when the account has none."""
        try:
            return self._call(
                f"the lookup of order {client_order_id}",
                self.client.get_order_by_client_id,
                client_order_id,
            )
        except BrokerError as err:
            if err.kind == "not_found":
                return None
            raise

    def order(self, order_id: str) -> dict[str, Any]:
        """``GET /v2/orders/{id}``."""
        return self._call(f"the status of order {order_id}", self.client.get_order_by_id, order_id)

    def cancel(self, order_id: str) -> None:
        """``DELETE /v2/orders/{id}``."""
        self._call(f"the cancel of order {order_id}", self.client.cancel_order_by_id, order_id)

    def submit(self, symbol: str, qty: float, client_order_id: str) -> dict[str, Any]:
        """``POST /v2/orders``: a market day order of ``qty`` shares (> 0 buys, < 0 sells)."""
        # lazy: alpaca-py loads only to trade (tests/test_boundaries.py)
        from alpaca.trading.enums import OrderSide, TimeInForce
        from alpaca.trading.requests import MarketOrderRequest

        request = MarketOrderRequest(
            symbol=symbol,
            qty=abs(qty),
            side=OrderSide.BUY if qty > 0 else OrderSide.SELL,
            time_in_force=TimeInForce.DAY,
            client_order_id=client_order_id,
        )
        side = "buy" if qty > 0 else "sell"
        return self._call(
            f"order {client_order_id} ({side} {abs(qty):g} {symbol})",
            self.client.submit_order,
            request,
        )


class _OrdersOnce:
    """The HTTP session of the trading client: ``POST`` (an order) goes out once, paced,
    with the timeouts and no retry; every other request through ``paced``'s retries."""

    def __init__(self, paced, counter: dict) -> None:
        self.paced = paced
        self.counter = counter

    def request(self, method: str, url: str, **kwargs):
        if method.upper() != "POST":
            return self.paced.request(method, url, **kwargs)
        kwargs.setdefault("timeout", (CONNECT_TIMEOUT_S, READ_TIMEOUT_S))
        self.paced._take()
        self.counter["requests"] += 1
        # the plain session's request: the paced one's would retry a lost answer
        return requests.Session.request(self.paced, method, url, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self.paced, name)


#: Kinds of :class:`BrokerError` a later poll may not meet again.
TRANSIENT_KINDS = ("connection", "rate_limit", "server")
#: Phrases of the data client's errors after its retries (no answer, 429/5xx).
TRANSIENT_DATA = ("cannot reach Alpaca", "kept answering HTTP", "gave no answer")


def transient(err: Exception) -> bool:
    """Whether a poll's error is worth another poll: a lost connection, a rate limit or a
    server error (HTTP 5xx) of the trading or the data API."""
    if isinstance(err, BrokerError):
        return err.kind in TRANSIENT_KINDS
    status = getattr(err, "status", None)
    if status is not None and (status == 429 or 500 <= int(status) < 600):
        return True
    return any(phrase in str(err) for phrase in TRANSIENT_DATA)
