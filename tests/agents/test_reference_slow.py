"""Reference checks against answers nobody here wrote (slow: run with ``-m slow``).

Budget (2-core CPU, one torch thread): measured on a shared machine whose other
processes used ~90 % of the CPU, the Pendulum group (PPO 300k steps, SAC 14k, TD3 16k,
DDPG 20k) took 18 minutes and the market group (PPO 400k steps, SAC 40k, per regime)
7 minutes; expect well under half of that on an idle machine.

- gymnasium's Pendulum-v1 through the gymnasium adapter: mean return ≥ −250 over 10
  evaluation episodes (seeds never used in training or checkpoint selection).
- finpod's synthetic ``alpha`` market (planted signal, known optimal policy): the agent
  picked on validation reaches ≥ 60 % of the oracle policy's Sharpe on the backtest split
  (not the split that picked it).
- the ``null`` market (no signal): the agent's backtest excess return over equal-weight
  buy-and-hold is not significant in either direction once its costs are added back
  (|t| < 2 of daily excess returns before costs), and not significant after costs.

The smaller versions of these checks that run on every change are in ``test_learning.py``.
"""

from __future__ import annotations

import math

import pytest
import torch

from finpod.agents import load_checkpoint, make_agent
from finpod.agents.gym_adapter import GymVecEnv, evaluate_gym
from finpod.agents.train import make_trading_eval, train

pytestmark = pytest.mark.slow

#: Pendulum settings: (num_envs, env steps, reward scale, hparams). Rewards are scaled
#: for learning only; evaluation reports the env's own returns.
PENDULUM = {
    "ppo": (
        16,
        300_000,
        0.1,
        {
            "horizon": 256,
            "gamma": 0.95,
            "learning_rate": 1e-3,
            "minibatch_size": 256,
            "update_epochs": 10,
        },
    ),
    "sac": (
        4,
        14_000,
        1.0,
        {"learning_starts": 2_000, "gradient_steps": 2, "buffer_size": 100_000},
    ),
    "td3": (
        4,
        16_000,
        1.0,
        {"learning_starts": 2_000, "gradient_steps": 2, "buffer_size": 100_000},
    ),
    "ddpg": (
        4,
        20_000,
        1.0,
        {"learning_starts": 2_000, "gradient_steps": 2, "buffer_size": 100_000},
    ),
}


@pytest.mark.parametrize("algo", sorted(PENDULUM))
def test_solves_pendulum(algo, tmp_path):
    torch.set_num_threads(1)
    num_envs, steps, scale, hp = PENDULUM[algo]
    env = GymVecEnv("Pendulum-v1", num_envs, reward_scale=scale)
    agent = make_agent(algo, hp, env.obs_dim, env.action_dim, "cpu", seed=0)
    # Checkpoints are selected on episodes seeded 10_000…, scored on 20_000… (held out).
    res = train(
        agent,
        env,
        total_steps=steps,
        eval_every=steps // 8,
        run_dir=tmp_path,
        progress=False,
        eval_fn=lambda a: evaluate_gym(a, "Pendulum-v1", 10, seed=10_000),
    )
    best = load_checkpoint(res.best_checkpoint)
    score = evaluate_gym(best, "Pendulum-v1", 10, seed=20_000)
    print(
        f"{algo} Pendulum-v1: held-out mean return {score:.1f} (selection {res.best_score:.1f} "
        f"at {res.best_env_steps} steps)"
    )
    assert score >= -250.0


# --------------------------------------------------------------------------- markets
SYNTH = {"n_tickers": 5, "n_bars": 1500, "seed": 1, "alpha_strength": 0.2}
SPLITS = {"train": (0, 900), "validation": (900, 1200), "backtest": (1200, 1500)}
MARKET_AGENTS = {
    "ppo": (
        32,
        400_000,
        {
            "horizon": 64,
            "gamma": 0.9,
            "minibatch_size": 256,
            "update_epochs": 4,
            "log_std_init": -0.5,
        },
    ),
    "sac": (
        8,
        40_000,
        {
            "gamma": 0.8,
            "learning_starts": 5_000,
            "buffer_size": 100_000,
            "init_alpha": 0.2,
            "actor_hidden": [128, 128],
            "critic_hidden": [128, 128],
        },
    ),
}


def _env_config():
    from finpod.env import EnvConfig

    return EnvConfig(action_mode="weights", cost_rate=0.001, reward="log_return", episode_length=64)


def _splits(regime):
    from finpod.data import make_synthetic

    m = make_synthetic(regime=regime, **SYNTH)
    return {k: m.slice(a, b) for k, (a, b) in SPLITS.items()}


def _fixed_policy_rollout(market, weights):
    """Rollout of a policy that plays ``weights[t]`` (T, N) at bar t."""
    from finpod.env import rollout

    step = iter(range(market.num_bars))
    return rollout(lambda obs: weights[next(step)].unsqueeze(0), market, _env_config())


def _train(algo, markets, tmp_path):
    from finpod.env import VecTradingEnv

    torch.set_num_threads(1)
    num_envs, steps, hp = MARKET_AGENTS[algo]
    config = _env_config()
    env = VecTradingEnv(markets["train"], config, num_envs=num_envs, seed=0)
    agent = make_agent(algo, hp, env.obs_dim, env.action_dim, "cpu", seed=0)
    res = train(
        agent,
        env,
        total_steps=steps,
        eval_every=steps // 10,
        run_dir=tmp_path,
        progress=False,
        eval_fn=make_trading_eval(markets["validation"], config, "sharpe"),
    )
    return load_checkpoint(res.best_checkpoint), res


@pytest.mark.parametrize("algo", sorted(MARKET_AGENTS))
def test_reaches_most_of_the_oracle_sharpe_on_the_alpha_market(algo, tmp_path):
    from finpod.data import oracle_weights
    from finpod.env import rollout, score

    markets = _splits("alpha")
    agent, res = _train(algo, markets, tmp_path)
    test = markets["backtest"]  # picked on validation, scored here
    oracle = score(_fixed_policy_rollout(test, oracle_weights(test)), "sharpe")
    n = test.num_stocks
    hold = score(_fixed_policy_rollout(test, torch.full((test.num_bars, n), 1.0 / n)), "sharpe")
    mine = rollout(lambda obs: agent.act(obs, deterministic=True), test, _env_config())
    agent_score = score(mine, "sharpe")
    print(
        f"{algo} alpha market: backtest Sharpe agent {agent_score:.3f}, oracle {oracle:.3f} "
        f"({agent_score / oracle:.0%}), buy-and-hold {hold:.3f} (validation {res.best_score:.3f})"
    )
    assert oracle > 1.0  # the planted signal is there to be found
    assert agent_score >= 0.6 * oracle


@pytest.mark.parametrize("algo", sorted(MARKET_AGENTS))
def test_no_significant_edge_on_the_null_market(algo, tmp_path):
    from finpod.env import rollout, score

    markets = _splits("null")
    agent, res = _train(algo, markets, tmp_path)
    test = markets["backtest"]
    n = test.num_stocks
    mine = rollout(lambda obs: agent.act(obs, deterministic=True), test, _env_config())
    hold = _fixed_policy_rollout(test, torch.full((test.num_bars, n), 1.0 / n))
    excess = (mine.returns - hold.returns).to_numpy()
    gross = excess + mine.costs.iloc[1:].to_numpy() / mine.account_value.iloc[:-1].to_numpy()

    def t_of(x):
        return x.mean() / (x.std(ddof=1) / math.sqrt(len(x)) + 1e-12)

    t_stat, t_gross = t_of(excess), t_of(gross)
    print(
        f"{algo} null market: backtest Sharpe agent {score(mine, 'sharpe'):.3f}, buy-and-hold "
        f"{score(hold, 'sharpe'):.3f}, t-stat of daily excess return {t_stat:.2f} after costs, "
        f"{t_gross:.2f} before (best validation Sharpe {res.best_score:.3f})"
    )
    assert abs(t_gross) < 2.0  # no edge either way beyond what costs explain
    assert t_stat < 2.0
