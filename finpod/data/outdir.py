"""The output folder of a dataset build: checked before any work, written through a
temporary folder beside it (``.<out>.<pid>-<random>``, renamed into place at the end), and
the temporary folders of builds that were killed removed by the next build.

finpod deletes only what it made: each temporary folder holds a marker file
(:data:`TEMP_MARKER`) naming that very folder, written when the folder is made and checked
before a later build removes it. A folder beside ``out`` whose name merely looks like a
temporary one (a user's backup ``.ds.20240101``) is never touched. An ``--overwrite``
replaces only what a build wrote (``manifest.json`` and the files it lists): it is
refused while the dataset folder holds anything else (a user's notes, an input of the
build such as ``--path`` or ``--benchmark``), naming it.

An ``out`` that is a symbolic link names the folder it points to: the build is written
beside that folder and replaces it, and the link stays as it was (:func:`dataset_folder`).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from finpod.atomic import replace_dir
from finpod.errors import FinpodError

#: File inside each temporary build folder; its text names the folder (see the module doc).
TEMP_MARKER = ".finpod-temporary"


def _marker_text(folder: Path) -> str:
    return f"finpod temporary build folder {folder.name}\n"


#: The files a build writes when its manifest lists none (``files``): older datasets.
BUILT_FILES = ("bars.parquet", "benchmark.parquet", "cleaning_report.json")


def dataset_folder(out: str | Path) -> Path:
    """The folder a build at ``out`` writes: ``out``, or the folder it links to (a build
    replaces that folder, never the link)."""
    out = Path(out)
    return out.resolve() if out.is_symlink() else out


def built_files(folder: Path) -> set[str]:
    """Names of what a build wrote in dataset ``folder``: ``manifest.json`` and the files
    its manifest lists (:data:`BUILT_FILES` where it lists none)."""
    names = {"manifest.json"}
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if isinstance(files, dict) and files:
        names |= {str(v) for v in files.values() if isinstance(v, str) and v}
    else:
        names |= set(BUILT_FILES)
    return names


def prepare_out(
    out: Path, overwrite: bool, inputs: tuple[str | Path, ...] = ()
) -> tuple[Path, list[Path]]:
    """Check that ``out`` can receive a dataset and make the temporary folder beside it
    (beside the folder it links to, when ``out`` is a link: :func:`dataset_folder`).

    Returns ``(tmp, made)``: the temporary folder (holding its :data:`TEMP_MARKER`) and the
    parent folders created for it (removed again if the build fails). Raises
    :class:`FinpodError` when ``out`` is a file, lies under a file, is a non-dataset folder
    with content, already holds a dataset and ``overwrite`` is False, holds one of the
    build's ``inputs`` (files the build reads) or anything a build did not write, or
    cannot be written.
    """
    out = dataset_folder(out)
    remove_stale_temp_folders(out)  # even when this build is refused below
    hint = "choose another --out"
    if out.exists() and not out.is_dir():
        raise FinpodError(f"--out {out} is a file, not a directory", hint)
    if out.is_dir():
        try:
            content = any(out.iterdir())
        except OSError as err:
            raise FinpodError(f"cannot read --out {out}: {err.strerror or err}", hint) from err
        if content and not (out / "manifest.json").exists():
            raise FinpodError(
                f"{out} exists and is not a finpod dataset",
                "choose an empty or new --out directory",
            )
        if content and not overwrite:
            raise FinpodError(
                f"{out} already holds a dataset",
                "use it as it is, or pass --overwrite to replace it",
            )
        if content:
            _refuse_inputs_inside(out, inputs)
            _refuse_unbuilt_files(out)
    parent = out.absolute().parent
    ancestor = parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise FinpodError(f"--out {out} lies under {ancestor}, which is a file", hint)
    made = [p for p in reversed(parent.parents) if not p.exists()]
    made += [parent] if not parent.exists() else []
    try:
        parent.mkdir(parents=True, exist_ok=True)
        # The pid in the name tells a later build whether this one is still running.
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.{os.getpid()}-", dir=parent))
        (tmp / TEMP_MARKER).write_text(_marker_text(tmp))
    except OSError as err:
        for folder in reversed(made):
            try:
                folder.rmdir()
            except OSError:
                break
        raise FinpodError(
            f"cannot write the dataset to {out}: {err.strerror or err}",
            "choose a writable --out directory",
        ) from err
    # mkdtemp makes a private (0700) folder; the dataset gets the mode mkdir would give.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)
    return tmp, made


def _refuse_inputs_inside(out: Path, inputs: tuple[str | Path, ...]) -> None:
    """Raise when an input path lies inside ``out``: replacing ``out`` would delete it."""
    root = out.resolve()
    for item in inputs:
        if item is None:
            continue
        path = Path(item).resolve()
        if path == root or root in path.parents:
            raise FinpodError(
                f"--overwrite would delete {item}, an input of this build, which lies inside "
                f"the dataset folder {out}",
                "move the input out of the dataset folder first, or choose another --out",
            )


def _refuse_unbuilt_files(out: Path) -> None:
    """Raise when dataset folder ``out`` holds something a build did not write: replacing
    the folder would delete it."""
    ours = built_files(out)
    theirs = sorted(p.name for p in out.iterdir() if p.name not in ours)
    if theirs:
        shown = ", ".join(theirs[:3]) + (f" and {len(theirs) - 3} more" if len(theirs) > 3 else "")
        raise FinpodError(
            f"--overwrite would delete {shown} in the dataset folder {out}, which finpod "
            "did not write",
            "move it out of the folder first, or choose another --out",
        )


def install(tmp: Path, out: str | Path) -> Path:
    """Make the finished build ``tmp`` the dataset at ``out`` in one swap (its marker
    dropped first); a link at ``out`` keeps pointing at the dataset, and nothing is left
    beside it. Returns ``out``."""
    drop_marker(tmp)
    replace_dir(tmp, dataset_folder(out))
    return Path(out)


def drop_marker(tmp: Path) -> None:
    """Remove the marker from a finished temporary folder just before it becomes the
    dataset: a dataset (or a copy of it) never looks like a temporary folder."""
    (tmp / TEMP_MARKER).unlink(missing_ok=True)


def _made_by_finpod(folder: Path) -> bool:
    """True when ``folder`` holds a marker naming it (a temporary folder finpod made)."""
    marker = folder / TEMP_MARKER
    try:
        if marker.is_symlink() or not marker.is_file():
            return False
        return marker.read_text()[:200] == _marker_text(folder)
    except (OSError, UnicodeDecodeError):
        return False


#: Names (after ``.<out>.``) of the temporary folders a build makes beside ``out``: this
#: build's ``<pid>-<random>``, the ``old-<pid>`` of a swap (:func:`finpod.atomic.replace_dir`),
#: and the bare ``<random>`` of builds before the pid was in the name.
_TEMP_NAME = re.compile(r"^(?:(?:old-)?(\d+)(?:-[a-z0-9_]{8})?|[a-z0-9_]{8})$")


def remove_stale_temp_folders(out: str | Path) -> list[Path]:
    """Remove the temporary folders ``.<out>.<…>`` that an interrupted build left beside
    ``out`` (killed, or its machine stopped). Only folders holding finpod's marker for
    that very folder are removed; a folder whose build process is still running on this
    machine is left alone. Returns the folders removed."""
    out = Path(out)
    parent = out.absolute().parent
    removed = []
    try:
        candidates = list(parent.glob(f".{glob.escape(out.name)}.*"))
    except OSError:
        return removed
    for folder in candidates:
        match = _TEMP_NAME.match(folder.name[len(out.name) + 2 :])
        if match is None or folder.is_symlink() or not folder.is_dir():
            continue
        if not _made_by_finpod(folder):
            continue  # a look-alike name (a user's backup): not ours to delete
        if match.group(1) is not None and _process_alive(int(match.group(1))):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's process (or a pid we cannot check): keep its folder
    return True
