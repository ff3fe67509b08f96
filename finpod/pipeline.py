"""The research loop as library calls: dataset → tournament → backtest → tearsheet.

``finpod run`` is :func:`run_all` with the CLI's progress displays; notebooks call the
same functions and get pandas objects back.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from finpod.errors import FinpodError

#: Where ``finpod run`` builds the shipped NASDAQ-100 sample dataset.
SAMPLE_DATASET_DIR = Path("data/datasets/sample")
#: The strategy of the end-to-end quick start: a small multi-algorithm tournament.
QUICKSTART_STRATEGY = Path("strategies/quickstart.toml")
#: The checkout finpod was installed from (editable installs): where ``strategies/`` lives.
PROJECT_ROOT = Path(__file__).resolve().parents[1]


def resolve_strategy(path: str | Path) -> Path:
    """``path`` as given if it exists, else the same relative path in finpod's checkout.

    So ``finpod run`` finds ``strategies/quickstart.toml`` from any working directory.
    """
    path = Path(path)
    if path.exists() or path.is_absolute():
        return path
    shipped = PROJECT_ROOT / path
    return shipped if shipped.exists() else path


@dataclass
class PipelineResult:
    """Everything the end-to-end run produced."""

    dataset_dir: Path
    """Dataset directory (Parquet + manifest.json)."""
    run_dir: Path
    """Tournament run directory (leaderboard, checkpoints, metrics)."""
    report_dir: Path
    """Backtest outputs and the tearsheet."""
    tearsheet: Path
    """The self-contained HTML tearsheet."""
    backtest: Any
    """The :class:`finpod.backtest.BacktestResult`."""
    seconds: dict[str, float]
    """Wall seconds of each stage: dataset, train, backtest, total."""


def ensure_dataset(
    dataset_dir: str | Path = SAMPLE_DATASET_DIR,
    source: str = "sample",
    rebuild: bool = False,
    progress: bool = False,
    **opts: Any,
) -> Path:
    """Return a ready dataset directory, building it from ``source`` if it is missing.

    An existing directory is reused only when its manifest loads and names the same
    source; otherwise (or with ``rebuild``) it is rebuilt.
    """
    from finpod.data import build_dataset, load_manifest

    dataset_dir = Path(dataset_dir)
    if not rebuild and (dataset_dir / "manifest.json").is_file():
        try:
            manifest = load_manifest(dataset_dir)
        except FinpodError:
            manifest = None
        if manifest is not None and manifest.get("source") == source:
            return dataset_dir
    return Path(build_dataset(source, dataset_dir, progress=progress, **opts))


def report_folder(reports: str | Path, run_id: str, agent: str = "best") -> Path:
    """Where a backtest of ``run_id``'s ``agent`` is written: ``reports/<run>/`` for the
    best agent, ``reports/<run>/<agent>/`` for any other (``top-3``, ``ensemble``…), so the
    backtests of one run's agents sit side by side and never overwrite each other."""
    folder = Path(reports) / run_id
    if agent == "best":
        return folder
    if not agent or agent in (".", "..") or "/" in agent or "\\" in agent:
        raise FinpodError(f"--agent {agent!r} cannot name a report folder", "e.g. --agent top-3")
    return folder / agent


def check_writable(folder: Path) -> None:
    """Raise a :class:`FinpodError` now, before any work, when ``folder`` cannot be
    created or written (a path under a file, a read-only or virtual file system).

    Nothing is created: a test file is made and removed in the nearest existing folder.
    """
    existing = Path(folder).absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(20, "Not a directory", str(existing))
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".write-test."):
            pass
    except OSError as err:
        raise FinpodError(
            f"cannot write to {folder}: {err.strerror or err}", "choose a writable --out"
        ) from err


def backtest_and_report(
    run_dir: str | Path,
    agent: str = "best",
    data_dir: str | Path | None = None,
    reports: str | Path = "reports",
    device: str = "auto",
) -> tuple[Any, Path]:
    """Backtest ``run_dir``'s agent, save its outputs and tearsheet in
    :func:`report_folder` (``reports/<run>`` for the best agent, ``reports/<run>/<agent>``
    for another).

    Returns the :class:`finpod.backtest.BacktestResult` and the tearsheet path.
    """
    from finpod.backtest import run_backtest
    from finpod.device import pick_device

    result = run_backtest(run_dir, agent=agent, data_dir=data_dir, device=pick_device(device))
    report_dir = report_folder(reports, result.run_id, agent)
    result.save(report_dir)
    return result, Path(result.to_html(report_dir / "tearsheet.html"))


def run_all(
    strategy: str | Path = QUICKSTART_STRATEGY,
    dataset_dir: str | Path = SAMPLE_DATASET_DIR,
    budget: str | None = None,
    pods: str | None = None,
    runs: str | Path = "runs",
    reports: str | Path = "reports",
    device: str | None = None,
    seed: int | None = None,
    address: str | None = None,
    rebuild: bool = False,
) -> PipelineResult:
    """Build (or reuse) the sample dataset, run a tournament, backtest the winner.

    Without displays: notebooks call this; ``finpod run`` wraps the same stages with live
    progress. Selection uses the validation split only; the backtest split is read only by
    the backtest.
    """
    from finpod.tournament import run_tournament

    t0 = time.perf_counter()
    data = ensure_dataset(dataset_dir, rebuild=rebuild)
    t1 = time.perf_counter()
    run = run_tournament(
        resolve_strategy(strategy),
        data,
        pods=pods,
        budget=budget,
        address=address,
        out=runs,
        device=device,
        seed=seed,
    )
    t2 = time.perf_counter()
    result, html = backtest_and_report(run.run_dir, data_dir=data, reports=reports)
    t3 = time.perf_counter()
    return PipelineResult(
        dataset_dir=data,
        run_dir=Path(run.run_dir),
        report_dir=html.parent,
        tearsheet=html,
        backtest=result,
        seconds={"dataset": t1 - t0, "train": t2 - t1, "backtest": t3 - t2, "total": t3 - t0},
    )
