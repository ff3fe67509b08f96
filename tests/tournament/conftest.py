"""Tournament test fixtures: a tiny synthetic dataset, tiny strategies, a private Ray."""

from __future__ import annotations

import os
import secrets
import shutil
import textwrap
from pathlib import Path

import pytest
from tiny_strategy import tiny_tournament

#: The tiny tournament's search: PPO and A2C pods, their learning rates drawn.
SEARCH = """[search]
algorithms = ["ppo", "a2c"]
[search.ppo]
learning_rate = { low = 1e-4, high = 3e-3, log = true }
gamma = { low = 0.9, high = 0.999 }
[search.a2c]
learning_rate = { low = 1e-4, high = 3e-3, log = true }
horizon = 16
actor_hidden = [8]
critic_hidden = [8]
"""


def write_strategy(
    path: Path, pod_steps: int = 256, epochs: int = 2, top_k: int = 4, extra: str = ""
) -> Path:
    """A tiny tournament strategy file at ``path`` (small enough that a pod trains in well
    under a second on one CPU core); ``extra`` is TOML put after the ``[tournament]`` keys."""
    text = tiny_tournament(
        tournament={"pod_steps": pod_steps, "epochs": epochs, "top_k": top_k},
        tail=textwrap.dedent(extra) + "\n" + SEARCH,
    )
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 4-ticker, 240-bar synthetic alpha market as a dataset directory."""
    from finpod.data import build_dataset

    out = tmp_path_factory.mktemp("tournament-data") / "ds"
    return build_dataset("synthetic", out, n_tickers=4, n_bars=240, regime="alpha", seed=0)


@pytest.fixture(scope="session")
def ray_tmp() -> Path:
    """A short private Ray temp root (unix socket paths must stay under ~100 chars).

    ``RAY_TMPDIR`` also points here so that no Ray started by these tests reads or writes
    the machine's default ``/tmp/ray`` (where other clusters may live).
    """
    path = Path(f"/tmp/rfp_{secrets.token_hex(3)}")
    (path / "ray").mkdir(parents=True)
    old = {k: os.environ.get(k) for k in ("RAY_TMPDIR", "RAY_AUTH_MODE", "RAY_USAGE_STATS_ENABLED")}
    os.environ["RAY_TMPDIR"] = str(path)
    os.environ["RAY_AUTH_MODE"] = "disabled"
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    yield path
    for key, value in old.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    kill_processes_under(path)
    shutil.rmtree(path, ignore_errors=True)


def kill_processes_under(path: Path) -> None:
    """Kill leftover processes whose command line names ``path`` (a Ray we started there)."""
    import psutil

    me = os.getpid()
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.info["pid"] != me and str(path) in " ".join(proc.info["cmdline"] or []):
                proc.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue


def run_on_cluster(
    cluster, strategy: Path, data: Path, out: Path, budget: str, on_event, stop=None
):
    """``run_tournament`` with ``pods="auto"`` on a ``ray.cluster_utils.Cluster``; Ray and
    the cluster are shut down afterwards, whether the run ends or fails."""
    import ray  # optional heavy dependency, as in the fixtures above

    from finpod.tournament import run_tournament

    try:
        return run_tournament(
            strategy,
            data,
            pods="auto",
            budget=budget,
            address=cluster.address,
            runs=out,
            on_event=on_event,
            stop=stop,
        )
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


@pytest.fixture(scope="module")
def local_ray(ray_tmp: Path):
    """A private in-process Ray with 2 CPUs for one test module."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _temp_dir=str(ray_tmp / "l"),
    )
    yield ray
    ray.shutdown()
