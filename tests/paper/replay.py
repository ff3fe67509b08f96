"""A loopback server that answers as Alpaca's paper trading API and its data API do, in their
documented shapes: GET /v2/clock, /v2/account, /v2/positions, POST /v2/orders (a repeated
``client_order_id`` is refused with 422, as Alpaca does), GET /v2/orders/{id},
GET /v2/orders:by_client_order_id (404 when unknown), DELETE /v2/orders/{id}, and
GET /v2/stocks/bars (one timeframe, only the bars that exist at the server's clock; a
request the data plan does not serve, e.g. the free plan's SIP bars of the last 15
minutes, is refused with 403, :class:`loopback.DataPlan`). Faults
(:meth:`~loopback.LoopbackServer.inject`) hit any of these.

The test moves the clock (:meth:`AlpacaPaper.set_clock`) and plays the market's open
(:meth:`AlpacaPaper.fill_open_orders`: market orders fill at the session's open, or part of
them). Every request is recorded."""

from __future__ import annotations

import json
import threading
import uuid

import numpy as np
import pandas as pd
from loopback import FREE, DataPlan, JsonHandler, LoopbackServer, bar_window, plain

TZ = "America/New_York"


def alpaca_bars(
    starts: pd.DatetimeIndex,
    close: np.ndarray,
    rng: np.random.Generator,
    spread: float,
    volume: tuple[int, int],
    trades: tuple[int, int],
) -> pd.DataFrame:
    """One symbol's bars in Alpaca's fields (``t`` as UTC ISO strings) from its ``close``
    prices at the bar ``starts``. Each open is the previous close, so a market order sent
    after a close fills at that close; high and low lie ``spread`` beyond them; volume and
    trade count are drawn from ``rng`` in the ranges given."""
    open_ = np.r_[close[0], close[:-1]]
    return pd.DataFrame(
        {
            "t": starts.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ"),
            "o": open_,
            "h": np.round(np.maximum(open_, close) * (1 + spread), 2),
            "l": np.round(np.minimum(open_, close) * (1 - spread), 2),
            "c": close,
            "v": rng.integers(*volume, len(close)).astype(float),
            "n": rng.integers(*trades, len(close)).astype(float),
            "vw": close,
        }
    )


def long_table(bars: dict[str, pd.DataFrame], upto: int) -> pd.DataFrame:
    """The first ``upto`` bars of every symbol as the long table the files source reads
    (``timestamp`` in New York time)."""
    return pd.concat(
        [
            pd.DataFrame(
                {
                    "timestamp": pd.to_datetime(df["t"], utc=True).dt.tz_convert(TZ),
                    "tic": sym,
                    "open": df["o"],
                    "high": df["h"],
                    "low": df["l"],
                    "close": df["c"],
                    "volume": df["v"],
                }
            ).iloc[:upto]
            for sym, df in bars.items()
        ],
        ignore_index=True,
    )


class AlpacaPaper(LoopbackServer):
    def __init__(
        self,
        bars: dict[str, pd.DataFrame],
        cash: float,
        timeframe: str = "1Day",
        plan: DataPlan = FREE,
    ):
        self.bars = dict(bars)  # a test may change its own copy
        self.timeframe = timeframe
        self.plan = plan
        self.refused: list[tuple[str, str]] = []  # (feed, end) of each bars request refused
        self.cash = float(cash)
        self.positions: dict[str, float] = {}
        self.orders: dict[str, dict] = {}
        self.requests: list[tuple[str, str]] = []
        self.posts: list[dict] = []
        self.duplicates: list[str] = []  # client order ids a POST sent again
        self.feeds: list[str] = []  # the feed of each bars request
        self.now = pd.Timestamp("2000-01-01", tz="UTC")
        self.is_open = False
        self.reject: dict[str, str] = {}  # symbol → message of a 403
        self.order_status: dict[str, int] = {}  # POST /v2/orders answered with this status
        self.stall_posts_after: int | None = None  # hold the (n+1)-th POST open
        self.stalled = threading.Event()
        self.lock = threading.Lock()
        server = self

        class Handler(JsonHandler):
            def do_GET(self):
                path, q = self.query()
                server.requests.append(("GET", path))
                self.answer(server.fault_for("GET", path), lambda: server.get(path, q))

            def do_DELETE(self):
                path, _ = self.query()
                server.requests.append(("DELETE", path))
                order = server.orders.get(path.rsplit("/", 1)[-1])
                if order is None:
                    return self.send_json(404, {"code": 40410000, "message": "order not found"})
                order["status"] = "canceled"
                self.send_json(204)

            def do_POST(self):
                path, _ = self.query()
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(("POST", path))
                if server.stall_posts_after is not None and len(server.posts) >= (
                    server.stall_posts_after
                ):
                    server.stalled.set()
                    server.release.wait(30)
                self.answer(server.fault_for("POST", path), lambda: server.post(body))

        super().__init__(Handler)

    # ------------------------------------------------------------------ the test's hands
    def set_clock(self, when: str, is_open: bool = False) -> None:
        self.now = pd.Timestamp(when, tz=TZ).tz_convert("UTC")
        self.is_open = is_open

    def open_price(self, symbol: str, start: pd.Timestamp) -> float:
        df = self.bars[symbol]
        return float(df[pd.to_datetime(df["t"], utc=True) == start]["o"].iloc[0])

    def fill_open_orders(self, bar: str, part: dict[str, float] | None = None) -> None:
        """The open of the bar starting at ``bar`` (New York; a day for daily bars): every
        open order fills at its open price (``part``: the share of an order that fills,
        the rest stays open)."""
        d = pd.Timestamp(bar, tz=TZ)
        for o in self.orders.values():
            if o["status"] not in ("accepted", "new"):
                continue
            qty = float(o["qty"])
            share = (part or {}).get(o["symbol"], 1.0)
            done = float(int(qty * share)) if share < 1.0 else qty
            price = self.open_price(o["symbol"], d)
            sign = 1.0 if o["side"] == "buy" else -1.0
            self.positions[o["symbol"]] = self.positions.get(o["symbol"], 0.0) + sign * done
            self.cash -= sign * done * price
            o.update(
                filled_qty=str(done),
                filled_avg_price=str(price),
                status="filled" if done == qty else "partially_filled",
            )

    def sent(self) -> list[tuple[str, str, float]]:
        """(client order id, symbol, signed qty) of every order the account took."""
        return [
            (o["client_order_id"], o["symbol"], float(o["qty"]) * (1 if o["side"] == "buy" else -1))
            for o in self.orders.values()
        ]

    # ------------------------------------------------------------------------ answers
    def get(self, path: str, q: dict) -> tuple[int, object]:
        if path == "/v2/clock":
            return 200, {
                "timestamp": self.now.isoformat(),
                "is_open": self.is_open,
                "next_open": self.next_at(9, 30).isoformat(),
                "next_close": self.next_at(16, 0).isoformat(),
            }
        if path == "/v2/account":
            value = self.cash + sum(q_ * self.last_close(s) for s, q_ in self.positions.items())
            return 200, {
                "id": "paper-account",
                "status": "ACTIVE",
                "currency": "USD",
                "cash": f"{self.cash:.4f}",
                "equity": f"{value:.4f}",
                "buying_power": f"{2 * value:.4f}",
            }
        if path == "/v2/positions":
            return 200, [
                {"symbol": s, "qty": f"{q_:g}", "side": "long" if q_ > 0 else "short"}
                for s, q_ in self.positions.items()
                if q_ != 0
            ]
        if path == "/v2/orders:by_client_order_id":
            for o in self.orders.values():
                if o["client_order_id"] == q.get("client_order_id"):
                    return 200, o
            return 404, {"code": 40410000, "message": "order not found"}
        if path.startswith("/v2/orders/"):
            o = self.orders.get(path.rsplit("/", 1)[-1])
            return (200, o) if o else (404, {"code": 40410000, "message": "order not found"})
        if path == "/v2/stocks/bars":
            end = bar_window(q)[1] if "end" in q else self.now
            refusal = self.plan.refusal(q.get("feed", "sip"), end, self.now)
            if refusal is not None:
                self.refused.append((q.get("feed", "sip"), str(end)))
                return 403, refusal
            if q.get("timeframe") == "1Min" != self.timeframe:  # the data plan's probe
                return 200, {"bars": {}, "next_page_token": None}
            return 200, self.bar_page(q)
        return 404, {"code": 40410000, "message": "not found"}

    def next_at(self, hour: int, minute: int) -> pd.Timestamp:
        """The next time of day ``hour:minute`` in New York after the clock (weekends
        and holidays are not skipped: the tests never reach them)."""
        local = self.now.tz_convert(TZ)
        when = local.normalize() + pd.Timedelta(hours=hour, minutes=minute)
        return when if when > local else when + pd.Timedelta(days=1)

    def post(self, body: dict) -> tuple[int, object]:
        with self.lock:
            self.posts.append(body)
            status = self.order_status.get(body["symbol"], 200)
            if status != 200:
                return status, {"code": 40000000 + status, "message": "too many requests."}
            if body["symbol"] in self.reject:
                return 403, {"code": 40310000, "message": self.reject[body["symbol"]]}
            if any(o["client_order_id"] == body["client_order_id"] for o in self.orders.values()):
                self.duplicates.append(body["client_order_id"])
                return 422, {"code": 40010001, "message": "client_order_id must be unique"}
            oid = str(uuid.uuid4())
            order = {
                "id": oid,
                "client_order_id": body["client_order_id"],
                "symbol": body["symbol"],
                "qty": str(body["qty"]),
                "side": body["side"],
                "type": body["type"],
                "time_in_force": body["time_in_force"],
                "status": "accepted",
                "filled_qty": "0",
                "filled_avg_price": None,
                "submitted_at": self.now.isoformat(),
            }
            self.orders[oid] = order
            return 200, order

    def last_close(self, symbol: str) -> float:
        if symbol not in self.bars:
            return 10.0  # a holding the test put in the account by hand
        df = self.bars[symbol]
        t = pd.to_datetime(df["t"], utc=True)
        return float(df[t <= self.now]["c"].iloc[-1])

    def bar_page(self, q: dict) -> dict:
        assert q["timeframe"] == self.timeframe, q
        self.feeds.append(q.get("feed", ""))
        lo, hi = bar_window(q)
        out: dict[str, list] = {}
        for sym in q["symbols"].split(","):
            df = self.bars.get(sym)
            if df is None:
                continue
            t = pd.to_datetime(df["t"], utc=True)
            rows = df[(t >= lo) & (t <= hi) & (t <= self.now)]
            out[sym] = [{k: plain(v) for k, v in r.items()} for r in rows.to_dict("records")]
        return {"bars": out, "next_page_token": None}
