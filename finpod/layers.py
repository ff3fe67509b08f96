"""finpod's layers, from the ground up: a module imports modules of its own layer or of a
lower one, never of a higher one, and no import circle closes (``tests/test_layering.py``
reads every import of finpod against :data:`LAYERS`).

A package stands on one layer with all its modules; a module outside the packages stands
on its own.
"""

#: Layer by layer, from the ground up: the modules and packages on it.
LAYERS: tuple[tuple[str, ...], ...] = (
    # Foundations every layer may use: errors, atomic files, the device, score functions,
    # the grammar of option text.
    (
        "finpod",
        "finpod.layers",
        "finpod.errors",
        "finpod.atomic",
        "finpod.device",
        "finpod.scores",
        "finpod.grammar",
        "finpod.dates",
    ),
    # The run directory (read and written by every layer above) and the market data.
    ("finpod.runs", "finpod.data"),
    # The trading environment over a dataset's arrays.
    ("finpod.env",),
    # The learners: networks, algorithms, the training loop, checkpoints.
    ("finpod.agents",),
    # A strategy file, and the backtest of trained agents (with its reports).
    ("finpod.strategy", "finpod.backtest"),
    # The tournament of many pods on Ray, and paper trading of a chosen agent.
    ("finpod.tournament", "finpod.paper"),
    # One agent's training run.
    ("finpod.agent_run",),
    # The workflows: data → train → backtest, and walk-forward folds of it.
    ("finpod.pipeline", "finpod.walkforward"),
    # The command line.
    ("finpod.cli", "finpod.__main__"),
)


def layer_of(module: str) -> int:
    """The layer (0 = ground) of ``module`` (``"finpod.env.core"``): that of the longest
    name of :data:`LAYERS` it is or lies under; ``KeyError`` when none."""
    best, floor = "", -1
    for i, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > len(best):
                best, floor = name, i
    if floor < 0:
        raise KeyError(module)
    return floor
