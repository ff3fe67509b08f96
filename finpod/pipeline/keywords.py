"""Keyword names of the pipeline's functions, renamed to the CLI's words (``data`` for a
dataset directory, ``runs`` for the folder of run directories, ``reports`` for the folder
of reports): the old names (``dataset_dir``, ``data_dir``, ``run_dir``, ``out``) still
work for one release, each with a :class:`DeprecationWarning`."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any


def renamed_keywords(**old_to_new: str) -> Callable[[Any], Any]:
    """Keywords renamed to the CLI's words: the old ones still work, with a warning."""

    def wrap(fn: Any) -> Any:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            for old, new in old_to_new.items():
                if old in kwargs:
                    msg = f"{fn.__name__}({old}=) is deprecated; use {new}="
                    warnings.warn(msg, DeprecationWarning, stacklevel=2)
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return call

    return wrap
