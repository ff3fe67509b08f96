"""Populations: K agents of one algorithm and one architecture trained as one batched model.

::

    pop = make_population("ppo", [PPOParams(learning_rate=lr) for lr in lrs], obs_dim,
                          action_dim, device, seeds=range(K))
    env = VecTradingEnv(market, config, num_envs=K * W, seed=0)   # envs [kW, (k+1)W) = member k
    stats = pop.learn(env, num_steps=100_000)        # env steps per member; stats[...] is (K,)
    agent = pop.export_member(3)                     # a plain PPO agent: save_checkpoint(agent, …)
    pop.import_member(5, agent); pop.set_member_hparams(5, {"learning_rate": 1e-4})  # PBT

Every algorithm is written once, here, over the member axis; a single agent
(:class:`~finpod.agents.base.Agent`, what ``make_agent`` returns) is a population of one.
Member ``k`` is therefore, step for step, the single agent ``make_agent(algorithm,
hparams[k], …, seed=seeds[k])`` trained on the env slice ``[k·W, (k+1)·W)``:

- every parameter is one tensor with a leading member axis ``(K, …)``
  (:mod:`finpod.agents.batched`); a layer is one batched matmul over all members. The
  algorithm's ``nn.Module`` networks (:mod:`finpod.agents.nets`) only name and initialise
  the parameters (:meth:`Population.build_nets`, member k's drawn with ``seeds[k]``);
- the hyperparameters that may differ between members (learning rates, γ, λ, clip, loss
  weights, τ …: the class attribute ``member_fields``) are ``(K,)`` tensors; all other
  fields (network widths, horizon, epochs, batch and buffer sizes …) must be equal for
  all members (:class:`FinpodError` otherwise);
- one :class:`~finpod.agents.batched.BatchedAdam` per optimizer (per-member learning rate
  and step count) and per-member global grad-norm clipping;
- one ``torch.Generator`` per member, seeded with its seed. Drawing those random numbers
  is the only loop over members in the hot path (``torch.randn``/``randperm`` take one
  generator per call, see :mod:`finpod.agents.population_rng`); all compute is batched.
  ``rng="shared"`` draws for all members at once from one generator instead (no loop;
  members then no longer reproduce their single agents, see :func:`make_population`).

A population of several members shares the caller's env: it resets it with
``env.reset()`` (no seed), so the start windows come from the env's own generator; each
member still draws (and discards) a reset seed, so its random stream stays aligned with
its single agent's. A population of one (a single agent) resets the env with the seed it
draws, so the same agent seed gives the same start windows.

Counters: ``env_steps()[k]`` is what member k's weights learned from (carried over by
:meth:`Population.import_member`, like a checkpoint's counter); :attr:`Population.collected_steps`
counts every env step this population collected once (for throughput).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from torch import nn

from finpod.agents.batched import BatchedAdam
from finpod.agents.episodes import EpisodeStats
from finpod.agents.hparams import build_hparams
from finpod.agents.member_state import MemberState
from finpod.agents.population_rng import MemberDraws, shared_generator
from finpod.errors import FinpodError

if TYPE_CHECKING:
    from finpod.env.protocol import VecEnv


class Population(MemberDraws, EpisodeStats, MemberState):
    """Base of the batched populations; subclasses implement ``act`` and ``learn``.

    Attributes:
        algorithm: registry name (``"ppo"``, ``"a2c"``, ``"sac"``, ``"td3"``, ``"ddpg"``).
        size: number of members K.
        hparams: member k's hyperparameter dataclass at ``hparams[k]``.
        params: ``{state-dict key: (K, …) tensor}`` of every network parameter, named as
            in the single agent's :meth:`~finpod.agents.base.Agent.state_dict`.
        hp: ``{field: (K,) float64 tensor}`` of the per-member hyperparameters.
        optims: ``{name: BatchedAdam}``, the single agent's optimizers, same order.
        generators: member k's random generator at ``generators[k]``.
        seeds: member k's seed at ``seeds[k]``.
        collected_steps: env steps collected by all members together (counted once).
    """

    algorithm: ClassVar[str] = ""
    #: The algorithm's hyperparameter dataclass.
    params_cls: ClassVar[type]
    #: Hyperparameters held per member as ``(K,)`` tensors (changeable by PBT explore).
    member_fields: ClassVar[tuple[str, ...]] = ()
    #: Which hyperparameter sets the learning rate of which optimizer: ``{optim: field}``.
    lr_fields: ClassVar[dict[str, str]] = {}
    #: Hyperparameters fixed at construction (network shapes, storage sizes).
    frozen_fields: ClassVar[tuple[str, ...]] = ()
    #: The single-agent class of the algorithm (set when that class is defined).
    agent_cls: ClassVar[type]

    def __init__(
        self,
        hparams: Sequence[Any],
        obs_dim: int,
        action_dim: int,
        device: torch.device,
        seeds: Sequence[int],
        rng: str = "member",
    ) -> None:
        params_cls = self.params_cls
        hparams = list(hparams)
        seeds = [int(s) for s in seeds]
        if not hparams:
            raise FinpodError("a population needs at least one member", "pass K ≥ 1 hparams")
        if len(seeds) != len(hparams):
            raise FinpodError(
                f"{len(hparams)} members but {len(seeds)} seeds", "pass one seed per member"
            )
        hparams = [
            build_hparams(params_cls, hp, where=f"{self.algorithm} hparams")
            if isinstance(hp, dict)
            else hp
            for hp in hparams
        ]
        for hp in hparams:
            if type(hp) is not params_cls:
                raise FinpodError(
                    f"{self.algorithm} population members need {params_cls.__name__}, "
                    f"got {type(hp).__name__}",
                    f"build each member's hyperparameters as {params_cls.__name__}",
                )
        self.size = len(hparams)
        self.obs_dim, self.action_dim = int(obs_dim), int(action_dim)
        self.device = torch.device(device)
        self.seeds = seeds
        self.hparams: list[Any] = [hparams[0]]
        for hp in hparams[1:]:
            self._check_shared(hp)
            self.hparams.append(hp)
        # Member k's networks are drawn from the global RNG seeded with seeds[k] (the
        # same seed gives the same initial weights, alone or in any population).
        members = []
        for hp, seed in zip(hparams, seeds, strict=True):
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                members.append(self.build_nets(hp, self.obs_dim, self.action_dim))
        template = members[0]
        self.net_keys = [f"{n}.{k}" for n, net in template.items() for k in net.state_dict()]
        groups = self.optim_groups(hparams[0])
        self.optim_keys = {
            name: [f"{n}.{k}" for n in nets for k, _ in template[n].named_parameters()]
            for name, (nets, _eps) in groups.items()
        }
        trained = {key for keys in self.optim_keys.values() for key in keys}
        sds = [
            {f"{n}.{k}": v for n, net in nets.items() for k, v in net.state_dict().items()}
            for nets in members
        ]
        self.params: dict[str, torch.Tensor] = {}
        for key in self.net_keys:
            stacked = torch.stack([sd[key] for sd in sds]).to(self.device).contiguous()
            self.params[key] = stacked.requires_grad_(key in trained)
        self.hp: dict[str, torch.Tensor] = {
            f: torch.tensor(
                [float(getattr(h, f)) for h in self.hparams],
                dtype=torch.float64,
                device=self.device,
            )
            for f in self.member_fields
        }
        self.optims: dict[str, BatchedAdam] = {
            name: BatchedAdam(
                [self.params[k] for k in self.optim_keys[name]],
                self.hp[self.lr_fields[name]],
                eps,
            )
            for name, (_nets, eps) in groups.items()
        }
        self.generators = []
        for seed in seeds:
            generator = torch.Generator(device=self.device)
            generator.manual_seed(seed)
            self.generators.append(generator)
        if rng not in ("member", "shared"):
            raise FinpodError(f"unknown rng mode {rng!r}", 'use "member" or "shared"')
        #: With ``rng="shared"``: the one generator every draw of the hot path uses.
        self.shared_rng: torch.Generator | None = None
        if rng == "shared":
            self.shared_rng = shared_generator(seeds, self.device)
        self._env_steps = np.zeros(self.size, dtype=np.int64)
        self._updates = np.zeros(self.size, dtype=np.int64)
        self.collected_steps = 0
        self._env: VecEnv | None = None
        self._obs: torch.Tensor | None = None
        self._ep_ret: torch.Tensor | None = None
        self._masks: dict[tuple[bool, ...], torch.Tensor] = {}

    # ----- networks (per algorithm) -----------------------------------------------------
    @classmethod
    def build_nets(cls, hp: Any, obs_dim: int, action_dim: int) -> dict[str, nn.Module]:
        """One member's networks ``{name: module}`` in state-dict order, freshly
        initialised from the global RNG. They name and initialise the parameters; the
        population computes with the stacked tensors, not with the modules."""
        raise NotImplementedError

    @classmethod
    def optim_groups(cls, hp: Any) -> dict[str, tuple[tuple[str, ...], float]]:
        """``{optimizer: (networks it trains, Adam eps)}``; its learning rate is the
        field :attr:`lr_fields` names."""
        raise NotImplementedError

    # ----- hyperparameters --------------------------------------------------------------
    def _check_shared(self, hp: Any, k: int | None = None) -> None:
        """FinpodError if ``hp`` differs from the other members (all but ``k``) in a field
        all members share. A population of one shares with nobody."""
        others = [h for j, h in enumerate(self.hparams) if j != k]
        if not others:
            return
        ref = others[0]
        for f in dataclasses.fields(ref):
            if f.name in self.member_fields:
                continue
            if getattr(hp, f.name) != getattr(ref, f.name):
                raise FinpodError(
                    f"{self.algorithm} population members must share {f.name!r} "
                    f"({getattr(ref, f.name)!r} vs {getattr(hp, f.name)!r})",
                    f"only {', '.join(self.member_fields)} may differ between members; "
                    "put other settings in a separate population",
                )

    def set_member_hparams(self, k: int, hparams: Any) -> None:
        """Give member ``k`` new hyperparameters (a dataclass, or a dict of changed fields).

        Only :attr:`member_fields` may differ between members (PBT explore); a field that
        fixes a shape (:attr:`frozen_fields`) never changes. Anything else raises
        :class:`FinpodError`. Takes effect at the next gradient step.
        """
        k = self._member(k)
        if isinstance(hparams, dict):
            merged = {**dataclasses.asdict(self.hparams[k]), **hparams}
            hparams = build_hparams(self.params_cls, merged, where=f"{self.algorithm} hparams")
        if not isinstance(hparams, self.params_cls):
            raise FinpodError(
                f"member hyperparameters must be {self.params_cls.__name__} or a dict",
                "pass the algorithm's params dataclass",
            )
        frozen = [
            f for f in self.frozen_fields if getattr(hparams, f) != getattr(self.hparams[k], f)
        ]
        if frozen:
            raise FinpodError(
                f"hyperparameter {frozen[0]!r} of {self.algorithm} cannot change after creation",
                "only optimisation and loss settings can be changed on a live agent",
            )
        self._check_shared(hparams, k)
        self.hparams[k] = hparams
        with torch.no_grad():
            for f in self.member_fields:
                self.hp[f][k] = float(getattr(hparams, f))

    def _hp32(self, name: str) -> torch.Tensor:
        """Per-member hyperparameter ``(K,)`` float32."""
        return self.hp[name].float()

    # ----- members in and out -----------------------------------------------------------
    def _member(self, k: int) -> int:
        if not 0 <= int(k) < self.size:
            raise FinpodError(
                f"member {k} does not exist in a population of {self.size}",
                f"use 0 … {self.size - 1}",
            )
        return int(k)

    # ----- counters ---------------------------------------------------------------------
    def env_steps(self) -> torch.Tensor:
        """Env steps each member's weights have learned from, ``(K,)`` int64."""
        return torch.from_numpy(self._env_steps.copy())

    def updates(self) -> torch.Tensor:
        """Gradient steps each member has taken, ``(K,)`` int64."""
        return torch.from_numpy(self._updates.copy())

    # ----- acting and learning (per algorithm) -------------------------------------------
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """Actions ``(K·W, action_dim)`` in ``[-1, 1]``; rows ``[kW, (k+1)W)`` of ``obs
        (K·W, obs_dim)`` are member k's."""
        raise NotImplementedError

    def learn(self, env: VecEnv, num_steps: int) -> dict[str, torch.Tensor]:
        """Collect at least ``num_steps`` env steps *per member* from ``env`` (``num_envs =
        K·W``; envs ``[kW, (k+1)W)`` are member k's) and update on them.

        Returns the single agent's statistics, each a ``(K,)`` tensor on the device.
        """
        raise NotImplementedError

    # ----- shared helpers ---------------------------------------------------------------
    def reset_rollout(self) -> None:
        """Forget the env observation: the next ``learn`` resets the env."""
        self._env = None
        self._obs = None
        self._ep_ret = None

    def _envs_per_member(self, env: VecEnv) -> int:
        if env.num_envs % self.size != 0:
            raise FinpodError(
                f"the env has {env.num_envs} envs, not a multiple of the {self.size} members",
                "build the env with num_envs = members × envs per member",
            )
        if env.obs_dim != self.obs_dim or env.action_dim != self.action_dim:
            raise FinpodError(
                f"env obs/action sizes {env.obs_dim}/{env.action_dim} do not fit the "
                f"population's {self.obs_dim}/{self.action_dim}",
                "build the population for this env's universe and features",
            )
        return env.num_envs // self.size

    def _batch(self, obs: torch.Tensor) -> torch.Tensor:
        """``(K·W, D)`` → ``(K, W, D)`` float32 on the device (FinpodError if not K·W rows)."""
        if obs.shape[0] % self.size != 0:
            raise FinpodError(
                f"{obs.shape[0]} observation rows are not a multiple of the {self.size} members",
                "pass members × envs per member rows, member-major",
            )
        return obs.to(self.device, torch.float32).reshape(self.size, -1, obs.shape[-1])

    def _current_obs(self, env: VecEnv) -> torch.Tensor:
        if self._obs is None or env is not self._env:
            # Each member draws the reset seed its single agent would draw (keeps the
            # streams aligned); the env's own generator picks the start windows.
            seed = None
            if self.shared_rng is None:
                for g in self.generators:
                    seed = torch.randint(0, 2**31 - 1, (1,), generator=g, device=self.device)
            if self.size == 1 and seed is not None:
                seed = int(seed)  # one host read, once per env reset
            self._env = env
            obs = env.reset(seed=seed) if self.size == 1 else env.reset()
            self._obs = obs.to(self.device, torch.float32)
        return self._obs

    def _mask(self, flags: Sequence[bool]) -> torch.Tensor:
        """``(K,)`` bool device tensor of host ``flags``, cached: copying a host list to a
        GPU waits for the device, so each distinct pattern is copied once."""
        key = tuple(bool(f) for f in flags)
        mask = self._masks.get(key)
        if mask is None:
            if len(self._masks) > 256:
                self._masks.clear()
            mask = self._masks[key] = torch.tensor(key, device=self.device)
        return mask
