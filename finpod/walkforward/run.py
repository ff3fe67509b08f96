"""``run_walkforward``: every fold × seed trained, selected and backtested, then stitched.

Order of work:

1. Load the whole dataset once (``load_split(data, "all")``) and cut the folds
   (:func:`finpod.walkforward.folds.plan_folds`).
2. Write or check ``walkforward.json`` (a directory with the same settings resumes).
3. Run the fold × seed jobs that are not done yet (:func:`finpod.walkforward.job.run_seed_job`):
   as Ray tasks, each asking for ``cpus_per_job`` CPUs, so as many run at once as the
   cluster has room for and the rest wait in Ray's queue; or one after the other in this
   process (``use_ray=False``). Each result is persisted as it arrives. With
   ``warm_start`` the folds run in order: fold k's seeds start from fold k − 1's winner.
4. Per fold, the *winner* is the seed whose selected checkpoint scored best on the fold's
   validation window (the backtest window is never read by any selection). The DSR and
   PBO of that selection are computed over every checkpoint of every seed of the fold;
   each seed's own checkpoint selection has its DSR and PBO as well.
5. The winners' backtest returns, fold after fold, are the stitched out-of-sample record,
   beside the index and the equal-weight benchmark over the same bars. Each fold starts
   again from the initial capital (as the benchmarks do), so the stitched curve compounds
   the per-fold returns. The active return against equal weight (buy-and-hold of the
   universe from each fold's first bar) is tested with a HAC t-statistic
   (:func:`finpod.walkforward.stats.hac_mean_test`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from finpod.atomic import atomic_write, atomic_write_json, atomic_write_text
from finpod.errors import FinpodError
from finpod.walkforward import store
from finpod.walkforward.folds import Fold, FoldSpec, folds_frame, plan_folds
from finpod.walkforward.job import SeedJob, SeedResult, market_payload, run_seed_job
from finpod.walkforward.stats import hac_mean_test

#: The strategy a walk-forward trains when none is given.
DEFAULT_STRATEGY = Path("strategies/ppo.toml")
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


def parse_seeds(seeds: int | str | list[int]) -> list[int]:
    """``3`` → [0, 1, 2]; ``"0,4,7"`` → [0, 4, 7]."""
    if isinstance(seeds, list | tuple):
        out = [int(s) for s in seeds]
    else:
        text = str(seeds).strip()
        try:
            out = [int(s) for s in text.split(",")] if "," in text else list(range(int(text)))
        except ValueError as err:
            raise FinpodError(
                f"--seeds {seeds!r} is not understood", "give a count (3) or a list (0,4,7)"
            ) from err
    if not out or min(out) < 0 or len(set(out)) != len(out):
        raise FinpodError(
            f"--seeds {seeds!r} must name at least one distinct seed ≥ 0", "e.g. --seeds 3"
        )
    return out


def run_walkforward(
    data: str | Path,
    strategy: str | Path = DEFAULT_STRATEGY,
    out: str | Path = "reports/walkforward",
    *,
    spec: FoldSpec | None = None,
    seeds: int | str | list[int] = 3,
    steps: int | None = None,
    warm_start: bool = False,
    use_ray: bool = True,
    address: str | None = None,
    num_cpus: int | None = None,
    cpus_per_job: int = 1,
    device: str = "cpu",
    restart: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> WalkForwardResult:
    """Walk-forward of ``strategy`` over ``data``; everything written under ``out``.

    Args:
        data: dataset directory (``finpod download``); every bar of it is re-split.
        strategy: strategy TOML file (its algorithm, env and train settings).
        out: the walk-forward directory (created; an existing one with the same settings
            resumes, see :mod:`finpod.walkforward.store`).
        spec: the fold windows (default: rolling, 3y train, 1y validation, 1y backtest,
            as many folds as fit).
        seeds: a count or a list of seeds, trained per fold.
        steps: env steps per fold × seed (default the strategy's ``train.total_steps``).
        warm_start: fold k's agents start from fold k − 1's winner (weights and optimizer
            state); the folds then run one after the other.
        use_ray: run jobs as Ray tasks (local Ray, or the cluster at ``address``).
        num_cpus: CPUs of a local Ray (default: all).
        cpus_per_job: CPUs each job asks Ray for (and its torch threads).
        device: ``cpu`` or ``cuda[:K]`` for the agents (a GPU job asks Ray for one GPU).
        restart: clear an existing walk-forward in ``out`` with other settings.
        on_progress: called with (jobs done, jobs in all) after each job.
        log: echo of each log line (e.g. the console).
    """
    from finpod.data import load_manifest, load_split
    from finpod.pipeline import resolve_strategy
    from finpod.strategy import load_strategy

    started = time.perf_counter()
    spec = spec or FoldSpec()
    seeds = parse_seeds(seeds)
    if cpus_per_job < 1:
        raise FinpodError(f"--cpus-per-job must be ≥ 1, got {cpus_per_job}", "e.g. 1")
    data, out = Path(data), Path(out)
    manifest = load_manifest(data)
    strat = load_strategy(resolve_strategy(strategy))
    if steps is not None:
        if steps <= 0:
            raise FinpodError(f"--steps must be positive, got {steps}", "e.g. --steps 100000")
        strat.train.total_steps = int(steps)
    market = load_split(data, "all")
    folds = plan_folds(market.timestamps, spec, market.bar, manifest.get("calendar", "XNYS"))
    _check_episode_length(folds, strat)
    settings = {
        "dataset": {"path": str(data.resolve()), "hash": manifest["hash"]},
        "spec": spec.to_dict(),
        "folds": [f.to_dict() for f in folds],
        "seeds": seeds,
        "strategy": strat.to_dict(),
        "warm_start": bool(warm_start),
        "equal_weight": EQUAL_WEIGHT,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    resumed = store.check_settings(out, settings, restart=restart)
    say = store.Log(out, echo=log)
    todo = [(f, s) for f in folds for s in seeds if not store.is_done(out, f.index, s)]
    total = len(folds) * len(seeds)
    say(
        f"{'resuming' if resumed else 'starting'} walk-forward: {len(folds)} folds × "
        f"{len(seeds)} seeds of {strat.algorithm}, {strat.train.total_steps} steps each "
        f"({total - len(todo)} of {total} done) on {data}"
    )
    done = total - len(todo)
    if on_progress is not None:
        on_progress(done, total)

    def finished(res: SeedResult) -> None:
        nonlocal done
        store.save_seed(out, res)
        done += 1
        say(
            f"fold {res.fold} seed {res.seed}: validation {res.score_name} "
            f"{res.best_score:.3f} at {res.best_env_steps} steps, backtest Sharpe "
            f"{res.metrics[AGENT]['sharpe']:.3f} (train {res.train_seconds:.0f} s)"
        )
        if on_progress is not None:
            on_progress(done, total)

    def job(f: Fold, seed: int, warm: tuple[bytes, str] | None) -> SeedJob:
        return SeedJob(
            fold=f.index,
            seed=seed,
            rows={name: f.rows(name) for name in ("train", "validation", "backtest")},
            strategy=strat.to_dict(),
            total_steps=strat.train.total_steps,
            warm_start=None if warm is None else warm[0],
            warm_start_from=None if warm is None else warm[1],
            threads=cpus_per_job,
            device=device,
        )

    payload = market_payload(market)
    runner = (
        _RayRunner(payload, address, num_cpus, cpus_per_job, device, say)
        if use_ray and todo
        else _LocalRunner(payload)
    )
    try:
        if warm_start:
            warm = None
            for f in folds:
                pending = [job(f, s, warm) for s in seeds if not store.is_done(out, f.index, s)]
                runner.run(pending, finished)
                winner = aggregate_fold(out, f, seeds, market.annualization)["winner_seed"]
                warm = (
                    store.read_checkpoint_bytes(out, f.index, winner),
                    f"fold {f.index} seed {winner}",
                )
        else:
            runner.run([job(f, s, None) for f, s in todo], finished)
    except KeyboardInterrupt:
        say(f"interrupted with {done} of {total} jobs done; run the same command to resume")
        raise
    finally:
        runner.close()
    result = summarize(out, folds, seeds, market.annualization, settings, manifest)
    say(
        f"done in {time.perf_counter() - started:.0f} s: active return vs equal weight "
        f"{_fmt_hac(result.hac['vs_equal_weight'])}; report {result.report}"
    )
    return result


def _check_episode_length(folds: list[Fold], strat: Any) -> None:
    length = strat.env.get("episode_length")
    shortest = min(f.splits["train"]["bars"] for f in folds)
    if length is not None and int(length) > shortest - 1:
        raise FinpodError(
            f"the strategy's episodes are {length} bars but the shortest fold's train window "
            f"has {shortest} bars",
            "use a longer --train window or a strategy with a shorter env.episode_length",
        )


def _fmt_hac(h: dict[str, Any]) -> str:
    if h.get("t") is None:
        return "HAC t undefined"
    return (
        f"mean {h['annual_mean'] * 100:+.2f} %/yr, HAC t = {h['t']:.2f} "
        f"(p = {h['p']:.3f}, {h['maxlags']} lags; naive t {h['naive_t']:.2f})"
    )


class _LocalRunner:
    """Jobs one after the other in this process."""

    def __init__(self, payload: dict[str, Any]) -> None:
        self.payload = payload

    def run(self, jobs: list[SeedJob], finished: Callable[[SeedResult], None]) -> None:
        for j in jobs:
            finished(run_seed_job(self.payload, j))

    def close(self) -> None:
        pass


def _remote_seed_job(payload: dict[str, Any], job: SeedJob) -> SeedResult:
    return run_seed_job(payload, job)


class _RayRunner:
    """Jobs as Ray tasks: as many run at once as the cluster's free CPUs (GPUs) allow."""

    def __init__(
        self,
        payload: dict[str, Any],
        address: str | None,
        num_cpus: int | None,
        cpus_per_job: int,
        device: str,
        say: Callable[[str], None],
    ) -> None:
        import ray

        self.ray = ray
        self.started = _connect(address, num_cpus)
        self.ref = ray.put(payload)
        gpus = 1 if device.startswith("cuda") else 0
        self.remote = ray.remote(_remote_seed_job).options(
            num_cpus=cpus_per_job, num_gpus=gpus, max_retries=1, retry_exceptions=False
        )
        free = ray.available_resources().get("CPU", 0.0)
        self.say = say
        self.fit = int(free // cpus_per_job)
        say(f"Ray: {free:g} CPUs free, room for {self.fit} job(s) at once")

    def run(self, jobs: list[SeedJob], finished: Callable[[SeedResult], None]) -> None:
        ray = self.ray
        pending = {self.remote.remote(self.ref, j): j for j in jobs}
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    j = pending.pop(ref)
                    try:
                        res = ray.get(ref)
                    except Exception as err:  # noqa: BLE001 (a task's error, re-raised as one line)
                        raise _task_error(err, j) from err
                    finished(res)
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()


def _task_error(err: Exception, job: SeedJob) -> FinpodError:
    cause = getattr(err, "cause", None) or err
    if isinstance(cause, FinpodError):
        return cause
    first = (str(cause).strip().splitlines() or [""])[-1]
    return FinpodError(
        f"fold {job.fold} seed {job.seed} failed: {type(cause).__name__}: {first[:300]}",
        "see walkforward.log; run the same command again to resume",
    )


def _connect(address: str | None, num_cpus: int | None) -> bool:
    """Connect to Ray (in-process local Ray by default); whether this call started it."""
    import ray

    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(
        logging.ERROR
    )
    common: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": logging.WARNING,
    }
    try:
        if address is None:
            ray.init(address="local", num_cpus=num_cpus, **common)
        else:
            ray.init(address=address, **common)
    except (ConnectionError, ValueError, RuntimeError) as err:
        where = "a local Ray instance" if address is None else f"the Ray cluster at {address}"
        raise FinpodError(
            f"cannot start or reach {where}: {err}", "check --address, or pass --no-ray"
        ) from err
    return True


# ------------------------------------------------------------------------- aggregation
def aggregate_fold(out: Path, fold: Fold, seeds: list[int], annualization: float) -> dict[str, Any]:
    """The fold's winner among its seeds and the DSR/PBO of that choice (``fold.json``)."""
    from finpod.backtest.selection import selection_statistics
    from finpod.runs.candidates import CandidateSet

    recs = [store.load_seed(out, fold.index, s) for s in seeds]
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
    rec = store.json_safe(
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
    atomic_write_json(store.fold_dir(out, fold.index) / "fold.json", rec)
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
    """Stitch the folds, test the active return, write the tables, summary and report."""
    from finpod.backtest import metrics as m
    from finpod.backtest.runner import benchmark_label, universe_disclosure

    fold_recs = [aggregate_fold(out, f, seeds, annualization) for f in folds]
    stitched_parts, seed_parts = [], {f"seed-{s}": [] for s in seeds}
    fold_rows, seed_rows, sel_rows = [], [], []
    windows = folds_frame(folds).set_index("fold")
    for f, rec in zip(folds, fold_recs, strict=True):
        recs = {r["seed"]: r for r in rec["_records"]}
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
                "chose_among": f"{len(seeds)} seeds' checkpoints",
                "selected": rec["winner_candidate"],
                "n": sel.get("num_trials"),
                "selected_validation_sharpe_per_bar": sel.get("selected_validation_sharpe"),
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
                    "selected_validation_sharpe_per_bar": st.get("selected_validation_sharpe"),
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
    metrics = pd.DataFrame(
        {c: m.performance_metrics(stitched[c], annualization, benchmark=bench) for c in strategies}
        | {
            c: m.performance_metrics(seed_returns[c], annualization, benchmark=bench)
            for c in seed_returns
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
    summary = store.json_safe(
        {
            "settings": {k: v for k, v in settings.items() if k != "folds"},
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
    from finpod.walkforward.report import render_report

    atomic_write_text(result.report, render_report(result, folds))
    return result


__all__ = [
    "DEFAULT_STRATEGY",
    "EQUAL_WEIGHT",
    "WalkForwardResult",
    "aggregate_fold",
    "parse_seeds",
    "run_walkforward",
    "summarize",
]
