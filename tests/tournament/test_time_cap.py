"""The wall-time cap holds whatever the algorithm: learners stop between their own steps
and the pod they cut is still scored on validation."""

from __future__ import annotations

import textwrap

import pytest

from finpod.tournament import Leaderboard, run_tournament

from .conftest import write_strategy

pytestmark = pytest.mark.usefixtures("local_ray")

CAP_S = 15.0
#: Gradient steps the longest pod takes at least before the cap (one PPO rollout's update
#: is 3,200, one SAC vector step's 300); a deadline that fires at once lets through one.
MEANINGFUL_UPDATES = 1_000

#: Learners made slow on purpose: each PPO rollout of 64 transitions is followed by 3,200
#: gradient steps, each SAC vector step by 300; a pod of 10⁶ env steps would take hours.


def _slow_strategy(path, algorithm: str):
    tail = f'time_cap = "{CAP_S:g}s"\nmode = "asha"\n'
    if algorithm == "ppo":
        text = write_strategy(path, pod_steps=1_000_000, epochs=1, extra=tail).read_text()
        text = text.replace("update_epochs = 1", "update_epochs = 400").replace(
            "minibatch_size = 64", "minibatch_size = 8"
        )
        text = text.split("[search]")[0] + '[search]\nalgorithms = ["ppo"]\n'
    else:
        text = textwrap.dedent(
            f"""\
            [agent]
            algorithm = "sac"
            [agent.hparams]
            actor_hidden = [8]
            critic_hidden = [8]
            batch_size = 64
            learning_starts = 8
            gradient_steps = 300
            [env]
            episode_length = 40
            [train]
            num_envs = 4
            seed = 7
            device = "cpu"
            [tournament]
            pod_steps = 1000000
            epochs = 1
            top_k = 4
            fresh_pods = 2
            {tail}
            """
        )
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.timeout(300)
@pytest.mark.parametrize("algorithm", ["ppo", "sac"])
def test_the_time_cap_holds_with_a_slow_learner_and_cut_pods_are_scored(
    tmp_path, tiny_dataset, algorithm
):
    strategy = _slow_strategy(tmp_path / "s.toml", algorithm)
    finished = []

    def on_event(kind, payload):
        if kind == "finish":
            finished.append(payload["result"])

    result = run_tournament(
        strategy,
        tiny_dataset,
        pods=2,
        budget="1e9 steps",
        runs=tmp_path / "runs",
        on_event=on_event,
    )
    board = Leaderboard.load(result.run_dir)
    assert board.progress.wall_s <= CAP_S * 1.1
    # Every pod the cap cut short was still scored on validation (none lost, none failed).
    assert finished and result.summary.pods_failed == 0
    assert all(r.steps_done < 1_000_000 and r.epochs_done == 1 for r in finished)
    assert board.candidates_evaluated == len(finished)
    # The cap stopped the pods, not a deadline that fired at once: the first pods learned
    # for a good part of the cap (thousands of gradient steps), none past it.
    assert all(r.train_s <= CAP_S for r in finished)
    assert max(r.train_s for r in finished) >= CAP_S / 4
    assert max(r.updates for r in finished) >= MEANINGFUL_UPDATES
