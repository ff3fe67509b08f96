"""Renamed modules: the old import paths keep working for one release, with a warning."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Old path → (new path, a public name both must give).
RENAMED = {
    "finpod.agents.populations": ("finpod.agents.registry", "make_population"),
    "finpod.agents.population_ppo": ("finpod.agents.ppo", "PPOPopulation"),
    "finpod.agents.population_sac": ("finpod.agents.sac", "SACPopulation"),
    "finpod.agents.population_td3": ("finpod.agents.td3", "TD3Population"),
    "finpod.agents.population_offpolicy": ("finpod.agents.offpolicy", "OffPolicyPopulation"),
    "finpod.tournament.pool": ("finpod.tournament.placement", "node_capacity"),
    "finpod.tournament.actors": ("finpod.tournament.actor_pool", "ActorPool"),
    "finpod.tournament.ensemble": ("finpod.tournament.ensemble_candidate", None),
    "finpod.tournament.run": ("finpod.tournament.launch", "run_tournament"),
    "finpod.tournament.results": ("finpod.tournament.pod_results", "PodResult"),
    "finpod.tournament.config": ("finpod.tournament.settings", "TournamentConfig"),
    "finpod.walkforward.store": ("finpod.walkforward.directory", None),
    "finpod.data.sources.base": ("finpod.data.sources.loaded", "LoadedSource"),
    "finpod.data.synthetic": ("finpod.data.synthetic_market", "make_synthetic"),
    "finpod.runs.metrics": ("finpod.runs.metrics_file", "cut_torn_tail"),
}

PROBE = """
import importlib, json, sys, warnings
old, new, name = sys.argv[1], sys.argv[2], sys.argv[3]
importlib.import_module(new)  # the new path first: its own imports warn about nothing
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    mod = importlib.import_module(old)
same = name == "-" or getattr(mod, name) is getattr(importlib.import_module(new), name)
print(json.dumps({"warned": [str(w.message) for w in caught if w.category is DeprecationWarning], "same": same}))
"""


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_an_old_import_path_still_works_and_says_where_to_import_from(old):
    new, name = RENAMED[old]
    out = subprocess.run(
        [sys.executable, "-c", PROBE, old, new, name or "-"],
        capture_output=True,
        text=True,
        check=True,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["same"]
    assert any(new in message for message in got["warned"]), got
