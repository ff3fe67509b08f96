"""``metrics.csv``'s ``wall_s`` is the run's clock: a resumed run continues it."""

from __future__ import annotations

from agents_small import SMALL

from finpod.agents import load_checkpoint, make_agent
from finpod.agents.train import train
from finpod.runs import METRICS_FILE, read_metrics, write_metrics


def test_resumed_run_continues_the_wall_clock_of_metrics_csv(market, tmp_path):
    from finpod.env import EnvConfig, VecTradingEnv

    config = EnvConfig(action_mode="weights", episode_length=30)

    def fresh_env():
        return VecTradingEnv(market.slice(0, 200), config, num_envs=4, seed=0)

    env = fresh_env()
    agent = make_agent("ppo", SMALL["ppo"], env.obs_dim, env.action_dim, "cpu", 11)
    first = train(agent, env, total_steps=2 * 64, eval_every=64, progress=False, run_dir=tmp_path)
    # The first session ran for an hour (as a slow machine would): its rows say so.
    path = tmp_path / METRICS_FILE
    before = [(p, s, w + 3600.0, sp, m, v) for p, s, w, sp, m, v in read_metrics(path)]
    write_metrics(path, before)
    restored = load_checkpoint(first.last_checkpoint)
    resumed_at = restored.env_steps
    train(
        restored, fresh_env(), total_steps=4 * 64, eval_every=64, progress=False, run_dir=tmp_path
    )
    rows = read_metrics(path)
    later = rows[len(before) :]  # the resumed session's rows, appended
    assert later and min(r[1] for r in later) > resumed_at
    assert min(r[2] for r in later) >= max(r[2] for r in before)
    walls = [r[2] for r in rows if r[4] == rows[0][4]]
    assert walls == sorted(walls)  # never restarts at 0
