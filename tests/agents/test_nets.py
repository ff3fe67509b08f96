"""The log-densities the policy gradients rely on match torch.distributions."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.distributions import Normal, TransformedDistribution
from torch.distributions.transforms import TanhTransform

from finpod.agents import make_agent
from finpod.agents.nets import gaussian_entropy, gaussian_log_prob, mlp

floats = st.floats(-3.0, 3.0, allow_nan=False)


@settings(max_examples=50, deadline=None)
@given(
    x=st.lists(floats, min_size=3, max_size=3),
    mu=st.lists(floats, min_size=3, max_size=3),
    log_std=st.lists(st.floats(-2.0, 1.0), min_size=3, max_size=3),
)
def test_gaussian_log_prob_and_entropy_match_torch_normal(x, mu, log_std):
    x, mu, ls = (torch.tensor([v], dtype=torch.float64) for v in (x, mu, log_std))
    ref = Normal(mu, ls.exp())
    assert torch.allclose(gaussian_log_prob(x, mu, ls), ref.log_prob(x).sum(-1), atol=1e-9)
    assert torch.allclose(gaussian_entropy(ls), ref.entropy().sum(-1), atol=1e-9)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_squashed_log_prob_matches_tanh_transformed_normal(seed):
    # The SAC policy the agent acts and learns with: its batched sample (K = 1 member).
    pop = make_agent("sac", {"actor_hidden": [8, 8]}, 3, 2, "cpu", seed).population
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(1, 5, 3, generator=g)
    noise = torch.randn(1, 5, 2, generator=g)
    with torch.no_grad():
        action, logp = pop._sample(obs, noise)
        mean, log_std = pop._actor(obs)
    ref = TransformedDistribution(Normal(mean.double(), log_std.double().exp()), [TanhTransform()])
    # Clamp away from ±1 where the reference's atanh is inaccurate.
    a = action.double().clamp(-1 + 1e-6, 1 - 1e-6)
    assert torch.allclose(logp.double(), ref.log_prob(a).sum(-1), atol=1e-3)
    assert bool((action.abs() < 1).all())


def test_mlp_hidden_layers_are_orthogonal_with_sqrt2_gain():
    torch.manual_seed(0)
    net = mlp(16, (16, 16), 4, out_gain=0.01)
    w = net[0].weight.detach()
    assert torch.allclose(w @ w.T, 2.0 * torch.eye(16), atol=1e-5)
    assert float(net[-1].weight.abs().max()) < 0.05
    assert all(float(layer.bias.abs().max()) == 0.0 for layer in net if hasattr(layer, "bias"))
    assert math.isclose(float(net[2].weight.norm() ** 2), 2.0 * 16, rel_tol=1e-4)
