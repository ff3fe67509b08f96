"""``PaperTrader``: a run's agent trading an Alpaca paper account, one poll at a time.

A poll (:meth:`PaperTrader.step`): read the clock; update the orders still open (fills,
rejections; a partial fill still open when a new decision comes is cancelled); if a new
complete bar is a decision bar of the strategy, fetch the live window (the dataset's own
feed by default), check that its last bar is fresh, read the account, decide
(:func:`finpod.paper.decide.decide`) and send the orders, sells first.

The data plan is known at start (``plan``, :data:`~finpod.paper.live.PLANS`; ``auto``
asks the data API whether it serves real-time SIP bars): on the free plan an agent of
SIP bars decides on SIP bars complete 15 minutes before the clock, the delay said in the
start line, in each decision line and in the journal; a strategy that decides more often
than the delay is refused at start in one line (:func:`~finpod.paper.live.delay_refusal`).
A decision never meets a price or an account figure that is not a number (NaN, inf): it
is skipped in one line and taken at a later poll that finds numbers. Daily agents
decide after the session close (their market orders fill at the next open, as the env's
do); intraday agents while the market is open, after each bar.

Nothing is sent twice: each order's client order id is derived from (run, decision bar,
symbol). Before an order is sent it is written to the state as ``"pending"``; an order
goes out once (the HTTP layer never re-sends it), and a lost answer (dropped connection,
timeout, HTTP 5xx or 429) or a "client_order_id must be unique" means: look the order up
by its id and record what the account says. Every start, and every poll, looks each
pending id up before deciding anything.

The journal (:mod:`finpod.paper.state`) is keyed, so a kill or Ctrl-C at any point
leaves one ``decision`` and one ``fills`` record per decision: the decision is written
before its first order is sent, and written again (in place) if a restart decides on the
same bar.

Transient failures (HTTP 5xx or 429 after the retries, a lost connection, also at start)
end the poll with one line, and the next poll comes after a backoff (the poll interval,
doubling, at most :data:`MAX_RETRY_WAIT_S`); :data:`MAX_FAILED_POLLS` failed polls in a
row stop the trader with one line, its state ready to resume. Keys, configuration and
any other error stop it at once, the state saved; so does a live bar on or before the end
of the run's validation split (the agent trained or was selected on that day's bars:
:func:`~finpod.paper.decide.in_sample_refusal`).

One line and a safe state each (the next poll starts from the account): market closed,
a stale last bar, a halted symbol, a rejected order, a partial fill, a transient failure.
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from finpod.data.user_features import MissingUserValues
from finpod.errors import FinpodError
from finpod.paper.broker import Broker, transient
from finpod.paper.decide import (
    RunAgent,
    decide,
    in_sample_refusal,
    is_decision_bar,
    load_run_agent,
)
from finpod.paper.live import (
    DEFAULT_LOOKBACK_SESSIONS,
    PLANS,
    bar_end,
    carry_last_trades,
    delay_refusal,
    fetch_window,
    plan_delay,
    sip_in_real_time,
    stale_line,
    stale_tickers,
    staleness,
    window_market,
)
from finpod.paper.orders import MIN_ORDER_SHARES, OrderDesk
from finpod.paper.state import STATE_FILE, PaperState, client_order_id, load_state, paper_dir

#: Decimals of a fractional order's quantity.
QTY_DECIMALS = 6
#: Polls in a row that may fail with a transient error (HTTP 5xx or 429 after the
#: request's own retries, a lost connection) before the trader stops; start it again to
#: resume.
MAX_FAILED_POLLS = 10
#: Longest wait after a failed poll, seconds (the poll interval, doubling per failure).
MAX_RETRY_WAIT_S = 300.0


def _ts(text: Any) -> pd.Timestamp:
    ts = pd.Timestamp(text)
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts


def _number(text: Any) -> float | None:
    """``text`` as a finite float; None when it is missing or not a finite number."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def not_a_number(
    market, cash: float | None, shares: torch.Tensor, tickers: list[str]
) -> str | None:
    """Why a decision cannot be taken on these numbers (None when it can): the account's
    cash, a position, or the close of a tradable ticker at the window's last bar is not a
    finite number (a close must also be > 0)."""
    if cash is None:
        return "the account's cash is not a number"
    bad = [t for t, q in zip(tickers, shares.tolist(), strict=True) if not math.isfinite(q)]
    if bad:
        return f"the account's position in {', '.join(bad)} is not a number"
    close = market.close[-1].to(torch.float64)
    ok = market.tradable[-1].cpu()
    wrong = ~torch.isfinite(close) | (close <= 0)
    bad = [t for t, w, o in zip(tickers, wrong.tolist(), ok.tolist(), strict=True) if w and o]
    if bad:
        return f"the close of {', '.join(bad)} at the last bar is not a positive number"
    return None


def not_a_number_decision(made) -> str | None:
    """Why a decision's numbers cannot be traded (None when they can)."""
    if not math.isfinite(made.value):
        return "the account's value is not a number"
    for name in ("observation", "trade", "intended"):
        if not bool(torch.isfinite(getattr(made, name)).all()):
            return f"the agent's {name} holds a value that is not a number"
    return None


class PaperTrader(OrderDesk):
    """A run's agent on the paper account (module docstring). ``log`` receives every line."""

    def __init__(
        self,
        run_dir: str | Path,
        agent: str = "selected",
        *,
        data: str | Path | None = None,
        dry_run: bool = False,
        feed: str | None = None,
        lookback_sessions: int = DEFAULT_LOOKBACK_SESSIONS,
        log: Callable[[str], None] = print,
        feature_file: str | Path | None = None,
        plan: str = "auto",
    ) -> None:
        if plan not in PLANS:
            raise FinpodError(f"unknown data plan {plan!r}", f"use one of {', '.join(PLANS)}")
        self.run_dir = Path(run_dir)
        self.agent: RunAgent = load_run_agent(self.run_dir, agent, data, feature_file)
        self.dry_run = dry_run
        self.feed = feed or self.agent.feed
        self.plan_asked = plan
        self.plan = self.plan_asked
        """``free`` or ``paid`` once :meth:`start` knows it (``auto`` until then)."""
        self._sip_live: bool | None = None  # the data API's answer, asked once
        self.delay = pd.Timedelta(0)
        """How late the live bars are: :func:`~finpod.paper.live.plan_delay`."""
        self.lookback = int(lookback_sessions)
        self._log = log
        self.broker = Broker()
        self.state: PaperState = load_state(self.run_dir, self.agent.run_id, self.agent.name)
        self.stopping = False
        self.sent: list[str] = []  # client order ids this process submitted
        self._said: str | None = None

    # ------------------------------------------------------------------------- start
    def start(self) -> None:
        """Read the account, set the starting value on a first start, settle orders left
        unknown, and reconcile the positions with the last record (one line per difference)."""
        account = self.broker.account()
        if not self.state.start_value:
            equity = _number(account.get("equity") or account.get("cash"))
            if equity is None or equity <= 0:
                raise FinpodError(
                    f"the paper account's equity is {account.get('equity')!r}, not a positive "
                    "number: nothing can be sized on it",
                    "check the account on alpaca.markets (Paper Trading), then start again",
                )
            self.state.start_value = equity
        mode = self._data_plan()
        self.log(
            f"paper trading run {self.agent.run_id}, agent {self.agent.name} "
            f"({', '.join(self.agent.pod_ids)}), {self.agent.bar} bars, "
            f"{len(self.agent.tickers)} tickers, {mode}"
            f"{', dry run: nothing is sent' if self.dry_run else ''}"
        )
        if self.agent.trained_unknown:
            self.log(
                f"run {self.agent.run_id}'s validation end is not known "
                f"({self.agent.trained_unknown}): finpod cannot check that the live bars "
                "come after the bars the agent was trained and selected on"
            )
        if self.feed != self.agent.feed:
            self.log(
                f"live bars from the {self.feed} feed, the dataset's are {self.agent.feed}: "
                f"the agent decides on other bars than it trained on (leave --feed out to "
                f"use {self.agent.feed})"
            )
        self.refresh_orders(new_decision=False)
        held = self.broker.positions()
        tickers = set(self.agent.tickers)
        expected = self.expected_positions()
        for sym in sorted(tickers & (set(held) | set(expected))):
            have, known = held.get(sym, 0.0), expected.get(sym, 0.0)
            if abs(have - known) > MIN_ORDER_SHARES:
                self.log(
                    f"reconcile: {sym}: the account holds {have:g} shares, finpod's record "
                    f"{known:g} (the account's are used)"
                )
        others = sorted(set(held) - tickers)
        if others:
            self.log(
                f"reconcile: the account also holds {', '.join(others)}: not this run's, left alone"
            )
        self.positions_seen(held)
        self._save()

    def _data_plan(self) -> str:
        """Settle the data plan and the bars' delay (asking the data API under ``auto``);
        the start line's words for them. A strategy the delay does not fit is refused."""
        auto = self.plan_asked == "auto"
        if self.feed != "sip":
            self.delay = pd.Timedelta(0)
            return f"{self.feed} bars in real time (on every plan)"
        if auto and self.agent.bar == "1d":
            self.plan = "free"  # decided after the close: either plan serves the day's bar
        elif auto:
            if self._sip_live is None:
                now = _ts(self.broker.clock()["timestamp"])
                self._sip_live = sip_in_real_time(self.agent.tickers[0], now)
            self.plan = "paid" if self._sip_live else "free"
        self.delay = plan_delay(self.feed, self.plan)
        lag = f"{self.delay.total_seconds() / 60:g} min"
        if self.plan == "paid":
            how = "real-time SIP served: a paid plan" if auto else "--plan paid"
            return f"sip bars in real time ({how})"
        if auto and self.agent.bar == "1d":
            how = "the free plan's delay; a daily agent decides after the close"
        elif auto:
            how = "real-time SIP refused with HTTP 403: the free plan"
        else:
            how = "--plan free"
        configs = [m.config for m in self.agent.policy] if self.agent.ensemble else []
        for config in [self.agent.config, *configs]:
            why = delay_refusal(config, self.agent.bar, self.feed, self.delay)
            if why is not None:
                raise FinpodError(
                    f"no paper trading on the free plan's sip bars ({how}): {why}",
                    "trade a strategy that decides every 15 min or less often, or a dataset "
                    "built with --feed iex (real-time on every plan), or pass --plan paid "
                    "if your plan serves real-time SIP bars",
                )
        return f"sip bars {lag} late ({how})"

    # ------------------------------------------------------------------------- steps
    def step(self) -> str:
        """One poll; returns what happened: ``"closed"``, ``"open"`` (a daily agent waits
        for the close), ``"waiting"`` (no new decision bar), ``"stale"`` (the live bars
        are late: no decision), ``"skipped"`` (a price or the account is not a number:
        no decision), ``"decided"`` or ``"stopped"``."""
        clock = self.broker.clock()
        now = _ts(clock["timestamp"])
        daily = self.agent.bar == "1d"
        if not daily and not clock.get("is_open"):
            self.say_once(f"market closed; next open {clock.get('next_open')}")
            return "closed"
        if daily and clock.get("is_open"):
            self.say_once(
                f"market open: a daily agent decides after the close ({clock.get('next_close')})"
            )
            return "open"
        if not self.dry_run:
            for cid in self.state.pending_orders():  # before anything is decided
                self.resolve(cid)
        try:
            bars = fetch_window(
                self.agent.tickers,
                self.agent.bar,
                now,
                feed=self.feed,
                lookback_sessions=self.lookback,
                calendar=self.agent.calendar,
                cache_dir=paper_dir(self.run_dir) / "cache",
                delay=self.delay,
                write_cache=not self.dry_run,
            )
        except FinpodError as err:
            if getattr(err, "status", None) == 403 and self.feed == "sip" and not self.delay:
                raise FinpodError(
                    err.message,
                    "the keys' data plan does not serve real-time SIP bars: leave --plan out "
                    "(auto) or pass --plan free to decide on SIP bars 15 minutes late",
                ) from None
            raise
        try:
            market = window_market(
                bars,
                self.agent.tickers,
                self.agent.bar,
                self.agent.calendar,
                torch.device("cpu"),
                self.agent.feature_file,
                self.agent.user_features,
            )
        except MissingUserValues as err:
            if not err.last_bar_only:
                raise
            self.say_once(f"{err.message}: waiting for the feature file's row of that bar")
            return "waiting"
        carried: dict[str, float] = {}
        if self.feed == "iex" and self.agent.feed == "sip" and self.agent.bar != "1d":
            market, carried = carry_last_trades(market)
        last = market.timestamps[-1]
        refused = in_sample_refusal(self.agent, last)
        if refused is not None:
            raise refused
        done = self.state.last_decision
        if done is not None and last <= pd.Timestamp(done):
            return "waiting"
        late = staleness(last, now - self.delay, self.agent.bar, self.agent.calendar)
        if late is not None:
            self.say_once(stale_line(self.feed, self.agent.bar, self.delay, last, now, late))
            return "stale"
        said, self._said = self._said, None
        if not is_decision_bar(self.agent, market):
            return "waiting"
        self.refresh_orders(new_decision=True)
        self._journal_fills(market, before=pd.Timestamp(last))
        for sym in stale_tickers(market):
            self.log(f"{sym}: no bar at {last} (halted or no trade): not traded at this bar")
        for sym, price in carried.items():
            self.log(
                f"{sym}: no iex trade in the bar at {last}: its last trade's price {price:g} "
                "carried over (an agent of sip bars sees a bar there)"
            )
        account = self.broker.account()
        held = self.broker.positions()
        shares = torch.tensor([held.get(s, 0.0) for s in self.agent.tickers], dtype=torch.float64)
        cash = _number(account.get("cash"))
        why = not_a_number(market, cash, shares, self.agent.tickers)
        made = None
        if why is None:
            made = decide(self.agent, market, cash, shares, self.state.start_value)
            why = not_a_number_decision(made)
        if why is not None:
            self._said = said  # a bar skipped poll after poll is said once
            self.say_once(
                f"no decision at {last}: {why} (nothing is traded on it; a later poll decides "
                "when the numbers are back)"
            )
            return "skipped"
        if not self.dry_run:
            self.positions_seen(held)
        ended = bar_end(pd.DatetimeIndex([last]), self.agent.bar)[0]
        age = (now - ended).total_seconds() / 60
        lag = self.delay.total_seconds() / 60
        orders = []
        for i, sym in enumerate(self.agent.tickers):
            qty = round(float(made.trade[i]), QTY_DECIMALS)
            if abs(qty) >= MIN_ORDER_SHARES:
                orders.append((qty, sym))
        orders.sort(key=lambda o: o[0] > 0)  # sells first: their proceeds fund the buys
        bars_said = f"{lag:g} min late" if lag else "in real time"
        self.log(
            f"decision at {last} on {self.feed} bars {bars_said} (the bar ended {age:.1f} min "
            f"before the clock): value {made.value:,.2f}, {len(orders)} order(s); intended "
            + ", ".join(
                f"{s} {w:.3f}"
                for s, w in zip(self.agent.tickers, made.intended.tolist(), strict=True)
            )
        )
        planned = {client_order_id(self.agent.run_id, last, s): (q, s) for q, s in orders}
        earlier = {  # orders of an interrupted try at this bar that reached the account
            c: (o["qty"], o["symbol"])
            for c, o in self.state.orders.items()
            if o.get("decision") == str(last) and c not in planned
        }
        if not self.dry_run:
            self._journal(
                {
                    "kind": "decision",
                    "decision": str(last),
                    "time": str(now),
                    "feed": self.feed,
                    "carried": carried,
                    "plan": self.plan,
                    "delay_min": lag,
                    "bar_end": str(ended),
                    "bar_age_min": round(age, 3),
                    "account_value": made.value,
                    "cash": cash,
                    "held_weights": dict(zip(self.agent.tickers, made.held.tolist(), strict=True)),
                    "intended_weights": dict(
                        zip(self.agent.tickers, made.intended.tolist(), strict=True)
                    ),
                    "orders": [
                        {"symbol": s, "qty": q, "client_order_id": c}
                        for c, (q, s) in {**earlier, **planned}.items()
                    ],
                }
            )
        for cid, (qty, sym) in planned.items():
            if self.stopping:
                self.log("stopping: the orders not yet sent are left for the next start")
                return "stopped"
            self.send(cid, sym, qty, last)
        self.state.last_decision = str(last)
        self._save()
        return "decided"

    # -------------------------------------------------------------------------- loop
    def run(
        self,
        poll_s: float,
        max_decisions: int | None = None,
        once: bool = False,
        max_failed_polls: int = MAX_FAILED_POLLS,
    ) -> int:
        """Poll until Ctrl-C (or ``max_decisions`` decisions, or one poll with ``once``).

        Ctrl-C lets the request in flight finish and its answer be recorded, then stops:
        returns 0. A transient failure (module docstring) ends the poll with one line and
        the next poll comes after a backoff; ``max_failed_polls`` in a row raise
        :class:`FinpodError`, the state saved (``once``: the first error is raised)."""
        previous = signal.getsignal(signal.SIGINT)

        def on_sigint(signum, frame) -> None:
            self.stopping = True

        signal.signal(signal.SIGINT, on_sigint)
        decisions = failed = 0
        started = False
        try:
            while not self.stopping:
                wait = poll_s
                try:
                    if not started:
                        self.start()
                        started = True
                    what = self.step()
                    failed = 0
                except FinpodError as err:
                    self._save()
                    if once or not transient(err):
                        raise
                    failed += 1
                    if failed >= max_failed_polls:
                        raise FinpodError(
                            f"{failed} polls in a row failed, the last: {err.message}",
                            f"every order is recorded in {paper_dir(self.run_dir) / STATE_FILE}:"
                            " start finpod paper again to resume",
                        ) from None
                    wait = min(MAX_RETRY_WAIT_S, poll_s * 2 ** (failed - 1))
                    self.log(
                        f"{err.message}; poll failed ({failed}/{max_failed_polls}), "
                        f"trying again in {wait:g} s"
                    )
                    what = "error"
                decisions += what == "decided"
                if once or (max_decisions is not None and decisions >= max_decisions):
                    break
                end = time.monotonic() + wait
                while not self.stopping and time.monotonic() < end:
                    time.sleep(min(0.2, max(0.0, end - time.monotonic())))
        finally:
            signal.signal(signal.SIGINT, previous)
        if self.stopping:
            self._save()
            self.log(
                f"stopped on Ctrl-C: every order sent is recorded in "
                f"{paper_dir(self.run_dir) / STATE_FILE}; start again to continue"
            )
        return 0
