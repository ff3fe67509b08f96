"""One writer per folder: the lock file a run (or walk-forward) folder holds while written.

A process that writes a run directory (``finpod train``) or a walk-forward folder
(``finpod walkforward --out``) first creates ``<folder>/.finpod.lock`` with ``O_CREAT |
O_EXCL`` (atomic: of two processes, exactly one creates it). The file holds the writer's
pid, host name and start time as JSON::

    {"pid": 4242, "host": "box", "started": "2026-01-02T10:00:00+00:00", "command": "…"}

A second writer is refused in one line naming that process. A lock left by a process that
is gone (killed, power cut) is *stale*: when its host is this host and its pid is no
longer running (or now belongs to a process started after the lock), the next writer takes
it over and says so. A lock from another host cannot be checked from here: the refusal
names the host and the file to delete once that process is known to be gone.

The lock is released (the file removed) when the writer is done, whatever the outcome.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from finpod.errors import FinpodError

#: File name of the lock inside the folder it guards.
LOCK_FILE = ".finpod.lock"
#: Seconds a process may have started after the lock's time and still be its writer
#: (clock resolution and the time between the process's start and its lock).
_START_SLACK_S = 2.0


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def _this_process() -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": _now().isoformat(timespec="seconds"),
        "command": " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[
            :200
        ],
    }


def read_lock(folder: str | Path) -> dict[str, Any] | None:
    """The holder recorded in ``folder``'s lock file (None: no lock; ``{}``: unreadable)."""
    path = Path(folder) / LOCK_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError:
        return {}
    try:
        holder = json.loads(text)
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def _pid_alive(pid: int, since: str | None) -> bool:
    """Whether ``pid`` runs on this host and is the process that took the lock at
    ``since`` (a pid reused by a later process is not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    try:
        import psutil
    except ImportError:
        return True
    try:
        process = psutil.Process(pid)
        created = process.create_time()
        zombie = process.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
    if zombie:
        return False
    try:
        taken = _dt.datetime.fromisoformat(str(since)).timestamp()
    except (TypeError, ValueError):
        return True
    return created <= taken + _START_SLACK_S


def describe(holder: dict[str, Any]) -> str:
    """``process 4242 on box (started 2026-01-02T10:00:00+00:00: finpod train …)``."""
    if not holder:
        return "another process (its lock file is unreadable)"
    what = f"process {holder.get('pid')} on {holder.get('host')}"
    detail = ", ".join(str(holder[k]) for k in ("started", "command") if holder.get(k))
    return f"{what} ({detail})" if detail else what


class FolderLock:
    """The lock of one folder, held by this process (see the module doc).

    Use as a context manager, or :meth:`acquire` and :meth:`release`::

        with FolderLock(run_dir, "run", say=print):
            ...  # write the run
    """

    def __init__(
        self, folder: str | Path, what: str = "run", say: Callable[[str], None] | None = None
    ) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_FILE
        self.what = what
        self.say = say
        self.holder: dict[str, Any] | None = None

    def acquire(self) -> FolderLock:
        """Create the lock file, taking over a stale one; FinpodError when another live
        process holds it. The folder must exist."""
        me = _this_process()
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._take_over_if_stale()
                continue
            try:
                os.write(fd, (json.dumps(me) + "\n").encode("utf-8"))
                os.fsync(fd)
            except OSError:
                os.close(fd)
                self.path.unlink(missing_ok=True)
                raise
            os.close(fd)
            self.holder = me
            return self
        raise FinpodError(
            f"the {self.what} folder {self.folder} is in use ({self.path} keeps reappearing)",
            "wait for the other writer to finish",
        )

    def _take_over_if_stale(self) -> None:
        holder = read_lock(self.folder)
        if holder is None:
            return  # released meanwhile: try again
        _refuse_unless_stale(self.folder, self.path, self.what, holder)
        # Move the stale file aside, then check it is the one read: a live writer that took
        # the lock meanwhile gets its file back.
        aside = self.path.with_name(f"{LOCK_FILE}.stale-{os.getpid()}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        moved = _read_file(aside)
        if moved != holder:
            with contextlib.suppress(FileExistsError):
                os.link(aside, self.path)
            aside.unlink(missing_ok=True)
            return
        aside.unlink(missing_ok=True)
        if self.say is not None:
            self.say(
                f"taking over the lock of {self.folder}: {describe(holder)} is no longer running"
            )

    def release(self) -> None:
        """Remove the lock file if it is still this process's."""
        if self.holder is None:
            return
        if _read_file(self.path) == self.holder:
            self.path.unlink(missing_ok=True)
        self.holder = None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        err: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def check_free(folder: str | Path, what: str = "run") -> None:
    """Refuse now, as :meth:`FolderLock.acquire` would, when a live writer (or one on
    another host) holds ``folder``'s lock; a free folder, or a stale lock, passes (the
    writer takes a stale lock over). A command calls this before its slow start (data,
    torch, Ray), so a second writer is told at once; the writer still takes the lock."""
    folder = Path(folder)
    holder = read_lock(folder)
    if holder is not None:
        _refuse_unless_stale(folder, folder / LOCK_FILE, what, holder)


def _refuse_unless_stale(folder: Path, path: Path, what: str, holder: dict[str, Any]) -> None:
    """The refusal of a lock held by ``holder``, unless its process is gone from this host."""
    here = holder.get("host") == socket.gethostname()
    pid = holder.get("pid")
    if not here or not isinstance(pid, int) or _pid_alive(pid, holder.get("started")):
        if here or not holder:
            hint = f"wait for it to finish, or stop it; its lock is {path}"
        else:
            hint = f"if that process is gone, delete {path}"
        raise FinpodError(f"the {what} folder {folder} is in use by {describe(holder)}", hint)


def _read_file(path: Path) -> dict[str, Any] | None:
    try:
        holder = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None
