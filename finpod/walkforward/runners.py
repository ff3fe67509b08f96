"""Where a walk-forward's fold × seed jobs run: one after the other in this process
(``LocalRunner``), or as Ray tasks, as many at once as the cluster's free CPUs (GPUs) allow
(``RayRunner``), with a failed task turned into one readable error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ray

from finpod.errors import FinpodError
from finpod.tournament.launch import connect_ray
from finpod.walkforward.job import SeedJob, SeedResult, run_seed_job


class LocalRunner:
    """Jobs one after the other in this process."""

    def __init__(self, payload: dict[str, Any]) -> None:
        self.payload = payload

    def run(self, jobs: list[SeedJob], finished: Callable[[SeedResult], None]) -> None:
        for j in jobs:
            finished(run_seed_job(self.payload, j))

    def close(self) -> None:
        pass


def _remote_seed_job(payload: dict[str, Any], job: SeedJob) -> SeedResult:
    return run_seed_job(payload, job)


class RayRunner:
    """Jobs as Ray tasks: as many run at once as the cluster's free CPUs (GPUs) allow."""

    def __init__(
        self,
        payload: dict[str, Any],
        address: str | None,
        num_cpus: int | None,
        cpus_per_job: int,
        device: str,
        say: Callable[[str], None],
    ) -> None:
        self.ray = ray
        self.started = connect_ray(address, num_cpus, "check --address, or pass --no-ray")
        self.ref = ray.put(payload)
        gpus = 1 if device.startswith("cuda") else 0
        self.remote = ray.remote(_remote_seed_job).options(
            num_cpus=cpus_per_job, num_gpus=gpus, max_retries=1, retry_exceptions=False
        )
        free = ray.available_resources().get("CPU", 0.0)
        self.say = say
        self.fit = int(free // cpus_per_job)
        say(f"Ray: {free:g} CPUs free, room for {self.fit} job(s) at once")

    def run(self, jobs: list[SeedJob], finished: Callable[[SeedResult], None]) -> None:
        ray = self.ray
        pending = {self.remote.remote(self.ref, j): j for j in jobs}
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    j = pending.pop(ref)
                    try:
                        res = ray.get(ref)
                    except Exception as err:  # noqa: BLE001 (a task's error, re-raised as one line)
                        raise _task_error(err, j) from err
                    finished(res)
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()


def _task_error(err: Exception, job: SeedJob) -> FinpodError:
    cause = getattr(err, "cause", None) or err
    if isinstance(cause, FinpodError):
        return cause
    first = (str(cause).strip().splitlines() or [""])[-1]
    return FinpodError(
        f"fold {job.fold} seed {job.seed} failed: {type(cause).__name__}: {first[:300]}",
        "see walkforward.log; run the same command again to resume",
    )
