"""Batched populations: member k is the single agent with k's seed, hparams and data."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from finpod.agents import load_checkpoint, make_agent, save_checkpoint
from finpod.agents.a2c import A2CParams
from finpod.agents.ppo import PPOParams
from finpod.agents.registry import make_population
from finpod.agents.sac import SACParams
from finpod.agents.td3 import DDPGParams, TD3Params
from finpod.env import EnvConfig, VecTradingEnv
from finpod.errors import FinpodError

K, W = 3, 4
SEEDS = [11, 12, 13]


def _ppo(i: int) -> PPOParams:
    return PPOParams(
        horizon=8,
        minibatch_size=8,
        update_epochs=2,
        actor_hidden=(16, 16),
        critic_hidden=(16,),
        learning_rate=1e-3 * (i + 1),
        gamma=0.9 + 0.03 * i,
        gae_lambda=0.9 + 0.02 * i,
        clip_coef=0.1 + 0.1 * i,
        ent_coef=0.01 * i,
        vf_coef=0.4 + 0.1 * i,
        max_grad_norm=0.3 + 0.2 * i,
    )


def _a2c(i: int) -> A2CParams:
    return A2CParams(
        horizon=8,
        actor_hidden=(16,),
        critic_hidden=(16,),
        learning_rate=1e-3 * (i + 1),
        gamma=0.9 + 0.03 * i,
        ent_coef=0.01 * i,
        max_grad_norm=0.3 + 0.2 * i,
    )


def _sac(i: int) -> SACParams:
    return SACParams(
        batch_size=16,
        buffer_size=256,
        learning_starts=24,
        actor_hidden=(16, 16),
        critic_hidden=(16,),
        actor_lr=3e-4 * (i + 1),
        critic_lr=1e-3 * (i + 1),
        alpha_lr=1e-3 / (i + 1),
        gamma=0.9 + 0.03 * i,
        tau=0.01 * (i + 1),
    )


def _ppo_kl(i: int) -> PPOParams:
    """Random minibatches and a KL stop that members reach at different epochs."""
    return dataclasses.replace(
        _ppo(i),
        update_epochs=4,
        minibatches_per_epoch=3,
        target_kl=1e-3,
        learning_rate=1e-4 * 10**i,
    )


def _td3(i: int) -> TD3Params:
    return TD3Params(
        batch_size=16,
        buffer_size=256,
        learning_starts=24,
        actor_hidden=(16,),
        critic_hidden=(16,),
        actor_lr=3e-4 * (i + 1),
        critic_lr=1e-3 * (i + 1),
        gamma=0.9 + 0.03 * i,
        tau=0.01 * (i + 1),
        exploration_noise=0.1 + 0.1 * i,
        policy_noise=0.1 + 0.1 * i,
        noise_clip=0.2 + 0.1 * i,
    )


def _ddpg(i: int) -> DDPGParams:
    return DDPGParams(
        batch_size=16,
        buffer_size=256,
        learning_starts=24,
        actor_hidden=(16,),
        critic_hidden=(16,),
        actor_lr=3e-4 * (i + 1),
        critic_lr=1e-3 * (i + 1),
        gamma=0.9 + 0.03 * i,
        tau=0.01 * (i + 1),
        exploration_noise=0.1 + 0.1 * i,
    )


#: Features per ticker of the ``market`` fixture (synthetic: 10 indicators + alpha_signal).
TICKER_FEATURES = 11


def _ppo_xs(i: int) -> PPOParams:
    """The cross-sectional network family (one network per ticker, pooled context)."""
    return dataclasses.replace(_ppo(i), net="cross_sectional", ticker_features=TICKER_FEATURES)


def _a2c_xs(i: int) -> A2CParams:
    return dataclasses.replace(
        _a2c(i), net="cross_sectional", ticker_features=TICKER_FEATURES, actor_hidden=(8, 8)
    )


MAKE = {
    "ppo": _ppo,
    "ppo_kl": _ppo_kl,
    "ppo_xs": _ppo_xs,
    "a2c": _a2c,
    "a2c_xs": _a2c_xs,
    "sac": _sac,
    "td3": _td3,
    "ddpg": _ddpg,
}
ALGO = {"ppo_kl": "ppo", "ppo_xs": "ppo", "a2c_xs": "a2c"}


@pytest.fixture()
def full_env(market):
    """K·W envs with random start windows, as a population trains on."""

    def build(device: str = "cpu") -> VecTradingEnv:
        config = EnvConfig(action_mode="weights", episode_length=12)
        return VecTradingEnv(market.slice(0, 200).to(device), config, num_envs=K * W, seed=3)

    return build


class SliceView:
    """Envs ``[k·W, (k+1)·W)`` of a full ``VecTradingEnv``, seen by one single agent.

    The other envs get zero actions; envs are independent accounts, so the slice's data
    depend only on the slice's actions. ``reset`` ignores the agent's seed and resets the
    full env with its own generator, exactly as a population resets its env.
    """

    def __init__(self, full: VecTradingEnv, k: int, w: int) -> None:
        self.full, self.rows, self.num_envs = full, slice(k * w, (k + 1) * w), w
        self.obs_dim, self.action_dim, self.device = full.obs_dim, full.action_dim, full.device

    def reset(self, seed: int | None = None) -> torch.Tensor:
        return self.full.reset()[self.rows]

    def step(self, action: torch.Tensor):
        full_action = torch.zeros(self.full.num_envs, self.action_dim, device=self.device)
        full_action[self.rows] = action
        obs, reward, terminated, truncated, info = self.full.step(full_action)
        out = {} if info["final_obs"] is obs else {"final_obs": info["final_obs"][self.rows]}
        r = self.rows
        return obs[r], reward[r], terminated[r], truncated[r], out


def _population(algo: str, env: VecTradingEnv):
    hps = [MAKE[algo](i) for i in range(K)]
    return make_population(
        ALGO.get(algo, algo), hps, env.obs_dim, env.action_dim, env.device, SEEDS
    )


def _assert_state_close(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for key, w in want.items():
        g, w = got[key].cpu(), w.cpu()
        if key.startswith(("counter.", "rng.")) or key.endswith(".step"):
            assert torch.equal(g, w), key
        else:
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5, msg=key)


@pytest.mark.parametrize(
    ("algo", "k"),
    [("ppo", 1), ("ppo", 2), ("ppo_kl", 1), ("a2c", 2), ("sac", 1), ("sac", 2), ("td3", 2)]
    + [("ddpg", 1), ("ppo_xs", 1), ("a2c_xs", 2)],
)
def test_member_k_takes_the_single_agents_losses_and_updates(algo, k, full_env):
    _check_member_is_single_agent(algo, k, full_env, "cpu")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize(("algo", "k"), [("ppo_kl", 1), ("ppo_xs", 2), ("sac", 2), ("td3", 1)])
def test_member_k_is_the_single_agent_on_cuda(algo, k, full_env):
    _check_member_is_single_agent(algo, k, full_env, "cuda")


def _check_member_is_single_agent(algo: str, k: int, full_env, device: str) -> None:
    env = full_env(device)
    pop = _population(algo, env)
    hp = dataclasses.asdict(MAKE[algo](k))
    single = make_agent(ALGO.get(algo, algo), hp, env.obs_dim, env.action_dim, device, SEEDS[k])
    view = SliceView(full_env(device), k, W)
    _assert_state_close(pop.member_state_dict(k), single.state_dict())  # same init
    for steps in (48, 40):  # two calls: episodes and the rollout go on between calls
        got = pop.learn(env, steps)
        want = single.learn(view, steps)
        assert set(got) == set(want)
        for key, value in want.items():
            torch.testing.assert_close(
                got[key][k].cpu(),
                torch.tensor(value),
                rtol=1e-4,
                atol=1e-5,
                equal_nan=True,
                msg=key,
            )
        _assert_state_close(pop.member_state_dict(k), single.state_dict())
    assert single.updates > 0 and int(pop.env_steps()[k]) == single.env_steps


@pytest.mark.parametrize("algo", ["ppo", "sac", "td3"])
@pytest.mark.parametrize("perturb", ["hparams", "weights"])
def test_perturbing_member_k_changes_only_member_k(algo, perturb, full_env):
    k = 1
    base_env, other_env = full_env(), full_env()
    base, other = _population(algo, base_env), _population(algo, other_env)
    if perturb == "hparams":
        lr_field = "learning_rate" if algo == "ppo" else "critic_lr"
        other.set_member_hparams(k, {lr_field: 0.05, "gamma": 0.5})
    else:
        with torch.no_grad():
            for key in other.optim_keys[next(iter(other.optims))]:
                other.params[key][k] += 0.1
    base.learn(base_env, 64)
    other.learn(other_env, 64)
    for j in range(K):
        a, b = base.member_state_dict(j), other.member_state_dict(j)
        same = all(torch.equal(a[key], b[key]) for key in a)
        assert same == (j != k), f"member {j}"


@pytest.mark.parametrize("algo", ["ppo", "sac", "td3"])
def test_export_and_import_round_trip_through_a_checkpoint(algo, full_env, tmp_path):
    env = full_env()
    pop = _population(algo, env)
    pop.learn(env, 48)
    exported = pop.export_member(2)
    assert type(exported).__name__ == algo.upper()
    assert exported.hparams == pop.hparams[2] and exported.seed == SEEDS[2]
    path = save_checkpoint(exported, tmp_path / "member.safetensors")
    loaded = load_checkpoint(path)
    _assert_state_close(loaded.state_dict(), pop.member_state_dict(2))
    obs = env.reset()
    torch.testing.assert_close(
        loaded.act(obs[2 * W : 3 * W], deterministic=True),
        pop.act(obs, deterministic=True)[2 * W : 3 * W],
    )

    # PBT exploit: member 0 becomes a copy of member 2 (weights, Adam, counters, hparams)
    # and keeps its own random stream unless asked.
    rng_before = pop.generators[0].get_state().clone()
    pop.import_member(0, loaded)
    got, want = pop.member_state_dict(0), loaded.state_dict()
    assert torch.equal(got.pop("rng.state"), rng_before)
    want.pop("rng.state")
    _assert_state_close(got, want)
    assert pop.hparams[0] == loaded.hparams
    pop.import_member(1, loaded, copy_rng=True)
    _assert_state_close(pop.member_state_dict(1), loaded.state_dict())
    if algo != "ppo":  # member 2's replay rows travel with it on request
        rows = pop.export_member(2, include_buffer=True).export_buffer()
        assert rows["reward"].shape == (48,) and torch.equal(
            torch.from_numpy(rows["reward"]), pop.buffer["reward"][2, :48]
        )
    stats = pop.learn(env, 16)  # a population with imported members trains on
    assert all(bool(torch.isfinite(v[:2]).all()) for k, v in stats.items() if "episode" not in k)


def test_members_must_share_the_architecture(market):
    with pytest.raises(FinpodError, match="actor_hidden"):
        make_population("ppo", [PPOParams(), PPOParams(actor_hidden=(8,))], 10, 2, "cpu", [0, 1])
    pop = make_population("ppo", [PPOParams(), {"learning_rate": 1e-3}], 10, 2, "cpu", [0, 1])
    assert pop.hparams[1] == PPOParams(learning_rate=1e-3)
    assert pop.hp["learning_rate"].tolist() == [3e-4, 1e-3]
    with pytest.raises(FinpodError, match="horizon"):
        pop.set_member_hparams(0, {"horizon": 4})
    other = make_agent("ppo", {"critic_hidden": [8]}, 10, 2, "cpu", 0)
    with pytest.raises(FinpodError, match="critic_hidden"):
        pop.import_member(1, other)
    with pytest.raises(FinpodError, match="multiple"):
        pop.act(torch.zeros(3, 10))


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_members_in_different_phases_each_match_their_single_agent(algo, full_env):
    """Member 0 (imported, past its warm-up, TD3: on the other side of its policy delay)
    updates while members 1 and 2 still collect random actions: the masked steps leave
    every member exactly as its single agent."""
    env = full_env()
    pop = _population(algo, env)
    hp0, hp2 = dataclasses.asdict(MAKE[algo](0)), dataclasses.asdict(MAKE[algo](2))
    ahead = make_agent(algo, hp0, env.obs_dim, env.action_dim, "cpu", 7)
    ahead.env_steps = MAKE[algo](0).learning_starts  # as if warmed up elsewhere
    ahead.updates = 1  # TD3: its next actor step comes one update later than the others'
    pop.import_member(0, ahead, copy_rng=True)
    fresh = make_agent(algo, hp2, env.obs_dim, env.action_dim, "cpu", SEEDS[2])
    singles = {0: (ahead, SliceView(full_env(), 0, W)), 2: (fresh, SliceView(full_env(), 2, W))}
    got = pop.learn(env, 32)  # 8 vector steps: member 0 updates from the 4th, 1 and 2 from the 6th
    updates = pop.updates().tolist()
    assert updates[0] - 1 > updates[1] == updates[2] > 0
    for k, (agent, view) in singles.items():
        want = agent.learn(view, 32)
        for key, value in want.items():
            torch.testing.assert_close(
                got[key][k], torch.tensor(value), rtol=1e-4, atol=1e-5, equal_nan=True, msg=key
            )
        _assert_state_close(pop.member_state_dict(k), agent.state_dict())


@pytest.mark.parametrize("algo", ["ppo", "sac", "td3"])
def test_shared_rng_draws_once_for_all_members_and_reproduces_itself(algo, full_env):
    def run():
        env = full_env()
        hps = [MAKE[algo](i) for i in range(K)]
        pop = make_population(algo, hps, env.obs_dim, env.action_dim, "cpu", SEEDS, rng="shared")
        member_rng = [g.get_state().clone() for g in pop.generators]
        stats = pop.learn(env, 48)
        assert all(
            torch.equal(g.get_state(), s) for g, s in zip(pop.generators, member_rng, strict=True)
        )
        return stats, [pop.member_state_dict(k) for k in range(K)]

    (s1, sd1), (s2, sd2) = run(), run()
    torch.testing.assert_close(s1, s2, rtol=0, atol=0, equal_nan=True)
    assert all(torch.equal(a[key], b[key]) for a, b in zip(sd1, sd2, strict=True) for key in a)
    assert all(bool(torch.isfinite(v).all()) for key, v in s1.items() if key != "episode_return")


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_import_member_leaves_every_other_members_optimizer_state_alone(algo, full_env):
    """Importing a fresh agent (Adam step 0) into member 0 after training: member 0 takes
    the fresh agent's whole state, steps included, and members 1 and 2 keep theirs."""
    env = full_env()
    pop = _population(algo, env)
    pop.learn(env, 48)
    before = [pop.member_state_dict(k) for k in range(K)]
    steps = [v for key, v in before[1].items() if key.endswith(".step")]
    assert steps and all(float(s) > 0 for s in steps)  # the others have stepped
    fresh = make_agent(
        algo, dataclasses.asdict(MAKE[algo](0)), env.obs_dim, env.action_dim, "cpu", 99
    )
    pop.import_member(0, fresh, copy_rng=True)
    _assert_state_close(pop.member_state_dict(0), fresh.state_dict())
    for k in (1, 2):
        after = pop.member_state_dict(k)
        assert after.keys() == before[k].keys()
        for key, value in before[k].items():
            assert torch.equal(after[key], value), f"member {k}: {key}"
