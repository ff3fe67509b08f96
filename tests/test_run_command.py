"""``finpod run``: the README's main job, end to end on the shipped sample, tiny budget."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from finpod.data import load_manifest
from finpod.pipeline import QUICKSTART_STRATEGY, ensure_dataset

REPO = Path(__file__).resolve().parents[1]


def _tiny_quickstart(path: Path) -> Path:
    """The quick-start strategy with pods shrunk to seconds (same algorithms and env)."""
    text = (REPO / QUICKSTART_STRATEGY).read_text(encoding="utf-8")
    text = re.sub(r"(?m)^pod_steps = .*$", "pod_steps = 1024", text)
    text = re.sub(r"(?m)^epochs = .*$", "epochs = 1", text)
    text = re.sub(r"(?m)^num_envs = .*$", "num_envs = 8", text)
    text = re.sub(r"(?m)^buffer_size = .*$", "buffer_size = 4096", text)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture()
def ray_env(tmp_path_factory):
    root = Path(f"/tmp/rfr_{secrets.token_hex(3)}")
    root.mkdir()
    env = {
        **os.environ,
        "RAY_TMPDIR": str(root),
        "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0",
        "OMP_NUM_THREADS": "1",
    }
    yield env
    import psutil

    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if str(root) in " ".join(proc.info["cmdline"] or []):
                proc.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    shutil.rmtree(root, ignore_errors=True)


def test_run_builds_trains_on_validation_and_backtests_only_the_backtest_split(tmp_path, ray_env):
    strategy = _tiny_quickstart(tmp_path / "quick.toml")
    data, runs, reports = tmp_path / "sample", tmp_path / "runs", tmp_path / "reports"
    cmd = [sys.executable, "-m", "finpod", "run", "--strategy", str(strategy), "--data", str(data)]
    cmd += ["--budget", "3 pods", "--pods", "2", "--runs", str(runs), "--reports", str(reports)]
    cmd += ["--build-sample"]  # asked for: a missing --data is refused otherwise
    done = subprocess.run(cmd, cwd=REPO, env=ray_env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]

    manifest = load_manifest(data)
    assert manifest["source"] == "sample"
    (run_dir,) = runs.iterdir()
    board = json.loads((run_dir / "leaderboard.json").read_text())
    assert board["candidates_evaluated"] >= 3
    assert board["entries"], "no pod was scored on validation"
    assert json.loads((run_dir / "run.json").read_text())["dataset"]["hash"] == manifest["hash"]

    # The report of what the run selected: its best entry, or the ensemble when it won.
    selected = board.get("selected", "best")
    report = reports / run_dir.name / ("" if selected == "best" else selected)
    html = (report / "tearsheet.html").read_text(encoding="utf-8")
    assert html.count("data:image/png;base64,") >= 5
    returns = pd.read_parquet(report / "returns.parquet")
    first, last = (
        pd.Timestamp(manifest["splits"]["backtest"]["start"]),
        pd.Timestamp(manifest["splits"]["backtest"]["end"]),
    )
    assert returns.index.min() >= first and returns.index.max() <= last
    assert str(report / "tearsheet.html") in done.stdout.replace("\n", "")


def test_ensure_dataset_reuses_a_built_dataset_and_rebuilds_another_source(tmp_path):
    data = ensure_dataset(tmp_path / "ds", source="synthetic", n_tickers=3, n_bars=120, seed=1)
    stamp = (data / "manifest.json").stat().st_mtime_ns
    assert ensure_dataset(data, source="synthetic") == data
    assert (data / "manifest.json").stat().st_mtime_ns == stamp
    rebuilt = ensure_dataset(data, source="sample")
    assert load_manifest(rebuilt)["source"] == "sample"


def test_the_quickstart_strategy_is_found_from_any_working_directory(tmp_path, monkeypatch):
    from finpod.pipeline import resolve_strategy

    monkeypatch.chdir(tmp_path)
    assert not QUICKSTART_STRATEGY.exists()
    found = resolve_strategy(QUICKSTART_STRATEGY)
    assert found.is_file() and found.samefile(REPO / QUICKSTART_STRATEGY)
    # A user's own file in the working directory wins over the shipped one.
    own = tmp_path / QUICKSTART_STRATEGY
    own.parent.mkdir()
    own.write_text("[agent]\n")
    assert resolve_strategy(QUICKSTART_STRATEGY) == QUICKSTART_STRATEGY
