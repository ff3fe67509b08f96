"""Paper trading of a run's agent on an Alpaca paper account (``finpod paper RUN``).

:mod:`~finpod.paper.broker` the trading API, :mod:`~finpod.paper.live` live bars → a market
window, :mod:`~finpod.paper.decide` the agent's orders on it (the env's observation and
execution code), :mod:`~finpod.paper.state` what is kept in ``RUN/paper/``,
:mod:`~finpod.paper.orders` the orders sent once, :mod:`~finpod.paper.trader` the polling loop.
"""
