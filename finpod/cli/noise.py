"""Other libraries' console noise, held back and said in one line.

yfinance logs its own errors (a DNS failure per ticker, "N Failed download", "Cookie/crumb
fetch failed") and its code raises pandas deprecation warnings; offline, they bury
finpod's one-line error. :class:`HeldBack` collects them while a command runs (the
``yfinance`` logger's records and the warnings raised from its files) and
:meth:`HeldBack.summary` says them in one line. ``finpod --debug`` shows them as they come.
"""

from __future__ import annotations

import logging
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

#: Loggers of the libraries whose own messages are held back.
NOISY_LOGGERS = ("yfinance",)
#: Path fragments of the files whose warnings are held back.
NOISY_FILES = ("/yfinance/", "\\yfinance\\")
_UNRESOLVED = re.compile(r"Could not resolve host:?\s*([\w.-]+)", re.IGNORECASE)


class _Collect(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            self.sink.append(" ".join(record.getMessage().split()))


@dataclass
class HeldBack:
    """Context manager: the noisy libraries' log records and warnings, collected."""

    messages: list[str] = field(default_factory=list)
    """Each held-back log line (WARNING and above), whitespace collapsed."""
    warnings: list[str] = field(default_factory=list)
    """Each held-back warning, as ``Category: message``."""
    _saved: list[tuple[logging.Logger, list[logging.Handler], bool]] = field(
        default_factory=list, repr=False
    )
    _showwarning: Any = field(default=None, repr=False)

    def __enter__(self) -> HeldBack:
        handler = _Collect(self.messages)
        for name in NOISY_LOGGERS:
            logger = logging.getLogger(name)
            self._saved.append((logger, list(logger.handlers), logger.propagate))
            logger.handlers = [handler]
            logger.propagate = False
        self._showwarning = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if any(part in str(filename) for part in NOISY_FILES):
                first = str(message).splitlines()[0] if str(message) else ""
                self.warnings.append(f"{category.__name__}: {first}")
            else:
                self._showwarning(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        return self

    def __exit__(self, *exc: object) -> None:
        warnings.showwarning = self._showwarning
        for logger, handlers, propagate in self._saved:
            logger.handlers = handlers
            logger.propagate = propagate
        self._saved.clear()

    def summary(self) -> str | None:
        """One line for what was held back (None when nothing was), e.g. ``yfinance: 6
        errors and 4 warnings held back; could not resolve query2.finance.yahoo.com (no
        network?); --debug shows them``."""
        if not self.messages and not self.warnings:
            return None
        parts = []
        if self.messages:
            n = len(self.messages)
            parts.append(f"{n} message{'s' if n != 1 else ''}")
        if self.warnings:
            n = len(self.warnings)
            parts.append(f"{n} warning{'s' if n != 1 else ''}")
        hosts = sorted(
            {m.group(1).rstrip(".") for m in map(_UNRESOLVED.search, self.messages) if m}
        )
        if hosts:
            why = f"could not resolve {', '.join(hosts)} (no network?)"
        else:
            text = (self.messages or self.warnings)[0]
            why = text if len(text) <= 100 else text[:99] + "…"
        return f"yfinance: {' and '.join(parts)} held back; {why}; --debug shows them"
