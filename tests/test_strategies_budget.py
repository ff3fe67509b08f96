"""The shipped tournament strategies: their execution controls, searches and budgets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from finpod.data.synthetic_market import make_synthetic
from finpod.env import EnvConfig, VecTradingEnv, rollout
from finpod.errors import FinpodError
from finpod.strategy import load_strategy
from finpod.tournament.launch import resolve
from finpod.tournament.search import parse_search, pod_env

STRATEGIES = Path(__file__).resolve().parents[1] / "strategies"
TOURNAMENTS = sorted(p for p in STRATEGIES.glob("*.toml") if load_strategy(p).tournament)
QUICKSTART = STRATEGIES / "quickstart.toml"
INTRADAY = STRATEGIES / "intraday.toml"
#: `finpod run` must finish in 10 minutes from a fresh clone: ~1 min install, the dataset
#: and the backtest take the rest. The quick start's budget counts env steps (the same run
#: whatever the machine's load); 10.3M took 4 minutes on 2 idle CPU cores (active mode).
QUICKSTART_MAX_BUDGET_STEPS = 12_000_000


def test_the_quick_start_and_intraday_strategies_ship_as_tournaments():
    assert {QUICKSTART, INTRADAY} <= set(TOURNAMENTS)


@pytest.mark.parametrize("path", TOURNAMENTS, ids=lambda p: p.name)
def test_every_searched_pod_env_of_a_shipped_strategy_is_valid(path):
    strategy = load_strategy(path)
    _, space, _ = resolve(strategy)
    parse_search(strategy.search, strategy.algorithm, strategy.hparams, env_base=strategy.config)
    rng = np.random.default_rng(0)
    for _ in range(50):
        drawn = space.sample_env(rng)
        EnvConfig.from_dict(pod_env(strategy.config.to_dict(), drawn))
        child = space.perturb_env(drawn, 0.25, rng)
        EnvConfig.from_dict(pod_env(strategy.config.to_dict(), child))


@pytest.mark.parametrize("path", [QUICKSTART, INTRADAY], ids=lambda p: p.name)
def test_the_strategy_searches_how_its_agents_trade(path):
    _, space, _ = resolve(load_strategy(path))
    searched = {spec.name for spec in space.env}
    assert {"no_trade_band", "turnover_penalty"} <= searched
    assert searched & {"decision_interval", "decision_times"}


def test_the_quick_start_budget_counts_env_steps_and_leaves_room_in_ten_minutes():
    config, _, _ = resolve(load_strategy(QUICKSTART))
    assert config.budget.kind == "steps"
    assert config.budget.amount <= QUICKSTART_MAX_BUDGET_STEPS


class JitteryWeights:
    """Equal weights with fresh noise of ``noise`` × the weight every bar: a policy that
    never holds still, as an untrained agent does."""

    def __init__(self, num_stocks: int, noise: float = 0.3, seed: int = 0) -> None:
        self.n, self.noise = num_stocks, noise
        self.gen = torch.Generator().manual_seed(seed)

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        eps = torch.randn(obs.shape[0], self.n, generator=self.gen)
        return ((1.0 + self.noise * eps) / self.n).clamp(min=0.0).to(obs.device)


def test_the_quick_start_controls_cut_a_jittery_policys_turnover():
    config = load_strategy(QUICKSTART).config
    market = make_synthetic(20, 300, bar="1d", regime="null", seed=3)
    with_controls = rollout(JitteryWeights(20), market, config)
    without = rollout(JitteryWeights(20), market, config.without_controls())
    assert float(with_controls.turnover.sum()) < 0.25 * float(without.turnover.sum())
    assert float(with_controls.costs.sum()) < 0.25 * float(without.costs.sum())


def test_the_intraday_strategy_sees_the_calendar_on_minute_bars():
    config = load_strategy(INTRADAY).config
    minute = make_synthetic(4, 2 * 390, bar="1min", regime="null", seed=0)
    env = VecTradingEnv(minute, config, num_envs=2)
    plain = VecTradingEnv(
        minute, EnvConfig.from_dict({**config.to_dict(), "calendar_features": False}), num_envs=2
    )
    # calendar (3) on top of the same layout
    assert env.obs_dim - plain.obs_dim == 3


def test_the_intraday_strategy_on_daily_bars_says_what_to_change():
    config = load_strategy(INTRADAY).config
    daily = make_synthetic(4, 600, bar="1d", regime="null", seed=0)
    with pytest.raises(FinpodError, match="needs intraday bars"):
        VecTradingEnv(daily, config, num_envs=2)


def test_the_intraday_strategy_does_not_go_flat_every_close():
    # At 0.2 % costs a round trip every session costs ~0.4 % of capital a day.
    config = load_strategy(INTRADAY).config
    assert config.cost_rate >= 0.001 and config.flat_at_close is False


def test_the_quick_start_caps_its_wall_time_beside_the_step_budget():
    config, _, _ = resolve(load_strategy(QUICKSTART))
    assert config.time_cap is not None and config.time_cap <= 10 * 60


ON_POLICY = sorted(
    p for p in STRATEGIES.glob("*.toml") if load_strategy(p).algorithm in ("ppo", "a2c")
)


@pytest.mark.parametrize("path", ON_POLICY, ids=lambda p: p.name)
def test_the_shipped_update_settings_move_the_policy(path):
    """One rollout of a shipped strategy's own settings (a sixth of the quick start's pod or
    less) must move its policy: approx KL and clip fraction in PPO's usual ranges, and
    deterministic actions away from the initial policy's. Settings that buy cheap env
    steps with too few gradient steps fail here."""
    from finpod.agents import ALGORITHMS, make_agent
    from finpod.agents.cross_section import hparams_for_env

    s = load_strategy(path)
    config = s.config
    intraday = bool(config.calendar_features) or bool(config.decision_times)
    market = (
        make_synthetic(10, 4 * 390, bar="1min", regime="alpha", seed=1)
        if intraday
        else make_synthetic(20, 400, bar="1d", regime="alpha", seed=1)
    )
    env = VecTradingEnv(market, config, num_envs=s.train.num_envs, seed=0)
    hp = hparams_for_env(ALGORITHMS[s.algorithm][0], s.hparams, env)
    agent = make_agent(s.algorithm, hp, env.obs_dim, env.action_dim, "cpu", seed=0)
    probe = env.reset(seed=1).clone()
    before = agent.act(probe, deterministic=True)
    stats = agent.learn(env, hp["horizon"] * env.num_envs)
    moved = float((agent.act(probe, deterministic=True) - before).abs().max())
    assert moved > 1e-3, f"actions moved by {moved:.2e}"
    if s.algorithm == "ppo":
        assert 1e-4 < stats["approx_kl"] < 0.1, stats
        assert 1e-3 < stats["clip_frac"] < 0.5, stats
    assert agent.updates / agent.env_steps >= 2e-4  # gradient steps per env step
