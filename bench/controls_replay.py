"""Would trading a trained agent under another line's execution controls have paid? A
replay over finished tournaments.

A pod's execution controls (``decision_interval``, ``no_trade_band``, ``band_target``,
``partial_adjustment``) act when its target weights are traded, so a trained policy can be
traded under controls it was not trained with, at the cost of one validation rollout and
no training. This replays two ways of adding such candidates to a run's final selection
(:mod:`finpod.tournament.champion`), from the run's checkpoints and its recorded
validation returns (``candidates.bin``):

- ``joint``: the champion's incumbent checkpoint, traded under the controls of each
  challenger line that used other ones, joins the challengers in the one Holm-corrected
  family at ``--alpha``;
- ``after``: the agent the run selected (champion or challenger), traded under the
  controls of every other line (the champion's included), is tested against it afterwards,
  Holm-corrected over those controls, as the ensemble is.

For each run it prints one JSON line: each re-traded candidate's validation difference
and p-value, the single agent each way would hand over, and its information ratio on the
backtest split (finpod's rollout of that split, as validation is scored; the ensemble
stage is left out). A ``summary`` line counts the runs each way changed and by how much.

This reads the backtest split of finished runs only to measure the rule across many runs
and markets; nothing here feeds back into a run.

    python bench/controls_replay.py WORK/runs/tour-*        # WORK: time_to_signal --work
    python bench/controls_replay.py WORK/runs/tour-* --alpha 0.3 --ways after
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from finpod.backtest.agents import ensemble_policy, load_agents, recorded_env_config  # noqa: E402
from finpod.data import load_split  # noqa: E402
from finpod.env.config import EnvConfig  # noqa: E402
from finpod.env.ensemble import Member, score_ensemble  # noqa: E402
from finpod.runs import Entry, Leaderboard, load_candidates, read_run_info  # noqa: E402
from finpod.scores import scored_series  # noqa: E402
from finpod.tournament import champion as ch  # noqa: E402

#: The execution controls a trained policy can be traded under.
CONTROLS = ("decision_interval", "no_trade_band", "band_target", "partial_adjustment")


def controls(config: EnvConfig) -> tuple[Any, ...]:
    return tuple(getattr(config, k) for k in CONTROLS)


class Run:
    """One finished tournament: its board, checkpoints and splits."""

    def __init__(self, path: Path, splits: dict[tuple[str, str], Any]) -> None:
        self.path = path
        self.board = Leaderboard.load(path)
        self.meta = read_run_info(path)
        data = Path(self.meta["dataset"]["path"])
        for split in ("validation", "backtest"):
            if (str(data), split) not in splits:
                splits[(str(data), split)] = load_split(data, split)
        self.validation = splits[(str(data), "validation")]
        self.backtest = splits[(str(data), "backtest")]
        self.bars_per_year = float(self.validation.annualization)
        self.returns = ch._returns_by_id(load_candidates(path))
        self.name = self.board.score_name

    def entry(self, pod: str) -> Entry:
        return next(e for e in self.board.entries if e.pod_id == pod)

    def config(self, entry: Entry) -> EnvConfig:
        return recorded_env_config(self.path, self.meta, entry)[0]

    def trade(self, entry: Entry, config: EnvConfig, split: str) -> tuple[float, np.ndarray]:
        """(score, scored per-bar series) of ``entry``'s checkpoint traded under ``config``."""
        agent = load_agents(self.path, [entry], torch.device("cpu"))[0]
        market = self.validation if split == "validation" else self.backtest
        member = Member(ensemble_policy([agent]), config, entry.pod_id)
        score, out = score_ensemble([member], market, self.name)
        series = scored_series(out.returns, out.reference_returns, self.name)
        return float(score), series.to_numpy(dtype="float64")


def retraded(run: Run, agent: Entry, sources: list[Entry]) -> tuple[list, dict[str, EnvConfig]]:
    """Paired tests of ``agent`` traded under each distinct other control set of
    ``sources``, against ``agent`` under its own."""
    own = run.config(agent)
    base = run.returns[agent.pod_id]
    tests, configs, done = [], {}, {controls(own)}
    for source in sources:
        key = controls(run.config(source))
        if key in done:
            continue
        done.add(key)
        config = EnvConfig.from_dict({**own.to_dict(), **dict(zip(CONTROLS, key, strict=True))})
        name = f"{agent.pod_id}@{source.pod_id}"
        _, series = run.trade(agent, config, "validation")
        test = ch.paired_test(base, series, bars_per_year=run.bars_per_year, names=("own", name))
        tests.append(test)
        configs[name] = config
    return tests, configs


def replay(path: Path, alpha: float, ways: list[str], splits: dict) -> dict[str, Any]:
    run = Run(path, splits)
    incumbent, role = ch.incumbent_of(run.board)
    if incumbent is None or role != "champion":
        return {"run": path.name, "skipped": "no champion line"}
    base = run.returns[incumbent.pod_id]
    challengers = [e for e in ch.line_challengers(run.board)[0] if e.pod_id in run.returns]
    tests = [
        ch.paired_test(
            base, run.returns[e.pod_id], bars_per_year=run.bars_per_year, names=("own", e.pod_id)
        )
        for e in challengers
    ]
    passed = ch.holm_passes(tests, alpha)
    selected = max(passed, key=lambda t: t.delta).challenger if passed else incumbent.pod_id

    def backtest(pod: str, configs: dict[str, EnvConfig]) -> float:
        if pod in configs:
            return run.trade(run.entry(pod.split("@")[0]), configs[pod], "backtest")[0]
        entry = run.entry(pod)
        return run.trade(entry, run.config(entry), "backtest")[0]

    row: dict[str, Any] = {"run": path.name, "selected": selected}
    row["backtest"] = round(backtest(selected, {}), 3)
    for way in ways:
        if way == "joint":
            extra, configs = retraded(run, incumbent, challengers)
            won = ch.holm_passes(tests + extra, alpha)
            pick = max(won, key=lambda t: t.delta).challenger if won else incumbent.pod_id
        else:
            agent = run.entry(selected)
            others = [incumbent, *challengers]
            extra, configs = retraded(run, agent, [e for e in others if e.pod_id != selected])
            won = ch.holm_passes(extra, alpha)
            pick = max(won, key=lambda t: t.delta).challenger if won else selected
        row[way] = {
            "tests": [[t.challenger, round(t.delta, 3), round(t.p_value, 3)] for t in extra],
            "selected": pick,
            "backtest": row["backtest"] if pick == selected else round(backtest(pick, configs), 3),
        }
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="finished tournament run directories")
    parser.add_argument("--alpha", type=float, default=0.30, help="challenge_alpha of the replay")
    parser.add_argument("--ways", default="joint,after", help="comma list of joint, after")
    args = parser.parse_args(argv)
    ways = [w for w in args.ways.split(",") if w]
    if not ways or set(ways) - {"joint", "after"}:
        parser.error("--ways: a comma list of joint and after")
    torch.set_num_threads(1)
    splits: dict = {}
    rows = []
    for path in args.runs:
        row = replay(path, args.alpha, ways, splits)
        print(json.dumps(row), flush=True)
        rows.append(row)
    for way in ways:
        moves = [r[way]["backtest"] - r["backtest"] for r in rows if way in r]
        changed = [m for m in moves if m != 0]
        summary = {
            "summary": way,
            "alpha": args.alpha,
            "runs": len(moves),
            "changed": len(changed),
            "up": sum(m > 0 for m in changed),
            "down": sum(m < 0 for m in changed),
            "moves": [round(m, 2) for m in changed],
            "mean_move": round(statistics.fmean(moves), 3) if moves else None,
        }
        print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
