"""``compile=True`` steps the same MDP as the eager env (default suite, one small compile).

The README's headline env throughput is measured with ``compile=True``; this pins that the
compiled step computes the same states, observations and rewards as the eager one, over
an episode end and auto-reset, on a tiny market (the compile takes ~10–40 s on 2 CPU
cores the first time, less once torch's on-disk cache has it). The longer variants with
the execution controls on are in ``test_vec_env.py`` / ``test_controls.py`` (``-m slow``).
"""

from __future__ import annotations

import warnings

import torch

from finpod.env import EnvConfig, VecTradingEnv
from finpod.env.vec_env import _advance

from .markets import make_market

NUM_ENVS = 4
STEPS = 7  # episode_length 3: two auto-resets inside the run


def test_compiled_env_matches_eager_states_obs_and_rewards():
    market = make_market(12, 3, num_features=2, seed=1)
    config = EnvConfig(action_mode="weights", episode_length=3, cost_rate=0.002)
    eager = VecTradingEnv(market, config, num_envs=NUM_ENVS, seed=0)
    compiled = VecTradingEnv(market, config, num_envs=NUM_ENVS, seed=0, compile=True)
    torch.testing.assert_close(compiled.reset(), eager.reset(), rtol=0, atol=0)
    gen = torch.Generator().manual_seed(0)
    with warnings.catch_warnings():
        # A compiler failure falls back to eager with a warning: here it must fail.
        warnings.filterwarnings("error", message="torch.compile failed")
        for _ in range(STEPS):
            action = torch.rand(NUM_ENVS, 3, generator=gen) * 2 - 1
            oe, re, te, ue, ie = eager.step(action)
            oc, rc, tc, uc, ic = compiled.step(action)
            torch.testing.assert_close(oc, oe, rtol=1e-6, atol=1e-6)
            torch.testing.assert_close(rc, re, rtol=1e-5, atol=1e-6)
            assert torch.equal(tc, te) and torch.equal(uc, ue)
            torch.testing.assert_close(ic["final_obs"], ie["final_obs"], rtol=1e-6, atol=1e-6)
            for name in compiled.state._fields:
                got, want = getattr(compiled.state, name), getattr(eager.state, name)
                if name in ("t", "steps", "holdings"):
                    assert torch.equal(got, want), name  # counters and whole shares: exact
                else:
                    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-3, msg=name)
    assert compiled._step_fn is not _advance  # still the compiled step: no silent fallback
