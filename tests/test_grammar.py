"""The grammar of option text (:mod:`finpod.grammar`): every value reads back from its own
text exactly, the inputs that were once misread get one answer (and one line), the
command line's early checks are the readers the tournament and the walk-forward use, and
``docs/grammar.md`` shows the table the module generates."""

from __future__ import annotations

import inspect
import re
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from finpod import grammar
from finpod.errors import FinpodError
from finpod.grammar import (
    MAX_COUNT,
    MAX_SEED,
    MAX_SEEDS,
    NANOSECOND,
    Budget,
    Device,
    Length,
    Pods,
    Seeds,
    parse_budget,
    parse_device,
    parse_length,
    parse_pods,
    parse_seeds,
)

REPO = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------ values read back

budgets = st.one_of(
    st.builds(lambda ns: Budget("time", Fraction(ns) * NANOSECOND), st.integers(1, MAX_COUNT)),
    st.builds(Budget, st.sampled_from(["steps", "pods"]), st.integers(1, MAX_COUNT)),
)
lengths = st.builds(
    Length, st.integers(1, MAX_COUNT), st.sampled_from(["y", "mo", "w", "d", "sessions"])
)
seeds = st.one_of(
    st.builds(lambda n: Seeds(tuple(range(n))), st.integers(1, MAX_SEEDS)),
    st.builds(
        lambda v: Seeds(tuple(v)),
        st.lists(st.integers(0, MAX_SEED), min_size=1, max_size=30, unique=True),
    ),
)
pods = st.builds(Pods, st.none() | st.integers(1, MAX_COUNT))
devices = st.sampled_from([Device("auto"), Device("cpu"), Device("cuda")]) | st.builds(
    lambda k: Device("cuda", k), st.integers(0, grammar.MAX_DEVICE_INDEX)
)


@given(budgets)
def test_every_budget_reads_back_from_its_text(budget):
    assert parse_budget(str(budget)) == budget


@given(lengths)
def test_every_window_length_reads_back_from_its_text(length):
    assert parse_length(str(length)) == length


@given(seeds)
def test_every_seed_list_reads_back_from_its_text(value):
    assert parse_seeds(str(value)) == value


@given(pods)
def test_every_pods_value_reads_back_from_its_text(value):
    assert parse_pods(str(value)) == value


@given(devices)
def test_every_device_reads_back_from_its_text(value):
    assert parse_device(str(value)) == value


#: Units as a user may type them: every spelling, near misses and case variants.
UNIT_WORDS = [
    *grammar.TIME_UNITS, *grammar.COUNT_UNITS, *grammar.LENGTH_UNITS,
    "m", "M", "hr", "ns", "ms", "Steps", "S", "H", "Y", "Mo", "q", "",
]  # fmt: skip
numbers = st.one_of(
    st.integers(-5, 10**6).map(str),
    st.decimals(0, 10**9, places=4, allow_nan=False).map(str),
    st.sampled_from(["1e400", "1e-9", "2e6", ".5", "1.", "0", "1e15", "18446744073709551616"]),
)
typed = st.tuples(
    numbers,
    st.sampled_from(["", " "]),
    st.sampled_from(["", "k ", "M ", "G ", "m ", "K "]),
    st.sampled_from(UNIT_WORDS),
).map("".join)


def _outcome(fn, *args):
    try:
        return fn(*args)
    except FinpodError as err:
        return f"error: {err}"


@given(typed)
def test_text_that_reads_as_a_value_reads_the_same_from_its_canonical_text(text):
    for parse in (parse_budget, parse_length):
        value = _outcome(parse, text)
        if not isinstance(value, str):
            assert parse(str(value)) == value


# -------------------------------------------------------- the inputs once misread


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("1234567.891s", "1234567.891s"),  # was 1234570 s
        ("1e-9s", "0.000000001s"),
        ("30min", "1800s"),
        ("1.5h", "5400s"),
        ("16M steps", "16000000 steps"),
        ("3.2M steps", "3200000 steps"),
        ("5k steps", "5000 steps"),
        ("2e6 steps", "2000000 steps"),
        ("40 pods", "40 pods"),
        ("45", "45s"),
        (45, "45s"),
        (600.0, "600s"),
    ],
)
def test_a_budget_reads_as_written(text, answer):
    assert str(parse_budget(text)) == answer


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("1e400 steps", "out of range"),  # was OverflowError, or "infs" in run.json
        ("9223372036854775808 steps", "more than 9,223,372,036,854,775,807 steps"),
        ("5M", "ambiguous"),  # was 5 minutes
        ("30m", "30min"),  # m is never minutes: the message says how to write them
        ("3mo", "unit 'mo'"),  # months are no budget
        ("1.5 pods", "not a whole number of pods"),  # was 1 pod
        ("0.4 steps", "not a whole number of steps"),
        ("16m steps", "write 16M steps"),  # was accepted by a case-blind check
        ("5K steps", "write 5k steps"),
        ("2 Steps", "unit 'Steps'"),
        ("2hr", "unit 'hr'"),
        ("1e-10s", "finer than a nanosecond"),
        ("1e12s", "longer than"),
        ("-1h", "must be positive"),
        ("0s", "must be positive"),
        (float("inf"), "not a finite number"),
        (float("nan"), "not a finite number"),
        (True, "not text or a number"),
    ],
)
def test_a_budget_that_cannot_be_read_exactly_is_one_line_naming_it(text, words):
    with pytest.raises(FinpodError) as err:
        parse_budget(text)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_m_alone_is_never_a_unit_and_the_message_names_both_spellings():
    with pytest.raises(FinpodError, match=r"write 3mo \(months\) or 3min \(minutes"):
        parse_length("3m", "train")
    assert parse_length("3mo") == Length(3, "mo")
    assert parse_budget("3min") == Budget("time", 180)
    with pytest.raises(FinpodError, match=r"ambiguous.*write 3min for minutes"):
        parse_budget("3m")
    with pytest.raises(FinpodError, match="write 5min for minutes or 5M steps"):
        parse_budget("5M")


@pytest.mark.parametrize(
    ("text", "length"),
    [
        ("1y", Length(1, "y")),
        ("0.5y", Length(6, "mo")),
        ("18mo", Length(18, "mo")),
        ("4w", Length(4, "w")),
        ("30d", Length(30, "d")),
        ("250", Length(250, "sessions")),
        ("250 sessions", Length(250, "sessions")),
        (250, Length(250, "sessions")),
    ],
)
def test_a_window_length_reads_as_written(text, length):
    assert parse_length(text) == length


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("6m", "ambiguous"),  # was months, where a budget's m was minutes
        ("250s", "seconds"),  # was sessions, where a budget's s was seconds
        ("1.5mo", "whole number of months"),
        ("0.1y", "whole number of months"),
        ("1Y", "not understood"),
        ("3q", "not understood"),
        ("0y", "must be positive"),
        ("1e400y", "out of range"),
    ],
)
def test_a_window_length_that_is_not_clear_is_one_line(text, words):
    with pytest.raises(FinpodError, match=words):
        parse_length(text, "train")


def test_seeds_are_a_count_or_a_list_and_stay_in_the_seeding_range():
    assert list(parse_seeds("3")) == [0, 1, 2]
    assert list(parse_seeds("0,4,7")) == [0, 4, 7]
    assert list(parse_seeds("5,")) == [5] and str(parse_seeds([5])) == "5,"
    assert list(parse_seeds([0, MAX_SEED])) == [0, MAX_SEED]
    for bad, words in [
        (str(2**64), "more than 1000"),  # a count of 2**64 seeds
        (f"0,{2**64}", "from 0 to 4294967295"),  # was "Overflow when unpacking long long"
        ([0, 2**64], "from 0 to 4294967295"),  # a walk-forward's list
        ("1e15", "more than 1000"),  # was MemoryError
        ("0", "at least one seed"),
        ("1,1", "distinct"),
        ("x", "not understood"),
    ]:
        with pytest.raises(FinpodError, match=words):
            parse_seeds(bad)


def test_a_strategy_seed_beyond_the_seeding_range_is_one_line():
    from finpod.strategy import TrainSpec

    assert TrainSpec(seed=MAX_SEED).seed == MAX_SEED
    for bad in (2**64, 2**32, -1, "3"):
        with pytest.raises(FinpodError, match="train.seed"):
            TrainSpec(seed=bad)


@pytest.mark.parametrize(
    ("value", "answer"), [("auto", None), (None, None), ("4", 4), (4, 4), (4.0, 4)]
)
def test_pods_read_as_auto_or_a_count(value, answer):
    assert parse_pods(value).count == answer


@pytest.mark.parametrize(
    ("value", "words"),
    [("1.5", "whole number of pods"), (1.5, "whole number of pods"), ("0", "positive")],
)
def test_a_fraction_of_a_pod_is_refused(value, words):
    with pytest.raises(FinpodError, match=words):
        parse_pods(value)


def test_devices_are_auto_cpu_cuda_or_cuda_k():
    assert str(parse_device("cuda:01")) == "cuda:1"
    for bad in ("tpu", "gpu", "cuda:x", "cuda:", "CPU", "mps"):
        with pytest.raises(FinpodError, match="unknown device"):
            parse_device(bad)


# ------------------------------------------------------------ one reader per grammar


def test_the_tournament_and_the_walk_forward_read_with_the_grammar_itself():
    from finpod.tournament import settings
    from finpod.walkforward import folds, run

    assert settings.parse_budget is grammar.parse_budget
    assert settings.Budget is grammar.Budget
    assert folds.parse_length is grammar.parse_length
    assert run.parse_seeds is grammar.parse_seeds


def test_the_cli_checks_spell_no_grammar_of_their_own():
    from finpod.cli import checks

    source = inspect.getsource(checks)
    assert "import re\n" not in source and "re.compile" not in source


@given(typed)
def test_the_cli_budget_check_answers_as_the_tournament_reads_a_budget(text):
    from finpod.cli import checks
    from finpod.tournament.settings import parse_tournament

    config = _outcome(parse_tournament, {"budget": text})
    checked = _outcome(checks.budget, text)
    if isinstance(checked, str):
        assert isinstance(config, str) and checked.split(" ", 2)[2] in config
    else:
        assert config.budget == checked


@given(typed)
def test_the_cli_window_check_answers_as_the_walk_forward_reads_a_window(text):
    from finpod.cli import checks
    from finpod.walkforward.folds import FoldSpec, check_spec

    lengths = _outcome(check_spec, FoldSpec(train=text))
    checked = _outcome(checks.window_length, text, "train")
    assert checked == (lengths if isinstance(lengths, str) else lengths["train"])


@given(typed | st.lists(st.integers(-3, 2**65), max_size=4).map(lambda v: ",".join(map(str, v))))
def test_the_cli_seeds_check_answers_as_the_walk_forward_reads_seeds(text):
    from finpod.cli import checks
    from finpod.walkforward.run import parse_seeds as walkforward_seeds

    assert _outcome(checks.seeds, text) == _outcome(walkforward_seeds, text)


# ------------------------------------------------------------------ recorded text


def test_a_tournament_table_reads_back_from_what_a_run_records():
    from finpod.tournament.settings import parse_tournament

    config = parse_tournament({"budget": "1234567.891s", "time_cap": "6min", "pods": 3})
    recorded = config.to_dict()
    assert recorded["budget"] == "1234567.891s" and recorded["time_cap"] == "360s"
    assert parse_tournament(recorded) == config


def test_a_budget_that_trains_no_pod_is_refused_before_the_run():
    from finpod.strategy import load_strategy
    from finpod.tournament.launch import resolve, smallest_rollout

    strategy = load_strategy(REPO / "strategies" / "quickstart.toml")
    config, _, _ = resolve(strategy)
    rollout = smallest_rollout(config, strategy)
    for budget, words in [
        ("1e-9s", "too short for a pod to start"),
        ("0.5s", "too short for a pod to start"),
        (f"{rollout - 1} steps", "less than one rollout"),
    ]:
        with pytest.raises(FinpodError, match=words):
            resolve(strategy, budget=budget)
    assert resolve(strategy, budget=f"{rollout} steps")[0].budget.amount == rollout
    assert resolve(strategy, budget="1 pods")[0].budget == Budget("pods", 1)


# ------------------------------------------------------------------------ the page


def test_the_grammar_page_shows_the_table_the_module_generates():
    page = (REPO / "docs" / "grammar.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- grammar-table[^>]*-->\n(.*?)<!-- /grammar-table -->", page, re.S)
    assert found is not None and found.group(1) == grammar.grammar_table(), (
        "docs/grammar.md is stale: paste finpod.grammar.grammar_table() between its markers"
    )


def test_nothing_shipped_uses_a_refused_spelling():
    from finpod.strategy import load_strategy
    from finpod.tournament.settings import parse_tournament

    for path in sorted((REPO / "strategies").glob("*.toml")):
        parse_tournament(load_strategy(path).tournament)  # raises on a refused spelling
    old = re.compile(
        r"(--budget[ =]|budget=)[\"']?\d+(\.\d+)?[mM]\b(?! ?(steps?|pods?))"
        r"|--(train|validation|backtest) \d+m\b|NB_BUDGET.{0,40}\b\d+m\b|`\d+(\.\d+)?[mM]`"
    )
    pages = [REPO / "README.md", REPO / "notebooks" / "README.md", *(REPO / "docs").glob("*.md")]
    for page in [*pages, *(REPO / "notebooks").glob("*.ipynb")]:
        assert not old.search(page.read_text(encoding="utf-8")), page.name
