"""What a walk-forward produced (:class:`WalkForwardResult`) and how it is put together from
the persisted seed records: each fold's winner and the DSR/PBO of that choice
(:func:`aggregate_fold`), then the stitched out-of-sample record, its metrics, the HAC
t-tests of the active return, the tables and ``summary.json`` (:func:`summarize`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from finpod.atomic import atomic_write, atomic_write_json, atomic_write_text
from finpod.backtest import metrics as m
from finpod.backtest.selection import selection_statistics
from finpod.data.disclosure import benchmark_label, universe_disclosure
from finpod.errors import FinpodError
from finpod.runs.candidates import CandidateSet
from finpod.walkforward import directory
from finpod.walkforward.folds import Fold, default_embargo, folds_frame
from finpod.walkforward.stats import hac_mean_test

#: The benchmark the active return is measured against: equal-weight buy-and-hold of the
#: universe from each fold's first bar, trading through the same env (costs included).
EQUAL_WEIGHT = "equal_weight_buy_hold"
INDEX = "index"
AGENT = "agent"


@dataclass
class WalkForwardResult:
    """What a walk-forward produced (also on disk under ``out``)."""

    out: Path
    """The walk-forward directory."""
    report: Path
    """Its HTML page."""
    folds: pd.DataFrame
    """One row per fold: windows, winner seed, validation score, backtest metrics, DSR, PBO."""
    seeds: pd.DataFrame
    """One row per fold × seed: validation score and backtest metrics of its own agent."""
    selections: pd.DataFrame
    """Every selection made: each fold's choice among its seeds' checkpoints, and each
    fold × seed's choice among its checkpoints, with N, DSR and PBO."""
    stitched: pd.DataFrame
    """(T, ·) per-bar out-of-sample returns: ``agent`` (the fold winners), ``index``,
    the benchmarks, and ``fold``."""
    seed_returns: pd.DataFrame
    """(T, S) per-bar out-of-sample returns of each seed's own agents (``seed-<k>``)."""
    metrics: pd.DataFrame
    """Metrics of the stitched returns, one column per strategy."""
    hac: dict[str, Any]
    """HAC t-tests of the active return: ``vs_equal_weight``, ``vs_index`` (if any),
    ``per_seed_vs_equal_weight``."""
    summary: dict[str, Any] = field(default_factory=dict)
    """``summary.json``."""


#: Rows of the stitched table that need the account's trades and holdings, which each
#: fold's backtest measured: how each is combined over the folds.
FOLD_WEIGHTED = {
    "annual_turnover": "mean",
    "annual_turnover_ex_initial": "mean",
    "mean_exposure": "mean",
    "costs_paid": "sum",
    "costs_pct_capital": "sum",
    "fees_paid": "sum",
    "impact_paid": "sum",
}
#: How every Sharpe ratio of the walk-forward is written (tables, CSVs, summary.json).
SHARPE_CONVENTION = "Sharpe ratios are annualized: per-bar mean / std × √(bars per year)"


def fold_weighted_metrics(per_fold: list[tuple[int, dict[str, float]]]) -> dict[str, float]:
    """Turnover, mean exposure and costs of a stitched record from its folds' backtests.

    ``per_fold``: (bars, the fold's backtest metrics) in fold order. Turnover and mean
    exposure are per-year or per-bar rates: their bar-weighted mean over the folds. Costs
    add up (every fold restarts from the same initial capital, so ``costs_pct_capital`` is
    the folds' costs over that one capital), split as the backtest splits them into fees
    and market impact (``fees_paid + impact_paid = costs_paid``). NaN where a fold did not measure the metric
    (the index is a level: it never trades).
    """
    out: dict[str, float] = {}
    for name, how in FOLD_WEIGHTED.items():
        # result.json writes a NaN as null
        values = np.array(
            [np.nan if met.get(name) is None else float(met[name]) for _, met in per_fold]
        )
        bars = np.array([n for n, _ in per_fold], dtype=float)
        if not len(values) or not np.isfinite(values).all() or bars.sum() <= 0:
            out[name] = float("nan")
        elif how == "sum":
            out[name] = float(values.sum())
        else:
            out[name] = float((values * bars).sum() / bars.sum())
    return out


def _annualised(per_bar: float | None, annualization: float) -> float | None:
    """A per-bar Sharpe ratio annualized (× √ bars per year); None stays None."""
    if per_bar is None or not np.isfinite(per_bar):
        return None
    return float(per_bar) * float(np.sqrt(annualization))


def aggregate_fold(out: Path, fold: Fold, seeds: list[int], annualization: float) -> dict[str, Any]:
    """The fold's winner among its seeds and the DSR/PBO of that choice (``fold.json``)."""
    recs = [directory.load_seed(out, fold.index, s) for s in seeds]
    scored = [r for r in recs if r.get("best_score") is not None]
    if not scored:
        raise FinpodError(
            f"fold {fold.index}: no seed has a finite validation score", "check the strategy"
        )
    winner = max(scored, key=lambda r: (r["best_score"], -r["seed"]))
    ids = [c["id"] for r in recs for c in r["candidates"]]
    scores = np.array(
        [np.nan if c["score"] is None else c["score"] for r in recs for c in r["candidates"]]
    )
    kinds = [c["kind"] for r in recs for c in r["candidates"]]
    lengths = [r["candidate_returns"].shape[0] for r in recs for _ in r["candidates"]]
    shortest = min(lengths) if lengths else 0
    returns = (
        np.concatenate([r["candidate_returns"][-shortest:] for r in recs], axis=1)
        if shortest
        else np.zeros((0, 0))
    )
    cands = CandidateSet(ids, scores, returns, kinds, lengths)
    selection = selection_statistics(
        winner["returns"][AGENT],
        cands,
        num_trials=len(ids),
        selected_id=winner["selected_id"],
        annualization=annualization,
    )
    rec = directory.json_safe(
        {
            "fold": fold.index,
            "splits": fold.splits,
            "seeds": seeds,
            "winner_seed": winner["seed"],
            "winner_candidate": winner["selected_id"],
            "winner_validation_score": winner["best_score"],
            "score_name": winner["score_name"],
            "selection": selection,
            "selection_rule": "the seed whose selected checkpoint scored best on the fold's "
            "validation window; N counts every checkpoint of every seed",
        }
    )
    atomic_write_json(directory.fold_dir(out, fold.index) / "fold.json", rec)
    rec["_records"] = recs
    return rec


def summarize(
    out: Path,
    folds: list[Fold],
    seeds: list[int],
    annualization: float,
    settings: dict[str, Any],
    manifest: dict[str, Any],
) -> WalkForwardResult:
    """Stitch the folds, test the active return, write the tables and ``summary.json``;
    ``result.report`` names where the page goes (:func:`finpod.walkforward.report.render_report`)."""
    fold_recs = [aggregate_fold(out, f, seeds, annualization) for f in folds]
    stitched_parts, seed_parts = [], {f"seed-{s}": [] for s in seeds}
    fold_rows, seed_rows, sel_rows = [], [], []
    windows = folds_frame(folds).set_index("fold")
    recs_by_fold: dict[int, dict[int, dict[str, Any]]] = {}  # fold → seed → its record
    winner_of: dict[int, int] = {}  # fold → its winner seed
    for f, rec in zip(folds, fold_recs, strict=True):
        recs = {r["seed"]: r for r in rec["_records"]}
        recs_by_fold[f.index], winner_of[f.index] = recs, rec["winner_seed"]
        win = recs[rec["winner_seed"]]
        part = win["returns"].copy()
        part["fold"] = f.index
        stitched_parts.append(part)
        for s in seeds:
            seed_parts[f"seed-{s}"].append(recs[s]["returns"][AGENT])
        met = win["metrics"]
        active = part[AGENT] - part[EQUAL_WEIGHT]
        sel = rec["selection"]
        fold_rows.append(
            {
                "fold": f.index,
                "train": f"{windows.at[f.index, 'train_start']} → {windows.at[f.index, 'train_end']}",
                "validation": f"{windows.at[f.index, 'validation_start']} → "
                f"{windows.at[f.index, 'validation_end']}",
                "backtest": f"{windows.at[f.index, 'backtest_start']} → "
                f"{windows.at[f.index, 'backtest_end']}",
                "winner_seed": rec["winner_seed"],
                "validation_score": rec["winner_validation_score"],
                "sharpe_agent": met[AGENT]["sharpe"],
                "sharpe_equal_weight": met.get(EQUAL_WEIGHT, {}).get("sharpe"),
                "sharpe_index": met.get(INDEX, {}).get("sharpe"),
                "return_agent": met[AGENT]["cumulative_return"],
                "return_equal_weight": met.get(EQUAL_WEIGHT, {}).get("cumulative_return"),
                "active_annual_mean": float(active.mean() * annualization),
                "n_candidates": sel.get("num_trials"),
                "dsr": sel.get("dsr"),
                "pbo": sel.get("pbo"),
            }
        )
        sel_rows.append(
            {
                "fold": f.index,
                "seed": "all",
                "chose_among": "the one seed's checkpoints"
                if len(seeds) == 1
                else f"{len(seeds)} seeds' checkpoints",
                "selected": rec["winner_candidate"],
                "n": sel.get("num_trials"),
                "selected_validation_sharpe": _annualised(
                    sel.get("selected_validation_sharpe"), annualization
                ),
                "dsr": sel.get("dsr"),
                "pbo": sel.get("pbo"),
            }
        )
        for s in seeds:
            r = recs[s]
            st = r["statistics"]
            ra = r["returns"]
            seed_rows.append(
                {
                    "fold": f.index,
                    "seed": s,
                    "winner": s == rec["winner_seed"],
                    "validation_score": r["best_score"],
                    "selected_at_steps": r["best_env_steps"],
                    "sharpe_agent": r["metrics"][AGENT]["sharpe"],
                    "return_agent": r["metrics"][AGENT]["cumulative_return"],
                    "active_annual_mean": float(
                        (ra[AGENT] - ra[EQUAL_WEIGHT]).mean() * annualization
                    ),
                    "train_seconds": r["train_seconds"],
                    "warm_start_from": r.get("warm_start_from") or "",
                }
            )
            sel_rows.append(
                {
                    "fold": f.index,
                    "seed": s,
                    "chose_among": "its checkpoints",
                    "selected": r["selected_id"],
                    "n": st.get("num_trials"),
                    "selected_validation_sharpe": _annualised(
                        st.get("selected_validation_sharpe"), annualization
                    ),
                    "dsr": st.get("dsr"),
                    "pbo": st.get("pbo"),
                }
            )
    stitched = pd.concat(stitched_parts)
    if not stitched.index.is_monotonic_increasing or stitched.index.has_duplicates:
        raise FinpodError("the folds' backtest windows overlap", "this is a bug in the fold plan")
    seed_returns = pd.DataFrame({k: pd.concat(v) for k, v in seed_parts.items()})
    strategies = [c for c in stitched.columns if c != "fold"]
    bench = stitched.get(INDEX)
    reference = stitched.get(m.REFERENCE)

    def stitched_metrics(name: str, returns: pd.Series, per_fold: list[tuple[int, dict]]):
        out = m.performance_metrics(
            returns,
            annualization,
            benchmark=bench if name != INDEX else None,
            reference=reference if name != INDEX else None,  # as the backtest measures
        )
        if name == INDEX:
            out["alpha"], out["beta"] = 0.0, 1.0
        out.update(fold_weighted_metrics(per_fold))
        return out

    def fold_metrics(seed_of: dict[int, int], column: str) -> list[tuple[int, dict]]:
        """(bars, metrics of ``column``) of each fold's backtest by seed ``seed_of[fold]``."""
        records = [recs_by_fold[f.index][seed_of[f.index]] for f in folds]
        return [(len(r["returns"]), r["metrics"].get(column, {})) for r in records]

    metrics = pd.DataFrame(
        {c: stitched_metrics(c, stitched[c], fold_metrics(winner_of, c)) for c in strategies}
        | {
            f"seed-{s}": stitched_metrics(
                f"seed-{s}",
                seed_returns[f"seed-{s}"],
                fold_metrics(dict.fromkeys(winner_of, s), AGENT),
            )
            for s in seeds
        }
    )
    hac = {
        "vs_equal_weight": hac_mean_test(
            (stitched[AGENT] - stitched[EQUAL_WEIGHT]).to_numpy(), bars_per_year=annualization
        ),
        "per_seed_vs_equal_weight": {
            c: hac_mean_test(
                (seed_returns[c] - stitched[EQUAL_WEIGHT]).to_numpy(), bars_per_year=annualization
            )
            for c in seed_returns
        },
    }
    hac["vs_equal_weight"]["benchmark"] = EQUAL_WEIGHT
    if bench is not None:
        hac["vs_index"] = hac_mean_test(
            (stitched[AGENT] - bench).to_numpy(), bars_per_year=annualization
        )
        hac["vs_index"]["benchmark"] = INDEX
    folds_df, seeds_df, sel_df = (
        pd.DataFrame(fold_rows),
        pd.DataFrame(seed_rows),
        pd.DataFrame(sel_rows),
    )
    atomic_write(out / "stitched_returns.parquet", lambda p: stitched.to_parquet(p))
    atomic_write(out / "seed_returns.parquet", lambda p: seed_returns.to_parquet(p))
    atomic_write_text(out / "folds.csv", folds_df.to_csv(index=False))
    atomic_write_text(out / "seeds.csv", seeds_df.to_csv(index=False))
    atomic_write_text(out / "selections.csv", sel_df.to_csv(index=False))
    atomic_write_text(out / "stitched_metrics.csv", metrics.to_csv())
    disclosures = {
        "universe": universe_disclosure(manifest)["text"],
        "benchmark": benchmark_label(manifest),
        "resplit": "The walk-forward re-splits every bar of the dataset into its own folds; the "
        "dataset's train/validation/backtest split is not used. Each fold's backtest window is "
        "read only by that fold's backtest; later folds train on it.",
    }
    spec = settings.get("spec") or {}
    embargo = spec.get("embargo")
    asked = (settings.get("strategy") or {}).get("train", {}).get("total_steps")
    trained = sorted(
        {
            int(r["env_steps"])
            for recs in recs_by_fold.values()
            for r in recs.values()
            if r.get("env_steps") is not None
        }
    )
    summary = directory.json_safe(
        {
            "settings": {k: v for k, v in settings.items() if k != "folds"},
            "embargo": {
                "sessions": default_embargo(str(manifest.get("bar", "1d")))
                if embargo is None
                else int(embargo),
                "default": embargo is None,
            },
            "env_steps": {"asked": asked, "trained": trained},
            "sharpe_convention": SHARPE_CONVENTION,
            "folds": len(folds),
            "seeds": seeds,
            "bars_per_year": annualization,
            "stitched": {
                "start": str(stitched.index[0]),
                "end": str(stitched.index[-1]),
                "bars": len(stitched),
            },
            "hac": hac,
            "metrics": {c: metrics[c].to_dict() for c in metrics},
            "folds_table": fold_rows,
            "disclosures": disclosures,
        }
    )
    atomic_write_json(out / "summary.json", summary)
    result = WalkForwardResult(
        out=out,
        report=out / "report.html",
        folds=folds_df,
        seeds=seeds_df,
        selections=sel_df,
        stitched=stitched,
        seed_returns=seed_returns,
        metrics=metrics,
        hac=hac,
        summary=summary,
    )
    return result
