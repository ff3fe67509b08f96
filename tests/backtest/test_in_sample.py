"""A backtest on bars its run trained or was selected on: refused in one line, or, with
--allow-in-sample, an IN-SAMPLE verdict without the run's DSR and PBO.

The run (untrained checkpoints) records the shipped sample's NASDAQ-100 daily dataset of
three tickers: train 2010–2016, validation 2017–2018, backtest 2019. The other datasets
are cut from the same sample, each with its backtest split where a test needs it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_runner import one_error_line
from rich.console import Console

from finpod.backtest import BacktestResult, run_backtest
from finpod.backtest.verdict import HEADLINES, backtest_verdict, verdict_html
from finpod.cli.verdict_view import TONE_STYLES, print_verdict
from finpod.errors import FinpodError

from .fakes import make_run_dir

TICKERS = ["AAPL", "MSFT", "AMZN"]


def _sessions(first: str, last: str) -> int:
    from finpod.data.calendar import sessions

    return len(sessions(first, last))


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    """The run, its own dataset, and one dataset per backtest window of the tests."""
    from finpod.data import build_dataset, load_split

    root = tmp_path_factory.mktemp("in-sample")
    own = build_dataset("sample", root / "own", tickers=TICKERS)

    def other(name: str, backtest: tuple[str, str], tickers: list[str] = TICKERS) -> Path:
        splits = {
            "train": ("2012-01-01", "2012-06-30"),
            "validation": ("2012-07-01", "2012-12-31"),
            "backtest": backtest,
        }
        return build_dataset(
            "sample", root / name, tickers=tickers, start="2012-01-01", end=backtest[1],
            splits=splits,
        )  # fmt: skip

    world = {
        "own": own,
        "train": other("train", ("2016-07-01", "2016-12-31")),
        "validation": other("validation", ("2017-07-01", "2017-12-31")),
        # One ticker of the run's; the others were never in its dataset.
        "one": other("one", ("2016-07-01", "2016-12-31"), ["AAPL", "COST", "CSCO"]),
        "after": other("after", ("2019-07-01", "2019-12-31")),
    }
    digest = json.loads((own / "manifest.json").read_text())["hash"]
    world["run"] = make_run_dir(
        root, load_split(own, "backtest"), dataset_path=str(own), dataset_hash=digest
    )
    return world


@pytest.fixture
def no_rollout(patch_everywhere):
    """Fail a test whose backtest rolls the agent out."""
    import finpod.env

    def rollout(*args, **kwargs):
        raise AssertionError("the backtest ran a rollout")

    patch_everywhere(finpod.env, "rollout", rollout)


def _refusal(world, name: str) -> str:
    with pytest.raises(FinpodError) as err:
        run_backtest(world["run"], data=world[name])
    text = str(err.value)
    assert "\n" not in text
    assert f"the bars of {world[name]} overlap" in text
    assert "--allow-in-sample" in text and "after 2018-12-31, the run's validation end" in text
    return text


def test_bars_in_the_runs_train_split_are_refused_before_any_rollout(world, no_rollout):
    text = _refusal(world, "train")
    n = _sessions("2016-07-01", "2016-12-30")
    assert f"its train split on 2016-07-01 → 2016-12-30: {n} sessions, every ticker" in text
    assert "validation split" not in text


def test_bars_in_the_runs_validation_split_are_refused(world, no_rollout):
    text = _refusal(world, "validation")
    n = _sessions("2017-07-03", "2017-12-29")
    assert f"its validation split on 2017-07-03 → 2017-12-29: {n} sessions, every ticker" in text
    assert "train split" not in text


def test_one_tickers_overlap_is_enough_and_is_named(world, no_rollout):
    text = _refusal(world, "one")
    n = _sessions("2016-07-01", "2016-12-30")
    assert f"its train split on 2016-07-01 → 2016-12-30: {n} sessions, AAPL only" in text


def test_the_cli_refusal_is_one_red_line_naming_the_option(world, finpod_cli, tmp_path):
    out = finpod_cli(
        "backtest", str(world["run"]), "--data", str(world["validation"]),
        "--reports", str(tmp_path / "reports"), "--device", "cpu",
    )  # fmt: skip
    one_error_line(out, "validation split on 2017-07-03", "--allow-in-sample")
    assert not (tmp_path / "reports" / "run-test").exists()


def test_bars_after_the_runs_validation_end_are_not_in_sample(world):
    result = run_backtest(world["run"], data=world["after"])
    assert "in_sample" not in result.info and "in_sample" not in result.disclosures
    assert backtest_verdict(result).tone != "in_sample"
    assert "Cross-dataset backtest" in result.disclosures["dataset"]


def test_the_runs_own_backtest_reads_none_of_its_train_or_validation_bars(world, patch_everywhere):
    import finpod.backtest.in_sample as in_sample

    def check(*args, **kwargs):
        raise AssertionError("the run's own dataset was checked for in-sample bars")

    patch_everywhere(in_sample, "check_run_bars", check)
    for data in (None, world["own"]):  # recorded, or passed with --data
        result = run_backtest(world["run"], data=data)
        assert "in_sample" not in result.info and "in_sample" not in result.disclosures
        assert backtest_verdict(result).tone != "in_sample"
        assert isinstance(result.statistics["dsr"], float)
        assert "Selection (validation split): DSR" in backtest_verdict(result).luck


def test_a_run_whose_dataset_is_gone_cannot_vouch_for_other_bars(world, tmp_path, no_rollout):
    run = Path(shutil.copytree(world["run"], tmp_path / "run-test"))
    info = json.loads((run / "run.json").read_text())
    info["dataset"]["path"] = str(tmp_path / "gone")
    (run / "run.json").write_text(json.dumps(info))
    with pytest.raises(FinpodError, match="cannot tell whether the bars of .* overlap") as err:
        run_backtest(run, data=world["after"])
    assert f"its dataset {tmp_path / 'gone'} is not on disk" in str(err.value)
    assert "--allow-in-sample" in str(err.value)


# --------------------------------------------------------------------------- IN-SAMPLE
@pytest.fixture(scope="module")
def allowed(world, tmp_path_factory):
    """``finpod backtest RUN --data <train overlap> --allow-in-sample --details``: (its
    console text, its report folder)."""
    from typer.testing import CliRunner

    from finpod.cli import app

    reports = tmp_path_factory.mktemp("reports")
    args = ["backtest", str(world["run"]), "--data", str(world["train"]), "--allow-in-sample"]
    args += ["--details", "--reports", str(reports), "--device", "cpu"]
    out = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert out.exit_code == 0, out.output
    return out.output, reports / "run-test"


def test_allow_in_sample_runs_with_an_in_sample_verdict_on_the_console(allowed):
    output, _ = allowed
    text = " ".join(output.split())
    assert "verdict: IN-SAMPLE" in text
    n = _sessions("2016-07-01", "2016-12-30")
    assert (
        "In-sample: run run-test was trained or selected on these bars (its train split on "
        f"2016-07-01 → 2016-12-30: {n} sessions, every ticker)" in text
    )
    assert "Selection statistics (DSR, PBO): not applicable" in text
    # The run's DSR and PBO are not read as if they applied.
    assert "Selection (validation split): DSR" not in text
    assert "DSR (selection among 12 on validation): not applicable" in text
    assert "PBO (CSCV over the validation candidates): not applicable" in text


def test_the_in_sample_verdict_has_its_own_colour_in_the_console_and_on_the_page(allowed):
    _, folder = allowed
    verdict = backtest_verdict(BacktestResult.load(folder))  # as finpod info reads it
    assert verdict.tone == "in_sample" and verdict.word == "IN-SAMPLE"
    others = {t: c for t, c in HEADLINES.items() if t != "in_sample"}
    assert verdict.colour not in others.values()
    assert TONE_STYLES["in_sample"] not in [TONE_STYLES[t] for t in others]
    console = Console(record=True, force_terminal=True, color_system="standard", width=200)
    print_verdict(console, verdict)
    assert console.export_text(styles=True).startswith("\x1b[1;35mverdict: IN-SAMPLE")
    page = (folder / "tearsheet.html").read_text(encoding="utf-8")
    assert verdict_html(verdict) in page
    assert f"class='verdict verdict-in_sample' style='--tone:{verdict.colour}'" in page


def test_the_in_sample_tearsheet_labels_the_dsr_and_pbo_not_applicable(allowed):
    _, folder = allowed
    page = (folder / "tearsheet.html").read_text(encoding="utf-8")
    box = verdict_html(backtest_verdict(BacktestResult.load(folder)))
    assert box in page
    assert "IN-SAMPLE" in box and "not applicable" in box
    assert "Selection (validation split): DSR" not in page
    assert "DSR &lt; 0.95: the validation edge" not in box  # no thresholds as if they applied
    saved = json.loads((folder / "backtest.json").read_text())
    assert saved["statistics"]["dsr"] is None and saved["statistics"]["pbo"] is None
    assert saved["statistics"]["dsr_note"].startswith("not applicable")
    assert page.count("not applicable: the backtest bars lie inside") == 2  # DSR and PBO rows


def test_allow_in_sample_on_the_runs_own_bars_is_refused_as_unused(world, finpod_cli, no_rollout):
    out = finpod_cli("backtest", str(world["run"]), "--allow-in-sample", "--device", "cpu")
    one_error_line(out, "--allow-in-sample applies to another dataset's bars", "leave out")
    with pytest.raises(FinpodError, match=f"{world['own']} is the run's own dataset"):
        run_backtest(world["run"], data=world["own"], allow_in_sample=True)
