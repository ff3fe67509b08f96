"""finpod: deep-reinforcement-learning stock trading on the NASDAQ-100.

Imports point down only, along the layers of :data:`finpod.layers.LAYERS` (from the top:
``cli``; ``pipeline`` and ``walkforward``; ``agent_run``; ``tournament`` and ``paper``;
``strategy`` and ``backtest``; ``agents``; ``env``; ``runs`` and ``data``; the foundations).
"""

__version__ = "0.1.0"
