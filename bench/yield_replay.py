"""When would the champion line have yielded its slot? A replay over finished tournaments.

A tournament's champion line yields its slot to the search mid-run when one complete
challenger segment beats the champion's best checkpoint so far on the paired test at
``[tournament] yield_alpha`` (``finpod.tournament.schedulers.base``). This replays that
rule over finished runs, in the order their pods were scored (``run.json``'s ``budget``),
from their recorded validation returns (``candidates.bin``), at several levels: for each
run and level, after how many champion segments the line would have yielded, to which
pod, by how much and at what p. The champion's final level is printed beside it, so a
yield on a market where the file's settings are good shows what it would have cut short.

A run that yielded trained on differently after its yield, so its replay at a looser
level than its own says when the first look would have passed, not what would have
followed. The bootstrap draws differ from the run's own (its seed counts the champion's
dispatched segments), so p-values near the level may fall on either side.

    python bench/yield_replay.py WORK/runs/tour-*        # WORK: time_to_signal --work
    python bench/yield_replay.py WORK/runs/tour-* --alphas 0.005,0.01,0.05

It reads the validation split's recorded returns only and feeds nothing back into a run.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from finpod.runs import load_candidates
from finpod.tournament.champion import paired_test, smoothed_best
from finpod.tournament.schedulers.base import LOOK_DRAWS


def replay(
    run_dir: Path, alphas: list[float], grace: int, bars_per_year: float, stall: int = 0
) -> dict[str, Any]:
    """One run's line (module docstring)."""
    info = json.loads((run_dir / "run.json").read_text())
    pods = (info.get("budget") or {}).get("per_pod") or []
    segment = max((p["env_steps"] for p in pods), default=0)
    candidates = load_candidates(run_dir)
    returns = {cid: candidates.returns[:, k] for k, cid in enumerate(candidates.ids)}
    champion: list[tuple[str, float]] = []
    first: dict[float, dict[str, Any]] = {}
    for p in pods:
        score = p.get("score")
        if score is None or not math.isfinite(score) or p["pod"] not in returns:
            continue
        if p.get("stop") == "champion":
            champion.append((p["pod"], float(score)))
            continue
        if len(champion) < max(1, grace) or p["env_steps"] < 0.95 * segment:
            continue
        at = smoothed_best([s for _, s in champion])
        if len(champion) - 1 - at < stall:
            continue
        best = champion[at][0]
        test = paired_test(
            returns[best],
            returns[p["pod"]],
            bars_per_year=bars_per_year,
            names=(best, p["pod"]),
            draws=LOOK_DRAWS,
            seed=len(champion),
        )
        for alpha in alphas:
            if alpha not in first and test.delta > 0 and test.p_value <= alpha:
                first[alpha] = {
                    "segments": len(champion),
                    "to": p["pod"],
                    "over": best,
                    "delta": round(test.delta, 2),
                    "p": round(test.p_value, 4),
                }
    final = [s for _, s in champion]
    return {
        "run": run_dir.name,
        "champion_segments": len(champion),
        "champion_level": round(final[smoothed_best(final)], 3) if final else None,
        "champion_scores": [round(s, 2) for s in final],
        "yielded_in_run": ((info.get("budget") or {}).get("champion") or {}).get("yielded"),
        "yield": {str(a): first.get(a) for a in alphas},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="finished tournament run directories")
    ap.add_argument("--alphas", default="0.005,0.01,0.02,0.05", help="comma-separated levels")
    ap.add_argument("--grace", type=int, default=3, help="champion segments before a look")
    ap.add_argument(
        "--stall",
        type=int,
        default=0,
        help="looks pass only once the champion's best is this many segments old",
    )
    ap.add_argument("--bars-per-year", type=float, default=252.0, help="annualizes the deltas")
    args = ap.parse_args(argv)
    alphas = [float(a) for a in args.alphas.split(",")]
    for run in args.runs:
        if not (run / "run.json").is_file():
            print(json.dumps({"run": str(run), "error": "no run.json"}), flush=True)
            continue
        print(
            json.dumps(replay(run, alphas, args.grace, args.bars_per_year, args.stall)), flush=True
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
