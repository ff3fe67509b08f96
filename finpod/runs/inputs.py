"""The files a run read, kept with it: a copy and a SHA-256 of each.

A run reads files that live outside its directory and can change after it: the strategy
file it was started from, the reference weights file of ``env.reference`` and the
dataset's benchmark levels. ``run.json``'s ``inputs`` records each one::

    "inputs": {
      "reference": {"given": "weights.csv", "path": "/abs/weights.csv",
                    "sha256": "…", "copy": "inputs/reference.csv"},
      ...
    }

and ``inputs/<role><suffix>`` holds the bytes that were read. A backtest compares the file
on disk with the recorded hash (:func:`changed`) and refuses a changed one, or reads the
copy (:func:`copy_of`) when asked to.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from finpod.atomic import atomic_write
from finpod.errors import FinpodError

#: Folder of a run directory holding the copies of the files the run read.
INPUTS_DIR = "inputs"
#: ``run.json``'s key of the record.
INPUTS_KEY = "inputs"
#: Bytes hashed per read.
_CHUNK = 1 << 20


def file_sha256(path: str | Path) -> str:
    """SHA-256 hex digest of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def check_inputs_exist(files: Mapping[str, str | Path | None]) -> None:
    """Raise one :class:`FinpodError` line for the first of ``files`` that is not a file."""
    for role, given in files.items():
        if given is not None and not Path(given).is_file():
            raise FinpodError(f"the run's {role} file {given} is not a file", "check its path")


def record_inputs(
    run_dir: Path, files: Mapping[str, str | Path | None]
) -> dict[str, dict[str, str]]:
    """Copy each of ``files`` (role → path; None: the run reads no such file) into
    ``run_dir/inputs/`` and return the record for ``run.json`` (role → ``given``,
    ``path``, ``sha256``, ``copy``). The copy is hashed, so hash and copy always agree."""
    record: dict[str, dict[str, str]] = {}
    for role, given in files.items():
        if given is None:
            continue
        check_inputs_exist({role: given})
        source = Path(given)
        copy = Path(INPUTS_DIR) / f"{role}{source.suffix}"
        target = run_dir / copy
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, lambda tmp, src=source: shutil.copyfile(src, tmp))
        record[role] = {
            "given": str(given),
            "path": str(source.resolve()),
            "sha256": file_sha256(target),
            "copy": copy.as_posix(),
        }
    return record


def recorded(run_meta: Mapping[str, Any]) -> dict[str, dict[str, str]] | None:
    """``run.json``'s record of the files the run read (None: a run written before runs
    recorded them)."""
    inputs = run_meta.get(INPUTS_KEY)
    return dict(inputs) if isinstance(inputs, Mapping) else None


def changed(entry: Mapping[str, str], path: str | Path | None = None) -> str | None:
    """Why the file at ``path`` (default: where the run read it) is not what the run read:
    ``"is missing"`` or ``"changed since the run (sha256 … ≠ …)"``; None when it is."""
    path = Path(path if path is not None else entry["path"])
    if not path.is_file():
        return "is missing"
    digest = file_sha256(path)
    if digest != entry.get("sha256"):
        return f"changed since the run (sha256 {digest[:12]} ≠ recorded {entry['sha256'][:12]})"
    return None


def copy_of(run_dir: Path, role: str, entry: Mapping[str, str]) -> Path:
    """The run's own copy of its ``role`` file, checked against the recorded hash."""
    path = Path(run_dir) / entry["copy"]
    problem = changed(entry, path)
    if problem:
        raise FinpodError(
            f"the run's copy of its {role} file {path} {problem}",
            "the run directory was modified; restore the copy",
        )
    return path
