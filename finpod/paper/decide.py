"""One decision of a run's agent on a live window: observation, action, orders.

The agent is the one ``finpod backtest`` trades (:mod:`finpod.backtest.agents`: ``selected``,
``best``, ``top-N``, ``ensemble-N``) with the env settings it was trained and scored with.
The observation is the env's own (:func:`finpod.env.core.observe` over the tables of the
window, :func:`finpod.env.tables.build_tables`) with the account's cash and shares in place
of a simulated account. The orders are the env's own (:func:`finpod.env.core.transition`:
target weights or shares, no-trade band, partial adjustment, active budget, flat-at-close,
sells before buys, buys scaled to the cash): the step is taken on the window's tables with
one more bar, whose fill price is the decision bar's close (the only price known when the
order is sent; the env fills at the next bar's open or close), tradable where the decision
bar is. The account's value at the first start takes the place of the strategy's initial
cash (the observation's ``log(V / initial_cash)``); the account's State is the env's
(:func:`finpod.env.core.account_state`).

Against the env's fill model: the env, too, sizes an order from the decision bar's close
(its mark: target weights × value / mark); only where the buys need more cash than there
is does it use the fill price, scaling the buys to the cash at the next bar's open. So the
sells and every buy the cash does not bound are the env's; a cash-bound buy differs by the
overnight (or next-bar) move of the price, which no one knows when the order is sent
(measured on replayed bars with ±5 % overnight moves in ``tests/paper/test_fill_gap.py``:
the orders are the env's step filled at the decision close; a first all-cash decision
bought 1.97 % of the account more than the env, later ones within 0.02 %). When the open
is above the close, such buys overdraw the cash by that move: a margin account lends it,
a cash account rejects the order (one line, recorded).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from finpod.backtest.agents import ensemble_policy, is_ensemble, load_agents
from finpod.backtest.in_sample import run_manifest, validation_end
from finpod.backtest.run_record import RunRecord
from finpod.data.calendar import TZ
from finpod.data.features import FEATURES
from finpod.data.manifest import load_manifest
from finpod.data.market import MarketData
from finpod.env.config import EnvConfig
from finpod.env.core import account_state, observe, transition
from finpod.env.ensemble import EnsemblePolicy, Member
from finpod.env.impact import impact_rate
from finpod.env.observed import observed_feature_names
from finpod.env.tables import Tables, build_tables
from finpod.errors import FinpodError


@dataclass
class RunAgent:
    """A run's agent as the paper trader uses it."""

    run_id: str
    name: str
    """Canonical agent name (``best``, ``top-3``, ``ensemble-3``)."""
    pod_ids: list[str]
    config: EnvConfig
    """The env settings its orders go through (an ensemble's: :func:`ensemble_config`)."""
    tickers: list[str]
    bar: str
    calendar: str
    policy: Any
    """obs → action; for an ensemble, the members (built on each window)."""
    ensemble: bool = False
    user_features: list[str] = field(default_factory=list)
    """The dataset's user columns the agent (any member) observes: live bars carry none,
    they come from ``feature_file``."""
    feature_file: Path | None = None
    """CSV/Parquet of ``timestamp|date, tic`` and the :attr:`user_features` columns, read
    again at each decision (:mod:`finpod.data.feature_table`)."""
    feed: str = "sip"
    """The Alpaca feed of the bars the agent trained on (:func:`dataset_feed`)."""
    trained_until: str | None = None
    """The last session of the run's validation split (YYYY-MM-DD): the agent trained
    and was selected on bars up to it, so it trades only later bars
    (:func:`in_sample_refusal`). None when the run's own dataset cannot be read."""
    trained_unknown: str | None = None
    """Why :attr:`trained_until` is not known (None: it is)."""


def load_run_agent(
    run_dir: Path,
    agent: str = "selected",
    data: str | Path | None = None,
    feature_file: str | Path | None = None,
) -> RunAgent:
    """The run's agent, its recorded settings and its dataset's bar, tickers and calendar.

    An agent that observes user feature columns (:mod:`finpod.env.observed`) needs
    ``feature_file`` holding them; without it, one line names the columns."""
    run = RunRecord.read(run_dir)
    chosen_agent = run.agent(agent)  # the entries the backtest trades under that name
    name, chosen = chosen_agent.name, list(chosen_agent.entries)
    manifest = load_manifest(run.dataset_dir(data))
    device = torch.device("cpu")
    agents = load_agents(run.path, chosen, device)
    config, _ = run.env_of(chosen[0])
    ensemble = is_ensemble(name)
    policy: Any = ensemble_policy(agents)
    if ensemble:
        policy = [
            Member(ensemble_policy([a]), run.env_of(e)[0], e.pod_id)
            for e, a in zip(chosen, agents, strict=True)
        ]
        config = replace(
            config, action_mode="weights", allow_short=False, allow_negative_cash=False
        )
    configs = [m.config for m in policy] if ensemble else [config]
    needed = live_user_features(manifest, configs, feature_file)
    if data is None or manifest.get("hash") == run.dataset.hash:
        until, unknown = validation_end(manifest), None  # the run's own dataset
    else:
        _, own, unknown = run_manifest(run)
        until = None if own is None else validation_end(own)
    return RunAgent(
        run_id=run.run_id,
        name=name,
        pod_ids=[e.pod_id for e in chosen],
        config=config,
        tickers=[str(t) for t in manifest["tickers"]],
        bar=str(manifest["bar"]),
        calendar=str(manifest.get("calendar") or "XNYS"),
        policy=policy,
        ensemble=ensemble,
        user_features=needed,
        feature_file=None if feature_file is None else Path(feature_file),
        feed=dataset_feed(manifest),
        trained_until=until,
        trained_unknown=unknown,
    )


def in_sample_refusal(agent: RunAgent, last: pd.Timestamp) -> FinpodError | None:
    """The refusal of a decision on the bar at ``last`` when its session is not after
    :attr:`RunAgent.trained_until` (the agent trained or was selected on that day's bars);
    None when it is after, or when that day is not known."""
    if agent.trained_until is None:
        return None
    day = pd.Timestamp(last).tz_convert(TZ).tz_localize(None).normalize()
    if day > pd.Timestamp(agent.trained_until):
        return None
    return FinpodError(
        f"the live bar at {last} falls on or before {agent.trained_until}, the end of run "
        f"{agent.run_id}'s validation split: the agent was trained or selected on the bars "
        "of that day",
        "paper trading decides only on bars after them; check the machine's clock, or trade "
        "a run trained on a dataset that ends before today",
    )


def dataset_feed(manifest: dict[str, Any]) -> str:
    """The Alpaca feed whose bars are the dataset's: the one an ``alpaca`` dataset records
    (``iex`` where it records none, as ``finpod info`` reads it), ``sip`` for any other
    source (vendors' bars hold every exchange's trades, as SIP's do)."""
    if manifest.get("source") == "alpaca":
        return str((manifest.get("source_options") or {}).get("feed") or "iex")
    return "sip"


def live_user_features(
    manifest: dict[str, Any], configs: list[EnvConfig], feature_file: str | Path | None
) -> list[str]:
    """The user columns the agent's configs observe on the run's dataset; one line when
    there are some and no ``feature_file`` to read them from, or when it does not exist."""
    names = list(manifest.get("features") or FEATURES)
    needed = list(
        dict.fromkeys(
            n
            for c in configs
            for n in observed_feature_names(names, c.user_features)
            if n not in FEATURES
        )
    )
    if needed and feature_file is None:
        synthetic = manifest.get("source") == "synthetic"
        raise FinpodError(
            f"the agent observes the user feature(s) {', '.join(needed)}, which live bars do "
            "not carry",
            "a synthetic market's columns have no live values: train with [env] "
            "user_features = [] to trade on paper"
            if synthetic
            else f"pass --feature-file FILE, a CSV/Parquet of timestamp, tic, "
            f"{', '.join(needed)} with each bar's row written by its close",
        )
    if needed and not Path(str(feature_file)).is_file():
        raise FinpodError(
            f"feature file {feature_file} does not exist",
            f"give the CSV/Parquet that holds {', '.join(needed)}",
        )
    return needed


@dataclass
class Decision:
    """What the agent orders at the window's last bar (all (N,) over the run's tickers)."""

    observation: torch.Tensor
    """(obs_dim,) float32, the env's layout."""
    trade: torch.Tensor
    """Signed shares to trade (+ buy, − sell), after every execution control."""
    intended: torch.Tensor
    """Weights the account holds after the orders, at the decision bar's close."""
    held: torch.Tensor
    """Weights the account holds now."""
    value: float
    """Account value at the decision bar's close: cash + Σ shares · close, dollars."""


def next_bar_tables(tables: Tables, n: int, rate: torch.Tensor | None = None) -> Tables:
    """``tables`` with one bar more after the last, filled at the last bar's close; under
    square-root costs its fills pay ``rate`` (N,), the last bar's
    :func:`~finpod.env.impact.impact_rate`, as the env's fill after a decision bar does."""
    t = tables.step.shape[0] - 1
    row = tables.step[t]
    mark = row[n : 2 * n]
    tradable = (row[:n] > 0).to(row.dtype)
    decides = 1.0 if tables.schedule is None else float(tables.schedule[t, 0])
    nxt = torch.cat([mark * tradable, mark, tradable * (mark > 0).to(row.dtype) * decides])

    def more(x: torch.Tensor | None) -> torch.Tensor | None:
        return None if x is None else torch.cat([x, x[-1:]])

    return tables._replace(
        step=torch.cat([tables.step, nxt.unsqueeze(0)]),
        buy_block=more(tables.buy_block),
        delist=more(tables.delist),
        impact=None
        if tables.impact is None
        else torch.cat([tables.impact, rate.to(tables.impact.dtype).reshape(1, n)]),
    )


def is_decision_bar(agent: RunAgent, market: MarketData) -> bool:
    """Whether an order given at the window's last bar is executed (the strategy's
    decision schedule; always true without one)."""
    if not agent.config.has_schedule:
        return True
    tables = build_tables(market, agent.config, torch.device("cpu"))
    return bool(tables.schedule[-1, 0] > 0)


@torch.no_grad()
def decide(
    agent: RunAgent, market: MarketData, cash: float, shares: torch.Tensor, start_value: float
) -> Decision:
    """The agent's orders at ``market``'s last bar for an account of ``cash`` dollars and
    ``shares`` (N,) of the run's tickers (module docstring)."""
    config = replace(agent.config, initial_cash=float(start_value))
    n = market.num_stocks
    tables = build_tables(market, config, torch.device("cpu"))
    dtype = config.torch_dtype
    last = torch.tensor([market.num_bars - 1])
    state = account_state(
        last, torch.tensor([cash], dtype=dtype), shares.to(dtype).reshape(1, n), tables
    )
    obs = observe(state, tables, config)
    policy = agent.policy
    if agent.ensemble:
        members = [
            replace(m, config=replace(m.config, initial_cash=float(start_value))) for m in policy
        ]
        policy = EnsemblePolicy(members, market, device="cpu")
        policy.bar = market.num_bars - 1
    action = policy(obs)
    if not isinstance(action, torch.Tensor):
        action = torch.as_tensor(action)
    rate = impact_rate(market, config, torch.device("cpu"))
    rate_now = None if rate is None else rate[-1]
    after, out = transition(
        state, action.reshape(1, n), next_bar_tables(tables, n, rate_now), config
    )
    value = float(state.value[0])
    inv = 1.0 / max(value, 1e-12)
    return Decision(
        observation=obs[0],
        trade=out.trade[0].to(torch.float64),
        intended=(after.position[0] / after.value.clamp(min=1e-12)[0]).to(torch.float64),
        held=(state.position[0] * inv).to(torch.float64),
        value=value,
    )
