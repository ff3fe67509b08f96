"""What the ``files`` source reads from a folder, what it skips and what it refuses, and
why a file of bars could not be read as one.

Every entry of the folder is accounted for:

- bar files (``.csv``, ``.csv.gz``, ``.parquet``, ``.pq``, ``.txt``) are read;
- junk that never holds bars is skipped and named in one note of the dataset: hidden
  files and macOS metadata (``.DS_Store``, ``._AAA.csv``), ``Thumbs.db``/``desktop.ini``,
  documents (``README.txt``, ``LICENSE``, ``*.md``, ``*.pdf``, …) and sub-folders (the
  reader does not descend);
- ambiguous entries, which may hold bars finpod cannot read, are refused in one line:
  tables in another format (``CCC.tsv``, ``CCC.xlsx``, ``CCC.json``), archives
  (``CCC.csv.zip``, ``CCC.csv.bz2``), and a bar file name that is no readable file (a
  broken link or a link loop).

A CSV that is no comma-separated table of bars is named for what it is: tab- or
semicolon-separated, or with lines above its header (a spreadsheet's preamble).
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pandas as pd

from finpod.data.bars import normalize_columns
from finpod.data.vendor import TABLE_SUFFIXES
from finpod.errors import FinpodError

#: Names (lower-cased) of operating-system files that never hold bars.
OS_FILES = ("thumbs.db", "desktop.ini", "icon\r")
#: Stems (lower-cased, before the first dot) of documents kept beside data.
DOC_STEMS = ("readme", "license", "licence", "changelog", "notes", "copying", "manifest")
#: Endings of documents and images, never bars.
DOC_SUFFIXES = (".md", ".rst", ".pdf", ".html", ".htm", ".png", ".jpg", ".jpeg", ".doc", ".docx")
#: Endings of files that may hold bars in a form the reader does not take.
AMBIGUOUS_SUFFIXES = (
    ".tsv",
    ".tab",
    ".xlsx",
    ".xls",
    ".ods",
    ".json",
    ".jsonl",
    ".feather",
    ".arrow",
    ".h5",
    ".hdf5",
    ".pkl",
    ".pickle",
    ".zip",
    ".bz2",
    ".xz",
    ".7z",
    ".gz",
    ".tar",
    ".dat",
)
#: Lines read from the top of a CSV to explain why it is no table of bars.
HEAD_LINES = 30


def _junk_reason(entry: Path) -> str | None:
    name = entry.name
    low = name.lower()
    if name.startswith("._"):
        return "macOS metadata"
    if low == ".ds_store":
        return "macOS folder settings"
    if name.startswith("."):
        return "a hidden file"
    if low in OS_FILES:
        return "a Windows folder file"
    if low.split(".")[0] in DOC_STEMS or low.endswith(DOC_SUFFIXES):
        return "a document"
    return None


def list_bar_files(root: Path) -> tuple[list[Path], dict[str, str]]:
    """The bar files of the folder ``root`` (sorted) and ``{name: why}`` of the entries
    skipped as junk. Raises :class:`FinpodError` naming the first ambiguous entry."""
    try:
        entries = sorted(root.iterdir())
    except OSError as err:
        raise FinpodError(
            f"cannot list {root}: {err.strerror or err}", "check the path and its permissions"
        ) from err
    files: list[Path] = []
    skipped: dict[str, str] = {}
    for entry in entries:
        low = entry.name.lower()
        junk = _junk_reason(entry)
        if junk is not None:
            skipped[entry.name] = junk
            continue
        if low.endswith(TABLE_SUFFIXES):
            if not _regular_file(entry):
                raise FinpodError(
                    f"{entry} is named like a bar file but cannot be read as one "
                    f"({_what_it_is(entry)})",
                    "replace it with the file itself, or move it out of the folder",
                )
            files.append(entry)
            continue
        if entry.is_dir() and not entry.is_symlink():
            skipped[entry.name] = "a folder (sub-folders are not read)"
            continue
        if low.endswith(AMBIGUOUS_SUFFIXES) or ".csv." in low or ".parquet." in low:
            raise FinpodError(
                f"{entry} may hold bars, but finpod reads only comma-separated .csv "
                "(optionally .csv.gz) and Parquet files",
                "save it as CSV or Parquet (unpack an archive), or move it out of the folder",
            )
        skipped[entry.name] = "not a bar file (unknown ending)"
    return files, skipped


def _regular_file(entry: Path) -> bool:
    try:
        return entry.is_file() and os.access(entry, os.R_OK)
    except OSError:
        return False


def _what_it_is(entry: Path) -> str:
    if entry.is_symlink():
        try:
            entry.resolve(strict=True)
        except RuntimeError:
            return "a link loop"
        except OSError:
            return "a broken link"
        return "a link to something that is not a file"
    if entry.is_dir():
        return "a folder"
    if entry.exists() and not os.access(entry, os.R_OK):
        return "no permission to read it"
    return "not a regular file"


def skipped_note(skipped: dict[str, str]) -> str | None:
    """One line naming the junk entries a folder read skipped (None when none)."""
    if not skipped:
        return None
    shown = "; ".join(f"{name} ({why})" for name, why in list(skipped.items())[:8])
    more = f"; and {len(skipped) - 8} more" if len(skipped) > 8 else ""
    return f"skipped {len(skipped)} file(s) that hold no bars: {shown}{more}"


def _head(path: Path) -> list[str]:
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as fh:
            return [line.rstrip("\r\n") for _, line in zip(range(HEAD_LINES), fh, strict=False)]
    except (OSError, EOFError):
        return []


def _has_bar_header(fields: list[str], columns: dict[str, str] | None) -> bool:
    names = [f.strip().strip('"') for f in fields]
    if len(names) < 3 or len(set(names)) != len(names) or not all(names):
        return False
    try:
        got = normalize_columns(pd.DataFrame(columns=names), columns).columns
    except FinpodError:
        return False
    return "timestamp" in got and "close" in got


def layout_problem(path: Path, columns: dict[str, str] | None = None) -> str | None:
    """Why the CSV ``path`` is not a comma-separated table with its header on line 1: it is
    tab- or semicolon-separated, or lines stand above its header (a spreadsheet preamble).
    None when neither is found (or the file is Parquet)."""
    if path.name.lower().endswith((".parquet", ".pq")):
        return None
    lines = _head(path)
    if not lines:
        return None
    if _has_bar_header(lines[0].split(","), columns):
        return None
    for sep, what in (("\t", "tab"), (";", "semicolon")):
        if _has_bar_header(lines[0].split(sep), columns):
            return f"{path.name} is {what}-separated, not comma-separated"
    for k, line in enumerate(lines[1:], start=1):
        for sep, what in ((",", ""), ("\t", ", tab-separated"), (";", ", semicolon-separated")):
            if _has_bar_header(line.split(sep), columns):
                return (
                    f"{path.name} has {k} line{'s' if k > 1 else ''} above its header "
                    f"(a spreadsheet preamble; the header is line {k + 1}: "
                    f"{line[:60]!r}{what})"
                )
    return None


#: What to do about each kind of :func:`layout_problem`.
LAYOUT_HINT = (
    "save it as a comma-separated CSV whose first line is the header (delete any lines above it)"
)
