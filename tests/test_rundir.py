"""The run directory's append-only metrics survive a crash mid-append."""

from __future__ import annotations

import math

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
