"""The wide-bets strategy's learners size their tilts, not only their direction."""

from __future__ import annotations

from pathlib import Path

import torch

from finpod.agents import ALGORITHMS, make_agent
from finpod.agents.cross_section import hparams_for_env
from finpod.backtest.ceiling import signal_tilt_policy
from finpod.data.synthetic_market import make_synthetic
from finpod.env import VecTradingEnv, rollout
from finpod.strategy import load_strategy

WIDE = Path(__file__).resolve().parents[1] / "strategies" / "active_wide.toml"
#: A quarter of a pod's steps (the strategy's pod_steps is 200,000).
STEPS = 65_536


def test_the_wide_strategys_mean_tilt_grows_toward_the_signal_within_a_quarter_pod():
    """PPO moves its policy one small trust-region step per rollout: settings with too few
    rollouts per pod (or too little exploration to move in) leave the deterministic tilt a
    small fraction of what the signal asks even where its direction is right. After a
    quarter of a pod on a planted-alpha market, the regression slope of the agent's
    actions on the signal rule's must be well away from zero."""
    s = load_strategy(WIDE)
    config = s.config
    market = make_synthetic(20, 1000, bar="1d", regime="alpha", seed=1)
    env = VecTradingEnv(market, config, num_envs=s.train.num_envs, seed=0)
    hp = hparams_for_env(ALGORITHMS["ppo"][0], s.hparams, env)
    torch.manual_seed(0)
    agent = make_agent("ppo", hp, env.obs_dim, env.action_dim, "cpu", seed=0)
    agent.learn(env, STEPS)

    rule = signal_tilt_policy(market, config)
    pairs: list[tuple[torch.Tensor, torch.Tensor]] = []

    def policy(obs: torch.Tensor) -> torch.Tensor:
        action = agent.act(obs, deterministic=True)
        pairs.append((action, rule(obs)))
        return action

    rollout(policy, market, config)
    agent_actions = torch.cat([a for a, _ in pairs])
    rule_actions = torch.cat([r for _, r in pairs])
    slope = float((agent_actions * rule_actions).sum() / (rule_actions * rule_actions).sum())
    assert slope > 0.07, f"mean tilt {slope:.3f} of the signal rule's"
