"""Walk-forward: fold plans, the HAC t-test, the null and alpha verdicts, resume, the page.

Markets are the synthetic generator built through ``build_dataset("synthetic", …)`` (what
``finpod download --source synthetic --regime null|alpha`` runs): 3 tickers, a strong
planted signal in the alpha regime and none in the null one. Walk-forwards here are tiny
(3 folds × 2 seeds of a small PPO, a few seconds each) and run in this process, except
the resume check, which kills a real ``finpod walkforward`` on Ray mid-way.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from backtest.browser import find_chromium, inspect_page

from finpod.errors import FinpodError
from finpod.walkforward import (
    FoldSpec,
    hac_mean_test,
    naive_t,
    newey_west_lags,
    plan_folds,
    run_walkforward,
)

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
#: CI sets FINPOD_REQUIRE_BROWSER=1: there a missing Chromium fails the page check.
REQUIRE_BROWSER = os.environ.get("FINPOD_REQUIRE_BROWSER") == "1"
#: A small PPO that finds the planted signal in a few thousand steps.
STRATEGY = """
name = "wf-tiny"
[agent]
algorithm = "ppo"
[agent.hparams]
horizon = 64
gamma = 0.9
learning_rate = 1e-3
minibatch_size = 256
update_epochs = 4
log_std_init = -0.5
actor_hidden = [64, 64]
critic_hidden = [64, 64]
[env]
action_mode = "weights"
cost_rate = 0.001
reward = "log_return"
episode_length = 64
[train]
num_envs = 16
total_steps = 20000
eval_every = 5000
device = "cpu"
score = "return"
"""
#: 3 folds of 250-session backtests after 250 validation and 500 train sessions.
SPEC = FoldSpec(train="500", validation="250", backtest="250", folds=3)
SYNTH = {"n_tickers": 3, "n_bars": 1520, "alpha_strength": 0.5, "seed": 0, "start": "2000-01-03"}


@pytest.fixture(scope="module")
def wf_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("wf")
    (root / "tiny.toml").write_text(STRATEGY)
    return root


def _market(root: Path, regime: str) -> Path:
    from finpod.data import build_dataset

    return build_dataset("synthetic", root / f"data-{regime}", regime=regime, **SYNTH)


@pytest.fixture(scope="module")
def alpha_run(wf_root):
    return run_walkforward(
        _market(wf_root, "alpha"),
        wf_root / "tiny.toml",
        wf_root / "wf-alpha",
        spec=SPEC,
        seeds=2,
        use_ray=False,
    )


# --------------------------------------------------------------------------- HAC t-test
def _ar1(n: int, phi: float, mean: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    e = rng.standard_normal(n)
    x = np.empty(n)
    x[0] = e[0]
    for t in range(1, n):
        x[t] = phi * x[t - 1] + e[t]
    return mean + 0.01 * x


def _newey_west_t_by_hand(x: np.ndarray, lags: int) -> float:
    """mean / HAC s.e. with Bartlett weights 1 − l/(L+1) and the n/(n−1) correction."""
    n = len(x)
    e = x - x.mean()
    s = float(e @ e)
    for lag in range(1, lags + 1):
        s += 2.0 * (1.0 - lag / (lags + 1.0)) * float(e[lag:] @ e[:-lag])
    var = s / n**2 * n / (n - 1)
    return float(x.mean() / math.sqrt(var))


def test_hac_t_matches_statsmodels_and_newey_west_by_hand():
    import statsmodels.api as sm

    x = _ar1(600, 0.6, 0.002, seed=1)
    got = hac_mean_test(x)
    lags = newey_west_lags(600)
    fit = sm.OLS(x, np.ones(600)).fit(
        cov_type="HAC", cov_kwds={"maxlags": lags, "use_correction": True}
    )
    assert got["maxlags"] == lags == 5  # floor(4 · 6^(2/9)) = floor(5.96)
    assert got["t"] == pytest.approx(float(fit.tvalues[0]), rel=1e-12)
    assert got["t"] == pytest.approx(_newey_west_t_by_hand(x, lags), rel=1e-10)
    assert got["mean"] == pytest.approx(x.mean())


def test_hac_t_is_smaller_than_the_naive_t_on_autocorrelated_returns():
    x = _ar1(1000, 0.7, 0.002, seed=2)
    got = hac_mean_test(x)
    # Positive autocorrelation: the naive t overstates the evidence by about √((1+φ)/(1−φ)).
    assert got["naive_t"] == pytest.approx(naive_t(x))
    assert abs(got["naive_t"]) > 1.6 * abs(got["t"])
    # Without autocorrelation the two agree closely.
    white = _ar1(1000, 0.0, 0.002, seed=3)
    h = hac_mean_test(white)
    assert h["t"] == pytest.approx(h["naive_t"], rel=0.15)


def test_hac_refuses_non_finite_active_returns():
    with pytest.raises(FinpodError, match="not finite"):
        hac_mean_test(np.array([0.01, np.nan, 0.02, 0.0]))


# ---------------------------------------------------------------------------- fold plans
def _daily_stamps(start: str, end: str) -> pd.DatetimeIndex:
    from finpod.data.calendar import get_calendar

    sessions = get_calendar("XNYS").sessions_in_range(start, end)
    return pd.DatetimeIndex(sessions).tz_localize("America/New_York")


def test_yearly_folds_are_calendar_years_that_tile_the_end_with_an_embargo():
    ts = _daily_stamps("2010-01-04", "2019-12-31")
    folds = plan_folds(ts, FoldSpec(train="3y", validation="1y", backtest="1y", embargo=5))
    assert len(folds) == 6
    years = [pd.Timestamp(f.splits["backtest"]["start"]).year for f in folds]
    assert years == [2014, 2015, 2016, 2017, 2018, 2019]
    for f in folds:
        bt = f.splits["backtest"]
        assert pd.Timestamp(bt["start"]).year == pd.Timestamp(bt["end"]).year  # a calendar year
        t0, t1 = f.rows("train")
        v0, v1 = f.rows("validation")
        b0, b1 = f.rows("backtest")
        assert t0 < t1 <= v0 - 5 < v1 <= b0 - 5 < b1  # daily bars: 5 sessions of embargo
        assert v0 - t1 == 5 and b0 - v1 == 5
    for a, b in zip(folds, folds[1:], strict=False):
        assert a.rows("backtest")[1] == b.rows("backtest")[0]  # no gap in the stitched record
    assert folds[-1].rows("backtest")[1] == len(ts)
    expanding = plan_folds(ts, FoldSpec(scheme="expanding", folds=3))
    assert all(f.rows("train")[0] == 0 for f in expanding)


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (FoldSpec(folds=8), "too few bars for the windows: 8 fold(s)"),
        (FoldSpec(train="12y", folds=1), "too few bars for the windows"),
        (FoldSpec(train="3y", backtest="1x"), "length '1x' is not understood"),
        (FoldSpec(scheme="sideways"), "unknown scheme"),
        (FoldSpec(embargo=300, folds=1), "window of"),
    ],
)
def test_bad_fold_settings_are_one_line_errors(spec, says):
    ts = _daily_stamps("2010-01-04", "2019-12-31")
    with pytest.raises(FinpodError, match=None) as err:
        plan_folds(ts, spec)
    assert says in str(err.value)
    assert "\n" not in str(err.value)


def test_cli_says_too_few_bars_in_one_red_line(wf_root):
    data = _market(wf_root, "alpha")
    out = subprocess.run(
        [sys.executable, "-m", "finpod", "walkforward", "--data", str(data), "--strategy",
         str(wf_root / "tiny.toml"), "--out", str(wf_root / "never"), "--folds", "9",
         "--no-ray"],
        capture_output=True, text=True, timeout=120, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: too few bars for the windows")
    assert not (wf_root / "never").exists()


# ------------------------------------------------------------- verdicts on known markets
def test_alpha_market_active_return_is_significant(alpha_run):
    h = alpha_run.hac["vs_equal_weight"]
    print(f"alpha: {h}")
    assert h["t"] > 2.5 and h["p"] < 0.05 and h["significant_5pct"]
    assert h["maxlags"] == newey_west_lags(h["n"])
    # The stitched record covers the three backtest windows, bar after bar.
    assert h["n"] == len(alpha_run.stitched) == 3 * 249
    assert set(alpha_run.stitched["fold"]) == {0, 1, 2}


def test_null_market_active_return_is_not_significant(wf_root):
    res = run_walkforward(
        _market(wf_root, "null"),
        wf_root / "tiny.toml",
        wf_root / "wf-null",
        spec=SPEC,
        seeds=2,
        steps=10_000,  # no signal to find: a short budget gives the same verdict
        use_ray=False,
        warm_start=True,
    )
    h = res.hac["vs_equal_weight"]
    print(f"null: {h}")
    assert h["t"] is not None and abs(h["t"]) < 1.96 and not h["significant_5pct"]
    # Warm start: fold k's seeds began from fold k − 1's winner, and say so.
    froms = res.seeds.set_index(["fold", "seed"])["warm_start_from"]
    assert froms.loc[(0, 0)] == "" and froms.loc[(1, 0)].startswith("fold 0 seed ")


def test_every_selection_has_its_dsr_and_pbo_on_validation_only(alpha_run):
    sel = alpha_run.selections
    assert len(sel) == 3 * (1 + 2)  # per fold: the choice among seeds, and each seed's own
    assert sel["dsr"].notna().all() and sel["pbo"].notna().all()
    fold_level = sel[sel["seed"] == "all"]
    seed_level = sel[sel["seed"] != "all"]
    # The fold's choice counts every checkpoint of every seed.
    for fold, n in zip(fold_level["fold"], fold_level["n"], strict=True):
        assert n == seed_level[seed_level["fold"] == fold]["n"].sum()
    rec = json.loads((alpha_run.out / "folds" / "fold-01" / "fold.json").read_text())
    assert rec["selection"]["selection_split"] == "validation"
    winner = rec["winner_seed"]
    seeds = alpha_run.seeds[alpha_run.seeds["fold"] == 1]
    assert seeds.loc[seeds["validation_score"].idxmax(), "seed"] == winner


def test_report_directory_holds_json_parquet_and_safetensors_only(alpha_run):
    files = [p for p in alpha_run.out.rglob("*") if p.is_file()]
    suffixes = {p.suffix for p in files}
    assert suffixes <= {".json", ".parquet", ".csv", ".safetensors", ".html", ".log"}
    assert not [p for p in files if p.name.startswith(".") or ".tmp" in p.name]
    stitched = pd.read_parquet(alpha_run.out / "stitched_returns.parquet")
    pd.testing.assert_frame_equal(stitched, alpha_run.stitched, check_freq=False)
    summary = json.loads((alpha_run.out / "summary.json").read_text())
    assert summary["hac"]["vs_equal_weight"]["t"] == pytest.approx(
        alpha_run.hac["vs_equal_weight"]["t"]
    )
    page = alpha_run.report.read_text()
    assert f"<b>{alpha_run.hac['vs_equal_weight']['t']:.2f}</b>" in page


@pytest.mark.skipif(
    find_chromium() is None and not REQUIRE_BROWSER, reason="chromium is not installed"
)
def test_walkforward_page_opens_in_headless_chromium(alpha_run):
    shot = ARTIFACTS / "walkforward.png"
    shot.unlink(missing_ok=True)
    report = inspect_page(alpha_run.report.resolve().as_uri(), screenshot=shot)
    assert report.title == "finpod walk-forward: wf-alpha"
    alts = [img["alt"] for img in report.images]
    assert alts == [
        "stitched equity curve",
        "cumulative active return",
        "fold plan",
        "seed distribution",
    ]
    assert all(img["complete"] and img["naturalWidth"] > 0 for img in report.images), report.images
    assert report.errors == [], report.errors
    assert shot.is_file() and shot.stat().st_size > 10_000


# ---------------------------------------------------------------------------- resume
def test_a_killed_walkforward_on_ray_resumes_at_the_jobs_it_had_not_finished(wf_root):
    data = _market(wf_root, "null")
    out = wf_root / "wf-killed"
    ray_tmp = wf_root / "ray"
    ray_tmp.mkdir(exist_ok=True)
    cmd = [
        sys.executable, "-m", "finpod", "walkforward", "--data", str(data), "--strategy",
        str(wf_root / "tiny.toml"), "--out", str(out), "--train", "500", "--validation",
        "250", "--backtest", "250", "--folds", "3", "--seeds", "1", "--steps", "2000",
        "--num-cpus", "1",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_TMPDIR": str(ray_tmp)}
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    first = out / "folds" / "fold-00" / "seed-0" / "result.json"
    deadline = time.monotonic() + 120
    while not first.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert first.exists(), proc.stderr.read() if proc.poll() is not None else "timeout"
    os.killpg(proc.pid, signal.SIGKILL)  # the driver, its Ray and its workers
    proc.wait()
    done_before = sorted(p.parent.parent.name for p in out.rglob("result.json"))
    assert 1 <= len(done_before) < 3
    stamp = first.stat().st_mtime_ns
    # The rest in-process: what is resumed is the directory, whichever runner continues it
    # (and a second Ray start would double this test's time).
    again = subprocess.run(
        [*cmd, "--no-ray"], cwd=REPO, env=env, capture_output=True, text=True, timeout=240
    )
    assert again.returncode == 0, again.stderr
    assert first.stat().st_mtime_ns == stamp  # not trained again
    log = (out / "walkforward.log").read_text()
    assert "resuming walk-forward: 3 folds × 1 seed of" in log
    assert f"({len(done_before)} of 3 done)" in log
    assert "HAC t = " in again.stdout
    assert (out / "report.html").is_file()
