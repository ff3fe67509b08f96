"""Pods and populations on the one train-and-score loop: a pod's time cap ends it after
the epoch that reached it, and a diverging member fails alone."""

from __future__ import annotations

import math
from dataclasses import replace

from .test_progress import _pod, _spec


def test_a_pod_past_its_time_cap_stops_after_that_epoch(tiny_dataset):
    pod = _pod(tiny_dataset)
    spec = replace(_spec("p0", steps=192, epochs=3), max_seconds=1e-9)
    result = pod.train(spec)
    assert result.failure == "" and result.epochs_done == 1
    assert len(result.history) == 1 and result.history[0]["score"] == result.score
    assert result.steps_done == 64 and result.checkpoint


def test_a_diverging_member_of_a_population_fails_alone(tiny_dataset):
    from finpod.tournament.members import PopulationTrainer

    pod = _pod(tiny_dataset)
    # Adam steps of 100: PPO's numbers go non-finite; the sibling learns as usual.
    specs = [_spec("bad", 512, 2, seed=5, lr=100.0), _spec("good", 512, 2, seed=6)]
    bad, good = PopulationTrainer(pod).train(specs, [None, None])
    assert bad.failure.startswith("non-finite: ") and " at epoch " in bad.failure
    assert math.isnan(bad.score) and bad.returns is None and bad.checkpoint == b""
    assert good.failure == "" and good.epochs_done == 2 and math.isfinite(good.score)
    assert len(good.history) == 2 and good.checkpoint
