"""A JSON API on a loopback port, served from a daemon thread: what the Alpaca replay
servers of the tests are built on."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pandas as pd


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


class LoopbackServer:
    """Serves ``handler`` on 127.0.0.1 at a free port (:attr:`url`) until :meth:`close`.
    :attr:`release` is set on close, so a request a test holds open returns."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.release = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

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
