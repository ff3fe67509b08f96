"""The tiny strategies the tests train, as TOML text: one agent (:func:`tiny_agent`) and
one tournament (:func:`tiny_tournament`), small enough to train in seconds on one CPU core.

A test states only where its strategy differs: each section's keys are updated from the
keyword dict of the same name, and a key given as ``None`` is left out of the file (so the
strategy falls back to finpod's default for it)."""

from __future__ import annotations

import json
from collections.abc import Mapping

#: The agent: a 16-unit PPO that trains 256 env steps in 8 envs, scored every 128.
AGENT_HPARAMS = {
    "horizon": 8,
    "minibatch_size": 64,
    "update_epochs": 1,
    "actor_hidden": [16],
    "critic_hidden": [16],
}
AGENT_ENV = {"action_mode": "weights", "episode_length": 40}
AGENT_TRAIN = {"num_envs": 8, "total_steps": 256, "eval_every": 128, "seed": 3, "device": "cpu"}

#: A tournament's pods: 8-unit PPOs in 4 envs (the tournament sets their steps).
POD_HPARAMS = {
    "horizon": 16,
    "minibatch_size": 64,
    "update_epochs": 1,
    "actor_hidden": [8],
    "critic_hidden": [8],
}
POD_ENV = {"episode_length": 40}
POD_TRAIN = {"num_envs": 4, "seed": 7, "device": "cpu"}
TOURNAMENT = {"pod_steps": 256, "epochs": 2, "top_k": 4, "fresh_pods": 2, "cpus_per_pod": 1.0}


def tiny_agent(
    *,
    algorithm: str = "ppo",
    hparams: Mapping | None = None,
    env: Mapping | None = None,
    train: Mapping | None = None,
) -> str:
    """The tiny agent's strategy (:data:`AGENT_HPARAMS`, :data:`AGENT_ENV`,
    :data:`AGENT_TRAIN`), each section updated with the dict of its name."""
    return _strategy(
        algorithm,
        [
            ("agent.hparams", AGENT_HPARAMS, hparams),
            ("env", AGENT_ENV, env),
            ("train", AGENT_TRAIN, train),
        ],
    )


def tiny_tournament(
    *,
    hparams: Mapping | None = None,
    env: Mapping | None = None,
    train: Mapping | None = None,
    tournament: Mapping | None = None,
    tail: str = "",
) -> str:
    """The tiny tournament's strategy (PPO pods of :data:`POD_HPARAMS`, :data:`POD_ENV`,
    :data:`POD_TRAIN` under :data:`TOURNAMENT`), each section updated with the dict of its
    name; ``tail`` is TOML text put right after the ``[tournament]`` keys (more of them, or
    a ``[search]`` table)."""
    return _strategy(
        "ppo",
        [
            ("agent.hparams", POD_HPARAMS, hparams),
            ("env", POD_ENV, env),
            ("train", POD_TRAIN, train),
            ("tournament", TOURNAMENT, tournament),
        ],
        tail,
    )


def _strategy(algorithm: str, sections: list, tail: str = "") -> str:
    lines = ["[agent]", f"algorithm = {_value(algorithm)}"]
    for name, base, changes in sections:
        table = {**base, **(changes or {})}
        lines.append(f"[{name}]")
        lines += [f"{key} = {_value(value)}" for key, value in table.items() if value is not None]
    return "\n".join(lines) + "\n" + tail


def _value(value) -> str:
    """``value`` as a TOML value (string, bool, number, array or inline table)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{k} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML value for {value!r}")
