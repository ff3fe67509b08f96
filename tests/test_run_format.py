"""Run directories written before ``finpod.runs`` existed are still read by the CLI."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finpod.cli import app

FIXTURE = Path(__file__).parent / "fixtures" / "legacy_run_format"


@pytest.fixture()
def legacy(tmp_path: Path) -> Path:
    """A writable copy of the fixture (runs and dataset)."""
    shutil.copytree(FIXTURE, tmp_path / "legacy")
    return tmp_path / "legacy"


@pytest.mark.parametrize("run", ["agent-legacy", "tournament-legacy"])
def test_backtest_reads_a_run_directory_of_the_old_format(legacy: Path, run: str):
    out = legacy / "reports"
    res = CliRunner().invoke(
        app,
        ["backtest", str(legacy / run), "--data", str(legacy / "dataset"), "--reports", str(out)]
        + ["--details"],
    )
    assert res.exit_code == 0, res.output
    assert (out / run / "tearsheet.html").stat().st_size > 10_000
    assert "DSR (selection among" in res.output


def test_train_resume_continues_a_single_agent_run_of_the_old_format(legacy: Path):
    run = legacy / "agent-legacy"
    before = json.loads((run / "leaderboard.json").read_text())
    old_rows = (run / "metrics.csv").read_text().splitlines()
    res = CliRunner().invoke(
        app,
        ["train", "--resume", str(run), "--data", str(legacy / "dataset"), "--steps", "96"],
    )
    assert res.exit_code == 0, res.output
    after = json.loads((run / "leaderboard.json").read_text())
    assert after["candidates_evaluated"] == before["candidates_evaluated"] + 1
    rows = (run / "metrics.csv").read_text().splitlines()
    assert rows[: len(old_rows)] == old_rows and len(rows) > len(old_rows)


def test_train_resume_continues_a_tournament_run_of_the_old_format(legacy: Path):
    run = legacy / "tournament-legacy"
    before = json.loads((run / "leaderboard.json").read_text())
    ray_dir = Path(f"/tmp/rfl_{secrets.token_hex(3)}")
    ray_dir.mkdir()
    env = {
        **os.environ,
        "RAY_TMPDIR": str(ray_dir),
        "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(Path(__file__).parents[1]),
    }
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "finpod", "train", "--resume", str(run)]
            + ["--data", str(legacy / "dataset"), "--budget", "4 pods"],
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr
    after = json.loads((run / "leaderboard.json").read_text())
    assert after["candidates_evaluated"] == before["candidates_evaluated"] + 1
    kept = {e["pod_id"] for e in before["entries"]} & {e["pod_id"] for e in after["entries"]}
    # top_k = 3: the fourth pod evicts at most one of the three old entries.
    assert len(kept) >= 2


@pytest.mark.parametrize("run", ["agent-legacy", "tournament-legacy"])
def test_the_env_settings_of_the_old_format_are_read_from_the_keys_it_wrote(run: str):
    from finpod.backtest.agents import recorded_env_config
    from finpod.runs import Entry

    run_dir = FIXTURE / run
    run_meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    entries = json.loads((run_dir / "leaderboard.json").read_text(encoding="utf-8"))["entries"]
    assert entries
    for entry in entries:
        config, source = recorded_env_config(run_dir, run_meta, Entry.from_json(entry))
        assert source == ("leaderboard entry" if entry.get("env") else "checkpoint"), source
        # "env_config" is a key no finpod ever wrote in an entry: it is not read.
        stray = {k: v for k, v in entry.items() if k != "env"} | {
            "env_config": {"episode_length": 7}
        }
        other, other_source = recorded_env_config(run_dir, run_meta, Entry.from_json(stray))
        assert other_source != "leaderboard entry" and other.episode_length != 7
