"""User features: numeric columns a researcher brings, placed, checked and scaled like the
built-in ones, in one path every source uses.

A user feature is a (T, N) array in :attr:`Bars.extra <finpod.data.bars.Bars.extra>`
named after its column: ``finpod download --source files --feature-column NAME`` reads
column ``NAME`` of the input (:func:`finpod.data.columns.place_feature_columns`), and the
synthetic source writes its planted signal as the column ``alpha_signal``. Every one of
them becomes a per-ticker feature after the built-in :data:`~finpod.data.features.FEATURES`
through :func:`user_feature`:

- **time**: the value at bar t is the input's row of bar t, the bar whose close the
  built-in features at t use (a decision at t fills at t + 1). On a bar the cleaner
  forward-filled the last real value is carried (from the past only); before a ticker's
  first real bar the value is 0, the neutral value of the built-in features.
- **scale**: as given, clipped to ±:data:`~finpod.data.features.FEATURE_CLIP` like the
  built-in features, which are O(1) by construction. A column with more than
  :data:`MAX_CLIPPED_SHARE` of its values beyond the clip is refused: clipping would erase
  it; give it in O(1) units (e.g. a z-score over past bars).
- **complete**: a real bar without a finite value is refused (finpod fills no feature).
- **causal transform**: the placement is run twice, once with every value after a cut bar
  replaced, and must give the same feature up to the cut (:func:`check_causal_transform`,
  the perturbation test the built-in features pass in the test suite, here at build time).
- **look-ahead in the data** (a heuristic, :func:`lookahead_check`): the transform cannot
  know whether a column was computed from the future (tomorrow's return written on today's
  row). finpod measures the pooled correlation of the column at t with the log return
  *after* t (close t → close t + h) and with the return *up to* t (close t − h → close t),
  for h in :data:`LOOKAHEAD_HORIZONS` bars (and one session on intraday bars) with at least
  :data:`LOOKAHEAD_MIN_PAIRS` (bar, ticker) pairs per bar of h (a shorter market is not
  checked, and the manifest says so), and refuses
  the column when its largest forward correlation exceeds :data:`LOOKAHEAD_CORR` **and** is
  more than :data:`LOOKAHEAD_RATIO` times its largest backward one. A real signal predicts
  the next bars' returns with a correlation of a few hundredths; one that "predicts" them
  at 0.5 or more while it says little about the returns already seen is almost surely
  written from them. It is a heuristic: a column that leaks the future weakly (a 30 %
  share of tomorrow's return) passes, and an implausibly strong, honest, signal with no
  memory of past returns is refused. The numbers go into the manifest either way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from finpod.data.bars import Bars
from finpod.data.calendar import bar_minutes
from finpod.data.features import BLOCK_ELEMENTS, FEATURE_CLIP, FEATURES
from finpod.errors import FinpodError

#: Refuse a column whose correlation with a forward return is above this (absolute) ...
LOOKAHEAD_CORR = 0.5
#: ... and more than this many times its largest correlation with a backward return.
LOOKAHEAD_RATIO = 2.0
#: Return horizons of the look-ahead check, in bars (plus one session intraday).
LOOKAHEAD_HORIZONS = (1, 2, 5)
#: A horizon h is measured only on at least this many pairs per bar of h (pairs / h): the
#: h-bar returns overlap, so fewer would let chance reach the threshold on a short market.
LOOKAHEAD_MIN_PAIRS = 200
#: A column with more than this share of its real-bar values beyond ±FEATURE_CLIP is refused.
MAX_CLIPPED_SHARE = 0.01
#: How a user feature is scaled, in the manifest's ``feature_scaling``.
USER_SCALING = (
    "user column, as given at its bar; carried over filled bars, 0 before listing, clip +-10"
)
#: The look-ahead rule, in words, for the manifest.
LOOKAHEAD_RULE = (
    f"refused when max |corr(x_t, log return t->t+h)| > {LOOKAHEAD_CORR} and > "
    f"{LOOKAHEAD_RATIO:g} x max |corr(x_t, log return t-h->t)|, h in "
    f"{', '.join(map(str, LOOKAHEAD_HORIZONS))} bars (+1 session intraday) with >= "
    f"{LOOKAHEAD_MIN_PAIRS} pairs per bar of h; a heuristic"
)


def place_on_bars(values: np.ndarray, real: np.ndarray) -> np.ndarray:
    """(T, N) float32 feature of a user column: the value of each real bar; on other bars
    the last real bar's value (from the past only), 0 before a ticker's first real bar;
    clipped to ±FEATURE_CLIP.

    Args:
        values: (T, N) the column on the bar grid (NaN where the input had no row).
        real: (T, N) bool, True on the bars the source really had (``Bars.tradable``).
    """
    T = len(values)
    rows = np.where(real, np.arange(T)[:, None], -1)
    np.maximum.accumulate(rows, axis=0, out=rows)
    src = values[np.maximum(rows, 0), np.arange(values.shape[1])[None, :]]
    out = np.where(rows >= 0, src, 0.0)
    out = np.where(np.isfinite(out), out, 0.0)
    return np.clip(out, -FEATURE_CLIP, FEATURE_CLIP).astype(np.float32)


def check_causal_transform(
    transform: Callable[[np.ndarray], np.ndarray], values: np.ndarray, name: str, seed: int = 0
) -> None:
    """Raise unless ``transform(values)`` up to a cut bar is unchanged when every value
    after the cut is replaced (the cut: the middle bar; the new values: random)."""
    T = len(values)
    if T < 2:
        return
    cut = T // 2
    changed = np.array(values, dtype=np.float64, copy=True)
    rng = np.random.default_rng(seed)
    changed[cut + 1 :] = rng.standard_normal(changed[cut + 1 :].shape) * 3.0
    before = transform(values)[: cut + 1]
    after = transform(changed)[: cut + 1]
    if not np.array_equal(before, after):
        t = int(np.flatnonzero((before != after).any(axis=tuple(range(1, before.ndim))))[0])
        raise FinpodError(
            f"user feature {name!r}: its value at bar {t} changes when bars after {cut} "
            "change; the feature transform looks ahead",
            "please report it: finpod's placement of user columns must be causal",
        )


def _log_close(close: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(np.where(close > 0, close, np.nan).astype(np.float64))


def lookahead_check(
    name: str, values: np.ndarray, close: np.ndarray, real: np.ndarray, bar: str
) -> dict[str, Any]:
    """The look-ahead heuristic of the module docstring; raises on a refused column.

    Args:
        values: (T, N) the column on its real bars (NaN elsewhere).
        close: (T, N) closes (NaN before listing).
        real: (T, N) bool, the real bars.
        bar: bar size (adds a one-session horizon on intraday bars).

    Returns:
        ``{"forward_corr", "forward_horizon_bars", "backward_corr", "backward_horizon_bars",
        "pairs", "horizons_checked", "rule"}`` with the largest absolute correlations found
        (0 and no horizon checked on a market too short to tell).
    """
    T, N = values.shape
    minutes = bar_minutes(bar)
    horizons = sorted(
        {h for h in (*LOOKAHEAD_HORIZONS, *(() if minutes is None else (390 // minutes,))) if h < T}
    )
    step = max(1, min(N, BLOCK_ELEMENTS // max(T, 1)))
    best = {"forward": (0.0, 0), "backward": (0.0, 0)}
    pairs = 0
    checked: set[int] = set()
    for h in horizons:
        sums = {"forward": np.zeros(6), "backward": np.zeros(6)}
        for j0 in range(0, N, step):
            j1 = min(N, j0 + step)
            x = np.where(real[:, j0:j1], values[:, j0:j1], np.nan).astype(np.float64)
            lc = _log_close(close[:, j0:j1])
            moves = {
                "forward": np.vstack([lc[h:] - lc[:-h], np.full((h, j1 - j0), np.nan)]),
                "backward": np.vstack([np.full((h, j1 - j0), np.nan), lc[h:] - lc[:-h]]),
            }
            for way, y in moves.items():
                ok = np.isfinite(x) & np.isfinite(y)
                a, b = x[ok], y[ok]
                sums[way] += [len(a), a.sum(), b.sum(), (a * a).sum(), (b * b).sum(), (a * b).sum()]
        for way, (n, sa, sb, saa, sbb, sab) in sums.items():
            if n < LOOKAHEAD_MIN_PAIRS * h:
                continue
            checked.add(h)
            cov = sab / n - sa * sb / n**2
            var = (saa / n - (sa / n) ** 2) * (sbb / n - (sb / n) ** 2)
            corr = cov / np.sqrt(var) if var > 0 else 0.0
            if abs(corr) > abs(best[way][0]):
                best[way] = (float(corr), h)
            pairs = max(pairs, int(n))
    fwd, bwd = abs(best["forward"][0]), abs(best["backward"][0])
    if fwd > LOOKAHEAD_CORR and fwd > LOOKAHEAD_RATIO * bwd:
        raise FinpodError(
            f"user feature {name!r} looks ahead: its correlation with the log return of the "
            f"next {best['forward'][1]} bar(s) is {best['forward'][0]:+.2f}, with the "
            f"returns up to its bar at most {best['backward'][0]:+.2f} (rule: refused "
            f"above {LOOKAHEAD_CORR} and {LOOKAHEAD_RATIO:g}x the backward one)",
            "a feature's row t may use bars up to t only; shift the column so each row "
            "holds what was known at that bar's close",
        )
    return {
        "forward_corr": round(best["forward"][0], 4),
        "forward_horizon_bars": best["forward"][1],
        "backward_corr": round(best["backward"][0], 4),
        "backward_horizon_bars": best["backward"][1],
        "pairs": pairs,
        "horizons_checked": sorted(checked),
        "rule": LOOKAHEAD_RULE,
    }


class MissingUserValues(FinpodError):
    """A user column without a number on some real bars; ``last_bar_only``: only on the
    last bar (a live window whose newest row is not written yet)."""

    def __init__(self, message: str, hint: str, last_bar_only: bool) -> None:
        super().__init__(message, hint)
        self.last_bar_only = last_bar_only


def user_feature(name: str, bars: Bars) -> tuple[np.ndarray, dict[str, Any]]:
    """The (T, N) float32 feature of the user column ``bars.extra[name]`` and what its
    checks found (see the module docstring); a refused column raises one line."""
    if name in FEATURES:
        raise FinpodError(
            f"user feature {name!r} has the name of a built-in feature",
            "rename the column, e.g. --column NAME=my_name",
        )
    values = np.asarray(bars.extra[name])
    real = bars.tradable
    if values.shape != real.shape:
        raise FinpodError(f"user feature {name!r} is {values.shape}, the bars {real.shape}")
    with np.errstate(invalid="ignore"):
        missing = real & ~np.isfinite(values)
    if missing.any():
        t, i = np.argwhere(missing)[0]
        stamp = bars.timestamps[t]
        when = stamp.date() if bars.bar == "1d" else stamp
        raise MissingUserValues(
            f"user feature {name!r} has no number on {int(missing.sum())} real bar(s), e.g. "
            f"{bars.tickers[i]} at {when}",
            "give the column a value on every bar of the input (finpod fills no feature)",
            last_bar_only=not missing[:-1].any(),
        )
    clipped = float((np.abs(values[real]) > FEATURE_CLIP).mean()) if real.any() else 0.0
    if clipped > MAX_CLIPPED_SHARE:
        raise FinpodError(
            f"user feature {name!r} has {clipped:.0%} of its values beyond ±{FEATURE_CLIP:g}, "
            "where features are clipped",
            "give it in O(1) units, e.g. a z-score over past bars",
        )
    check_causal_transform(lambda v: place_on_bars(v, real), values, name)
    info = lookahead_check(name, values, bars.close, real, bars.bar)
    info["clipped_share"] = round(clipped, 6)
    return place_on_bars(values, real), {"scaling": USER_SCALING, "lookahead_check": info}


def user_feature_names(feature_names: list[str] | tuple[str, ...]) -> list[str]:
    """The user features among a dataset's feature names (those after the built-ins)."""
    return [n for n in feature_names if n not in FEATURES]


def feature_disclosure(
    manifest: Mapping[str, Any], observed: Sequence[str] | None = None
) -> str | None:
    """A sentence naming the user features the agent observes and their look-ahead check,
    for the tearsheet; None when the observation holds only the built-in features.

    ``observed``: the user columns the strategy names (``[env] user_features``); None = all
    the dataset's. The dataset's other user columns are named as not observed."""
    carried = user_feature_names(list(manifest.get("features") or []))
    names = carried if observed is None else [n for n in observed if n in carried]
    unused = [n for n in carried if n not in names]
    if not names:
        return None
    checks = manifest.get("user_features") or {}
    parts = []
    for n in names:
        la = (checks.get(n) or {}).get("lookahead_check") or {}
        if la.get("horizons_checked") == []:
            parts.append(f"{n} (look-ahead check skipped: too few bars)")
        elif "forward_corr" in la:
            parts.append(
                f"{n} (look-ahead check: corr {la['forward_corr']:+.2f} with the next "
                f"{la['forward_horizon_bars']} bar(s), {la['backward_corr']:+.2f} with the past)"
            )
        else:
            parts.append(n)
    skipped = f"; not observed: {', '.join(unused)}" if unused else ""
    return (
        f"observation features: the {len(FEATURES)} built-in ones and the user column(s) "
        f"{', '.join(parts)}, as given at each bar, clipped to ±{FEATURE_CLIP:g}{skipped}"
    )


__all__ = [
    "LOOKAHEAD_CORR",
    "LOOKAHEAD_HORIZONS",
    "LOOKAHEAD_RATIO",
    "LOOKAHEAD_RULE",
    "MAX_CLIPPED_SHARE",
    "MissingUserValues",
    "USER_SCALING",
    "check_causal_transform",
    "feature_disclosure",
    "lookahead_check",
    "place_on_bars",
    "user_feature",
    "user_feature_names",
]
