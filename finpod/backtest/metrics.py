"""Performance metrics as pure functions of a returns Series.

Every function takes simple per-bar returns (a ``pd.Series`` with a ``DatetimeIndex``) and
the annualization: either the number of bars per year (a float, e.g.
:attr:`finpod.data.market.MarketData.annualization`, counted from the dataset's own
calendar) or a bar size (``"1d"``, ``"1min"``, ...), which falls back to
:func:`finpod.data.market.periods_per_year`. The standard ratios come from
empyrical-reloaded; finpod adds trading activity (turnover, costs split into fees and
market impact) and active metrics
against the reference portfolio. The selection statistics (PSR, DSR, PBO) live in
:mod:`finpod.backtest.selection`.
"""

from __future__ import annotations

import math

import empyrical as ep
import numpy as np
import pandas as pd
from scipy import stats

from finpod.backtest.returns import Annualization, bars_per_year
from finpod.backtest.returns import clean_returns as _clean
from finpod.backtest.selection import probabilistic_sharpe

#: Row order of :func:`performance_metrics`; names are what the tearsheet prints.
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
    "fees_paid",
    "impact_paid",
    "psr",
    "annual_turnover_ex_initial",
    "mean_exposure",
    "active_return",
    "tracking_error",
    "information_ratio",
    "ir_t_stat",
)

#: Name of the reference portfolio's column (``EnvConfig.reference`` traded with a zero
#: action through the agent's own controls and costs): active metrics are measured
#: against it.
REFERENCE = "reference"


def cumulative_return(returns: pd.Series) -> float:
    """Total compounded return over the series (0.10 = +10 %)."""
    return float(ep.cum_returns_final(_clean(returns)))


def annual_return(returns: pd.Series, bar: Annualization = "1d") -> float:
    """Compound annual growth rate, with ``bars_per_year(bar)`` bars per year."""
    return float(ep.annual_return(_clean(returns), annualization=bars_per_year(bar)))


def annual_volatility(returns: pd.Series, bar: Annualization = "1d") -> float:
    """Standard deviation of bar returns (ddof=1) × sqrt(bars per year)."""
    return float(ep.annual_volatility(_clean(returns), annualization=bars_per_year(bar)))


def sharpe_ratio(returns: pd.Series, bar: Annualization = "1d") -> float:
    """Annualized Sharpe ratio: mean / std (ddof=1) of bar returns × sqrt(bars per year).

    Risk-free rate 0. NaN for a constant series.
    """
    return float(ep.sharpe_ratio(_clean(returns), annualization=bars_per_year(bar)))


def sortino_ratio(returns: pd.Series, bar: Annualization = "1d") -> float:
    """Annualized Sortino ratio: mean / downside deviation (target 0) × sqrt(bars per year)."""
    return float(ep.sortino_ratio(_clean(returns), annualization=bars_per_year(bar)))


def max_drawdown(returns: pd.Series) -> float:
    """Largest peak-to-trough fall of the compounded equity curve (negative, -0.2 = -20 %)."""
    return float(ep.max_drawdown(_clean(returns)))


def calmar_ratio(returns: pd.Series, bar: Annualization = "1d") -> float:
    """Annual return / |max drawdown|; NaN when there is no drawdown."""
    return float(ep.calmar_ratio(_clean(returns), annualization=bars_per_year(bar)))


def alpha_beta(
    returns: pd.Series, benchmark: pd.Series, bar: Annualization = "1d"
) -> tuple[float, float]:
    """Annualized alpha and beta of ``returns`` regressed on ``benchmark`` returns.

    The two series are aligned on their common timestamps first.
    """
    left, right = _clean(returns).align(_clean(benchmark), join="inner")
    if len(left) < 2:
        return float("nan"), float("nan")
    alpha, beta = ep.alpha_beta(left, right, annualization=bars_per_year(bar))
    return float(alpha), float(beta)


def rolling_sharpe(returns: pd.Series, window: int, bar: Annualization = "1d") -> pd.Series:
    """Annualized Sharpe over a trailing window of ``window`` bars (NaN until filled)."""
    r = _clean(returns)
    ppy = bars_per_year(bar)
    mean = r.rolling(window).mean()
    std = r.rolling(window).std(ddof=1)
    return (mean / std.where(std > 0)) * math.sqrt(ppy)


def rolling_beta(returns: pd.Series, benchmark: pd.Series, window: int) -> pd.Series:
    """Beta to ``benchmark`` over a trailing window of ``window`` bars (NaN until filled)."""
    left, right = _clean(returns).align(_clean(benchmark), join="inner")
    cov = left.rolling(window).cov(right)
    var = right.rolling(window).var()
    return cov / var.where(var > 0)


def rolling_information_ratio(
    returns: pd.Series, reference: pd.Series, window: int, bar: Annualization = "1d"
) -> pd.Series:
    """Annualized information ratio against ``reference`` over a trailing window of
    ``window`` bars: the rolling Sharpe of the active return (NaN until filled)."""
    left, right = _clean(returns).align(_clean(reference), join="inner")
    return rolling_sharpe(left - right, window, bar)


def active_drawdown_series(returns: pd.Series, reference: pd.Series) -> pd.Series:
    """Drawdown of the agent's wealth relative to ``reference``'s at each bar (≤ 0).

    Relative wealth = growth of the agent / growth of the reference; its fall from its
    running high is how far the agent has lost ground against the reference (what a
    benchmark-relative manager is judged by). The curve starts at 1 before the first bar.
    """
    left, right = _clean(returns).align(_clean(reference), join="inner")
    relative = (1.0 + left) / (1.0 + right) - 1.0
    return drawdown_series(relative)


#: Tail and distribution statistics of :func:`distribution_statistics`, with a reader's name.
DISTRIBUTION_LABELS = {
    "skew": "Skew (per-bar returns)",
    "kurtosis": "Excess kurtosis (per-bar returns)",
    "value_at_risk": "VaR 5 % (per bar, historical)",
    "conditional_value_at_risk": "CVaR 5 % (per bar, mean of the worst 5 %)",
    "tail_ratio": "Tail ratio (95th pct / |5th pct|)",
    "hit_rate": "Hit rate (share of bars with a gain)",
    "active_hit_rate": "Active hit rate (share of bars above the reference)",
    "active_max_drawdown": "Max active drawdown (wealth relative to the reference)",
}


def distribution_statistics(
    returns: pd.Series, reference: pd.Series | None = None, cutoff: float = 0.05
) -> dict[str, float]:
    """Shape and tails of per-bar simple ``returns``, keyed as :data:`DISTRIBUTION_LABELS`.

    ``skew`` and ``kurtosis`` (excess, 0 for a normal) as pyfolio's ``perf_stats`` computes
    them (scipy); ``value_at_risk`` and ``conditional_value_at_risk`` (the ``cutoff``
    quantile of the returns and the mean below it, fractions per bar, ≤ 0 for a loss) and
    ``tail_ratio`` from empyrical; ``hit_rate``: share of bars with a positive return.
    Against ``reference``: ``active_hit_rate`` (share of bars beating it) and
    ``active_max_drawdown`` (:func:`active_drawdown_series`'s minimum). NaN where undefined.
    """

    nan = float("nan")
    r = _clean(returns)
    out = dict.fromkeys(DISTRIBUTION_LABELS, nan)
    if len(r) >= 3 and float(r.std()) > 0:
        out["skew"] = float(stats.skew(r))
        out["kurtosis"] = float(stats.kurtosis(r))
    if len(r):
        out["value_at_risk"] = float(ep.value_at_risk(r, cutoff=cutoff))
        out["conditional_value_at_risk"] = float(ep.conditional_value_at_risk(r, cutoff=cutoff))
        with np.errstate(divide="ignore", invalid="ignore"):  # no left tail: NaN, said "–"
            out["tail_ratio"] = float(ep.tail_ratio(r))
        out["hit_rate"] = float((r > 0).mean())
    if reference is not None:
        left, right = r.align(_clean(reference), join="inner")
        if len(left):
            out["active_hit_rate"] = float((left > right).mean())
            out["active_max_drawdown"] = float(active_drawdown_series(left, right).min())
    return {k: (v if np.isfinite(v) else nan) for k, v in out.items()}


def drawdown_series(returns: pd.Series) -> pd.Series:
    """Drawdown of the compounded equity curve at each bar (≤ 0).

    The curve starts at 1 before the first bar, so a loss on the first bar is a drawdown
    (returns ``[-0.3, 0.1, 0.05]`` start at -30 %). Its minimum is :func:`max_drawdown`
    (empyrical's definition); the tearsheet draws this series.
    """
    equity = (1.0 + _clean(returns)).cumprod()
    peak = equity.cummax().clip(lower=1.0)
    return equity / peak - 1.0


def worst_drawdowns(returns: pd.Series, top: int = 5) -> pd.DataFrame:
    """The ``top`` deepest drawdowns of a returns series, deepest first.

    Columns: ``drawdown`` (fraction, > 0), ``peak`` (the last bar at the high before the
    fall), ``valley`` (the lowest bar), ``recovery`` (the first bar back at the high, NaT
    while under water), ``length`` (bars from peak to recovery, or to the last bar). Timestamps
    are the bars' own (intraday bars keep their times, unlike pyfolio's table, which
    normalizes to dates).
    """
    r = pd.Series(returns, dtype="float64").fillna(0.0)
    columns = ["drawdown", "peak", "valley", "recovery", "length"]
    if len(r) == 0:
        return pd.DataFrame(columns=columns)
    wealth = np.concatenate([[1.0], np.cumprod(1.0 + r.to_numpy())])
    high = np.maximum.accumulate(wealth)
    under = wealth < high * (1.0 - 1e-12)
    stamps = [None, *r.index]  # position 0: before the first bar (the start)
    rows = []
    i = 1
    while i < len(wealth):
        if not under[i]:
            i += 1
            continue
        start = i - 1
        j = i
        while j < len(wealth) and under[j]:
            j += 1
        valley = start + int(np.argmin(wealth[start:j]))
        recovered = j < len(wealth)
        rows.append(
            {
                "drawdown": float(1.0 - wealth[valley] / high[valley]),
                "peak": stamps[start] if start > 0 else r.index[0],
                "valley": stamps[valley],
                "recovery": stamps[j] if recovered else pd.NaT,
                "length": (j if recovered else len(wealth) - 1) - start,
            }
        )
        i = j
    table = pd.DataFrame(rows, columns=columns)
    return table.sort_values("drawdown", ascending=False).head(top).reset_index(drop=True)


def monthly_returns(returns: pd.Series) -> pd.DataFrame:
    """Compounded returns by calendar month: rows are years, columns months 1–12."""
    r = _clean(returns)
    if r.empty:
        return pd.DataFrame(columns=range(1, 13), dtype="float64")
    grouped = (1.0 + r).groupby([r.index.year, r.index.month]).prod() - 1.0
    grouped.index.names = ["year", "month"]
    table = grouped.unstack("month")
    return table.reindex(columns=range(1, 13))


def annual_turnover(
    traded_value: pd.Series, account_value: pd.Series, bar: Annualization = "1d"
) -> float:
    """Traded notional per year as a multiple of the average account value.

    ``traded_value``: dollars bought + sold at each bar (≥ 0); ``account_value``: dollars.
    1.0 means the whole portfolio was traded once a year (buys and sells each counted).
    """
    traded = pd.Series(traded_value, dtype="float64").fillna(0.0)
    value = pd.Series(account_value, dtype="float64")
    if len(traded) == 0 or value.mean() <= 0:
        return float("nan")
    years = len(traded) / bars_per_year(bar)
    return float(traded.sum() / value.mean() / years)


def active_statistics(
    returns: pd.Series, reference: pd.Series, bar: Annualization = "1d"
) -> dict[str, float]:
    """Active-manager statistics of ``returns`` against ``reference`` (both simple, per bar).

    Active return a_t = r_t − ref_t per bar. ``active_return``: mean(a) × bars per year
    (annualized arithmetic, fraction per year); ``tracking_error``: std(a) × √(bars per
    year); ``information_ratio``: their ratio (empyrical's ``excess_sharpe`` annualized);
    ``ir_t_stat``: the t-statistic of mean(a) ≠ 0, mean(a) / (std(a) / √n) = per-bar IR ×
    √n (i.i.d. bars). NaN where undefined (no variance, fewer than 2 bars).
    """
    nan = float("nan")
    both = pd.concat([_clean(returns), _clean(reference)], axis=1, join="inner").dropna()
    out = dict.fromkeys(("active_return", "tracking_error", "information_ratio", "ir_t_stat"), nan)
    if len(both) < 2:
        return out
    ann = bars_per_year(bar)
    active = both.iloc[:, 0] - both.iloc[:, 1]
    sd = float(active.std(ddof=1))
    out["active_return"] = float(active.mean()) * ann
    out["tracking_error"] = sd * math.sqrt(ann)
    if sd > 0 and np.isfinite(sd):
        per_bar = float(ep.excess_sharpe(both.iloc[:, 0], both.iloc[:, 1]))
        out["information_ratio"] = per_bar * math.sqrt(ann)
        out["ir_t_stat"] = per_bar * math.sqrt(len(active))
    return out


def performance_metrics(
    returns: pd.Series,
    bar: Annualization = "1d",
    benchmark: pd.Series | None = None,
    traded_value: pd.Series | None = None,
    account_value: pd.Series | None = None,
    costs: pd.Series | None = None,
    initial_capital: float | None = None,
    reference: pd.Series | None = None,
    exposure: pd.Series | None = None,
    started_in_cash: bool = True,
    impact: pd.Series | None = None,
) -> dict[str, float]:
    """All metrics of one strategy, keyed by :data:`METRIC_NAMES` (NaN where not applicable).

    ``bar``: bars per year or a bar size. ``benchmark`` (index returns) gives alpha/beta;
    ``traded_value`` and ``account_value`` give turnover; ``costs`` (dollars per bar) gives
    costs paid. ``psr`` is the probabilistic Sharpe of these returns against 0.
    ``reference`` (the reference portfolio's returns) gives the active statistics
    (:func:`active_statistics`); ``exposure`` (per bar, stock value / account value) its
    mean. ``annual_turnover_ex_initial`` leaves out the first fill bar's trades when the
    account ``started_in_cash`` (the initial purchase); otherwise it equals the turnover.
    ``impact`` (dollars per bar, the market-impact part of ``costs``; None: 0, the linear
    cost model) splits the costs into ``fees_paid`` and ``impact_paid``.
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
    out["annual_turnover_ex_initial"] = out["annual_turnover"]
    if started_in_cash and traded_value is not None and account_value is not None:
        later = pd.Series(traded_value, dtype="float64").copy()
        if len(later):
            later.iloc[0] = 0.0  # bar 1 fills the orders of bar 0: the initial purchase
        out["annual_turnover_ex_initial"] = annual_turnover(later, account_value, bar)
    out["mean_exposure"] = (
        float(pd.Series(exposure, dtype="float64").mean()) if exposure is not None else nan
    )
    out.update(
        active_statistics(returns, reference, bar)
        if reference is not None
        else dict.fromkeys(
            ("active_return", "tracking_error", "information_ratio", "ir_t_stat"), nan
        )
    )
    paid = float(pd.Series(costs, dtype="float64").sum()) if costs is not None else nan
    out["costs_paid"] = paid
    out["costs_pct_capital"] = paid / initial_capital if initial_capital else nan
    moved = float(pd.Series(impact, dtype="float64").sum()) if impact is not None else 0.0
    out["impact_paid"] = moved if costs is not None else nan
    out["fees_paid"] = paid - out["impact_paid"]
    out["psr"] = probabilistic_sharpe(returns)
    return {name: out[name] for name in METRIC_NAMES}
