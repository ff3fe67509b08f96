"""Which of a market's features the agent observes.

A dataset carries the built-in features (:data:`finpod.data.features.FEATURES`) and the
user feature columns it was built with (:mod:`finpod.data.user_features`: a files or
Alpaca dataset's ``--feature-column``, the synthetic source's ``alpha_signal``). The
observation always holds the built-in ones; of the user columns it holds those named by
the strategy's ``[env] user_features`` in that order, or all of them (in the dataset's
order) when the strategy names none. ``user_features = []`` observes the built-in
features only. The env's tables and layout (:mod:`finpod.env.tables`) read the market
through :func:`observed_market`, so training, scoring, the backtest and paper trading
observe the same columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from finpod.data.features import FEATURES
from finpod.data.market import MarketData
from finpod.data.user_features import user_feature_names
from finpod.errors import FinpodError


def check_user_features_setting(value: Any) -> list[str] | None:
    """``[env] user_features`` as a list of distinct names (None: unset); a bad value is
    one line naming it."""
    if value is None:
        return None
    hint = 'e.g. user_features = ["alpha_signal"], or [] for the built-in features only'
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise FinpodError(f"env.user_features must be a list of column names, got {value!r}", hint)
    names = []
    for name in value:
        if not isinstance(name, str) or not name.strip():
            raise FinpodError(f"env.user_features entry {name!r} is not a column name", hint)
        if name in FEATURES:
            raise FinpodError(
                f"env.user_features names {name!r}, a built-in feature (always observed)",
                "list only the dataset's user feature columns",
            )
        if name in names:
            raise FinpodError(f"env.user_features names {name!r} twice", hint)
        names.append(name)
    return names


def observed_feature_names(
    feature_names: Sequence[str], user_features: Sequence[str] | None
) -> list[str]:
    """The names of the observed features of a market (or manifest) with
    ``feature_names``, in observation order; a named column the dataset lacks is one line."""
    if user_features is None:
        return list(feature_names)
    have = user_feature_names(list(feature_names))
    for name in user_features:
        if name not in have:
            raise FinpodError(
                f"env.user_features names {name!r}, which the dataset does not have (its user "
                f"features: {', '.join(have) or 'none'})",
                "build the dataset with --feature-column NAME, or remove the name from the "
                "strategy's [env] user_features",
            )
    return [n for n in feature_names if n in FEATURES] + list(user_features)


def observed_market(market: MarketData, user_features: Sequence[str] | None) -> MarketData:
    """``market`` with only its observed features on the feature axis (the same object
    when that is all of them)."""
    names = observed_feature_names(market.feature_names, user_features)
    if names == list(market.feature_names):
        return market
    index = [market.feature_names.index(n) for n in names]
    return replace(market, features=market.features[:, :, index], feature_names=names)


__all__ = ["check_user_features_setting", "observed_feature_names", "observed_market"]
