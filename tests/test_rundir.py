"""The run directory: append-only metrics survive a crash mid-append; a run.json that is
not finpod's object is one line."""

from __future__ import annotations

import math

import pytest

from finpod.runs.rundir import METRICS_FILE, RunDir, close_logger, read_metrics


def _run(tmp_path) -> RunDir:
    return RunDir.create(
        tmp_path / "run",
        strategy={},
        strategy_toml="",
        dataset_path=tmp_path,
        dataset_hash="h",
        seed=0,
    )


def test_metrics_are_appended_and_a_torn_last_line_is_dropped_then_cut_off(tmp_path):
    run = _run(tmp_path)
    path = run.path / METRICS_FILE
    run.add_metrics([("p00000", 64, 1.0, "validation", "sharpe", 0.5)])
    size = path.stat().st_size
    run.add_metrics([("p00001", 64, 2.0, "validation", "sharpe", math.nan)])
    assert path.stat().st_size > size  # appended, not rewritten
    close_logger(run)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("p00002,64,3.0,valid")  # a crash in the middle of an append
    rows = read_metrics(path)
    assert [r[0] for r in rows] == ["p00000", "p00001"] and math.isnan(rows[1][5])
    again = RunDir.open(run.path)
    again.add_metrics([("p00003", 128, 4.0, "validation", "sharpe", 1.5)])
    close_logger(again)
    assert [r[0] for r in read_metrics(path)] == ["p00000", "p00001", "p00003"]
    assert path.read_text().endswith("1.5\n")


def test_node_versions_are_recorded_in_run_json(tmp_path):
    run = _run(tmp_path)
    run.record_nodes({"abc": {"ray": "2.60.0", "torch": "2.13.0"}})
    run.record_nodes({"def": {"ray": "2.60.0", "torch": "2.13.0"}})
    close_logger(run)
    assert set(run.info()["nodes"]) == {"abc", "def"}
    assert {"finpod", "ray", "torch"} <= set(run.info()["versions"])


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[1, 2]", "holds a JSON list, not an object"),
        ('"run"', "holds a JSON str, not an object"),
        ("null", "holds a JSON NoneType, not an object"),
        ('{"kind": "pod"}', "kind 'pod' is not one of"),
        ('{"kind": "agent", "dataset": [1]}', "dataset is not an object with a path and a hash"),
    ],
)
def test_a_run_json_that_is_not_finpods_object_is_one_line_in_every_command(
    tmp_path, finpod_cli, text, words
):
    from cli_runner import one_error_line

    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    (run / "run.json").write_text(text)
    (run / "leaderboard.json").write_text('{"entries": [], "score_name": "sharpe"}')
    for args in (("backtest", str(run)), ("train", "--resume", str(run)), ("info", str(run))):
        one_error_line(finpod_cli(*args), "run.json", words)
    assert sorted(p.name for p in run.iterdir()) == ["leaderboard.json", "run.json"]
