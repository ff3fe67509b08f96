"""The run's record of every candidate selection chose among, with its validation returns.

Selection statistics need more than the winner: the Deflated Sharpe needs the number of
candidates and the spread of their Sharpe ratios, the probability of backtest overfitting
(PBO) needs every candidate's per-bar returns on the split selection read. Each time a
candidate (a tournament pod, or a checkpoint of a single-agent run) is scored on the
validation split, its per-bar validation returns are appended to
``<run_dir>/candidates.bin``; :func:`load_candidates` reads them back as one matrix.

File format (little-endian, append-only, no pickle). Each record is::

    b"FPCR" | u32 body length | u32 CRC-32 of body | body
    body = u16 header length | header (UTF-8 JSON: id, kind, score, n) | n × float64

A record is appended with one ``write`` and ``fsync``ed. A torn or corrupt record at the
end of the file (a crash mid-write) is ignored by the reader and cut off by the next
writer, so the file always reads as the records that were completely written. Recording
is idempotent per ``candidate_id``: a resumed run that records the same id again keeps
the first record and the count does not grow.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from finpod.errors import FinpodError

#: File name of the candidate record inside a run directory.
CANDIDATES_FILE = "candidates.bin"
#: Marks the start of every record.
_MAGIC = b"FPCR"
_PREFIX = struct.Struct("<4sII")  # magic, body length, crc32 of body
_HEADER_LEN = struct.Struct("<H")
#: Kinds of candidate: a tournament pod, one validation checkpoint of a single agent, or
#: the leaderboard ensemble of a tournament (:mod:`finpod.tournament.ensemble_candidate`).
KINDS = ("pod", "checkpoint", "ensemble")


@dataclass
class CandidateSet:
    """Every candidate a run's selection chose among, in the order they were recorded.

    Attributes:
        ids: (n,) candidate ids (pod id, or ``"<pod>@<env_steps>"`` for a checkpoint).
        scores: (n,) float64 validation score each candidate was ranked by.
        returns: (T_val, n) float64 per-bar simple validation returns, one column per
            candidate. Candidates whose records differ in length are aligned on their last
            ``T_val`` bars (the shortest length); see ``lengths``.
        kinds: (n,) ``"pod"`` or ``"checkpoint"``.
        lengths: (n,) number of returns recorded for each candidate.
    """

    ids: list[str] = field(default_factory=list)
    scores: np.ndarray = field(default_factory=lambda: np.zeros(0))
    returns: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    kinds: list[str] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    def sharpes(self) -> np.ndarray:
        """(n,) per-bar (not annualized) Sharpe ratio of each candidate's validation returns.

        mean / std (ddof=1); 0.0 for a constant series (a candidate that never moves).
        """
        if self.returns.size == 0:
            return np.zeros(len(self.ids))
        return per_bar_sharpes(self.returns)


def per_bar_sharpes(returns: np.ndarray) -> np.ndarray:
    """(n,) per-bar Sharpe ratio of each column of ``returns`` (T, n); 0.0 where std is 0."""
    r = np.asarray(returns, dtype=np.float64)
    mean = r.mean(axis=0)
    std = r.std(axis=0, ddof=1) if r.shape[0] > 1 else np.zeros(r.shape[1])
    safe = np.where(std > 0, std, 1.0)
    return np.where(std > 0, mean / safe, 0.0)


def _encode(candidate_id: str, returns: np.ndarray, score: float, kind: str) -> bytes:
    header = json.dumps(
        {"id": candidate_id, "kind": kind, "score": score, "n": int(returns.shape[0])},
        separators=(",", ":"),
    ).encode("utf-8")
    body = _HEADER_LEN.pack(len(header)) + header + returns.astype("<f8").tobytes()
    return _PREFIX.pack(_MAGIC, len(body), zlib.crc32(body)) + body


def _scan(data: bytes) -> tuple[list[tuple[dict, np.ndarray]], int]:
    """Complete records of ``data`` and the byte offset just past the last good one."""
    records: list[tuple[dict, np.ndarray]] = []
    pos = 0
    while pos + _PREFIX.size <= len(data):
        magic, length, crc = _PREFIX.unpack_from(data, pos)
        start, stop = pos + _PREFIX.size, pos + _PREFIX.size + length
        if magic != _MAGIC or stop > len(data):
            break
        body = data[start:stop]
        if zlib.crc32(body) != crc:
            break
        try:
            (hlen,) = _HEADER_LEN.unpack_from(body, 0)
            header = json.loads(body[_HEADER_LEN.size : _HEADER_LEN.size + hlen])
            values = np.frombuffer(body[_HEADER_LEN.size + hlen :], dtype="<f8")
        except (ValueError, struct.error):
            break
        if values.shape[0] != int(header.get("n", -1)):
            break
        records.append((header, values.astype(np.float64)))
        pos = stop
    return records, pos


def record_candidate(
    run_dir: Path, candidate_id: str, returns: np.ndarray, *, score: float, kind: str = "pod"
) -> None:
    """Append one candidate's per-bar validation returns to ``run_dir/candidates.bin``.

    Args:
        run_dir: the run directory (created if missing).
        candidate_id: unique id of the candidate within the run; recording an id that is
            already in the file does nothing (a resumed run does not double count).
        returns: (T_val,) per-bar simple returns of the candidate on the validation split.
        score: the validation score selection ranked the candidate by.
        kind: ``"pod"`` (a tournament pod), ``"checkpoint"`` (a single-agent checkpoint)
            or ``"ensemble"`` (the leaderboard ensemble).

    Raises:
        FinpodError: non-finite returns or score (a non-finite number never becomes a
            score), an empty or non-1-D ``returns``, or an unknown ``kind``.
    """
    if kind not in KINDS:
        raise FinpodError(f"unknown candidate kind {kind!r}", f"use one of {', '.join(KINDS)}")
    values = np.asarray(returns, dtype=np.float64)
    if values.ndim != 1 or values.shape[0] == 0:
        raise FinpodError(
            f"candidate {candidate_id}: returns must be a non-empty 1-D array, "
            f"got shape {values.shape}",
            "pass the per-bar validation returns of one candidate",
        )
    if not np.isfinite(values).all():
        raise FinpodError(
            f"candidate {candidate_id} has non-finite validation returns",
            "a candidate whose numbers go non-finite fails; it is never scored",
        )
    if not math.isfinite(float(score)):
        raise FinpodError(
            f"candidate {candidate_id} has a non-finite score {score}",
            "a candidate whose numbers go non-finite fails; it is never scored",
        )
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / CANDIDATES_FILE
    record = _encode(str(candidate_id), values, float(score), kind)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        data = os.pread(fd, size, 0) if size else b""
        records, good = _scan(data)
        if any(h.get("id") == str(candidate_id) for h, _ in records):
            return
        if good < size:
            # A torn record from an interrupted write: cut it off so the new one is readable.
            os.ftruncate(fd, good)
        os.pwrite(fd, record, good)
        os.fsync(fd)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def load_candidates(run_dir: Path) -> CandidateSet:
    """Every candidate recorded in ``run_dir`` (an empty set when there is no record).

    A torn last record is ignored. When an id appears more than once (only possible in a
    file written by something else than :func:`record_candidate`) the first record counts.
    """
    path = Path(run_dir) / CANDIDATES_FILE
    if not path.is_file():
        return CandidateSet()
    try:
        data = path.read_bytes()
    except OSError as err:
        raise FinpodError(f"cannot read {path}: {err}", "check the run directory") from err
    records, _ = _scan(data)
    return candidate_set(
        (
            str(h.get("id")),
            float(h.get("score", math.nan)),
            str(h.get("kind", "pod")),
            values,
        )
        for h, values in records
    )


def candidate_set(records: Iterable[tuple[str, float, str, np.ndarray]]) -> CandidateSet:
    """A :class:`CandidateSet` of ``(id, score, kind, per-bar returns)`` records held in
    memory, in order (the first record of an id counts)."""
    seen: set[str] = set()
    ids, scores, kinds, columns = [], [], [], []
    for cid, score, kind, values in records:
        if cid in seen:
            continue
        seen.add(cid)
        ids.append(cid)
        scores.append(float(score))
        kinds.append(kind)
        columns.append(np.asarray(values, dtype=np.float64))
    if not columns:
        return CandidateSet()
    lengths = [len(c) for c in columns]
    t = min(lengths)
    matrix = np.stack([c[len(c) - t :] for c in columns], axis=1)
    return CandidateSet(
        ids=ids,
        scores=np.asarray(scores, dtype=np.float64),
        returns=matrix,
        kinds=kinds,
        lengths=lengths,
    )
