"""The leaderboard ensemble trades the mean of its members' target weights."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from finpod.env import EnvConfig, rollout, score
from finpod.env.ensemble import EnsemblePolicy, Member, score_ensemble
from finpod.errors import FinpodError

from .markets import make_market


def constant(action):
    a = torch.tensor([action], dtype=torch.float32)
    return lambda obs: a.expand(obs.shape[0], -1)


def test_ensemble_weights_are_the_mean_of_its_members_targets():
    market = make_market(15, 3, seed=11)
    members = [
        Member(constant([0.5, 0.3, 0.0]), EnvConfig(action_mode="weights", cost_rate=0.001)),
        Member(constant([0.0, 0.0, 0.0]), EnvConfig(action_mode="active")),
        Member(
            constant([1.0, -1.0, 0.0]),
            EnvConfig(action_mode="active", max_active_weight=0.1, decision_interval=2),
        ),
    ]
    third = 1.0 / 3.0
    want = np.mean(
        [[0.5, 0.3, 0.0], [third, third, third], [third + 0.1, third - 0.1, third]], axis=0
    )
    policy = EnsemblePolicy(members, market)
    out = rollout(policy, market, policy.config)
    np.testing.assert_allclose(policy.last_targets.mean(0)[0].numpy(), want, atol=1e-12)
    # Bar for bar the same account as one weights-mode agent holding the mean target.
    same = rollout(constant(want.tolist()), market, policy.config)
    pd.testing.assert_frame_equal(out.holdings, same.holdings)
    # Order-level settings are the first member's.
    assert policy.config.cost_rate == 0.001 and policy.config.action_mode == "weights"


def test_members_see_their_own_observation_and_keep_their_target_off_their_decision_bars():
    market = make_market(10, 2, seed=12)
    seen = []

    def spy(obs):
        seen.append(obs.shape[1])
        return torch.tensor([[float(len(seen) % 2), 0.0]])  # alternates 1, 0, 1, ...

    interval = Member(spy, EnvConfig(action_mode="weights", decision_interval=3))
    policy = EnsemblePolicy([interval], market)
    targets = []
    rollout(lambda obs: targets.append(policy(obs)) or targets[-1], market, policy.config)
    assert len(seen) == 3  # bars 0, 3, 6 of 9 decisions
    assert seen[0] == 2 + 2 * (2 + market.num_features) + 1  # with its schedule slice
    w = torch.cat(targets)[:, 0]
    assert torch.equal(w[:3], torch.ones(3)) and torch.equal(w[3:6], torch.zeros(3))


def test_score_ensemble_returns_the_score_of_its_rollout():
    market = make_market(30, 3, seed=13)
    members = [Member(constant([0.2, -0.2, 0.0]), EnvConfig(action_mode="active"))] * 2
    value, out = score_ensemble(members, market)
    assert np.isfinite(value) and len(out.returns) == 29


@pytest.mark.parametrize("name", ["sharpe", "sortino", "calmar", "return"])
def test_the_ensemble_is_scored_with_the_runs_score(name):
    # The tournament compares the ensemble with the best pod on the run's score: the value
    # is that score of the ensemble's own rollout, and the score names give different values.
    market = make_market(60, 3, seed=13)
    members = [
        Member(constant([0.6, -0.2, 0.0]), EnvConfig(action_mode="active")),
        Member(constant([0.5, 0.1, 0.9]), EnvConfig(action_mode="weights")),
    ]
    value, out = score_ensemble(members, market, name)
    assert value == score(out, name)
    others = {n: score(out, n) for n in ("sharpe", "sortino", "calmar", "return") if n != name}
    assert all(abs(v - value) > 1e-6 for v in others.values()), (value, others)


def test_shares_mode_members_are_refused():
    market = make_market(6, 2, seed=14)
    with pytest.raises(FinpodError, match="shares"):
        EnsemblePolicy([Member(constant([0.0, 0.0]), EnvConfig(), "pod-1")], market)
