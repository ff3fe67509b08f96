"""What the file's settings lost to, and the winner's settings as a strategy
(finpod.tournament.winner)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np

from finpod.runs import RunDir
from finpod.runs.candidates import candidate_set
from finpod.runs.leaderboard import Entry, Leaderboard
from finpod.strategy import load_strategy, strategy_from_dict
from finpod.tournament.champion import select
from finpod.tournament.winner import WINNER_FILE, record_winner, settings_changes

QUICKSTART = Path(__file__).resolve().parents[2] / "strategies" / "quickstart.toml"
CONTROLS = ("decision_interval", "no_trade_band", "partial_adjustment", "turnover_penalty")


def _run(tmp_path, reference: str | None = None) -> tuple[RunDir, dict]:
    """A run of the quick start whose base decides every 63 sessions (mis-set controls)."""
    raw = tomllib.loads(Path(QUICKSTART).read_text(encoding="utf-8"))
    raw["env"]["decision_interval"] = 63
    if reference is not None:
        raw["env"]["reference"] = reference
    strategy = strategy_from_dict(raw)
    run = RunDir.create(
        tmp_path / "run",
        strategy=strategy.to_dict(),
        strategy_toml=strategy.to_toml(),
        dataset_path=tmp_path,
        dataset_hash="0" * 12,
        seed=0,
        inputs={"reference": reference},
    )
    return run, strategy.to_dict()


def _champion(resolved: dict) -> Entry:
    env = {k: resolved["env"][k] for k in CONTROLS}
    hparams = {**resolved["agent"]["hparams"], "ticker_features": 11}
    return Entry(
        pod_id="p00000",
        algorithm="ppo",
        hparams=hparams,
        score=0.5,
        checkpoint="checkpoints/p00000.safetensors",
        champion=True,
        env=env,
    )


def _a2c() -> Entry:
    return Entry(
        pod_id="p00007",
        algorithm="a2c",
        hparams={
            "net": "cross_sectional",
            "ticker_features": 11,
            "learning_rate": 0.0016,
            "gamma": 0.98,
            "horizon": 16,
            "actor_hidden": [16, 16],
            "critic_hidden": [16, 16],
            "log_std_init": -0.5,
            "norm_adv": True,
        },
        score=4.0,
        checkpoint="checkpoints/p00007.safetensors",
        env={
            "decision_interval": 10,
            "no_trade_band": 0.004,
            "partial_adjustment": 0.5,
            "turnover_penalty": 0.002,
        },
    )


def _select(run, champion, challenger, ahead: bool, ensemble: bool = False):
    board = Leaderboard(run.path, 10, "information_ratio")
    board.entries = sorted([champion, challenger], key=lambda e: -e.score)
    rng = np.random.default_rng(4)
    market = rng.normal(0.0, 0.003, 252)
    series = {
        champion.pod_id: market + rng.normal(0.0, 0.001, 252),
        challenger.pod_id: market + rng.normal(0.0006 if ahead else 0.0, 0.001, 252),
    }
    if ensemble:
        series["ensemble[x]"] = market + rng.normal(0.0018, 0.001, 252)
    record = select(
        board,
        candidate_set((cid, 0.0, "pod", r) for cid, r in series.items()),
        alpha=0.05,
        bars_per_year=252,
        ensemble_id="ensemble[x]" if ensemble else None,
        ensemble_name="ensemble-2" if ensemble else None,
    )
    assert record is not None
    return board, record


def test_a_challenger_that_replaced_the_champion_is_written_as_the_next_base(tmp_path):
    run, resolved = _run(tmp_path)
    champion, winner = _champion(resolved), _a2c()
    board, record = _select(run, champion, winner, ahead=True)
    assert record["selected"] == "p00007"
    note = record_winner(run, board, record)
    assert note is not None and "p00007" in note and "decision_interval 63 → 10" in note
    written = load_strategy(run.path / WINNER_FILE)
    assert written.algorithm == "a2c"
    assert written.hparams["learning_rate"] == 0.0016 and written.hparams["horizon"] == 16
    assert written.hparams["ticker_features"] is None  # filled in from the data, not chosen
    assert written.config.decision_interval == 10 and written.config.no_trade_band == 0.004
    # Everything else is the run's: costs, bounds, the tournament and its search space.
    assert written.config.cost_rate == resolved["env"]["cost_rate"]
    assert written.tournament == resolved["tournament"] and written.search == resolved["search"]
    text = (run.path / WINNER_FILE).read_text(encoding="utf-8")
    assert text.startswith("# The settings of p00007 (a2c), which replaced the champion")
    assert "not fresh evidence" in text
    changed = record["settings_changed"]
    assert changed["agent.algorithm"] == ["ppo", "a2c"]
    assert changed["env.decision_interval"] == [63, 10]
    assert "env.partial_adjustment" not in changed  # the same as the champion's
    assert not any(k.endswith("update_epochs") for k in changed)  # PPO only: not compared
    assert record["winner_strategy"] == WINNER_FILE


def test_a_kept_champion_writes_no_winner(tmp_path):
    run, resolved = _run(tmp_path)
    board, record = _select(run, _champion(resolved), _a2c(), ahead=False)
    assert record["selected"] == "p00000"
    assert record_winner(run, board, record) is None
    assert not (run.path / WINNER_FILE).exists() and "settings_changed" not in record


def test_the_winner_behind_a_selected_ensemble_is_the_single_challenger(tmp_path):
    run, resolved = _run(tmp_path)
    board, record = _select(run, _champion(resolved), _a2c(), ahead=True, ensemble=True)
    assert record["selected"] == "ensemble-2" and record["selected_single"] == "p00007"
    assert record_winner(run, board, record) is not None
    assert load_strategy(run.path / WINNER_FILE).algorithm == "a2c"


def test_settings_changes_of_the_same_algorithm_name_every_hparam_that_differs():
    a = Entry(
        "p1", "ppo", {"learning_rate": 5e-5, "update_epochs": 1, "ticker_features": 11}, 1.0, "c"
    )
    b = Entry(
        "p2", "ppo", {"learning_rate": 1e-3, "update_epochs": 4, "ticker_features": 12}, 2.0, "c"
    )
    changes = settings_changes(a, b)
    assert changes == {
        "agent.hparams.learning_rate": [5e-5, 1e-3],
        "agent.hparams.update_epochs": [1, 4],
    }
    # The largest change first: the learning rate moved by ×20, the epochs by ×4.
    a.env, b.env = {"decision_interval": 5}, {"decision_interval": 10}
    assert list(settings_changes(a, b)) == [
        "agent.hparams.learning_rate",
        "agent.hparams.update_epochs",
        "env.decision_interval",
    ]


def test_a_reference_file_given_relative_to_the_start_is_written_absolute(tmp_path, monkeypatch):
    """The run read ``weights.csv`` from where it started; ``winner.toml`` lives in the run
    directory and is run from anywhere, so it names the file the run read by its full path."""
    monkeypatch.chdir(tmp_path)
    Path("weights.csv").write_text("date,AAA\n2020-01-02,1.0\n", encoding="utf-8")
    run, resolved = _run(tmp_path, reference="weights.csv")
    board, record = _select(run, _champion(resolved), _a2c(), ahead=True)
    assert record_winner(run, board, record) is not None
    written = load_strategy(run.path / WINNER_FILE)
    assert written.config.reference == str((tmp_path / "weights.csv").resolve())


def test_a_copy_of_the_champion_that_won_is_named_as_one(tmp_path):
    """A perturbed copy of a champion checkpoint won with the champion's weights as well
    as its settings: the line and the file say that a run of ``winner.toml`` trains those
    settings from scratch."""
    run, resolved = _run(tmp_path)
    champion = _champion(resolved)
    fork = _champion(resolved)
    fork.pod_id, fork.champion, fork.score, fork.lineage = "p00009", False, 4.0, ["p00000"]
    fork.hparams = {**fork.hparams, "learning_rate": 0.0011}
    fork.env = {**fork.env, "decision_interval": 10}
    board, record = _select(run, champion, fork, ahead=True)
    note = record_winner(run, board, record)
    assert note is not None and note.startswith("the champion lost to p00009, a copy of its")
    assert record["forked_from"] == "p00000"
    text = (run.path / WINNER_FILE).read_text(encoding="utf-8")
    assert "from the champion's checkpoint p00000" in text and "from scratch" in text
    assert load_strategy(run.path / WINNER_FILE).config.decision_interval == 10
