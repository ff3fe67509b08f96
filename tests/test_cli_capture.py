"""Each command's product is one path on stdout, so a shell captures it:
``DATA=$(finpod download …)``, ``RUN=$(finpod train …)`` (one agent or a tournament) and
``REPORT=$(finpod backtest "$RUN")``. Progress, the friendly lines and the verdict go to
stderr, and the backtest's console opens with its verdict."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_strategy import tiny_tournament

ROOT = Path(__file__).resolve().parents[1]


def _shell(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """``bash -c script`` where ``finpod`` is this checkout's CLI."""
    prelude = f'finpod() {{ "{sys.executable}" -m finpod "$@"; }}\nset -e\n'
    return subprocess.run(
        ["bash", "-c", prelude + script],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **env},
    )


def _first_lines(stderr: str, after: str) -> list[str]:
    """The non-empty stderr lines after the line that starts with ``after``."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    start = max(i for i, line in enumerate(lines) if line.startswith(after))
    return lines[start + 1 :]


def test_download_train_backtest_each_print_one_path_a_shell_captures(tmp_path):
    done = _shell(
        f"""
        DATA=$(finpod download --source synthetic --n-tickers 3 --years 2 --out ds)
        RUN=$(finpod train -s {ROOT}/strategies/ppo.toml -d "$DATA" --steps 4096 --runs runs)
        echo "== backtest" >&2
        REPORT=$(finpod backtest "$RUN" --reports reports)
        printf '%s\\n' "$DATA" "$RUN" "$REPORT"
        """,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    data, run, report = done.stdout.splitlines()
    assert data == "ds" and (tmp_path / data / "manifest.json").is_file()
    assert Path(run).parent == Path("runs") and (tmp_path / run / "run.json").is_file()
    assert (tmp_path / report / "tearsheet.html").is_file()
    assert Path(report) == Path("reports") / Path(run).name
    # The friendly lines went to stderr; the backtest's console opens with its verdict.
    assert f"run written to {run}" in done.stderr
    after = _first_lines(done.stderr, "== backtest")
    assert after[0].startswith("verdict: "), after[:3]
    assert "strategy" in " ".join(after) and "tearsheet:" in after[-1]


def test_a_tournament_prints_its_run_directory_alone_and_backtests_from_it(tmp_path):
    from tournament.conftest import kill_processes_under

    from finpod.data import build_dataset

    build_dataset("synthetic", tmp_path / "ds", n_tickers=3, n_bars=300, seed=0)
    (tmp_path / "t.toml").write_text(tiny_tournament(tournament={"pod_steps": 128, "epochs": 1}))
    ray_dir = Path(f"/tmp/rcp_{secrets.token_hex(3)}")
    ray_dir.mkdir()
    try:
        done = _shell(
            """
            RUN=$(finpod train -s t.toml -d ds --runs runs --budget "2 pods" --pods 1)
            echo "== backtest" >&2
            finpod backtest "$RUN" --reports reports
            echo "$RUN"
            """,
            cwd=tmp_path,
            RAY_TMPDIR=str(ray_dir),
            RAY_AUTH_MODE="disabled",
        )
    finally:
        kill_processes_under(ray_dir)
        shutil.rmtree(ray_dir, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    report, run = done.stdout.splitlines()
    assert (tmp_path / run / "leaderboard.json").is_file()
    assert Path(report).parts[:2] == ("reports", Path(run).name)
    assert (tmp_path / report / "tearsheet.html").is_file()
    assert _first_lines(done.stderr, "== backtest")[0].startswith("verdict: ")


@pytest.mark.parametrize("run_id", ["../escaped", "a/b", "..", ".hidden", "-x", "a b", ""])
def test_a_run_id_that_is_not_one_folder_name_is_refused_in_one_line(tmp_path, finpod_cli, run_id):
    from cli_runner import one_error_line

    data = tmp_path / "ds"
    data.mkdir()
    out = finpod_cli(
        "train", "-s", str(ROOT / "strategies" / "ppo.toml"), "-d", str(data),
        "--runs", str(tmp_path / "runs"), "--run-id", run_id,
    )  # fmt: skip
    one_error_line(out, "--run-id", "is not a single folder name")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # nothing written anywhere


def test_the_library_refuses_a_run_id_that_leaves_the_runs_folder(tmp_path):
    from finpod.errors import FinpodError
    from finpod.runs import run_folder

    assert run_folder(tmp_path, "ppo-20260101-000000-s0") == tmp_path / "ppo-20260101-000000-s0"
    with pytest.raises(FinpodError, match="not a single folder name"):
        run_folder(tmp_path / "runs", "../escaped")
