"""``EnvConfig``: every knob of the trading MDP, validated once."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

import torch

from finpod.errors import FinpodError

ACTION_MODES = ("shares", "weights")
FILL_PRICES = ("open", "close")
REWARDS = ("value_change", "log_return", "differential_sharpe", "drawdown_penalty")
DTYPES = {"float32": torch.float32, "float64": torch.float64}


@dataclass
class EnvConfig:
    """Trading MDP settings shared by training, validation and backtest rollouts."""

    initial_cash: float = 1_000_000.0
    """Starting cash of every episode, in dollars."""
    action_mode: str = "shares"
    """``"shares"``: action a ∈ [-1, 1]^N trades trunc(a · max_shares) shares per ticker;
    ``"weights"``: a is a target portfolio (long-only weights clip(a, 0, 1), normalized to
    sum ≤ 1; with ``allow_short`` a / max(1, Σ|a|)), sized at the close of the decision bar."""
    max_shares: int = 100
    """Largest order per ticker and step in ``"shares"`` mode, in shares."""
    fill_price: str = "open"
    """Price of bar t+1 at which an order decided at bar t fills: ``"open"`` or ``"close"``."""
    cost_rate: float = 0.002
    """Proportional transaction cost charged on traded notional (0.002 = 0.2 %)."""
    slippage: float = 0.0
    """Adverse price move on every fill: buys at price·(1+slippage), sells at price·(1−slippage)."""
    allow_short: bool = False
    """Let sells exceed holdings (negative holdings)."""
    allow_negative_cash: bool = False
    """Let buys exceed available cash (borrowing); otherwise buys are scaled down to cash."""
    integer_shares: bool = True
    """Trade whole shares only (orders are truncated toward zero)."""
    reward: str = "value_change"
    """``"value_change"``: ΔV / initial_cash; ``"log_return"``: log(V'/V);
    ``"differential_sharpe"``: Moody & Saffell's differential Sharpe ratio of bar returns;
    ``"drawdown_penalty"``: ΔV / initial_cash − drawdown_weight · increase of drawdown."""
    reward_scale: float = 100.0
    """Multiplier on the reward (100 → one reward unit per 1 % of initial cash)."""
    sharpe_decay: float = 0.01
    """EMA rate η of the differential Sharpe ratio (≈ 1 / horizon in bars)."""
    drawdown_weight: float = 1.0
    """Weight of the drawdown increase in the ``"drawdown_penalty"`` reward."""
    episode_length: int | None = None
    """Decision steps per episode; ``None`` = the whole split (T − 1 steps)."""
    dtype: str = "float32"
    """Accounting precision of cash and holdings: ``"float32"`` (fast) or ``"float64"``
    (cent-exact; used by :func:`finpod.env.rollout`). Observations are always float32."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise :class:`FinpodError` naming the first bad field."""
        _choice("action_mode", self.action_mode, ACTION_MODES)
        _choice("fill_price", self.fill_price, FILL_PRICES)
        _choice("reward", self.reward, REWARDS)
        _choice("dtype", self.dtype, tuple(DTYPES))
        if not self.initial_cash > 0:
            raise FinpodError(
                f"env.initial_cash must be > 0, got {self.initial_cash}",
                "set a positive starting capital",
            )
        if int(self.max_shares) != self.max_shares or self.max_shares < 1:
            raise FinpodError(
                f"env.max_shares must be an integer ≥ 1, got {self.max_shares}",
                "e.g. max_shares = 100",
            )
        for name in ("cost_rate", "slippage"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise FinpodError(
                    f"env.{name} must be in [0, 1), got {value}", "e.g. cost_rate = 0.002"
                )
        if not self.reward_scale > 0:
            raise FinpodError(f"env.reward_scale must be > 0, got {self.reward_scale}")
        if not 0.0 < self.sharpe_decay < 1.0:
            raise FinpodError(f"env.sharpe_decay must be in (0, 1), got {self.sharpe_decay}")
        if self.drawdown_weight < 0:
            raise FinpodError(f"env.drawdown_weight must be ≥ 0, got {self.drawdown_weight}")
        if self.episode_length is not None and (
            int(self.episode_length) != self.episode_length or self.episode_length < 1
        ):
            raise FinpodError(
                f"env.episode_length must be a positive integer or None, got {self.episode_length}",
                "use None for the whole split",
            )

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> EnvConfig:
        """Build from a mapping (e.g. a strategy file's ``[env]`` table); unknown keys fail."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise FinpodError(
                f"unknown env setting {unknown[0]!r}", f"known settings: {', '.join(sorted(known))}"
            )
        return cls(**values)


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise FinpodError(
            f"env.{name} = {value!r} is not valid", f"use one of {', '.join(allowed)}"
        )
