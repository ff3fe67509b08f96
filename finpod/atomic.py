"""Write-then-rename file writes: a reader never sees a half-written file."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp_path)`` then rename ``tmp_path`` onto ``path`` atomically.

    The temporary file lives in the destination directory so the rename never crosses
    file systems; it is removed if ``write`` raises.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        write(tmp_path)
        # mkstemp creates 0600 files; give the result the mode a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Atomically write ``text`` (UTF-8) to ``path``."""
    return atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Atomically write ``obj`` as indented, key-sorted JSON."""
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def _exchange(src: Path, dst: Path) -> bool:
    """Swap ``src`` and ``dst`` in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``);
    False where the system cannot."""

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    rc = renameat2(at_fdcwd, os.fsencode(src), at_fdcwd, os.fsencode(dst), rename_exchange)
    return rc == 0


def replace_dir(src: str | os.PathLike, dst: str | os.PathLike) -> Path:
    """Move the directory ``src`` to ``dst``; an existing ``dst`` is replaced and removed.

    Readers see the old or the new directory, never a mix and never nothing: where the
    system can, the two are swapped in one atomic step; elsewhere ``dst`` is renamed aside
    and ``src`` renamed into place at once (two renames, no copy).
    """
    src, dst = Path(src), Path(dst)
    if not dst.exists():
        os.rename(src, dst)
        return dst
    if _exchange(src, dst):
        shutil.rmtree(src, ignore_errors=True)  # src now holds the old content
        return dst
    old = dst.parent / f".{dst.name}.old-{os.getpid()}"
    os.rename(dst, old)
    os.rename(src, dst)
    shutil.rmtree(old, ignore_errors=True)
    return dst
