"""The verdict that heads the walk-forward page, in the tearsheet's words
(:mod:`finpod.backtest.verdict`): the stitched active return against equal weight with its
HAC t, the folds' DSR and PBO against their thresholds, what the folds × seeds spent."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from finpod.backtest.run_record import market_regime
from finpod.backtest.verdict import (
    Verdict,
    edge_sentence,
    folds_luck_sentence,
    null_market_sentence,
)
from finpod.data import load_manifest
from finpod.walkforward.results import EQUAL_WEIGHT

if TYPE_CHECKING:
    from finpod.walkforward.results import WalkForwardResult

AGENT = "agent"


def plural(n: int, word: str) -> str:
    """``1 seed``, ``2 seeds``, ``0 folds``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def steps_text(env_steps: dict, strategy: dict) -> str:
    """``"10,000 env steps asked per fold × seed, 12,288 trained (whole rollouts: rounded
    up)"``, or ``"10,000 env steps per fold × seed"`` when every job trained just that."""
    asked = env_steps.get("asked", strategy.get("train", {}).get("total_steps"))
    trained = [int(t) for t in env_steps.get("trained") or []]
    if asked is None:
        return "env steps per fold × seed: unknown"
    asked = int(asked)
    if not trained or trained == [asked]:
        return f"{asked:,} env steps per fold × seed"
    shown = f"{trained[0]:,}" if len(trained) == 1 else f"{trained[0]:,}–{trained[-1]:,}"
    why = " (whole rollouts of envs × horizon: rounded up)" if min(trained) > asked else ""
    return f"{asked:,} env steps asked per fold × seed, {shown} trained{why}"


def _regime(summary: dict) -> str | None:
    """``"null"`` / ``"alpha"`` for a synthetic dataset (its manifest), else None."""
    path = (summary.get("settings", {}).get("dataset") or {}).get("path")
    try:
        return market_regime(load_manifest(path)) if path else None
    except Exception:  # noqa: BLE001 - a dataset moved since: the page is drawn without it
        return None


def walkforward_verdict(result: WalkForwardResult) -> Verdict:
    """The verdict of the stitched out-of-sample record: the HAC t-test of the active
    return against equal weight, the folds' selections, what the folds × seeds spent."""
    s = result.summary
    h = result.hac["vs_equal_weight"]
    stitched = result.stitched
    te = ir = None
    if AGENT in stitched and EQUAL_WEIGHT in stitched:
        active = (stitched[AGENT] - stitched[EQUAL_WEIGHT]).dropna()
        bars = float(s.get("bars_per_year") or 252.0)
        if len(active) > 1:
            te = float(active.std(ddof=1)) * bars**0.5
            ir = float(active.mean()) * bars / te if te > 0 else None
    tone, edge = edge_sentence(
        h.get("annual_mean"), ir, h.get("t"), te, "equal weight (buy-and-hold)", t_name="HAC t"
    )
    extra = []
    if _regime(s) == "null":
        extra.append(null_market_sentence(tone))
        tone = "null"
    folds = result.folds
    luck = folds_luck_sentence(
        list(folds.get("dsr", pd.Series(dtype=float))),
        list(folds.get("pbo", pd.Series(dtype=float))),
    )
    strat = s.get("settings", {}).get("strategy", {})
    jobs = len(result.seeds)
    spend = f"Spent: {plural(jobs, 'job')} (folds × seeds), " + steps_text(
        s.get("env_steps") or {}, strat
    )
    seconds = pd.to_numeric(result.seeds.get("train_seconds"), errors="coerce")
    if seconds is not None and np.isfinite(seconds).any():
        spend += f", {float(seconds.sum()) / 60:.1f} min of training in all"
    return Verdict(tone, edge, luck, (spend + ".",), tuple(extra))
