"""``BacktestResult``: the pandas objects of one backtest, its metrics table, save/load and HTML.

A result holds the agent's account history on the backtest split (returns, positions,
transactions, costs), the same history for each benchmark run through the same env, the
index returns, and a metrics table (rows: metrics, columns: strategies). It is what a
notebook works with, and what ``reports/<run>/`` stores so that ``finpod report`` can
redraw the tearsheet without running anything again.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from finpod.atomic import atomic_write, atomic_write_json, atomic_write_text
from finpod.backtest import metrics as m
from finpod.backtest.selection import selection_statistics
from finpod.env.config import EnvConfig
from finpod.errors import FinpodError

#: Column name of the agent in :attr:`BacktestResult.metrics` and the equity frames.
AGENT = "agent"
#: Column name of the index (e.g. ^NDX) in the benchmark frames.
INDEX = "index"

#: HTML renderers of a result, installed by :func:`set_renderers` (:mod:`finpod.backtest`
#: installs :mod:`finpod.backtest.tearsheet`'s): the data object does not import its view.
_RENDERERS: dict[str, Callable[[BacktestResult], str]] = {}


def set_renderers(
    page: Callable[[BacktestResult], str], table: Callable[[BacktestResult], str]
) -> None:
    """Install the renderers of :meth:`BacktestResult.to_html` (the whole tearsheet) and of
    ``_repr_html_`` (the metrics table, in notebooks)."""
    _RENDERERS.update(page=page, table=table)


def _renderer(kind: str) -> Callable[[BacktestResult], str]:
    # Python runs finpod.backtest's __init__ (which installs them) before this module can
    # be imported, so the renderers are here unless that __init__ failed part way.
    if kind not in _RENDERERS:
        raise FinpodError(
            "the tearsheet renderers are not installed",
            "import finpod.backtest and fix the error its import raises",
        )
    return _RENDERERS[kind]


_FRAMES = {
    "returns": "returns.parquet",
    "account_value": "account_value.parquet",
    "positions": "positions.parquet",
    "transactions": "transactions.parquet",
    "costs": "costs.parquet",
    "traded_value": "traded_value.parquet",
    "benchmark_returns": "benchmark_returns.parquet",
    "benchmark_costs": "benchmark_costs.parquet",
    "benchmark_traded_value": "benchmark_traded_value.parquet",
    "benchmark_account_value": "benchmark_account_value.parquet",
}

#: Optional frames, saved when set: the costs' market-impact part (square-root costs) and
#: the benchmarks' cash (their exposure).
IMPACT_FRAMES = ("impact", "benchmark_impact", "benchmark_cash")


@dataclass
class BacktestResult:
    """One backtest of a run's agent against the index and simple rules.

    Everything is indexed by the backtest split's bar timestamps (tz-aware): levels (account
    values, positions, costs) on all T bars, returns and traded value on bars 1..T − 1.
    """

    run_id: str
    """Run directory name the agent came from."""
    bar: str
    """Bar size of the data (``"1d"``, ``"1min"``, ...); sets the annualization."""
    initial_capital: float
    """Starting account value of the agent and of every benchmark, in dollars."""
    returns: pd.Series
    """(T − 1,) agent's simple return of each bar after the first (0.01 = +1 %)."""
    account_value: pd.Series
    """(T,) agent's account value (cash + holdings at close), dollars."""
    positions: pd.DataFrame
    """(T, N + 1) agent's dollar value per ticker at each close, plus a ``cash`` column."""
    transactions: pd.DataFrame
    """Agent's fills, one row each: timestamp, ticker, shares (signed), price, cost."""
    costs: pd.Series
    """(T,) transaction costs the agent paid at each bar, dollars."""
    traded_value: pd.Series
    """(T − 1,) dollars the agent bought + sold at each bar after the first."""
    benchmark_returns: pd.DataFrame
    """(T − 1, B) returns per bar of the index (column ``index``, if the dataset has one)
    and of each rule-based benchmark, on the agent's return timestamps."""
    benchmark_costs: pd.DataFrame
    """(T, B') costs paid per bar by each rule-based benchmark, dollars."""
    benchmark_traded_value: pd.DataFrame
    """(T − 1, B') dollars traded per bar by each rule-based benchmark."""
    benchmark_account_value: pd.DataFrame
    """(T, B') account value of each rule-based benchmark, dollars (bar 0: the capital)."""
    num_trials: int = 1
    """Candidates and checkpoints selection chose among (N of the Deflated Sharpe)."""
    trial_variance: float | None = None
    """Variance of the candidates' per-bar validation Sharpe ratios (None: unknown)."""
    annualization: float | None = None
    """Bars per year used to annualize (from the dataset's calendar); None: the bar size's
    :func:`finpod.data.market.periods_per_year`."""
    statistics: dict[str, Any] = field(default_factory=dict)
    """Selection statistics (:func:`finpod.backtest.selection.selection_statistics`): ``psr``
    of the backtest returns, ``dsr`` and ``pbo`` of the selection on validation,
    ``num_trials``, ``selection_split``; a value is None only where undefined, with a
    ``<name>_note`` saying why. Filled in from the returns alone when not given."""
    disclosures: dict[str, str] = field(default_factory=dict)
    """What a reader must know to trust the numbers, in words, by topic: ``universe``
    (survivorship), ``benchmark`` (what the index column is), ``dataset`` (a backtest on
    another dataset than the run's)."""
    info: dict[str, Any] = field(default_factory=dict)
    """Provenance: agent selection, checkpoints, dataset hash, split range, env config."""
    leaderboard: pd.DataFrame | None = None
    """The run's leaderboard (one row per entry, best first), when available."""
    learning_curves: pd.DataFrame | None = None
    """The run's ``metrics.csv`` (pod_id, env_steps, wall_s, split, metric, value)."""
    impact: pd.Series | None = None
    """(T,) the market-impact part of ``costs``, dollars (None: linear costs, 0)."""
    benchmark_impact: pd.DataFrame | None = None
    """(T, B') the market-impact part of ``benchmark_costs``, dollars (None: 0)."""
    benchmark_cash: pd.DataFrame | None = None
    """(T, B') cash of each rule-based benchmark at each close, dollars (None: not
    recorded; their exposure is then unknown)."""
    env_config: EnvConfig | None = None
    """The env settings the backtest ran with, as the agent's rollout got them (saved as
    ``info["env"]`` of ``backtest.json``; a setting a saved result did not record is
    :class:`~finpod.env.EnvConfig`'s default, the one it ran with). None: not recorded."""
    metrics: pd.DataFrame = field(init=False)
    """(M, 1 + B) metrics (rows :data:`finpod.backtest.metrics.METRIC_NAMES`) per strategy."""

    def __post_init__(self) -> None:
        self.metrics = self.compute_metrics()
        if not self.statistics:
            self.statistics = selection_statistics(self.returns, None, num_trials=self.num_trials)

    @property
    def bars_per_year(self) -> float:
        """Bars per year every annualized number of this result uses."""
        return float(self.annualization) if self.annualization else m.bars_per_year(self.bar)

    # ------------------------------------------------------------------ metrics
    @property
    def all_returns(self) -> pd.DataFrame:
        """(T, 1 + B) returns of the agent and every benchmark side by side."""
        frame = pd.concat([self.returns.rename(AGENT), self.benchmark_returns], axis=1)
        return frame.loc[self.returns.index]

    @property
    def index_returns(self) -> pd.Series | None:
        """Returns of the index, or None when the dataset has no index series."""
        if INDEX in self.benchmark_returns:
            return self.benchmark_returns[INDEX]
        return None

    @property
    def reference_returns(self) -> pd.Series | None:
        """Returns of the reference portfolio (active metrics are against it), or None."""
        if m.REFERENCE in self.benchmark_returns:
            return self.benchmark_returns[m.REFERENCE]
        return None

    @property
    def start(self) -> str:
        """How the agent and the benchmarks started: ``"cash"`` or ``"reference"``."""
        return (self.env_config or EnvConfig()).start

    def compute_metrics(self) -> pd.DataFrame:
        """Metrics table: one column per strategy (agent first), one row per metric."""
        bench = self.index_returns
        reference = self.reference_returns
        in_cash = self.start == "cash"
        cash = self.positions.get("cash")
        exposure = None
        if cash is not None:
            exposure = 1.0 - cash / self.account_value.where(self.account_value > 0)
        columns: dict[str, dict[str, float]] = {
            AGENT: m.performance_metrics(
                self.returns,
                self.bars_per_year,
                benchmark=bench,
                traded_value=self.traded_value,
                account_value=self.account_value,
                costs=self.costs,
                initial_capital=self.initial_capital,
                reference=reference,
                exposure=exposure,
                started_in_cash=in_cash,
                impact=self.impact,
            )
        }
        bench_cash = self.benchmark_cash if self.benchmark_cash is not None else pd.DataFrame()
        for name in self.benchmark_returns.columns:
            traded = self.benchmark_traded_value.get(name)
            value = self.benchmark_account_value.get(name)
            held = None
            if name in bench_cash and value is not None:
                held = 1.0 - bench_cash[name] / value.where(value > 0)
            columns[name] = m.performance_metrics(
                self.benchmark_returns[name],
                self.bars_per_year,
                benchmark=bench if name != INDEX else None,
                traded_value=traded,
                account_value=value,
                costs=self.benchmark_costs.get(name),
                initial_capital=self.initial_capital if traded is not None else None,
                reference=reference if name != INDEX else None,
                exposure=held,
                started_in_cash=in_cash,
                impact=None if self.benchmark_impact is None else self.benchmark_impact.get(name),
            )
            if name == INDEX:
                columns[name]["alpha"], columns[name]["beta"] = 0.0, 1.0
                columns[name]["mean_exposure"] = 1.0  # a price level: always fully invested
        table = pd.DataFrame(columns)
        table.index.name = "metric"
        return table

    def _repr_html_(self) -> str:
        return f"<b>finpod backtest of {self.run_id}</b>" + _renderer("table")(self)

    # ---------------------------------------------------------------- reports
    def to_html(self, path: str | Path) -> Path:
        """Write the self-contained tearsheet (images embedded) to ``path``; return it."""
        return atomic_write_text(Path(path), _renderer("page")(self))

    def save(self, directory: str | Path) -> Path:
        """Store every frame (parquet), the metrics (CSV) and provenance (JSON) in ``directory``.

        Files are written atomically; :meth:`load` reads them back.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for name, filename in _FRAMES.items():
            obj = getattr(self, name)
            frame = obj.to_frame(name) if isinstance(obj, pd.Series) else obj
            atomic_write(directory / filename, lambda p, f=frame: f.to_parquet(p))
        atomic_write_text(directory / "metrics.csv", self.metrics.to_csv())
        if self.leaderboard is not None:
            atomic_write_text(directory / "leaderboard.csv", self.leaderboard.to_csv(index=False))
        if self.learning_curves is not None:
            atomic_write_text(
                directory / "learning_curves.csv", self.learning_curves.to_csv(index=False)
            )
        for name in IMPACT_FRAMES:
            obj = getattr(self, name)
            if obj is not None:
                frame = obj.to_frame(name) if isinstance(obj, pd.Series) else obj
                atomic_write(directory / f"{name}.parquet", lambda p, f=frame: f.to_parquet(p))
        atomic_write_json(
            directory / "backtest.json",
            {
                "run_id": self.run_id,
                "bar": self.bar,
                "initial_capital": self.initial_capital,
                "num_trials": self.num_trials,
                "trial_variance": self.trial_variance,
                "annualization": self.bars_per_year,
                "statistics": _json_safe(self.statistics),
                "disclosures": self.disclosures,
                "info": self.info
                if self.env_config is None
                else {**self.info, "env": self.env_config.to_dict()},
            },
        )
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> BacktestResult:
        """Read a result stored by :meth:`save`."""
        directory = Path(directory)
        meta_path = directory / "backtest.json"
        if not meta_path.is_file():
            raise FinpodError(
                f"no saved backtest in {directory}", "run `finpod backtest RUN` first"
            )
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            frames = {name: pd.read_parquet(directory / f) for name, f in _FRAMES.items()}
        except (OSError, ValueError) as err:
            raise FinpodError(
                f"saved backtest in {directory} is unreadable: {err}",
                "run `finpod backtest RUN` again",
            ) from err
        for name in ("returns", "account_value", "costs", "traded_value"):
            frames[name] = frames[name][name]
        optional = {}
        for name in ("leaderboard", "learning_curves"):
            path = directory / f"{name}.csv"
            optional[name] = pd.read_csv(path) if path.is_file() else None
        for name in IMPACT_FRAMES:  # absent from backtests saved before impact existed
            path = directory / f"{name}.parquet"
            optional[name] = pd.read_parquet(path) if path.is_file() else None
        if optional["impact"] is not None:
            optional["impact"] = optional["impact"]["impact"]
        info = dict(meta.get("info") or {})
        env = info.pop("env", None)
        return cls(
            run_id=meta["run_id"],
            bar=meta["bar"],
            initial_capital=float(meta["initial_capital"]),
            num_trials=int(meta["num_trials"]),
            trial_variance=meta.get("trial_variance"),
            annualization=meta.get("annualization"),
            statistics=meta.get("statistics") or {},
            disclosures=meta.get("disclosures") or {},
            info=info,
            env_config=None if env is None else EnvConfig.from_dict(dict(env)),
            **frames,
            **optional,
        )


def _json_safe(value: Any) -> Any:
    """``value`` with every non-finite float as None (JSON has no NaN)."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
