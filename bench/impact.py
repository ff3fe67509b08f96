#!/usr/bin/env python3
"""What square-root market impact does to an agent's result as its account grows, and to
where a trained agent trades. Prints one JSON line per result.

Cases (all short; run by hand)::

    python bench/impact.py capacity --run RUN --data DATASET   # a trained run's best entry
    python bench/impact.py capacity --data DATASET             # scripted: zero tilt (= reference)
    python bench/impact.py capacity --run RUN --data DATASET --start cash   # pay the first purchase
    python bench/impact.py thin [--steps 60000]                # sqrt vs linear training, 5-min
    python bench/impact.py quintiles --data DATASET --report REPORT_DIR ...   # saved backtests
    python bench/impact.py thin-tournament [--seed 1]     # sqrt vs linear tournaments, 5-min

``capacity``: the run's best leaderboard entry (its own recorded env settings) and the
equal-weight benchmarks on the dataset's backtest split at $1M, $100M and $1B, under the
linear model and under square-root impact (``--coefficient`` Y, default 1.0): annual
return, fees and impact (over the split, / initial capital) and annual turnover
(:func:`finpod.backtest.capacity.capacity_line`). Without ``--run`` the agent is a zero
action in the run settings' mode (in ``active`` mode: holding the reference).

``thin``: two PPO learners with the same seed and budget on a synthetic 5-minute ``alpha``
market of 20 tickers whose share volumes are spread ``--adv-spread``× (100 by default,
on top of prices that differ tenfold) from the most to the least traded, one trained with
linear costs and one with square-root impact at ``--cash``; each is rolled over the last
third of the market (not trained on) with the costs it trained under, and its turnover is
split by quintile of average daily traded value (lowest first). A budget this small says
whether the direction shows, not how large it is: the line says ``"conclusive": false``
unless both learners beat a zero-action Sharpe.

``thin-tournament``: two tournaments from one strategy file (``bench/impact_thin.toml``,
whose comments give the design) that differ only in ``cost_model``, on a dataset built
through the ``files`` source from a synthetic 5-minute ``alpha`` market with volumes
spread ``--adv-spread``× and a causal per-ticker ``log_adv`` column (``--no-log-adv``
leaves it out: the square-root run then sees liquidity only through the env's own
``impact`` observation); the same seed and the same budget in pods of fixed env
steps (the strategy's, or ``--budget``), so machine load changes their wall time, not
their training. Each run's selected agent is backtested (``finpod backtest``'s rollout,
with the costs it trained under) and one line per run gives the selection, the best pod,
its validation Sharpe, the backtest Sharpe and information ratio, turnover by ADV
quintile, fees and impact (/ initial capital). A last line compares the lowest quintiles.

``quintiles``: the same turnover-by-quintile split of saved backtests (e.g. tournaments
trained with ``cost_model = "linear"`` and ``"sqrt"`` on one dataset), on its backtest split.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from finpod.backtest.capacity import ACCOUNT_SIZES, capacity_line  # noqa: E402
from finpod.env import EnvConfig, VecTradingEnv, rollout, score  # noqa: E402


def emit(**row) -> None:
    print(json.dumps(row, default=float), flush=True)


def agent_policy(run_dir: Path | None, config_mode: str, num_stocks: int):
    """(policy, env settings, label) of the run's best entry, or a zero action."""
    if run_dir is None:

        def zero(obs: torch.Tensor) -> torch.Tensor:
            return torch.zeros(obs.shape[0], num_stocks)

        return zero, EnvConfig(action_mode=config_mode), f"scripted zero action ({config_mode})"
    from finpod.backtest.agents import ensemble_policy, load_agents, recorded_env_config
    from finpod.runs import Leaderboard, read_run_info

    meta = read_run_info(run_dir)
    entry = Leaderboard.load(run_dir).entries[0]
    config, _ = recorded_env_config(run_dir, meta, entry)
    policy = ensemble_policy(load_agents(run_dir, [entry], torch.device("cpu")))
    return policy, config, f"best entry {entry.pod_id} of {run_dir.name}"


def capacity(args) -> None:
    from finpod.data import load_split

    market = load_split(args.data, "backtest")
    run = Path(args.run) if args.run else None
    policy, config, label = agent_policy(run, "active", market.num_stocks)
    if args.start:
        config = replace(config, start=args.start)
    for model in ("linear", "sqrt"):
        cfg = replace(config, cost_model=model, impact_coefficient=args.coefficient)
        t0 = time.perf_counter()
        line = capacity_line(market, lambda: policy, cfg, ACCOUNT_SIZES)
        wall = time.perf_counter() - t0
        for row in line.to_dict("records"):
            emit(
                case="capacity",
                agent=label if row["strategy"] == "agent" else row["strategy"],
                cost_model=model,
                impact_coefficient=args.coefficient if model == "sqrt" else None,
                start=cfg.start,
                split=f"backtest {market.timestamps[0]:%Y-%m-%d}..{market.timestamps[-1]:%Y-%m-%d}",
                tickers=market.num_stocks,
                **row,
                wall_s_all_sizes=round(wall, 1),
            )


def quintile_turnover(tx, market, cash: float) -> list[float]:
    """Annual turnover of the fills ``tx`` (a transactions table) in each quintile of the
    tickers' average daily traded value over ``market`` (lowest first), × ``cash``/year."""
    traded = (tx["shares"].abs() * tx["price"]).groupby(tx["ticker"]).sum()
    traded = traded.reindex(market.tickers, fill_value=0.0).to_numpy()
    adv = market.liquidity[:, :, 1].double().mean(0).numpy()
    order = np.argsort(adv)
    years = market.num_bars / market.annualization
    return [float(traded[q].sum() / cash / years) for q in np.array_split(order, 5)]


def quintiles(args) -> None:
    """Turnover by ADV quintile of saved backtests (``finpod backtest`` report folders)."""
    from finpod.backtest import BacktestResult
    from finpod.data import load_split

    market = load_split(args.data, "backtest")
    for folder in args.report:
        result = BacktestResult.load(folder)
        q = quintile_turnover(result.transactions, market, result.initial_capital)
        emit(
            case="quintiles",
            report=str(folder),
            cost_model=result.env_config.cost_model,
            account=result.initial_capital,
            turnover_by_adv_quintile=q,
            lowest_quintile_share=q[0] / max(sum(q), 1e-12),
            information_ratio=float(result.metrics.loc["information_ratio", "agent"]),
            fees_paid=float(result.metrics.loc["fees_paid", "agent"]),
            impact_paid=float(result.metrics.loc["impact_paid", "agent"]),
        )


def thin(args) -> None:
    from finpod.agents import make_agent
    from finpod.data.liquidity import daily_liquidity
    from finpod.data.synthetic_market import make_synthetic

    torch.set_num_threads(1)
    market = make_synthetic(
        20, args.bars, bar="5min", regime="alpha", seed=args.seed, signal_persistence=0.95
    )
    if args.adv_spread > 1:
        # Volumes spread over ``adv_spread``× from the most to the least traded ticker (a
        # real universe spans more than the synthetic prices alone give).
        scale = args.adv_spread ** -torch.linspace(0.0, 1.0, market.num_stocks)
        volume = market.volume * scale.float()
        sigma, adv = daily_liquidity(market.close, volume, market.bar)
        market = replace(market, volume=volume, liquidity=torch.stack([sigma, adv], dim=2).float())
    cut = (2 * market.num_bars) // 3
    train_m, test_m = market.slice(0, cut), market.slice(cut, market.num_bars)
    hp = {
        "horizon": 64,
        "update_epochs": 2,
        "minibatch_size": 512,
        "learning_rate": 1e-3,
        "actor_hidden": [32],
        "critic_hidden": [32],
    }
    base = EnvConfig(
        action_mode="weights",
        cost_rate=0.0005,
        initial_cash=args.cash,
        reward="log_return",
        episode_length=390,
        impact_coefficient=args.coefficient,
    )
    zero = score(rollout(lambda o: torch.zeros(1, 20), test_m, base))
    for model in ("linear", "sqrt"):
        config = replace(base, cost_model=model)
        env = VecTradingEnv(train_m, config, num_envs=args.envs, seed=args.seed)
        agent = make_agent("ppo", hp, env.obs_dim, env.action_dim, "cpu", args.seed)
        t0 = time.perf_counter()
        agent.learn(env, args.steps)
        wall = time.perf_counter() - t0
        # Rolled with the costs each learner trained under, on bars it never saw.
        res = rollout(lambda o, a=agent: a.act(o, deterministic=True), test_m, config)
        q = quintile_turnover(res.transactions, test_m, args.cash)
        emit(
            case="thin",
            trained_with=model,
            account=args.cash,
            env_steps=int(agent.env_steps),
            train_wall_s=round(wall, 1),
            test_bars=test_m.num_bars,
            sharpe=score(res),
            zero_action_sharpe=zero,
            turnover_by_adv_quintile=q,
            lowest_quintile_share=q[0] / max(sum(q), 1e-12),
            impact_pct_capital=float(res.impact.sum()) / args.cash,
            fees_pct_capital=float(res.costs.sum() - res.impact.sum()) / args.cash,
            conclusive=bool(score(res) > zero),
        )


#: The strategy of ``thin-tournament`` (linear costs; the sqrt run changes that line only).
THIN_STRATEGY = REPO / "bench" / "impact_thin.toml"
#: Dollars a day at which the ``log_adv`` column is 0 (a mid-sized name of the market).
LOG_ADV_UNIT = 1e7


def thin_dataset(out: Path, args) -> Path:
    """A dataset (``files`` source) of a synthetic 5-minute ``alpha`` market of 20 tickers
    whose share volumes fall ``args.adv_spread``× from the first ticker to the last, with
    two per-ticker feature columns: the planted ``alpha_signal`` and ``log_adv`` =
    log10(trailing average daily traded value / :data:`LOG_ADV_UNIT`), bars ≤ t only
    (left out with ``args.no_log_adv``: under square-root costs the env's ``impact``
    observation still tells the names apart; under linear costs nothing does)."""
    import pandas as pd

    from finpod.data import build_dataset
    from finpod.data.liquidity import daily_liquidity
    from finpod.data.synthetic_market import synthetic_bars

    bars = synthetic_bars(
        20, args.bars, bar="5min", regime="alpha", seed=args.seed, signal_persistence=0.95
    )
    scale = args.adv_spread ** -np.linspace(0.0, 1.0, len(bars.tickers))
    volume = np.round(bars.volume * scale[None, :]).astype(np.float32)
    _, adv = daily_liquidity(torch.from_numpy(bars.close), torch.from_numpy(volume), bars.bar)
    log_adv = np.log10(adv.clamp(min=1.0).numpy() / LOG_ADV_UNIT)
    columns = {
        "open": bars.open,
        "high": bars.high,
        "low": bars.low,
        "close": bars.close,
        "volume": volume,
        "alpha_signal": bars.extra["alpha_signal"],
        "log_adv": log_adv,
    }
    n_bars, n_tickers = bars.close.shape
    table = pd.DataFrame(
        {
            "timestamp": np.repeat(bars.timestamps, n_tickers),
            "tic": np.tile(bars.tickers, n_bars),
            **{name: np.asarray(v, dtype=np.float64).reshape(-1) for name, v in columns.items()},
        }
    )
    source = out / "bars"
    source.mkdir(parents=True, exist_ok=True)
    table.to_parquet(source / "thin.parquet")
    return Path(
        build_dataset(
            "files",
            out / "dataset",
            path=str(source),
            bar="5min",
            feature_columns=["alpha_signal"] + ([] if args.no_log_adv else ["log_adv"]),
        )
    )


def thin_tournament(args) -> None:
    import tempfile

    from finpod.backtest import run_backtest
    from finpod.data import load_split
    from finpod.pipeline import run_tournament

    torch.set_num_threads(1)
    work = Path(args.out or tempfile.mkdtemp(prefix="impact-thin-"))
    data = thin_dataset(work, args)
    market = load_split(data, "backtest")
    text = THIN_STRATEGY.read_text()
    if text.count('cost_model = "linear"') != 1:
        raise SystemExit(f'{THIN_STRATEGY} must set cost_model = "linear" once')
    lowest, share = {}, {}
    for model in ("linear", "sqrt"):
        strategy = work / f"impact_thin_{model}.toml"
        strategy.write_text(text.replace('cost_model = "linear"', f'cost_model = "{model}"'))
        t0 = time.perf_counter()
        run = run_tournament(
            strategy,
            data,
            budget=args.budget,
            seed=args.seed,
            runs=work / "runs",
            run_id=f"thin-{model}-seed{args.seed}",
            num_cpus=args.cpus,
        )
        wall = time.perf_counter() - t0
        result = run_backtest(run.run_dir)
        q = quintile_turnover(result.transactions, market, result.initial_capital)
        lowest[model], share[model] = q[0], q[0] / max(sum(q), 1e-12)
        metric = result.metrics["agent"]
        entry = run.leaderboard.best()
        emit(
            case="thin-tournament",
            trained_with=model,
            seed=args.seed,
            liquidity_feature=not args.no_log_adv,
            account=result.initial_capital,
            budget=str(run.config.budget),
            pods_trained=run.summary.pods_trained,
            selected=run.leaderboard.selected(),
            best_pod=entry.pod_id,
            best_pod_env_steps=entry.env_steps,
            best_pod_hparams=entry.hparams,
            validation_sharpe=entry.score,
            tournament_wall_s=round(wall, 1),
            backtest=f"{market.timestamps[0]:%Y-%m-%d}..{market.timestamps[-1]:%Y-%m-%d}",
            sharpe=float(metric["sharpe"]),
            equal_weight_daily_sharpe=float(result.metrics.loc["sharpe", "equal_weight_daily"]),
            information_ratio=float(metric["information_ratio"]),
            turnover_by_adv_quintile=q,
            lowest_quintile_share=q[0] / max(sum(q), 1e-12),
            fees_pct_capital=float(metric["fees_paid"]) / result.initial_capital,
            impact_pct_capital=float(metric["impact_paid"]) / result.initial_capital,
            run_dir=str(run.run_dir),
        )
    emit(
        case="thin-tournament-verdict",
        seed=args.seed,
        liquidity_feature=not args.no_log_adv,
        lowest_quintile_turnover=lowest,
        lowest_quintile_share=share,
        # Trading less everywhere also lowers the lowest quintile; leaving thin names alone
        # in particular lowers its share of the turnover.
        sqrt_trades_less_in_thin_names=bool(lowest["sqrt"] < lowest["linear"]),
        sqrt_shifts_turnover_out_of_thin_names=bool(share["sqrt"] < share["linear"]),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("case", choices=("capacity", "thin", "thin-tournament", "quintiles"))
    parser.add_argument("--run", help="run directory (capacity)")
    parser.add_argument("--data", help="dataset directory (capacity, quintiles)")
    parser.add_argument("--report", nargs="*", default=[], help="backtest folders (quintiles)")
    parser.add_argument("--coefficient", type=float, default=1.0, help="Y of the square-root law")
    parser.add_argument("--steps", type=int, default=60_000, help="env steps per learner (thin)")
    parser.add_argument("--bars", type=int, default=78 * 60, help="5-minute bars (thin)")
    parser.add_argument("--envs", type=int, default=32, help="envs per learner (thin)")
    parser.add_argument("--cash", type=float, default=1e8, help="account size (thin)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--adv-spread", type=float, default=100.0, help="most / least traded volume (thin)"
    )
    parser.add_argument(
        "--budget", help="each tournament's budget (thin-tournament; default the strategy's)"
    )
    parser.add_argument("--cpus", type=int, default=2, help="Ray CPUs (thin-tournament)")
    parser.add_argument("--out", help="work folder (thin-tournament; default a temporary one)")
    parser.add_argument(
        "--no-log-adv",
        action="store_true",
        help="thin-tournament: no log_adv user column (the sqrt run keeps the env's impact observation)",
    )
    parser.add_argument("--start", choices=("cash", "reference"), help="override (capacity)")
    args = parser.parse_args()
    if args.case in ("capacity", "quintiles") and not args.data:
        parser.error(f"{args.case} needs --data")
    cases = {"capacity": capacity, "thin": thin, "quintiles": quintiles}
    cases["thin-tournament"] = thin_tournament
    cases[args.case](args)


if __name__ == "__main__":
    main()
