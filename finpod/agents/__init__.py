"""Agents: PPO, A2C, SAC, TD3, DDPG written against finpod's VecEnv protocol.

Entry points::

    agent = make_agent("ppo", {"learning_rate": 1e-4}, obs_dim, action_dim, device, seed=0)
    stats = agent.learn(env, num_steps=100_000)
    save_checkpoint(agent, "agent.safetensors"); agent = load_checkpoint("agent.safetensors")

A VecEnv (:class:`finpod.env.VecEnv`) has ``num_envs, obs_dim, action_dim, device,
config``, ``reset(seed) -> obs`` and ``step(action) -> (obs, reward, terminated,
truncated, info)`` over ``(num_envs, …)`` tensors (``finpod.env.VecTradingEnv``, or
:class:`GymVecEnv` for gymnasium envs).
"""

from __future__ import annotations

from typing import Any

import torch

from finpod.agents.a2c import A2C, A2CParams
from finpod.agents.base import Agent, build_hparams
from finpod.agents.checkpoint import load_checkpoint, read_checkpoint, save_checkpoint
from finpod.agents.gym_adapter import GymVecEnv, evaluate_gym
from finpod.agents.ppo import PPO, PPOParams
from finpod.agents.sac import SAC, SACParams
from finpod.agents.td3 import DDPG, TD3, DDPGParams, TD3Params
from finpod.agents.train import TrainResult, make_trading_eval, train
from finpod.errors import FinpodError

#: Algorithm name → (hyperparameter dataclass, agent class).
ALGORITHMS: dict[str, tuple[type, type[Agent]]] = {
    "ppo": (PPOParams, PPO),
    "a2c": (A2CParams, A2C),
    "sac": (SACParams, SAC),
    "td3": (TD3Params, TD3),
    "ddpg": (DDPGParams, DDPG),
}


def make_agent(
    algorithm: str,
    hparams: dict[str, Any] | None,
    obs_dim: int,
    action_dim: int,
    device: torch.device | str = "cpu",
    seed: int = 0,
) -> Agent:
    """A fresh agent; same arguments give identical initial weights and random streams."""
    if algorithm not in ALGORITHMS:
        raise FinpodError(
            f"unknown algorithm {algorithm!r}", f"choose one of {', '.join(sorted(ALGORITHMS))}"
        )
    params_cls, agent_cls = ALGORITHMS[algorithm]
    hp = build_hparams(params_cls, hparams, where=f"{algorithm} hparams")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return agent_cls(hp, int(obs_dim), int(action_dim), torch.device(device), int(seed))


__all__ = [
    "ALGORITHMS",
    "Agent",
    "GymVecEnv",
    "TrainResult",
    "evaluate_gym",
    "load_checkpoint",
    "make_agent",
    "make_trading_eval",
    "read_checkpoint",
    "save_checkpoint",
    "train",
]
