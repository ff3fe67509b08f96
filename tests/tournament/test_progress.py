"""Progress of running pods: env steps counted as they are trained (not once per epoch),
each population member's own score, and an ETA from the pace so far."""

from __future__ import annotations

import threading
import time

import pytest

from finpod.tournament import run_tournament

from .conftest import write_strategy

TINY_PPO = {
    "horizon": 16,
    "minibatch_size": 64,
    "update_epochs": 1,
    "actor_hidden": [8],
    "critic_hidden": [8],
}


def _pod(dataset):
    from finpod.data import load_split
    from finpod.env import EnvConfig
    from finpod.tournament.pod import Pod

    config = EnvConfig(episode_length=40)
    return Pod(load_split(dataset, "train"), load_split(dataset, "validation"), config)


def _spec(pod_id: str, steps: int, epochs: int, seed: int = 3, lr: float = 1e-3):
    from finpod.tournament.generator import PodSpec

    return PodSpec(
        pod_id=pod_id,
        algorithm="ppo",
        hparams={**TINY_PPO, "learning_rate": lr},
        seed=seed,
        steps=steps,
        epochs=epochs,
        num_envs=4,
        num_learners=1,
    )


def test_a_pod_reports_env_steps_while_its_first_epoch_trains(tiny_dataset):
    """``progress()`` (what the pod actor answers from its control thread) counts env
    steps inside an epoch: polled while a one-epoch pod trains, it shows some steps done
    and the epoch not yet over."""
    pod = _pod(tiny_dataset)
    spec = _spec("p0", steps=6400, epochs=1)  # 100 rollouts of 16 steps × 4 envs
    out = {}
    worker = threading.Thread(target=lambda: out.update(result=pod.train(spec)))
    worker.start()
    mid_epoch = []
    while worker.is_alive():
        info = pod.progress().get("pods", {}).get("p0")
        if info and info["epoch"] == 0 and info["done"] > 0:
            mid_epoch.append(info["done"])
        time.sleep(0.002)
    worker.join()
    assert mid_epoch and 0 < min(mid_epoch) < spec.steps
    final = pod.progress()["pods"]["p0"]
    assert final["epoch"] == 1 and final["done"] == out["result"].steps_done


def test_a_pod_says_what_it_will_train_once_rollouts_are_rounded_up(tiny_dataset):
    """Asked 100 steps over 2 epochs, a PPO pod of 4 envs × horizon 16 learns one whole
    64-step rollout per epoch: after its first epoch it reports a target of 128."""
    pod = _pod(tiny_dataset)
    result = pod.train(_spec("p0", steps=100, epochs=2))
    row = pod.progress()["pods"]["p0"]
    assert result.steps_done == 128
    assert row["target"] == 128 and row["done"] == 128


def test_every_member_of_a_population_reports_its_own_score_and_steps(tiny_dataset):
    """After a population trains, each member's progress row holds its own epoch, last
    validation score and env steps (not the best member's score on the first row only)."""
    from finpod.tournament.members import PopulationTrainer

    pod = _pod(tiny_dataset)
    specs = [_spec(f"m{k}", 128, 2, seed=5 + k, lr=lr) for k, lr in enumerate((3e-3, 1e-4, 1e-3))]
    results = PopulationTrainer(pod).train(specs, [None] * 3)
    pods = pod.progress()["pods"]
    assert len({r.score for r in results}) == 3  # the members score differently
    for result in results:
        row = pods[result.pod_id]
        assert row["epoch"] == 2
        assert row["score"] == result.score
        assert row["done"] == result.steps_done


def test_the_eta_goes_at_the_running_pods_pace():
    from finpod.tournament.budget import eta_seconds
    from finpod.tournament.settings import Budget

    # Two running pods at 100 and 50 steps/s; 1,000 steps finished, 1,500 running.
    running = [
        {"epoch": 0, "epochs": 4, "steps": 4000, "done": 1000, "elapsed_s": 10.0},
        {"epoch": 0, "epochs": 4, "steps": 4000, "done": 500, "elapsed_s": 10.0},
    ]
    # 10,000 − 2,500 = 7,500 steps left at 150 steps/s, whatever the run's start-up took.
    assert eta_seconds(Budget("steps", 10_000.0), 1000.0, running, 300.0) == pytest.approx(50.0)


@pytest.mark.usefixtures("local_ray")
def test_the_budget_moves_and_an_eta_shows_before_any_pod_finishes(tmp_path, tiny_dataset):
    """Through Ray, the live display sees the running pod's env steps and an ETA while no
    pod has reported yet (one pod of one epoch: a per-epoch count would show 0)."""
    from finpod.tournament.budget import running_steps

    strategy = write_strategy(tmp_path / "s.toml", pod_steps=60_000, epochs=1, top_k=2)
    seen = []

    def display(snap):
        if snap["candidates"] == 0 and snap["running"]:
            seen.append((running_steps(snap["running"]), snap["eta_s"]))

    run_tournament(
        strategy,
        tiny_dataset,
        pods=1,
        budget="60000 steps",
        runs=tmp_path / "runs",
        display=display,
    )
    moving = [(steps, eta) for steps, eta in seen if 0 < steps < 60_000]
    assert moving, seen[-5:]
    assert all(eta is not None and eta >= 0 for _, eta in moving)


def test_past_the_budget_the_eta_counts_what_running_pods_still_train():
    from finpod.tournament.budget import eta_seconds
    from finpod.tournament.settings import Budget

    # The budget is spent, but the running pod has 1,000 of its 4,000 steps to go.
    running = [{"epoch": 2, "epochs": 4, "steps": 4000, "done": 3000, "elapsed_s": 30.0}]
    assert eta_seconds(Budget("steps", 2000.0), 500.0, running, 60.0) == pytest.approx(10.0)
