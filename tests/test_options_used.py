"""No option is ignored in silence: an option the chosen path would not use is refused in
one line (before anything is trained or written), and ``finpod run``'s ``--data`` is the
dataset it uses, never replaced by the sample unasked."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import one_error_line
from tiny_strategy import tiny_agent, tiny_tournament


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    from finpod.data import build_dataset

    root = tmp_path_factory.mktemp("options")
    return build_dataset("synthetic", root / "ds", n_tickers=3, n_bars=400, seed=0)


def _strategy(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [
        ("--steps", "4096", ("--steps applies to one agent", "--budget")),
        ("--threads", "2", ("--threads applies to one agent", "cpus_per_pod")),
    ],
)
def test_an_option_a_tournament_does_not_use_is_refused(
    tmp_path, dataset, finpod_cli, flag, value, words
):
    strategy = _strategy(tmp_path, tiny_tournament())
    runs = tmp_path / "runs"
    out = finpod_cli(
        "train", "-s", str(strategy), "-d", str(dataset), "--runs", str(runs), flag, value
    )
    one_error_line(out, *words)
    assert not runs.exists()


@pytest.fixture(scope="module")
def finished(dataset, tmp_path_factory) -> Path:
    from finpod.pipeline import train_agent

    root = tmp_path_factory.mktemp("finished")
    strategy = root / "s.toml"
    strategy.write_text(tiny_agent(), encoding="utf-8")
    return Path(train_agent(strategy, dataset, root / "runs", run_id="done"))


@pytest.mark.parametrize(("flag", "value"), [("--budget", "1e6 steps"), ("--pods", "2")])
def test_a_tournament_option_for_one_agent_s_run_is_refused(finished, finpod_cli, flag, value):
    out = finpod_cli("train", "--resume", str(finished), flag, value)
    one_error_line(out, "run done is one agent's run", f"{flag} applies to a tournament")


def test_run_id_beside_resume_is_refused(finished, finpod_cli):
    out = finpod_cli("train", "--resume", str(finished), "--run-id", "other")
    one_error_line(out, "--run-id names a new run and --resume continues one")


def test_finpod_run_uses_the_dataset_at_data_whatever_its_source(tmp_path, dataset, monkeypatch):
    import finpod.pipeline
    from finpod.data import Manifest

    class Reached(Exception):
        pass

    def stop_at_the_tournament(*args, **kwargs):
        raise Reached(args[1])

    monkeypatch.setattr(finpod.pipeline, "run_tournament", stop_at_the_tournament)
    before = Manifest.load(dataset).hash
    with pytest.raises(Reached) as reached:
        finpod.pipeline.run_all(
            data=dataset, budget="1 pods", runs=tmp_path / "r", reports=tmp_path / "p"
        )
    assert Path(str(reached.value)) == dataset
    assert Manifest.load(dataset).source == "synthetic" and Manifest.load(dataset).hash == before
