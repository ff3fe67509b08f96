"""The observation has the same distribution in training and backtest on the sample data.

The ``prices`` slice used to be ``log(price / first price of the split)``: on the shipped
sample it averaged 0.62 in train and 0.14 in the backtest, so a policy met inputs in the
backtest it never saw in training. The z-score of the price against its trailing mean
(``finpod.env.tables.price_zscore``) does not depend on where the split starts.
"""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from finpod.data import load_split
from finpod.env.diagnostics import observation_stats

#: Two splits agree when mean, 5 % and 95 % quantiles differ by at most this many train
#: standard deviations.
TOLERANCE_STD = 0.25


@pytest.fixture(scope="module")
def sample_splits(tmp_path_factory):
    from finpod.pipeline import ensure_dataset

    path = ensure_dataset(tmp_path_factory.mktemp("sample") / "dataset")
    return {split: load_split(path, split) for split in ("train", "backtest")}


def anchored_prices(market) -> pd.DataFrame:
    """The old ``prices`` slice, log(close / the ticker's first close in the split)."""
    close = market.close.double()
    listed = close > 0
    first = torch.where(listed.any(0), listed.to(torch.int8).argmax(0), 0)
    ref = close.gather(0, first.unsqueeze(0))
    values = torch.log(torch.where(listed, close, ref) / ref)[listed]
    q = torch.quantile(values, torch.tensor([0.05, 0.95], dtype=values.dtype)).tolist()
    return pd.DataFrame(
        {"mean": [float(values.mean())], "std": [float(values.std())], "p5": q[0], "p95": q[1]},
        index=["prices"],
    )


def comparable(train: pd.Series, other: pd.Series) -> bool:
    limit = TOLERANCE_STD * train["std"]
    return all(abs(train[k] - other[k]) <= limit for k in ("mean", "p5", "p95"))


def test_price_slice_has_the_same_distribution_in_train_and_backtest(sample_splits):
    train = observation_stats(sample_splits["train"])
    backtest = observation_stats(sample_splits["backtest"])
    print(pd.concat({"train": train, "backtest": backtest}, axis=1).round(3).to_string())
    assert comparable(train.loc["prices"], backtest.loc["prices"])
    # The split-anchored slice it replaced fails the same check on the same data.
    old_train, old_backtest = (anchored_prices(sample_splits[s]) for s in ("train", "backtest"))
    assert not comparable(old_train.loc["prices"], old_backtest.loc["prices"])
