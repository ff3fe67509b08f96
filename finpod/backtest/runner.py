"""``run_backtest``: the run's agent and the benchmarks on the backtest split, as a result.

Only the backtest split of the run's dataset is loaded; the agent acts deterministically
with the run's env settings (capital, costs, fills); each rule-based benchmark trades
through the same env in target-weights mode; the index is the dataset's benchmark level
series. Nothing outside the backtest split is read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from finpod.backtest import metrics as m
from finpod.backtest.agents import (
    Policy,
    agent_description,
    ensemble_policy,
    is_ensemble,
    load_agents,
)
from finpod.backtest.benchmarks import (
    benchmark_config,
    benchmark_policies,
    reference_config,
    zero_policy,
)
from finpod.backtest.capacity import ACCOUNT_SIZES, capacity_line
from finpod.backtest.ceiling import (
    COST_AWARE,
    SIGNAL_FEATURE,
    SIGNAL_RULE,
    ceiling_shares,
    cost_aware_reference,
    signal_tilt_policy,
)
from finpod.backtest.disclosures import (
    dataset_disclosure,
    dsr_note,
    largest_tilts,
    start_disclosure,
)
from finpod.backtest.in_sample import (
    NOT_APPLICABLE,
    InSample,
    Presence,
    check_run_bars,
    unused_allow,
)
from finpod.backtest.metrics import REFERENCE
from finpod.backtest.result import INDEX, BacktestResult
from finpod.backtest.returns import index_returns, traded_value
from finpod.backtest.run_record import (
    RunInputs,
    RunRecord,
    leaderboard_frame,
    market_regime,
    run_spend,
    validation_bars,
)
from finpod.backtest.selection import selection_statistics
from finpod.backtest.split_hashes import check_dataset_bars, unchecked_bars_note
from finpod.data import load_manifest, load_split
from finpod.data.disclosure import benchmark_label, universe_disclosure
from finpod.data.manifest import feed_label
from finpod.data.market import MarketData
from finpod.data.user_features import feature_disclosure
from finpod.env import rollout
from finpod.env.config import EnvConfig
from finpod.env.ensemble import EnsemblePolicy, Member
from finpod.env.observed import observed_feature_names
from finpod.errors import FinpodError


# ----------------------------------------------------------------------------- rollouts
def backtest_market(
    market: MarketData,
    policy: Policy,
    config: EnvConfig,
    run_id: str = "adhoc",
    num_trials: int = 1,
    trial_variance: float | None = None,
    info: dict[str, Any] | None = None,
    leaderboard: pd.DataFrame | None = None,
    learning_curves: pd.DataFrame | None = None,
    with_benchmarks: bool = True,
    on_rollout: Callable[[str], None] | None = None,
    selection: dict[str, Any] | None = None,
    disclosures: dict[str, str] | None = None,
    ceiling_config: EnvConfig | None = None,
    capacity: tuple[float, ...] | None = None,
    capacity_policy: Callable[[], Policy] | None = None,
) -> BacktestResult:
    """Roll ``policy`` over ``market`` with ``config`` and run the benchmarks beside it.

    ``config`` is used as given (the run's recorded env settings, execution controls
    included); annualization is ``market.annualization`` (bars per year of the dataset's
    calendar). ``selection`` holds the keyword arguments of
    :func:`finpod.backtest.selection.selection_statistics` besides the agent's returns (the
    run's candidates, N, ...); without it the statistics are the PSR of the agent's returns
    and ``num_trials``. ``disclosures`` are sentences the report shows (survivorship, index,
    dataset). ``on_rollout(name)`` is called after
    each rollout (the agent, the reference, then each benchmark), e.g. to advance a
    progress bar over ``len(ROLLOUTS)`` steps (:data:`~finpod.backtest.benchmarks.ROLLOUTS`).
    ``capacity`` (account sizes, $) adds :func:`~finpod.backtest.capacity.capacity_line` to
    ``info["capacity"]``, the agent's too given ``capacity_policy`` (a fresh policy each call).
    """

    done = on_rollout or (lambda name: None)
    agent = rollout(policy, market, config)
    done("agent")
    ts = agent.returns.index
    bench_returns: dict[str, pd.Series] = {}
    idx_ret = index_returns(market)
    if idx_ret is not None:
        bench_returns[INDEX] = idx_ret
    costs, traded, values, impact, cash = {}, {}, {}, {}, {}
    info = dict(info or {})
    if with_benchmarks:
        n = market.num_stocks
        ref = rollout(lambda obs: zero_policy(obs, n), market, reference_config(config))
        done(REFERENCE)
        bench_returns[REFERENCE] = ref.returns
        costs[REFERENCE] = ref.costs
        impact[REFERENCE] = ref.impact
        traded[REFERENCE] = traded_value(ref.transactions, ts)
        values[REFERENCE] = ref.account_value
        cash[REFERENCE] = ref.positions["cash"]
        info["largest_tilts"] = largest_tilts(agent.positions, ref.positions)
        cfg = benchmark_config(config)
        lines = dict(benchmark_policies(market))
        configs = dict.fromkeys(lines, cfg)
        observed = observed_feature_names(
            market.feature_names, (ceiling_config or config).user_features
        )
        if SIGNAL_FEATURE in observed:
            # The ceiling under the agent's own bounds and controls, and the unconstrained
            # cost-aware reference (a market with a planted signal only).
            bounds = ceiling_config or config
            lines[SIGNAL_RULE] = signal_tilt_policy(market, bounds)
            configs[SIGNAL_RULE] = bounds
            lines[COST_AWARE], configs[COST_AWARE] = cost_aware_reference(market, bounds)
        for name, bench_policy in lines.items():
            out = rollout(bench_policy, market, configs[name])
            done(name)
            bench_returns[name] = out.returns
            costs[name] = out.costs
            impact[name] = out.impact
            traded[name] = traded_value(out.transactions, ts)
            values[name] = out.account_value
            cash[name] = out.positions["cash"]
    if SIGNAL_RULE in bench_returns and REFERENCE in bench_returns:
        bar = float(market.annualization) or market.bar
        ref_r = bench_returns[REFERENCE]

        def line(r: pd.Series) -> dict[str, float]:
            act = m.active_statistics(r, ref_r, bar)
            return {"sharpe": m.sharpe_ratio(r, bar), "information_ratio": act["information_ratio"]}

        info["ceiling"] = ceiling_shares(
            line(agent.returns),
            line(bench_returns[SIGNAL_RULE]),
            line(bench_returns[COST_AWARE]) if COST_AWARE in bench_returns else None,
        )
    if capacity:
        sizes = capacity_line(market, capacity_policy, config, tuple(capacity))
        info["capacity"] = sizes.to_dict("records")
    every_bar = market.timestamps
    annualization = float(market.annualization)
    selection = dict(selection or {"candidates": None, "num_trials": num_trials})
    selection.setdefault("annualization", annualization)
    statistics = selection_statistics(agent.returns, **selection)
    return BacktestResult(
        run_id=run_id,
        bar=market.bar,
        initial_capital=float(config.initial_cash),
        returns=agent.returns,
        account_value=agent.account_value,
        positions=agent.positions,
        transactions=agent.transactions,
        costs=agent.costs,
        traded_value=traded_value(agent.transactions, ts),
        benchmark_returns=pd.DataFrame(bench_returns, index=ts),
        benchmark_costs=pd.DataFrame(costs, index=every_bar),
        benchmark_traded_value=pd.DataFrame(traded, index=ts),
        benchmark_account_value=pd.DataFrame(values, index=every_bar),
        impact=agent.impact,
        benchmark_impact=pd.DataFrame(impact, index=every_bar),
        benchmark_cash=pd.DataFrame(cash, index=every_bar),
        num_trials=num_trials,
        trial_variance=trial_variance,
        annualization=annualization,
        statistics=statistics,
        disclosures={**(disclosures or {}), "start": start_disclosure(config)},
        info=info,
        leaderboard=leaderboard,
        learning_curves=learning_curves,
        env_config=config,
    )


def run_backtest(
    run_dir: str | Path,
    agent: str = "selected",
    data: str | Path | None = None,
    device: torch.device | str = "cpu",
    on_rollout: Callable[[str], None] | None = None,
    use_recorded_inputs: bool = False,
    allow_in_sample: bool = False,
) -> BacktestResult:
    """Backtest a run's selected agent on its dataset's backtest split.

    Args:
        run_dir: a run directory written by ``finpod train`` (run.json, leaderboard.json,
            checkpoints/).
        agent: one of :data:`~finpod.backtest.agents.AGENT_CHOICES`: ``"selected"``
            (what the run selected on validation, :func:`resolve_agent`), ``"best"`` (the
            top leaderboard entry), ``"top-k"`` (average the actions of the top
            :data:`DEFAULT_TOP_K` entries) or ``"top-N"``; ``"ensemble"`` or
            ``"ensemble-N"``: the leaderboard ensemble, the mean of the top entries' target
            weights, each member with its own recorded env settings for what shapes its
            target and the best entry's for the orders (:mod:`finpod.env.ensemble`).
        data: dataset directory; default the one recorded in run.json (its content hash
            must match the run's).
        device: where the rollout runs.
        on_rollout: called with a name after each of the ``len(ROLLOUTS)`` rollouts
            (:data:`~finpod.backtest.benchmarks.ROLLOUTS`).
        use_recorded_inputs: read the run's copies of the reference file and the
            benchmark levels; otherwise a file that changed since the run is refused
            (:class:`~finpod.backtest.run_record.RunInputs`).
        allow_in_sample: backtest another dataset's bars even where they overlap the run's
            train or validation bars (:mod:`finpod.backtest.in_sample`); otherwise such
            bars, or bars that cannot be compared, are refused before any rollout. The
            verdict of overlapping bars is IN-SAMPLE and the run's DSR and PBO are marked
            not applicable. Refused with the run's own dataset (nothing to allow).

    Returns:
        The agent vs the index and the rule-based benchmarks, with metrics.
    """

    run = RunRecord.read(run_dir)
    device = torch.device(device)
    chosen_agent = run.agent(agent)
    agent, chosen = chosen_agent.name, list(chosen_agent.entries)
    config, env_source = run.env_of(chosen[0])

    dataset = run.dataset_dir(data)
    manifest = load_manifest(dataset)
    run_hash = run.dataset.hash
    hash_matches = run_hash is None or manifest.get("hash") == run_hash
    if not hash_matches and data is None:
        raise FinpodError(
            f"the dataset at {dataset} changed since run {run.path.name} was trained "
            "(content hash differs)",
            "rebuild the same dataset or pass --data to backtest on another one",
        )
    bars_checked = True  # the backtest bars are those the run recorded (when it did)
    if hash_matches and run_hash is not None:
        bars_checked = check_dataset_bars(dataset, run.info, run.run_id)
    inputs = RunInputs.check(
        run.path, run.info, dataset, manifest, use_recorded=use_recorded_inputs
    )
    config = inputs.env(config)
    market = inputs.market(load_split(dataset, "backtest", device=device))
    # The run's own dataset keeps its splits apart; bars of another may lie in its past.
    in_sample: InSample | None = None
    if data is not None and not (run_hash is not None and manifest.get("hash") == run_hash):
        in_sample = check_run_bars(run, Presence.of_market(market))
        if (in_sample.found or in_sample.unchecked) and not allow_in_sample:
            raise in_sample.refusal(str(dataset))
    elif allow_in_sample:
        raise unused_allow(None if data is None else dataset)

    agents = load_agents(run.path, chosen, device)
    for a in agents:
        if getattr(a, "action_dim", market.num_stocks) != market.num_stocks:
            raise FinpodError(
                f"the agent trades {a.action_dim} tickers but the backtest split has "
                f"{market.num_stocks}",
                "backtest on the dataset the run was trained on",
            )
    run_id = run.run_id
    annualization = float(market.annualization)
    ensemble = is_ensemble(agent)
    ceiling_config: EnvConfig | None = None
    policy: Policy = ensemble_policy(agents)
    label = agent_description(agent, len(chosen))
    if ensemble:
        members = []
        for entry, member_agent in zip(chosen, agents, strict=True):
            member_config = inputs.env(run.env_of(entry)[0])
            members.append(Member(ensemble_policy([member_agent]), member_config, entry.pod_id))
        policy = EnsemblePolicy(members, market, device=device)
        config = policy.config
        # The ceiling trades under the best member's own bounds (the ensemble's orders go
        # through a target-weights config).
        ceiling_config = members[0].config
        if not chosen_agent.ensemble_scored:
            label += "; not a validation candidate of the run"
    if chosen_agent.asked_selected:
        label = f"selected on validation: {label}"
    decision = (run.board.selection or {}).get("decision")
    info = {
        "agent": f"{label}: " + ", ".join(e.pod_id for e in chosen),
        "selection_decision": decision,
        "selection_settings": (run.board.selection or {}).get("settings_note"),
        "agent_name": agent,
        "pod_ids": [e.pod_id for e in chosen],
        "algorithms": [e.algorithm for e in chosen],
        "score_name": run.board.score_name,
        "dataset_path": str(dataset),
        "dataset_hash": manifest.get("hash"),
        "run_dataset_hash": run_hash,
        "dataset_hash_matches_run": hash_matches,
        "split": "backtest",
        "start": str(market.timestamps[0]),
        "end": str(market.timestamps[-1]),
        "env_source": env_source
        + (" (best member's; each member's own for its targets)" if ensemble else ""),
        "annualization": annualization,
        "device": str(device),
        "market_regime": market_regime(manifest),
        "spend": run_spend(run.info, run.board.to_json(), run.curves),
    }
    disclosures = {
        "universe": universe_disclosure(manifest)["text"],
        "benchmark": benchmark_label(manifest),
    }
    if feed_label(manifest):
        disclosures["feed"] = f"Market data feed: {feed_label(manifest)}."
    mismatch = dataset_disclosure(run_id, run_hash, manifest.get("hash"), dataset)
    if mismatch:
        disclosures["dataset"] = mismatch
    user_columns = feature_disclosure(manifest, config.user_features)
    if user_columns:
        disclosures["features"] = user_columns
    if inputs.note:
        disclosures["inputs"] = inputs.note
    if not bars_checked:
        disclosures["bars"] = unchecked_bars_note(run_id)
    if in_sample is not None and in_sample.found:
        info["in_sample"] = in_sample.to_info()
    elif in_sample is not None and in_sample.unchecked:
        disclosures["in_sample"] = in_sample.unchecked_note()
    if run.stopped is not None:
        done, target = run.stopped.env_steps, run.stopped.target_steps
        at = f"{done:,} of {target:,} env steps" if target else f"{done:,} env steps"
        disclosures["stopped"] = (
            f"Training was stopped early, at {at}: this is the best checkpoint on "
            "validation so far (finpod train --resume RUN continues it)."
        )
    selection = {
        **run.validation.statistics_inputs(chosen_agent.candidate),
        "validation_bars": validation_bars(manifest),
        "annualization": annualization,
    }
    result = backtest_market(
        market,
        policy,
        config,
        run_id=run_id,
        num_trials=run.validation.num_trials,
        info=info,
        leaderboard=leaderboard_frame(run.board, run.entry_scores()),
        learning_curves=run.curves,
        on_rollout=on_rollout,
        selection=selection,
        disclosures=disclosures,
        ceiling_config=ceiling_config,
        capacity=ACCOUNT_SIZES if config.cost_model == "sqrt" else None,
        capacity_policy=lambda: (
            EnsemblePolicy(members, market, device=device) if ensemble else policy
        ),
    )
    result.trial_variance = result.statistics.get("trial_sharpe_variance")
    whose = dsr_note(agent, [e.pod_id for e in chosen], chosen_agent.ensemble_scored)
    if whose:
        why = result.statistics.get("dsr_note")
        result.statistics["dsr_note"] = f"{whose}; {why}" if why else whose
    if "in_sample" in info:
        # The selection's statistics are about validation; on these bars they test nothing.
        for key in ("dsr", "pbo"):
            result.statistics[key] = None
            result.statistics[f"{key}_note"] = NOT_APPLICABLE
    return result
