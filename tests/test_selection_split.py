"""Selection and scoring read the validation split, and only it.

A spy wraps what the training paths call to get data (``finpod.data.load_split``) and to
score an agent (``finpod.agents.validation.account_rollout``, the one validation rollout
of every learner), recording which split the traded env holds. Single-agent
checkpoint selection and tournament pod scoring must roll out on validation bars only;
the backtest split is never loaded. In the tournament the scoring runs inside Ray worker
processes, so the spy is installed there by Ray's ``worker_process_setup_hook``.

Each spy check also runs once with validation swapped for train in the scoring, and must
fail then: the tests can fail.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from rebinding import patch_everywhere
from tiny_strategy import tiny_agent, tiny_tournament

SINGLE_AGENT = tiny_agent(
    hparams={"actor_hidden": [8], "critic_hidden": [8]},
    train={"num_envs": 4, "total_steps": 96, "eval_every": 32, "seed": 1},
)

TOURNAMENT = tiny_tournament(env={"action_mode": "active"}, tournament={"pod_steps": 128})


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    from finpod.data import build_dataset

    out = tmp_path_factory.mktemp("split-spy") / "ds"
    return build_dataset("synthetic", out, n_tickers=3, n_bars=300, regime="alpha", seed=2)


def _ranges(dataset: Path) -> dict[str, tuple[pd.Timestamp, pd.Timestamp]]:
    from finpod.data import load_manifest

    splits = load_manifest(dataset)["splits"]
    return {s: (pd.Timestamp(v["start"]), pd.Timestamp(v["end"])) for s, v in splits.items()}


def assert_scored_on_validation(calls: list[dict], ranges: dict) -> None:
    """Every scoring rollout saw the validation split's bars, and only those."""
    assert calls, "no scoring rollout was recorded"
    lo, hi = ranges["validation"]
    for call in calls:
        assert call["split"] == "validation", f"scored on the {call['split']} split"
        first, last = pd.Timestamp(call["first"]), pd.Timestamp(call["last"])
        assert lo <= first and last <= hi, f"scored on bars {first} … {last}, not validation"


def _record(market) -> dict:
    ts = market.timestamps
    return {"split": market.split, "first": str(ts[0]), "last": str(ts[-1]), "pid": os.getpid()}


# --------------------------------------------------------------------------- single agent
class Spy:
    """Records split loads and scoring rollouts in this process (``swap``: score on train)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, swap: bool = False) -> None:
        import finpod.agents.validation as validation
        import finpod.data

        self.loaded: list[str] = []
        self.scored: list[dict] = []
        self.swap = swap
        self._markets: dict = {}
        load, roll = finpod.data.load_split, validation.account_rollout
        build = validation.scoring_env

        def load_split(dataset_dir, split, *args, **kwargs):
            self.loaded.append(split)
            market = load(dataset_dir, split, *args, **kwargs)
            self._markets[split] = market
            return market

        def scoring_env(market, *args, **kwargs):
            if self.swap and market.split == "validation":
                # The bug: checkpoints scored on train bars (as many as validation has).
                market = self._markets["train"].slice(0, len(market.timestamps))
            return build(market, *args, **kwargs)

        def account_rollout(act, env):
            self.scored.append(_record(env.market))
            return roll(act, env)

        patch_everywhere(monkeypatch, finpod.data, "load_split", load_split)
        patch_everywhere(monkeypatch, validation, "scoring_env", scoring_env)
        patch_everywhere(monkeypatch, validation, "account_rollout", account_rollout)


def _train_single_agent(dataset: Path, out: Path) -> Path:
    from finpod.pipeline import train_agent as train_run

    strategy = out / "s.toml"
    strategy.parent.mkdir(parents=True, exist_ok=True)
    strategy.write_text(SINGLE_AGENT, encoding="utf-8")
    return train_run(strategy, dataset, out / "runs", run_id="spy", progress=False)


def test_single_agent_selection_scores_checkpoints_on_validation_only(
    dataset, tmp_path, monkeypatch
):
    from finpod.runs.candidates import load_candidates

    spy = Spy(monkeypatch)
    run = _train_single_agent(dataset, tmp_path)
    assert "backtest" not in spy.loaded and set(spy.loaded) == {"train", "validation"}
    ranges = _ranges(dataset)
    assert len(spy.scored) == 3  # one scoring rollout per checkpoint (96 / 32)
    assert_scored_on_validation(spy.scored, ranges)
    # the selection's candidates are those validation rollouts
    candidates = load_candidates(run)
    assert len(candidates) == 3 and candidates.kinds == ["checkpoint"] * 3
    valid_bars = json.loads((Path(dataset) / "manifest.json").read_text())["splits"]["validation"]
    assert candidates.returns.shape[0] == valid_bars["stop_index"] - valid_bars["start_index"] - 1


def test_single_agent_spy_fails_when_checkpoints_are_scored_on_train(
    dataset, tmp_path, monkeypatch
):
    spy = Spy(monkeypatch, swap=True)
    _train_single_agent(dataset, tmp_path)
    with pytest.raises(AssertionError, match="scored on the train split"):
        assert_scored_on_validation(spy.scored, _ranges(dataset))


# ----------------------------------------------------------------------------- tournament
def _worker_spy(log_dir: str):
    """A ``worker_process_setup_hook``: every Ray worker logs its scoring rollouts (and the
    splits it loads) to ``log_dir``; with a ``swap`` file there, pods score on train."""

    def install() -> None:
        import json as _json
        import os as _os

        import finpod.agents.validation as validation
        import finpod.data

        load, roll = finpod.data.load_split, validation.account_rollout

        def log(kind: str, entry: dict) -> None:
            path = _os.path.join(log_dir, f"{kind}-{_os.getpid()}.jsonl")
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(_json.dumps(entry) + "\n")

        def load_split(dataset_dir, split, *args, **kwargs):
            log("load", {"split": split})
            return load(dataset_dir, split, *args, **kwargs)

        def account_rollout(act, env):
            # What the accounts really trade: the market of the env the scorer built.
            ts = env.market.timestamps
            log("score", {"split": env.market.split, "first": str(ts[0]), "last": str(ts[-1])})
            return roll(act, env)

        finpod.data.load_split = load_split
        validation.account_rollout = account_rollout

        from finpod.tournament.pod import Pod

        scorer_for = Pod.scorer_for
        if _os.path.exists(_os.path.join(log_dir, "swap")):
            # The bug: pods and populations scored on train.
            def on_train(self, *args, **kwargs):
                valid, self.valid_market = self.valid_market, self.train_market
                self._scoring_key = None
                try:
                    return scorer_for(self, *args, **kwargs)
                finally:
                    self.valid_market = valid

            Pod.scorer_for = on_train
        if _os.path.exists(_os.path.join(log_dir, "swap-env")):
            # A subtler bug: the scorer keeps the validation split, but its env is built on
            # train bars, as many as the validation split has.
            def env_on_train(self, spec, members=1):
                scorer = scorer_for(self, spec, members)
                train = self.train_market.slice(0, len(self.valid_market.timestamps))
                scorer.env = validation.scoring_env(
                    train, self.env_config_for(spec), members, self.device
                )
                return scorer

            Pod.scorer_for = env_on_train

    return install


def _read_log(log_dir: Path, kind: str) -> list[dict]:
    rows = []
    for path in sorted(log_dir.glob(f"{kind}-*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line]
    return rows


def _tournament(
    dataset: Path, tmp: Path, swap: bool | str, monkeypatch, population: int = 1
) -> tuple[Path, list, list]:
    """A real tiny local Ray tournament with the spy in the driver and every worker
    (``swap``: score on train; ``"env"``: build the populations' scoring env on train)."""
    import ray

    import finpod.data
    from finpod.tournament import run_tournament

    log_dir = tmp / "spy"
    log_dir.mkdir(parents=True)
    if swap:
        (log_dir / ("swap-env" if swap == "env" else "swap")).touch()
    driver_loads: list[str] = []
    load = finpod.data.load_split

    def load_split(dataset_dir, split, *args, **kwargs):
        driver_loads.append(split)
        return load(dataset_dir, split, *args, **kwargs)

    patch_everywhere(monkeypatch, finpod.data, "load_split", load_split)
    root = Path(f"/tmp/rsp_{secrets.token_hex(3)}")
    (root / "ray").mkdir(parents=True)
    for key, value in (
        ("RAY_TMPDIR", str(root)),
        ("RAY_AUTH_MODE", "disabled"),
        ("RAY_USAGE_STATS_ENABLED", "0"),
    ):
        monkeypatch.setenv(key, value)
    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _temp_dir=str(root / "l"),
        runtime_env={"worker_process_setup_hook": _worker_spy(str(log_dir))},
    )
    strategy = tmp / "t.toml"
    text = textwrap.dedent(TOURNAMENT) + f"population = {population}\n"
    strategy.write_text(text, encoding="utf-8")
    budget = "3 pods" if population == 1 else f"{2 * population} pods"
    try:
        result = run_tournament(strategy, dataset, pods=2, budget=budget, runs=tmp / "runs")
    finally:
        ray.shutdown()
        _kill_under(root)
        shutil.rmtree(root, ignore_errors=True)
    loads = driver_loads + [r["split"] for r in _read_log(log_dir, "load")]
    return Path(result.run_dir), loads, _read_log(log_dir, "score")


def _kill_under(path: Path) -> None:
    """Stop leftover processes of the Ray this test started (their command line names it)."""
    import psutil

    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.pid != os.getpid() and str(path) in " ".join(proc.info["cmdline"] or []):
                os.kill(proc.pid, signal.SIGKILL)
        except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
            continue


def test_tournament_pods_are_scored_on_validation_only(dataset, tmp_path, monkeypatch):
    run, loads, scored = _tournament(dataset, tmp_path, swap=False, monkeypatch=monkeypatch)
    assert "backtest" not in loads and "validation" in loads
    # 3 pods × 2 epochs, each epoch scored once, inside the pods' worker processes
    assert len(scored) >= 6
    assert_scored_on_validation(scored, _ranges(dataset))
    board = json.loads((run / "leaderboard.json").read_text())
    # 3 pods and the leaderboard ensemble, scored in the driver (its loads are in ``loads``)
    assert board["candidates_evaluated"] == 4 and board["ensemble"]
    from finpod.runs.candidates import load_candidates

    candidates = load_candidates(run)
    # every candidate's recorded per-bar returns, the ensemble's too, are validation returns
    valid = json.loads((Path(dataset) / "manifest.json").read_text())["splits"]["validation"]
    assert len(candidates) == 4 and "ensemble" in candidates.kinds
    assert set(candidates.lengths) == {valid["stop_index"] - valid["start_index"] - 1}


@pytest.mark.slow  # a second Ray tournament (~45 s); it shows the check above can fail
def test_tournament_spy_fails_when_pods_are_scored_on_train(dataset, tmp_path, monkeypatch):
    _, _, scored = _tournament(dataset, tmp_path, swap=True, monkeypatch=monkeypatch)
    with pytest.raises(AssertionError, match="scored on the train split"):
        assert_scored_on_validation(scored, _ranges(dataset))


def test_population_members_are_scored_on_validation_only(dataset, tmp_path, monkeypatch):
    """Members of populations are scored together in one env of K accounts: that env is
    built on the validation split, and their recorded returns are validation returns."""
    run, loads, scored = _tournament(
        dataset, tmp_path, swap=False, monkeypatch=monkeypatch, population=3
    )
    assert "backtest" not in loads and "validation" in loads
    assert len(scored) >= 4  # 2 populations × 2 epochs, inside the pods' worker processes
    assert_scored_on_validation(scored, _ranges(dataset))
    from finpod.runs.candidates import load_candidates

    candidates = load_candidates(run)
    valid = json.loads((Path(dataset) / "manifest.json").read_text())["splits"]["validation"]
    assert len(candidates) == 7  # 6 members and the leaderboard ensemble
    assert set(candidates.lengths) == {valid["stop_index"] - valid["start_index"] - 1}


@pytest.mark.slow  # a second Ray tournament; it shows the population check can fail
def test_population_spy_fails_when_members_are_scored_on_train(dataset, tmp_path, monkeypatch):
    _, _, scored = _tournament(dataset, tmp_path, swap=True, monkeypatch=monkeypatch, population=3)
    with pytest.raises(AssertionError, match="scored on the train split"):
        assert_scored_on_validation(scored, _ranges(dataset))


@pytest.mark.slow  # a second Ray tournament; the spy reads the env the scorer really trades
def test_population_spy_fails_when_the_scoring_env_is_built_on_train(
    dataset, tmp_path, monkeypatch
):
    _, _, scored = _tournament(dataset, tmp_path, swap="env", monkeypatch=monkeypatch, population=3)
    with pytest.raises(AssertionError, match="scored on the train split"):
        assert_scored_on_validation(scored, _ranges(dataset))
