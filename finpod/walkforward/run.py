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

import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from finpod.atomic import atomic_write_text
from finpod.data import Manifest, load_split
from finpod.device import pick_device
from finpod.env.observed import observed_feature_names
from finpod.errors import FinpodError
from finpod.grammar import Seeds, parse_device, parse_seeds
from finpod.pipeline import resolve_strategy
from finpod.strategy import load_strategy
from finpod.walkforward import directory
from finpod.walkforward.folds import Fold, FoldSpec, check_spec, plan_folds
from finpod.walkforward.job import SeedJob, SeedResult, market_payload
from finpod.walkforward.report import plural, render_report, steps_text
from finpod.walkforward.results import (
    AGENT,
    EQUAL_WEIGHT,
    WalkForwardResult,
    aggregate_fold,
    summarize,
)
from finpod.walkforward.runners import LocalRunner, RayRunner

#: The strategy a walk-forward trains when none is given.
DEFAULT_STRATEGY = Path("strategies/ppo.toml")


def run_walkforward(
    data: str | Path,
    strategy: str | Path = DEFAULT_STRATEGY,
    out: str | Path = "reports/walkforward",
    *,
    spec: FoldSpec | None = None,
    seeds: Seeds | int | str | list[int] = 3,
    steps: int | None = None,
    warm_start: bool = False,
    use_ray: bool = True,
    address: str | None = None,
    num_cpus: int | None = None,
    cpus_per_job: int = 1,
    device: str | None = None,
    restart: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> WalkForwardResult:
    """Walk-forward of ``strategy`` over ``data``; everything written under ``out``.

    Args:
        data: dataset directory (``finpod download``); every bar of it is re-split.
        strategy: strategy TOML file (its algorithm, env and train settings).
        out: the walk-forward directory (created; an existing one with the same settings
            resumes, see :mod:`finpod.walkforward.directory`).
        spec: the fold windows (default: rolling, 3y train, 1y validation, 1y backtest,
            as many folds as fit).
        seeds: a count or a list of seeds, trained per fold (:class:`finpod.grammar.Seeds`
            or its text: ``3``, ``"0,4,7"``).
        steps: env steps per fold × seed (default the strategy's ``train.total_steps``).
        warm_start: fold k's agents start from fold k − 1's winner (weights and optimizer
            state); the folds then run one after the other.
        use_ray: run jobs as Ray tasks (local Ray, or the cluster at ``address``).
        num_cpus: CPUs of a local Ray (default: all).
        cpus_per_job: CPUs each job asks Ray for (and its torch threads).
        device: ``auto``, ``cpu`` or ``cuda[:K]`` for the agents (a GPU job asks Ray for
            one GPU); None: the strategy's ``train.device``. ``auto`` is ``cuda`` where
            this machine has one, else ``cpu``.
        restart: clear an existing walk-forward in ``out`` with other settings.
        on_progress: called with (jobs done, jobs in all) after each job.
        log: echo of each log line (e.g. the console).
    """

    started = time.perf_counter()
    spec = spec or FoldSpec()
    # The settings that need no data first, then the windows against the data: all of it
    # before any job is trained or Ray starts.
    seeds = list(parse_seeds(seeds))
    if cpus_per_job < 1:
        raise FinpodError(f"--cpus-per-job must be ≥ 1, got {cpus_per_job}", "e.g. 1")
    if steps is not None and steps <= 0:
        raise FinpodError(f"--steps must be positive, got {steps}", "e.g. --steps 100000")
    check_spec(spec)
    data, out = Path(data), Path(out)
    manifest = Manifest.load(data)
    strat = load_strategy(resolve_strategy(strategy))
    if steps is not None:
        strat = strat.with_train(total_steps=int(steps))
    device = str(parse_device(device or strat.train.device))
    if device == "auto":
        device = pick_device(device).type
    observed_feature_names(manifest.features, strat.config.user_features)
    market = load_split(data, "all")
    folds = plan_folds(market.timestamps, spec, market.bar, manifest.calendar or "XNYS")
    _check_episode_length(folds, strat)
    settings = {
        "dataset": {"path": str(data.resolve()), "hash": manifest.hash},
        "spec": spec.to_dict(),
        "folds": [f.to_dict() for f in folds],
        "seeds": seeds,
        "strategy": strat.to_dict(),
        "warm_start": bool(warm_start),
        "equal_weight": EQUAL_WEIGHT,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    with directory.lock(out, say=log):  # one walk-forward writes a folder at a time
        resumed = directory.check_settings(out, settings, restart=restart)
        say = directory.Log(out, echo=log)
        todo = [(f, s) for f in folds for s in seeds if not directory.is_done(out, f.index, s)]
        total = len(folds) * len(seeds)
        say(
            f"{'resuming' if resumed else 'starting'} walk-forward: {plural(len(folds), 'fold')} × "
            f"{plural(len(seeds), 'seed')} of {strat.algorithm}, {strat.train.total_steps:,} env "
            f"steps each, or the next whole rollout ({total - len(todo)} of {total} done) on {data}"
        )
        done = total - len(todo)
        if on_progress is not None:
            on_progress(done, total)

        def finished(res: SeedResult) -> None:
            nonlocal done
            directory.save_seed(out, res)
            done += 1
            say(
                f"fold {res.fold} seed {res.seed}: validation {res.score_name} "
                f"{res.best_score:.3f} at {res.best_env_steps:,} steps, backtest Sharpe "
                f"{res.metrics[AGENT]['sharpe']:.3f} (trained {res.env_steps:,} env steps in "
                f"{res.train_seconds:.0f} s)"
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
            RayRunner(payload, address, num_cpus, cpus_per_job, device, say)
            if use_ray and todo
            else LocalRunner(payload)
        )
        try:
            if warm_start:
                warm = None
                for f in folds:
                    pending = [
                        job(f, s, warm) for s in seeds if not directory.is_done(out, f.index, s)
                    ]
                    runner.run(pending, finished)
                    winner = aggregate_fold(out, f, seeds, market.annualization)["winner_seed"]
                    warm = (
                        directory.read_checkpoint_bytes(out, f.index, winner),
                        f"fold {f.index} seed {winner}",
                    )
            else:
                runner.run([job(f, s, None) for f, s in todo], finished)
        except KeyboardInterrupt:
            # In walkforward.log only: the console's one line after a stop is the caller's.
            directory.Log(out)(
                f"interrupted with {done} of {total} jobs done; run the same command to resume"
            )
            raise
        finally:
            runner.close()
        result = summarize(out, folds, seeds, market.annualization, settings, manifest.to_dict())
        atomic_write_text(result.report, render_report(result, folds))
        steps = steps_text(result.summary.get("env_steps") or {}, strat.to_dict())
        say(
            f"done in {time.perf_counter() - started:.0f} s ({steps}): active return vs equal "
            f"weight {_fmt_hac(result.hac['vs_equal_weight'])}; report {result.report}"
        )
        return result


def _check_episode_length(folds: list[Fold], strat: Any) -> None:
    length = strat.config.episode_length
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


__all__ = [
    "DEFAULT_STRATEGY",
    "parse_seeds",
    "run_walkforward",
]
