"""User feature columns held in a table beside the bars: the extra columns of a long frame
(:func:`finpod.data.inmemory.from_frame`), or a feature file for bars that come from
elsewhere (``finpod download --source alpaca --feature-file FILE --feature-column NAME``,
and the paper trader's live bars, ``finpod paper --feature-file FILE``).

A feature file is a long table (CSV or Parquet) of ``timestamp`` (or ``date``), ``tic``
and the named numeric columns. Each row is placed at its own bar as the files source
places its columns (:func:`finpod.data.columns.place_feature_columns`): a row stamped with
a bar holds what was known at that bar's close; a row of a bar the grid does not have
(later than the last bar, outside the session) is not read. The columns then go through
:func:`finpod.data.user_features.user_feature` like every user feature (complete on real
bars, O(1), causal, the look-ahead heuristic).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from finpod.data.bars import Bars, normalize_columns, require_columns
from finpod.data.calendar import TZ
from finpod.data.columns import feature_names, place_feature_columns, refuse_feature_columns
from finpod.data.vendor import read_table
from finpod.errors import FinpodError


def table_features(
    df: pd.DataFrame,
    names: list[str] | str | None,
    bars: Bars,
    report: dict | None = None,
    *,
    where: str,
    timezone: str = TZ,
    bar_label: str = "start",
    date_format: str | None = None,
    columns: dict[str, str] | None = None,
) -> dict[str, np.ndarray]:
    """``{name: (T, N) float32}``: the columns ``names`` of the long table ``df``
    (``timestamp|date, tic, …``) on the grid of ``bars``, NaN where no row is.

    ``report``: the cleaning report of ``bars`` (an ``"auto"`` bar label reads the label
    the cleaner found there); ``bar_label``: intraday stamps mark the bar's ``"start"``
    (Alpaca's label) or ``"end"``. A missing or non-numeric column is one line.
    """
    wanted = feature_names(names)
    if not wanted:
        return {}
    df = normalize_columns(df, columns)
    require_columns(df, ("timestamp", "tic"), where)
    refuse_feature_columns(df, wanted, where)
    return place_feature_columns(
        df,
        wanted,
        bars,
        dict(report or {}),
        timezone=timezone,
        bar_label=bar_label,
        date_format=date_format,
    )


def read_feature_file(
    path: str | Path, names: list[str] | str | None, bars: Bars, **options: object
) -> dict[str, np.ndarray]:
    """:func:`table_features` of the feature file at ``path`` (CSV or Parquet)."""
    path = Path(path)
    if not path.is_file():
        raise FinpodError(
            f"feature file {path} does not exist",
            "give a CSV/Parquet table of timestamp, tic and the feature columns",
        )
    return table_features(read_table(path), names, bars, where=str(path), **options)


def check_feature_request(
    feature_file: str | Path | None, feature_columns: list[str] | str | None, source: str
) -> list[str]:
    """The feature column names of a source whose bars carry none of their own: both a
    feature file and the column names, or neither (one line otherwise)."""
    names = feature_names(feature_columns)
    if names and feature_file is None:
        raise FinpodError(
            f"{source} bars carry no column {names[0]!r}",
            f"give the file that holds it with --feature-file FILE (timestamp, tic, {names[0]})",
        )
    if feature_file is not None and not names:
        raise FinpodError(
            f"--feature-file {feature_file} is given but no --feature-column",
            "name the file's columns to use, e.g. --feature-column sentiment",
        )
    return names


__all__ = ["check_feature_request", "read_feature_file", "table_features"]
