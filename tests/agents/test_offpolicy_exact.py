"""The fast off-policy updates compute the textbook updates.

SAC's and TD3's batched ``_update`` (written once over a member axis, here a population of
one) skips work that does not change the result (the critics' weight gradients of the
actor's loss, one lerp per parameter) and computes with stacked tensors. Here each is
checked against a plain reference on ``nn.Module`` networks and ``torch.optim.Adam``,
written from the equations in the modules' docstrings, from the same state and the same
random draws.
"""

from __future__ import annotations

import math

import torch
from torch.distributions import Normal

from finpod.agents import make_agent
from finpod.agents.batched import mlp_on_pair
from finpod.agents.nets import LOG_STD_MAX, LOG_STD_MIN, QCritic


def test_critic_on_the_pair_equals_the_mlp_on_the_concatenation_with_the_same_gradients():
    torch.manual_seed(0)
    q = QCritic(7, 3, (16, 8)).double()
    params = {
        f"q.{k}": v.detach().clone()[None].requires_grad_() for k, v in q.net.named_parameters()
    }
    obs = torch.randn(5, 7, dtype=torch.float64)
    act = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    fast = mlp_on_pair(obs[None], act[None], params, "q", 3, torch.relu).squeeze(-1)[0]
    ref = q.net(torch.cat([obs, act], -1)).squeeze(-1)
    assert fast.shape == (5,)
    assert torch.allclose(fast, ref, atol=1e-12)
    g_fast = torch.autograd.grad(fast.sum(), [act, *params.values()])
    g_ref = torch.autograd.grad(ref.sum(), [act, *q.net.parameters()])
    assert torch.allclose(g_fast[0], g_ref[0], atol=1e-12)
    for a, b in zip(g_fast[1:], g_ref[1:], strict=True):
        assert torch.allclose(a[0], b, atol=1e-12)


def _q(critic, obs, action):
    return critic.net(torch.cat([obs, action], -1)).squeeze(-1)


def _squashed_sample(actor, obs, g):
    """SAC's reparameterised tanh-Gaussian sample and its log-probability, from the
    actor's layers (CleanRL's ``get_action``)."""
    h = torch.relu(actor.body(obs))
    mean = actor.mean(h)
    log_std = torch.tanh(actor.log_std(h))
    log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1.0)
    pre = mean + torch.randn(mean.shape, generator=g) * log_std.exp()
    action = torch.tanh(pre)
    correction = 2.0 * (math.log(2.0) - pre - torch.nn.functional.softplus(-2.0 * pre))
    return action, (Normal(mean, log_std.exp()).log_prob(pre) - correction).sum(-1)


def _deterministic(actor, obs):
    """TD3's ``tanh(mlp(obs))``."""
    return torch.tanh(actor.net(obs))


class Reference:
    """Plain ``nn.Module`` networks and ``torch.optim.Adam`` optimizers holding an agent's
    weights: the textbook update runs on these, the agent's batched update on its own."""

    def __init__(self, agent):
        pop = agent.population
        self.hp, self.g, self.ring = agent.hparams, agent.generator, agent.buffer
        self.nets = pop.build_nets(agent.hparams, agent.obs_dim, agent.action_dim)
        weights = agent.weights()
        for name, net in self.nets.items():
            net.load_state_dict(
                {
                    k[len(name) + 1 :]: v.detach().clone()
                    for k, v in weights.items()
                    if k.startswith(f"{name}.")
                }
            )
        self.optims = {
            opt: torch.optim.Adam(
                [p for n in nets for p in self.nets[n].parameters()],
                lr=getattr(agent.hparams, pop.lr_fields[opt]),
                eps=eps,
            )
            for opt, (nets, eps) in pop.optim_groups(agent.hparams).items()
        }
        self.updates = 0

    def sample(self):
        idx = torch.randint(0, self.ring.size, (self.hp.batch_size,), generator=self.g)
        r = self.ring
        return r.obs[idx], r.action[idx], r.reward[idx], r.next_obs[idx], r.terminated[idx]

    def weights(self):
        return {f"{n}.{k}": v for n, net in self.nets.items() for k, v in net.state_dict().items()}


def _step(opt, loss):
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def _polyak(pairs, tau):
    with torch.no_grad():
        for tgt, src in pairs:
            for t, s in zip(tgt.parameters(), src.parameters(), strict=True):
                t.copy_((1 - tau) * t + tau * s)


def _reference_sac_update(ref: Reference) -> None:
    """CleanRL's SAC step: critics, actor (grads also reach the critics), α, Polyak."""
    hp, g, n = ref.hp, ref.g, ref.nets
    obs, action, reward, next_obs, term = ref.sample()
    alpha = n["log_alpha"].value.exp().detach()
    with torch.no_grad():
        next_action, next_logp = _squashed_sample(n["actor"], next_obs, g)
        q_next = torch.min(
            _q(n["q1_target"], next_obs, next_action), _q(n["q2_target"], next_obs, next_action)
        )
        target = reward + hp.gamma * (1.0 - term) * (q_next - alpha * next_logp)
    q_loss = ((_q(n["q1"], obs, action) - target) ** 2).mean()
    q_loss = q_loss + ((_q(n["q2"], obs, action) - target) ** 2).mean()
    _step(ref.optims["critic"], q_loss)
    new_action, logp = _squashed_sample(n["actor"], obs, g)
    q_pi = torch.min(_q(n["q1"], obs, new_action), _q(n["q2"], obs, new_action))
    _step(ref.optims["actor"], (alpha * logp - q_pi).mean())
    target_entropy = -float(new_action.shape[-1])
    alpha_loss = -(n["log_alpha"].value * (logp.detach() + target_entropy)).mean()
    _step(ref.optims["alpha"], alpha_loss)
    _polyak([(n["q1_target"], n["q1"]), (n["q2_target"], n["q2"])], hp.tau)


def _reference_td3_update(ref: Reference) -> None:
    """CleanRL's TD3 step: twin critics, delayed actor (grads also reach Q₁), Polyak."""
    hp, g, n = ref.hp, ref.g, ref.nets
    obs, action, reward, next_obs, term = ref.sample()
    with torch.no_grad():
        next_action = _deterministic(n["actor_target"], next_obs)
        eps = torch.randn(next_action.shape, generator=g)
        eps = (eps * hp.policy_noise).clamp(-hp.noise_clip, hp.noise_clip)
        next_action = (next_action + eps).clamp(-1.0, 1.0)
        q_next = torch.stack([_q(n[f"{q}_target"], next_obs, next_action) for q in ("q1", "q2")])
        target = reward + hp.gamma * (1.0 - term) * q_next.min(0).values
    q_loss = sum(((_q(n[q], obs, action) - target) ** 2).mean() for q in ("q1", "q2"))
    _step(ref.optims["critic"], q_loss)
    if ref.updates % hp.policy_delay == 0:
        _step(ref.optims["actor"], -_q(n["q1"], obs, _deterministic(n["actor"], obs)).mean())
        _polyak([(n[f"{x}_target"], n[x]) for x in ("actor", "q1", "q2")], hp.tau)
    ref.updates += 1


def _twins(algo, trading_env):
    hp = {"learning_starts": 10**9, "buffer_size": 256, "batch_size": 32}
    hp |= {"actor_hidden": [32, 16], "critic_hidden": [32, 16]}
    agents = []
    for _ in range(2):
        agent = make_agent(algo, hp, trading_env.obs_dim, trading_env.action_dim, "cpu", 3)
        agent.reset_rollout()
        agent.learn(trading_env, 64)  # random actions only: the same buffer in both
        agents.append(agent)
    return agents[0], Reference(agents[1])


def _fast_update(agent) -> None:
    """One gradient step of the agent's own (batched) update."""
    agent.population._update([True], None)
    agent.updates += 1


def _assert_same_weights(fast, ref):
    a, b = fast.weights(), ref.weights()
    assert a.keys() == b.keys()
    for key in a:
        assert torch.allclose(a[key], b[key], rtol=1e-4, atol=1e-6), key


def _assert_moved(before, after):
    """Every network (targets included) changed: the comparison is not of idle agents."""
    for net in {k.split(".")[0] for k in after}:
        keys = [k for k in after if k.startswith(f"{net}.")]
        assert any(not torch.equal(before[k], after[k]) for k in keys), net


def test_sac_update_matches_the_reference_update(trading_env):
    fast, ref = _twins("sac", trading_env)
    before = {k: v.clone() for k, v in fast.weights().items()}
    for _ in range(3):
        _fast_update(fast)
        _reference_sac_update(ref)
    _assert_same_weights(fast, ref)
    _assert_moved(before, fast.weights())


def test_td3_update_matches_the_reference_update(trading_env):
    fast, ref = _twins("td3", trading_env)
    before = {k: v.clone() for k, v in fast.weights().items()}
    for _ in range(4):  # two delayed actor steps
        _fast_update(fast)
        _reference_td3_update(ref)
    _assert_same_weights(fast, ref)
    _assert_moved(before, fast.weights())
