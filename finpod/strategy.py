"""Strategy files: one TOML file says which agent to train, on which env, for how long.

::

    name = "ppo-default"                 # optional
    [agent]
    algorithm = "ppo"                    # ppo | a2c | sac | td3 | ddpg
    [agent.hparams]                      # fields of the algorithm's hyperparameter dataclass
    learning_rate = 3e-4
    [env]                                # fields of finpod.env.EnvConfig
    cost_rate = 0.002
    [train]                              # see TrainSpec
    num_envs = 64
    total_steps = 200_000
    [tournament]                         # handed as-is to the tournament layer
    [search]                             # handed as-is to the tournament layer

Every key is checked when the file is loaded: an unknown key or a bad value raises
:class:`FinpodError` naming it (``train.num_envs must be …``). The keys and the ``[train]``
table are checked first, by :func:`check_tables`, which needs neither torch nor pandas: a
command refuses a mistyped key before it loads either.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finpod.errors import FinpodError
from finpod.grammar import check_seed, parse_device
from finpod.runs.toml_writer import toml_dumps
from finpod.scores import DEFAULT_SCORE, SCORES

if TYPE_CHECKING:
    from finpod.env import EnvConfig

TOP_LEVEL_KEYS = ("name", "description", "agent", "env", "train", "tournament", "search")
AGENT_KEYS = ("algorithm", "hparams")

# The key names of the tables typed by torch-side dataclasses, kept here as names so that a
# file's keys are checked before torch loads (:func:`check_tables`); the dataclasses stay
# the one definition of their values (tests/test_fast_refusals.py pins the names to them).
_NET_KEYS = ("net", "ticker_features")
_ON_POLICY_KEYS = (
    *_NET_KEYS,
    *("learning_rate", "horizon", "gamma", "gae_lambda", "norm_adv", "ent_coef", "vf_coef"),
    *("max_grad_norm", "log_std_init", "actor_hidden", "critic_hidden"),
)
_OFF_POLICY_KEYS = (
    *_NET_KEYS,
    *("actor_lr", "critic_lr", "gamma", "tau", "batch_size", "buffer_size", "learning_starts"),
    *("gradient_steps", "actor_hidden", "critic_hidden"),
)
_DDPG_KEYS = (*_OFF_POLICY_KEYS, "exploration_noise")
#: Algorithm → (its hyperparameter dataclass's name, the keys of its ``[agent.hparams]``).
HPARAM_KEYS: dict[str, tuple[str, tuple[str, ...]]] = {
    "a2c": ("A2CParams", _ON_POLICY_KEYS),
    "ddpg": ("DDPGParams", _DDPG_KEYS),
    "ppo": (
        "PPOParams",
        (
            *_ON_POLICY_KEYS,
            *("update_epochs", "minibatch_size", "minibatches_per_epoch", "clip_coef"),
            *("clip_vloss", "target_kl"),
        ),
    ),
    "sac": ("SACParams", (*_OFF_POLICY_KEYS, "alpha_lr", "init_alpha", "autotune")),
    "td3": ("TD3Params", (*_DDPG_KEYS, "policy_noise", "noise_clip", "policy_delay")),
}
#: The keys of ``[env]`` (the fields of :class:`finpod.env.EnvConfig`).
ENV_KEYS = (
    *("initial_cash", "action_mode", "max_shares", "fill_price", "cost_rate", "slippage"),
    *("cost_model", "impact_coefficient", "allow_short", "allow_negative_cash"),
    *("integer_shares", "reward", "reward_scale", "sharpe_decay", "drawdown_weight"),
    *("episode_length", "start", "reference", "max_active_weight", "active_budget"),
    *("max_cash_weight", "dtype", "decision_interval", "decision_times", "no_trade_band"),
    *("band_target", "partial_adjustment", "turnover_penalty", "flat_at_close"),
    *("calendar_features", "price_window", "user_features", "cross_features"),
    "train_bootstrap_block",
)


@dataclass(frozen=True)
class TrainSpec:
    """The ``[train]`` table: budget and execution settings of one training run (frozen:
    validated once, when made; :meth:`Strategy.with_train` makes a changed copy)."""

    num_envs: int = 64
    """Parallel envs the agent collects from."""
    total_steps: int = 200_000
    """Env steps to train for (summed over parallel envs)."""
    eval_every: int = 20_000
    """Env steps between validation evaluations (and checkpoints)."""
    seed: int = 0
    """Seed of networks, exploration and env resets: 0 to 2**32 − 1
    (:data:`finpod.grammar.MAX_SEED`)."""
    device: str = "auto"
    """``auto``, ``cpu``, ``cuda`` or ``cuda:K`` (:func:`finpod.grammar.parse_device`)."""
    score: str = DEFAULT_SCORE
    """Validation score used to select checkpoints: sharpe | sortino | calmar | return |
    information_ratio (:data:`finpod.scores.SCORES`)."""

    def __post_init__(self) -> None:
        for key in ("num_envs", "total_steps", "eval_every"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                example = next(f.default for f in dataclasses.fields(self) if f.name == key)
                raise FinpodError(
                    f"train.{key} must be a positive integer, got {value!r}",
                    f"e.g. {key} = {example}",
                )
        if isinstance(self.seed, str):  # a seed is a number, never its text
            raise FinpodError(f"train.seed must be a whole number, got {self.seed!r}", "e.g. 0")
        check_seed(self.seed, "train.seed")
        try:
            parse_device(self.device)
        except FinpodError as err:
            raise FinpodError(f"train.device = {self.device!r} is not valid", err.hint) from None
        if self.score not in SCORES:
            raise FinpodError(
                f"train.score = {self.score!r} is not valid", f"use one of {', '.join(SCORES)}"
            )


@dataclass(frozen=True)
class Strategy:
    """A validated strategy file (frozen: read and checked once; :meth:`with_train` and
    ``dataclasses.replace`` make changed copies, checked again).

    Attributes:
        algorithm: registry name of the agent.
        hparams: the agent's full hyperparameters (defaults filled in), as a plain dict.
        config: the env settings (:class:`~finpod.env.EnvConfig`), typed and validated when
            the file is read: the one form of them that training, the tournament's pods and
            the backtest are given (``config.to_dict()`` is the table a run records).
        train: budget and execution settings.
        tournament, search: raw tables for the tournament layer.
        name, description: free text.
        path: the file it was read from (None if built in code).
    """

    algorithm: str
    hparams: dict[str, Any]
    config: EnvConfig
    train: TrainSpec
    tournament: dict[str, Any] = field(default_factory=dict)
    search: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    description: str = ""
    path: Path | None = None

    def with_train(self, **overrides: Any) -> Strategy:
        """This strategy with ``[train]`` settings replaced (e.g. ``--seed``, ``--steps``),
        validated like the file's."""
        return dataclasses.replace(self, train=dataclasses.replace(self.train, **overrides))

    def to_dict(self) -> dict[str, Any]:
        """The resolved strategy as plain data (what ``run.json`` records)."""
        out: dict[str, Any] = {}
        if self.name:
            out["name"] = self.name
        if self.description:
            out["description"] = self.description
        out["agent"] = {"algorithm": self.algorithm, "hparams": dict(self.hparams)}
        out["env"] = self.config.to_dict()
        out["train"] = dataclasses.asdict(self.train)
        if self.tournament:
            out["tournament"] = self.tournament
        if self.search:
            out["search"] = self.search
        return out

    def to_toml(self) -> str:
        """The resolved strategy as TOML text (``None`` values are left out: they are defaults)."""
        return toml_dumps(self.to_dict())


def check_tables(raw: dict[str, Any], path: Path | None = None) -> TrainSpec:
    """Check a parsed strategy mapping's keys, its algorithm and its ``[train]`` table, with
    neither torch nor pandas loaded: the first refusal of :func:`strategy_from_dict`, so a
    command says a mistyped key before it loads anything heavy. Returns the ``[train]``
    table typed. The values of ``[agent.hparams]`` and ``[env]`` are checked by
    :func:`strategy_from_dict`, which builds them."""
    where = f" in {path}" if path else ""
    bad = _non_finite(raw)
    if bad is not None:
        # TOML allows nan and inf; no knob of a strategy means either.
        raise FinpodError(f"{bad}{where} is not a finite number", "give a finite value")
    _unknown(raw, TOP_LEVEL_KEYS, "", where)
    agent = _table(raw, "agent", where)
    _unknown(agent, AGENT_KEYS, "agent.", where)
    algorithm = agent.get("algorithm", "ppo")
    if not isinstance(algorithm, str) or algorithm not in HPARAM_KEYS:
        raise FinpodError(
            f"agent.algorithm = {algorithm!r}{where} is not known",
            f"use one of {', '.join(sorted(HPARAM_KEYS))}",
        )
    hp_table = agent.get("hparams", {})
    if not isinstance(hp_table, dict):
        raise FinpodError(f"agent.hparams{where} must be a table", "write [agent.hparams]")
    params, fields = HPARAM_KEYS[algorithm]
    unknown = sorted(set(hp_table) - set(fields))
    if unknown:  # build_hparams's words
        raise FinpodError(
            f"unknown key agent.hparams.{unknown[0]!r} for {params}",
            f"valid keys: {', '.join(sorted(fields))}",
        )
    unknown = sorted(set(_table(raw, "env", where)) - set(ENV_KEYS))
    if unknown:  # EnvConfig.from_dict's words
        raise FinpodError(
            f"unknown env setting {unknown[0]!r}", f"known settings: {', '.join(sorted(ENV_KEYS))}"
        )
    train_table = _table(raw, "train", where)
    known = [f.name for f in dataclasses.fields(TrainSpec)]
    _unknown(train_table, known, "train.", where)
    train = TrainSpec(**train_table)
    for key in ("name", "description"):
        if not isinstance(raw.get(key, ""), str):
            raise FinpodError(f"{key}{where} must be a string", f'e.g. {key} = "my strategy"')
    _table(raw, "tournament", where)
    _table(raw, "search", where)
    return train


def strategy_from_dict(raw: dict[str, Any], path: Path | None = None) -> Strategy:
    """Validate a parsed strategy mapping (see the module docstring): its keys first
    (:func:`check_tables`), then the values of its typed tables."""
    # lazy: torch loads only once the keys are known to be right (check_tables needs none)
    from finpod.agents import ALGORITHMS
    from finpod.agents.hparams import build_hparams
    from finpod.env import EnvConfig

    where = f" in {path}" if path else ""
    train = check_tables(raw, path)
    agent = _table(raw, "agent", where)
    algorithm = agent.get("algorithm", "ppo")
    hp_table = agent.get("hparams", {})
    hparams = build_hparams(ALGORITHMS[algorithm][0], hp_table, where="agent.hparams")
    config = EnvConfig.from_dict(_table(raw, "env", where))
    return Strategy(
        algorithm=algorithm,
        hparams=dataclasses.asdict(hparams),
        config=config,
        train=train,
        tournament=_table(raw, "tournament", where),
        search=_table(raw, "search", where),
        name=raw.get("name", ""),
        description=raw.get("description", ""),
        path=path,
    )


def load_strategy(path: str | Path) -> Strategy:
    """Read and validate the strategy TOML file at ``path``."""
    path = Path(path)
    if not path.is_file():
        raise FinpodError(f"strategy file {path} does not exist", "see strategies/ for examples")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise FinpodError(
            f"strategy file {path} is not UTF-8 text (byte 0x{err.object[err.start]:02x} at "
            f"position {err.start})",
            "save it as UTF-8",
        ) from err
    except OSError as err:
        raise FinpodError(
            f"cannot read strategy file {path}: {err.strerror or err}", "check its permissions"
        ) from err
    except tomllib.TOMLDecodeError as err:
        raise FinpodError(
            f"strategy file {path} is not valid TOML: {err}", "fix the syntax"
        ) from err
    return strategy_from_dict(raw, path)


def as_strategy(strategy: Strategy | str | Path) -> Strategy:
    """``strategy`` as is when it is already read, else the file it names read: a command
    reads its strategy file once and hands the :class:`Strategy` down."""
    return strategy if isinstance(strategy, Strategy) else load_strategy(strategy)


def _non_finite(table: Any, prefix: str = "") -> str | None:
    """Dotted key of the first nan or ±inf number in a parsed TOML table, or None."""
    items = table.items() if isinstance(table, dict) else enumerate(table)
    for key, value in items:
        name = f"{prefix}{key}" if isinstance(table, dict) else f"{prefix[:-1]}[{key}]"
        if isinstance(value, float) and not math.isfinite(value):
            return f"{name} = {value}"
        if isinstance(value, dict | list):
            found = _non_finite(value, f"{name}.")
            if found:
                return found
    return None


def _table(raw: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise FinpodError(f"{key}{where} must be a table", f"write [{key}]")
    return value


def _unknown(table: dict[str, Any], known: Any, prefix: str, where: str) -> None:
    extra = sorted(set(table) - set(known))
    if extra:
        raise FinpodError(
            f"unknown key {prefix}{extra[0]!r}{where}",
            f"valid keys here: {', '.join(sorted(known))}",
        )
