"""Training on resampled paths: a block bootstrap of the train split (``EnvConfig.train_bootstrap_block``).

One historical path is all a train split holds; a policy can learn its particular
sequence of moves. A moving-block bootstrap makes new paths of the same length out of
blocks of ``B`` consecutive bars drawn with replacement (uniform start bars), so the
dependence inside a block (a signal and the returns it predicts, volatility clusters)
is kept and the order of blocks is new:

- **bars keep their order inside a block**: path position ``p`` of block k holds source
  bar ``b_k + (p − p_k)``; the last block is cut at the split's length;
- **prices are chained**: every price of a block is rescaled (per ticker) so that its
  first bar's return over the previous path bar equals the source bar's own return over
  its source predecessor (0 at source bar 0); every return inside a block is the source
  return, the price level follows the path;
- features, masks, volume and liquidity are the source bar's, as they were computed on
  the real history (causal there); the price z-score and the reference are rebuilt on the
  path; timestamps stay the split's own slots (the schedule and calendar follow the
  slot, so on intraday bars a block may straddle a session's slots);
- the seam costs one step in B: the observation at a block's last bar describes its source
  successor, not the first bar of the next block.

Only a training env draws paths (:func:`uses_bootstrap`: random starts, and a split that
is neither ``validation`` nor ``backtest``): validation scoring and the backtest always
run the real split. A new path is drawn at every reset that restarts all envs together;
with shorting or borrowing (envs that reset on their own) only ``reset()`` draws one.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from finpod.data.market import MarketData
from finpod.env.config import EnvConfig
from finpod.errors import FinpodError

#: Splits that are never resampled, whatever the config says.
REAL_SPLITS = ("validation", "backtest")


def uses_bootstrap(market: MarketData, config: EnvConfig, random_start: bool) -> bool:
    """Whether an env on ``market`` trains on bootstrap paths (see the module doc).

    FinpodError when the block does not fit the split."""
    block = int(config.train_bootstrap_block)
    if block == 0 or not random_start or market.split in REAL_SPLITS:
        return False
    if block >= market.num_bars:
        raise FinpodError(
            f"env.train_bootstrap_block = {block} bars does not fit the {market.split} split "
            f"({market.num_bars} bars)",
            "use blocks of a few weeks of bars, e.g. train_bootstrap_block = 20",
        )
    return True


def bootstrap_path(num_bars: int, block: int, generator: torch.Generator) -> torch.Tensor:
    """(num_bars,) int64 source bar of each path position: blocks of ``block`` consecutive
    bars with start bars uniform in ``[0, num_bars − block]`` (drawn on ``generator``)."""
    blocks = -(-num_bars // block)
    starts = torch.randint(0, num_bars - block + 1, (blocks,), generator=generator)
    path = starts.unsqueeze(1) + torch.arange(block).unsqueeze(0)
    return path.flatten()[:num_bars]


def chain_factor(close: torch.Tensor, path: torch.Tensor, block: int) -> torch.Tensor:
    """(P, N) float64 per-ticker price multiplier of each path position (see the module doc).

    ``close (T, N)`` source closes (0 = no price), ``path (P,)`` from :func:`bootstrap_path`.
    """
    c = close.to(torch.float64)
    logc = torch.log(torch.where(c > 0, c, torch.ones_like(c)))
    src = path.to(c.device)
    prev_src = (src - 1).clamp(min=0)
    here = logc.index_select(0, src)
    jump = torch.zeros_like(here)
    first = torch.arange(block, src.shape[0], block, device=c.device)  # block starts, p > 0
    last_prev = logc.index_select(0, src[first - 1])  # the path's bar before the block
    before = logc.index_select(0, prev_src[first])  # the source bar before the block
    priced = (
        (c.index_select(0, src[first - 1]) > 0)
        & (c.index_select(0, prev_src[first]) > 0)
        & (src[first] > 0).unsqueeze(1)
    )
    jump[first] = torch.where(priced, last_prev - before, torch.zeros_like(before))
    at_zero = (
        (src[first] == 0).unsqueeze(1)
        & (c.index_select(0, src[first - 1]) > 0)
        & (c.index_select(0, src[first]) > 0)
    )
    # Source bar 0 has no predecessor: the block then starts with a zero return.
    jump[first] = torch.where(at_zero, last_prev - logc.index_select(0, src[first]), jump[first])
    return torch.exp(torch.cumsum(jump, dim=0))


def resample_market(market: MarketData, path: torch.Tensor, block: int) -> MarketData:
    """``market`` along ``path`` (chained prices, source features and masks, the split's
    own timestamps); see the module doc."""
    src = path.to(market.device)
    factor = chain_factor(market.close, src, block)
    cut = market.take_bars(src)

    def priced(x: torch.Tensor) -> torch.Tensor:
        return (x.to(torch.float64) * factor).to(x.dtype)

    return replace(
        cut,
        timestamps=market.timestamps,
        open=priced(cut.open),
        close=priced(cut.close),
        benchmark=None,
    )
