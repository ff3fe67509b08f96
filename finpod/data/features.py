"""Causal technical features, vectorized over all tickers, scaled to O(1).

Every feature at bar t is a function of bars ≤ t only (rolling windows and exponential
averages look backwards; nothing is centred or back-filled). Before a window is full, or
before a ticker lists, a feature takes its neutral value (0, or 0.5 for ``rsi_30``).

Definitions follow stockstats (what FinRL's ``FeatureEngineer`` uses); the scaling makes
them comparable across tickers and prices, with the unit in the name of each constant:

Price-relative features are multiplied by V = √(bars per year) ("annualized-volatility
units"): a move of one bar's typical size then reads about the same on daily and minute
bars (an annual volatility of 30 % gives ±0.3 per bar). Each feature is clipped to
±:data:`FEATURE_CLIP` so a corporate action or a crash cannot produce a value of 100.

=================  ==========================================================  ============
name               definition                                                  typical
=================  ==========================================================  ============
``log_return``     ln(close_t / close_{t-1}) · V                               ±0.3
``macd``           (EMA12 − EMA26 of close) / close · V                        ±0.5
``boll_ub``        ((SMA20 + 2·SD20) / close − 1) · V                          0 … 2
``boll_lb``        ((SMA20 − 2·SD20) / close − 1) · V                          −2 … 0
``rsi_30``         RSI over 30 bars (Wilder smoothing) / 100                   0 … 1
``cci_30``         CCI over 30 bars / 100                                      ±2
``dx_30``          directional index over 30 bars / 100                        0 … 1
``close_30_sma``   (SMA30(close) / close − 1) · V                              ±1
``close_60_sma``   (SMA60(close) / close − 1) · V                              ±1.5
``turbulence``     Mahalanobis distance of the day's returns from the last     ~1 (clip 20)
                   252 sessions' mean/covariance, divided by the number of
                   tickers in it (≈ χ²_N / N, so 1 on an ordinary day)
=================  ==========================================================  ============

``turbulence`` is a daily, market-wide feature (the same for every ticker). On intraday
bars it is computed from each session's last close and becomes visible from the first bar
of the **next** session, never during the day it describes.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from finpod.data.calendar import session_of
from finpod.data.market import periods_per_year

#: Feature names, in axis order, of every finpod dataset (sources may append their own).
FEATURES: tuple[str, ...] = (
    "log_return",
    "macd",
    "boll_ub",
    "boll_lb",
    "rsi_30",
    "cci_30",
    "dx_30",
    "close_30_sma",
    "close_60_sma",
    "turbulence",
)
#: Every feature except turbulence is clipped to ± this value.
FEATURE_CLIP = 10.0
#: RSI, CCI and DX are published on a 0–100 scale; dividing by this makes them O(1).
INDEX_SCALE = 100.0
#: Look-back of the turbulence covariance, in sessions (FinRL's choice: one year).
TURBULENCE_WINDOW = 252
#: Scaled turbulence above this is clipped (a crash day reads 20, not 300).
TURBULENCE_CLIP = 20.0
#: Neutral value of each feature before it is defined.
NEUTRAL = {"rsi_30": 0.5}
#: At most this many tickers per block when computing features.
TICKER_BLOCK = 16
#: Bars × tickers per block: bounds the float64 working memory (≈ 40 arrays of 16 MB).
BLOCK_ELEMENTS = 2_000_000

SCALING_DOC = {
    "log_return": "ln(close_t/close_{t-1}) * V, V = sqrt(bars per year), clip +-10",
    "macd": "(EMA12-EMA26)/close * V, clip +-10",
    "boll_ub": "((SMA20+2*SD20)/close - 1) * V, clip +-10",
    "boll_lb": "((SMA20-2*SD20)/close - 1) * V, clip +-10",
    "rsi_30": "RSI(30, Wilder)/100, neutral 0.5",
    "cci_30": "CCI(30)/100, clip +-10",
    "dx_30": "DX(30)/100",
    "close_30_sma": "(SMA30/close - 1) * V, clip +-10",
    "close_60_sma": "(SMA60/close - 1) * V, clip +-10",
    "turbulence": "Mahalanobis(returns; 252-session mean, cov) / #tickers, clipped at 20; daily, visible after the session close",
}


def _smma(x: pd.DataFrame, n: int) -> pd.DataFrame:
    """Wilder's smoothed moving average (what stockstats uses for RSI and DX)."""
    return x.ewm(alpha=1.0 / n, adjust=True, ignore_na=False).mean()


def _rolling_mad(tp: np.ndarray, sma: np.ndarray, n: int) -> np.ndarray:
    """Mean absolute deviation of ``tp`` over the last ``n`` bars around each window's mean.

    Summed over lags (n passes over (T, k)) so memory stays O(T·k), not O(T·k·n).
    """
    acc = np.zeros_like(tp)
    for lag in range(min(n, len(tp))):  # a series shorter than n has no full window
        acc[lag:] += np.abs(tp[: len(tp) - lag] - sma[lag:])
    acc[: n - 1] = np.nan
    return acc / n


def ticker_features(close: np.ndarray, high: np.ndarray, low: np.ndarray, bar: str) -> np.ndarray:
    """Per-ticker features (all but ``turbulence``) for a block of tickers.

    Args:
        close, high, low: (T, k) prices, NaN before a ticker lists.
        bar: bar size, for the annualization of ``log_return``.

    Returns:
        (T, k, F-1) float32 in the order of :data:`FEATURES` without ``turbulence``.
    """
    c = pd.DataFrame(close, dtype=np.float64)
    h = pd.DataFrame(high, dtype=np.float64)
    lo = pd.DataFrame(low, dtype=np.float64)
    out: dict[str, pd.DataFrame | np.ndarray] = {}
    vol_units = math.sqrt(periods_per_year(bar))
    with np.errstate(divide="ignore", invalid="ignore"):
        out["log_return"] = np.log(c).diff() * vol_units
        macd = c.ewm(span=12, adjust=True).mean() - c.ewm(span=26, adjust=True).mean()
        # EMAs start at the first price: hide them until the slower one has a full span.
        macd = macd.where(c.notna().rolling(26).sum() >= 26)
        out["macd"] = macd / c * vol_units
        m20 = c.rolling(20).mean()
        s20 = c.rolling(20).std()
        out["boll_ub"] = ((m20 + 2 * s20) / c - 1.0) * vol_units
        out["boll_lb"] = ((m20 - 2 * s20) / c - 1.0) * vol_units
        d = c.diff()
        up = _smma(d.clip(lower=0), 30)
        dn = _smma((-d).clip(lower=0), 30)
        rsi = up / (up + dn)
        out["rsi_30"] = rsi.where(c.notna().rolling(30).sum() >= 30)
        tp = ((h + lo + c) / 3.0).to_numpy()
        sma_tp = pd.DataFrame(tp).rolling(30).mean().to_numpy()
        mad = _rolling_mad(tp, sma_tp, 30)
        out["cci_30"] = (tp - sma_tp) / (0.015 * mad) / INDEX_SCALE
        prev_c = c.shift(1)
        up_move = h - h.shift(1)
        down_move = lo.shift(1) - lo
        pdm = up_move.where((up_move > down_move) & (up_move > 0), 0.0).where(up_move.notna())
        ndm = down_move.where((down_move > up_move) & (down_move > 0), 0.0).where(down_move.notna())
        tr = np.maximum(
            np.maximum((h - lo).to_numpy(), (h - prev_c).abs().to_numpy()),
            (lo - prev_c).abs().to_numpy(),
        )
        tr = pd.DataFrame(tr)
        atr = _smma(tr, 30)
        pdi = _smma(pdm, 30) / atr
        ndi = _smma(ndm, 30) / atr
        dx = (pdi - ndi).abs() / (pdi + ndi)
        out["dx_30"] = dx.where(c.notna().rolling(30).sum() >= 30)
        out["close_30_sma"] = (c.rolling(30).mean() / c - 1.0) * vol_units
        out["close_60_sma"] = (c.rolling(60).mean() / c - 1.0) * vol_units
    names = FEATURES[:-1]
    T, k = close.shape
    res = np.empty((T, k, len(names)), dtype=np.float32)
    for j, name in enumerate(names):
        v = out[name]
        v = v.to_numpy() if isinstance(v, pd.DataFrame) else v
        v = np.where(np.isfinite(v), v, NEUTRAL.get(name, 0.0))
        res[:, :, j] = np.clip(v, -FEATURE_CLIP, FEATURE_CLIP)
    return res


def turbulence_daily(close: np.ndarray, window: int = TURBULENCE_WINDOW) -> np.ndarray:
    """Scaled turbulence of each session from daily closes.

    Args:
        close: (D, N) session closes, NaN before a ticker lists.
        window: sessions of history for the mean and covariance (excludes session d).

    Returns:
        (D,) float32: ``(r_d − μ)ᵀ Σ⁻¹ (r_d − μ) / n_d`` where μ, Σ are over the ``window``
        sessions before d and only the n_d tickers with returns on all of them and on d
        count; 0 while fewer than ``window`` sessions of history exist.
    """
    # Small batched 100×100 products and solves gain nothing from intra-op threads and lose
    # a lot when the cores are shared: run them on one thread, then restore the setting.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _turbulence_daily(close, window)
    finally:
        torch.set_num_threads(threads)


def _turbulence_daily(close: np.ndarray, window: int) -> np.ndarray:
    D, N = close.shape
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.diff(np.log(close.astype(np.float64)), axis=0, prepend=np.nan)
    finite = np.isfinite(r)
    r0 = np.where(finite, r, 0.0)
    out = np.zeros(D, dtype=np.float32)
    if window >= D:
        return out
    rt = torch.from_numpy(r0)
    ft = torch.from_numpy(finite.astype(np.float64))
    c1 = torch.cat([torch.zeros(1, N, dtype=torch.float64), rt.cumsum(0)])
    cf = torch.cat([torch.zeros(1, N, dtype=torch.float64), ft.cumsum(0)])
    days = torch.arange(window, D)
    # Sums over sessions [d-window, d): prefix sums, one outer-product cumsum in blocks.
    s1 = c1[days] - c1[days - window]
    nf = cf[days] - cf[days - window]
    valid = (nf == window) & ft[days].bool()
    mu = s1 / window
    res = torch.zeros(len(days), dtype=torch.float64)
    block = min(128, len(days))
    # Preallocated (block, N, N) buffers: fresh large allocations page-fault on every block.
    inc = torch.empty(block, N, N, dtype=torch.float64)
    cov = torch.empty(block, N, N, dtype=torch.float64)
    for b0 in range(0, len(days), block):
        idx = days[b0 : b0 + block]
        B = len(idx)
        d0 = int(idx[0])
        # Σ r rᵀ over each day's window [d-window, d): exact at the block's first day, then
        # rolled forward one session at a time (add the newest day, drop the oldest), so a
        # day costs O(N²) instead of O(window·N²).
        torch.mm(rt[d0 - window : d0].T, rt[d0 - window : d0], out=inc[0])
        if B > 1:
            # newest·newestᵀ − oldest·oldestᵀ as one batched (N×2)·(2×N) product.
            left = torch.stack([rt[idx[1:] - 1], rt[idx[1:] - 1 - window]], dim=2)
            right = torch.stack([rt[idx[1:] - 1], -rt[idx[1:] - 1 - window]], dim=1)
            torch.bmm(left, right, out=inc[1:B])
        torch.cumsum(inc[:B], 0, out=cov[:B])
        c = cov[:B]
        m = mu[b0 : b0 + block]
        c.baddbmm_(m[:, :, None], m[:, None, :], alpha=-window).div_(window - 1)
        v = valid[b0 : b0 + block].to(torch.float64)
        diag = torch.diagonal(c, dim1=1, dim2=2)
        scale = (diag * v).sum(1) / v.sum(1).clamp(min=1)
        if not bool(v.all()):
            c.mul_(v[:, :, None] * v[:, None, :])
            diag.add_(1 - v)
        diag.add_(1e-8 * scale[:, None])
        dev = (rt[idx] - m) * v
        sol = torch.linalg.solve(c, dev.unsqueeze(-1)).squeeze(-1)
        res[b0 : b0 + block] = (dev * sol).sum(1) / v.sum(1).clamp(min=1)
    out[window:] = res.clamp(0, TURBULENCE_CLIP).numpy().astype(np.float32)
    return out


def compute_features(
    close: np.ndarray,
    high: np.ndarray,
    low: np.ndarray,
    timestamps: pd.DatetimeIndex,
    bar: str,
    progress=None,
    extra_slots: int = 0,
) -> np.ndarray:
    """All :data:`FEATURES` for a (T, N) market, float32 (T, N, F + ``extra_slots``).

    Prices are NaN before a ticker lists. Tickers are processed in blocks (at most
    :data:`TICKER_BLOCK`, fewer on long series so a block stays within
    :data:`BLOCK_ELEMENTS`); ``progress(n)`` (optional) is called after each block with
    the number of tickers done. The last ``extra_slots`` feature columns are left for the
    caller to fill (source-provided features) so the big array is never copied.
    """
    T, N = close.shape
    F = len(FEATURES)
    feats = np.empty((T, N, F + extra_slots), dtype=np.float32)
    step = max(1, min(TICKER_BLOCK, BLOCK_ELEMENTS // max(T, 1)))
    for j0 in range(0, N, step):
        j1 = min(N, j0 + step)
        feats[:, j0:j1, : F - 1] = ticker_features(
            close[:, j0:j1], high[:, j0:j1], low[:, j0:j1], bar
        )
        if progress is not None:
            progress(j1 - j0)
    feats[:, :, F - 1] = turbulence_for_bars(close, timestamps, bar)[:, None]
    return feats


def turbulence_for_bars(close: np.ndarray, timestamps: pd.DatetimeIndex, bar: str) -> np.ndarray:
    """(T,) turbulence aligned to the bars: same bar for daily data, next session intraday."""
    if bar == "1d":
        return turbulence_daily(close)
    sess = session_of(timestamps)
    starts = np.flatnonzero(np.r_[True, sess[1:] != sess[:-1]])
    ends = np.r_[starts[1:] - 1, len(sess) - 1]
    daily = turbulence_daily(close[ends])
    # Session k's value is known at its close: shift by one session.
    shifted = np.r_[0.0, daily[:-1]].astype(np.float32)
    counts = np.diff(np.r_[starts, len(sess)])
    return np.repeat(shifted, counts)
