"""Vectorized trading MDP in torch (CPU and CUDA), rollouts, scores, gymnasium wrappers."""

from finpod.env.config import EnvConfig
from finpod.env.diagnostics import observation_stats
from finpod.env.gymnasium_env import TradingGymEnv, TradingGymVectorEnv
from finpod.env.protocol import VecEnv
from finpod.env.rollout import Rollout, rollout, score
from finpod.env.tables import ObsLayout
from finpod.env.vec_env import VecTradingEnv

__all__ = [
    "EnvConfig",
    "ObsLayout",
    "Rollout",
    "TradingGymEnv",
    "TradingGymVectorEnv",
    "VecEnv",
    "VecTradingEnv",
    "observation_stats",
    "rollout",
    "score",
]
