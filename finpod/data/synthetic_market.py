"""Seeded synthetic markets with a known answer, for scale tests and research checks.

Model (per ticker i, bar t; σ = ``annual_vol`` / √(bars per year)):

- a signal ``s[t, i]`` follows a stationary AR(1) with unit variance:
  ``s[t] = φ·s[t-1] + √(1−φ²)·η[t]`` (φ = ``signal_persistence``), exposed as the feature
  ``alpha_signal`` (visible at bar t). It is a user column like any other
  (``Bars.extra["alpha_signal"]``): placed, checked for look-ahead and scaled by
  :mod:`finpod.data.user_features`, exactly as ``finpod download --source files
  --feature-column alpha_signal`` treats the same column written in a CSV;
- the close-to-close log return of bar t is
  ``r[t] = κ·σ·s[t-2] + √(1−κ²)·σ·ε[t]`` with κ = ``alpha_strength`` in the ``alpha``
  regime and κ = 0 in the ``null`` regime; ε mixes a market factor (correlation ρ =
  ``market_correlation``) with idiosyncratic noise;
- ``open[t] = close[t-1]·exp(g[t])`` with an independent small gap ``g``; high/low wrap
  open and close.

So ``alpha_signal`` at t predicts the return from close[t+1] to close[t+2]: a position
decided at t and filled at t+1 (open or close) holds through that bar and earns
``E[r[t+2] | s[t]] = κ·σ·s[t]``. In the ``null`` regime the signal is pure noise.

The optimal policy: with independent signals and equal volatility, the long-only
portfolio that maximizes the expected log growth to first order puts weight on the
tickers with positive signal in proportion to it, ``w ∝ max(s, 0)``
(:func:`oracle_weights`, ``mode="proportional"``); the expected-return maximizer puts
everything in the ticker with the largest positive signal (``mode="top1"``). Both use
only ``alpha_signal`` at t. Ignoring costs, the expected bar return of a weight vector w
is ``κ·σ·Σ wᵢ sᵢ`` (:func:`expected_bar_return`): what a long-only policy filled at the
close of t+1 can expect from the planted component. A fill at the *open* of t+1 also
holds bar t+1's open→close move, which carries ``κ·σ·s[t-1]`` (known at t, correlated
with s[t] through φ), so open fills can earn somewhat more; set ``signal_persistence=0``
to make the close-fill figure exact for both.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from finpod.data.bars import Bars
from finpod.data.calendar import TZ, bar_grid, bar_minutes, get_calendar, normalize_bar
from finpod.data.inmemory import bars_to_market
from finpod.data.market import MarketData, periods_per_year
from finpod.errors import FinpodError

REGIMES = ("null", "alpha")
#: Bars generated per block (bounds the float64 scratch memory of huge markets).
BLOCK_BARS = 50_000
#: Standard deviation of the overnight/open gap, as a fraction of σ.
GAP_FRACTION = 0.2


def _grid(start: str, n_bars: int | None, years: float | None, bar: str) -> pd.DatetimeIndex:
    cal = get_calendar("XNYS")
    s = max(pd.Timestamp(start), cal.first_session)
    if n_bars is None:
        if years is None:
            raise FinpodError("give n_bars or years for a synthetic market")
        end = s + pd.DateOffset(days=round(365.25 * years)) - pd.Timedelta(days=1)
        sess = cal.sessions_in_range(s, min(end, cal.last_session))
        return bar_grid(sess, bar)
    minutes = bar_minutes(bar)
    per_session = 1 if minutes is None else math.ceil(390 / minutes)
    n_sess = n_bars // per_session + 3
    sess = cal.sessions_in_range(s, cal.last_session)[:n_sess]
    grid = bar_grid(sess, bar)
    if len(grid) < n_bars:
        raise FinpodError(
            f"n_bars={n_bars} runs past the calendar's end", "start earlier or use fewer bars"
        )
    return grid[:n_bars]


def synthetic_bars(
    n_tickers: int = 10,
    n_bars: int | None = 1000,
    *,
    years: float | None = None,
    bar: str = "1d",
    regime: str = "null",
    seed: int = 0,
    start: str = "2015-01-02",
    annual_vol: float = 0.3,
    alpha_strength: float = 0.1,
    signal_persistence: float = 0.9,
    market_correlation: float = 0.3,
    late_listings: int = 0,
    progress: Callable[[int], None] | None = None,
) -> Bars:
    """Generate a synthetic market as :class:`~finpod.data.bars.Bars` (float32, with
    ``extra["alpha_signal"]``). See the module docstring for the model.

    Args:
        n_tickers: N.
        n_bars: T (bars on the XNYS grid from ``start``); or None with ``years``.
        years: length in calendar years (used when ``n_bars`` is None).
        bar: ``"1d"`` or ``"<N>min"``.
        regime: ``"null"`` (κ = 0) or ``"alpha"``.
        seed: every array is a deterministic function of the arguments.
        late_listings: that many tickers (the last ones) list at a random bar in the first
            half; before it they have no price and are not tradable.
        progress: called with the number of bars generated after each block.
    """
    if regime not in REGIMES:
        raise FinpodError(f"unknown synthetic regime {regime!r}", "use null or alpha")
    if n_tickers < 1:
        raise FinpodError("a synthetic market needs at least one ticker")
    if (
        not 0 <= alpha_strength < 1
        or not 0 <= signal_persistence < 1
        or not 0 <= market_correlation < 1
    ):
        raise FinpodError(
            "alpha_strength, signal_persistence and market_correlation must lie in [0, 1)"
        )
    bar = normalize_bar(bar)
    grid = _grid(start, n_bars, years, bar)
    T, N = len(grid), n_tickers
    if T < 3:
        raise FinpodError("a synthetic market needs at least 3 bars")
    rng = np.random.default_rng(seed)
    sigma = annual_vol / math.sqrt(periods_per_year(bar))
    kappa = alpha_strength if regime == "alpha" else 0.0
    phi = signal_persistence
    bar_volume = 1e6 if bar == "1d" else 1e6 / 390 * (bar_minutes(bar) or 1)

    out = {
        k: np.empty((T, N), dtype=np.float32)
        for k in ("open", "high", "low", "close", "volume", "signal")
    }
    price = np.exp(rng.uniform(np.log(20), np.log(200), N))
    s_prev = rng.standard_normal(N)
    s_hist = [rng.standard_normal(N), rng.standard_normal(N)]  # s[t-2], s[t-1] before bar 0
    for b0 in range(0, T, BLOCK_BARS):
        b1 = min(T, b0 + BLOCK_BARS)
        n = b1 - b0
        eta = rng.standard_normal((n, N))
        s = _ar1(eta, phi, s_prev)
        s_prev = s[-1]
        s_all = np.concatenate([np.stack(s_hist), s])  # rows: s[b0-2] … s[b1-1]
        s_lag2 = s_all[:n]
        s_hist = [s_all[-2], s_all[-1]]
        m = rng.standard_normal((n, 1))
        e = rng.standard_normal((n, N))
        eps = math.sqrt(market_correlation) * m + math.sqrt(1 - market_correlation) * e
        r = kappa * sigma * s_lag2 + math.sqrt(1 - kappa**2) * sigma * eps
        gap = GAP_FRACTION * sigma * rng.standard_normal((n, N))
        logc = np.log(price) + np.cumsum(r, axis=0)
        close = np.exp(logc)
        prev_close = np.exp(np.vstack([np.log(price)[None, :], logc[:-1]]))
        open_ = prev_close * np.exp(gap)
        wick = 0.5 * sigma * np.abs(rng.standard_normal((2, n, N)))
        high = np.maximum(open_, close) * np.exp(wick[0])
        low = np.minimum(open_, close) * np.exp(-wick[1])
        vol = bar_volume * np.exp(0.3 * rng.standard_normal((n, N)))
        out["open"][b0:b1] = open_
        out["high"][b0:b1] = high
        out["low"][b0:b1] = low
        out["close"][b0:b1] = close
        out["volume"][b0:b1] = np.round(vol)
        out["signal"][b0:b1] = s
        price = close[-1]
        if progress is not None:
            progress(n)
    tradable = np.ones((T, N), dtype=bool)
    if late_listings:
        k = min(late_listings, N)
        firsts = rng.integers(1, max(2, T // 2), size=k)
        for j, f in zip(range(N - k, N), firsts, strict=True):
            tradable[:f, j] = False
            for key in ("open", "high", "low", "close"):
                out[key][:f, j] = np.nan
            out["volume"][:f, j] = 0.0
    return Bars(
        timestamps=grid,
        tickers=[f"S{i:03d}" for i in range(N)],
        open=out["open"],
        high=out["high"],
        low=out["low"],
        close=out["close"],
        volume=out["volume"],
        tradable=tradable,
        filled=np.zeros((T, N), dtype=bool),
        bar=bar,
        extra={"alpha_signal": out["signal"]},
    )


def _ar1(eta: np.ndarray, phi: float, s0: np.ndarray) -> np.ndarray:
    """s[t] = φ s[t-1] + √(1−φ²) η[t], s[-1] = s0, vectorized over columns (exact)."""
    n = len(eta)
    c = math.sqrt(1 - phi * phi)
    if phi == 0.0:
        return c * eta
    # Chunks keep φ^k representable: s[t] = φ^(t+1) s0 + c Σ_k φ^(t-k) η[k].
    out = np.empty_like(eta)
    step = max(1, min(n, int(-200 / math.log10(phi)) if phi < 1 else n))
    prev = s0
    for a in range(0, n, step):
        b = min(n, a + step)
        k = np.arange(b - a)
        pw = phi ** k.astype(np.float64)
        scaled = np.cumsum(eta[a:b] / pw[:, None], axis=0) * pw[:, None]
        out[a:b] = phi * pw[:, None] * prev[None, :] + c * scaled
        prev = out[b - 1]
    return out


def make_synthetic(
    n_tickers: int = 10,
    n_bars: int = 1000,
    *,
    bar: str = "1d",
    regime: str = "null",
    seed: int = 0,
    device: torch.device | str = "cpu",
    **kwargs,
) -> MarketData:
    """A synthetic market as :class:`MarketData` (split ``"all"``) with the standard
    features plus ``alpha_signal`` (last feature). Keyword arguments go to
    :func:`synthetic_bars` (``annual_vol``, ``alpha_strength``, ``signal_persistence``,
    ``market_correlation``, ``late_listings``, ``start``)."""
    bars = synthetic_bars(n_tickers, n_bars, bar=bar, regime=regime, seed=seed, **kwargs)
    return bars_to_market(bars, device=device)


def _signal(market: MarketData) -> torch.Tensor:
    if "alpha_signal" not in market.feature_names:
        raise FinpodError(
            "this market has no alpha_signal feature",
            "use finpod.data.synthetic_market.make_synthetic",
        )
    return market.features[:, :, market.feature_names.index("alpha_signal")]


def oracle_weights(market: MarketData, mode: str = "proportional") -> torch.Tensor:
    """Optimal long-only target weights (T, N) at each bar, from ``alpha_signal`` at t only.

    ``proportional``: w ∝ max(s, 0) over tradable tickers, fully invested when any signal is
    positive, all cash otherwise. ``top1``: weight 1 on the tradable ticker with the largest
    positive signal. Rows sum to 1 or 0; the rest is cash.
    """
    s = _signal(market)
    pos = torch.clamp(s, min=0) * market.tradable.to(s.dtype)
    if mode == "proportional":
        tot = pos.sum(dim=1, keepdim=True)
        return torch.where(tot > 0, pos / tot.clamp(min=1e-12), torch.zeros_like(pos))
    if mode == "top1":
        best = pos.argmax(dim=1, keepdim=True)
        w = torch.zeros_like(pos).scatter_(1, best, 1.0)
        return w * (pos.gather(1, best) > 0)
    raise FinpodError(f"unknown oracle mode {mode!r}", "use proportional or top1")


def expected_bar_return(
    market: MarketData, weights: torch.Tensor, alpha_strength: float, annual_vol: float = 0.3
) -> torch.Tensor:
    """(T,) expected planted log return earned two bars later by ``weights`` decided at t:
    ``κ·σ·Σ wᵢ sᵢ`` (κ, σ as in :func:`synthetic_bars`)."""
    sigma = annual_vol / math.sqrt(periods_per_year(market.bar))
    return alpha_strength * sigma * (weights * _signal(market)).sum(dim=1)


class TargetWeightsPolicy:
    """A policy that returns row t of fixed target weights (T, N) at its t-th call.

    For ``EnvConfig(action_mode="weights")`` rollouts over the whole market from bar 0
    (:func:`finpod.env.rollout` calls the policy once per bar 0 … T − 2, in order). Row t
    may use only bars ≤ t (the oracle's rows use ``alpha_signal`` at t only).
    """

    def __init__(self, weights: torch.Tensor) -> None:
        self.weights = weights.detach().to(torch.float32).cpu()
        self.bar = 0

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """(B, obs_dim) → (B, N) target weights of the current bar."""
        w = self.weights[min(self.bar, len(self.weights) - 1)]
        self.bar += 1
        return w.to(obs.device).expand(obs.shape[0], -1)


def oracle_policy(market: MarketData, mode: str = "proportional") -> TargetWeightsPolicy:
    """The cost-free oracle as a weights-mode policy: :func:`oracle_weights` at every bar."""
    return TargetWeightsPolicy(oracle_weights(market, mode))


#: Cost-aware reference settings (signal units are the signal's standard deviation): a
#: ticker is bought when its signal rises above REFERENCE_ENTER and sold when it falls below
#: REFERENCE_EXIT; each held ticker gets REFERENCE_SLOT_WEIGHT of the account (the env
#: settings it trades under are :func:`finpod.backtest.ceiling.cost_aware_reference`'s).
#: Chosen with ``bench/reference_alpha.py`` on 1-minute ``alpha`` markets (10 tickers, 20
#: sessions, signal_persistence 0.99, 0.2 % costs, seeds 1 and 2), not on the seeds reported.
REFERENCE_ENTER = 1.5
REFERENCE_EXIT = 0.0
REFERENCE_SLOT_WEIGHT = 0.2


def cost_aware_weights(
    market: MarketData,
    enter: float = REFERENCE_ENTER,
    exit: float = REFERENCE_EXIT,
    slot_weight: float = REFERENCE_SLOT_WEIGHT,
) -> torch.Tensor:
    """(T, N) target weights of the cost-aware reference, from ``alpha_signal`` at ≤ t only.

    A no-trade band in signal space (hysteresis): ticker i is held from the bar its signal
    exceeds ``enter`` until the bar it falls below ``exit``, at ``slot_weight`` each (the
    env scales a sum above 1 down to 1). Between the two thresholds nothing changes, so a
    position is paid for once and held while its expected return lasts (the signal's
    half-life is ln 2 / −ln φ bars), instead of following every move of the signal.
    """
    if not exit < enter:
        raise FinpodError(f"exit ({exit}) must be below enter ({enter})")
    if not 0.0 < slot_weight <= 1.0:
        raise FinpodError(f"slot_weight must be in (0, 1], got {slot_weight}")
    sig = _signal(market).detach().cpu().numpy()
    ok = market.tradable.detach().cpu().numpy()
    held = np.zeros(sig.shape[1], dtype=bool)
    out = np.zeros(sig.shape, dtype=np.float32)
    for t in range(sig.shape[0]):  # a recursion in t: held[t] depends on held[t − 1]
        held = ((held & (sig[t] > exit)) | (sig[t] > enter)) & ok[t]
        out[t] = held * slot_weight
    return torch.from_numpy(out)


__all__ = [
    "REFERENCE_ENTER",
    "REFERENCE_EXIT",
    "REFERENCE_SLOT_WEIGHT",
    "REGIMES",
    "TZ",
    "TargetWeightsPolicy",
    "cost_aware_weights",
    "expected_bar_return",
    "make_synthetic",
    "oracle_policy",
    "oracle_weights",
    "synthetic_bars",
]
