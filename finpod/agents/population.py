"""Populations: K agents of one algorithm and one architecture trained as one batched model.

::

    pop = make_population("ppo", [PPOParams(learning_rate=lr) for lr in lrs], obs_dim,
                          action_dim, device, seeds=range(K))
    env = VecTradingEnv(market, config, num_envs=K * W, seed=0)   # envs [kW, (k+1)W) = member k
    stats = pop.learn(env, num_steps=100_000)        # env steps per member; stats[...] is (K,)
    agent = pop.export_member(3)                     # a plain PPO agent: save_checkpoint(agent, …)
    pop.import_member(5, agent); pop.set_member_hparams(5, {"learning_rate": 1e-4})  # PBT

Member ``k`` is, step for step, the single agent ``make_agent(algorithm, hparams[k], …,
seed=seeds[k])`` trained on the env slice ``[k·W, (k+1)·W)``:

- every parameter of the single agent is one tensor with a leading member axis ``(K, …)``
  (:mod:`finpod.agents.batched`); a layer is one batched matmul over all members;
- the hyperparameters that may differ between members (learning rates, γ, λ, clip, loss
  weights, τ …: the class attribute ``member_fields``) are ``(K,)`` tensors; all other
  fields (network widths, horizon, epochs, batch and buffer sizes …) must be equal for
  all members (:class:`FinpodError` otherwise);
- one :class:`~finpod.agents.batched.BatchedAdam` per optimizer of the single agent (same
  eps, per-member learning rate and step count) and per-member global grad-norm clipping;
- one ``torch.Generator`` per member, seeded as the single agent's, consumed in the same
  order. Drawing those random numbers is the only loop over members in the hot path
  (``torch.randn``/``randperm`` take one generator per call, see
  :mod:`finpod.agents.population_rng`); all compute is batched.
  ``rng="shared"`` draws for all members at once from one generator instead (no loop;
  members then no longer reproduce their single agents, see :func:`make_population`).

The env belongs to the caller: the population resets it with ``env.reset()`` (no seed),
so the env's start windows come from the generator it was built with. Each member still
draws (and discards) the reset seed its single agent would draw, so its random stream
stays aligned with the single agent's. A single agent with seed ``s`` therefore sees
different start windows than member ``k`` with seed ``s`` unless it runs on the same env
slice (the equivalence tests do exactly that).

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

from finpod.agents.base import Agent, build_hparams
from finpod.agents.batched import BatchedAdam
from finpod.agents.population_rng import MemberDraws, shared_generator
from finpod.agents.registry import ALGORITHMS, make_agent
from finpod.errors import FinpodError

if TYPE_CHECKING:
    from finpod.env.protocol import VecEnv


class Population(MemberDraws):
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
    #: Hyperparameters held per member as ``(K,)`` tensors (changeable by PBT explore).
    member_fields: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        hparams: Sequence[Any],
        obs_dim: int,
        action_dim: int,
        device: torch.device,
        seeds: Sequence[int],
        rng: str = "member",
    ) -> None:
        params_cls, self.agent_cls = ALGORITHMS[self.algorithm]
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
            if not isinstance(hp, params_cls):
                raise FinpodError(
                    f"{self.algorithm} population members need {params_cls.__name__}, "
                    f"got {type(hp).__name__}",
                    f"build each member's hyperparameters as {params_cls.__name__}",
                )
        self.params_cls = params_cls
        self.size = len(hparams)
        self.obs_dim, self.action_dim = int(obs_dim), int(action_dim)
        self.device = torch.device(device)
        self.seeds = seeds
        self.hparams: list[Any] = [hparams[0]]
        for hp in hparams[1:]:
            self._check_shared(hp)
            self.hparams.append(hp)
        # Build each member as the single agent would be (same init, same generator).
        agents = [
            make_agent(
                self.algorithm, dataclasses.asdict(hp), obs_dim, action_dim, self.device, seed
            )
            for hp, seed in zip(hparams, seeds, strict=True)
        ]
        template = agents[0]
        sds = [a.state_dict() for a in agents]
        self.net_keys = [f"{n}.{k}" for n, net in template.nets.items() for k in net.state_dict()]
        name_of = {
            id(p): f"{n}.{k}" for n, net in template.nets.items() for k, p in net.named_parameters()
        }
        self.optim_keys = {
            name: [name_of[id(p)] for g in opt.param_groups for p in g["params"]]
            for name, opt in template.optims.items()
        }
        trained = {key for keys in self.optim_keys.values() for key in keys}
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
        self.optims: dict[str, BatchedAdam] = {}
        for name, opt in template.optims.items():
            eps = float(opt.param_groups[0]["eps"])
            lr = self.hp[self.agent_cls.lr_fields[name]]
            self.optims[name] = BatchedAdam(
                [self.params[k] for k in self.optim_keys[name]], lr, eps
            )
        self.generators = [a.generator for a in agents]
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

    # ----- hyperparameters --------------------------------------------------------------
    def _check_shared(self, hp: Any) -> None:
        """FinpodError if ``hp`` differs from member 0 in a field all members share."""
        ref = self.hparams[0]
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

        Only :attr:`member_fields` may change (PBT explore); anything else raises
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
        self._check_shared(hparams)
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

    def export_member(self, k: int) -> Agent:
        """A plain single agent (``PPO``, ``SAC`` …) holding member ``k``: weights, Adam
        moments and steps, counters, random-generator state and hyperparameters. It saves
        with :func:`~finpod.agents.checkpoint.save_checkpoint` like any agent."""
        k = self._member(k)
        agent = make_agent(
            self.algorithm,
            dataclasses.asdict(self.hparams[k]),
            self.obs_dim,
            self.action_dim,
            self.device,
            self.seeds[k],
        )
        agent.load_state_dict(self.member_state_dict(k))
        return agent

    def import_member(self, k: int, agent: Agent, *, copy_rng: bool = False) -> None:
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
        self._check_shared(agent.hparams)
        sd = agent.state_dict()
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
        self.set_member_hparams(k, agent.hparams)

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
            if self.shared_rng is None:
                for g in self.generators:
                    torch.randint(0, 2**31 - 1, (1,), generator=g, device=self.device)
            self._env = env
            self._obs = env.reset().to(self.device, torch.float32)
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
