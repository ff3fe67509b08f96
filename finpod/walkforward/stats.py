"""Is the mean active return different from 0? A HAC (Newey–West) t-test with statsmodels.

Per-bar active returns (agent − benchmark) are autocorrelated: an agent that holds a tilt
for weeks earns runs of same-signed active returns, so the naive t-statistic
(mean / (std / √T)) overstates significance. :func:`hac_mean_test` regresses the active
returns on a constant with ordinary least squares (``statsmodels.api.OLS``) and takes the
standard error of the constant from the heteroskedasticity- and autocorrelation-consistent
(HAC) covariance, ``cov_type="HAC"``: the Bartlett kernel of Newey & West (1987), with
statsmodels' small-sample correction.

Lag rule (:func:`newey_west_lags`): ``maxlags = floor(4 · (T / 100)^(2/9))``, the rule of
thumb of Newey & West (1994) for the Bartlett kernel (4 lags at 250 daily bars, 7 at
1,500, 9 at 5,000). It grows slowly with T, as the consistency of the estimator requires.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from finpod.errors import FinpodError

#: |t| at or above which a two-sided test is significant at 5 % (normal approximation).
T_CRITICAL_5PCT = 1.96
#: What the report and summary.json say about the lag choice.
MAXLAGS_RULE = "maxlags = floor(4·(T/100)^(2/9)) (Newey & West 1994), Bartlett kernel"


def newey_west_lags(num_obs: int) -> int:
    """Lags of the Newey–West estimator for ``num_obs`` observations (see the module doc)."""
    if num_obs < 1:
        return 0
    return int(math.floor(4.0 * (num_obs / 100.0) ** (2.0 / 9.0)))


def naive_t(values: np.ndarray) -> float:
    """mean / (std (ddof=1) / √T): the t-statistic that assumes independent bars."""
    x = np.asarray(values, dtype=np.float64)
    sd = float(x.std(ddof=1)) if len(x) > 1 else float("nan")
    return float(x.mean() / (sd / math.sqrt(len(x)))) if sd > 0 else float("nan")


def hac_mean_test(
    active: pd.Series | np.ndarray,
    maxlags: int | None = None,
    bars_per_year: float | None = None,
) -> dict[str, Any]:
    """HAC t-test of mean(``active``) = 0.

    Args:
        active: (T,) per-bar active returns (simple returns, 0.01 = 1 %), in time order.
            Every value must be finite: a NaN is an error, never a silent 0.
        maxlags: lags of the Bartlett kernel; None: :func:`newey_west_lags` (T).
        bars_per_year: when given, ``annual_mean`` = mean × bars per year.

    Returns:
        ``{"n", "mean" (per bar), "annual_mean", "se" (HAC, per bar), "t" (HAC), "p"
        (two-sided, normal), "naive_t", "maxlags", "maxlags_rule", "significant_5pct"}``;
        ``t``/``p``/``se`` are None when T < 3 or the series is constant.
    """
    x = np.asarray(active, dtype=np.float64).reshape(-1)
    if not np.isfinite(x).all():
        bad = int((~np.isfinite(x)).sum())
        raise FinpodError(
            f"{bad} active return(s) are not finite", "a fold's rollout produced NaN/inf values"
        )
    n = len(x)
    lags = newey_west_lags(n) if maxlags is None else int(maxlags)
    out: dict[str, Any] = {
        "n": n,
        "mean": float(x.mean()) if n else None,
        "annual_mean": float(x.mean() * bars_per_year) if n and bars_per_year else None,
        "se": None,
        "t": None,
        "p": None,
        "naive_t": None,
        "maxlags": lags,
        "maxlags_rule": MAXLAGS_RULE if maxlags is None else "given",
        "significant_5pct": None,
    }
    if n < 3 or float(np.ptp(x)) == 0.0:
        out["note"] = "needs ≥ 3 active returns that are not all equal"
        return out
    # Only for the test itself: importing finpod.walkforward loads no statsmodels, a
    # seconds-long import (tests/test_boundaries.py).
    import statsmodels.api as sm

    fit = sm.OLS(x, np.ones((n, 1))).fit(
        cov_type="HAC", cov_kwds={"maxlags": lags, "use_correction": True}
    )
    t, p, se = float(fit.tvalues[0]), float(fit.pvalues[0]), float(fit.bse[0])
    out.update(se=se, t=t, p=p, naive_t=naive_t(x), significant_5pct=abs(t) >= T_CRITICAL_5PCT)
    return out


__all__ = ["MAXLAGS_RULE", "T_CRITICAL_5PCT", "hac_mean_test", "naive_t", "newey_west_lags"]
