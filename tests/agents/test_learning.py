"""Agents still learn: small learning checks that run on every change (default suite).

Each check picks its checkpoint on one set of data and scores it on another, so the
score is not inflated by the selection:

- planted-alpha synthetic market (:mod:`finpod.data.synthetic_market`, 3 tickers, strong signal,
  no market factor): PPO and SAC, checkpoint picked on the validation split, scored on the
  backtest split against the oracle policy (:func:`finpod.data.oracle_weights`);
- null market (same generator, no signal): the picked agent shows no significant edge in
  either direction over equal-weight buy-and-hold on the backtest split once its costs
  are added back, and none after costs;
- gymnasium's Pendulum-v1 through :class:`finpod.agents.gym_adapter.GymVecEnv`: PPO picked
  on episodes seeded 10_000… and scored on episodes seeded 20_000….

Budget: about 40 CPU-seconds together on one torch thread (1.5–2 minutes of wall time on
a busy 2-core machine). The slower reference group (bigger budgets, stricter bars) is
``test_reference_slow.py`` (``-m slow``).
Nothing here depends on the observation layout: the agents are built from ``env.obs_dim``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from finpod.agents import load_checkpoint, make_agent
from finpod.agents.gym_adapter import GymVecEnv, evaluate_gym
from finpod.agents.train import make_trading_eval, train

#: Synthetic market: few tickers, a strong planted signal (κ = 0.3), no common market
#: factor so the oracle's Sharpe is not dominated by one market trend. 1,000 daily bars
#: per split keep the Sharpe ratios' sampling error near ±0.5 (annualized).
SYNTH = {
    "n_tickers": 3,
    "n_bars": 3000,
    "seed": 0,
    "alpha_strength": 0.3,
    "market_correlation": 0.0,
    "start": "2000-01-03",
}
SPLITS = {"train": (0, 1000), "validation": (1000, 2000), "backtest": (2000, 3000)}
#: (num_envs, env steps, evaluations, hyperparameters) per algorithm on the markets.
MARKET_AGENTS = {
    "ppo": (
        16,
        60_000,
        6,
        {
            "horizon": 64,
            "gamma": 0.9,
            "learning_rate": 1e-3,
            "minibatch_size": 256,
            "update_epochs": 4,
            "log_std_init": -0.5,
        },
    ),
    "sac": (
        8,
        12_000,
        6,
        {
            "gamma": 0.8,
            "learning_starts": 2_000,
            "buffer_size": 20_000,
            "init_alpha": 0.2,
            "actor_hidden": [64, 64],
            "critic_hidden": [64, 64],
        },
    ),
}
#: Share of the oracle's backtest Sharpe the picked agent must reach.
ORACLE_SHARE = 0.6
#: |t| above which a daily excess return over buy-and-hold counts as a significant edge.
T_BOUND = 2.5


def _env_config():
    from finpod.env import EnvConfig

    return EnvConfig(action_mode="weights", cost_rate=0.001, reward="log_return", episode_length=64)


def _splits(regime: str) -> dict:
    from finpod.data import make_synthetic

    m = make_synthetic(regime=regime, **SYNTH)
    return {k: m.slice(a, b) for k, (a, b) in SPLITS.items()}


def _fixed_weights(market, weights: torch.Tensor):
    """Rollout of a policy that targets ``weights[t]`` (T, N) at bar t."""
    from finpod.env import rollout

    step = iter(range(market.num_bars))
    return rollout(lambda obs: weights[next(step)].unsqueeze(0), market, _env_config())


def _buy_and_hold(market):
    n = market.num_stocks
    return _fixed_weights(market, torch.full((market.num_bars, n), 1.0 / n))


def _t_stat(x: np.ndarray) -> float:
    """t-statistic of the mean of daily values ``x`` (T,)."""
    return float(x.mean() / (x.std(ddof=1) / math.sqrt(len(x)) + 1e-12))


def _train_on_market(algo: str, markets: dict, tmp_path):
    """Train ``algo`` on the train split; the checkpoint with the best validation Sharpe."""
    from finpod.env import VecTradingEnv

    num_envs, steps, evals, hp = MARKET_AGENTS[algo]
    config = _env_config()
    env = VecTradingEnv(markets["train"], config, num_envs=num_envs, seed=0)
    agent = make_agent(algo, hp, env.obs_dim, env.action_dim, "cpu", seed=0)
    res = train(
        agent,
        env,
        total_steps=steps,
        eval_every=steps // evals,
        run_dir=tmp_path,
        progress=False,
        eval_fn=make_trading_eval(markets["validation"], config, "sharpe"),
    )
    return load_checkpoint(res.best_checkpoint), res


@pytest.mark.parametrize("algo", sorted(MARKET_AGENTS))
def test_agent_picked_on_validation_reaches_most_of_the_oracle_sharpe_on_backtest(algo, tmp_path):
    from finpod.data import oracle_weights
    from finpod.env import rollout, score

    markets = _splits("alpha")
    agent, res = _train_on_market(algo, markets, tmp_path)
    test = markets["backtest"]
    oracle = score(_fixed_weights(test, oracle_weights(test)), "sharpe")
    hold = _buy_and_hold(test)
    mine = rollout(lambda obs: agent.act(obs, deterministic=True), test, _env_config())
    agent_sharpe = score(mine, "sharpe")
    t_excess = _t_stat((mine.returns - hold.returns).to_numpy())
    print(
        f"{algo} alpha market, backtest: Sharpe agent {agent_sharpe:.3f}, oracle {oracle:.3f} "
        f"({agent_sharpe / oracle:.0%}), buy-and-hold {score(hold, 'sharpe'):.3f}; t-stat of "
        f"excess over buy-and-hold {t_excess:.2f} (picked at {res.best_env_steps} steps, "
        f"validation Sharpe {res.best_score:.3f})"
    )
    assert oracle > 2.0  # the planted signal is there to be found
    assert agent_sharpe >= ORACLE_SHARE * oracle
    # Sharpe is scale-free: an untrained net whose small random weights happen to lean
    # with the signal can score a fair Sharpe on a tiny position. Trading the signal
    # also beats buy-and-hold, significantly.
    assert t_excess > T_BOUND


@pytest.mark.parametrize("algo", sorted(MARKET_AGENTS))
def test_agent_shows_no_edge_either_way_on_the_null_market(algo, tmp_path):
    from finpod.env import rollout, score

    markets = _splits("null")
    agent, res = _train_on_market(algo, markets, tmp_path)
    test = markets["backtest"]
    hold = _buy_and_hold(test)
    mine = rollout(lambda obs: agent.act(obs, deterministic=True), test, _env_config())
    net = (mine.returns - hold.returns).to_numpy()
    # Costs paid at bar t as a return on the account value before it.
    cost_return = (mine.costs.iloc[1:].to_numpy()) / mine.account_value.iloc[:-1].to_numpy()
    gross = net + cost_return
    t_net, t_gross = _t_stat(net), _t_stat(gross)
    print(
        f"{algo} null market, backtest: Sharpe agent {score(mine, 'sharpe'):.3f}, buy-and-hold "
        f"{score(hold, 'sharpe'):.3f}; t-stat of excess over buy-and-hold {t_net:.2f} after "
        f"costs, {t_gross:.2f} before; costs {cost_return.sum():.2%} of capital "
        f"(validation Sharpe {res.best_score:.3f})"
    )
    assert np.isfinite(net).all() and np.isfinite(cost_return).all()
    # No edge either way before costs: a significant gain means the agent sees the future,
    # a significant loss beyond what it paid in costs means something trades against it.
    assert abs(t_gross) < T_BOUND
    assert t_net < T_BOUND


#: PPO on Pendulum-v1: (num_envs, env steps, reward scale, hyperparameters) and the bar.
#: Random actions score about −1,200; a policy whose gradient points the wrong way (or
#: nowhere) stays there. The slow reference group asks for −250 with 300k steps.
PENDULUM_PPO = (
    16,
    80_000,
    0.1,
    {
        "horizon": 256,
        "gamma": 0.95,
        "learning_rate": 1e-3,
        "minibatch_size": 256,
        "update_epochs": 10,
    },
)
PENDULUM_BAR = -400.0


def test_ppo_swings_up_pendulum_on_held_out_seeds(tmp_path):
    num_envs, steps, scale, hp = PENDULUM_PPO
    env = GymVecEnv("Pendulum-v1", num_envs, reward_scale=scale)
    agent = make_agent("ppo", hp, env.obs_dim, env.action_dim, "cpu", seed=0)
    res = train(
        agent,
        env,
        total_steps=steps,
        eval_every=steps // 8,
        run_dir=tmp_path,
        progress=False,
        eval_fn=lambda a: evaluate_gym(a, "Pendulum-v1", 5, seed=10_000),
    )
    env.close()
    best = load_checkpoint(res.best_checkpoint)
    held_out = evaluate_gym(best, "Pendulum-v1", 10, seed=20_000)
    print(
        f"ppo Pendulum-v1: held-out mean return {held_out:.1f} (selection {res.best_score:.1f} "
        f"at {res.best_env_steps} steps)"
    )
    assert held_out > PENDULUM_BAR
