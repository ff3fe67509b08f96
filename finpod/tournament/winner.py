"""When a challenger replaces the champion: what the file's settings lost to, and the
winner's settings as a strategy file.

A champion (``base_pod = true``) trains the strategy's own ``[agent]`` and ``[env]``
settings. When a challenger beats it on the paired test (:mod:`finpod.tournament.champion`),
the run has found settings that did better on the validation split than the file's, and
the user's next question is *which*. So the selection records what differs
(``settings_changed``: ``"agent.hparams.learning_rate": [5e-05, 0.0016]``), the log and the
console say it in one line, and the run writes ``winner.toml``: the run's own strategy with
the winner's algorithm, hyperparameters and execution controls as its base, ready to train
as the next run's champion (``finpod run -s RUN/winner.toml``).

Those settings were chosen on this run's validation split. A run of ``winner.toml`` selects
on the same split again, so its validation scores are not fresh evidence of them; the
file says so at its top, and the backtest split (never used to choose) is where they are
tested. Nothing is written when the champion is kept or the run has no champion line.
"""

from __future__ import annotations

import math
import tomllib
from typing import Any

from finpod.runs import Leaderboard, RunDir
from finpod.runs.leaderboard import Entry
from finpod.runs.rundir import WINNER_FILE
from finpod.runs.toml_writer import toml_dumps
from finpod.strategy import strategy_from_dict

__all__ = ["WINNER_FILE", "record_winner", "settings_changes", "winner_strategy"]

#: Hyperparameters that are filled in from the data (features per ticker), not chosen.
DERIVED = frozenset({"ticker_features"})

#: Most changed settings the one-line summary names (``settings_changed`` has them all).
SHOWN = 6


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def settings_changes(champion: Entry, winner: Entry) -> dict[str, list[Any]]:
    """What ``winner`` trained differently from ``champion``: ``"agent.algorithm"``,
    ``"agent.hparams.<name>"`` and ``"env.<control>"`` → ``[champion's, winner's]``, the
    largest changes first. When the algorithm differs, only the hyperparameters both
    algorithms have are compared."""
    out: dict[str, list[Any]] = {}
    if champion.algorithm != winner.algorithm:
        out["agent.algorithm"] = [champion.algorithm, winner.algorithm]
    names = set(winner.hparams)
    if champion.algorithm != winner.algorithm:
        names &= set(champion.hparams)
    for name in sorted(names - DERIVED):
        a, b = champion.hparams.get(name), winner.hparams.get(name)
        if not _same(a, b):
            out[f"agent.hparams.{name}"] = [a, b]
    for name in sorted(set(champion.env) | set(winner.env)):
        a, b = champion.env.get(name), winner.env.get(name)
        if b is not None and not _same(a, b):
            out[f"env.{name}"] = [a, b]
    return dict(sorted(out.items(), key=lambda kv: _distance(*kv[1]), reverse=True))


def _distance(a: Any, b: Any) -> float:
    """How far apart two settings are, to name the largest changes first: a factor for
    positive numbers (|log b/a|: a learning rate ÷ 20 before a gamma 0.99 → 0.97), +inf
    for anything else that changed (an algorithm, a network, a choice of words)."""
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
    if numbers and a > 0 and b > 0:
        return abs(math.log(b / a))
    return math.inf


def _value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def changes_text(changes: dict[str, list[Any]], limit: int = SHOWN) -> str:
    """``learning_rate 5e-05 → 0.00164, decision_interval 63 → 10, …`` (the last part of
    each name; at most ``limit`` of them, then how many more)."""
    parts = [
        f"{key.rsplit('.', 1)[-1]} {_value(a)} → {_value(b)}"
        for key, (a, b) in list(changes.items())[:limit]
    ]
    if len(changes) > limit:
        parts.append(f"{len(changes) - limit} more")
    return ", ".join(parts)


def winner_strategy(
    strategy_toml: str, winner: Entry, header: str, reference: str | None = None
) -> str:
    """The run's resolved strategy (``strategy_toml``) with ``winner``'s algorithm,
    hyperparameters and execution controls as its ``[agent]`` and ``[env]`` base, as TOML
    text under ``header`` (comment lines). Everything else (``[train]``, ``[tournament]``,
    ``[search]``, the other ``[env]`` keys) is the run's; ``reference``: the absolute path
    of the reference weights file the run read (a path given relative to where the run
    started would not be found from elsewhere)."""
    raw = tomllib.loads(strategy_toml)
    hparams = {k: v for k, v in winner.hparams.items() if k not in DERIVED and v is not None}
    raw["agent"] = {"algorithm": winner.algorithm, "hparams": hparams}
    raw["env"] = {**raw.get("env", {}), **winner.env}
    if reference is not None:
        raw["env"]["reference"] = reference
    body = toml_dumps(raw)
    lines = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    return lines + "\n" + body


def record_winner(run: RunDir, board: Leaderboard, record: dict[str, Any]) -> str | None:
    """After the selection: when a challenger replaced the champion, add
    ``settings_changed`` to ``record`` and write ``winner.toml`` (checked by reading it
    back as a strategy); returns the one-line summary for the log and the console, else
    None (the champion kept, no champion line, or the ensemble over the champion)."""
    champion_id, single = record.get("incumbent"), record.get("selected_single")
    if record.get("incumbent_role") != "champion" or single in (None, champion_id):
        return None
    champion, winner = board.get(champion_id), board.get(single)
    if champion is None or winner is None:
        return None
    changes = settings_changes(champion, winner)
    record["settings_changed"] = changes
    if not changes:
        return None
    test = record.get("best_challenger") or {}
    unit = "IR" if board.score_name == "information_ratio" else board.score_name
    # A copy of a champion checkpoint won with the champion's weights as well as its
    # own settings: say so, since a run of winner.toml trains the settings from scratch.
    fork = next(
        (p for p in reversed(winner.lineage) if (e := board.get(p)) is not None and e.champion),
        None,
    )
    if fork is not None:
        record["forked_from"] = fork
    header = (
        f"The settings of {winner.pod_id} ({winner.algorithm}), which replaced the champion "
        f"of run {run.path.name} on validation"
        + (f" ({test['delta']:+.2f} {unit}, p = {test['p_value']:.3f})" if "delta" in test else "")
        + ".\n"
        f"They differ from the run's [agent] and [env] in: {changes_text(changes, len(changes))}.\n"
        + (
            f"It trained on from the champion's checkpoint {fork}: a run of this file trains\n"
            "these settings from scratch, without those weights.\n"
            if fork is not None
            else ""
        )
        + "Chosen on that run's validation split: a run of this file selects on the same split\n"
        "again, so its validation scores are not fresh evidence of these settings; the\n"
        "backtest split is."
    )
    read = (run.info().get("inputs") or {}).get("reference") or {}
    text = winner_strategy(
        run.strategy_path.read_text(encoding="utf-8"), winner, header, read.get("path")
    )
    strategy_from_dict(tomllib.loads(text))  # never write a file finpod would refuse
    path = run.write_winner_strategy(text)
    record["winner_strategy"] = WINNER_FILE
    if fork is not None:
        return (
            f"the champion lost to {winner.pod_id}, a copy of its checkpoint {fork} trained "
            f"on with {changes_text(changes)}; those settings as a strategy (from scratch): "
            f"{path}"
        )
    return (
        f"the file's settings lost to {winner.pod_id}: {changes_text(changes)}; "
        f"its settings as a strategy: {path}"
    )
