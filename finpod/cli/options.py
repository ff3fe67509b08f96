"""The one vocabulary of finpod's options, shared by every command.

- ``--data``/``-d``: a dataset directory (``finpod download`` writes one);
- ``--strategy``/``-s``: a strategy TOML file;
- ``--runs``: the folder of run directories; ``--reports``: the folder of reports;
- ``--out``/``-o``: only where a command makes exactly one thing (``download``: the
  dataset; ``walkforward``: the walk-forward directory);
- ``--device``: ``auto``, ``cpu``, ``cuda`` or ``cuda:K``.
"""

from __future__ import annotations

DATA_HELP = "Dataset directory (finpod download writes one)."
STRATEGY_HELP = "Strategy TOML file (see strategies/)."
RUNS_HELP = "Folder of run directories."
REPORTS_HELP = "Folder of reports (tearsheets)."
DEVICE_HELP = "auto, cpu, cuda or cuda:K."
#: ``--help``'s default of a ``--device`` the strategy sets.
DEVICE_DEFAULT = "the strategy's [train] device"
