"""Dates on finpod's command line, read one way: ISO 8601.

A date is ``YYYY-MM-DD``, optionally with a time of day ``HH:MM`` or ``HH:MM:SS`` after a
space or a ``T`` (``2019-01-09``, ``2019-01-09 09:30``). Any other spelling is refused in
one :class:`~finpod.errors.FinpodError` line, never guessed: ``09/01/2019`` may be the 9th
of January or the 1st of September, so the message names both readings and
``--date-format``. With a ``date_format`` (a ``strftime`` pattern such as ``%d/%m/%Y``)
every date is read with that pattern, strictly; a pattern with a time of day also reads a
date alone written with the pattern's date part (``%m/%d/%Y %H:%M`` reads ``01/09/2019``).

Values are naive ``datetime`` wall-clock times in New York (a pattern with ``%z`` reads an
offset, and the time is converted to New York), between
:data:`FIRST_YEAR` and :data:`LAST_YEAR` (the span a ``pandas.Timestamp`` holds).
:func:`iso_text` writes them back: ``parse_date(iso_text(d), ...) == d`` for every date
read as ISO.
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from finpod.errors import FinpodError

#: The zone of finpod's wall-clock dates: a date read with an offset is converted to it.
NEW_YORK = ZoneInfo("America/New_York")
#: Earliest and latest years of a date (pandas timestamps span 1677-09-21 … 2262-04-11).
FIRST_YEAR, LAST_YEAR = 1678, 2261
#: ISO date with an optional time of day. ASCII digits only: ``[0-9]``, never ``\d``.
_ISO = re.compile(
    r"(?P<y>[0-9]{4})-(?P<m>[0-9]{2})-(?P<d>[0-9]{2})"
    r"(?:[T ](?P<H>[0-9]{2}):(?P<M>[0-9]{2})(?::(?P<S>[0-9]{2}))?)?"
)
#: ``a/b/YYYY``-like dates (``/``, ``-`` or ``.``; day and month in either order).
_DAY_MONTH = re.compile(
    r"(?P<a>[0-9]{1,2})(?P<sep>[/.-])(?P<b>[0-9]{1,2})(?P=sep)(?P<y>[0-9]{4}|[0-9]{2})"
    r"(?P<rest>[T ].*)?"
)
#: Year-first dates that are not ISO: ``2019/09/01``, ``2019.9.1``, ``2019-9-1``.
_YEAR_FIRST = re.compile(
    r"(?P<y>[0-9]{4})(?P<sep>[/.-])(?P<m>[0-9]{1,2})(?P=sep)(?P<d>[0-9]{1,2})"
    r"(?P<rest>[T ].*)?"
)
#: Compact ``YYYYMMDD``.
_COMPACT = re.compile(r"(?P<y>[0-9]{4})(?P<m>[0-9]{2})(?P<d>[0-9]{2})")
#: ``strftime`` directives of a time of day: where a pattern's date part ends.
_TIME_DIRECTIVE = re.compile(r"%[HIMSpfzZXTR]")
#: The day a ``--date-format`` is tried on: every field differs from strptime's default.
_PROBE = datetime(2019, 11, 23, 16, 45, 30, tzinfo=UTC)


def _not_iso(text: str, what: str) -> FinpodError:
    """The refusal of a date that is not ISO, with the readings it may have meant."""
    said = f"{what}: {text!r} is not an ISO date (YYYY-MM-DD)"
    m = _DAY_MONTH.fullmatch(text)
    if m is not None:
        a, b, sep, year = int(m["a"]), int(m["b"]), m["sep"], m["y"]
        clock = " %H:%M" if m["rest"] else ""
        yy = "%y" if len(year) == 2 else "%Y"
        day_first = (b, a, f"%d{sep}%m{sep}{yy}{clock}")
        month_first = (a, b, f"%m{sep}%d{sep}{yy}{clock}")
        if len(year) == 2:  # the century is a guess too: no ISO spelling offered
            return FinpodError(
                said,
                f"write YYYY-MM-DD, or pass --date-format '{day_first[2]}' or '{month_first[2]}'",
            )
        readings: dict[str, str] = {}  # ISO spelling → the pattern that reads it so
        for month, day, pattern in (day_first, month_first):
            if _valid(int(year), month, day):
                readings.setdefault(_iso(year, month, day), pattern)
        if not readings:
            return FinpodError(f"{said}, nor a date in either day/month order", _iso_hint())
        patterns = " or ".join(f"'{p}'" for p in readings.values())
        return FinpodError(said, f"write {' or '.join(readings)}, or pass --date-format {patterns}")
    m = _YEAR_FIRST.fullmatch(text)
    if m is not None:
        year, month, day, sep = int(m["y"]), int(m["m"]), int(m["d"]), m["sep"]
        if not _valid(year, month, day):
            return FinpodError(f"{said}, nor a date at all", _iso_hint())
        pattern = f"%Y{sep}%m{sep}%d" + (" %H:%M" if m["rest"] else "")
        also = "" if sep == "-" else f", or pass --date-format '{pattern}'"
        return FinpodError(said, f"write {_iso(year, month, day)}{also}")
    m = _COMPACT.fullmatch(text)
    if m is not None and _valid(int(m["y"]), int(m["m"]), int(m["d"])):
        iso = _iso(m["y"], int(m["m"]), int(m["d"]))
        return FinpodError(said, f"write {iso}, or pass --date-format '%Y%m%d'")
    return FinpodError(said, _iso_hint())


def _iso_hint() -> str:
    return (
        "write YYYY-MM-DD or YYYY-MM-DD HH:MM, e.g. 2019-01-09, or pass "
        "--date-format with the strftime pattern of your dates"
    )


def _iso(year: str | int, month: int, day: int) -> str:
    return f"{int(year):04d}-{month:02d}-{day:02d}"


def _valid(year: int, month: int, day: int) -> bool:
    return 1 <= month <= 12 and 1 <= day <= calendar.monthrange(max(year, 1), month)[1]


def _impossible(text: str, what: str, f: dict[str, str | None]) -> FinpodError | None:
    """Why ISO-shaped ``text`` names no date or time (None when it names one)."""
    year, month, day = int(f["y"] or 0), int(f["m"] or 0), int(f["d"] or 0)
    why = None
    if not 1 <= month <= 12:
        why = f"month {month} does not exist"
    elif not FIRST_YEAR <= year <= LAST_YEAR:
        why = f"finpod reads years {FIRST_YEAR} to {LAST_YEAR}"
    elif not _valid(year, month, day):
        days = calendar.monthrange(year, month)[1]
        why = f"{calendar.month_name[month]} {year} has {days} days"
    elif f["H"] is not None and int(f["H"]) > 23:
        why = f"hour {int(f['H'])} does not exist"
    elif f["M"] is not None and int(f["M"]) > 59:
        why = f"minute {int(f['M'])} does not exist"
    elif f["S"] is not None and int(f["S"]) > 59:
        why = f"second {int(f['S'])} does not exist"
    if why is None:
        return None
    return FinpodError(
        f"{what}: {text!r} is not a date: {why}", "write YYYY-MM-DD, e.g. 2019-01-09"
    )


def check_date_format(date_format: str) -> str:
    """``date_format`` when it is a ``strftime`` pattern that reads a year, a month and a day
    back exactly (``%d/%m/%Y``, ``%m/%d/%Y %H:%M``, ``%Y%m%d``); one error line otherwise."""
    hint = "give a strftime pattern with year, month and day, e.g. '%d/%m/%Y' or '%m/%d/%Y %H:%M'"
    if not isinstance(date_format, str) or not date_format.strip():
        raise FinpodError("--date-format is empty", hint)
    try:
        back = datetime.strptime(_PROBE.strftime(date_format), date_format)
    except (ValueError, TypeError, OverflowError):
        back = None
    if back is None or back.date() != _PROBE.date():
        raise FinpodError(f"--date-format {date_format!r} cannot read a date back", hint)
    return date_format


def _date_part(date_format: str) -> str | None:
    """The date part of a pattern with a time of day (``%m/%d/%Y %H:%M`` → ``%m/%d/%Y``);
    None when the pattern has no time of day or its date part reads no whole date."""
    cut = _TIME_DIRECTIVE.search(date_format)
    if cut is None:
        return None
    part = date_format[: cut.start()].rstrip(" T,;@")
    try:
        return check_date_format(part)
    except FinpodError:
        return None


def parse_date(text: str, what: str, date_format: str | None = None) -> datetime:
    """The date (and time of day) ``text`` names, read as ISO 8601 (see the module doc), or
    with the ``strftime`` pattern ``date_format`` strictly when one is given.

    Args:
        text: the value as the user wrote it (surrounding blanks are ignored).
        what: the option or key it came from, named in every error (``"--start"``).
        date_format: ``strftime`` pattern every date is read with instead of ISO.

    Returns:
        A naive ``datetime``, New York wall-clock time (converted to it when
        ``date_format`` reads an offset).

    Raises:
        FinpodError: one line naming ``what`` and ``text``: not ISO (with its readings and
            ``--date-format``), no such date (``2019-02-30``), or not matching the pattern.
    """
    if not isinstance(text, str):
        raise FinpodError(f"{what}: {text!r} is not a date", _iso_hint())
    value = text.strip()
    if not value:
        raise FinpodError(f"{what} is empty", _iso_hint())
    if date_format is not None:
        return _with_format(value, what, check_date_format(date_format))
    m = _ISO.fullmatch(value)
    if m is None:
        raise _not_iso(value, what)
    f = m.groupdict()
    bad = _impossible(value, what, f)
    if bad is not None:
        raise bad
    return datetime(
        int(f["y"]), int(f["m"]), int(f["d"]), int(f["H"] or 0), int(f["M"] or 0), int(f["S"] or 0)
    )


def _with_format(value: str, what: str, date_format: str) -> datetime:
    patterns = [date_format] + [p for p in [_date_part(date_format)] if p is not None]
    for pattern in patterns:
        try:
            when = datetime.strptime(value, pattern)
        except (ValueError, TypeError, OverflowError):
            continue
        if when.tzinfo is not None:
            when = when.astimezone(NEW_YORK).replace(tzinfo=None)
        if not FIRST_YEAR <= when.year <= LAST_YEAR:
            raise FinpodError(
                f"{what}: {value!r} is not a date: finpod reads years {FIRST_YEAR} to {LAST_YEAR}",
                f"write it as --date-format {date_format!r} reads, e.g. {_example(date_format)}",
            )
        return when
    raise FinpodError(
        f"{what}: {value!r} does not match --date-format {date_format!r}",
        f"write it as the pattern reads, e.g. {_example(date_format)}",
    )


def _example(date_format: str) -> str:
    return _PROBE.strftime(date_format)


def parse_date_range(
    text: str, what: str, date_format: str | None = None
) -> tuple[datetime | None, datetime | None]:
    """``FIRST:LAST`` → ``(first, last)``, inclusive whole dates; an empty side is open
    (``None``). Each side is read by :func:`parse_date`; a time of day is refused (a range
    of sessions holds whole days), as is FIRST after LAST."""
    example = f"e.g. {what} 2017-01-01:2018-12-31"
    if not isinstance(text, str) or text.count(":") != 1:
        if isinstance(text, str) and text.count(":") > 1:
            raise FinpodError(
                f"{what} takes dates FIRST:LAST without a time of day (a split holds whole "
                f"sessions), got {text!r}",
                example,
            )
        raise FinpodError(f"{what} must be FIRST:LAST dates, got {text!r}", example)
    lo_text, hi_text = text.split(":")
    ends = []
    for side in (lo_text, hi_text):
        if not side.strip():
            ends.append(None)
            continue
        when = parse_date(side, what, date_format)
        if when.time() != datetime.min.time():
            raise FinpodError(
                f"{what}: {side.strip()!r} has a time of day; a split holds whole sessions",
                f"give its date alone, e.g. {iso_text(when).split()[0]}",
            )
        ends.append(when)
    first, last = ends
    if first is not None and last is not None and first > last:
        raise FinpodError(
            f"{what}: FIRST {iso_text(first)} is after LAST {iso_text(last)}",
            f"write {what} FIRST:LAST with FIRST ≤ LAST",
        )
    return first, last


def iso_text(when: datetime) -> str:
    """``when`` written as finpod reads it back: ``YYYY-MM-DD``, with `` HH:MM`` (and
    ``:SS``, and microseconds) when it has a time of day."""
    text = f"{when.year:04d}-{when.month:02d}-{when.day:02d}"
    if (when.hour, when.minute, when.second, when.microsecond) != (0, 0, 0, 0):
        text += f" {when.hour:02d}:{when.minute:02d}"
        if when.second or when.microsecond:
            text += f":{when.second:02d}"
            if when.microsecond:
                text += f".{when.microsecond:06d}"
    return text
