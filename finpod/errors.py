"""The one exception type users see.

Every failure caused by user input (a file, a flag, a config key, a date) raises
:class:`FinpodError` with a message that says what is wrong and what to do. The CLI turns
it into one red line and exit code 1; library callers (notebooks) can catch it.
"""

from __future__ import annotations


class FinpodError(Exception):
    """A user-facing error: ``str(err)`` is one readable line with a hint."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(f"{message} ({hint})" if hint else message)
