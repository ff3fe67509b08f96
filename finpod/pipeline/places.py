"""Where the research loop's files are and go: the shipped sample's and quick start's
places, a strategy path found from any working directory, a report's folder, and the
check that a folder can be written before any work."""

from __future__ import annotations

import tempfile
from pathlib import Path

from finpod.errors import FinpodError

#: Where ``finpod run`` builds the shipped NASDAQ-100 sample dataset.
SAMPLE_DATASET_DIR = Path("data/datasets/sample")
#: The strategy of the end-to-end quick start: a small multi-algorithm tournament.
QUICKSTART_STRATEGY = Path("strategies/quickstart.toml")
#: The checkout finpod was installed from (editable installs): where ``strategies/`` lives.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def resolve_strategy(path: str | Path) -> Path:
    """``path`` as given if it exists, else the same relative path in finpod's checkout.

    So ``finpod run`` finds ``strategies/quickstart.toml`` from any working directory.
    """
    path = Path(path)
    if path.exists() or path.is_absolute():
        return path
    shipped = PROJECT_ROOT / path
    return shipped if shipped.exists() else path


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


def check_writable(folder: Path, what: str = "write to", flag: str = "--out") -> None:
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
            f"cannot {what} {folder}: {err.strerror or err}", f"choose a writable {flag}"
        ) from err
