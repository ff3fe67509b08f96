"""Checkpoints restore everything exactly; corrupt or edited files are refused."""

from __future__ import annotations

import json

import pytest
import torch
from agents_small import SMALL
from safetensors import safe_open
from safetensors.torch import save_file

from finpod.agents import ALGORITHMS, load_checkpoint, make_agent, save_checkpoint
from finpod.agents.train import train
from finpod.errors import FinpodError


@pytest.mark.parametrize("algo", sorted(ALGORITHMS))
def test_checkpoint_round_trip_is_exact(algo, trading_env, tmp_path):
    agent = make_agent(algo, SMALL[algo], trading_env.obs_dim, trading_env.action_dim, "cpu", 7)
    agent.learn(trading_env, 100)
    agent.set_hparams({next(iter(agent.lr_fields.values())): 1e-4})
    path = save_checkpoint(agent, tmp_path / "a.safetensors")
    back = load_checkpoint(path)
    assert back.algorithm == algo and back.hparams == agent.hparams
    assert (back.env_steps, back.updates) == (agent.env_steps, agent.updates)
    sd, sd2 = agent.state_dict(), back.state_dict()
    assert list(sd) == list(sd2) and all(torch.equal(sd[k], sd2[k]) for k in sd)
    for name, opt in back.population.optims.items():
        assert torch.equal(opt.lr, agent.population.optims[name].lr)
    obs = trading_env.reset(seed=3)
    assert torch.equal(agent.act(obs, deterministic=False), back.act(obs, deterministic=False))


def test_flipped_byte_is_detected(trading_env, tmp_path):
    agent = make_agent("ppo", SMALL["ppo"], trading_env.obs_dim, trading_env.action_dim, "cpu", 0)
    path = save_checkpoint(agent, tmp_path / "a.safetensors")
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(FinpodError, match="checksum|corrupt"):
        load_checkpoint(path)


def test_edited_metadata_is_detected(tmp_path):
    agent = make_agent("ppo", {"actor_hidden": [8]}, 3, 1, "cpu", 0)
    path = save_checkpoint(agent, tmp_path / "a.safetensors")
    with safe_open(str(path), framework="pt") as fh:
        meta = dict(fh.metadata())
        tensors = {k: fh.get_tensor(k) for k in fh.keys()}  # noqa: SIM118
    hp = json.loads(meta["hparams"])
    hp["learning_rate"] = 10.0
    meta["hparams"] = json.dumps(hp)
    save_file(tensors, str(path), metadata=meta)
    with pytest.raises(FinpodError, match="checksum"):
        load_checkpoint(path)


def test_truncated_and_foreign_files_are_refused(tmp_path):
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x00\x01not a checkpoint")
    with pytest.raises(FinpodError, match="corrupt"):
        load_checkpoint(junk)
    foreign = tmp_path / "foreign.safetensors"
    save_file({"w": torch.zeros(2)}, str(foreign))
    with pytest.raises(FinpodError, match="not a finpod agent checkpoint"):
        load_checkpoint(foreign)
    with pytest.raises(FinpodError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.safetensors")


@pytest.mark.parametrize("algo", sorted(ALGORITHMS))
def test_resumed_run_continues_with_the_same_losses(algo, market, tmp_path):
    """Stop after 2 segments, restore from last.safetensors, continue: same as uninterrupted.

    Off-policy agents resume exactly when their replay buffer is saved too (resume_buffer).
    """
    from finpod.env import EnvConfig, VecTradingEnv

    config = EnvConfig(action_mode="weights", episode_length=30)

    def fresh_env():
        return VecTradingEnv(market.slice(0, 200), config, num_envs=4, seed=0)

    def new_agent(env):
        return make_agent(algo, SMALL[algo], env.obs_dim, env.action_dim, "cpu", 11)

    env = fresh_env()
    full = train(new_agent(env), env, total_steps=4 * 64, eval_every=64, progress=False)

    env = fresh_env()
    first = train(
        new_agent(env),
        env,
        total_steps=2 * 64,
        eval_every=64,
        progress=False,
        run_dir=tmp_path,
        resume_buffer=True,
    )
    restored = load_checkpoint(first.last_checkpoint)
    env = fresh_env()  # a new process would build a new env too
    rest = train(restored, env, total_steps=4 * 64, eval_every=64, progress=False)

    resumed = first.segments + rest.segments
    assert len(resumed) == len(full.segments) == 4
    for a, b in zip(full.segments, resumed, strict=True):
        assert a.keys() == b.keys()
        for k in a:
            assert a[k] == b[k] or (a[k] != a[k] and b[k] != b[k]), (k, a[k], b[k])
