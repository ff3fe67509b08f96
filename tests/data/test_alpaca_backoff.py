"""The Alpaca HTTP session's retries, waits recorded instead of slept: HTTP 429/5xx back off
exponentially (the first wait, then doubling, at most ``MAX_WAIT_S``), and an answer that
does not come within the read timeout is asked for again with the same backoff."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from loopback import JsonHandler, LoopbackServer

from finpod.data.sources import alpaca_client
from finpod.data.sources.alpaca_client import MAX_WAIT_S, TRIES, paced_session
from finpod.errors import FinpodError


class Scripted(LoopbackServer):
    """Answers each request with the next step of ``script``: an HTTP status, or
    ``"silent"`` (the answer comes after ``hold_s``, past the client's read timeout)."""

    def __init__(self, script: list, hold_s: float = 1.0) -> None:
        self.script = list(script)
        self.hold_s = hold_s
        self.seen = 0
        server = self

        class Handler(JsonHandler):
            def do_GET(self):
                step = server.script.pop(0) if server.script else 200
                server.seen += 1
                if step == "silent":
                    server.release.wait(server.hold_s)
                    step = 200
                self.send_json(step, {"ok": step == 200})

        super().__init__(Handler)


@pytest.fixture
def sleeps(monkeypatch) -> list[float]:
    """Every wait the session takes, in order (nothing is slept)."""
    waits: list[float] = []
    monkeypatch.setattr(
        alpaca_client, "time", SimpleNamespace(monotonic=time.monotonic, sleep=waits.append)
    )
    return waits


def _get(server: Scripted, backoff: float = 1.0, read_timeout: float = 30.0):
    counter = {"requests": 0, "retries": 0, "waited_s": 0.0}
    session = paced_session(600, backoff, counter, lambda line: None, (server.url, "TEST_URL"))
    return session.request("GET", server.url + "/v2/x", timeout=(2.0, read_timeout)), counter


def test_429_and_5xx_backoff_doubles_up_to_the_cap(sleeps):
    server = Scripted([429, 503, 502, 504, 429])
    try:
        resp, counter = _get(server, backoff=5.0)
    finally:
        server.close()
    assert resp.status_code == 200 and server.seen == 6
    # doubling, not growing by a fixed step: 5, 10, 20, 40, then the cap (80 → 60)
    assert sleeps == [5.0, 10.0, 20.0, 40.0, MAX_WAIT_S]
    assert counter["retries"] == 5


def test_a_status_that_never_clears_is_answered_after_the_tries(sleeps):
    server = Scripted([503] * (TRIES + 3))
    try:
        resp, _ = _get(server, backoff=1.0)
    finally:
        server.close()
    assert resp.status_code == 503 and server.seen == TRIES
    assert sleeps == [2.0**k for k in range(TRIES - 1)]


def test_an_answer_that_never_comes_is_asked_for_again_with_backoff(sleeps):
    server = Scripted(["silent", "silent"], hold_s=2.0)
    try:
        resp, counter = _get(server, backoff=3.0, read_timeout=0.2)
    finally:
        server.close()
    assert resp.status_code == 200 and server.seen == 3
    assert sleeps == [3.0, 6.0]
    assert counter["requests"] == 3


def test_an_answer_that_never_comes_in_any_try_is_one_line(sleeps):
    server = Scripted(["silent"] * TRIES, hold_s=2.0)
    try:
        with pytest.raises(FinpodError) as err:
            _get(server, backoff=1.0, read_timeout=0.1)
    finally:
        server.close()
    assert f"gave no answer in {TRIES} tries" in str(err.value)
    assert "\n" not in str(err.value)
    assert server.seen == TRIES and len(sleeps) == TRIES - 1
