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

from finpod.agents.a2c import A2C, A2CParams
from finpod.agents.base import Agent
from finpod.agents.checkpoint import (
    checkpoint_to_bytes,
    load_checkpoint,
    load_checkpoint_bytes,
    read_checkpoint,
    read_checkpoint_bytes,
    save_checkpoint,
)
from finpod.agents.gym_adapter import GymVecEnv, evaluate_gym
from finpod.agents.hparams import build_hparams
from finpod.agents.ppo import PPO, PPOParams
from finpod.agents.registry import ALGORITHMS, make_agent, make_population
from finpod.agents.sac import SAC, SACParams
from finpod.agents.td3 import DDPG, TD3, DDPGParams, TD3Params
from finpod.agents.train import TrainResult, make_trading_eval, train

__all__ = [
    "ALGORITHMS",
    "Agent",
    "GymVecEnv",
    "TrainResult",
    "evaluate_gym",
    "checkpoint_to_bytes",
    "load_checkpoint",
    "load_checkpoint_bytes",
    "read_checkpoint_bytes",
    "make_agent",
    "make_population",
    "make_trading_eval",
    "read_checkpoint",
    "save_checkpoint",
    "train",
    "A2C",
    "A2CParams",
    "PPO",
    "PPOParams",
    "SAC",
    "SACParams",
    "TD3",
    "TD3Params",
    "DDPG",
    "DDPGParams",
    "build_hparams",
]
