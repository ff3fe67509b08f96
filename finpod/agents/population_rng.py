"""A population's random numbers: member k draws from member k's generator.

Member k of a :class:`~finpod.agents.population.Population` reproduces its single agent
only if it draws the same numbers in the same order from the same generator. Each draw
below is therefore one torch call per member (``torch.randn``/``randperm`` take one
generator per call): the only loop over members in the hot path. A member whose single
agent would not draw (``active[k]`` False) draws nothing.

With ``rng="shared"`` every draw is one call for all members from one generator
(:func:`shared_generator`): no loop, but members no longer reproduce their single agents.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
import torch


def shared_generator(seeds: Sequence[int], device: torch.device) -> torch.Generator:
    """The one generator of a ``rng="shared"`` population, seeded from all its ``seeds``."""
    generator = torch.Generator(device=device)
    entropy = np.random.SeedSequence([s & 0xFFFFFFFF for s in seeds])
    generator.manual_seed(int(entropy.generate_state(1, np.uint64)[0] >> 1))
    return generator


class MemberDraws:
    """Random draws ``(K, …)`` over the members of a population (mixed into it).

    Attributes (set by the population):
        size: number of members K.
        device: where the draws are made.
        generators: member k's random generator at ``generators[k]``.
        shared_rng: the one generator of every draw with ``rng="shared"``, else None.
    """

    size: int
    device: torch.device
    generators: list[torch.Generator]
    shared_rng: torch.Generator | None

    def _draw(
        self,
        fn: Callable[[torch.Generator], torch.Tensor],
        active: Sequence[bool] | None,
        fill: Callable[[], torch.Tensor],
    ) -> torch.Tensor:
        """``fn(generator_k)`` stacked over members ``(K, …)``; members with ``active[k]``
        False draw nothing (their single agent would not) and get ``fill()``."""
        if active is None:
            return torch.stack([fn(g) for g in self.generators])
        return torch.stack(
            [fn(g) if a else fill() for g, a in zip(self.generators, active, strict=True)]
        )

    def _member_draws(
        self,
        fn: Callable[..., torch.Tensor],
        shape: tuple[int, ...],
        active: Sequence[bool] | None,
        dtype: torch.dtype = torch.float32,
    ) -> torch.Tensor:
        """``fn(size, device=…, generator=…)`` (``torch.randn``, ``torch.rand`` …) drawn
        ``(K, *shape)``: member k's rows from member k's stream (zeros ``dtype`` where
        ``active[k]`` is False), or all at once from the shared generator."""
        d = self.device
        if self.shared_rng is not None:
            return fn((self.size, *shape), device=d, generator=self.shared_rng)
        return self._draw(
            lambda g: fn(shape, device=d, generator=g),
            active,
            lambda: torch.zeros(shape, dtype=dtype, device=d),
        )

    def _randn(self, shape: tuple[int, ...], active: Sequence[bool] | None = None) -> torch.Tensor:
        """Standard normal ``(K, *shape)``, member k's rows from member k's stream."""
        return self._member_draws(torch.randn, shape, active)

    def _rand(self, shape: tuple[int, ...], active: Sequence[bool] | None = None) -> torch.Tensor:
        """Uniform on [0, 1) ``(K, *shape)``."""
        return self._member_draws(torch.rand, shape, active)

    def _randint(
        self, high: int, shape: tuple[int, ...], active: Sequence[bool] | None = None
    ) -> torch.Tensor:
        """Integers uniform on ``[0, high)`` ``(K, *shape)`` int64."""
        return self._member_draws(partial(torch.randint, 0, high), shape, active, torch.int64)

    def _randperm(self, n: int, active: Sequence[bool] | None = None) -> torch.Tensor:
        """A random permutation of ``0 … n−1`` per member, ``(K, n)`` int64."""
        d = self.device
        if self.shared_rng is not None:
            keys = torch.rand((self.size, n), device=d, generator=self.shared_rng)
            return keys.argsort(dim=1)
        return self._draw(
            lambda g: torch.randperm(n, device=d, generator=g),
            active,
            lambda: torch.arange(n, device=d),
        )
