"""The env settings travel the tournament as an ``EnvConfig``: from the strategy to the
orchestrator's ``Setup``, to every pod actor and, with a pod's searched controls set, to
its training and scoring; the plain-dict form is only what run.json, leaderboard.json and
checkpoints hold, and reading it back gives an equal ``EnvConfig``."""

from __future__ import annotations

import json
from types import SimpleNamespace

from finpod.env import EnvConfig
from finpod.runs.leaderboard import Entry
from finpod.strategy import load_strategy
from finpod.tournament.generator import PodSpec
from finpod.tournament.search import parse_search_env, pod_env_config
from finpod.tournament.updater import Summary

from .conftest import write_strategy

SEARCH_ENV = """
[search.env]
no_trade_band = { low = 0.01, high = 0.05 }
decision_interval = [3, 5]
"""


def _strategy(tmp_path):
    path = write_strategy(tmp_path / "s.toml", extra="")
    text = path.read_text(encoding="utf-8") + SEARCH_ENV
    path.write_text(text.replace("episode_length = 40", "episode_length = 40\ncost_rate = 0.001"))
    return path


class _FakeActorClass:
    """Stands in for ``ray.remote(PodWorker)``: records the arguments of each actor."""

    def __init__(self) -> None:
        self.started: list[tuple] = []

    def options(self, **_: object) -> _FakeActorClass:
        return self

    def remote(self, *args: object) -> SimpleNamespace:
        self.started.append(args)
        return SimpleNamespace(ready=SimpleNamespace(remote=lambda: "ready-ref"))


def test_the_setup_and_every_pod_actor_get_the_strategys_env_config(
    tmp_path, tiny_dataset, monkeypatch
):
    import finpod.tournament.launch as run_module
    from finpod.tournament.actor_pool import ActorPool

    seen = {}

    class Capture:
        def __init__(self, setup, board, run, **_):
            seen["setup"] = setup

        def run(self):
            return Summary()

    monkeypatch.setattr(run_module, "connect_ray", lambda *a, **k: False)
    monkeypatch.setattr(run_module, "_resolve_device", lambda *a, **k: ("cpu", 0.0))
    monkeypatch.setattr(run_module, "Orchestrator", Capture)
    strategy = _strategy(tmp_path)
    run_module.run_tournament(strategy, tiny_dataset, runs=tmp_path / "runs", budget="1 pods")
    setup = seen["setup"]
    assert type(setup.env_config) is EnvConfig
    assert setup.env_config == load_strategy(strategy).config
    assert setup.env_config.cost_rate == 0.001 and setup.env_config.episode_length == 40

    worker = _FakeActorClass()
    fake_ray = SimpleNamespace(remote=lambda **_: lambda cls: worker)
    pool = ActorPool(fake_ray, setup, None, Summary(), None, lambda *a: None)
    pool.data = SimpleNamespace(ref_list=lambda: ["train-ref", "validation-ref"])
    pool._capacity = {"a" * 56: 1}
    assert pool.start()
    assert worker.started[0][1] is setup.env_config  # shipped as is: Ray serializes it


def test_a_searched_env_option_gives_a_new_env_config_with_that_option(tiny_dataset):
    from finpod.data import load_split
    from finpod.tournament.pod import Pod

    base = EnvConfig(episode_length=40, cost_rate=0.001)
    specs = parse_search_env({"no_trade_band": [0.03], "decision_interval": [5]}, base)
    assert [s.name for s in specs] == ["decision_interval", "no_trade_band"]
    controls = {"no_trade_band": 0.03, "decision_interval": 5}
    config = pod_env_config(base, controls)
    assert type(config) is EnvConfig and config is not base
    assert config.no_trade_band == 0.03 and config.decision_interval == 5
    assert config.cost_rate == 0.001 and config.episode_length == 40
    assert base.no_trade_band == 0.0 and base.decision_interval == 1  # left as it was
    assert pod_env_config(base, {}) == base

    pod = Pod(load_split(tiny_dataset, "train"), load_split(tiny_dataset, "validation"), base)
    spec = PodSpec(
        pod_id="p00000",
        algorithm="ppo",
        hparams={},
        seed=1,
        steps=8,
        epochs=1,
        num_envs=2,
        num_learners=1,
        env=controls,
    )
    assert type(pod.env_config_for(spec)) is EnvConfig
    assert pod.env_config_for(spec) == config


def test_an_entrys_recorded_env_and_its_checkpoints_read_back_to_an_equal_env_config(
    tmp_path,
):
    from finpod.agents import make_agent, read_checkpoint, save_checkpoint
    from finpod.agents.checkpoint import checkpoint_env
    from finpod.backtest.agents import recorded_env_config

    base = EnvConfig(episode_length=40, cost_rate=0.001, action_mode="weights")
    controls = {"no_trade_band": 0.02, "decision_interval": 5, "band_target": "target"}
    config = pod_env_config(base, controls)
    # What run.json and leaderboard.json hold, through JSON text.
    run_meta = json.loads(json.dumps({"strategy": {"env": base.to_dict()}}))
    entry = Entry("p00003", "ppo", {}, 1.0, "checkpoints/p00003.safetensors", env=controls)
    recorded = json.loads(json.dumps(entry.to_json()))
    read, source = recorded_env_config(tmp_path, run_meta, Entry.from_json(recorded))
    assert source == "leaderboard entry"
    assert type(read) is EnvConfig and read == config

    agent = make_agent("ppo", {"actor_hidden": [4], "critic_hidden": [4]}, 6, 2, "cpu", 0)
    path = save_checkpoint(agent, tmp_path / "checkpoints" / "p00003.safetensors", env=config)
    meta, _ = read_checkpoint(path)
    assert checkpoint_env(meta, path) == config
    entry_without_env = Entry.from_json({**recorded, "env": {}})
    read, source = recorded_env_config(tmp_path, run_meta, entry_without_env)
    assert source == "checkpoint" and read == config
