"""A tournament on a Ray cluster made with the ``ray start`` command line, as users make one.

A head node is started with ``ray start --head`` on loopback and ``finpod train
--address`` runs as its own process; once the first pod runs, a second node joins with
``ray start --address``. The pool must grow onto the new node and pods must finish on
both nodes.

Every node gets its own temp dir under one private root, so each Ray process started
here names that root (or the head's GCS address) on its command line: teardown kills
exactly those processes, never the machine's other Ray clusters (no ``ray stop``).
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import write_strategy

RAY = Path(sys.executable).parent / "ray"

#: Pods in the run: enough that the head alone needs ~40 s, so the second node joins
#: while most of them are still to come, even on a slow machine.
BUDGET_PODS = 14
#: Wall seconds one pod trains for (checked at epoch ends; its steps would take longer).
POD_SECONDS = 3
#: Seconds allowed for ``ray start``, the first pod, and the whole run.
START_TIMEOUT_S = 90
FIRST_POD_TIMEOUT_S = 120
RUN_TIMEOUT_S = 240

_POOL_RE = re.compile(r"pool target (\d+) pod\(s\)")
_START_RE = re.compile(r" start (p\w+) ")
_DONE_RE = re.compile(r" done (p\w+) (\w+) score (\S+) after \d+ steps in \S+ on node (\w+)")


def _free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on loopback right now."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"<{path.name} not written>"
    return "\n".join(text.splitlines()[-lines:])


class LoopbackCluster:
    """Ray nodes started with the ``ray`` CLI on 127.0.0.1, all under one private root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        port, client, head_agent, worker_agent = _free_ports(4)
        self.port = port
        self.address = f"127.0.0.1:{port}"
        self._client_port = client
        self._agent_ports = {"head": head_agent, "worker": worker_agent}
        env = dict(os.environ)
        # A driver or node must never find someone else's cluster by itself.
        env.pop("RAY_ADDRESS", None)
        env.update(
            RAY_AUTH_MODE="disabled",
            RAY_USAGE_STATS_ENABLED="0",
            RAY_TMPDIR=str(root),
            PYTHONUNBUFFERED="1",
        )
        self.env = env
        self.started: list[subprocess.Popen] = []
        self._gcs_re = re.compile(re.escape(self.address) + r"(?!\d)")

    def _common(self, name: str) -> list[str]:
        return [
            "--node-ip-address",
            "127.0.0.1",
            "--num-cpus",
            "1",
            "--num-gpus",
            "0",
            # Each node its own temp dir under the root: its processes then name the root.
            "--temp-dir",
            str(self.root / name),
            "--object-store-memory",
            str(100 * 1024 * 1024),
            "--disable-usage-stats",
            # Random ports, so that other Ray clusters on this machine cannot collide.
            "--min-worker-port",
            "0",
            "--max-worker-port",
            "0",
            "--dashboard-agent-listen-port",
            str(self._agent_ports[name]),
        ]

    def _ray_start(self, name: str, args: list[str]) -> None:
        # Output to a file, not a pipe: the daemons `ray start` leaves behind must not
        # hold our end open.
        log = self.root / f"ray-start-{name}.out"
        with log.open("w") as out:
            proc = subprocess.Popen(
                [str(RAY), "start", *args, *self._common(name)],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
            self.started.append(proc)
            try:
                code = proc.wait(timeout=START_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = None
        assert code == 0, f"`ray start` ({name}) exited with {code}:\n{_tail(log)}"

    def start_head(self) -> None:
        self._ray_start(
            "head",
            [
                "--head",
                "--port",
                str(self.port),
                "--ray-client-server-port",
                str(self._client_port),
                "--include-dashboard",
                "false",
            ],
        )

    def add_worker(self) -> None:
        self._ray_start("worker", ["--address", self.address])

    def node_id(self, name: str) -> str:
        """Node id of the node started as ``name`` (from its raylet's command line)."""
        temp_flag = f"--temp_dir={self.root / name}"
        for proc in self.processes():
            try:
                args = proc.cmdline()
            except Exception:  # noqa: BLE001 - gone or unreadable: not our raylet
                continue
            if temp_flag in args:
                for arg in args:
                    if arg.startswith("--node_id="):
                        return arg.split("=", 1)[1]
        raise AssertionError(f"no raylet with {temp_flag} is running")

    def processes(self) -> list:
        """Live processes of this cluster: they name the root or the head's GCS address."""
        import psutil

        me = os.getpid()
        found = []
        for proc in psutil.process_iter(["pid", "cmdline", "status"]):
            try:
                if proc.info["pid"] == me or proc.info["status"] == psutil.STATUS_ZOMBIE:
                    continue
                line = " ".join(proc.info["cmdline"] or [])
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            if str(self.root) in line or self._gcs_re.search(line):
                found.append(proc)
        return found

    def shutdown(self) -> list[str]:
        """Kill every process of this cluster; returns those that survived (should be none)."""
        import psutil

        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        # Raylets may fork workers while we kill: sweep until nothing is left.
        for _ in range(5):
            procs = self.processes()
            if not procs:
                break
            for proc in procs:
                try:
                    proc.kill()
                except psutil.NoSuchProcess:
                    continue
            psutil.wait_procs(procs, timeout=10)
        time.sleep(0.5)
        survivors = []
        for proc in self.processes():
            try:
                survivors.append(f"{proc.pid} {' '.join(proc.cmdline())[:200]}")
            except psutil.NoSuchProcess:
                continue
        return survivors


@pytest.fixture
def loopback_cluster() -> Iterator[LoopbackCluster]:
    """A private ``ray start`` cluster on loopback, torn down by process, root removed."""
    if not RAY.is_file():
        pytest.skip(f"no ray executable next to {sys.executable}")
    # Short: Ray's unix sockets live under it and their paths must stay under ~100 chars.
    root = Path(f"/tmp/rfs_{secrets.token_hex(3)}")
    root.mkdir()
    cluster = LoopbackCluster(root)
    try:
        yield cluster
    finally:
        survivors = cluster.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    assert not survivors, "Ray processes survived the teardown:\n" + "\n".join(survivors)


def test_tournament_grows_onto_a_node_started_with_ray_start(
    tmp_path, tiny_dataset, loopback_cluster
):
    from finpod.agents import load_checkpoint, read_checkpoint

    cluster = loopback_cluster
    cluster.start_head()
    head_id = cluster.node_id("head")

    strategy = write_strategy(
        tmp_path / "s.toml",
        # More steps than a pod can do in POD_SECONDS, in short epochs: every pod lasts
        # about POD_SECONDS on a fast or a slow machine alike.
        pod_steps=60_000,
        epochs=40,
        top_k=4,
        extra=f'pods = "auto"\npod_seconds = {POD_SECONDS}\n',
    )
    runs = tmp_path / "runs"
    out_path, err_path = tmp_path / "driver.out", tmp_path / "driver.err"
    with out_path.open("w") as out, err_path.open("w") as err:
        driver = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "finpod",
                "train",
                "--strategy",
                str(strategy),
                "--data",
                str(tiny_dataset),
                "--address",
                cluster.address,
                "--budget",
                f"{BUDGET_PODS} pods",
                "--runs",
                str(runs),
            ],
            env=cluster.env,
            cwd=tmp_path,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
        )
    cluster.started.append(driver)

    def log_path() -> Path | None:
        found = sorted(runs.glob("*/train.log"))
        return found[0] if found else None

    def report(what: str) -> str:
        log = log_path()
        return (
            f"{what}\n--- train.log ---\n{_tail(log) if log else '<no train.log>'}"
            f"\n--- driver stderr ---\n{_tail(err_path)}"
        )

    # 1. The first pod starts on the head, the only node: a pool of one.
    deadline = time.monotonic() + FIRST_POD_TIMEOUT_S
    lines: list[str] = []
    while True:
        log = log_path()
        lines = log.read_text(encoding="utf-8").splitlines() if log else []
        if any(_START_RE.search(line) for line in lines):
            break
        assert driver.poll() is None, report(f"the driver exited with {driver.returncode} early")
        assert time.monotonic() < deadline, report(f"no pod started within {FIRST_POD_TIMEOUT_S} s")
        time.sleep(0.25)
    joined_at = len(lines)
    pools_before = [int(m.group(1)) for line in lines if (m := _POOL_RE.search(line))]
    assert pools_before == [1], report(f"pool before the second node: {pools_before}")

    # 2. A second node joins the running cluster.
    cluster.add_worker()
    worker_id = cluster.node_id("worker")
    assert worker_id != head_id

    try:
        code = driver.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        driver.kill()
        pytest.fail(report(f"the run did not end within {RUN_TIMEOUT_S} s"))
    assert code == 0, report(f"the driver exited with {code}")

    log = log_path()
    assert log is not None
    run_dir = log.parent
    # The run directory alone on stdout's last line, for scripts.
    assert out_path.read_text().strip().splitlines()[-1] == str(run_dir)
    lines = log.read_text(encoding="utf-8").splitlines()

    # 3. The pool grew to two once the node joined, and both nodes trained pods.
    pools = [(i, int(m.group(1))) for i, line in enumerate(lines) if (m := _POOL_RE.search(line))]
    assert [size for _, size in pools][:2] == [1, 2], report(f"pool targets {pools}")
    assert pools[1][0] >= joined_at, report("the pool grew before the node joined")
    done = [m.groups() for line in lines if (m := _DONE_RE.search(line))]
    nodes = {node for *_, node in done}
    assert {head_id[:8], worker_id[:8]} <= nodes, report(
        f"pods finished on {nodes}; head {head_id[:8]}, worker {worker_id[:8]}"
    )
    assert len(done) == BUDGET_PODS, report(f"{len(done)} pods done, budget {BUDGET_PODS}")
    assert len({pod for pod, *_ in done}) == BUDGET_PODS

    # 4. The leaderboard holds the best pods, best first, each with a loadable checkpoint.
    board = json.loads((run_dir / "leaderboard.json").read_text(encoding="utf-8"))
    assert board["candidates_evaluated"] == BUDGET_PODS
    entries = board["entries"]
    scores = [e["score"] for e in entries]
    assert all(math.isfinite(s) for s in scores), scores
    assert scores == sorted(scores, reverse=True), scores
    # The board is the top 4 of every pod's logged score.
    logged = {pod: (algorithm, float(score)) for pod, algorithm, score, _ in done}
    finite = sorted((s for _, s in logged.values() if math.isfinite(s)), reverse=True)
    assert len(entries) == min(4, len(finite))
    assert scores == pytest.approx(finite[: len(scores)], abs=1e-4)
    # Evicted pods' checkpoints are gone; the board's are all there.
    on_disk = sorted(p.name for p in (run_dir / "checkpoints").glob("*.safetensors"))
    assert on_disk == sorted(Path(e["checkpoint"]).name for e in entries)
    for entry in entries:
        assert entry["pod_id"] in logged
        assert logged[entry["pod_id"]][0] == entry["algorithm"]
        path = run_dir / entry["checkpoint"]
        assert path.is_file(), f"{entry['pod_id']}: checkpoint {path} missing"
        meta, _ = read_checkpoint(path)
        assert meta["algorithm"] == entry["algorithm"]
        agent = load_checkpoint(path, "cpu")
        assert agent.algorithm == entry["algorithm"]
