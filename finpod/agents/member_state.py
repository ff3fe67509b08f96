"""A population's members in and out: member k as a single agent's flat state dict
(:mod:`finpod.agents.base`), exported as an agent or overwritten by one (PBT exploit,
checkpoints, learner fusion)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from finpod.agents.batched import BatchedAdam
from finpod.errors import FinpodError


class MemberState:
    """Mixed into :class:`~finpod.agents.population.Population`, whose attributes these
    methods read: ``params``, ``net_keys``, ``optims``, ``generators``, ``hparams``,
    ``seeds``, the counters, and ``agent_cls``."""

    algorithm: str
    size: int
    obs_dim: int
    action_dim: int
    device: torch.device
    seeds: list[int]
    hparams: list[Any]
    params: dict[str, torch.Tensor]
    net_keys: list[str]
    optims: dict[str, BatchedAdam]
    generators: list[torch.Generator]
    agent_cls: type
    _env_steps: np.ndarray
    _updates: np.ndarray

    def _member(self, k: int) -> int:
        raise NotImplementedError

    def _check_shared(self, hp: Any, k: int | None = None) -> None:
        raise NotImplementedError

    def set_member_hparams(self, k: int, hparams: Any) -> None:
        raise NotImplementedError

    def member_state_dict(self, k: int) -> dict[str, torch.Tensor]:
        """Member ``k`` as a single agent's flat state dict (see :mod:`finpod.agents.base`)."""
        k = self._member(k)
        sd: dict[str, torch.Tensor] = {}
        for key in self.net_keys:
            sd[key] = self.params[key][k].detach().clone()
        for name, opt in self.optims.items():
            for i in range(len(opt.params)):
                sd[f"optim.{name}.{i}.exp_avg"] = opt.exp_avg[i][k].clone()
                sd[f"optim.{name}.{i}.exp_avg_sq"] = opt.exp_avg_sq[i][k].clone()
                sd[f"optim.{name}.{i}.step"] = opt.steps[i][k].detach().float().cpu().clone()
        sd["counter.env_steps"] = torch.tensor(int(self._env_steps[k]), dtype=torch.int64)
        sd["counter.updates"] = torch.tensor(int(self._updates[k]), dtype=torch.int64)
        sd["rng.state"] = self.generators[k].get_state().clone()
        return sd

    def load_member_state(
        self, k: int, sd: dict[str, torch.Tensor], *, copy_rng: bool = True
    ) -> None:
        """Overwrite member ``k``'s weights, Adam moments and steps and counters (and its
        random generator with ``copy_rng``) from a single agent's state dict ``sd``."""
        k = self._member(k)
        with torch.no_grad():
            for key in self.net_keys:
                self.params[key][k].copy_(sd[key].to(self.device))
            for name, opt in self.optims.items():
                for i in range(len(opt.params)):
                    opt.exp_avg[i][k].copy_(sd[f"optim.{name}.{i}.exp_avg"].to(self.device))
                    opt.exp_avg_sq[i][k].copy_(sd[f"optim.{name}.{i}.exp_avg_sq"].to(self.device))
                    opt.steps[i][k] = float(sd[f"optim.{name}.{i}.step"])
        self._env_steps[k] = int(sd["counter.env_steps"])
        self._updates[k] = int(sd["counter.updates"])
        if copy_rng:
            self.generators[k].set_state(sd["rng.state"].to("cpu", torch.uint8).clone())

    def export_member(self, k: int) -> Any:
        """A plain single agent (``PPO``, ``SAC`` …) holding member ``k``: weights, Adam
        moments and steps, counters, random-generator state and hyperparameters. It saves
        with :func:`~finpod.agents.checkpoint.save_checkpoint` like any agent."""
        k = self._member(k)
        agent = self.agent_cls(
            dataclasses.replace(self.hparams[k]),
            self.obs_dim,
            self.action_dim,
            self.device,
            self.seeds[k],
        )
        agent.load_state_dict(self.member_state_dict(k))
        return agent

    def import_member(self, k: int, agent: Any, *, copy_rng: bool = False) -> None:
        """Overwrite member ``k`` with ``agent`` (PBT exploit, in place, nothing restarted).

        Copies the weights, Adam moments and steps, the counters and the hyperparameters.
        Member ``k`` keeps its own random generator unless ``copy_rng`` (so a copied
        parent and its child explore differently), and its slice of any replay buffer
        (transitions stay valid off-policy data). Its episodes in flight go on.
        """
        k = self._member(k)
        if agent.algorithm != self.algorithm:
            raise FinpodError(
                f"cannot import a {agent.algorithm} agent into a {self.algorithm} population",
                "import agents of the population's algorithm",
            )
        if (agent.obs_dim, agent.action_dim) != (self.obs_dim, self.action_dim):
            raise FinpodError(
                f"agent has obs/action sizes {agent.obs_dim}/{agent.action_dim}, the "
                f"population {self.obs_dim}/{self.action_dim}",
                "import agents trained on the same universe and features",
            )
        self._check_shared(agent.hparams, k)
        self.load_member_state(k, agent.state_dict(), copy_rng=copy_rng)
        self.set_member_hparams(k, agent.hparams)
