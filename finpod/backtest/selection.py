"""Selection statistics, each labelled by what it measures.

- :func:`probabilistic_sharpe`: the PSR of a return series against a Sharpe of 0 — the
  probability that the backtest's true Sharpe is above 0, given its length, skew and
  kurtosis (Bailey & López de Prado, 2012).
- :func:`deflated_sharpe_ratio`: the DSR of the selected candidate on the split it was
  selected on — its PSR against the expected maximum Sharpe of N unskilled candidates
  (Bailey & López de Prado, 2014).
- :func:`probability_of_backtest_overfitting`: the PBO by combinatorially symmetric
  cross-validation over every candidate's returns on that split (Bailey, Borwein, López de
  Prado & Zhu, 2015).
- :func:`selection_statistics`: all three for a backtest and the run's candidate record.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from finpod.backtest.returns import Annualization, bars_per_year
from finpod.backtest.returns import clean_returns as _clean
from finpod.runs.candidates import CandidateSet

#: Euler–Mascheroni constant, used in the expected maximum of N Gaussian draws.
EULER_GAMMA = 0.5772156649015329

#: Default number of CSCV partitions of the PBO (even; C(16, 8) = 12,870 splits).
PBO_PARTITIONS = 16


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


def _moments(r: np.ndarray) -> tuple[float, float, float] | None:
    """(per-bar Sharpe, skew, raw kurtosis) of ``r``, or None for < 2 values or no spread."""
    if len(r) < 2:
        return None
    std, mean = float(np.std(r, ddof=1)), float(np.mean(r))
    # A constant series has std 0 up to rounding (e.g. 1e-18 for ten equal returns).
    if not std > 1e-12 * max(abs(mean), 1e-12):
        return None
    skew = float(stats.skew(r, bias=True))
    kurt = float(stats.kurtosis(r, fisher=False, bias=True))
    return mean / std, skew, kurt


def probabilistic_sharpe(returns: pd.Series, benchmark_sharpe: float = 0.0) -> float:
    """PSR of a return series: P[true Sharpe > ``benchmark_sharpe``] (Bailey & López de Prado).

    Measures whether a Sharpe ratio observed on ``returns`` is distinguishable from
    ``benchmark_sharpe`` (per bar; default 0) given the sample length, skew and kurtosis. It
    makes no allowance for how the strategy was chosen: for a backtest of an agent selected
    on another split, the null is a true Sharpe of 0 and this is the right test.

    Returns:
        A probability in [0, 1]; NaN for fewer than two returns or a constant series.
    """
    mom = _moments(_clean(returns).to_numpy())
    if mom is None:
        return float("nan")
    sr, skew, kurt = mom
    return probabilistic_sharpe_ratio(sr, benchmark_sharpe, len(_clean(returns)), skew, kurt)


def deflated_sharpe_ratio(
    returns: pd.Series | np.ndarray, num_trials: int, trial_sharpe_variance: float | None = None
) -> float:
    """Deflated Sharpe Ratio (Bailey & López de Prado, 2014) of the selected candidate.

    Measures whether the best of ``num_trials`` candidates is better than luck on the split
    it was selected on: PSR of ``returns`` against the expected maximum Sharpe of that many
    unskilled candidates. ``returns``, the trial variance and the sample length must all
    come from that same split (for finpod: the validation split) and be per bar.

    Args:
        returns: (T,) per-bar returns of the selected candidate on the selection split.
        num_trials: candidates and checkpoints selection chose among (≥ 1).
        trial_sharpe_variance: variance (ddof=1) of the candidates' **per-bar** Sharpe
            ratios on that split. When unknown (fewer than two candidates), the sampling
            variance of a Sharpe estimate under the null, 1/(T − 1), is used.

    Returns:
        A probability in [0, 1] (NaN for fewer than two returns or a constant series).
    """
    r = _clean(pd.Series(np.asarray(returns, dtype=np.float64))).to_numpy()
    mom = _moments(r)
    if mom is None:
        return float("nan")
    sr, skew, kurt = mom
    t = len(r)
    if trial_sharpe_variance is None or not np.isfinite(trial_sharpe_variance):
        trial_sharpe_variance = 1.0 / (t - 1)
    sr0 = expected_max_sharpe(int(num_trials), trial_sharpe_variance)
    return probabilistic_sharpe_ratio(sr, sr0, t, skew, kurt)


def trial_sharpe_variance(
    annual_sharpes: Sequence[float], bar: Annualization = "1d"
) -> float | None:
    """Variance (ddof=1) of per-bar Sharpe ratios from the candidates' annualized Sharpes.

    None when fewer than two finite values are given.
    """
    values = np.asarray([s for s in annual_sharpes if s is not None and np.isfinite(s)], float)
    if len(values) < 2:
        return None
    per_bar = values / math.sqrt(bars_per_year(bar))
    return float(np.var(per_bar, ddof=1))


@dataclass(frozen=True)
class PBOResult:
    """Probability of backtest overfitting by CSCV, with what it was computed from."""

    pbo: float
    """Share of the splits whose in-sample best candidate ranks at or below the median
    out of sample (logit ≤ 0): the probability that selection picked an overfit candidate."""
    logits: np.ndarray
    """(C,) logit of the in-sample winner's relative out-of-sample rank, one per split."""
    num_partitions: int
    """S, the number of equal blocks the bars were cut into (C = S choose S/2 splits)."""
    bars_used: int
    """Bars used: the last ``S · (T // S)`` of the T given."""


def probability_of_backtest_overfitting(
    returns: np.ndarray, num_partitions: int = PBO_PARTITIONS
) -> PBOResult:
    """PBO by combinatorially symmetric cross-validation (Bailey, Borwein, López de Prado & Zhu).

    Measures how often the candidate that looks best on one half of the selection split is
    no better than the median candidate on the other half. The T bars are cut into S equal
    contiguous blocks (the earliest ``T mod S`` bars are dropped); for each of the C(S, S/2)
    ways to pick half the blocks as in-sample, the candidate with the best in-sample
    per-bar Sharpe is ranked among all candidates by its out-of-sample Sharpe (rank 1 =
    worst), ω = rank / (n + 1), and λ = ln(ω / (1 − ω)). PBO is the share of λ ≤ 0. About
    0.5 when the candidates are indistinguishable noise, near 0 when one truly dominates.

    Args:
        returns: (T, n) per-bar returns, one column per candidate (n ≥ 2).
        num_partitions: S, even, ≥ 2; lowered to the largest even number ≤ T / 2 when the
            sample is too short for 2 bars per block.

    Raises:
        ValueError: fewer than 2 candidates or fewer than 4 bars.
    """
    r = np.asarray(returns, dtype=np.float64)
    if r.ndim != 2 or r.shape[1] < 2:
        raise ValueError("PBO needs returns of at least 2 candidates, shape (T, n)")
    t, n = r.shape
    s = min(int(num_partitions), (t // 2) // 2 * 2)
    if s < 2:
        raise ValueError("PBO needs at least 4 bars")
    block = t // s
    r = r[t - s * block :].reshape(s, block, n)
    sums, squares = r.sum(axis=1), (r * r).sum(axis=1)  # (S, n) each
    half = s // 2
    combos = list(combinations(range(s), half))
    chosen = np.zeros((len(combos), s))
    for i, c in enumerate(combos):
        chosen[i, list(c)] = 1.0

    def sharpe(mask: np.ndarray) -> np.ndarray:
        count = half * block
        mean = (mask @ sums) / count
        var = ((mask @ squares) - count * mean**2) / (count - 1)
        std = np.sqrt(np.clip(var, 0.0, None))
        return np.where(std > 1e-15, mean / np.where(std > 1e-15, std, 1.0), 0.0)

    in_sample, out_sample = sharpe(chosen), sharpe(1.0 - chosen)  # (C, n)
    best = np.argmax(in_sample, axis=1)
    ranks = stats.rankdata(out_sample, axis=1)  # 1 = worst; ties share the average rank
    omega = ranks[np.arange(len(combos)), best] / (n + 1.0)
    logits = np.log(omega / (1.0 - omega))
    return PBOResult(
        pbo=float(np.mean(logits <= 0.0)), logits=logits, num_partitions=s, bars_used=s * block
    )


#: One-sentence meaning of each selection statistic (tearsheet and README wording).
STATISTIC_MEANINGS = {
    "psr": "PSR: the probability that a strategy's true Sharpe ratio on the backtest split is "
    "above 0, given the number of bars and the skew and fat tails of its returns.",
    "dsr": "DSR: the probability that the selected candidate's validation Sharpe ratio beats "
    "the best Sharpe that the same number of unskilled candidates would reach by luck.",
    "pbo": "PBO: the probability that selection picked an overfit candidate, i.e. how often "
    "the best candidate on one half of the validation bars ranks below the median on the "
    "other half.",
}


def _finite(value: float) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


def selection_statistics(
    backtest_returns: pd.Series,
    candidates: CandidateSet | None,
    *,
    num_trials: int | None = None,
    selected_id: str | None = None,
    fallback_sharpes: Sequence[float] = (),
    selected_sharpe: float | None = None,
    validation_bars: int | None = None,
    annualization: Annualization = "1d",
    num_partitions: int = PBO_PARTITIONS,
) -> dict[str, Any]:
    """PSR of the backtest, DSR and PBO of the selection on validation, as a JSON-able dict.

    Args:
        backtest_returns: (T_bt,) per-bar returns of the agent on the backtest split (PSR).
        candidates: the run's candidate record (:func:`finpod.runs.candidates.load_candidates`):
            every candidate and checkpoint selection chose among, with its per-bar
            validation returns. None or empty for runs that predate it.
        num_trials: N when there is no candidate record (the leaderboard's
            ``candidates_evaluated``, or the run's validation evaluations); with a record,
            N is the larger of the two.
        selected_id: the candidate that was selected (default: the best score recorded).
        fallback_sharpes: annualized validation Sharpes of the candidates, for the trial
            variance of runs without a candidate record.
        selected_sharpe: annualized validation Sharpe of the selected candidate (runs
            without a record).
        validation_bars: number of validation returns (runs without a record).
        annualization: bars per year (or bar size) of the annualized fallback Sharpes.
        num_partitions: S of the PBO's CSCV.

    Returns:
        ``{"psr", "dsr", "pbo", "num_trials", "selection_split": "validation", ...}``; a
        statistic is None only where it is undefined, with ``"<name>_note"`` saying why.
        Sharpe-like extras (``selected_validation_sharpe``, ``expected_max_sharpe``,
        ``trial_sharpe_variance``) are per bar.
    """
    out: dict[str, Any] = {
        "psr": _finite(probabilistic_sharpe(backtest_returns)),
        "dsr": None,
        "pbo": None,
        "num_trials": None,
        "selection_split": "validation",
    }
    if out["psr"] is None:
        out["psr_note"] = "needs ≥ 2 backtest returns that are not all equal"
    have = candidates is not None and len(candidates) > 0
    recorded = len(candidates) if have else 0
    n = max(recorded, int(num_trials or 0))
    out["num_trials"] = n or None
    out["num_trials_source"] = (
        "candidate record (candidates.bin)"
        if have and recorded >= int(num_trials or 0)
        else ("leaderboard / run metrics" if n else None)
    )
    if have:
        sharpes = candidates.sharpes()
        if selected_id is not None and selected_id in candidates.ids:
            k = candidates.ids.index(selected_id)
        else:
            k = int(np.argmax(candidates.scores))
        sel = candidates.returns[:, k]
        variance = float(np.var(sharpes, ddof=1)) if len(sharpes) >= 2 else None
        t = len(sel)
        out.update(
            selected_candidate=candidates.ids[k],
            validation_bars=t,
            selected_validation_sharpe=_finite(sharpes[k]),
            trial_sharpe_variance=variance,
        )
        out["dsr"] = _finite(deflated_sharpe_ratio(sel, n, variance))
        if out["dsr"] is None:
            out["dsr_note"] = "the selected candidate's validation returns are constant"
        else:
            v = variance if variance is not None else 1.0 / (t - 1)
            out["expected_max_sharpe"] = expected_max_sharpe(n, v)
            if variance is None:
                out["dsr_note"] = "one candidate: trial variance taken as 1/(T − 1)"
    elif n and selected_sharpe is not None and validation_bars and validation_bars > 1:
        # Older runs kept only annualized scores: per-bar Sharpe, normal returns assumed.
        root = math.sqrt(bars_per_year(annualization))
        sr = float(selected_sharpe) / root
        variance = trial_sharpe_variance(fallback_sharpes, annualization)
        v = variance if variance is not None else 1.0 / (validation_bars - 1)
        sr0 = expected_max_sharpe(n, v)
        out.update(
            validation_bars=int(validation_bars),
            selected_validation_sharpe=sr,
            trial_sharpe_variance=variance,
            expected_max_sharpe=sr0,
        )
        out["dsr"] = _finite(probabilistic_sharpe_ratio(sr, sr0, validation_bars, 0.0, 3.0))
        out["dsr_note"] = (
            "run without per-bar candidate returns: from the selected validation Sharpe, "
            "normal returns assumed (skew 0, kurtosis 3)"
        )
    else:
        out["dsr_note"] = "the run recorded no validation returns or score of its candidates"
    if have and len(candidates) >= 2 and candidates.returns.shape[0] >= 4:
        pbo = probability_of_backtest_overfitting(candidates.returns, num_partitions)
        out["pbo"] = pbo.pbo
        out["pbo_partitions"] = pbo.num_partitions
    else:
        out["pbo_note"] = "needs ≥ 2 candidates with ≥ 4 bars of validation returns each"
    return out
