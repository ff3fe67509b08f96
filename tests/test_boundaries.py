"""Where finpod keeps a heavy library out of a light import, it keeps it out.

Each test imports finpod modules in a fresh interpreter and reads ``sys.modules``: a
module that loads the library at its top, anywhere below the imported ones, breaks the
boundary. Everything else imports at the top of its module (docs/style.md).
"""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import importlib, json, sys
for name in sys.argv[2:]:
    importlib.import_module(name)
print(json.dumps(sorted(m for m in json.loads(sys.argv[1]) if m in sys.modules)))
"""


def loaded(modules: list[str], watch: list[str]) -> list[str]:
    """Which of ``watch`` a fresh interpreter has loaded after importing ``modules``."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(watch), *modules],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_cli_starts_without_loading_torch_pandas_or_ray():
    # `finpod --help` and a usage error answer at once: the command modules (and the
    # pipeline they call) load the heavy libraries inside the commands that use them.
    assert loaded(["finpod.cli"], ["torch", "pandas", "ray", "matplotlib"]) == []


def test_the_run_directory_package_loads_no_pandas_torch_matplotlib_or_tensorboard():
    # The CLI reads runs at start-up (finding a run, its info); frames, plots and event
    # files load their libraries when asked for.
    watch = ["pandas", "torch", "matplotlib", "tensorboard", "torch.utils.tensorboard"]
    assert loaded(["finpod.runs"], watch) == []


def test_training_loads_tensorboard_only_to_write_or_read_events():
    watch = ["tensorboard", "torch.utils.tensorboard"]
    assert loaded(["finpod.agents", "finpod.agents.train", "finpod.agent_run"], watch) == []


def test_the_env_and_the_agents_load_no_empyrical_until_they_score():
    assert loaded(["finpod.env", "finpod.agents"], ["empyrical", "yfinance"]) == []


def test_the_data_sources_and_the_paper_broker_load_their_vendor_sdk_only_to_use_it():
    modules = [
        "finpod.data.sources",
        "finpod.data.sources.alpaca",
        "finpod.data.sources.alpaca_client",
        "finpod.data.sources.alpaca_fetch",
        "finpod.data.sources.yahoo",
        "finpod.paper.broker",
    ]
    assert loaded(modules, ["alpaca", "yfinance"]) == []


def test_the_backtest_loads_pyfolio_only_to_draw_a_tearsheet():
    # Every pod imports the backtest (the tournament stands on it); pyfolio takes seconds.
    assert loaded(["finpod.backtest", "finpod.backtest.plots"], ["pyfolio"]) == []


def test_walkforward_loads_statsmodels_only_for_its_significance_test():
    assert loaded(["finpod.walkforward", "finpod.walkforward.stats"], ["statsmodels"]) == []
