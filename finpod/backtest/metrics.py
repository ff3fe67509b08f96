"""Performance metrics as pure functions of a returns Series.

Every function takes simple per-bar returns (a ``pd.Series`` with a ``DatetimeIndex``) and
the bar size (``"1d"``, ``"1min"``, ...) so that annualization matches the data: daily bars
annualize with 252 periods, minute bars with 252 × 390 (see
:func:`finpod.data.market.periods_per_year`). The standard ratios come from
empyrical-reloaded; finpod adds trading activity (turnover, costs) and the Deflated Sharpe
Ratio of Bailey & López de Prado (2014), which discounts a Sharpe ratio for the number of
candidates a tournament tried before picking it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import empyrical as ep
import numpy as np
import pandas as pd
from scipy import stats

from finpod.data.market import periods_per_year

#: Euler–Mascheroni constant, used in the expected maximum of N Gaussian draws.
EULER_GAMMA = 0.5772156649015329

#: Row order of :func:`performance_table`; names are what the tearsheet prints.
METRIC_NAMES = (
    "cumulative_return",
    "annual_return",
    "annual_volatility",
    "sharpe",
    "sortino",
    "max_drawdown",
    "calmar",
    "alpha",
    "beta",
    "annual_turnover",
    "costs_paid",
    "costs_pct_capital",
    "deflated_sharpe",
)


def _clean(returns: pd.Series) -> pd.Series:
    returns = pd.Series(returns, dtype="float64")
    return returns.dropna()


def cumulative_return(returns: pd.Series) -> float:
    """Total compounded return over the series (0.10 = +10 %)."""
    return float(ep.cum_returns_final(_clean(returns)))


def annual_return(returns: pd.Series, bar: str = "1d") -> float:
    """Compound annual growth rate, with ``periods_per_year(bar)`` bars per year."""
    return float(ep.annual_return(_clean(returns), annualization=periods_per_year(bar)))


def annual_volatility(returns: pd.Series, bar: str = "1d") -> float:
    """Standard deviation of bar returns (ddof=1) × sqrt(bars per year)."""
    return float(ep.annual_volatility(_clean(returns), annualization=periods_per_year(bar)))


def sharpe_ratio(returns: pd.Series, bar: str = "1d") -> float:
    """Annualized Sharpe ratio: mean / std (ddof=1) of bar returns × sqrt(bars per year).

    Risk-free rate 0. NaN for a constant series.
    """
    return float(ep.sharpe_ratio(_clean(returns), annualization=periods_per_year(bar)))


def sortino_ratio(returns: pd.Series, bar: str = "1d") -> float:
    """Annualized Sortino ratio: mean / downside deviation (target 0) × sqrt(bars per year)."""
    return float(ep.sortino_ratio(_clean(returns), annualization=periods_per_year(bar)))


def max_drawdown(returns: pd.Series) -> float:
    """Largest peak-to-trough fall of the compounded equity curve (negative, -0.2 = -20 %)."""
    return float(ep.max_drawdown(_clean(returns)))


def calmar_ratio(returns: pd.Series, bar: str = "1d") -> float:
    """Annual return / |max drawdown|; NaN when there is no drawdown."""
    return float(ep.calmar_ratio(_clean(returns), annualization=periods_per_year(bar)))


def alpha_beta(returns: pd.Series, benchmark: pd.Series, bar: str = "1d") -> tuple[float, float]:
    """Annualized alpha and beta of ``returns`` regressed on ``benchmark`` returns.

    The two series are aligned on their common timestamps first.
    """
    left, right = _clean(returns).align(_clean(benchmark), join="inner")
    if len(left) < 2:
        return float("nan"), float("nan")
    alpha, beta = ep.alpha_beta(left, right, annualization=periods_per_year(bar))
    return float(alpha), float(beta)


def rolling_sharpe(returns: pd.Series, window: int, bar: str = "1d") -> pd.Series:
    """Annualized Sharpe over a trailing window of ``window`` bars (NaN until filled)."""
    r = _clean(returns)
    ppy = periods_per_year(bar)
    mean = r.rolling(window).mean()
    std = r.rolling(window).std(ddof=1)
    return (mean / std.where(std > 0)) * math.sqrt(ppy)


def rolling_beta(returns: pd.Series, benchmark: pd.Series, window: int) -> pd.Series:
    """Beta to ``benchmark`` over a trailing window of ``window`` bars (NaN until filled)."""
    left, right = _clean(returns).align(_clean(benchmark), join="inner")
    cov = left.rolling(window).cov(right)
    var = right.rolling(window).var()
    return cov / var.where(var > 0)


def drawdown_series(returns: pd.Series) -> pd.Series:
    """Drawdown of the compounded equity curve at each bar (≤ 0)."""
    equity = (1.0 + _clean(returns)).cumprod()
    return equity / equity.cummax() - 1.0


def monthly_returns(returns: pd.Series) -> pd.DataFrame:
    """Compounded returns by calendar month: rows are years, columns months 1–12."""
    r = _clean(returns)
    if r.empty:
        return pd.DataFrame(columns=range(1, 13), dtype="float64")
    grouped = (1.0 + r).groupby([r.index.year, r.index.month]).prod() - 1.0
    grouped.index.names = ["year", "month"]
    table = grouped.unstack("month")
    return table.reindex(columns=range(1, 13))


def annual_turnover(traded_value: pd.Series, account_value: pd.Series, bar: str = "1d") -> float:
    """Traded notional per year as a multiple of the average account value.

    ``traded_value``: dollars bought + sold at each bar (≥ 0); ``account_value``: dollars.
    1.0 means the whole portfolio was traded once a year (buys and sells each counted).
    """
    traded = pd.Series(traded_value, dtype="float64").fillna(0.0)
    value = pd.Series(account_value, dtype="float64")
    if len(traded) == 0 or value.mean() <= 0:
        return float("nan")
    years = len(traded) / periods_per_year(bar)
    return float(traded.sum() / value.mean() / years)


def probabilistic_sharpe_ratio(
    sharpe: float, benchmark_sharpe: float, num_obs: int, skew: float, kurtosis: float
) -> float:
    """Probability that the true Sharpe exceeds ``benchmark_sharpe`` (Bailey & López de Prado).

    All Sharpe ratios are per bar (not annualized). ``kurtosis`` is the raw kurtosis (3 for
    a normal distribution), ``num_obs`` the number of returns the Sharpe was measured on.
    PSR = Φ((SR − SR*) √(T − 1) / √(1 − γ₃ SR + (γ₄ − 1)/4 SR²)).
    """
    if num_obs < 2 or not np.isfinite(sharpe):
        return float("nan")
    denom = 1.0 - skew * sharpe + (kurtosis - 1.0) / 4.0 * sharpe**2
    if denom <= 0:
        return float("nan")
    z = (sharpe - benchmark_sharpe) * math.sqrt(num_obs - 1) / math.sqrt(denom)
    return float(stats.norm.cdf(z))


def expected_max_sharpe(num_trials: int, trial_sharpe_variance: float) -> float:
    """Expected maximum Sharpe of ``num_trials`` unskilled strategies (per bar).

    E[max SR] ≈ √V · ((1 − γ) Φ⁻¹(1 − 1/N) + γ Φ⁻¹(1 − 1/(N e))), with V the variance of the
    trials' Sharpe ratios and γ the Euler–Mascheroni constant. One trial → 0.
    """
    if num_trials < 1:
        raise ValueError("num_trials must be ≥ 1")
    if num_trials == 1:
        return 0.0
    n = float(num_trials)
    z1 = stats.norm.ppf(1.0 - 1.0 / n)
    z2 = stats.norm.ppf(1.0 - 1.0 / (n * math.e))
    return float(
        math.sqrt(max(trial_sharpe_variance, 0.0)) * ((1 - EULER_GAMMA) * z1 + EULER_GAMMA * z2)
    )


def deflated_sharpe_ratio(
    returns: pd.Series, num_trials: int, trial_sharpe_variance: float | None = None
) -> float:
    """Deflated Sharpe Ratio (Bailey & López de Prado, 2014) of ``returns``.

    The probability that the strategy's true Sharpe is positive after accounting for having
    picked the best of ``num_trials`` candidates: PSR with the benchmark Sharpe set to the
    expected maximum Sharpe of that many unskilled trials.

    Args:
        returns: per-bar returns of the selected strategy.
        num_trials: candidates evaluated before selecting this one (≥ 1).
        trial_sharpe_variance: variance of the candidates' **per-bar** Sharpe ratios. When
            unknown (fewer than two trial Sharpes), the sampling variance of a Sharpe
            estimate under the null, 1/(T − 1), is used.

    Returns:
        A probability in [0, 1] (NaN for fewer than two returns or a constant series).
    """
    r = _clean(returns).to_numpy()
    t = len(r)
    if t < 2 or np.std(r, ddof=1) == 0:
        return float("nan")
    sr = float(np.mean(r) / np.std(r, ddof=1))
    skew = float(stats.skew(r, bias=True))
    kurt = float(stats.kurtosis(r, fisher=False, bias=True))
    if trial_sharpe_variance is None or not np.isfinite(trial_sharpe_variance):
        trial_sharpe_variance = 1.0 / (t - 1)
    sr0 = expected_max_sharpe(int(num_trials), trial_sharpe_variance)
    return probabilistic_sharpe_ratio(sr, sr0, t, skew, kurt)


def trial_sharpe_variance(annual_sharpes: Sequence[float], bar: str = "1d") -> float | None:
    """Variance (ddof=1) of per-bar Sharpe ratios from the candidates' annualized Sharpes.

    None when fewer than two finite values are given.
    """
    values = np.asarray([s for s in annual_sharpes if s is not None and np.isfinite(s)], float)
    if len(values) < 2:
        return None
    per_bar = values / math.sqrt(periods_per_year(bar))
    return float(np.var(per_bar, ddof=1))


def performance_metrics(
    returns: pd.Series,
    bar: str = "1d",
    benchmark: pd.Series | None = None,
    traded_value: pd.Series | None = None,
    account_value: pd.Series | None = None,
    costs: pd.Series | None = None,
    initial_capital: float | None = None,
    num_trials: int | None = None,
    trial_variance: float | None = None,
) -> dict[str, float]:
    """All metrics of one strategy, keyed by :data:`METRIC_NAMES` (NaN where not applicable).

    ``benchmark`` (index returns) gives alpha/beta; ``traded_value`` and ``account_value``
    give turnover; ``costs`` (dollars per bar) gives costs paid; ``num_trials`` gives the
    Deflated Sharpe.
    """
    nan = float("nan")
    out = {
        "cumulative_return": cumulative_return(returns),
        "annual_return": annual_return(returns, bar),
        "annual_volatility": annual_volatility(returns, bar),
        "sharpe": sharpe_ratio(returns, bar),
        "sortino": sortino_ratio(returns, bar),
        "max_drawdown": max_drawdown(returns),
        "calmar": calmar_ratio(returns, bar),
    }
    out["alpha"], out["beta"] = (
        alpha_beta(returns, benchmark, bar) if benchmark is not None else (nan, nan)
    )
    out["annual_turnover"] = (
        annual_turnover(traded_value, account_value, bar)
        if traded_value is not None and account_value is not None
        else nan
    )
    paid = float(pd.Series(costs, dtype="float64").sum()) if costs is not None else nan
    out["costs_paid"] = paid
    out["costs_pct_capital"] = paid / initial_capital if initial_capital else nan
    out["deflated_sharpe"] = (
        deflated_sharpe_ratio(returns, num_trials, trial_variance) if num_trials else nan
    )
    return {name: out[name] for name in METRIC_NAMES}
