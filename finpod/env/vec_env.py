"""``VecTradingEnv``: many trading accounts stepped together on one device."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from finpod.data.market import MarketData
from finpod.env.bootstrap import bootstrap_path, resample_market, uses_bootstrap
from finpod.env.config import ACTIVE_REWARDS, EnvConfig
from finpod.env.core import (
    State,
    StepOut,
    initial_state,
    observe,
    observe_functional,
    reset_where,
    transition,
)
from finpod.env.tables import ObsLayout, Tables, build_tables
from finpod.errors import FinpodError

#: Start bars drawn at once for envs that reset on their own (bankruptcy), see
#: ``VecTradingEnv._pooled_starts``.
START_POOL = 256


class VecTradingEnv:
    """``num_envs`` independent accounts trading ``market`` (the finpod VecEnv protocol).

    Each env runs episodes of ``episode_length`` decision steps (``EnvConfig``; ``None`` =
    the whole split, T − 1 steps) starting at a random bar (``random_start=True``, for
    training) or at bar 0. Episodes of all envs have the same length, so without shorting
    or borrowing (no bankruptcy possible) every env ends on the same step and the end of
    an episode is known on the host with no device sync. With shorting or borrowing an
    account whose value drops to ≤ 0 terminates on its own and is reset alone.

    ``step`` auto-resets ended envs: the returned ``obs`` is then the first observation of
    the next episode and ``info["final_obs"]`` the last observation of the ended one
    (``final_obs`` equals ``obs`` for envs that did not end). All other ``info`` entries
    describe the step just taken (before any reset):

    - ``account_value`` (E,), ``cash`` (E,), ``holdings`` (E, N) shares, after the fill,
      marked at the close of the fill bar;
    - ``trade`` (E, N) executed signed shares (including the env's own orders:
      flat-at-close sells and delisting cash-outs), ``fill_price`` (E, N) price before slippage,
      ``cost`` (E,) dollars, ``notional`` (E,) dollars, ``turnover`` (E,) notional / value
      before the trade; ``bar`` (E,) int64 index of the fill bar in the market;
      ``impact`` (E,) the market-impact part of ``cost``, ``fill_cost`` (E, N) each
      ticker's share of ``cost`` and (square-root costs only) ``fill_impact`` (E, N).

    Execution controls (``EnvConfig.decision_interval``, ``decision_times``,
    ``no_trade_band``, ``partial_adjustment``, ``turnover_penalty``, ``flat_at_close``) act
    inside the step: every call still advances every env by one bar, and an action given on
    a bar that is not a decision bar is ignored (the observation's ``schedule`` slice says
    which bars are decision bars), so per-bar values are recorded as before.

    All tensors live on ``device``; nothing is copied to the host inside ``step``.
    ``compile=True`` runs the step through ``torch.compile`` (falls back to eager, with a
    warning, if compilation fails).
    """

    def __init__(
        self,
        market: MarketData,
        config: EnvConfig | None = None,
        num_envs: int = 1,
        seed: int = 0,
        random_start: bool = True,
        device: torch.device | str | None = None,
        compile: bool = False,
    ) -> None:
        self.config = config if config is not None else EnvConfig()
        self.config.validate()
        if num_envs < 1:
            raise FinpodError(f"num_envs must be ≥ 1, got {num_envs}")
        self.device = torch.device(device) if device is not None else market.device
        self.market = market
        self.num_envs = int(num_envs)
        self.num_stocks = market.num_stocks
        self.random_start = bool(random_start)
        num_bars = market.num_bars
        if num_bars < 2:
            raise FinpodError(
                f"the {market.split} split has {num_bars} bar(s); trading needs at least 2",
                "use a longer date range",
            )
        length = self.config.episode_length
        self.episode_length = num_bars - 1 if length is None else int(length)
        if self.episode_length > num_bars - 1:
            raise FinpodError(
                f"episode_length {self.episode_length} does not fit the {market.split} split "
                f"({num_bars} bars allow at most {num_bars - 1} steps)",
                "lower env.episode_length or use None for the whole split",
            )
        self.max_start = num_bars - 1 - self.episode_length
        self.layout = ObsLayout.for_env(market, self.config)
        self.obs_dim = self.layout.obs_dim
        self.action_dim = market.num_stocks
        self.tables: Tables = build_tables(market, self.config, self.device)
        # Bankruptcy is impossible without shorting or borrowing (value ≥ 0 always).
        self.can_terminate = self.config.allow_short or self.config.allow_negative_cash
        self._generator = torch.Generator(device="cpu")
        self._generator.manual_seed(int(seed))
        # Training envs may run on block-bootstrap paths of the split (never validation
        # or backtest): see finpod.env.bootstrap.
        self.bootstrap = uses_bootstrap(market, self.config, self.random_start)
        self._elapsed = 0
        self._pool: torch.Tensor | list = []
        self._pool_used = 0
        self.state: State | None = None
        self._step_fn = _advance
        if compile:
            self._step_fn = _compiled_advance()

    # -- protocol -----------------------------------------------------------------------
    @property
    def action_mode(self) -> str:
        """How an action is read (``config.action_mode``)."""
        return self.config.action_mode

    def reset(self, seed: int | None = None) -> torch.Tensor:
        """Start a new episode in every env; returns obs (num_envs, obs_dim) float32."""
        if seed is not None:
            self._generator.manual_seed(int(seed))
        self._new_path()
        self.state = initial_state(self._starts(), self.tables, self.config, self.num_stocks)
        self._elapsed = 0
        self._pool: torch.Tensor | list = []
        self._pool_used = 0
        return observe(self.state, self.tables, self.config)

    def step(
        self, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """One decision step of every env (see the class docstring)."""
        if self.state is None:
            raise FinpodError("step() called before reset()", "call env.reset() first")
        if action.shape != (self.num_envs, self.action_dim):
            raise FinpodError(
                f"action has shape {tuple(action.shape)}, expected "
                f"({self.num_envs}, {self.action_dim})",
                "pass one action per env and ticker",
            )
        if action.device != self.device:
            action = action.to(self.device)
        try:
            state, out, obs = self._step_fn(self.state, action, self.tables, self.config)
        except Exception as err:  # a compiler missing at run time: same math, eager
            if self._step_fn is _advance:
                raise
            warnings.warn(f"torch.compile failed ({err}); using the eager step", stacklevel=2)
            self._step_fn = _advance
            state, out, obs = _advance(self.state, action, self.tables, self.config)
        self._elapsed += 1
        final_obs = obs
        info: dict[str, Any] = {
            "account_value": state.value,
            "cash": state.cash,
            "holdings": state.holdings,
            "trade": out.trade,
            "fill_price": out.fill_price,
            "cost": out.cost,
            "notional": out.notional,
            "turnover": out.turnover,
            "impact": out.impact,
            "fill_cost": out.fill_cost,
            "bar": state.t,
        }
        if out.fill_impact is not None:
            info["fill_impact"] = out.fill_impact
        if self.config.reward in ACTIVE_REWARDS:
            # The zero-tilt reference account (same controls, fills and costs), dollars.
            info["reference_value"] = state.ref_value
        if self.can_terminate:
            terminated = state.value <= 0
            truncated = (state.steps >= self.episode_length) & ~terminated
            done = terminated | truncated
            fresh = initial_state(self._pooled_starts(), self.tables, self.config, self.num_stocks)
            state = reset_where(done, state, fresh)
            obs = observe(state, self.tables, self.config)  # rows not done: unchanged
        else:
            terminated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
            ended = self._elapsed >= self.episode_length
            truncated = torch.full((self.num_envs,), ended, dtype=torch.bool, device=self.device)
            if ended:
                self._new_path()
                state = initial_state(self._starts(), self.tables, self.config, self.num_stocks)
                self._elapsed = 0
                obs = observe(state, self.tables, self.config)
        info["final_obs"] = final_obs
        self.state = state
        return obs, out.reward, terminated, truncated, info

    # -- helpers ------------------------------------------------------------------------
    def _new_path(self) -> None:
        # A fresh bootstrap path for the episodes that start now (all envs together).
        if self.bootstrap:
            block = int(self.config.train_bootstrap_block)
            path = bootstrap_path(self.market.num_bars, block, self._generator)
            resampled = resample_market(self.market, path, block)
            self.tables = build_tables(resampled, self.config, self.device)

    def _pooled_starts(self) -> torch.Tensor:
        # Envs that terminate on their own need fresh starts every step; copying them from
        # the host each step would sync a GPU, so a block is drawn at once and consumed.
        if self._pool_used >= len(self._pool):
            self._pool = self._starts(START_POOL)
            self._pool_used = 0
        self._pool_used += 1
        return self._pool[self._pool_used - 1]

    def _starts(self, *batch: int) -> torch.Tensor:
        # Drawn on a CPU generator so CPU and CUDA runs see the same episodes.
        shape = (*batch, self.num_envs)
        if self.random_start and self.max_start > 0:
            starts = torch.randint(0, self.max_start + 1, shape, generator=self._generator)
        else:
            starts = torch.zeros(shape, dtype=torch.int64)
        return starts.to(self.device)

    def close(self) -> None:
        """Release nothing (tensors are freed with the env); for API symmetry."""


def _advance(
    state: State, action: torch.Tensor, tables: Tables, config: EnvConfig
) -> tuple[State, StepOut, torch.Tensor]:
    new_state, out = transition(state, action, tables, config)
    return new_state, out, observe(new_state, tables, config)


def _compiled_advance():
    """``_advance`` through ``torch.compile`` (fuses the elementwise ops into a few loops).

    The first call compiles (tens of seconds on a small CPU; cached on disk after that);
    shapes and config are static, so it compiles once per env.
    """

    def advance(
        state: State, action: torch.Tensor, tables: Tables, config: EnvConfig
    ) -> tuple[State, StepOut, torch.Tensor]:
        new_state, out = transition(state, action, tables, config)
        return new_state, out, observe_functional(new_state, tables, config)

    return torch.compile(advance, dynamic=False)
