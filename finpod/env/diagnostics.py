"""Distribution of the observation slices over a split, to compare splits with each other.

A policy trained on one split and run on another must see inputs from the same
distribution; :func:`observation_stats` summarizes each slice that depends on the bar
only (``prices``, each feature, ``calendar``) so that train, validation and backtest can be
put side by side.
"""

from __future__ import annotations

import pandas as pd
import torch

from finpod.data.market import MarketData
from finpod.env.config import EnvConfig
from finpod.env.observed import observed_market
from finpod.env.tables import ObsLayout, build_tables, extra_feature_names

#: Quantiles reported by :func:`observation_stats`.
QUANTILES = (0.05, 0.5, 0.95)


def observation_stats(market: MarketData, config: EnvConfig | None = None) -> pd.DataFrame:
    """Per-slice mean, std and 5/50/95 % quantiles of the bar-only observation slices.

    Entries of a ticker are counted only on bars where it has a mark price (listed). Rows:
    ``prices``, ``feature:<name>`` for each feature, ``calendar:<k>`` when on; columns
    ``mean``, ``std``, ``p5``, ``p50``, ``p95``, ``count``. Under square-root costs the
    ``feature:impact`` row is for an account worth ``initial_cash`` (the env shifts it by
    the account's current value at each step).
    """
    config = config if config is not None else EnvConfig()
    market = observed_market(market, config.user_features)
    tables = build_tables(market, config, torch.device("cpu"))
    layout = ObsLayout.for_env(market, config)
    n, f = market.num_stocks, layout.num_features
    static = tables.static_obs.double()
    listed = tables.step[:, n : 2 * n] > 0  # (T, N) has a mark
    columns: dict[str, torch.Tensor] = {"prices": static[:, :n][listed]}
    feats = static[:, n : n + n * f].reshape(-1, n, f)
    names = [
        *market.feature_names,
        *extra_feature_names(config, list(market.feature_names)),
    ]
    for k, name in enumerate(names):
        columns[f"feature:{name}"] = feats[:, :, k][listed]
    offset = n + n * f
    for k in range(layout.calendar):
        columns[f"calendar:{k}"] = static[:, offset + k]
    rows = {}
    for name, values in columns.items():
        q = torch.quantile(values, torch.tensor(QUANTILES, dtype=values.dtype)).tolist()
        rows[name] = {
            "mean": float(values.mean()),
            "std": float(values.std()),
            "p5": q[0],
            "p50": q[1],
            "p95": q[2],
            "count": int(values.numel()),
        }
    return pd.DataFrame.from_dict(rows, orient="index")
