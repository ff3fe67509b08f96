"""Returns of the episodes a population finishes while it learns, per member, on the
device (no host read until the statistics are returned)."""

from __future__ import annotations

import torch


class EpisodeStats:
    """Per-member episode bookkeeping (mixed into a population).

    Attributes (set by the population): ``size`` (members K), ``device``.
    """

    size: int
    device: torch.device
    _ep_ret: torch.Tensor | None

    def _episodes_begin(self, num_envs: int) -> None:
        if self._ep_ret is None or self._ep_ret.shape[0] != num_envs:
            self._ep_ret = torch.zeros(num_envs, device=self.device)
        self._ep_sum = torch.zeros(self.size, device=self.device)
        self._ep_count = torch.zeros(self.size, device=self.device)

    def _episodes_track(self, reward: torch.Tensor, done: torch.Tensor) -> None:
        """One step's ``reward (K·W,)``; ``done (K·W,) float`` closes episodes."""
        assert self._ep_ret is not None
        self._ep_ret += reward
        self._ep_sum += (self._ep_ret * done).reshape(self.size, -1).sum(1)
        self._ep_count += done.reshape(self.size, -1).sum(1)
        self._ep_ret *= 1.0 - done

    def _episodes_stats(self) -> dict[str, torch.Tensor]:
        """Mean return of each member's episodes finished in this ``learn`` (NaN if none)."""
        count = self._ep_count
        mean = torch.where(count > 0, self._ep_sum / count.clamp(min=1.0), float("nan"))
        return {"episode_return": mean, "episodes": count.clone()}
