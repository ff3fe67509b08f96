"""What ``finpod paper`` keeps in ``RUN/paper/``, each file written atomically.

- ``state.json`` (:class:`PaperState`): the last decision bar done, every order (by
  client order id, with its last known status and fills), the positions seen after the
  last step. An order is written there as ``"pending"`` *before* it is sent, and again
  with the account's answer, so a killed trader never leaves an order that it sent and
  does not know about: the next start looks every pending id up in the account first.
- ``journal.jsonl``: one JSON object per line, each keyed (:func:`journal_key`), so
  writing a record again replaces it instead of adding a line: a kill or Ctrl-C at any
  point leaves exactly one ``"decision"`` and at most one ``"fills"`` record per
  decision. ``"decision"``: the bar decided on, the account value and cash, the agent's
  intended weights, the orders (written before the first order is sent);
  ``"order"``: one per client order id the account has, with what the account last
  said of it (status, filled shares and price); ``"fills"``: the orders of a decision
  with their final status and filled shares, and the weights the account holds
  afterwards (filled weights, to set against the intended ones).

Client order ids are derived from (run, decision bar, symbol) only (:func:`client_order_id`):
a restarted trader that decides on the same bar again computes the same id, finds the order
in the account and does not send it a second time.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from finpod.atomic import atomic_write_json, atomic_write_text
from finpod.errors import FinpodError
from finpod.paper.broker import FINAL_STATES

#: Folder of a run directory that holds the paper trader's files.
PAPER_DIR = "paper"
STATE_FILE = "state.json"
JOURNAL_FILE = "journal.jsonl"
STATE_FORMAT = "finpod-paper-1"
#: Status of an order written to the state before it is sent (and of one whose answer
#: was lost): only the account can say whether it arrived. ``"unknown"``: the same, as
#: states written by earlier versions say it.
PENDING = ("pending", "unknown")


def client_order_id(run_id: str, decision: pd.Timestamp, symbol: str) -> str:
    """The order's id in the account: the same (run, decision bar, symbol) gives the same id
    (Alpaca allows 128 characters; this is under 48)."""
    tag = hashlib.sha256(run_id.encode()).hexdigest()[:8]
    stamp = pd.Timestamp(decision).tz_convert("UTC").strftime("%Y%m%dT%H%M")
    return f"fp-{tag}-{stamp}-{symbol}"


@dataclass
class PaperState:
    """The trader's memory between steps and restarts (``RUN/paper/state.json``)."""

    run_id: str
    """The run whose agent trades."""
    agent: str
    """The agent (``best``, ``ensemble-3``, ...) as resolved at the first start."""
    start_value: float = 0.0
    """Account value at the first start, dollars: it takes the place of the strategy's
    initial cash in the observation (0 until the first start has read the account)."""
    last_decision: str | None = None
    """ISO time of the last bar whose orders are all sent (or refused) and recorded."""
    orders: dict[str, dict[str, Any]] = field(default_factory=dict)
    """client order id → ``decision``, ``symbol``, ``qty`` (signed), ``status``, ``id``,
    ``filled_qty``, ``filled_avg_price``, ``reason``."""
    positions: dict[str, float] = field(default_factory=dict)
    """Shares per symbol seen in the account after the last step."""
    format: str = STATE_FORMAT

    def open_orders(self) -> list[str]:
        """Client order ids whose status may still change (sent, not final)."""

        return [
            cid
            for cid, o in self.orders.items()
            if o.get("status") not in FINAL_STATES and o.get("status") != "dry_run"
        ]

    def pending_orders(self) -> list[str]:
        """Client order ids written before sending whose arrival the account has not told."""
        return [cid for cid, o in self.orders.items() if o.get("status") in PENDING]


def paper_dir(run_dir: Path) -> Path:
    return Path(run_dir) / PAPER_DIR


def load_state(run_dir: Path, run_id: str, agent: str) -> PaperState:
    """The saved state, or a fresh one; a state of another agent is refused."""
    path = paper_dir(run_dir) / STATE_FILE
    if not path.is_file():
        return PaperState(run_id=run_id, agent=agent)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        state = PaperState(**data)
    except (ValueError, TypeError) as err:
        raise FinpodError(
            f"{path} is not a finpod paper state ({err})", "move it away to start afresh"
        ) from err
    if state.agent != agent:
        raise FinpodError(
            f"{path} belongs to agent {state.agent}, not {agent}",
            f"pass --agent {state.agent}, or move {paper_dir(run_dir)} away to start afresh",
        )
    return state


def save_state(run_dir: Path, state: PaperState) -> None:
    atomic_write_json(paper_dir(run_dir) / STATE_FILE, asdict(state))


def journal_key(record: dict[str, Any]) -> tuple[str, str]:
    """What makes a journal record unique: ``("order", client order id)``, or
    ``(kind, decision bar)`` for the ``decision`` and ``fills`` records."""
    kind = str(record.get("kind"))
    if kind == "order":
        return kind, str(record.get("client_order_id"))
    return kind, str(record.get("decision"))


def write_journal(run_dir: Path, record: dict[str, Any]) -> None:
    """Write ``record`` to ``journal.jsonl``: in place of the record with its
    :func:`journal_key`, else as a new last line (the file is rewritten atomically)."""
    path = paper_dir(run_dir) / JOURNAL_FILE
    key = journal_key(record)
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    line = json.dumps(record, sort_keys=True, default=str)
    out, placed = [], False
    for old in lines:
        if not old.strip():
            continue
        if not placed and journal_key(json.loads(old)) == key:
            out.append(line)
            placed = True
        elif journal_key(json.loads(old)) != key:
            out.append(old)
    if not placed:
        out.append(line)
    atomic_write_text(path, "\n".join(out) + "\n")


def read_journal(run_dir: Path) -> list[dict[str, Any]]:
    """Every record of ``journal.jsonl`` (empty when the run never traded on paper)."""
    path = paper_dir(run_dir) / JOURNAL_FILE
    if not path.is_file():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def decisions_without_fills(run_dir: Path, before: pd.Timestamp) -> list[str]:
    """The journal's decisions before ``before`` that have no ``fills`` record yet."""
    records = read_journal(run_dir)
    have = {r["decision"] for r in records if r.get("kind") == "fills"}
    return [
        r["decision"]
        for r in records
        if r.get("kind") == "decision"
        and r["decision"] not in have
        and pd.Timestamp(r["decision"]) < before
    ]


def fills_record(
    state: PaperState,
    tickers: list[str],
    held: dict[str, float],
    cash: float,
    close: list[float],
    decision: str | None = None,
) -> dict[str, Any]:
    """The ``"fills"`` journal line of ``decision`` (default: ``state``'s last): its orders
    as they ended and the weights the account holds now (``held`` shares, ``cash``
    dollars, marked at ``close``, one price per ticker)."""
    done = state.last_decision if decision is None else decision
    pos = [held.get(s, 0.0) * c for s, c in zip(tickers, close, strict=True)]
    value = cash + sum(pos)
    return {
        "kind": "fills",
        "decision": done,
        "account_value": value,
        "filled_weights": {s: p / value for s, p in zip(tickers, pos, strict=True)},
        "orders": [
            dict(o, client_order_id=c) for c, o in state.orders.items() if o.get("decision") == done
        ],
    }
