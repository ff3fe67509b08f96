"""A single agent's TensorBoard event files: the keys RL users look for, equal to metrics.csv."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from agents_small import SMALL

from finpod.agents import load_checkpoint, make_agent
from finpod.agents.train import make_trading_eval, train
from finpod.runs import read_metrics

#: Tags every PPO run shows (see finpod.runs.tensorboard).
PPO_TAGS = {
    "charts/episodic_return",
    "charts/SPS",
    "charts/learning_rate",
    "train/policy_loss",
    "train/value_loss",
    "train/entropy",
    "train/approx_kl",
    "train/clip_frac",
    "train/explained_variance",
    "validation/sharpe",
    "validation/return",
    "validation/turnover",
    "validation/costs",
}


def scalars(pod_dir: Path) -> dict[str, list[tuple[int, float, float]]]:
    """Tag → [(step, wall time, value)] read back with TensorBoard's own loader."""
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(str(pod_dir), size_guidance={ea.SCALARS: 0})
    acc.Reload()
    return {
        t: [(e.step, e.wall_time, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]
    }


def assert_events_equal_metrics(run_dir: Path, one_session: bool = True) -> None:
    """Every metrics.csv row is one scalar of its pod's event files (same step, same value
    to float32, and, within ``one_session``, the same wall-clock offset), and the event
    files hold nothing else."""
    from finpod.runs.tensorboard import tag

    expected: dict[str, dict[str, list[tuple[int, float, float]]]] = {}
    for pod, steps, wall, split, metric, value in read_metrics(run_dir / "metrics.csv"):
        expected.setdefault(pod, {}).setdefault(tag(split, metric), []).append((steps, wall, value))
    folders = {p.name for p in (run_dir / "tensorboard").iterdir()}
    assert folders == set(expected)
    for pod, by_tag in expected.items():
        got = scalars(run_dir / "tensorboard" / pod)
        assert set(got) == set(by_tag), pod
        for name, rows in by_tag.items():
            events = got[name]
            assert [e[0] for e in events] == [r[0] for r in rows], (pod, name)
            want = np.array([r[2] for r in rows], dtype=np.float32)
            np.testing.assert_array_equal(np.array([e[2] for e in events], np.float32), want)
            # Wall times are the run's origin plus the row's wall_s: equal offsets.
            offsets = np.array([e[1] for e in events]) - np.array([r[1] for r in rows])
            assert not one_session or np.ptp(offsets) < 2e-3, (pod, name)


@pytest.fixture()
def ppo_run(market, trading_env, tmp_path):
    agent = make_agent("ppo", SMALL["ppo"], trading_env.obs_dim, trading_env.action_dim, "cpu", 0)
    valid = market.slice(200, 260)
    run_dir = tmp_path / "run"
    train(
        agent,
        trading_env,
        total_steps=3 * 64,
        eval_every=64,
        eval_fn=make_trading_eval(valid, trading_env.config, "sharpe"),
        run_dir=run_dir,
        progress=False,
        pod_id="ppo-0",
    )
    return run_dir


def test_a_ppo_run_writes_every_key_rl_users_look_for(ppo_run):
    pod_dir = ppo_run / "tensorboard" / "ppo-0"
    assert list(pod_dir.glob("events.out.tfevents.*"))
    got = scalars(pod_dir)
    assert set(got) >= PPO_TAGS, PPO_TAGS - set(got)
    assert all(len(got[t]) == 3 for t in PPO_TAGS)  # one point per segment
    assert [s for s, _, _ in got["charts/SPS"]] == [64, 128, 192]
    assert all(v > 0 for _, _, v in got["charts/SPS"])
    assert got["charts/learning_rate"][0][2] == pytest.approx(3e-4)
    assert all(v >= 0 for _, _, v in got["validation/turnover"] + got["validation/costs"])


def test_a_ppo_run_records_its_hyperparameters_rounded_without_none(ppo_run):
    from finpod.runs import read_hparams

    hp = read_hparams(ppo_run / "tensorboard" / "ppo-0")
    assert hp["algorithm"] == "ppo" and hp["num_envs"] == 4
    assert hp["learning_rate"] == pytest.approx(3e-4) and hp["clip_coef"] == pytest.approx(0.2)
    assert "target_kl" not in hp  # None: not a setting of this run
    assert hp["actor_hidden"] == "x".join(str(h) for h in SMALL["ppo"]["actor_hidden"])


def test_event_values_equal_the_metrics_csv_rows(ppo_run):
    assert_events_equal_metrics(ppo_run)


def test_explained_variance_is_one_minus_the_unexplained_share():
    import torch

    from finpod.agents.ppo import explained_variance

    ret = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert float(explained_variance(ret, ret)) == 1.0
    assert float(explained_variance(torch.full((4,), 2.5), ret)) == pytest.approx(0.0)
    noisy = ret + torch.tensor([0.5, -0.5, 0.5, -0.5])
    assert float(explained_variance(noisy, ret)) == pytest.approx(1 - 0.25 / 1.25)
    assert float(explained_variance(ret, torch.ones(4))) == 0.0  # constant returns


def test_a_resumed_run_adds_event_files_and_hides_the_steps_it_trains_again(
    market, trading_env, tmp_path
):
    """Resumed from an older checkpoint, a run trains some steps again: metrics.csv drops
    their rows, the event files hide their events; earlier files are never rewritten."""
    valid = market.slice(200, 260)
    run_dir = tmp_path / "run"
    kw = dict(
        eval_every=64,
        eval_fn=make_trading_eval(valid, trading_env.config, "sharpe"),
        run_dir=run_dir,
        progress=False,
        pod_id="ppo-0",
    )
    agent = make_agent("ppo", SMALL["ppo"], trading_env.obs_dim, trading_env.action_dim, "cpu", 0)
    train(agent, trading_env, total_steps=128, **kw)
    early = tmp_path / "at128.safetensors"
    shutil.copy(run_dir / "checkpoints" / "last.safetensors", early)
    train(agent, trading_env, total_steps=256, **kw)
    pod_dir = run_dir / "tensorboard" / "ppo-0"
    before = {p.name: p.read_bytes() for p in pod_dir.iterdir()}
    # Killed after 256 steps, the run is resumed from its checkpoint at 128 steps.
    again = load_checkpoint(early)
    train(again, trading_env, total_steps=256, **kw)
    after = {p.name: p.read_bytes() for p in pod_dir.iterdir()}
    assert len(after) == len(before) + 1
    assert all(after[name] == data for name, data in before.items())
    steps = [s for s, _, _ in scalars(pod_dir)["validation/sharpe"]]
    assert steps == [64, 128, 192, 256]
    assert_events_equal_metrics(run_dir, one_session=False)
    assert not any(
        math.isnan(r[5]) for r in read_metrics(run_dir / "metrics.csv") if r[3] == "validation"
    )
