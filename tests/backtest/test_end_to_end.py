"""download → train → backtest → report through the command line, on the shipped sample."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from finpod.data import load_manifest


def _finpod(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [sys.executable, "-m", "finpod", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out


@pytest.mark.slow
def test_cli_workflow_on_the_sample_dataset(tmp_path):
    strategy = Path(__file__).resolve().parents[2] / "strategies" / "ppo.toml"
    _finpod(tmp_path, "download", "--source", "sample", "--out", "dataset")
    _finpod(
        tmp_path,
        *("train", "-s", str(strategy), "-d", "dataset", "--steps", "2000"),
        *("--run-id", "r1", "--device", "cpu"),
    )
    _finpod(tmp_path, "backtest", "r1", "--device", "cpu")
    report = tmp_path / "reports" / "r1"
    page = (report / "tearsheet.html").read_text()
    assert page.count("<img") >= 6  # with the run's learning curves
    manifest = load_manifest(tmp_path / "dataset")
    returns = pd.read_parquet(report / "returns.parquet")["returns"]
    assert returns.index[0] > pd.Timestamp(manifest["splits"]["backtest"]["start"])
    assert returns.index[-1] == pd.Timestamp(manifest["splits"]["backtest"]["end"])
    meta = json.loads((report / "backtest.json").read_text())
    assert meta["info"]["dataset_hash"] == manifest["hash"]
    (report / "tearsheet.html").unlink()
    _finpod(tmp_path, "report", "r1")
    assert (report / "tearsheet.html").is_file()
