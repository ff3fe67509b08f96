"""A JSON API on a loopback port, served from a daemon thread: what the Alpaca replay
servers of the tests are built on, with faults a test injects (:class:`Fault`: an HTTP
error instead of the answer, an answer lost after the work was done) and Alpaca's data
plans (:class:`DataPlan`: :data:`FREE` serves SIP bars 15 minutes late and refuses a
request of more recent ones with HTTP 403, :data:`PAID` serves them in real time)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pandas as pd


@dataclass
class Fault:
    """What the server does to the requests that match ``method`` and the ``path`` prefix:
    answer HTTP ``status`` instead (the request is not served), or with ``taken`` serve it
    first (a 5xx after the work was done), or with ``drop`` serve it and close the
    connection without an answer. The first ``after`` matching requests pass; then it hits
    ``times`` of them (None: every one, until the test removes it)."""

    method: str
    path: str
    status: int | None = None
    taken: bool = False
    drop: bool = False
    times: int | None = 1
    after: int = 0
    hits: int = 0


@dataclass(frozen=True)
class DataPlan:
    """An Alpaca market data plan: how late it serves each feed's bars. A bars request
    whose ``end`` lies later than that before the server's clock is refused with HTTP 403,
    as Alpaca refuses it (the free plan: "subscription does not permit querying recent
    SIP data")."""

    name: str
    sip_delay: pd.Timedelta
    iex_delay: pd.Timedelta = pd.Timedelta(0)

    def refusal(self, feed: str, end: pd.Timestamp, now: pd.Timestamp) -> dict | None:
        """The 403 body for a ``feed`` request ending at ``end`` at ``now`` (None: served)."""
        delay = self.sip_delay if feed == "sip" else self.iex_delay
        if delay <= pd.Timedelta(0) or end <= now - delay:
            return None  # a real-time feed serves what exists, whatever the request's end
        what = f"subscription does not permit querying recent {feed.upper()} data"
        return {"code": 42210000, "message": what}


#: Alpaca's free plan (Basic): SIP bars 15 minutes late, IEX bars in real time.
FREE = DataPlan("free", pd.Timedelta(minutes=15))
#: A paid plan (Algo Trader Plus): every feed in real time.
PAID = DataPlan("paid", pd.Timedelta(0))
PLANS = {p.name: p for p in (FREE, PAID)}


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet request handler that answers JSON."""

    def log_message(self, *args) -> None:
        pass

    def query(self) -> tuple[str, dict[str, str]]:
        """The request's path and its query (first value of each key)."""
        u = urlparse(self.path)
        return u.path, {k: v[0] for k, v in parse_qs(u.query).items()}

    def send_json(self, status: int, obj=None, headers: dict[str, str] | None = None) -> None:
        """Status, headers and ``obj`` as the JSON body (empty for None)."""
        body = b"" if obj is None else json.dumps(obj).encode()
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def answer(self, fault: Fault | None, serve) -> None:
        """``serve()`` → (status, obj) sent as JSON, unless ``fault`` says otherwise."""
        if fault is not None and fault.status is not None and not fault.taken:
            return self.send_json(fault.status, {"code": 0, "message": "injected fault"})
        status, obj = serve()
        if fault is not None and fault.drop:
            self.close_connection = True  # served, and the answer is lost with the connection
            return None
        if fault is not None and fault.status is not None:
            return self.send_json(fault.status, {"code": 0, "message": "injected fault"})
        return self.send_json(status, obj)


class LoopbackServer:
    """Serves ``handler`` on 127.0.0.1 at a free port (:attr:`url`) until :meth:`close`.
    :attr:`release` is set on close, so a request a test holds open returns."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.faults: list[Fault] = []
        self.fault_lock = threading.Lock()
        self.release = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def inject(self, method: str, path: str, **how) -> Fault:
        """Add a :class:`Fault` (its fields as keywords) and return it."""
        fault = Fault(method, path, **how)
        with self.fault_lock:
            self.faults.append(fault)
        return fault

    def fault_for(self, method: str, path: str) -> Fault | None:
        """The fault that hits this request, if any (counted)."""
        with self.fault_lock:
            for f in self.faults:
                if f.method != method or not path.startswith(f.path):
                    continue
                f.hits += 1
                if f.hits <= f.after:
                    continue
                if f.times is not None and f.hits > f.after + f.times:
                    continue
                return f
        return None

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def bar_window(q: dict[str, str]) -> tuple[pd.Timestamp, pd.Timestamp]:
    """A bars request's ``start`` and ``end`` as UTC timestamps (naive means UTC)."""
    lo, hi = pd.Timestamp(q["start"]), pd.Timestamp(q["end"])
    lo = lo.tz_localize("UTC") if lo.tzinfo is None else lo
    hi = hi.tz_localize("UTC") if hi.tzinfo is None else hi
    return lo, hi


def plain(value):
    """A numpy scalar as the Python number JSON writes (anything else as it is)."""
    return value.item() if hasattr(value, "item") else value
