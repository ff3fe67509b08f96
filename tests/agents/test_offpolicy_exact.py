"""The fast off-policy updates compute the textbook updates.

SAC's and TD3's ``_update`` skip work that does not change the result (the critics'
weight gradients of the actor's loss, the observation part of ∂Q/∂input, the
concatenation of obs and action, one lerp per parameter). Here each is checked against a
plain reference written from the equations in the modules' docstrings, from the same
state and the same random draws.
"""

from __future__ import annotations

import torch

from finpod.agents import make_agent
from finpod.agents.nets import QCritic


def test_critic_equals_the_mlp_on_the_concatenation_with_the_same_gradients():
    torch.manual_seed(0)
    q = QCritic(7, 3, (16, 8)).double()
    obs = torch.randn(5, 7, dtype=torch.float64)
    act = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    fast = q(obs, act)
    ref = q.net(torch.cat([obs, act], -1)).squeeze(-1)
    assert fast.shape == (5,)
    assert torch.allclose(fast, ref, atol=1e-12)
    g_fast = torch.autograd.grad(fast.sum(), [act, *q.parameters()])
    g_ref = torch.autograd.grad(ref.sum(), [act, *q.parameters()])
    for a, b in zip(g_fast, g_ref, strict=True):
        assert torch.allclose(a, b, atol=1e-12)


def _q(critic, obs, action):
    return critic.net(torch.cat([obs, action], -1)).squeeze(-1)


def _step(opt, loss):
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def _reference_sac_update(agent) -> None:
    """CleanRL's SAC step: critics, actor (grads also reach the critics), α, Polyak."""
    hp, g = agent.hparams, agent.generator
    obs, action, reward, next_obs, term = agent.buffer.sample(hp.batch_size, g)
    alpha = agent.log_alpha.value.exp().detach()
    with torch.no_grad():
        next_action, next_logp = agent.actor.sample(next_obs, g)
        q_next = torch.min(
            _q(agent.q1_target, next_obs, next_action), _q(agent.q2_target, next_obs, next_action)
        )
        target = reward + hp.gamma * (1.0 - term) * (q_next - alpha * next_logp)
    q_loss = ((_q(agent.q1, obs, action) - target) ** 2).mean()
    q_loss = q_loss + ((_q(agent.q2, obs, action) - target) ** 2).mean()
    _step(agent.optims["critic"], q_loss)
    new_action, logp = agent.actor.sample(obs, g)
    q_pi = torch.min(_q(agent.q1, obs, new_action), _q(agent.q2, obs, new_action))
    _step(agent.optims["actor"], (alpha * logp - q_pi).mean())
    alpha_loss = -(agent.log_alpha.value * (logp.detach() + agent.target_entropy)).mean()
    _step(agent.optims["alpha"], alpha_loss)
    with torch.no_grad():
        for tgt, src in ((agent.q1_target, agent.q1), (agent.q2_target, agent.q2)):
            for t, s in zip(tgt.parameters(), src.parameters(), strict=True):
                t.copy_((1 - hp.tau) * t + hp.tau * s)


def _reference_td3_update(agent) -> None:
    """CleanRL's TD3 step: twin critics, delayed actor (grads also reach Q₁), Polyak."""
    hp, g = agent.hparams, agent.generator
    obs, action, reward, next_obs, term = agent.buffer.sample(hp.batch_size, g)
    with torch.no_grad():
        next_action = agent.actor_target(next_obs)
        eps = torch.randn(next_action.shape, generator=g)
        eps = (eps * hp.policy_noise).clamp(-hp.noise_clip, hp.noise_clip)
        next_action = (next_action + eps).clamp(-1.0, 1.0)
        q_next = torch.stack([_q(q, next_obs, next_action) for q in agent.critic_targets])
        target = reward + hp.gamma * (1.0 - term) * q_next.min(0).values
    q_loss = sum(((_q(q, obs, action) - target) ** 2).mean() for q in agent.critics)
    _step(agent.optims["critic"], q_loss)
    if agent.updates % hp.policy_delay == 0:
        _step(agent.optims["actor"], -_q(agent.critics[0], obs, agent.actor(obs)).mean())
        pairs = [(agent.actor_target, agent.actor)]
        pairs += list(zip(agent.critic_targets, agent.critics, strict=True))
        with torch.no_grad():
            for tgt, src in pairs:
                for t, s in zip(tgt.parameters(), src.parameters(), strict=True):
                    t.copy_((1 - hp.tau) * t + hp.tau * s)


def _twins(algo, trading_env):
    hp = {"learning_starts": 10**9, "buffer_size": 256, "batch_size": 32}
    hp |= {"actor_hidden": [32, 16], "critic_hidden": [32, 16]}
    agents = []
    for _ in range(2):
        agent = make_agent(algo, hp, trading_env.obs_dim, trading_env.action_dim, "cpu", 3)
        agent.reset_rollout()
        agent.learn(trading_env, 64)  # random actions only: the same buffer in both
        agents.append(agent)
    return agents


def _assert_same_state(fast, ref):
    a, b = fast.state_dict(), ref.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        if a[key].is_floating_point():
            assert torch.allclose(a[key], b[key], rtol=1e-4, atol=1e-6), key
        else:
            assert torch.equal(a[key], b[key]), key


def _assert_moved(before, after):
    """Every network (targets included) changed: the comparison is not of idle agents."""
    for net in {k.split(".")[0] for k in after if not k.startswith(("optim", "counter", "rng"))}:
        keys = [k for k in after if k.startswith(f"{net}.")]
        assert any(not torch.equal(before[k], after[k]) for k in keys), net


def test_sac_update_matches_the_reference_update(trading_env):
    fast, ref = _twins("sac", trading_env)
    before = fast.state_dict()
    for _ in range(3):
        fast._update()
        _reference_sac_update(ref)
        fast.updates += 1
        ref.updates += 1
    _assert_same_state(fast, ref)
    _assert_moved(before, fast.state_dict())


def test_td3_update_matches_the_reference_update(trading_env):
    fast, ref = _twins("td3", trading_env)
    before = fast.state_dict()
    for _ in range(4):  # two delayed actor steps
        fast._update()
        _reference_td3_update(ref)
        fast.updates += 1
        ref.updates += 1
    _assert_same_state(fast, ref)
    _assert_moved(before, fast.state_dict())
