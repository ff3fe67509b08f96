"""Does the champion-or-challenger rule pick the agent that holds up? An audit of finished
tournaments, after the fact.

For each run given, the champion's incumbent checkpoint and every challenger its final
selection tested (``leaderboard.json``'s ``selection``) are backtested with ``finpod
backtest RUN --agent POD``. Each run prints one JSON line: the decision, each candidate's
validation delta and p-value beside its backtest information ratio, and what the decision
gained or lost on the backtest against keeping the champion (``switch_gain``).

This reads the backtest split of runs that are already finished and selected: it measures
the selection rule across many runs, and nothing here feeds back into any run's
selection. Read it over many runs and markets, never to pick one agent.

    python bench/selection_audit.py WORK/runs/tour-* --reports AUDIT  # WORK: time_to_signal --work
    python bench/selection_audit.py - --reports AUDIT --rows audit.jsonl  # replay

Each ``--alphas`` value also prints a line: the single agent the rule would have picked
in every run at that ``challenge_alpha`` (replayed from the recorded p-values), with its
backtest IR. Choose a default from some markets and seeds, then read the others.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FINPOD = [sys.executable, "-m", "finpod"]


def backtest_ir(run_dir: Path, agent: str, reports: Path) -> float | None:
    """Backtest information ratio of ``agent`` (a pod id) of ``run_dir``."""
    import pandas as pd

    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "COLUMNS": "120"}
    cmd = [*FINPOD, "backtest", str(run_dir), "--agent", agent, "--reports", str(reports)]
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        print(json.dumps({"error": out.stderr.strip()[-300:], "run": run_dir.name}), flush=True)
        return None
    folder = Path([ln for ln in out.stdout.splitlines() if ln.strip()][-1].strip())
    metrics = pd.read_csv(folder / "metrics.csv", index_col=0)
    value = float(metrics["agent"]["information_ratio"])
    return round(value, 4) if value == value else None


def audit(run_dir: Path, reports: Path) -> dict[str, Any]:
    """One run's line (module docstring)."""
    board = json.loads((run_dir / "leaderboard.json").read_text())
    sel = board.get("selection") or {}
    incumbent = sel.get("incumbent")
    if not incumbent:
        return {"run": run_dir.name, "error": "no champion selection in this run"}
    scores = {e["pod_id"]: e["score"] for e in board.get("entries", [])}
    row: dict[str, Any] = {
        "run": run_dir.name,
        "decision": sel.get("decision"),
        "selected": sel.get("selected"),
        "incumbent": {
            "pod": incumbent,
            "validation": round(float(sel.get("incumbent_score") or scores.get(incumbent)), 4),
            "backtest_ir": backtest_ir(run_dir, incumbent, reports),
        },
        "challengers": [],
    }
    for test in sel.get("challengers", []):
        pod = test["challenger"]
        row["challengers"].append(
            {
                "pod": pod,
                "validation_delta": test.get("delta"),
                "p_value": test.get("p_value"),
                "backtest_ir": backtest_ir(run_dir, pod, reports),
            }
        )
    if sel.get("ensemble"):
        test = sel["ensemble"]
        row["ensemble"] = {
            "against": test.get("incumbent"),
            "validation_delta": test.get("delta"),
            "p_value": test.get("p_value"),
            "selected": bool(test.get("selected")),
            "backtest_ir": backtest_ir(run_dir, "ensemble", reports),
        }
    chosen = next((c for c in row["challengers"] if c["pod"] == row["selected"]), None)
    base = row["incumbent"]["backtest_ir"]
    if chosen is not None and chosen["backtest_ir"] is not None and base is not None:
        row["switch_gain"] = round(chosen["backtest_ir"] - base, 4)
    elif row["selected"] == incumbent:
        row["switch_gain"] = 0.0
    elif str(row["selected"]).startswith("ensemble") and base is not None:
        ir = (row.get("ensemble") or {}).get("backtest_ir")
        row["switch_gain"] = None if ir is None else round(ir - base, 4)
    return row


def holm_choice(challengers: list[dict[str, Any]], alpha: float) -> dict[str, Any] | None:
    """The challenger the champion rule picks at ``alpha`` from the recorded tests (Holm's
    step-down over lines, then the largest validation delta among those that pass), or
    None: the champion is kept. The ensemble's test is left out (it is recorded against
    the single agent the run selected, which another ``alpha`` may change)."""
    ranked = sorted(challengers, key=lambda c: c["p_value"])
    passed = []
    for i, c in enumerate(ranked):
        if c["p_value"] > alpha / (len(ranked) - i):
            break
        if c["validation_delta"] > 0:
            passed.append(c)
    return max(passed, key=lambda c: c["validation_delta"]) if passed else None


def sweep(rows: list[dict[str, Any]], alphas: list[float]) -> list[dict[str, Any]]:
    """For each ``alpha``: every run's backtest IR of the single agent the rule would pick,
    and its gain over keeping the champion."""
    out = []
    for alpha in alphas:
        picks = []
        for r in rows:
            if "incumbent" not in r:
                continue
            chosen = holm_choice(r["challengers"], alpha)
            ir = r["incumbent"]["backtest_ir"] if chosen is None else chosen["backtest_ir"]
            picks.append(
                {
                    "run": r["run"],
                    "pick": r["incumbent"]["pod"] if chosen is None else chosen["pod"],
                    "backtest_ir": ir,
                    "gain": None
                    if ir is None or r["incumbent"]["backtest_ir"] is None
                    else round(ir - r["incumbent"]["backtest_ir"], 4),
                }
            )
        out.append({"alpha": alpha, "picks": picks})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="finished tournament run directories")
    parser.add_argument("--reports", type=Path, required=True, help="where the backtests go")
    parser.add_argument(
        "--alphas",
        default="0.05,0.1,0.2,0.3,0.5",
        help="challenge_alpha values whose single-agent picks are replayed (comma-separated)",
    )
    parser.add_argument(
        "--rows", type=Path, help="replay the sweep from this file's audit lines (no backtests)"
    )
    args = parser.parse_args(argv)
    rows = []
    if args.rows is not None:
        rows = [json.loads(ln) for ln in args.rows.read_text().splitlines() if ln.strip()]
        rows = [r for r in rows if "run" in r and "summary" not in r and "alpha" not in r]
    for run_dir in [] if args.rows is not None else args.runs:
        if not (run_dir / "leaderboard.json").is_file():
            continue
        row = audit(run_dir, args.reports)
        rows.append(row)
        print(json.dumps(row), flush=True)
    for line in sweep(rows, [float(a) for a in args.alphas.split(",")]):
        print(json.dumps(line), flush=True)
    gains = [r["switch_gain"] for r in rows if r.get("switch_gain") is not None]
    switched = [r for r in rows if r.get("selected") != (r.get("incumbent") or {}).get("pod")]
    print(
        json.dumps(
            {
                "summary": True,
                "runs": len(rows),
                "switched": len(switched),
                "switch_gains": [r.get("switch_gain") for r in switched],
                "mean_gain_over_runs": round(sum(gains) / len(gains), 4) if gains else None,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
