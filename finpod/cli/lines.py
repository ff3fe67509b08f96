"""Statements printed line by line: wrapped at word ends at a terminal's width, and past
:data:`PIPED_WIDTH` when piped into a file or another program, so a log stays readable and
a statement that fits stays one grep-able line."""

from __future__ import annotations

import re

from rich.console import Console
from rich.text import Text

#: Widest line of piped output; a longer statement goes on at the next line.
PIPED_WIDTH = 120


def statement(console: Console, text: str | Text, *, markup: bool = True) -> None:
    """Print ``text`` (rich markup unless ``markup`` is False) as one statement."""
    if console.is_terminal:
        console.print(text, highlight=False, markup=markup)
        return
    if not isinstance(text, Text):
        text = Text.from_markup(text) if markup else Text(text)
    for start, stop in _breaks(text.plain, PIPED_WIDTH):
        console.print(text[start:stop], highlight=False, soft_wrap=True)


def _breaks(plain: str, width: int) -> list[tuple[int, int]]:
    """(start, stop) of each line of ``plain`` wrapped at word ends within ``width``; a
    word longer than the line (a path) is kept whole, never cut."""
    lines: list[tuple[int, int]] = []
    start = stop = None
    for word in re.finditer(r"\S+", plain):
        if start is None:
            start = word.start()
        elif word.end() - start > width:
            lines.append((start, stop))
            start = word.start()
        stop = word.end()
    if start is not None:
        lines.append((start, stop))
    return lines or [(0, 0)]
