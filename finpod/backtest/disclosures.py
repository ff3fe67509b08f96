"""What a backtest report says beside its numbers: the largest active tilts, how the agent and
the benchmarks started, and whether the backtest ran on the dataset the run was trained on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from finpod.env.config import EnvConfig
from finpod.runs.agent_names import is_ensemble

#: Names listed by :func:`largest_tilts`.
TOP_TILTS = 5


def largest_tilts(
    positions: pd.DataFrame, reference_positions: pd.DataFrame, top: int = TOP_TILTS
) -> list[dict[str, Any]]:
    """The names with the largest average active weight, largest |tilt| first.

    Weight = dollar position / account value at each bar's close; the tilt of a name is its
    mean weight over the bars minus the reference portfolio's mean weight (portfolio weight
    units: 0.01 = one percentage point). ``cash`` is listed like a name."""

    def weights(frame: pd.DataFrame) -> pd.DataFrame:
        total = frame.sum(axis=1)
        return frame.div(total.where(total > 0), axis=0)

    tilt = (weights(positions).mean() - weights(reference_positions).mean()).dropna()
    order = tilt.abs().sort_values(ascending=False).index[:top]
    return [{"ticker": str(k), "mean_active_weight": float(tilt[k])} for k in order]


def start_disclosure(config: EnvConfig) -> str:
    """How the agent and the benchmarks started, in a sentence."""
    if config.start == "reference":
        return (
            f"Start: the agent and every rule-based benchmark start invested at the reference "
            f"portfolio ({config.reference}), an endowment with no purchase cost."
        )
    return (
        "Start: the agent and every rule-based benchmark start in cash; their first bar "
        "buys the initial portfolio (turnover 'ex initial' leaves that purchase out)."
    )


def dataset_disclosure(
    run_id: str, run_hash: str | None, data_hash: str | None, dataset: Path
) -> str | None:
    """A sentence when the backtest's dataset is not the one the run was trained on."""
    if run_hash is None or data_hash == run_hash:
        return None
    return (
        f"Cross-dataset backtest: run {run_id} was trained and selected on dataset "
        f"{str(run_hash)[:12]}, this backtest used {dataset} (hash {str(data_hash)[:12]}); "
        "its numbers are not the run's own out-of-sample result."
    )


def dsr_note(agent: str, pod_ids: list[str], ensemble_scored: bool = False) -> str | None:
    """Whose Deflated Sharpe the report shows when the backtest trades more than one
    entry, and what it trades; None for ``best`` (the DSR is plainly its own).

    ``ensemble_scored``: the run scored this very ensemble on validation, so the DSR is
    the ensemble's own; otherwise it is the best entry's (``pod_ids[0]``).
    """
    if len(pod_ids) <= 1 and not is_ensemble(agent):
        return None
    k = len(pod_ids)
    if is_ensemble(agent):
        trades = f"the backtest trades the mean target weights of the top {k}"
        if ensemble_scored:
            return f"the ensemble's own DSR (a validation candidate of the run); {trades}"
        return (
            f"DSR of the best entry ({pod_ids[0]}): the run did not score this ensemble on "
            f"validation; {trades}"
        )
    return (
        f"DSR of the best entry ({pod_ids[0]}); the backtest trades the mean action of the top {k}"
    )
