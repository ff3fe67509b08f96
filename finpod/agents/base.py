"""A single agent: a population of one member.

Each algorithm is written once, over a member axis (:mod:`finpod.agents.population`); an
:class:`Agent` holds a population of size 1 and gives it the plain single-agent face
that training, checkpoints and backtests use:

- ``state_dict()`` is flat ``{name: Tensor}`` in a fixed key order: each network's
  parameters (``"<net>.<param>"``), each Adam optimizer's moments and step
  (``"optim.<opt>.<i>.exp_avg"``, ``…exp_avg_sq``, ``…step``), the counters
  (``"counter.env_steps"``, ``"counter.updates"``, int64) and the sampling RNG
  (``"rng.state"``, uint8). Averaging the floating tensors of several agents' state dicts
  of the same algorithm and architecture is a valid agent (model fusion).
- One ``torch.Generator`` per agent drives every random draw (exploration noise,
  minibatch order, env reset seeds), so the same seed gives the same run on CPU and a
  restored state dict continues the same random stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from finpod.agents.hparams import build_hparams, check_positive, check_unit
from finpod.agents.population import Population
from finpod.errors import FinpodError

if TYPE_CHECKING:
    from finpod.agents.offpolicy import Ring
    from finpod.env.protocol import VecEnv

__all__ = ["Agent", "OffPolicyAgent", "build_hparams", "check_positive", "check_unit"]


class Agent:
    """A single agent of an algorithm: its population of one (:attr:`population`).

    Subclasses name the algorithm's population class (``population_cls``); the
    algorithm's name, learning-rate and frozen fields come from it.

    Attributes:
        algorithm: registry name (``"ppo"``, ``"sac"``, …).
        hparams: the algorithm's hyperparameter dataclass.
        obs_dim, action_dim: sizes of the observation and action vectors.
        device: where networks, storage and the generator live.
        seed: the seed the agent was built with.
        env_steps: env transitions collected so far (summed over parallel envs).
        updates: gradient steps taken so far.
    """

    population_cls: ClassVar[type[Population]]
    algorithm: ClassVar[str] = ""
    #: Which hyperparameter sets the learning rate of which optimizer: ``{optim: field}``.
    lr_fields: ClassVar[dict[str, str]] = {}
    #: Hyperparameters fixed at construction (network shapes, storage sizes).
    frozen_fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        pop = cls.__dict__.get("population_cls")
        if pop is not None:
            cls.algorithm = pop.algorithm
            cls.lr_fields = pop.lr_fields
            cls.frozen_fields = pop.frozen_fields
            pop.agent_cls = cls

    def __init__(
        self, hparams: Any, obs_dim: int, action_dim: int, device: torch.device, seed: int
    ) -> None:
        self.seed = int(seed)
        self.population = self.population_cls(
            [hparams], obs_dim, action_dim, torch.device(device), [self.seed]
        )

    # ----- what the population of one holds ---------------------------------------------
    @property
    def hparams(self) -> Any:
        return self.population.hparams[0]

    @property
    def obs_dim(self) -> int:
        return self.population.obs_dim

    @property
    def action_dim(self) -> int:
        return self.population.action_dim

    @property
    def device(self) -> torch.device:
        return self.population.device

    @property
    def generator(self) -> torch.Generator:
        return self.population.generators[0]

    @property
    def env_steps(self) -> int:
        return int(self.population._env_steps[0])

    @env_steps.setter
    def env_steps(self, value: int) -> None:
        self.population._env_steps[0] = int(value)

    @property
    def updates(self) -> int:
        return int(self.population._updates[0])

    @updates.setter
    def updates(self, value: int) -> None:
        self.population._updates[0] = int(value)

    def weights(self) -> dict[str, torch.Tensor]:
        """The network parameters ``{"<net>.<param>": tensor}`` (views, no member axis)."""
        return {key: self.population.params[key][0] for key in self.population.net_keys}

    # ----- acting and learning ----------------------------------------------------------
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """Actions ``(B, action_dim)`` in ``[-1, 1]`` for observations ``(B, obs_dim)``."""
        return self.population.act(obs, deterministic)

    def learn(self, env: VecEnv, num_steps: int) -> dict[str, float]:
        """Collect at least ``num_steps`` env transitions from ``env`` and update on them.

        Returns the latest losses and statistics as floats (one host read per call).
        """
        stats = self.population.learn(env, num_steps)
        firsts = [torch.as_tensor(v, device=self.device).reshape(-1)[0] for v in stats.values()]
        values = torch.stack([v.float() for v in firsts]).tolist() if firsts else []
        return dict(zip(stats, values, strict=True))

    def reset_rollout(self) -> None:
        """Forget the current env observation: the next ``learn`` resets the env.

        The reset seed is drawn from the agent's generator, so a run restored from a
        state dict and one that was never interrupted reset the env identically.
        """
        self.population.reset_rollout()

    # ----- hyperparameters --------------------------------------------------------------
    def set_hparams(self, updates: dict[str, Any]) -> None:
        """Change hyperparameters in place; learning-rate fields also update the optimizers.

        Fields that fix network or storage shapes cannot change (FinpodError).
        """
        frozen = sorted(set(updates) & set(self.frozen_fields))
        if frozen:
            raise FinpodError(
                f"hyperparameter {frozen[0]!r} of {self.algorithm} cannot change after creation",
                "only optimisation and loss settings can be changed on a live agent",
            )
        self.population.set_member_hparams(0, dict(updates))

    # ----- state ------------------------------------------------------------------------
    def state_dict(self) -> dict[str, torch.Tensor]:
        """Flat ``{name: tensor}``: networks, optimizer moments, counters, RNG (see module doc)."""
        return self.population.member_state_dict(0)

    def load_state_dict(self, sd: dict[str, torch.Tensor]) -> None:
        """Restore everything :meth:`state_dict` returned (keys and shapes must match)."""
        expected = self.state_dict()
        missing = [k for k in expected if k not in sd]
        extra = [k for k in sd if k not in expected]
        if missing or extra:
            what = f"missing {missing[0]!r}" if missing else f"unexpected {extra[0]!r}"
            raise FinpodError(
                f"state dict does not fit this {self.algorithm} agent: {what}",
                "load it into an agent with the same algorithm and network sizes",
            )
        for k, v in expected.items():
            if tuple(sd[k].shape) != tuple(v.shape):
                raise FinpodError(
                    f"state dict tensor {k!r} has shape {tuple(sd[k].shape)}, expected {tuple(v.shape)}",
                    "load it into an agent with the same network sizes",
                )
        self.population.load_member_state(0, sd, copy_rng=True)
        self.reset_rollout()


class OffPolicyAgent(Agent):
    """A single replay-buffer agent (SAC, TD3, DDPG).

    The replay buffer is working memory, not part of :meth:`state_dict`: a new agent
    restored from a checkpoint refills it before updating again (``batch_size``
    transitions). Loading a state dict into an agent that already has a buffer keeps the
    buffer (learner fusion loads the fused weights and optimizer moments every epoch; the
    transitions each learner collected stay valid for an off-policy learner). A buffer
    moves between agents (a parent and its child pod) with :meth:`export_buffer` and
    :meth:`import_buffer`.
    """

    @property
    def update_autocast(self) -> torch.dtype | None:
        """Precision of the matrix products inside gradient updates: ``None`` (float32,
        the default) or ``torch.bfloat16`` (see ``OffPolicyPopulation.update_autocast``)."""
        return self.population.update_autocast

    @update_autocast.setter
    def update_autocast(self, dtype: torch.dtype | None) -> None:
        self.population.update_autocast = dtype

    @property
    def buffer(self) -> Ring | None:
        """The replay ring (views; None before the first ``learn``)."""
        return self.population.member_ring(0)

    def buffer_nbytes(self) -> int:
        """Bytes the replay buffer occupies at capacity, allocated or not (what a pod
        declares to Ray as memory)."""
        return self.population.buffer_nbytes()

    def export_buffer(self) -> dict[str, np.ndarray]:
        """The filled part of the replay buffer, oldest transition first, as host arrays
        (see ``OffPolicyPopulation.export_buffer``)."""
        return self.population.export_buffer(0)

    def import_buffer(self, data: dict[str, np.ndarray]) -> None:
        """Replace the replay buffer's contents with ``data`` from :meth:`export_buffer`."""
        self.population.import_buffer(data)

    def clear_buffer(self) -> None:
        """Drop the replay buffer (the next ``learn`` starts an empty one)."""
        self.population.clear_buffer()

    def buffer_state(self) -> dict[str, torch.Tensor] | None:
        """The ring as stored (rows in slot order, write position, capacity), or None."""
        return self.population.ring_state()

    def load_buffer_state(self, state: dict[str, torch.Tensor]) -> None:
        """Restore :meth:`buffer_state` exactly (training continues as if uninterrupted)."""
        self.population.load_ring_state(state)
