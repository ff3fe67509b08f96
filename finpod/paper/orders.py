"""What the paper trader does with the account's orders (:class:`OrderDesk`, the base of
:class:`~finpod.paper.trader.PaperTrader`): send each order once, written to the state
as pending before it goes out; settle a lost answer by looking the order up by its
client order id; follow the orders still open; and write the keyed journal records
(:mod:`finpod.paper.state`) of orders and fills. The trader's module docstring tells
the whole rule."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from finpod.paper.broker import Broker, BrokerError
from finpod.paper.decide import RunAgent
from finpod.paper.state import (
    PENDING,
    PaperState,
    decisions_without_fills,
    fills_record,
    paper_dir,
    save_state,
    write_journal,
)

#: Shares below this are not sent (fractional orders: Alpaca's smallest is 1e-9 share).
MIN_ORDER_SHARES = 1e-6


class OrderDesk:
    """The account's orders as the trader keeps them; the trader sets the attributes."""

    run_dir: Path
    agent: RunAgent
    broker: Broker
    state: PaperState
    dry_run: bool
    sent: list[str]
    _log: Callable[[str], None]
    _said: str | None

    # ------------------------------------------------------------------------ logging
    def log(self, line: str) -> None:
        self._log(line)
        if not self.dry_run:
            path = paper_dir(self.run_dir) / "paper.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            stamp = pd.Timestamp.now(tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ")
            with path.open("a", encoding="utf-8") as fh:  # an append-only log, like train.log
                fh.write(f"{stamp} {line}\n")

    def say_once(self, line: str) -> None:
        """Log ``line`` unless it is what the last poll said (a closed market is said once)."""
        if line != self._said:
            self.log(line)
        self._said = line

    def _save(self) -> None:
        if not self.dry_run:
            save_state(self.run_dir, self.state)

    def expected_positions(self) -> dict[str, float]:
        """Shares per symbol the record says the account holds: those seen last, plus
        what the recorded orders filled since."""
        out = dict(self.state.positions)
        for o in self.state.orders.values():
            extra = float(o.get("filled_qty") or 0.0) - float(o.get("counted_qty") or 0.0)
            if extra:
                out[o["symbol"]] = out.get(o["symbol"], 0.0) + (extra if o["qty"] > 0 else -extra)
        return out

    def positions_seen(self, held: dict[str, float]) -> None:
        """Record ``held`` as the account's shares: every recorded fill is in them."""
        self.state.positions = {s: q for s, q in held.items() if s in set(self.agent.tickers)}
        for o in self.state.orders.values():
            o["counted_qty"] = float(o.get("filled_qty") or 0.0)

    # ------------------------------------------------------------------------ orders
    def _record(self, cid: str, order: dict[str, Any]) -> dict[str, Any]:
        """Record what the account says of order ``cid``: in the state and the journal."""
        rec = self.state.orders.setdefault(cid, {})
        rec.update(
            id=order.get("id"),
            status=str(order.get("status")),
            filled_qty=float(order.get("filled_qty") or 0.0),
            filled_avg_price=float(order.get("filled_avg_price") or 0.0),
        )
        self._save()
        if not self.dry_run:
            self._journal(
                {
                    "kind": "order",
                    "client_order_id": cid,
                    **{k: rec.get(k) for k in ("decision", "symbol", "qty")},
                    **{k: rec[k] for k in ("id", "status", "filled_qty", "filled_avg_price")},
                }
            )
        return rec

    def resolve(self, cid: str, why: str | None = None) -> dict[str, Any] | None:
        """Look a pending order up by its client order id: its record, or None (and it is
        forgotten) when the account never received it. ``why``: the failure that left it
        pending, said in the line of an order found (the caller reports one not found)."""
        found = self.broker.order_by_client_id(cid)
        if found is None:
            if why is None:
                self.log(f"order {cid} never reached the account: it may be sent again")
            del self.state.orders[cid]
            self._save()
            return None
        rec = self._record(cid, found)
        self.log(
            f"{why + ': ' if why else ''}order {cid} is in the account ({rec['status']}): "
            "recorded, not sent again"
        )
        return rec

    def refresh_orders(self, new_decision: bool) -> None:
        """Update every order that may still change, pending ones first (looked up by
        their client order id); with ``new_decision``, cancel what is left of a partially
        filled one (the new decision starts from what was filled)."""
        for cid in self.state.pending_orders():
            if not self.dry_run:
                self.resolve(cid)
        for cid in self.state.open_orders():
            rec = self.state.orders[cid]
            if rec.get("status") in PENDING:
                continue  # a dry run looks nothing up on the account's behalf
            before = rec.get("status"), rec.get("filled_qty")
            order = self.broker.order(str(rec["id"]))
            if (str(order.get("status")), float(order.get("filled_qty") or 0.0)) != before:
                rec = self._record(cid, order)
            side, qty = ("buy" if rec["qty"] > 0 else "sell"), abs(rec["qty"])
            what = f"{side} {qty:g} {rec['symbol']}"
            if rec["status"] == "rejected":
                self.log(f"order rejected by the account: {what} ({cid})")
            elif rec["status"] == "filled":
                self.log(f"filled: {what} at {rec['filled_avg_price']:g}")
            elif rec["status"] in ("canceled", "expired"):
                self.log(f"{rec['status']}: {what}, {rec['filled_qty']:g} filled")
            elif rec["status"] == "partially_filled" and new_decision and self.dry_run:
                self.log(f"dry run: would cancel the rest of {what} ({rec['filled_qty']:g} filled)")
            elif rec["status"] == "partially_filled" and new_decision:
                self.broker.cancel(str(rec["id"]))
                self._record(cid, self.broker.order(str(rec["id"])))
                self.log(
                    f"partial fill: {what}: {rec['filled_qty']:g} filled at "
                    f"{rec['filled_avg_price']:g}; the rest is cancelled before the next decision"
                )

    def send(self, cid: str, symbol: str, qty: float, decision: pd.Timestamp) -> None:
        """Send one order once: not when the state or the account already knows its id;
        written to the state as pending before it goes out; a lost answer is settled by
        looking the order up (module docstring)."""
        side = "buy" if qty > 0 else "sell"
        what = f"{side} {abs(qty):g} {symbol}"
        known = self.state.orders.get(cid)
        if known is not None and known.get("status") not in PENDING:
            return
        if self.dry_run:
            self.log(f"dry run: would {what} ({cid})")
            return
        fields = {"decision": str(decision), "symbol": symbol, "qty": qty}
        found = self.broker.order_by_client_id(cid)
        if found is not None:
            self.state.orders[cid] = dict(fields)
            self._record(cid, found)
            self.log(f"order {cid} ({what}) is already in the account: not sent again")
            return
        self.state.orders[cid] = dict(fields, status="pending")
        self._save()  # before it goes out: a kill from here on leaves its id to look up
        try:
            order = self.broker.submit(symbol, qty, cid)
        except BrokerError as err:
            if err.kind == "rejected":
                self.state.orders[cid].update(status="rejected", reason=err.message)
                self._save()
                self.log(f"order rejected: {what}: {err.message}")
                return
            if err.kind == "auth":
                raise
            if self.resolve(cid, why=err.message) is not None:
                return
            raise BrokerError(  # it never arrived: the poll fails, the next one decides again
                f"{err.message}; the account never received it",
                "the next poll decides again and sends it once",
                "connection" if err.kind == "duplicate" else err.kind,
                err.status,
            ) from None
        self._record(cid, order)
        self.sent.append(cid)
        self.log(f"sent: {what} ({cid}, {self.state.orders[cid]['status']})")

    def _journal(self, record: dict[str, Any]) -> None:
        write_journal(self.run_dir, record)

    def _journal_fills(self, market, before: pd.Timestamp) -> None:
        """The ``"fills"`` record (:func:`fills_record`) of every decision before
        ``before`` that has none yet (one, unless a decision was interrupted)."""
        if self.dry_run:
            return
        todo = decisions_without_fills(self.run_dir, before)
        if not todo:
            return
        cash = float(self.broker.account()["cash"])
        held = self.broker.positions()
        close = market.close[-1].to(torch.float64).tolist()
        for decision in todo:
            self._journal(fills_record(self.state, self.agent.tickers, held, cash, close, decision))
