"""A refusal that needs no data comes first and fast: a mistyped strategy key and a second
writer into a locked run are refused before torch loads (so before any dataset is opened
or Ray starts), within a fraction of a second of the command's start."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_strategy import tiny_agent

from finpod.runs.lock import LOCK_FILE

ROOT = Path(__file__).resolve().parents[1]
#: Seconds the command may take, measured in its process from the call of the CLI (the
#: interpreter's own start excluded): generous, for a loaded machine; an idle one takes
#: about a tenth of it.
REFUSED_WITHIN_S = 3.0

#: Runs ``finpod ARGS`` through the CLI's entry point, then prints what it loaded.
PROBE = r"""
import json, sys, time
from finpod.cli import main
start = time.perf_counter()
try:
    main(sys.argv[1:])
    code = 0
except SystemExit as exit:
    code = exit.code
seconds = time.perf_counter() - start
loaded = sorted(m for m in ("torch", "ray", "pandas", "finpod.data") if m in sys.modules)
print(json.dumps({"code": code, "seconds": seconds, "loaded": loaded}))
"""


def _probe(*args: str) -> tuple[dict, str]:
    """(what the command loaded, its stderr)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "300"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env, timeout=120
    )
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def _refused_fast(report: dict, err: str, *words: str) -> None:
    assert report["code"] == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, err
    assert report["loaded"] == [], report  # no torch, hence no dataset opened and no Ray
    assert report["seconds"] < REFUSED_WITHIN_S, report


@pytest.mark.parametrize(
    ("section", "words"),
    [
        ({"train": {"num_env": 8}}, ("unknown key train.'num_env'",)),
        ({"hparams": {"horizn": 8}}, ("unknown key agent.hparams.'horizn' for PPOParams",)),
        ({"env": {"cost_rte": 0.1}}, ("unknown env setting 'cost_rte'",)),
        ({"train": {"num_envs": 0}}, ("train.num_envs must be a positive integer",)),
    ],
)
def test_a_mistyped_strategy_key_is_refused_before_torch_loads(tmp_path, section, words):
    dataset = tmp_path / "ds"  # not there: the strategy is refused before --data is looked at
    strategy = tmp_path / "typo.toml"
    strategy.write_text(tiny_agent(**section), encoding="utf-8")
    report, err = _probe("train", "-s", str(strategy), "-d", str(dataset), "--runs", str(tmp_path))
    _refused_fast(report, err, *words)


def test_a_second_writer_into_a_locked_run_is_refused_before_torch_loads(tmp_path):
    dataset = tmp_path / "ds"  # not there: the lock is refused before --data is looked at
    strategy = tmp_path / "s.toml"
    strategy.write_text(tiny_agent(), encoding="utf-8")
    run = tmp_path / "runs" / "held"  # a run being written: its run.json, and its lock
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"kind": "agent", "seed": 3}), encoding="utf-8")
    holder = {
        "pid": os.getpid(),  # this test's process: alive, and started before the lock
        "host": socket.gethostname(),
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": "finpod train",
    }
    (run / LOCK_FILE).write_text(json.dumps(holder), encoding="utf-8")
    for args in (["--resume", str(run)], ["--runs", str(tmp_path / "runs"), "--run-id", "held"]):
        report, err = _probe("train", *args, "-s", str(strategy), "-d", str(dataset))
        _refused_fast(report, err, f"is in use by process {os.getpid()}")
    assert json.loads((run / LOCK_FILE).read_text()) == holder


def test_the_key_names_checked_without_torch_are_the_settings_dataclasses():
    from finpod.agents import ALGORITHMS
    from finpod.env import EnvConfig
    from finpod.strategy import ENV_KEYS, HPARAM_KEYS

    assert sorted(ENV_KEYS) == sorted(f.name for f in dataclasses.fields(EnvConfig))
    assert sorted(HPARAM_KEYS) == sorted(ALGORITHMS)
    for name, (params, keys) in HPARAM_KEYS.items():
        cls = ALGORITHMS[name][0]
        assert params == cls.__name__
        assert sorted(keys) == sorted(f.name for f in dataclasses.fields(cls)), name
