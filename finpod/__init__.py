"""finpod: deep-reinforcement-learning stock trading on the NASDAQ-100.

Layers (imports point down only): ``cli`` → ``pipeline`` → ``tournament`` → ``agents`` →
``env`` → ``data``; ``backtest`` uses ``env`` and ``data``.
"""

__version__ = "0.1.0"
