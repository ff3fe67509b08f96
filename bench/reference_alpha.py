#!/usr/bin/env python3
"""Known answer with costs: Sharpe of the cost-free oracle and of the cost-aware reference.

On a synthetic ``alpha`` market (:mod:`finpod.data.synthetic_market`) it rolls, through the env's
own accounting (next-bar fills, whole shares, ``--cost`` proportional costs):

- ``oracle_no_cost``: the oracle's target weights every bar, costs 0 (an upper bound);
- ``oracle``: the same with costs (what ignoring costs earns);
- ``reference``: :func:`finpod.backtest.ceiling.cost_aware_reference` (signal hysteresis plus
  the env's no-trade band), with costs: the after-cost Sharpe an agent is measured against;
- ``oracle_band_<b>``: the oracle's target behind the env's no-trade band of width b
  (weight units, trading to the band's edge), with costs (a simpler, weaker rule).

One JSON line per policy with the annualized Sharpe (``MarketData.annualization``),
annual return, annual turnover and costs as a fraction of initial capital.

    python bench/reference_alpha.py [--bar 1min] [--sessions 40] [--tickers 10]
        [--seeds 0 1 2] [--bands 0.05 0.1] [--persistence 0.99] [--strength 0.1]
        [--enter 1.5 --exit 0 --slot-weight 0.2 --band 0.02]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from finpod.backtest.ceiling import REFERENCE_BAND, cost_aware_reference  # noqa: E402
from finpod.data.calendar import bar_minutes  # noqa: E402
from finpod.data.synthetic_market import (  # noqa: E402
    REFERENCE_ENTER,
    REFERENCE_EXIT,
    REFERENCE_SLOT_WEIGHT,
    make_synthetic,
    oracle_policy,
)
from finpod.env import EnvConfig, rollout, score  # noqa: E402


def summary(result, market) -> dict:
    ann = market.annualization
    years = len(result.returns) / ann
    init = result.config.initial_cash
    return {
        "sharpe": round(score(result, "sharpe"), 3),
        "annual_return": round(score(result, "return"), 4),
        "annual_turnover": round(float(result.turnover.sum()) / years, 1),
        "annual_costs_frac": round(float(result.costs.sum()) / init / years, 4),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bar", default="1min")
    ap.add_argument("--sessions", type=int, default=40)
    ap.add_argument("--tickers", type=int, default=10)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--bands", type=float, nargs="*", default=[0.05, 0.1])
    ap.add_argument("--enter", type=float, default=REFERENCE_ENTER)
    ap.add_argument("--exit", type=float, default=REFERENCE_EXIT)
    ap.add_argument("--slot-weight", type=float, default=REFERENCE_SLOT_WEIGHT)
    ap.add_argument("--band", type=float, default=REFERENCE_BAND)
    ap.add_argument("--cost", type=float, default=0.002)
    ap.add_argument("--persistence", type=float, default=0.99)
    ap.add_argument("--strength", type=float, default=0.1)
    ap.add_argument("--fill-price", default="open")
    args = ap.parse_args(argv)
    per_session = 1 if bar_minutes(args.bar) is None else -(-390 // bar_minutes(args.bar))
    for seed in args.seeds:
        market = make_synthetic(
            args.tickers,
            args.sessions * per_session,
            bar=args.bar,
            regime="alpha",
            seed=seed,
            signal_persistence=args.persistence,
            alpha_strength=args.strength,
        )
        config = EnvConfig(cost_rate=args.cost, fill_price=args.fill_price)
        head = {
            "bar": args.bar,
            "bars": market.num_bars,
            "tickers": args.tickers,
            "seed": seed,
            "cost_rate": args.cost,
            "signal_persistence": args.persistence,
            "alpha_strength": args.strength,
        }
        runs = [("oracle_no_cost", oracle_policy(market), cfg_of(config, 0.0, 0.0))]
        runs.append(("oracle", oracle_policy(market), cfg_of(config, 0.0, args.cost)))
        policy, cfg = cost_aware_reference(
            market, config, args.enter, args.exit, args.slot_weight, args.band
        )
        runs.append(("reference", policy, cfg))
        for band in args.bands:
            cfg = replace(cfg_of(config, band, args.cost), band_target="edge")
            runs.append((f"oracle_band_{band:g}", oracle_policy(market), cfg))
        for name, policy, cfg in runs:
            t0 = time.perf_counter()
            result = rollout(policy, market, cfg)
            line = {**head, "policy": name, **summary(result, market)}
            line["seconds"] = round(time.perf_counter() - t0, 2)
            print(json.dumps(line), flush=True)
    return 0


def cfg_of(config: EnvConfig, band: float, cost: float) -> EnvConfig:
    return replace(config, action_mode="weights", no_trade_band=band, cost_rate=cost)


if __name__ == "__main__":
    sys.exit(main())
