"""A lock held on another host cannot be probed from here: ``finpod train`` of that run
(``--resume``, or the same ``--run-id`` again) is refused in one line naming the host, the
pid and the file to delete, and the run is left byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import one_error_line
from tiny_strategy import tiny_agent

from finpod.runs import LOCK_FILE


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(a finished one-agent run, its strategy file, its dataset)."""
    from finpod.data import build_dataset
    from finpod.pipeline import train_agent

    root = tmp_path_factory.mktemp("foreign-lock")
    data = build_dataset("synthetic", root / "ds", n_tickers=3, n_bars=300, seed=0)
    strategy = root / "s.toml"
    strategy.write_text(tiny_agent(), encoding="utf-8")
    return Path(train_agent(strategy, data, root / "runs", run_id="done")), strategy, Path(data)


def _files(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def test_a_lock_from_another_host_is_refused_naming_host_pid_and_file(finished, finpod_cli):
    run, strategy, data = finished
    lock = run / LOCK_FILE
    lock.write_text(json.dumps({"pid": 4242, "host": "other-host", "started": "2026-01-01"}))
    before = _files(run)
    resumed = finpod_cli("train", "--resume", str(run), "--steps", "512")  # would train
    retried = finpod_cli(
        "train", "-s", str(strategy), "-d", str(data), "--runs", str(run.parent),
        "--run-id", run.name, "--steps", "512",
    )  # fmt: skip
    for out in (resumed, retried):
        one_error_line(out, "in use by process 4242 on other-host", f"delete {lock}", alone=False)
        assert out.stdout == ""  # no run directory: nothing was written
    assert _files(run) == before  # the board, the checkpoints, run.json: byte for byte
