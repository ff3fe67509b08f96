"""The research notebooks: committed without outputs, and run in order on a tiny budget.

``01_data`` builds the sample dataset, ``02_train`` runs a two-pod tournament on it and
``03_backtest`` backtests the winner; each is executed with nbclient in a kernel of this
Python, with data, runs and reports in a temporary directory. The checks read the files the
notebooks wrote and their cell outputs.
"""

from __future__ import annotations

import json
import math
import secrets
import shutil
import sys
import time
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from finpod.data import load_manifest
from tests.tournament.conftest import kill_processes_under

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ("01_data.ipynb", "02_train.ipynb", "03_backtest.ipynb")
RUN_ID = "nbtest"
#: Tournament small enough for a 2-core machine: two pods of 2048 env steps each.
TINY = {
    "FINPOD_NB_BUDGET": "2 pods",
    "FINPOD_NB_PODS": "1",
    "FINPOD_NB_POD_STEPS": "2048",
    "FINPOD_NB_EPOCHS": "2",
    "FINPOD_NB_NUM_ENVS": "16",
    "FINPOD_NB_NUM_CPUS": "2",
    "FINPOD_NB_DEVICE": "cpu",
}


def _outputs(nb: nbformat.NotebookNode, mime: str) -> list[str]:
    """Every ``mime`` payload among the notebook's cell outputs, in order."""
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if mime in data:
                found.append(data[mime])
    return found


def _errors(nb: nbformat.NotebookNode) -> list[str]:
    return [
        f"{out.get('ename')}: {out.get('evalue')}"
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]


# --------------------------------------------------------------------- committed files
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_committed_notebook_is_valid_and_has_no_outputs(name):
    path = ROOT / "notebooks" / name
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.nbformat == 4
    assert nb.metadata["kernelspec"]["name"] == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    for cell in code:
        assert cell.outputs == [], f"{name}: a cell was committed with outputs"
        assert cell.execution_count is None, f"{name}: a cell was committed with a count"
    assert "FINPOD_NB_" in code[0].source, f"{name}: the first code cell must hold the parameters"
    assert str(ROOT) not in path.read_text(encoding="utf-8"), f"{name}: absolute path"


# --------------------------------------------------------------------- execution
@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """Environment of the notebook kernels: tiny budget, private paths, private Ray."""
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    tmp = tmp_path_factory.mktemp("nb")
    # A kernelspec of this interpreter, found first through JUPYTER_PATH, so the kernel
    # runs the project's Python whatever kernels the machine has installed.
    spec = tmp / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (finpod tests)",
                "language": "python",
            }
        ),
        encoding="utf-8",
    )
    # Short: Ray's unix socket paths must stay under ~100 characters.
    ray_tmp = Path(f"/tmp/rfpnb_{secrets.token_hex(3)}")
    ray_tmp.mkdir()
    env = {
        "FINPOD_NB_DATA": str(tmp / "data" / "sample"),
        "FINPOD_NB_RUNS": str(tmp / "runs"),
        "FINPOD_NB_REPORTS": str(tmp / "reports"),
        "FINPOD_NB_RUN_ID": RUN_ID,
        **TINY,
        "JUPYTER_PATH": str(tmp / "jupyter"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "IPYTHONDIR": str(tmp / "ipython"),
        "RAY_TMPDIR": str(ray_tmp),
        "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    patch = pytest.MonkeyPatch()
    for key, value in env.items():
        patch.setenv(key, value)
    timings: dict[str, float] = {}

    def execute(name: str) -> nbformat.NotebookNode:
        nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
        client = nbclient.NotebookClient(
            nb,
            kernel_name="python3",
            timeout=300,
            resources={"metadata": {"path": str(ROOT)}},
        )
        start = time.perf_counter()
        try:
            client.execute()
        finally:
            timings[name] = time.perf_counter() - start
            nbformat.write(nb, tmp / name)  # kept for inspection when a check fails
        return nb

    yield {"tmp": tmp, "execute": execute, "timings": timings}
    patch.undo()
    print("notebook seconds:", {k: round(v, 1) for k, v in timings.items()})
    kill_processes_under(ray_tmp)
    shutil.rmtree(ray_tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def data_nb(workspace):
    return workspace["execute"]("01_data.ipynb")


@pytest.fixture(scope="module")
def train_nb(workspace, data_nb):
    return workspace["execute"]("02_train.ipynb")


@pytest.fixture(scope="module")
def backtest_nb(workspace, train_nb):
    return workspace["execute"]("03_backtest.ipynb")


def test_data_notebook_builds_a_dataset_with_ordered_disjoint_splits(workspace, data_nb):
    assert not _errors(data_nb)
    dataset = workspace["tmp"] / "data" / "sample"
    manifest = load_manifest(dataset)
    splits = [manifest["splits"][s] for s in ("train", "validation", "backtest")]
    for earlier, later in zip(splits, splits[1:], strict=False):
        assert earlier["stop_index"] <= later["start_index"]
        assert later["start_index"] - earlier["stop_index"] >= manifest["embargo_sessions"]
        assert pd.Timestamp(earlier["end"]) < pd.Timestamp(later["start"])
    assert all(s["bars"] > 0 for s in splits)

    # Late listings are masked on disk (no price, not tradable), never back-filled.
    report = json.loads((dataset / "cleaning_report.json").read_text(encoding="utf-8"))
    assert report["listed_late"], "the sample has late listings"
    bars = pd.read_parquet(
        dataset / "bars.parquet", columns=["timestamp", "tic", "close", "tradable"]
    )
    bars["tic"] = bars["tic"].astype(str)
    for tic, first in report["listed_late"].items():
        before = bars[(bars["tic"] == tic) & (bars["timestamp"] < pd.Timestamp(first))]
        assert len(before) > 0 and before["close"].isna().all() and not before["tradable"].any()

    tables = _outputs(data_nb, "text/html")
    assert any("gap_bars_before" in t and "backtest" in t for t in tables)  # the splits table
    assert any("max |difference|" in t for t in tables)  # the causality check ran and showed
    assert any("survivorship" in t and "^NDX" in t for t in tables)  # universe and benchmark
    # each observation slice, per split (the price slice is a stationary z-score)
    assert any("observation slice" in t and "feature:log_return" in t for t in tables)
    assert len(_outputs(data_nb, "image/png")) >= 3  # features, tradable mask, closes vs index


def test_train_notebook_runs_a_tournament_and_shows_its_leaderboard(workspace, train_nb):
    assert not _errors(train_nb)
    run_dir = workspace["tmp"] / "runs" / RUN_ID
    board = json.loads((run_dir / "leaderboard.json").read_text(encoding="utf-8"))
    scored = [e for e in board["entries"] if e["score"] is not None and math.isfinite(e["score"])]
    assert len(scored) >= 1
    assert board["candidates_evaluated"] >= len(board["entries"])
    info = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    manifest = load_manifest(workspace["tmp"] / "data" / "sample")
    assert info["dataset"]["hash"] == manifest["hash"]
    # the parameters cell took the overrides from the environment
    assert info["strategy"]["tournament"]["pod_steps"] == int(TINY["FINPOD_NB_POD_STEPS"])
    assert info["strategy"]["tournament"]["budget"] == "2 pods"

    curves = pd.read_csv(run_dir / "metrics.csv")
    validated = set(curves.loc[curves["split"] == "validation", "pod_id"])
    assert {e["pod_id"] for e in board["entries"]} <= validated

    tables = _outputs(train_nb, "text/html")
    best = board["entries"][0]["pod_id"]
    label = f"validation {board['score_name']}"
    assert any(label in t and best in t for t in tables)  # the leaderboard frame
    assert any("no_trade_band" in t and "decision_interval" in t for t in tables)  # controls
    assert len(_outputs(train_nb, "image/png")) >= 1  # learning curves


def test_backtest_notebook_writes_a_self_contained_tearsheet(workspace, backtest_nb):
    assert not _errors(backtest_nb)
    report = workspace["tmp"] / "reports" / RUN_ID
    page = (report / "tearsheet.html").read_text(encoding="utf-8")
    assert page.count("data:image/png;base64,") >= 5
    assert 'src="http' not in page and "src='http" not in page

    metrics = pd.read_csv(report / "metrics.csv", index_col=0)
    assert {"agent", "index", "momentum"} <= set(metrics.columns)
    assert any(c.startswith("equal_weight") for c in metrics.columns)
    assert 0.0 <= metrics.loc["psr", "agent"] <= 1.0

    meta = json.loads((report / "backtest.json").read_text(encoding="utf-8"))
    board = json.loads(
        (workspace["tmp"] / "runs" / RUN_ID / "leaderboard.json").read_text(encoding="utf-8")
    )
    assert meta["num_trials"] == board["candidates_evaluated"]
    # DSR and PBO are measured where selection happened; the notebook shows all three
    stats = meta["statistics"]
    assert stats["selection_split"] == "validation"
    assert stats["num_trials"] >= board["candidates_evaluated"]
    assert stats["selected_candidate"] == board["entries"][0]["pod_id"]
    manifest = load_manifest(workspace["tmp"] / "data" / "sample")
    returns = pd.read_parquet(report / "returns.parquet")
    assert returns.index.min() > pd.Timestamp(manifest["splits"]["backtest"]["start"])
    assert returns.index.max() == pd.Timestamp(manifest["splits"]["backtest"]["end"])

    html = _outputs(backtest_nb, "text/html")
    assert any("<iframe srcdoc=" in t for t in html)  # the tearsheet, inline
    assert any("psr" in t and "momentum" in t for t in html)  # the metrics table
    assert any("num_trials" in t and "pbo" in t for t in html)  # the selection statistics
    assert any("DSR of " in t and stats["selected_candidate"] in t for t in html)  # deflation
    assert len(_outputs(backtest_nb, "image/png")) >= 1  # equity and drawdown
