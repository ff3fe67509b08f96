"""A dataset's ``manifest.json``: the typed :class:`Manifest` and the raw :func:`load_manifest`.

The file is the on-disk edge: :func:`load_manifest` returns its JSON as a dict (notebooks
index it), :meth:`Manifest.load` the same content with typed fields, checked. Both raise
the same one-line :class:`~finpod.errors.FinpodError` for a missing, unreadable or
malformed manifest.

Keys this version of finpod does not know (written by a newer one) are kept, not refused:
they travel in :attr:`Manifest.extra` and :meth:`Manifest.to_dict` writes them back, so a
newer dataset still loads and nothing it says is lost. A known key of the wrong type is
refused: code reading the field would otherwise fail later, far from the file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finpod.data.benchmark import BENCHMARK_KIND
from finpod.data.calendar import bars_per_year
from finpod.data.disclosure import benchmark_name, universe_disclosure
from finpod.data.manifest_files import check_manifest_files
from finpod.errors import FinpodError

if TYPE_CHECKING:
    from finpod.data.sources.loaded import LoadedSource

#: Manifest format. 2: ``universe`` and ``benchmark`` are dicts, ``bars_per_year``, and
#: optional ``buyable``/``delisted`` mask columns (listed under ``masks``). Format-1
#: datasets still load (no masks, bars per year from the calendar at load time).
FORMAT_VERSION = 2
#: Keys every manifest has held since format 1; without one the dataset cannot be read.
REQUIRED = ("hash", "bar", "splits", "tickers", "features")
_REBUILD = "rebuild the dataset with finpod download"
_INT, _NUMBER, _TEXT, _TABLE = (int,), (int, float), (str,), (dict,)
_KIND_NAMES = {
    int: "an integer",
    float: "a number",
    str: "a string",
    dict: "a table",
    list: "a list",
}


def _check(where: str, key: str, value: Any, kinds: tuple[type, ...], nullable: bool) -> Any:
    """``value`` when it is one of ``kinds`` (a bool is no number), else a one-line error."""
    if value is None and nullable:
        return value
    if isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds):
        return value
    names = " or ".join(_KIND_NAMES[k] for k in kinds)
    raise FinpodError(
        f"{where}: the manifest's {key!r} is {type(value).__name__} {str(value)[:40]!r}, "
        f"expected {names}",
        _REBUILD,
    )


def _names(where: str, key: str, value: Any) -> tuple[str, ...]:
    """A list of strings (tickers, features, notes) as a tuple."""
    _check(where, key, value, (list,), False)
    for item in value:
        _check(where, f"{key}[…]", item, _TEXT, False)
    return tuple(value)


@dataclass(frozen=True)
class SplitRange:
    """One split of a dataset: its bars ``[start_index, stop_index)`` and their dates."""

    start: str
    """First bar's time (text, as written)."""
    end: str
    """Last bar's time (text, as written)."""
    start_index: int
    """Row of the first bar on the dataset's time line."""
    stop_index: int
    """Row after the last bar."""
    bars: int
    """Bars in the split."""
    sessions: int
    """Exchange sessions the bars fall on."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Keys of the entry this version of finpod does not know, kept as read."""

    @classmethod
    def from_dict(cls, d: Any, where: str = "manifest", name: str = "split") -> SplitRange:
        """A ``splits`` entry of the manifest; a missing or wrong-typed key is an error."""
        key = f"splits.{name}"
        _check(where, key, d, _TABLE, False)
        known = {f.name: f for f in fields(cls) if f.name != "extra"}
        for k in known:
            if k not in d:
                raise FinpodError(f"{where}: the manifest's {key} has no {k!r}", _REBUILD)
        vals = {
            k: _check(where, f"{key}.{k}", d[k], _TEXT if k in ("start", "end") else _INT, False)
            for k in known
        }
        return cls(**vals, extra={k: v for k, v in d.items() if k not in known})

    def to_dict(self) -> dict[str, Any]:
        """The entry as written in ``manifest.json``."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        return {**d, **self.extra}


@dataclass(frozen=True)
class Manifest:
    """A dataset's ``manifest.json`` with typed fields (see :mod:`finpod.data.dataset`).

    Fields after :attr:`features` are optional: None when the manifest holds null or (an
    older format) does not hold the key at all; :attr:`missing` names the latter, so
    :meth:`to_dict` writes back exactly the keys that were read.
    """

    hash: str
    """SHA-256 of the dataset's content (see :func:`finpod.data.store.content_hash`)."""
    bar: str
    """Bar size: ``"1d"`` or ``"<N>min"``."""
    splits: Mapping[str, SplitRange]
    """``train``, ``validation`` and ``backtest`` row ranges, in time order."""
    tickers: tuple[str, ...]
    """Symbols, the column order of every array."""
    features: tuple[str, ...]
    """Feature names, the last axis of the feature tensor."""
    format: int | None = None
    """Manifest format (:data:`FORMAT_VERSION` when written by this finpod)."""
    source: str | None = None
    """The source the dataset was built from (``sample``, ``files``, ``alpaca``…)."""
    source_options: Mapping[str, Any] | None = None
    """The source options, as given."""
    universe: Mapping[str, Any] | str | None = None
    """``{"name", "point_in_time", "note"}`` (format 1: a description string)."""
    calendar: str | None = None
    """Exchange calendar: ``XNYS`` or ``XNAS``."""
    timezone: str | None = None
    """Zone of the bar times."""
    bars_per_year: float | None = None
    """Annualization counted on the calendar (format 1: none; counted at load time)."""
    bars_per_year_rule: str | None = None
    """How :attr:`bars_per_year` was counted."""
    start: str | None = None
    """First bar's time."""
    end: str | None = None
    """Last bar's time."""
    bars: int | None = None
    """Bars on the time line (all splits and embargoes)."""
    feature_scaling: Mapping[str, str] | None = None
    """How each feature is scaled, in words."""
    split_rule: str | None = None
    """How the splits were cut: explicit dates or 70/15/15 % of the sessions."""
    embargo_sessions: int | None = None
    """Sessions left out between consecutive splits."""
    cleaning: Mapping[str, Any] | None = None
    """Summary of the cleaning report (counts)."""
    notes: tuple[str, ...] | None = None
    """Lines about the data shown by ``finpod info``."""
    rows_per_group_bars: int | None = None
    """Bars per Parquet row group of ``bars.parquet``."""
    benchmark: Mapping[str, Any] | str | None = None
    """``{"name", "kind", "source"}`` of the index (format 1: its name), or None."""
    masks: Mapping[str, bool] | None = None
    """Which optional (T, N) bool columns ``bars.parquet`` holds (``buyable``, ``delisted``)."""
    created: str | None = None
    """Build time, ISO 8601 UTC."""
    files: Mapping[str, str | None] | None = None
    """File of each part: ``bars``, ``benchmark`` (None: no benchmark), ``cleaning_report``."""
    price_precision: str | None = None
    """How prices and volumes are stored: ``"float64"`` (the source's values); absent in
    older datasets, which stored float32 (about 7 significant digits: 312473.86 was
    stored as 312473.875)."""
    user_features: Mapping[str, Any] | None = None
    """Each user feature (a column the user named, or a source's own such as
    ``alpha_signal``): ``{"scaling", "lookahead_check"}`` (see
    :mod:`finpod.data.user_features`); None or absent when there is none."""
    missing: frozenset[str] = frozenset()
    """Optional keys the manifest did not hold (older formats)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Keys this version of finpod does not know (a newer format), kept as read."""

    @classmethod
    def from_dict(cls, d: Any, where: str = "manifest") -> Manifest:
        """The typed manifest of ``d`` (the JSON of ``manifest.json``); ``where`` names the
        file in errors. A missing required key or a wrong-typed known key is an error."""
        if not isinstance(d, dict):
            raise FinpodError(
                f"{where} is not a JSON table (it holds a {type(d).__name__})", _REBUILD
            )
        for key in REQUIRED:
            if key not in d:
                raise FinpodError(f"{where} has no {key!r} entry", _REBUILD)
        vals: dict[str, Any] = {}
        for key, kinds in _KINDS.items():
            if key not in d:
                continue
            value = d[key]
            if key in ("tickers", "features", "notes") and value is not None:
                value = _names(where, key, value)
            elif key == "splits":
                _check(where, key, value, _TABLE, False)
                value = {k: SplitRange.from_dict(v, where, k) for k, v in value.items()}
            else:
                _check(where, key, value, kinds, key not in REQUIRED)
            vals[key] = value
        return cls(
            **vals,
            missing=frozenset(k for k in _KINDS if k not in d),
            extra={k: v for k, v in d.items() if k not in _KINDS},
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``manifest.json``: ``Manifest.from_dict(d).to_dict() == d``."""
        out: dict[str, Any] = {}
        for key in _ORDER:
            if key in self.missing:
                continue
            value = getattr(self, key)
            if key == "splits":
                value = {k: v.to_dict() for k, v in value.items()}
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, Mapping):
                value = dict(value)
            out[key] = value
        return {**out, **self.extra}

    @classmethod
    def load(cls, dataset_dir: str | Path) -> Manifest:
        """The manifest of the dataset directory ``dataset_dir``, typed and checked, also
        against its Parquet files' footers (:mod:`finpod.data.manifest_files`)."""
        path, raw = _read(dataset_dir)
        manifest = cls.from_dict(raw, str(path))
        check_manifest_files(dataset_dir, manifest)
        return manifest

    @property
    def benchmark_name(self) -> str | None:
        """The benchmark's name (either format), or None."""
        return benchmark_name({"benchmark": self.benchmark})

    @property
    def feed(self) -> str | None:
        """The market data feed of an ``alpaca`` dataset, in words (None for other sources)."""
        return feed_label(self.to_dict())

    def universe_disclosure(self) -> dict[str, Any]:
        """See :func:`finpod.data.disclosure.universe_disclosure`."""
        return universe_disclosure({"universe": self.universe, "notes": self.notes})

    def file(self, part: str, default: str | None = None) -> str | None:
        """The file name of ``part`` (``bars``, ``benchmark``…), or ``default``."""
        return (self.files or {}).get(part, default)


#: Types of each known key, in the order the builder writes them.
_KINDS: dict[str, tuple[type, ...]] = {
    "format": _INT,
    "source": _TEXT,
    "source_options": _TABLE,
    "universe": (dict, str),
    "bar": _TEXT,
    "calendar": _TEXT,
    "timezone": _TEXT,
    "bars_per_year": _NUMBER,
    "bars_per_year_rule": _TEXT,
    "start": _TEXT,
    "end": _TEXT,
    "bars": _INT,
    "tickers": (list,),
    "features": (list,),
    "feature_scaling": _TABLE,
    "splits": _TABLE,
    "split_rule": _TEXT,
    "embargo_sessions": _INT,
    "cleaning": _TABLE,
    "notes": (list,),
    "rows_per_group_bars": _INT,
    "benchmark": (dict, str),
    "masks": _TABLE,
    "hash": _TEXT,
    "created": _TEXT,
    "files": _TABLE,
    "user_features": _TABLE,
    "price_precision": _TEXT,
}
_ORDER = tuple(_KINDS)


def _read(dataset_dir: str | Path) -> tuple[Path, Any]:
    path = Path(dataset_dir) / "manifest.json"
    if not path.exists():
        raise FinpodError(
            f"{dataset_dir} is not a finpod dataset (no manifest.json)",
            "build one with: finpod download --out DIR",
        )
    try:
        return path, json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise FinpodError(f"{path} is not valid JSON ({err.msg})", _REBUILD) from err


def load_manifest(dataset_dir: str | Path) -> dict:
    """The dataset's ``manifest.json`` as a dict (keys include ``hash``, ``bar``, ``splits``,
    ``tickers``, ``features``; format 2 adds ``universe`` as ``{"name", "point_in_time",
    "note"}``, ``benchmark`` as ``{"name", "kind", "source"}``, ``bars_per_year`` and
    ``masks``; read a universe or benchmark of either format with
    :func:`universe_disclosure` / :func:`benchmark_name`). Checked as :meth:`Manifest.load`
    checks it; :class:`Manifest` is the typed form."""
    path, raw = _read(dataset_dir)
    check_manifest_files(dataset_dir, Manifest.from_dict(raw, str(path)))
    return raw


#: The ``alpaca`` source's feeds, in words.
FEED_LABELS = {
    "sip": "sip (consolidated: every US exchange)",
    "iex": "iex (IEX's own trades: ~3.5 % of the volume; minutes without one are missing)",
}


def feed_label(manifest: Mapping[str, Any]) -> str | None:
    """The feed an ``alpaca`` dataset was built from, in words; None for other sources."""
    if manifest.get("source") != "alpaca":
        return None
    feed = str((manifest.get("source_options") or {}).get("feed") or "iex")
    return FEED_LABELS.get(feed, feed)


def dataset_bars_per_year(manifest: Manifest | Mapping[str, Any]) -> float:
    """Bars per year of a dataset: the manifest's, or (format 1) counted now on its calendar."""
    m = manifest if isinstance(manifest, Manifest) else Manifest.from_dict(manifest)
    if m.bars_per_year:
        return float(m.bars_per_year)
    return bars_per_year(
        m.bar,
        m.calendar or "XNYS",
        start=m.start or m.splits["train"].start,
        end=m.end or m.splits["backtest"].end,
    )


def universe_entry(info: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest's ``universe`` point-in-time flag and note from a source's
    ``universe_info`` (a note in words when the source gives none)."""
    point_in_time = bool(info.get("point_in_time", False))
    note = info.get("note") or (
        "point-in-time universe"
        if point_in_time
        else "not point-in-time: the tickers may have been chosen with hindsight (survivorship bias)"
    )
    return {"point_in_time": point_in_time, "note": note}


def benchmark_entry(loaded: LoadedSource) -> dict | None:
    """The manifest's ``benchmark`` table of a loaded source, or None without one."""
    if loaded.benchmark is None:
        return None
    info = dict(loaded.benchmark_info or {})
    info.setdefault("name", "benchmark")
    info.setdefault("kind", BENCHMARK_KIND)
    info.setdefault("source", None)
    return info


def cleaning_summary(report: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest's ``cleaning``: the report's counts (lists and tables by their length),
    except ``tickers_dropped``, listed whole: each ticker the input held and the dataset
    does not, with its cause (the ticker rule, :mod:`finpod.data.ticker_rule`)."""
    summ: dict[str, Any] = {}
    for k, v in report.items():
        if k == "tickers_dropped" and isinstance(v, dict):
            summ[k] = {str(t): str(why) for t, why in v.items()}
        elif isinstance(v, dict):
            summ[k] = (
                {kk: vv for kk, vv in v.items() if not isinstance(vv, dict)}
                if k in ("dropped", "repaired")
                else len(v)
            )
        elif isinstance(v, list):
            summ[k] = len(v)
        else:
            summ[k] = v
    return summ
