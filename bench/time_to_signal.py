#!/usr/bin/env python3
"""Time to signal: does the tournament find a better agent faster than what a user would
pick instead, at the same wall time and CPUs?

On planted daily markets (``alpha``: the signal is an observed feature; ``momentum``:
the alpha lives only in past prices, no feature carries it) and on a ``null`` market,
each seed runs, one system after another on the same machine (``--systems``):

- ``tournament``: ``finpod train`` of the strategy (default ``strategies/quickstart.toml``,
  ``pods = "auto"`` or ``--cpus``, its own budget and time cap, or ``--wall`` seconds),
  then ``finpod backtest``. Its wall time is every other system's budget (unless
  ``--wall``).
- ``learner``: one finpod learner with the strategy's base ``[agent]``, ``[env]`` and
  ``[train]`` settings, one torch thread, stopped (SIGTERM) after the wall time: its best
  checkpoint on validation so far is backtested (``learner_wall``); with ``--same-steps``
  also resumed to the tournament's env steps (``learner_steps``).
- ``random``: random search: fresh pods drawn from the strategy's ``[search]`` space, each
  trained to the end of its share of the budget, best on validation (``random_search``).
- ``selection``: selection only: the base settings with one seed per CPU (or
  ``--selection-seeds``), best on validation: MF-PBT's variance-exploitation control
  (``selection_only``).
- ``tune-pbt``, ``tune-asha``: Ray Tune's PopulationBasedTraining and ASHAScheduler driving
  finpod's learner as a function trainable over the same ``[search]`` space, one trial per
  CPU at once; one training_iteration is one segment (``pod_steps`` env steps) and its
  validation score. The row records the Ray version and what Tune cost: the share of the
  slots' wall time spent inside finpod's learner, seconds per trial start and per
  iteration outside it (``tune_pbt``, ``tune_asha``).
- ``sb3``: Stable-Baselines3 PPO with its defaults (``MlpPolicy``, one env, 2,048 steps a
  rollout, 10 epochs of minibatches of 64) on finpod's gymnasium env of the same
  ``[env]``, trained for the wall time and scored on validation every rollout with
  finpod's own rollout; its best on validation is scored on the backtest split the same
  way. Unmatched (``"unmatched": true``): one CPU, its own update intensity.

``random``, ``selection`` and the Tune systems are in ``bench/tts_peers.py``: they train
finpod's own learner (:class:`finpod.tournament.pod.Pod`) segment by segment from
checkpoint bytes and backtest with finpod's backtest.

A market may be a planted market with a mis-set base (``MARKET:BASE``): ``timid`` (the PPO
base's learning rate ÷ 20 and one update epoch) or ``misfit`` (the base decides every
63 sessions, far longer than the signal's half-life: 7 sessions on ``alpha``, 14 on
``momentum``); ``[search]`` is unchanged, so what searches can correct the base.

Each row is one JSON line: system, market, seed, CPUs, wall seconds, validation and
backtest information ratio (with its t), active return a year and tracking error on the
backtest split, env steps and gradient steps per env step; the tournament's row adds how
its budget was spent (``run.json``'s ``budget``) and, on ``alpha``, the scripted rule's
line under the winner's bounds. Every row names the machine's load (the load average and
the share of CPU other processes used while it ran) and is kept under ``WORK/rows/``: a
later invocation prints it instead of running the system again (``--rerun`` runs it), so
a study can be run in parts, one heavy job at a time. A ``summary`` line per market gives
the medians over seeds, and ``--plot`` draws validation IR against wall time and env
steps.

    python bench/time_to_signal.py --markets alpha,momentum,null --seeds 0,1,2 --same-steps
    python bench/time_to_signal.py --markets alpha --seeds 0 --systems tournament
    python bench/time_to_signal.py --markets alpha --seeds 0 --systems learner,random,selection
    python bench/time_to_signal.py --markets alpha --seeds 0 --systems tune-pbt,tune-asha
    python bench/time_to_signal.py --markets alpha:timid,momentum:misfit --seeds 0 --wall 120

Work files (datasets, runs, rows, Tune's trials) go under ``--work`` (default
``finpod-tts`` in the system temp folder).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tts_peers, next to this script

FINPOD = [sys.executable, "-m", "finpod"]
#: Synthetic daily markets: 30 names, 6 years, 0.2 % costs come from the strategy.
MARKET = {"n_tickers": 30, "years": 6, "seed": 1}
#: The momentum market: r[t] = κ·σ·z[t−2] + √(1−κ²)·σ·ε[t], where z is an AR(1) (φ) of
#: the ticker's own idiosyncratic shocks: an EWMA of its past returns, visible only in
#: prices.
MOMENTUM = {"kappa": 0.15, "phi": 0.95, "annual_vol": 0.3, "rho": 0.3}
#: Mis-set bases of a planted market (``MARKET:BASE``), written over the strategy file:
#: ``timid`` divides the PPO learning rate by this and trains one epoch per rollout;
#: ``misfit`` decides every MISFIT_INTERVAL sessions (a quarter), far longer than the
#: signal's half-life (ln 2 / −ln φ: 6.6 sessions on alpha, φ = 0.9; 13.5 on momentum).
TIMID_LR_DIVISOR = 20
MISFIT_INTERVAL = 63
BASES = ("default", "timid", "misfit")
#: ``--systems`` names → the system of their rows.
SYSTEMS = {
    "tournament": "tournament",
    "learner": "learner_wall",
    "random": "random_search",
    "selection": "selection_only",
    "tune-pbt": "tune_pbt",
    "tune-asha": "tune_asha",
    "sb3": "sb3_ppo_defaults",
}


# ----------------------------------------------------------------------------- machine
def cpu_busy_s() -> float:
    """CPU seconds every process of the machine has used since boot (``/proc/stat``)."""
    try:
        with open("/proc/stat") as fh:
            parts = [int(x) for x in fh.readline().split()[1:]]
    except OSError:
        return math.nan
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
    return (sum(parts[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class Load:
    """The machine's load while a row ran: load average, and other processes' share of
    all CPUs (machine CPU time minus this row's process tree, over wall × cores)."""

    def __init__(self) -> None:
        self.t0, self.busy0 = time.monotonic(), cpu_busy_s()
        self.own = 0.0
        # This process and its descendants (worker processes, Ray's), sampled until row().
        self._start: dict[tuple[int, float], float] = {}
        tree_cpu_s(os.getpid(), self._start)
        self._seen = dict(self._start)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.wait(0.5):
            tree_cpu_s(os.getpid(), self._seen)

    def add_own(self, seconds: float) -> None:
        self.own += seconds

    def row(self) -> dict[str, Any]:
        self._done.set()
        self._thread.join()
        tree_cpu_s(os.getpid(), self._seen)
        self.own += sum(v - self._start.get(k, 0.0) for k, v in self._seen.items())
        wall = time.monotonic() - self.t0
        other = (cpu_busy_s() - self.busy0 - self.own) / max(1e-9, wall * (os.cpu_count() or 1))
        return {"load_avg_1m": round(os.getloadavg()[0], 2), "other_cpu_share": round(other, 3)}


def tree_cpu_s(pid: int, seen: dict[tuple[int, float], float]) -> None:
    """Record the CPU seconds of ``pid`` and its descendants (Ray workers included)."""
    import psutil

    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return
    for p in procs:
        try:
            t = p.cpu_times()
            seen[(p.pid, p.create_time())] = t.user + t.system
        except psutil.Error:
            continue


def finpod(
    args: list[str], log: Path, load: Load, stop_after: float | None = None, threads: int = 0
) -> tuple[str, float]:
    """``finpod ARGS`` (SIGTERM after ``stop_after`` seconds): (stdout, wall seconds)."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "COLUMNS": "120"}
    if threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    print(json.dumps({"command": "finpod " + shlex.join(args)}), flush=True)
    t0 = time.monotonic()
    with open(log, "a") as err, open(log.with_suffix(".stdout"), "w") as out:
        proc = subprocess.Popen([*FINPOD, *args], cwd=REPO, env=env, stdout=out, stderr=err)
        stopped = False
        while proc.poll() is None:
            if stop_after is not None and not stopped and time.monotonic() - t0 >= stop_after:
                proc.send_signal(signal.SIGTERM)
                stopped = True
            time.sleep(0.5)
    wall = time.monotonic() - t0  # its CPU time: ``load`` samples this process's tree
    stdout = log.with_suffix(".stdout").read_text()
    if proc.returncode != 0 and not stopped:
        sys.exit(f"failed ({proc.returncode}): finpod {shlex.join(args)}; see {log}")
    return stdout, wall


# ----------------------------------------------------------------------------- markets
def build_market(name: str, work: Path, log: Path) -> Path:
    """The dataset of market ``name`` (built once under ``work``)."""
    out = work / "data" / name
    if (out / "manifest.json").is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    common = ["--n-tickers", str(MARKET["n_tickers"]), "--years", str(MARKET["years"])]
    if name in ("alpha", "null"):
        args = ["download", "--source", "synthetic", "--regime", name, "--bar", "1d"]
        args += [*common, "--seed", str(MARKET["seed"]), "--out", str(out)]
    elif name == "momentum":
        csv = work / "data" / "momentum.csv"
        momentum_csv(csv)
        args = ["download", "--source", "files", "--path", str(csv), "--out", str(out)]
    else:
        raise SystemExit(f"unknown market {name!r}: alpha, momentum or null")
    finpod(args, log, Load())
    return out


def momentum_arrays() -> dict[str, Any]:
    """The momentum market's sessions, returns ``r``, planted state ``z`` and prices (see
    :data:`MOMENTUM`); the same arrays on every call."""
    import numpy as np
    import pandas as pd

    from finpod.data.calendar import get_calendar

    cal = get_calendar("XNYS")
    days = cal.sessions_in_range(
        "2015-01-02", pd.Timestamp("2015-01-02") + pd.DateOffset(years=MARKET["years"])
    )
    t, n = len(days), MARKET["n_tickers"]
    rng = np.random.default_rng(MARKET["seed"])
    sigma = MOMENTUM["annual_vol"] / math.sqrt(252)
    k, phi, rho = MOMENTUM["kappa"], MOMENTUM["phi"], MOMENTUM["rho"]
    e = rng.standard_normal((t, n))
    m = rng.standard_normal((t, 1))
    z = np.zeros((t, n))
    for i in range(1, t):
        z[i] = phi * z[i - 1] + math.sqrt(1 - phi * phi) * e[i - 1]
    z_lag2 = np.vstack([np.zeros((2, n)), z[:-2]])
    eps = math.sqrt(rho) * m + math.sqrt(1 - rho) * e
    r = k * sigma * z_lag2 + math.sqrt(1 - k * k) * sigma * eps
    close = np.exp(np.log(rng.uniform(20, 200, n)) + np.cumsum(r, axis=0))
    prev = np.vstack([close[:1] / np.exp(r[:1]), close[:-1]])
    open_ = prev * np.exp(0.2 * sigma * rng.standard_normal((t, n)))
    high = np.maximum(open_, close) * np.exp(0.5 * sigma * np.abs(rng.standard_normal((t, n))))
    low = np.minimum(open_, close) * np.exp(-0.5 * sigma * np.abs(rng.standard_normal((t, n))))
    vol = np.round(1e6 * np.exp(0.3 * rng.standard_normal((t, n))))
    return {
        "days": days,
        "r": r,
        "z": z,
        "open": open_,
        "high": high,
        "low": low,
        "close": close,
        "volume": vol,
    }


def momentum_csv(path: Path) -> None:
    """A daily market whose alpha lives only in past prices (see :data:`MOMENTUM`), as one
    long CSV table (date, ticker, open, high, low, close, volume)."""
    import pandas as pd

    a = momentum_arrays()
    days, n = a["days"], a["r"].shape[1]
    open_, high, low = a["open"], a["high"], a["low"]
    close, vol = a["close"], a["volume"]
    frames = [
        pd.DataFrame(
            {
                "date": days.strftime("%Y-%m-%d"),
                "ticker": f"M{j:03d}",
                "open": open_[:, j],
                "high": high[:, j],
                "low": low[:, j],
                "close": close[:, j],
                "volume": vol[:, j],
            }
        )
        for j in range(n)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.concat(frames).to_csv(path, index=False)


def momentum_rules(data: Path, strategy: Path) -> dict[str, Any]:
    """The momentum market's ceilings, estimated in numpy beside the agents (an estimate:
    daily close-to-close returns, no price drift of the tilts, costs on the tilts' turnover
    only), with the strategy's own tilt bound, decision interval, no-trade band, partial
    adjustment and cost rate, on the validation and backtest splits:

    - ``oracle``: tilts toward the planted state ``z`` itself (what no agent can see);
    - ``price_rule``: tilts toward an EWMA (φ) of each name's past residual returns, the
      rule a researcher who knew the process would script from prices alone.
    """
    import numpy as np
    import pandas as pd

    env = tomllib.loads(strategy.read_text(encoding="utf-8")).get("env", {})
    cap = float(env.get("max_active_weight", 0.01))
    every = int(env.get("decision_interval", 1))
    band = float(env.get("no_trade_band", 0.0))
    partial = float(env.get("partial_adjustment", 1.0))
    cost = float(env.get("cost_rate", 0.002))
    a = momentum_arrays()
    r, phi = a["r"], MOMENTUM["phi"]
    res = r - r.mean(axis=1, keepdims=True)
    ewma = np.zeros_like(r)
    for t in range(1, len(r)):
        ewma[t] = phi * ewma[t - 1] + (1 - phi) * res[t]
    signals = {"oracle": a["z"], "price_rule": ewma}
    dates = pd.DatetimeIndex(a["days"]).strftime("%Y-%m-%d")
    splits = json.loads((data / "manifest.json").read_text())["splits"]
    out: dict[str, Any] = {}
    for split in ("validation", "backtest"):
        lo = int(np.searchsorted(dates, str(splits[split]["start"])[:10]))
        hi = int(np.searchsorted(dates, str(splits[split]["end"])[:10], side="right"))
        for name, sig in signals.items():
            w = np.zeros(r.shape[1])
            daily = []
            for t in range(lo, hi):
                paid = 0.0
                if (t - lo) % every == 0:
                    x = sig[t - 1] / (sig[t - 1].std() or 1.0)
                    target = cap * np.clip(x, -1.0, 1.0)
                    target -= target.mean()
                    move = np.where(np.abs(target - w) > band, partial * (target - w), 0.0)
                    paid = cost * np.abs(move).sum()
                    w = w + move
                daily.append(float(w @ res[t]) - paid)
            d = np.asarray(daily)
            ir = d.mean() / d.std() * math.sqrt(252) if d.std() > 0 else math.nan
            out.setdefault(name, {})[split] = {
                "information_ratio": round(ir, 4),
                "ir_t_stat": round(ir * math.sqrt(len(d) / 252), 4),
                "active_return": round(d.mean() * 252, 6),
                "tracking_error": round(d.std() * math.sqrt(252), 6),
            }
    return out


# ----------------------------------------------------------------------------- systems
def seeded_strategy(strategy: Path, seed: int, work: Path, single: bool) -> Path:
    """A copy of ``strategy`` with ``[train] seed`` set; ``single``: its base agent alone
    (no ``[tournament]`` nor ``[search]``), scored every pod segment, trained for ever
    (the caller stops it)."""
    from finpod.runs import toml_dumps

    raw = tomllib.loads(strategy.read_text(encoding="utf-8"))
    raw.setdefault("train", {})["seed"] = seed
    if single:
        segment = int(raw.get("tournament", {}).get("pod_steps", 65_536))
        raw.pop("tournament", None)
        raw.pop("search", None)
        raw["train"]["total_steps"] = 10**9
        raw["train"]["eval_every"] = segment
    out = work / "strategies" / f"{strategy.stem}-{'learner' if single else 'tour'}-s{seed}.toml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(toml_dumps(raw), encoding="utf-8")
    return out


def split_market(market: str) -> tuple[str, str]:
    """(planted market, base) of ``MARKET[:BASE]``."""
    planted, _, base = market.partition(":")
    base = base or "default"
    if base not in BASES:
        raise SystemExit(f"unknown base {base!r} in {market!r}: {', '.join(BASES)}")
    return planted, base


def market_tag(market: str) -> str:
    """``market`` as a file-name part (``alpha:timid`` → ``alpha-timid``)."""
    return market.replace(":", "-")


def variant_strategy(strategy: Path, base: str, work: Path) -> Path:
    """``strategy`` with a mis-set base (see :data:`BASES`), ``[search]`` unchanged;
    ``strategy`` itself for ``"default"``."""
    if base == "default":
        return strategy
    from finpod.agents import ALGORITHMS
    from finpod.runs import toml_dumps

    raw = tomllib.loads(strategy.read_text(encoding="utf-8"))
    agent = raw.setdefault("agent", {})
    if base == "timid":
        if agent.get("algorithm", "ppo") != "ppo":
            raise SystemExit(f"timid needs a PPO [agent] in {strategy}")
        hp = agent.setdefault("hparams", {})
        lr = float(hp.get("learning_rate", ALGORITHMS["ppo"][0]().learning_rate))
        hp["learning_rate"] = lr / TIMID_LR_DIVISOR
        hp["update_epochs"] = 1
    elif base == "misfit":
        raw.setdefault("env", {})["decision_interval"] = MISFIT_INTERVAL
    out = work / "strategies" / f"{strategy.stem}-{base}.toml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(toml_dumps(raw), encoding="utf-8")
    return out


def time_to_fraction(curve: list[tuple[float, float]], fraction: float = 0.9) -> float | None:
    """Seconds until the best validation score so far first reaches ``fraction`` of the
    run's final best (``curve``: (seconds since the system started, score) pairs); None
    when the final best is not positive (a share of it means nothing) or not finite."""
    scores = [v for _, v in curve if math.isfinite(v)]
    if not scores or max(scores) <= 0:
        return None
    target = fraction * max(scores)
    for t, v in sorted(curve):
        if math.isfinite(v) and v >= target:
            return round(t, 1)
    return None


def tournament_curve(run_dir: Path, started: float) -> list[tuple[float, float]]:
    """(seconds since ``started`` (epoch), validation score) of every pod the tournament
    scored, read from its ``train.log``."""
    import datetime

    pattern = re.compile(r"^(\S+ \S+) INFO done (p\d+) \S+ score (\S+) ")
    curve = []
    for line in (run_dir / "train.log").read_text(encoding="utf-8").splitlines():
        m = pattern.match(line)
        if m:
            stamp = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            curve.append((round(stamp - started, 2), float(m.group(3))))
    return curve


def backtest_line(run_dir: Path, reports: Path, log: Path) -> dict[str, Any]:
    """``finpod backtest`` of a run: the agent's backtest line (and the scripted rule's)."""
    import pandas as pd

    stdout, _ = finpod(["backtest", str(run_dir), "--reports", str(reports)], log, Load())
    # `finpod backtest` prints the selected agent's report folder alone on stdout:
    # reports/<run>/ (best), reports/<run>/<pod id>/ (the champion or a challenger) or
    # reports/<run>/ensemble-K/.
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    folder = Path(lines[-1]) if lines else reports / run_dir.name
    metrics = pd.read_csv(folder / "metrics.csv", index_col=0)
    out: dict[str, Any] = {"agent_folder": folder.name}
    for name in ("agent", "signal_rule"):
        if name in metrics.columns:
            col = metrics[name]
            out[name] = {
                k: round(float(col[k]), 4)
                for k in ("information_ratio", "ir_t_stat", "active_return", "tracking_error")
                if k in col.index and col[k] == col[k]
            }
    return out


def run_summary(run_dir: Path) -> dict[str, Any]:
    """Validation score, env steps, gradient steps per env step and budget of a run."""
    from finpod.runs import Leaderboard

    info = json.loads((run_dir / "run.json").read_text())
    board = Leaderboard.load(run_dir)
    best = board.best()
    out = {
        "validation_ir": None if best is None else round(best.score, 4),
        "env_steps": (info.get("throughput") or {}).get("env_steps") or (best and best.env_steps),
        "selected_env_steps": None if best is None else best.env_steps,
        "grad_updates_per_env_step": (info.get("learning") or {}).get("updates_per_env_step"),
    }
    if "budget" in info:
        b = info["budget"]
        out["budget"] = {
            k: b.get(k) for k in ("pods", "fresh", "promotions", "children", "stops", "max_rung")
        }
        out["budget"]["selected"] = b.get("selected")
        out["budget"]["lineages"] = b.get("lineages", [])[:5]
    return out


def learner_steps_of(run_dir: Path) -> int:
    """Env steps a (stopped) single-agent run trained: its last metrics row's."""
    from finpod.runs import RunDir

    rows = RunDir.open(run_dir).metrics
    return max((r[1] for r in rows), default=0)


def sb3_row(data: Path, strategy: Path, seed: int, wall: float, target: float) -> dict[str, Any]:
    """SB3 PPO (its defaults) on finpod's gymnasium env for ``wall`` seconds, scored on
    validation after every rollout with finpod's rollout; its best on the backtest."""
    import numpy as np
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    from finpod.data import load_split
    from finpod.env import rollout, score
    from finpod.env.gymnasium_env import TradingGymEnv
    from finpod.strategy import load_strategy

    torch.set_num_threads(1)
    config = load_strategy(strategy).config
    train = load_split(data, "train")
    valid, back = load_split(data, "validation"), load_split(data, "backtest")
    venv = DummyVecEnv([lambda: TradingGymEnv(train, config, seed=seed)])
    model = PPO("MlpPolicy", venv, seed=seed, device="cpu", verbose=0)

    def policy(obs: torch.Tensor) -> torch.Tensor:
        action, _ = model.predict(obs.cpu().numpy(), deterministic=True)
        return torch.as_tensor(np.asarray(action, dtype=np.float32))

    def ir(market) -> tuple[float, Any]:
        res = rollout(policy, market, config)
        return score(res, "information_ratio"), res

    t0 = time.monotonic()
    best, best_state, reached, curve = -math.inf, None, None, []
    while time.monotonic() - t0 < wall:
        model.learn(model.n_steps, reset_num_timesteps=False)
        value, _ = ir(valid)
        elapsed = time.monotonic() - t0
        curve.append((elapsed, int(model.num_timesteps), value))
        if value > best:
            best = value
            best_state = {k: v.clone() for k, v in model.policy.state_dict().items()}
        if reached is None and value >= target:
            reached = elapsed
    if best_state is not None:
        model.policy.load_state_dict(best_state)
    _, res = ir(back)
    active = res.returns - res.reference_returns
    ann = float(res.annualization)
    te = float(active.std() * math.sqrt(ann))
    updates = model._n_updates * (model.n_steps // model.batch_size)
    return {
        "validation_ir": round(best, 4),
        "backtest": {
            "information_ratio": round(score(res, "information_ratio"), 4),
            "ir_t_stat": round(float(active.mean() / active.std() * math.sqrt(len(active))), 4),
            "active_return": round(float(active.mean() * ann), 4),
            "tracking_error": round(te, 4),
        },
        "env_steps": int(model.num_timesteps),
        "grad_updates_per_env_step": round(updates / max(1, model.num_timesteps), 6),
        "wall_s": round(time.monotonic() - t0, 1),
        "time_to_tournament_validation_ir_s": None if reached is None else round(reached, 1),
        "curve": curve,
    }


# ----------------------------------------------------------------------------- main
class Rows:
    """The rows of one market and seed, one JSON file per system under ``WORK/rows/``."""

    def __init__(self, work: Path, market: str, seed: int, rerun: bool) -> None:
        self.folder = work / "rows"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.stem, self.rerun = f"{market_tag(market)}-s{seed}", rerun

    def path(self, system: str) -> Path:
        return self.folder / f"{self.stem}-{system}.json"

    def get(self, system: str) -> dict[str, Any] | None:
        """A row an earlier invocation wrote (None with ``--rerun``)."""
        path = self.path(system)
        if self.rerun or not path.is_file():
            return None
        return json.loads(path.read_text())

    def put(self, row: dict[str, Any]) -> dict[str, Any]:
        self.path(row["system"]).write_text(json.dumps(row, default=str))
        return row


def emit(row: dict[str, Any]) -> None:
    """Print a row as one JSON line (without its learning curve)."""
    print(json.dumps({k: v for k, v in row.items() if k != "curve"}, default=str), flush=True)


def run_seed(args, market: str, data: Path, seed: int) -> list[dict[str, Any]]:
    from tts_peers import Budget, random_search, selection_only, tune_search

    work = Path(args.work)
    planted, base_name = split_market(market)
    tag = market_tag(market)
    log = work / "logs" / f"{tag}-s{seed}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    runs, reports = work / "runs", work / "reports"
    strategy = variant_strategy(Path(args.strategy), base_name, work)
    store = Rows(work, market, seed, args.rerun)
    rows: list[dict[str, Any]] = []
    base = {"market": market, "seed": seed, "strategy": Path(args.strategy).name}
    if base_name != "default":
        base.update({"planted": planted, "base": base_name})

    def record(row: dict[str, Any]) -> dict[str, Any]:
        rows.append(store.put(row))
        emit(row)
        return row

    t_row: dict[str, Any] = store.get("tournament") or {}
    if "tournament" in args.systems and not t_row:
        load = Load()
        tour = seeded_strategy(strategy, seed, work, single=False)
        run_id = f"tour-{tag}-s{seed}"
        cmd = ["train", "-s", str(tour), "--data", str(data), "--runs", str(runs)]
        cmd += ["--run-id", run_id, "--pods", str(args.cpus)]
        if args.wall:
            cmd += ["--budget", f"{args.wall:g}s"]
        if (runs / run_id).exists():  # an earlier invocation's run: this one is new
            run_id = f"{run_id}-{int(time.time())}"
            cmd[-3] = run_id
        started = time.time()
        _, wall = finpod(cmd, log, load)
        t_row = {**base, "system": "tournament", "cpus": args.cpus, "wall_s": round(wall, 1)}
        t_row.update(run_summary(runs / run_id))
        curve = tournament_curve(runs / run_id, started)
        t_row["curve"] = curve
        t_row["time_to_90pct_validation_s"] = time_to_fraction(curve)
        t_row["backtest"] = backtest_line(runs / run_id, reports, log)
        record({**t_row, **load.row()})
    elif t_row:
        rows.append(t_row)
        emit(t_row)
    wall = args.wall or t_row.get("wall_s")
    others = [s for s in args.systems if s != "tournament"]
    if others and not wall:
        raise SystemExit(
            f"no wall time for {market} seed {seed}: run --systems tournament first or pass --wall"
        )
    budget = Budget(wall_s=float(wall or 0), cpus=args.cpus)
    same = {"cpus": args.cpus, "budget_wall_s": budget.wall_s}

    for name in others:
        system = SYSTEMS[name]
        if (old := store.get(system)) is not None:
            rows.append(old)
            emit(old)
            continue
        load = Load()
        if name == "learner":
            single = seeded_strategy(strategy, seed, work, single=True)
            lid = f"learner-{tag}-s{seed}"
            _, lwall = finpod(
                ["train", "-s", str(single), "--data", str(data), "--runs", str(runs)]
                + ["--run-id", lid],
                log,
                load,
                stop_after=budget.wall_s,
                threads=1,
            )
            row = {**base, "system": system, "cpus": 1, "threads": 1, "wall_s": round(lwall, 1)}
            row.update(run_summary(runs / lid))
            row["env_steps"] = learner_steps_of(runs / lid)
            row["backtest"] = backtest_line(runs / lid, reports, log)
            record({**row, **load.row()})
            if args.same_steps and t_row.get("env_steps"):
                load = Load()
                target = int(t_row["env_steps"])
                _, swall = finpod(
                    ["train", "--resume", str(runs / lid), "--steps", str(target)],
                    log,
                    load,
                    threads=1,
                )
                row = {**base, "system": "learner_steps", "cpus": 1, "threads": 1}
                row.update(run_summary(runs / lid))
                row["env_steps"] = learner_steps_of(runs / lid)
                row["wall_s"] = round(lwall + swall, 1)
                row["backtest"] = backtest_line(runs / lid, reports / "same-steps", log)
                record({**row, **load.row()})
            continue
        if name == "random":
            res = random_search(data, strategy, seed, budget, args.random_pods)
        elif name == "selection":
            res = selection_only(data, strategy, seed, budget, args.selection_seeds)
        elif name in ("tune-pbt", "tune-asha"):
            kind = name.split("-")[1]
            res = tune_search(data, strategy, seed, budget, kind, work, args.tune_samples)
        elif name == "sb3":
            target = t_row.get("validation_ir") or math.inf
            res = sb3_row(data, strategy, seed, budget.wall_s, target)
            res.update({"cpus": 1, "unmatched": True})
        else:
            raise SystemExit(f"unknown system {name!r}: {', '.join(SYSTEMS)}")
        record({**base, "system": system, **same, **res, **load.row()})
    return rows


def _agent_line(row: dict[str, Any]) -> dict[str, Any]:
    """The agent's backtest line of a row (SB3 rows carry it directly)."""
    line = row.get("backtest") or {}
    return line.get("agent", line)


def _median(rows: list[dict[str, Any]], get) -> float | None:
    import statistics

    vals = [v for r in rows if (v := get(r)) is not None]
    return round(statistics.median(vals), 4) if vals else None


def summary(market: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over seeds of each system's row on ``market``."""
    out: dict[str, Any] = {"summary": market, "seeds": sorted({r["seed"] for r in rows})}
    for system in sorted({r["system"] for r in rows}):
        mine = [r for r in rows if r["system"] == system]
        line = {
            "validation_ir": _median(mine, lambda r: r.get("validation_ir")),
            "env_steps": _median(mine, lambda r: r.get("env_steps")),
            "wall_s": _median(mine, lambda r: r.get("wall_s")),
            "grad_updates_per_env_step": _median(
                mine, lambda r: r.get("grad_updates_per_env_step")
            ),
        }
        for key, name in (
            ("backtest_ir", "information_ratio"),
            ("backtest_ir_t", "ir_t_stat"),
            ("active_return", "active_return"),
            ("tracking_error", "tracking_error"),
        ):
            line[key] = _median(mine, lambda r, name=name: _agent_line(r).get(name))
        rule = _median(
            mine,
            lambda r: ((r.get("backtest") or {}).get("signal_rule") or {}).get("active_return"),
        )
        if rule is not None:
            line["rule_active_return"] = rule
        out[system] = line
    paired = _paired(rows)
    if paired:
        out["tournament_against"] = paired
    return out


def _paired(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The tournament against each other system, seed by seed (both on the same market and
    seed, at the same wall time): backtest IR ratios, how many seeds it is higher on, a
    one-sided sign test of "higher on more seeds than chance" (ties left out) and the
    seeds below 0.9× the other system. Five seeds give p = 0.031 at best: a sign test
    names how far the seeds go, not a small difference."""
    from math import comb

    def ir(r: dict[str, Any]) -> float | None:
        v = _agent_line(r).get("information_ratio")
        return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None

    tour = {r["seed"]: ir(r) for r in rows if r["system"] == "tournament"}
    out: dict[str, Any] = {}
    for system in sorted({r["system"] for r in rows} - {"tournament"}):
        pairs = [
            (r["seed"], tour[r["seed"]], ir(r))
            for r in rows
            if r["system"] == system and tour.get(r["seed"]) is not None and ir(r) is not None
        ]
        if not pairs:
            continue
        higher = sum(t > o for _, t, o in pairs)
        lower = sum(t < o for _, t, o in pairs)
        n = higher + lower
        p = sum(comb(n, k) for k in range(higher, n + 1)) / 2**n if n else None
        out[system] = {
            "seeds": [s for s, _, _ in pairs],
            "ratio": [round(t / o, 3) if o > 0 else None for _, t, o in pairs],
            "difference": [round(t - o, 3) for _, t, o in pairs],
            "tournament_higher": higher,
            "tournament_lower": lower,
            "sign_test_p": None if p is None else round(p, 4),
            "below_0.9x": [s for s, t, o in pairs if o > 0 and t < 0.9 * o],
        }
    return out


def plot(rows: list[dict[str, Any]], work: Path, path: Path) -> None:
    """Validation IR (best so far) against wall seconds and env steps, per market."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from finpod.runs import RunDir

    markets = sorted({r["market"] for r in rows})
    fig, axes = plt.subplots(len(markets), 2, figsize=(11, 3.2 * len(markets)), squeeze=False)
    for i, market in enumerate(markets):
        for r in (r for r in rows if r["market"] == market):
            label = f"{r['system']} s{r['seed']}"
            if r["system"] == "sb3_ppo_defaults":
                pts = [(t, s, v) for t, s, v in r.get("curve", [])]
            elif r["system"] in ("tournament", "learner_wall", "learner_steps"):
                kind = "tour" if r["system"] == "tournament" else "learner"
                run = RunDir.open(work / "runs" / f"{kind}-{market_tag(market)}-s{r['seed']}")
                vals = sorted(
                    (w, s, v)
                    for _, s, w, split, metric, v in run.metrics
                    if split == "validation" and metric == "information_ratio"
                )
                if r["system"] == "tournament":
                    rate = (r.get("env_steps") or 0) / max(1e-9, r.get("wall_s") or 1)
                    vals = [(w, w * rate, v) for w, _, v in vals]
                pts = vals
            else:
                continue  # the peers of tts_peers keep no run directory
            if not pts:
                continue
            best, xs_t, xs_s, ys = -math.inf, [], [], []
            for t, s, v in pts:
                best = max(best, v)
                xs_t.append(t)
                xs_s.append(s)
                ys.append(best)
            axes[i][0].step(xs_t, ys, where="post", label=label)
            axes[i][1].step(xs_s, ys, where="post", label=label)
        axes[i][0].set_title(f"{market}: best validation IR vs wall seconds")
        axes[i][1].set_title(f"{market}: vs env steps (tournament: all pods)")
        axes[i][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--markets",
        default="alpha,momentum,null",
        help="comma list of alpha, momentum, null, each optionally :timid or :misfit",
    )
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--strategy", default=str(REPO / "strategies" / "quickstart.toml"))
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "finpod-tts"))
    ap.add_argument(
        "--systems",
        default="tournament,learner,sb3",
        help=f"comma list of: {', '.join(SYSTEMS)} (default: %(default)s)",
    )
    ap.add_argument("--skip", default="", help="comma list of systems to leave out")
    ap.add_argument(
        "--wall",
        type=float,
        default=None,
        help="wall seconds of every system (default: the tournament's measured wall time; "
        "a tournament run by this invocation gets it as its time budget)",
    )
    ap.add_argument(
        "--cpus",
        type=int,
        default=os.cpu_count() or 1,
        help="CPUs of the tournament (--pods), of random, selection and Tune (default: all)",
    )
    ap.add_argument("--random-pods", type=int, default=None, help="default: 2 per CPU")
    ap.add_argument("--selection-seeds", type=int, default=None, help="default: 1 per CPU")
    ap.add_argument(
        "--tune-samples",
        type=int,
        default=None,
        help="PBT population (default 2 per CPU); ASHA trials (default: until the time ends)",
    )
    ap.add_argument("--rerun", action="store_true", help="run systems whose row is in WORK/rows")
    ap.add_argument(
        "--same-steps", action="store_true", help="also the learner at the tournament's env steps"
    )
    ap.add_argument("--plot", default=None, help="PNG path of the curves")
    args = ap.parse_args(argv)
    skip = {s for s in args.skip.split(",") if s}
    args.systems = [s for s in args.systems.split(",") if s and s not in skip]
    unknown = [s for s in args.systems if s not in SYSTEMS]
    if unknown:
        raise SystemExit(f"unknown system {unknown[0]!r}: {', '.join(SYSTEMS)}")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    work = Path(args.work)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    all_rows = []
    for market in args.markets.split(","):
        planted, _ = split_market(market)
        data = build_market(planted, work, work / "logs" / "build.log")
        if planted == "momentum":
            rules = momentum_rules(
                data, variant_strategy(Path(args.strategy), split_market(market)[1], work)
            )
            print(json.dumps({"market": market, "system": "rules_estimate", **rules}), flush=True)
        rows = []
        for seed in (int(s) for s in args.seeds.split(",")):
            rows += run_seed(args, market, data, seed)
        print(json.dumps(summary(market, rows)), flush=True)
        all_rows += rows
    (work / "rows.json").write_text(json.dumps(all_rows, default=str))
    if args.plot:
        plot(all_rows, work, Path(args.plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
