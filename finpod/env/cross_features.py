"""Cross-sectional per-ticker features, built with the env's tables (``EnvConfig.cross_features``).

A ticker's own features say how *it* moved; a benchmark-relative policy needs how it moved
*against the others*. These features put each ticker's numbers in the context of the
tickers listed at the same bar, so a common move of the whole market reads 0:

=====================  ===========================================================  =====
name                   value of ticker i at bar t                                   width
=====================  ===========================================================  =====
``zscore``             each per-ticker feature f, z-scored across the tickers       F
                       listed at t: ``(f_i − mean f) / std f``. A feature equal for
                       every ticker (``turbulence``) reads 0
``residual_momentum``  for each W in :data:`RESIDUAL_WINDOWS`: the ticker's log     2
                       return over the last W bars minus the equal-weight mean of
                       the listed tickers' (the equal-weight reference's), z-scored
                       across them
=====================  ===========================================================  =====

They are appended after each ticker's own features (the observation's ``features`` slice
stays ticker-major: ``[f_i1 … f_iF, x_i1 … x_iX]``), so a cross-sectional policy sees
them in every ticker's token. Causal: bar t uses the marks and features of bars ≤ t only.
A ticker not listed at t (no mark yet, or delisted) is left out of the means and spreads
and reads 0; so does a ticker whose window starts before its first mark or before the
split (the first W bars of a split carry no residual momentum for that W). Pure tensor
ops over ``(T, N)``, on whatever device the tables are built on.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from finpod.errors import FinpodError

#: Known cross-sectional features (``EnvConfig.cross_features``).
CROSS_FEATURES = ("zscore", "residual_momentum")
#: Windows W of ``residual_momentum``, in bars (a week and a month of sessions on daily bars).
RESIDUAL_WINDOWS = (5, 20)
#: Every cross-sectional z-score is clipped to ± this (one outlier among few tickers
#: cannot read 30).
CROSS_CLIP = 5.0
#: Floor of the cross-sectional standard deviation (feature units): a feature that is
#: the same for every listed ticker reads 0, not 0 / 0.
STD_FLOOR = 1e-6


def check_cross_features(names: object) -> list[str]:
    """``names`` as a list of known feature names; FinpodError naming the first bad one."""
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise FinpodError(
            f"env.cross_features must be a list of names, got {names!r}",
            'e.g. cross_features = ["zscore", "residual_momentum"]',
        )
    out = [str(x) for x in names]
    for name in out:
        if name not in CROSS_FEATURES:
            raise FinpodError(
                f"env.cross_features has an unknown feature {name!r}",
                f"use any of {', '.join(CROSS_FEATURES)}",
            )
    if len(set(out)) != len(out):
        raise FinpodError(
            f"env.cross_features names a feature twice: {out}", "list each feature once"
        )
    return out


def cross_feature_names(names: Sequence[str], feature_names: Sequence[str]) -> list[str]:
    """Names of the appended per-ticker columns, in order (``zscore:<f>``, ``residual_momentum:<W>``)."""
    out: list[str] = []
    for name in names:
        if name == "zscore":
            out += [f"zscore:{f}" for f in feature_names]
        else:
            out += [f"residual_momentum:{w}" for w in RESIDUAL_WINDOWS]
    return out


def cross_zscore(x: torch.Tensor, listed: torch.Tensor) -> torch.Tensor:
    """``x (T, N, K)`` z-scored across the tickers of ``listed (T, N)`` bool, per bar and
    column; 0 where not listed or where fewer than 2 tickers are listed; clipped."""
    w = listed.to(x.dtype).unsqueeze(-1)
    count = w.sum(1, keepdim=True)
    mean = (x * w).sum(1, keepdim=True) / count.clamp(min=1.0)
    dev = (x - mean) * w
    var = (dev * dev).sum(1, keepdim=True) / (count - 1.0).clamp(min=1.0)
    z = dev / var.sqrt().clamp(min=STD_FLOOR)
    return (z * (count >= 2).to(x.dtype)).clamp(-CROSS_CLIP, CROSS_CLIP)


def residual_momentum(mark: torch.Tensor, listed: torch.Tensor) -> torch.Tensor:
    """(T, N, len(RESIDUAL_WINDOWS)) float64 residual momentum (see the module doc).

    ``mark (T, N)`` float64 mark prices (0 = no price yet), ``listed (T, N)`` bool.
    """
    logm = torch.log(torch.where(mark > 0, mark, torch.ones_like(mark)))
    cols = []
    for window in RESIDUAL_WINDOWS:
        ret = torch.zeros_like(logm)
        ok = torch.zeros_like(listed)
        if mark.shape[0] > window:
            ret[window:] = logm[window:] - logm[:-window]
            ok[window:] = listed[window:] & (mark[:-window] > 0)
        cols.append(cross_zscore(ret.unsqueeze(-1), ok))
    return torch.cat(cols, dim=-1)


def cross_features(
    names: Sequence[str], mark: torch.Tensor, features: torch.Tensor, listed: torch.Tensor
) -> torch.Tensor:
    """(T, N, X) float32 cross-sectional features ``names`` (X = 0 when none).

    ``mark (T, N)`` float64 mark prices, ``features (T, N, F)`` the per-ticker features
    (NaN already 0), ``listed (T, N)`` bool: the tickers in the cross-section at each bar.
    """
    parts = [torch.zeros((*mark.shape, 0), dtype=torch.float32, device=mark.device)]
    for name in names:
        if name == "zscore":
            parts.append(cross_zscore(features.double(), listed).float())
        else:
            parts.append(residual_momentum(mark, listed).float())
    return torch.cat(parts, dim=-1)
