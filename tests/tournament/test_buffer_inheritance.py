"""A child of an off-policy pod starts from its parent's replay buffer (object store)."""

from __future__ import annotations

import pytest

from finpod.tournament import run_tournament

pytestmark = pytest.mark.usefixtures("local_ray")

SAC_STRATEGY = """
[agent]
algorithm = "sac"
[agent.hparams]
actor_hidden = [8]
critic_hidden = [8]
learning_starts = 16
batch_size = 16
buffer_size = 4096
[env]
episode_length = 40
[train]
num_envs = 4
seed = 3
device = "cpu"
[tournament]
pod_steps = 128
epochs = 1
top_k = 4
fresh_pods = 1
epsilon = 0.0
cpus_per_pod = 1.0
inherit_buffer = {inherit}
[search]
algorithms = ["sac"]
"""


@pytest.mark.parametrize("inherit", [True, False])
def test_a_child_inherits_its_parents_replay_buffer_only_when_asked(
    tmp_path, tiny_dataset, inherit
):
    path = tmp_path / "s.toml"
    path.write_text(SAC_STRATEGY.format(inherit="true" if inherit else "false"))
    results, specs = {}, {}

    def on_event(kind, payload):
        if kind == "start":
            specs[payload["pod_id"]] = payload["spec"]
        if kind == "finish":
            results[payload["pod_id"]] = payload["result"]

    run_tournament(
        path, tiny_dataset, pods=1, budget="3 pods", runs=tmp_path / "runs", on_event=on_event
    )
    first = results["p00000"]
    child = results["p00001"]
    assert specs["p00001"].parent == "p00000"
    if inherit:
        # The child's buffer holds the parent's transitions, then its own.
        assert first.buffer_rows == first.steps_done
        assert child.buffer_rows == first.buffer_rows + child.steps_done
    else:
        assert child.buffer_rows == 0
