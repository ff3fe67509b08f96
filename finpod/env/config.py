"""``EnvConfig``: every knob of the trading MDP, validated once, when it is made (frozen:
whoever holds one, the env, a pod or the backtest, trusts it without checking it again)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import torch

from finpod.env.cross_features import check_cross_features
from finpod.env.field_types import check_field_types
from finpod.env.observed import check_user_features_setting
from finpod.errors import FinpodError

ACTION_MODES = ("shares", "weights", "active")
FILL_PRICES = ("open", "close")
REWARDS = (
    "value_change",
    "log_return",
    "differential_sharpe",
    "drawdown_penalty",
    "active_log_return",
    "active_differential_sharpe",
)
#: Rewards measured against the reference account (see ``EnvConfig.reward``).
ACTIVE_REWARDS = ("active_log_return", "active_differential_sharpe")
STARTS = ("cash", "reference")
#: Built-in reference portfolio (anything else in ``EnvConfig.reference`` is a file path).
EQUAL_WEIGHT = "equal_weight"
DTYPES = {"float32": torch.float32, "float64": torch.float64}
BAND_TARGETS = ("edge", "target")
COST_MODELS = ("linear", "sqrt")
#: Regular session of NYSE/NASDAQ in minutes after midnight (New York): 09:30 and 16:00.
SESSION_OPEN_MIN, SESSION_CLOSE_MIN = 9 * 60 + 30, 16 * 60
#: The execution controls (how an agent's actions become orders, the same in training,
#: validation and backtest), each with its neutral value: the control off, which is also
#: its default. The one list read by :meth:`EnvConfig.without_controls`, the backtest's
#: rule-based benchmarks (which trade without them) and the tournament's ``[search.env]``
#: (which searches only them).
EXECUTION_CONTROLS: tuple[tuple[str, Any], ...] = (
    ("decision_interval", 1),
    ("decision_times", ()),
    ("no_trade_band", 0.0),
    ("band_target", "edge"),
    ("partial_adjustment", 1.0),
    ("turnover_penalty", 0.0),
    ("flat_at_close", False),
)
#: Example values for the hint of a field whose default is no example (``None``, 1).
EXAMPLES = {"episode_length": 252, "calendar_features": "true", "decision_interval": 5}


@dataclass(frozen=True)
class EnvConfig:
    """Trading MDP settings shared by training, validation and backtest rollouts."""

    initial_cash: float = 1_000_000.0
    """Starting cash of every episode, in dollars."""
    action_mode: str = "shares"
    """``"shares"``: action a ∈ [-1, 1]^N trades trunc(a · max_shares) shares per ticker;
    ``"weights"``: a is a target portfolio (long-only weights clip(a, 0, 1), normalized to
    sum ≤ 1; with ``allow_short`` a / max(1, Σ|a|)), sized at the close of the decision bar;
    ``"active"``: a is a vector of active tilts around the ``reference`` portfolio r (its
    weights at the decision bar); zero action targets r exactly. Target weights w, built
    from a in this order: the common part ā = mean of a over the reference's eligible names
    (tradable, priced and buyable at the bar) is removed; each name's tilt is
    ``max_active_weight · clip(a_i − ā, −1, 1)`` (0 on names not eligible); long-only
    (unless ``allow_short``) a tilt never takes a weight below 0; the positive and negative
    tilts are scaled to the same total so the tilts are self-financing (Σw = Σr); a
    negative ā is the only way to cash: ``c = max_cash_weight · clip(−ā, 0, 1)`` scales
    every stock weight by (1 − c); finally the active share ½(Σ|w_i − r_i| + cash tilt) is
    scaled down to at most ``active_budget``. So with ``max_cash_weight = 0``,
    w ≥ 0 and |w_i − r_i| ≤ ``max_active_weight`` for every name. The target is then traded
    like a ``"weights"`` target (every execution control applies to the resulting order)."""
    max_shares: int = 100
    """Largest order per ticker and step in ``"shares"`` mode, in shares."""
    fill_price: str = "open"
    """Price of bar t+1 at which an order decided at bar t fills: ``"open"`` or ``"close"``."""
    cost_rate: float = 0.002
    """Proportional transaction cost charged on traded notional (0.002 = 0.2 %)."""
    slippage: float = 0.0
    """Adverse price move on every fill: buys at price·(1+slippage), sells at price·(1−slippage)."""
    cost_model: str = "linear"
    """``"linear"``: fills pay ``cost_rate`` (and ``slippage``); ``"sqrt"``: besides those, a
    square-root market impact (:mod:`finpod.env.impact`) from the dataset's past bars."""
    impact_coefficient: float = 1.0
    """Y of the square-root law (``cost_model = "sqrt"``): a fill of Q dollars costs
    Y · σ · √(Q / ADV) × Q, σ the daily volatility, ADV the average daily traded value
    (dollars) over the last 20 sessions. Estimates for equities: Y ≈ 0.5–1 (at Y = 1, 1 %
    of ADV in a stock moving 2 % a day costs 0.2 % of the order)."""
    allow_short: bool = False
    """Let sells exceed holdings (negative holdings)."""
    allow_negative_cash: bool = False
    """Let buys exceed available cash (borrowing); otherwise buys are scaled down to cash."""
    integer_shares: bool = True
    """Trade whole shares only (orders are truncated toward zero)."""
    reward: str = "value_change"
    """``"value_change"``: ΔV / initial_cash; ``"log_return"``: log(V'/V);
    ``"differential_sharpe"``: Moody & Saffell's differential Sharpe ratio of bar returns;
    ``"drawdown_penalty"``: ΔV / initial_cash − drawdown_weight · increase of drawdown;
    ``"active_log_return"``: log(V'/V) − log(R'/R), the account's log return minus the
    reference account's (units: log return per bar, ≈ active return in fractions of
    capital); ``"active_differential_sharpe"``: the differential Sharpe ratio of the bar's
    active simple return (V'/V − 1) − (R'/R − 1), a differential information ratio (the
    risk-adjusted option; unitless per bar). The reference account R is what a zero action
    would hold in ``"active"`` mode: the ``reference`` portfolio, started like the agent
    (``start``) and traded through the same execution controls, fills and costs, so both
    returns are after their own costs and a zero action earns exactly 0."""
    reward_scale: float = 100.0
    """Multiplier on the reward (100 → one reward unit per 1 % of initial cash)."""
    sharpe_decay: float = 0.01
    """EMA rate η of the differential Sharpe ratio (≈ 1 / horizon in bars)."""
    drawdown_weight: float = 1.0
    """Weight of the drawdown increase in the ``"drawdown_penalty"`` reward."""
    episode_length: int | None = None
    """Decision steps per episode; ``None`` = the whole split (T − 1 steps)."""
    start: str = "cash"
    """How every episode starts: ``"cash"`` (all initial cash) or ``"reference"``: invested at
    the ``reference`` portfolio's weights at the start bar (whole shares of
    w · initial_cash / mark at the start bar's close, the rest in cash), an endowment that
    pays no transaction cost. Rule-based benchmarks in the backtest start the same way."""
    reference: str = EQUAL_WEIGHT
    """The reference portfolio of ``"active"`` mode, the active rewards and
    ``start = "reference"``: ``"equal_weight"`` (equal weight of the names tradable, priced
    and buyable at the bar, point in time; daily bars rebalance every bar, intraday bars at
    each session's first bar and drift with prices in between), or the path of a CSV or
    Parquet file of weights over time: a ``timestamp`` (or ``date``) column and one column
    per ticker, weights ≥ 0 summing to ≤ 1 per row (the rest is cash); a row applies from
    the first bar at or after its timestamp (naive times are New York). At each bar weight
    on names not tradable or not buyable is spread over the others in proportion."""
    max_active_weight: float = 0.05
    """``"active"`` mode: largest tilt of one name away from its reference weight, in
    portfolio weight (0.05 = 5 percentage points)."""
    active_budget: float = 0.5
    """``"active"`` mode: active-risk budget as a cap on the active share
    ½(Σ_i |w_i − r_i| + cash tilt), in portfolio weight: 0 = always the reference,
    1 = unconstrained. It bounds the target and, under a no-trade band or partial
    adjustment, the weights each order leaves the account with."""
    max_cash_weight: float = 0.0
    """``"active"`` mode: largest cash tilt, as a fraction of the reference's stock weight
    (0 = the agent is always fully in stocks like its reference; 0.2 = it may hold up to
    20 % extra cash, by giving a negative common action)."""
    dtype: str = "float32"
    """Accounting precision of cash and holdings: ``"float32"`` (fast) or ``"float64"``
    (cent-exact; used by :func:`finpod.env.rollout`). Observations are always float32."""

    # -- execution controls (identical in training, validation scoring and backtest) ----
    decision_interval: int = 1
    """Act every k bars and hold in between. The env still steps bar by bar (per-bar
    returns, fills and marks are recorded as before); an action given on a bar that is not
    a decision bar is ignored (no order). Decision bars: intraday, bars ``0, k, 2k, …`` of
    each session (counted from the exchange open); daily, bars ``0, k, 2k, …`` of the split."""
    decision_times: list[str] = field(default_factory=list)
    """Intraday only: decide only at these times of the session (``"HH:MM"``, New York),
    e.g. ``["09:35", "15:50"]``: at the first bar of each session whose *end* (when its
    close is known) is at or after each time. Empty = every bar (or every
    ``decision_interval`` bars; the two cannot be combined)."""
    no_trade_band: float = 0.0
    """No-trade band. ``"weights"`` mode: only tickers whose target weight differs from the
    current weight (position / account value at the decision bar) by more than the band
    trade; the others keep their shares exactly (0.02 = 2 percentage points). ``"shares"``
    mode: a dead zone on the action, |a| ≤ band orders nothing (band in units of
    ``max_shares``: 0.1 with max_shares 100 drops orders of 10 shares or fewer), so a
    policy whose output hovers near 0 holds still. 0 = off."""
    band_target: str = "edge"
    """Weights mode with a band: a ticker outside the band trades to the band's ``"edge"``
    (target ± band, the nearest point of the band; optimal under proportional costs) or all
    the way to the ``"target"``."""
    partial_adjustment: float = 1.0
    """Fraction f ∈ (0, 1] of the way to move toward the target each decision: weights mode
    orders f × (target weight − current weight) × value / price shares (after the band);
    shares mode scales the order: it trades trunc(a · max_shares · f) shares. Whole shares
    are truncated toward zero. 1 = move all the way."""
    turnover_penalty: float = 0.0
    """Explicit turnover cost in the reward only (the account is charged ``cost_rate``
    anyway): subtracted from the unscaled reward as ``turnover_penalty × turnover``, where
    turnover = traded notional / account value before the trade. Units: unscaled reward per
    unit of turnover, i.e. with ``value_change`` or ``log_return`` a fraction of capital per
    unit of turnover (0.002 charges a second 0.2 % on every traded dollar, in the reward
    only). Then multiplied by ``reward_scale`` like the rest of the reward."""
    flat_at_close: bool = False
    """Intraday only: end every session in cash. At the session's second-to-last bar the env
    replaces the agent's action with an order to sell everything; it fills at the last bar
    of the session (its open or close, per ``fill_price``), never at a price already seen.
    At the last bar the agent cannot buy (an order would fill overnight); a position whose
    sell could not fill (ticker not tradable) is sold at the next fill possible."""
    calendar_features: bool | None = None
    """Add the causal ``calendar`` slice to the observation (time of day, bars left in the
    session, first bar after the overnight gap). ``None`` = on for intraday bars, off for
    daily bars; ``True`` on daily bars is an error."""
    price_window: int = 20
    """W, in bars: the ``prices`` slice of the observation is log(mark) minus the mean of
    log(mark) over the last W bars, divided by the RMS 1-bar log return over those bars
    × √W (a causal z-score of the price against its trailing mean, comparable across
    splits and bar sizes)."""
    user_features: list[str] | None = None
    """The dataset's user feature columns observed, in this order (:mod:`finpod.env.observed`);
    ``None`` = all the dataset has, ``[]`` = none; a name the dataset lacks is an error."""
    cross_features: list[str] = field(default_factory=list)
    """Cross-sectional per-ticker features (:mod:`finpod.env.cross_features`); [] = off."""
    train_bootstrap_block: int = 0
    """Block length of the train split's bootstrap (:mod:`finpod.env.bootstrap`); 0 = off."""

    def __post_init__(self) -> None:
        """Raise :class:`FinpodError` naming the first bad field; normalize the rest."""
        normalize = object.__setattr__  # while it is made; frozen afterwards
        check_field_types(self, EXAMPLES)
        _choice("action_mode", self.action_mode, ACTION_MODES)
        _choice("fill_price", self.fill_price, FILL_PRICES)
        _choice("reward", self.reward, REWARDS)
        _choice("dtype", self.dtype, tuple(DTYPES))
        _choice("start", self.start, STARTS)
        _choice("cost_model", self.cost_model, COST_MODELS)
        if not self.impact_coefficient >= 0.0:
            raise FinpodError(
                f"env.impact_coefficient must be ≥ 0, got {self.impact_coefficient}",
                "e.g. impact_coefficient = 0.7 (the square-root law's Y, usually 0.5–1)",
            )
        _check_reference(self.reference)
        for name, hint in (
            ("max_active_weight", "e.g. max_active_weight = 0.02 (2 percentage points)"),
            ("active_budget", "e.g. active_budget = 0.3 (active share of 30 %)"),
            ("max_cash_weight", "e.g. max_cash_weight = 0.2, or 0 to stay invested"),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise FinpodError(f"env.{name} must be a number in [0, 1], got {value!r}", hint)
            if not 0.0 <= value <= 1.0:
                raise FinpodError(f"env.{name} must be in [0, 1], got {value}", hint)
        if not self.initial_cash > 0:
            raise FinpodError(
                f"env.initial_cash must be > 0, got {self.initial_cash}",
                "set a positive starting capital",
            )
        if int(self.max_shares) != self.max_shares or self.max_shares < 1:
            raise FinpodError(
                f"env.max_shares must be an integer ≥ 1, got {self.max_shares}",
                "e.g. max_shares = 100",
            )
        for name in ("cost_rate", "slippage"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise FinpodError(
                    f"env.{name} must be in [0, 1), got {value}", "e.g. cost_rate = 0.002"
                )
        if not self.reward_scale > 0:
            raise FinpodError(f"env.reward_scale must be > 0, got {self.reward_scale}")
        if not 0.0 < self.sharpe_decay < 1.0:
            raise FinpodError(f"env.sharpe_decay must be in (0, 1), got {self.sharpe_decay}")
        if self.drawdown_weight < 0:
            raise FinpodError(f"env.drawdown_weight must be ≥ 0, got {self.drawdown_weight}")
        normalize(self, "user_features", check_user_features_setting(self.user_features))
        _int_at_least("decision_interval", self.decision_interval, 1, "e.g. decision_interval = 5")
        _int_at_least("price_window", self.price_window, 2, "e.g. price_window = 20")
        normalize(self, "decision_interval", int(self.decision_interval))  # a search: 5.0
        normalize(self, "price_window", int(self.price_window))
        normalize(self, "cross_features", check_cross_features(self.cross_features))
        _int_at_least("train_bootstrap_block", self.train_bootstrap_block, 0, "e.g. 20 bars")
        if isinstance(self.decision_times, str) or not isinstance(
            self.decision_times, (list, tuple)
        ):
            raise FinpodError(
                f'env.decision_times must be a list of "HH:MM" times, got {self.decision_times!r}',
                'e.g. decision_times = ["09:35", "15:50"]',
            )
        normalize(self, "decision_times", [str(x) for x in self.decision_times])
        decision_minutes(self.decision_times)  # validates the format
        if self.decision_times and self.decision_interval != 1:
            raise FinpodError(
                "env.decision_times and env.decision_interval > 1 cannot be combined",
                "set one of them (decision_interval = 1 with decision_times)",
            )
        if not 0.0 <= self.no_trade_band < 1.0:
            raise FinpodError(
                f"env.no_trade_band must be in [0, 1), got {self.no_trade_band}",
                "e.g. no_trade_band = 0.02 (2 percentage points of weight)",
            )
        _choice("band_target", self.band_target, BAND_TARGETS)
        if not 0.0 < self.partial_adjustment <= 1.0:
            raise FinpodError(
                f"env.partial_adjustment must be in (0, 1], got {self.partial_adjustment}",
                "e.g. partial_adjustment = 0.5 (half way to the target)",
            )
        if not self.turnover_penalty >= 0.0:
            raise FinpodError(
                f"env.turnover_penalty must be ≥ 0, got {self.turnover_penalty}",
                "e.g. turnover_penalty = 0.002",
            )
        if not isinstance(self.flat_at_close, bool):
            raise FinpodError(
                f"env.flat_at_close must be true or false, got {self.flat_at_close!r}"
            )
        if self.calendar_features is not None and not isinstance(self.calendar_features, bool):
            raise FinpodError(
                f"env.calendar_features must be true, false or unset, got "
                f"{self.calendar_features!r}"
            )
        if self.episode_length is not None and (
            int(self.episode_length) != self.episode_length or self.episode_length < 1
        ):
            raise FinpodError(
                f"env.episode_length must be a positive integer, got {self.episode_length}",
                "e.g. episode_length = 252, or leave it out for the whole split",
            )

    @property
    def has_schedule(self) -> bool:
        """Whether some bars are not decision bars (interval, times or flat-at-close)."""
        return self.decision_interval > 1 or bool(self.decision_times) or self.flat_at_close

    def without_controls(self) -> EnvConfig:
        """The same market settings (capital, costs, fills) with every execution control
        (:data:`EXECUTION_CONTROLS`) at its neutral value, e.g. for rule-based benchmarks
        that must trade as written."""
        return replace(self, **dict(EXECUTION_CONTROLS))

    @property
    def uses_reference(self) -> bool:
        """Whether the env needs the reference portfolio (active mode or reward, or start)."""
        return (
            self.action_mode == "active"
            or self.reward in ACTIVE_REWARDS
            or self.start == "reference"
        )

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> EnvConfig:
        """Build from a mapping (e.g. a strategy file's ``[env]`` table); unknown keys fail.

        Keys that are missing take their defaults, so settings recorded before a field
        existed still load (and mean what they meant: every default is "off")."""
        _check_known(cls, values)
        return cls(**values)

    def with_options(self, **options: Any) -> EnvConfig:
        """A new config: this one with ``options`` set (e.g. a pod's searched execution
        controls), validated like :meth:`from_dict`; ``self`` is left as it is."""
        if not options:
            return self
        _check_known(type(self), options)
        return replace(self, **options)


def _check_known(cls: type[EnvConfig], values: dict[str, Any]) -> None:
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise FinpodError(
            f"unknown env setting {unknown[0]!r}", f"known settings: {', '.join(sorted(known))}"
        )


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise FinpodError(
            f"env.{name} = {value!r} is not valid", f"use one of {', '.join(allowed)}"
        )


def _check_reference(value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise FinpodError(
            f"env.reference must be {EQUAL_WEIGHT!r} or a file path, got {value!r}",
            'e.g. reference = "equal_weight"',
        )
    if value == EQUAL_WEIGHT:
        return
    if not value.lower().endswith((".csv", ".parquet", ".pq")):
        raise FinpodError(
            f"env.reference {value!r} is neither {EQUAL_WEIGHT!r} nor a .csv/.parquet file",
            'use "equal_weight" or a CSV/Parquet file of weights over time',
        )


def _int_at_least(name: str, value: Any, low: int, hint: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise FinpodError(f"env.{name} must be an integer ≥ {low}, got {value!r}", hint)
    if value < low:
        raise FinpodError(f"env.{name} must be an integer ≥ {low}, got {value!r}", hint)


_HHMM = re.compile(r"^(\d{1,2}):(\d{2})$")


def decision_minutes(times: list[str]) -> list[int]:
    """Minutes after midnight of ``"HH:MM"`` times, each inside the regular session."""
    out = []
    for text in times:
        m = _HHMM.match(str(text).strip())
        minutes = int(m.group(1)) * 60 + int(m.group(2)) if m else -1
        if not m or int(m.group(2)) > 59 or not SESSION_OPEN_MIN < minutes <= SESSION_CLOSE_MIN:
            raise FinpodError(
                f"env.decision_times entry {text!r} is not a time of the session",
                'use "HH:MM" between 09:31 and 16:00, e.g. "09:35"',
            )
        out.append(minutes)
    return sorted(set(out))
