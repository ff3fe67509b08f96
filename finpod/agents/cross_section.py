"""Cross-sectional policies: one small network applied to every ticker, with context.

Tilting a universe is the same decision for every name, in the context of the others. A
flat MLP over all N tickers has to learn that decision N times and memorises the training
path instead; the cross-sectional family shares it:

::

    token_i = [N · w_i, z_i, f_i1 … f_iF]            per ticker (from the observation)
    g       = [log value, cash, calendar…, schedule]   per env (the rest of the observation)
    h_i     = encoder([token_i, g])                    shared weights, ReLU after every layer
    c       = masked mean of h_i over listed tickers   cross-sectional context
    μ_i     = head([h_i, c])                            the per-ticker tilt (mean action)
    V       = value_head([c, max_i h_i, g])             the critic on the pooled state

Every algorithm uses it: PPO and A2C (a Gaussian tilt per ticker, one shared log std),
SAC (a squashed Gaussian: the head gives each ticker a mean and a log std), TD3 and DDPG
(a deterministic ``tanh(μ_i)``), and the off-policy Q networks, whose tokens carry each
ticker's action: ``Q(s, a) = value_head([c, max_i h_i, g])`` with
``h_i = encoder([token_i, a_i, g])``.

``w_i`` is the ticker's portfolio weight (times N, so an equal-weight holding reads 1),
``z_i`` its causal price z-score and ``f_i·`` its features (the observation layout of
:mod:`finpod.env.core`). A ticker whose whole token is 0 is not listed at that bar (no
price, no feature, no holding): it is left out of the context and gets a zero mean action
(the env gives unlisted names no weight). Permuting the tickers permutes the μ_i and
leaves V unchanged; the network's size does not depend on N.

Everything here is written once, over a leading member axis ``K``: parameters are
``(K, …)`` tensors named as in a single agent's state dict, and a single agent is the
case ``K = 1`` (:class:`CrossSectionalActor` and :class:`CrossSectionalCritic` only name
and initialise the parameters; :func:`ticker_head` and :func:`pooled_value` compute).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from finpod.agents import batched
from finpod.agents.nets import mlp
from finpod.errors import FinpodError

if TYPE_CHECKING:
    from finpod.env.protocol import VecEnv

#: Network families of every algorithm (the ``net`` hyperparameter): a flat MLP over the whole
#: observation, or the cross-sectional family of this module.
NETS = ("mlp", "cross_sectional")
#: Widths of the optional tail of the observation after the per-ticker slices: the
#: intraday calendar (3) and the decision-schedule flag (1) (see ``ObsLayout``).
_TAIL_WIDTHS = (0, 1, 3, 4)


@dataclass(frozen=True)
class TickerLayout:
    """Where the per-ticker and per-env parts sit in a flat observation.

    ``obs = [log value, cash, weights (N), price z (N), features (N·F, ticker-major),
    tail (0/1/3/4)]``.
    """

    num_stocks: int
    num_features: int
    tail: int

    @property
    def token_dim(self) -> int:
        """Width of a ticker's token: weight, price z-score, F features."""
        return 2 + self.num_features

    @property
    def global_dim(self) -> int:
        """Width of the per-env part: log value, cash and the tail."""
        return 2 + self.tail

    @property
    def obs_dim(self) -> int:
        return 2 + self.num_stocks * self.token_dim + self.tail

    @classmethod
    def infer(cls, obs_dim: int, num_stocks: int, num_features: int | None) -> TickerLayout:
        """The layout of an ``obs_dim`` observation over ``num_stocks`` tickers.

        ``num_features`` (features per ticker) may be None when only one value fits
        (always the case with 5 tickers or more); FinpodError when nothing fits or the
        split is ambiguous.
        """
        n = int(num_stocks)
        rest = int(obs_dim) - 2 - 2 * n
        if num_features is not None:
            fits = [int(num_features)]
        else:
            fits = [f for f in range(rest // n + 1) if rest - n * f in _TAIL_WIDTHS]
        fits = [f for f in fits if f >= 0 and rest - n * f in _TAIL_WIDTHS]
        if len(fits) != 1:
            raise FinpodError(
                f"cannot read a {obs_dim}-wide observation over {n} tickers as per-ticker tokens"
                + (" (ambiguous)" if fits else ""),
                'set ticker_features (features per ticker) in the agent\'s hparams, or use net = "mlp"',
            )
        return cls(n, fits[0], rest - n * fits[0])

    def split(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``obs (..., D)`` → tokens ``(..., N, 2 + F)``, per-env part ``(..., 2 + tail)``
        and the listed mask ``(..., N)`` float (1.0 where the token is not all zero)."""
        n, f = self.num_stocks, self.num_features
        lead = obs.shape[:-1]
        weights = obs[..., 2 : 2 + n] * float(n)
        prices = obs[..., 2 + n : 2 + 2 * n]
        feats = obs[..., 2 + 2 * n : 2 + n * (2 + f)].reshape(*lead, n, f)
        tokens = torch.cat([weights.unsqueeze(-1), prices.unsqueeze(-1), feats], dim=-1)
        glob = torch.cat([obs[..., :2], obs[..., 2 + n * (2 + f) :]], dim=-1)
        mask = (tokens.abs().sum(-1) > 0).to(obs.dtype)
        return tokens, glob, mask


# ----- the functions, over a member axis -----------------------------------------------
def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _first_layer(
    per_ticker: torch.Tensor, per_env: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
) -> torch.Tensor:
    """The first layer on ``[per_ticker_i, per_env]`` for every ticker, without copying
    the per-env part N times: ``W_t·x_i + (W_e·e + b)`` with ``W = [W_t | W_e]``.

    ``per_ticker (K, B, N, a)``, ``per_env (K, B, c)``, ``weight (K, H, a + c)``,
    ``bias (K, H)`` → ``(K, B, N, H)``.
    """
    k, b, n, a = per_ticker.shape
    env_part = torch.baddbmm(bias.unsqueeze(1), per_env, weight[:, :, a:].transpose(1, 2))
    out = torch.bmm(per_ticker.reshape(k, b * n, a), weight[:, :, :a].transpose(1, 2))
    return out.view(k, b, n, -1) + env_part.unsqueeze(2)


def _mlp_from(
    first: torch.Tensor, params: dict[str, torch.Tensor], name: str, depth: int
) -> torch.Tensor:
    """Layers 1 … depth − 1 of the network ``name`` after its first layer's output
    ``first (K, B, N, H)``, ReLU between layers (none after the last)."""
    k, b, n, _ = first.shape
    x = first
    for i in range(1, depth):
        x = batched.linear(
            torch.relu(x).reshape(k, b * n, -1),
            params[f"{name}.{2 * i}.weight"],
            params[f"{name}.{2 * i}.bias"],
        ).view(k, b, n, -1)
    return x


def _encode(
    params: dict[str, torch.Tensor],
    prefix: str,
    x: torch.Tensor,
    layout: TickerLayout,
    depth: int,
    action: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``x (K, B, D)`` → encodings ``h (K, B, N, H)`` (≥ 0), per-env part ``(K, B, G)``,
    mask ``(K, B, N)``. With ``action (K, B, N)`` (a Q network), each ticker's token
    also carries its own action."""
    tokens, glob, mask = layout.split(x)
    if action is not None:
        tokens = torch.cat([tokens, action.unsqueeze(-1)], dim=-1)
    name = _join(prefix, "encoder")
    first = _first_layer(tokens, glob, params[f"{name}.0.weight"], params[f"{name}.0.bias"])
    return torch.relu(_mlp_from(first, params, name, depth)), glob, mask


def _masked_mean(h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``h (K, B, N, H)`` over the tickers where ``mask (K, B, N)`` is 1."""
    m = mask.unsqueeze(-1)
    return (h * m).sum(2) / m.sum(2).clamp(min=1.0)


def ticker_head(
    params: dict[str, torch.Tensor], prefix: str, x: torch.Tensor, layout: TickerLayout, depth: int
) -> torch.Tensor:
    """The per-ticker outputs ``(K, B, N, out)`` of the cross-sectional actor ``prefix``
    on ``x (K, B, D)``, 0 for unlisted tickers. ``depth``: linear layers of the encoder
    (``len(actor_hidden)``)."""
    h, _, mask = _encode(params, prefix, x, layout, depth)
    ctx = _masked_mean(h, mask)
    name = _join(prefix, "head")
    first = _first_layer(h, ctx, params[f"{name}.0.weight"], params[f"{name}.0.bias"])
    return _mlp_from(first, params, name, 2) * mask.unsqueeze(-1)


def pooled_value(
    params: dict[str, torch.Tensor],
    prefix: str,
    x: torch.Tensor,
    layout: TickerLayout,
    depth: int,
    action: torch.Tensor | None = None,
) -> torch.Tensor:
    """``(K, B)``: the cross-sectional critic ``prefix`` on ``x (K, B, D)``: V(s), or
    Q(s, a) with ``action (K, B, N)`` (each ticker's token carries its action)."""
    h, glob, mask = _encode(params, prefix, x, layout, depth, action)
    ctx = _masked_mean(h, mask)
    # Max over listed tickers only (encodings are ≥ 0, so an unlisted one reads 0).
    peak = (h * mask.unsqueeze(-1)).amax(2)
    inp = torch.cat([ctx, peak, glob], dim=-1)
    return batched.mlp(inp, params, _join(prefix, "head"), 2, torch.relu).squeeze(-1)


# ----- the networks as modules: they name and initialise the parameters -----------------
def _encoder(
    layout: TickerLayout, hidden: Sequence[int], net: str, extra: int = 0
) -> tuple[nn.Sequential, int]:
    """The per-ticker encoder ``[token (+ action), env state] → H`` of widths ``hidden``."""
    if not hidden:
        raise FinpodError(
            f"the cross-sectional {net} needs hidden widths", f"e.g. {net}_hidden = [32, 32]"
        )
    width = int(hidden[-1])
    inputs = layout.token_dim + extra + layout.global_dim
    return mlp(inputs, hidden[:-1], width, activation=nn.ReLU), width


class CrossSectionalActor(nn.Module):
    """The parameters of a cross-sectional actor: encoder, per-ticker head with
    ``outputs`` values per ticker (one hidden layer of width H), and for PPO/A2C a
    scalar log standard deviation shared by every ticker (``log_std_init`` not None).

    ``hidden``: widths of the per-ticker encoder (its last width is the encoding H).
    The policy itself is :func:`ticker_head`.
    """

    def __init__(
        self,
        layout: TickerLayout,
        hidden: Sequence[int],
        log_std_init: float | None = None,
        outputs: int = 1,
    ) -> None:
        super().__init__()
        self.encoder, width = _encoder(layout, hidden, "actor")
        self.head = mlp(2 * width, (width,), outputs, activation=nn.ReLU, out_gain=0.01)
        if log_std_init is not None:
            self.log_std = nn.Parameter(torch.full((1,), float(log_std_init)))


class CrossSectionalCritic(nn.Module):
    """The parameters of a cross-sectional critic: V(s), or Q(s, a) with ``action``
    (each ticker's token then carries its action). The pooled encodings (mean and max
    over listed tickers) and the per-env part go through a small head
    (:func:`pooled_value`)."""

    def __init__(self, layout: TickerLayout, hidden: Sequence[int], action: bool = False) -> None:
        super().__init__()
        self.encoder, width = _encoder(layout, hidden, "critic", extra=int(action))
        self.head = mlp(2 * width + layout.global_dim, (width,), 1, activation=nn.ReLU)


def hparams_for_env(params_cls: type, hparams: dict[str, Any], env: VecEnv) -> dict[str, Any]:
    """``hparams`` with the network family fitted to ``env`` (algorithms that have one).

    - ``net`` left unset on a benchmark-relative env (``action_mode = "active"``) becomes
      ``"cross_sectional"``: tilting a universe is the same decision per name. Any other
      env keeps the flat MLP unless the strategy names ``net``.
    - ``ticker_features`` of a cross-sectional net is taken from the env's observation
      layout, so the tokens never depend on guessing the observation's split.
    """
    names = {f.name for f in dataclasses.fields(params_cls)}
    if "net" not in names:
        return dict(hparams)
    out = dict(hparams)
    if out.get("net") is None and env.action_mode == "active":
        out["net"] = "cross_sectional"
    layout = env.layout
    if out.get("net") == "cross_sectional" and out.get("ticker_features") is None and layout:
        out["ticker_features"] = int(layout.num_features)
    return out
