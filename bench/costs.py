#!/usr/bin/env python3
"""Do agents survive trading costs? Turnover, costs and Sharpe of a trained agent beside
the rule-based benchmarks and, on synthetic ``alpha`` markets, the cost-aware reference.

Each case builds its dataset with ``finpod download``, trains with ``finpod train`` (a
tournament of the case's strategy under ``--budget``), backtests with ``finpod backtest``
(the commands are printed), then prints one JSON line per policy on the backtest split:

- ``agent`` and the benchmarks of ``backtest.json`` / ``metrics.csv`` (``equal_weight_daily``,
  ``equal_weight_buy_hold``, ``momentum``), all traded through the same env and costs;
- on ``alpha`` markets, the backtest's ``signal_rule`` (the scripted ceiling under the
  agent's own bounds and controls) and ``cost_aware_reference``
  (:func:`finpod.backtest.ceiling.cost_aware_reference`: the signal's target weights
  behind a no-trade band, with the agent's account, fills and costs and nothing else of
  its settings), rolled over the same backtest split;

and one ``summary`` line with the goals: the agent's annual turnover over equal weight
daily's (goal ≤ 2), its costs in % of capital a year (goal < 1 on daily data), its Sharpe
as a share of the reference's (goal ≥ 0.5 on ``alpha``), its return against equal-weight
buy-and-hold, the PSR / DSR / PBO of ``backtest.json``, and how loaded the machine was
(load average and the share of all CPUs used by other processes while the case ran).

Cases (all short; run by hand)::

    python bench/costs.py quickstart [--budget 4m]     # daily sample, strategies/quickstart.toml
    python bench/costs.py alpha-daily [--budget 4m]    # synthetic daily alpha, 0.2 % costs
    python bench/costs.py alpha-1min [--budget 8m]     # synthetic 1-minute alpha, 0.2 % costs
    python bench/costs.py null-5min [--budget 6m]      # synthetic 5-minute null, 0.2 % costs
    python bench/costs.py all
    python bench/costs.py null-daily --market-seeds 3  # one run on each of 3 other markets
    python bench/costs.py alpha-1min-persistent --strategy my.toml   # another strategy

Work files go under ``--work`` (default ``finpod-costs`` in the system temp folder): datasets, runs, reports.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

FINPOD = [sys.executable, "-m", "finpod"]

#: Each case: dataset (``finpod download`` arguments), strategy, default budget.
CASES: dict[str, dict[str, Any]] = {
    "quickstart": {
        "download": shlex.split("--source sample"),
        "strategy": "strategies/quickstart.toml",
        "budget": None,
    },
    "alpha-daily": {
        # 20 tickers, daily bars: 4 years train, 1 validation, 1 backtest; the quick start
        # with its own budget (budget None: the strategy's).
        "download": shlex.split(
            "--source synthetic --regime alpha --bar 1d --n-tickers 20 --seed 1 --years 6"
            " --train 2015-01-02:2018-12-31 --validation 2019-01-02:2019-12-31"
            " --backtest 2020-01-02:2020-12-31"
        ),
        "strategy": "strategies/quickstart.toml",
        "budget": None,
    },
    "alpha-daily-wide": {
        # The same market, the wide-bets strategy (10 pt tilts, 75 % active budget).
        "download": shlex.split(
            "--source synthetic --regime alpha --bar 1d --n-tickers 20 --seed 1 --years 6"
            " --train 2015-01-02:2018-12-31 --validation 2019-01-02:2019-12-31"
            " --backtest 2020-01-02:2020-12-31"
        ),
        "strategy": "strategies/active_wide.toml",
        "budget": None,
    },
    "null-daily": {
        # The same calendar and universe with no signal: no alpha may be found.
        "download": shlex.split(
            "--source synthetic --regime null --bar 1d --n-tickers 20 --seed 1 --years 6"
            " --train 2015-01-02:2018-12-31 --validation 2019-01-02:2019-12-31"
            " --backtest 2020-01-02:2020-12-31"
        ),
        "strategy": "strategies/quickstart.toml",
        "budget": None,
    },
    "alpha-1min": {
        # 10 tickers, 1-minute bars: 20 train sessions, 9 validation, 12 backtest.
        "download": shlex.split(
            "--source synthetic --regime alpha --bar 1min --n-tickers 10 --seed 1 --years 0.2"
            " --train 2015-01-02:2015-01-30 --validation 2015-02-03:2015-02-13"
            " --backtest 2015-02-18:2015-03-05"
        ),
        "strategy": "strategies/intraday.toml",
        "budget": "8m",
    },
    "alpha-1min-persistent": {
        # The same market with a slower signal (φ = 0.99: half-life ~69 bars), the setting
        # the cost-aware reference was tuned on; at φ = 0.9 nothing survives 0.2 % costs.
        "download": shlex.split(
            "--source synthetic --regime alpha --bar 1min --n-tickers 10 --seed 1 --years 0.2"
            " --signal-persistence 0.99"
            " --train 2015-01-02:2015-01-30 --validation 2015-02-03:2015-02-13"
            " --backtest 2015-02-18:2015-03-05"
        ),
        # Decisions every 15-30 minutes: intraday.toml's once a session misses a signal
        # whose half-life is about an hour (its rule's backtest IR 21 against 63 here).
        "strategy": "strategies/intraday_signal.toml",
        "budget": "8m",
    },
    "null-5min": {
        # 20 tickers, 5-minute bars: 4 months train, 1 validation, 1 backtest.
        "download": shlex.split(
            "--source synthetic --regime null --bar 5min --n-tickers 20 --seed 2 --years 0.5"
            " --train 2015-01-02:2015-04-30 --validation 2015-05-04:2015-05-29"
            " --backtest 2015-06-02:2015-06-30"
        ),
        "strategy": "strategies/intraday.toml",
        "budget": "6m",
    },
}
POLICIES = (
    "agent",
    "equal_weight_daily",
    "equal_weight_buy_hold",
    "momentum",
    "signal_rule",  # the ceiling: the scripted signal rule under the agent's own bounds
    "cost_aware_reference",  # the unconstrained cost-aware reference (weights mode)
)


def machine_busy_s() -> float:
    """CPU seconds all processes of the machine have used since boot (``/proc/stat``)."""
    try:
        with open("/proc/stat") as fh:
            parts = [int(x) for x in fh.readline().split()[1:]]
    except OSError:
        return float("nan")
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
    return (sum(parts[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class TreeCPU:
    """CPU seconds used by the processes this benchmark starts, Ray's workers included:
    every process below a command is sampled while it runs (a worker that lives less
    than one sampling period is missed, so the "other processes" share is an upper
    bound)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, float], float] = {}

    def sample(self, root: int) -> None:
        import psutil

        try:
            procs = [psutil.Process(root)]
            procs += procs[0].children(recursive=True)
        except psutil.Error:
            return
        for proc in procs:
            try:
                times = proc.cpu_times()
                key = (proc.pid, proc.create_time())
            except psutil.Error:
                continue
            used = times.user + times.system + times.children_user + times.children_system
            self.seen[key] = max(self.seen.get(key, 0.0), used)

    @property
    def total(self) -> float:
        return sum(self.seen.values())


def finpod(args: list[str], log: Path, cpu: TreeCPU) -> str:
    """Run ``finpod ARGS`` (output appended to ``log``); its stdout, or exit on failure."""
    cmd = [*FINPOD, *args]
    print(json.dumps({"command": "finpod " + shlex.join(args)}), flush=True)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "COLUMNS": "120"}
    out_path = log.with_suffix(".stdout")
    with open(log, "a") as err, open(out_path, "w") as out:
        err.write(f"$ {shlex.join(cmd)}\n")
        err.flush()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=err, text=True)
        while proc.poll() is None:
            cpu.sample(proc.pid)
            time.sleep(1.0)
    stdout = out_path.read_text()
    with open(log, "a") as err:
        err.write(stdout + "\n")
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {shlex.join(cmd)}; see {log}")
    return stdout


def policy_lines(report: Path) -> dict[str, dict[str, float]]:
    """Per policy of ``metrics.csv``: Sharpe, returns, turnover and costs a year."""
    import pandas as pd

    metrics = pd.read_csv(report / "metrics.csv", index_col=0)
    info = json.loads((report / "backtest.json").read_text())
    ann = float(info["annualization"])
    returns = pd.read_parquet(report / "returns.parquet")
    years = len(returns) / ann
    # Turnover without the first fill (buying in), which dominates a short backtest.
    traded = pd.concat(
        [
            pd.read_parquet(report / "traded_value.parquet")["traded_value"].rename("agent"),
            pd.read_parquet(report / "benchmark_traded_value.parquet"),
        ],
        axis=1,
    )
    value = pd.concat(
        [
            pd.read_parquet(report / "account_value.parquet")["account_value"].rename("agent"),
            pd.read_parquet(report / "benchmark_account_value.parquet"),
        ],
        axis=1,
    )
    out = {}
    for name in POLICIES:
        if name not in metrics.columns:
            continue
        col = metrics[name]
        out[name] = {
            "sharpe": round(float(col["sharpe"]), 3),
            "cumulative_return": round(float(col["cumulative_return"]), 4),
            "annual_return": round(float(col["annual_return"]), 4),
            "annual_turnover": round(float(col["annual_turnover"]), 2),
            "annual_turnover_after_first_bar": round(
                float(traded[name].iloc[1:].sum() / value[name].mean() / years), 2
            ),
            "costs_pct_capital": round(100 * float(col["costs_pct_capital"]), 3),
            "costs_pct_capital_per_year": round(100 * float(col["costs_pct_capital"]) / years, 3),
            "max_drawdown": round(float(col["max_drawdown"]), 4),
        }
        for key in (
            "mean_exposure",
            "active_return",
            "tracking_error",
            "information_ratio",
            "ir_t_stat",
        ):
            if key in col.index and col[key] == col[key]:
                out[name][key] = round(float(col[key]), 4)
    return out


def market_download(download: list[str], market_seed: int | None) -> list[str]:
    """The case's ``finpod download`` arguments, with the synthetic market's own seed
    replaced by ``market_seed`` (None: the case's market)."""
    if market_seed is None:
        return download
    at = download.index("--seed") + 1
    return [*download[:at], str(market_seed), *download[at + 1 :]]


def market_regime(data_dir: Path) -> str | None:
    """The synthetic regime a dataset was built with (None for other sources): a null
    market's signal is noise, so it has no reference to reach."""
    from finpod.data import load_manifest

    manifest = load_manifest(data_dir)
    if manifest.get("source") != "synthetic":
        return None
    return (manifest.get("source_options") or {}).get("regime", "alpha")


def run_case(
    name: str,
    budget: str | None,
    work: Path,
    seed: int,
    strategy: str | None = None,
    market_seed: int | None = None,
) -> dict[str, Any]:
    case = CASES[name]
    budget = budget or case["budget"]
    strategy = strategy or case["strategy"]
    download = market_download(case["download"], market_seed)
    data_dir = work / "data" / (name if market_seed is None else f"{name}-market{market_seed}")
    log = work / f"{name}.log"
    work.mkdir(parents=True, exist_ok=True)
    cpu = TreeCPU()
    busy0, wall0 = machine_busy_s(), time.perf_counter()
    load0 = os.getloadavg()
    if not (data_dir / "manifest.json").is_file():
        finpod(["download", *download, "--out", str(data_dir)], log, cpu)
    stdout = finpod(
        [
            "train",
            "--strategy",
            strategy,
            "--data",
            str(data_dir),
            *(["--budget", budget] if budget else []),
            "--seed",
            str(seed),
            "--out",
            str(work / "runs"),
        ],
        log,
        cpu,
    )
    run_dir = Path(stdout.strip().splitlines()[-1].strip())
    reports = work / "reports"
    finpod(["backtest", str(run_dir), "--data", str(data_dir), "--out", str(reports)], log, cpu)
    board = json.loads((run_dir / "leaderboard.json").read_text())
    selected = board.get("selected", "best")
    report = reports / run_dir.name / ("" if selected == "best" else selected)
    versus = ensemble_vs_best(run_dir, board, data_dir, reports, log, cpu)
    wall = time.perf_counter() - wall0
    own = cpu.total
    foreign = max(0.0, machine_busy_s() - busy0 - own)
    load1 = os.getloadavg()

    lines = policy_lines(report)
    ref = lines.get("cost_aware_reference") if market_regime(data_dir) == "alpha" else None
    head = {
        "case": name,
        "strategy": strategy,
        "budget": budget,
        "seed": seed,
        "market_seed": market_seed,
        "run": str(run_dir),
    }
    for policy, values in lines.items():
        print(json.dumps({**head, "policy": policy, **values}), flush=True)

    info = json.loads((report / "backtest.json").read_text())
    run_info = json.loads((run_dir / "run.json").read_text())
    scores = [_round(e["score"]) for e in board.get("entries", []) if e.get("score") is not None]
    agent, ewd, ewbh = (
        lines["agent"],
        lines.get("equal_weight_daily"),
        lines.get("equal_weight_buy_hold"),
    )
    stats = info.get("statistics", {})
    env = info["info"]["env"]
    summary: dict[str, Any] = {
        **head,
        "policy": "summary",
        "bar": info["bar"],
        "agent_controls": {
            k: env.get(k)
            for k in (
                "decision_interval",
                "decision_times",
                "no_trade_band",
                "band_target",
                "partial_adjustment",
                "turnover_penalty",
                "flat_at_close",
            )
        },
        "agent_algorithm": info["info"].get("algorithms"),
        "num_trials": info.get("num_trials"),
        "turnover_after_first_bar_vs_equal_weight_daily": _ratio(
            agent["annual_turnover_after_first_bar"],
            ewd and ewd["annual_turnover_after_first_bar"],
        ),
        "turnover_vs_equal_weight_daily": _ratio(
            agent["annual_turnover"], ewd and ewd["annual_turnover"]
        ),
        "agent_costs_pct_capital_per_year": agent["costs_pct_capital_per_year"],
        "agent_minus_buy_hold_return": None
        if ewbh is None
        else round(agent["cumulative_return"] - ewbh["cumulative_return"], 4),
        "sharpe_share_of_reference": None
        if ref is None
        else _ratio(agent["sharpe"], ref["sharpe"]),
        "agent_information_ratio": agent.get("information_ratio"),
        "agent_ir_t_stat": agent.get("ir_t_stat"),
        "agent_tracking_error": agent.get("tracking_error"),
        "agent_mean_exposure": agent.get("mean_exposure"),
        "ceiling": info["info"].get("ceiling"),
        "learning": run_info.get("learning"),
        "tournament": run_info.get("throughput"),
        "validation_scores": scores,
        "validation_score_spread": None
        if len(scores) < 2
        else round(float(max(scores) - min(scores)), 4),
        "psr": _round(stats.get("psr")),
        "dsr": _round(stats.get("dsr")),
        "pbo": _round(stats.get("pbo")),
        "wall_s": round(wall, 1),
        "load_avg_1m_start_end": [round(load0[0], 2), round(load1[0], 2)],
        "own_cpu_s": round(own, 1),
        "other_processes_cpu_share": round(foreign / max(1e-9, wall * (os.cpu_count() or 1)), 3),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(summary), flush=True)
    if versus is not None:
        print(json.dumps({**head, "policy": "ensemble_vs_best", **versus}), flush=True)
    return summary


def median_line(name: str, summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over seeds of a case's headline numbers."""
    import statistics

    def med(get) -> float | None:
        values = [v for v in (get(s) for s in summaries) if isinstance(v, (int, float))]
        return round(statistics.median(values), 4) if values else None

    ceiling = lambda key: lambda s: (s.get("ceiling") or {}).get(key)  # noqa: E731
    return {
        "case": name,
        "policy": "median",
        "seeds": [s["seed"] for s in summaries],
        "market_seeds": [s.get("market_seed") for s in summaries],
        "agent_information_ratio": med(lambda s: s.get("agent_information_ratio")),
        "agent_ir_t_stat": med(lambda s: s.get("agent_ir_t_stat")),
        "agent_tracking_error": med(lambda s: s.get("agent_tracking_error")),
        "rule_information_ratio": med(ceiling("rule_information_ratio")),
        "ir_share_of_rule": med(ceiling("ir_share_of_rule")),
        "rule_sharpe": med(ceiling("rule_sharpe")),
        "sharpe_share_of_rule": med(ceiling("sharpe_share_of_rule")),
        "sharpe_share_of_cost_aware": med(ceiling("sharpe_share_of_cost_aware")),
        "agent_costs_pct_capital_per_year": med(
            lambda s: s.get("agent_costs_pct_capital_per_year")
        ),
        "wall_s": med(lambda s: s.get("wall_s")),
    }


def ensemble_vs_best(
    run_dir: Path, board: dict, data_dir: Path, reports: Path, log: Path, cpu: TreeCPU
) -> dict[str, Any] | None:
    """Validation score and backtest Sharpe and information ratio of the leaderboard
    ensemble beside the best single entry's (both backtested, whichever the run selected)."""
    record = board.get("ensemble")
    if not record:
        return None
    name = f"ensemble-{len(record['members'])}"
    sharpes, irs = {}, {}
    for agent in ("best", name):
        folder = reports / run_dir.name / ("" if agent == "best" else agent)
        if not (folder / "metrics.csv").is_file():
            finpod(
                [
                    "backtest",
                    str(run_dir),
                    "--agent",
                    agent,
                    "--data",
                    str(data_dir),
                    "--out",
                    str(reports),
                ],
                log,
                cpu,
            )
        line = policy_lines(folder)["agent"]
        sharpes[agent], irs[agent] = line["sharpe"], line.get("information_ratio")
    return {
        "selected": board.get("selected", "best"),
        "members": record["members"],
        "validation_score_best": _round(record["best_single_score"]),
        "validation_score_ensemble": _round(record["score"]),
        "backtest_sharpe_best": sharpes["best"],
        "backtest_sharpe_ensemble": sharpes[name],
        "backtest_information_ratio_best": irs["best"],
        "backtest_information_ratio_ensemble": irs[name],
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 3)


def _round(x: Any) -> Any:
    return round(float(x), 4) if isinstance(x, (int, float)) else x


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("case", choices=[*CASES, "all"])
    ap.add_argument("--budget", default=None, help="tournament budget (default: the case's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--seeds", type=int, default=1, help="run seeds seed … seed+N−1 and print their medians"
    )
    ap.add_argument("--strategy", default=None, help="strategy TOML (default: the case's)")
    ap.add_argument(
        "--market-seeds",
        type=int,
        default=0,
        help="N > 0: run seed on N other synthetic markets (the case's market seed + 1 … + N) "
        "instead of N run seeds on one market: a null market's backtest year is one draw",
    )
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "finpod-costs")
    args = ap.parse_args(argv)
    for name in CASES if args.case == "all" else [args.case]:
        if args.market_seeds:
            download = CASES[name]["download"]
            base = int(download[download.index("--seed") + 1])
            runs = [
                run_case(name, args.budget, args.work, args.seed, args.strategy, base + 1 + i)
                for i in range(args.market_seeds)
            ]
        else:
            runs = [
                run_case(name, args.budget, args.work, args.seed + i, args.strategy)
                for i in range(args.seeds)
            ]
        if len(runs) > 1:
            print(json.dumps(median_line(name, runs)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
