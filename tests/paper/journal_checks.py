"""What the paper-trading fault tests check after each run: the journal is the account."""

from __future__ import annotations

import json
from pathlib import Path


def journal(run_dir: Path) -> list[dict]:
    path = run_dir / "paper" / "journal.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []


def assert_journal_is_the_account(run_dir: Path, server, resent: int = 0) -> None:
    """The journal's ``order`` records are the account's orders (id, symbol, signed qty,
    status, filled shares); one ``decision`` and at most one ``fills`` per decision; every
    order of a ``fills`` record as the account has it; ``resent`` POSTs refused as
    duplicates (none: nothing is sent twice)."""
    records = journal(run_dir)
    side = {"buy": 1.0, "sell": -1.0}
    account = {
        o["client_order_id"]: (
            o["symbol"],
            round(float(o["qty"]) * side[o["side"]], 6),
            o["status"],
            float(o["filled_qty"]),
        )
        for o in server.orders.values()
    }
    journaled = {
        r["client_order_id"]: (r["symbol"], round(r["qty"], 6), r["status"], r["filled_qty"])
        for r in records
        if r["kind"] == "order"
    }
    assert journaled == account
    for kind in ("decision", "fills"):
        keys = [r["decision"] for r in records if r["kind"] == kind]
        assert len(keys) == len(set(keys)), (kind, keys)
    for fills in (r for r in records if r["kind"] == "fills"):
        for o in fills["orders"]:
            if o["status"] != "rejected":
                assert account[o["client_order_id"]][2] == o["status"]
    assert len(server.duplicates) == resent
