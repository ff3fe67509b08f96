"""``finpod train``: train one agent from a strategy file and write a run directory.

The run directory (``runs/<run-id>/``) holds ``run.json`` (resolved strategy, dataset
hash, seed, package versions), ``strategy.toml``, ``leaderboard.json`` (one entry: the
agent's best-on-validation checkpoint), ``checkpoints/``, ``metrics.csv``,
``learning_curves.png`` and ``train.log``. Only the train split is traded while learning
and only the validation split is used to pick the checkpoint; the backtest split is left
for ``finpod backtest``.
"""

from __future__ import annotations

import platform
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from finpod.atomic import atomic_write_json, atomic_write_text
from finpod.errors import FinpodError

console = Console()


def package_versions() -> dict[str, str]:
    """Versions of finpod, Python and the libraries that change results."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("finpod", "torch", "numpy", "pandas", "gymnasium", "safetensors"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "unknown"
    return out


def train_run(
    strategy_path: Path | None,
    data: Path | None,
    out: Path = Path("runs"),
    *,
    device: str | None = None,
    seed: int | None = None,
    total_steps: int | None = None,
    run_id: str | None = None,
    progress: bool = True,
    log: Any = None,
    resume: str | Path | None = None,
) -> Path:
    """Train the strategy's agent on ``data``'s train split; returns the run directory.

    ``device``, ``seed`` and ``total_steps`` override the strategy's ``[train]`` values.
    With ``resume`` (a run directory, or a run id under ``out``) the run's own strategy,
    dataset and ``checkpoints/last.safetensors`` are used and training continues where the
    last checkpoint left it; its best-on-validation checkpoint is kept unless beaten.
    """
    import torch

    from finpod.agents import load_checkpoint, make_agent
    from finpod.data import load_manifest, load_split
    from finpod.device import pick_device
    from finpod.env import VecTradingEnv
    from finpod.strategy import load_strategy

    previous: dict[str, Any] | None = None
    if resume is not None:
        run_dir = resume_dir(resume, out)
        previous = read_run(run_dir)
        strategy_path = run_dir / "strategy.toml"
        data = Path(data) if data is not None else Path(previous["dataset"]["path"])
        seed = previous["seed"] if seed is None else seed
    strategy = load_strategy(strategy_path)
    if seed is not None:
        strategy.train.seed = int(seed)
    if device is not None:
        strategy.train.device = device
    if total_steps is not None:
        if total_steps <= 0:
            raise FinpodError(f"--steps must be positive, got {total_steps}", "e.g. --steps 100000")
        strategy.train.total_steps = int(total_steps)
    spec = strategy.train
    dev = pick_device(spec.device)
    manifest = load_manifest(data)
    train_market = load_split(data, "train", device=dev)
    valid_market = load_split(data, "validation", device=dev)
    env_config = strategy.env_config()
    torch.manual_seed(spec.seed)
    env = VecTradingEnv(
        train_market, env_config, num_envs=spec.num_envs, seed=spec.seed, device=dev
    )
    if previous is not None:
        if manifest["hash"] != previous["dataset"]["hash"]:
            raise FinpodError(
                f"the dataset at {data} is not the one run {run_dir.name} was trained on",
                "pass --data with the run's dataset",
            )
        last = run_dir / "checkpoints" / "last.safetensors"
        if not last.is_file():
            raise FinpodError(
                f"run {run_dir.name} has no checkpoint to resume from yet",
                "start it again without --resume",
            )
        _announce(run_dir, log)
        agent = load_checkpoint(last, dev)
        if agent.algorithm != strategy.algorithm:
            raise FinpodError(
                f"{last} holds a {agent.algorithm} agent but the run's strategy is "
                f"{strategy.algorithm}",
                "the run directory was modified; start a new run",
            )
        return _train_and_record(
            agent, env, strategy, valid_market, env_config, run_dir, progress, log
        )
    agent = make_agent(
        strategy.algorithm, strategy.hparams, env.obs_dim, env.action_dim, dev, spec.seed
    )

    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    run_id = run_id or f"{strategy.algorithm}-{stamp}-s{spec.seed}"
    run_dir = Path(out) / run_id
    if (run_dir / "run.json").exists():
        raise FinpodError(
            f"run directory {run_dir} already exists", "choose another --run-id or --out"
        )
    resolved = strategy.to_dict()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise FinpodError(
            f"cannot create the run directory {run_dir}: {err.strerror or err}",
            "choose a writable --out",
        ) from err
    _announce(run_dir, log)
    atomic_write_json(
        run_dir / "run.json",
        {
            "run_id": run_id,
            "kind": "agent",
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "strategy": resolved,
            "dataset": {"path": str(Path(data).resolve()), "hash": manifest["hash"]},
            "seed": spec.seed,
            "device": str(dev),
            "versions": package_versions(),
        },
    )
    atomic_write_text(run_dir / "strategy.toml", strategy.to_toml())
    return _train_and_record(agent, env, strategy, valid_market, env_config, run_dir, progress, log)


def _announce(run_dir: Path, log: Any) -> None:
    """Name the run directory before training starts (and remember it for Ctrl-C)."""
    from finpod.cli import note_run_dir

    note_run_dir(run_dir)
    if log is not None:
        log(f"run directory: {run_dir}")


def resume_dir(resume: str | Path, out: str | Path) -> Path:
    """The run directory named by ``--resume``: a path, or a run id under ``out``."""
    for candidate in (Path(resume), Path(out) / str(resume)):
        if (candidate / "run.json").is_file():
            return candidate
    raise FinpodError(f"no run to resume at {resume}", "give a run directory that holds run.json")


def read_run(run_dir: Path) -> dict[str, Any]:
    """``run.json`` of ``run_dir`` (a clear error if it is missing or unreadable)."""
    import json

    try:
        return json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise FinpodError(
            f"cannot read {run_dir / 'run.json'}: {err}", "is this a finpod run directory?"
        ) from err


def _train_and_record(
    agent: Any,
    env: Any,
    strategy: Any,
    valid_market: Any,
    env_config: Any,
    run_dir: Path,
    progress: bool,
    log: Any,
) -> Path:
    """Train ``agent`` to the strategy's step budget; write checkpoints and leaderboard."""
    from finpod.agents.train import make_trading_eval, train

    spec = strategy.train
    resolved = strategy.to_dict()
    pod_id = f"{strategy.algorithm}-0"
    started = time.perf_counter()
    result = train(
        agent,
        env,
        total_steps=spec.total_steps,
        eval_fn=make_trading_eval(valid_market, env_config, spec.score),
        eval_every=spec.eval_every,
        run_dir=run_dir,
        progress=progress,
        pod_id=pod_id,
        score_name=spec.score,
        log=log,
    )
    entry = {
        "pod_id": pod_id,
        "algorithm": strategy.algorithm,
        "hparams": resolved["agent"]["hparams"],
        "score": result.best_score,
        "env_steps": result.best_env_steps,
        "checkpoint": f"checkpoints/{pod_id}.safetensors",
        "lineage": [],
        "history": result.history,
    }
    atomic_write_json(
        run_dir / "leaderboard.json",
        {
            "score_name": spec.score,
            "candidates_evaluated": result.candidates_evaluated,
            "entries": [entry],
        },
    )
    if log is not None:
        log(
            f"done in {time.perf_counter() - started:.0f} s: best validation {spec.score} "
            f"{result.best_score:.3f} at {result.best_env_steps} env steps"
        )
    return run_dir


def register(app: typer.Typer) -> None:
    """Add ``finpod train`` to the app."""

    @app.command("train")
    def train_cmd(
        strategy: Annotated[
            Path | None,
            typer.Option("--strategy", "-s", help="Strategy TOML file (see strategies/)."),
        ] = None,
        data: Annotated[
            Path | None, typer.Option("--data", "-d", help="Dataset directory (finpod download).")
        ] = None,
        out: Annotated[
            Path, typer.Option("--out", "-o", help="Parent directory of run directories.")
        ] = Path("runs"),
        device: Annotated[
            str | None,
            typer.Option("--device", help="auto, cpu, cuda or cuda:K (default: the strategy's)."),
        ] = None,
        seed: Annotated[
            int | None, typer.Option("--seed", help="Seed (default: the strategy's train.seed).")
        ] = None,
        steps: Annotated[
            int | None,
            typer.Option(
                "--steps", help="Single agent: env steps to train (default: train.total_steps)."
            ),
        ] = None,
        run_id: Annotated[
            str | None,
            typer.Option(
                "--run-id",
                help="Run directory name under --out (default: time-stamped); an existing "
                "run of that name is continued, as with --resume.",
            ),
        ] = None,
        pods: Annotated[
            str | None,
            typer.Option(
                "--pods",
                help='Tournament: "auto" (what the cluster fits) or the most pods at once.',
            ),
        ] = None,
        budget: Annotated[
            str | None,
            typer.Option(
                "--budget", help='Tournament budget: "30m", "2h", "1e6 steps" or "40 pods".'
            ),
        ] = None,
        address: Annotated[
            str | None,
            typer.Option(
                "--address", help="Tournament: Ray cluster (auto or HOST:PORT); default in-process."
            ),
        ] = None,
        resume: Annotated[
            str | None,
            typer.Option("--resume", help="Continue this run directory (or run id under --out)."),
        ] = None,
    ) -> None:
        """Train one agent, or a tournament of agents on Ray, and write runs/<run-id>/.

        A tournament runs when the strategy has a tournament table or any of --pods,
        --budget, --address, --resume is given; otherwise one agent is trained. Either way
        checkpoints are chosen on the validation split only.
        """
        if resume is None and run_id is not None and (out / run_id / "run.json").is_file():
            # A fixed run id continues its run (e.g. a retried Kubernetes job).
            console.print(f"continuing run {out / run_id}", highlight=False)
            resume = str(out / run_id)
            run_id = None
        if _is_tournament(strategy, data, out, pods, budget, address, resume):
            from finpod.cli.tournament_cmd import train_tournament

            if resume is None and (strategy is None or data is None):
                raise FinpodError(
                    "a new tournament needs --strategy and --data",
                    "or --resume RUN to continue one",
                )
            run_dir = train_tournament(
                strategy,
                data,
                pods=pods,
                budget=budget,
                address=address,
                resume=resume,
                out=out,
                device=device,
                seed=seed,
                run_id=run_id,
            )
            # The run directory on stdout, alone, so scripts can capture it.
            typer.echo(str(run_dir))
            return
        run_dir = train_run(
            strategy,
            data,
            out,
            device=device,
            seed=seed,
            total_steps=steps,
            run_id=run_id,
            resume=resume,
            # Without a terminal a progress bar draws nothing: the log lines carry progress.
            progress=console.is_terminal,
            log=lambda line: console.print(line, highlight=False, soft_wrap=True, markup=False),
        )
        console.print(f"[bold green]run written to[/] {run_dir}")


def _is_tournament(
    strategy: Path | None,
    data: Path | None,
    out: Path,
    pods: str | None,
    budget: str | None,
    address: str | None,
    resume: str | None,
) -> bool:
    """Whether ``finpod train``'s arguments ask for a tournament rather than one agent.

    Tournament flags (--pods, --budget, --address) or a strategy with a tournament table
    ask for one; a resumed run continues as what it was.
    """
    if any(v is not None for v in (pods, budget, address)):
        return True
    if resume is not None:
        return read_run(resume_dir(resume, out)).get("kind", "tournament") != "agent"
    if strategy is None or data is None:
        raise FinpodError(
            "finpod train needs --strategy and --data", "or --resume RUN to continue a run"
        )
    from finpod.strategy import load_strategy

    return bool(load_strategy(strategy).tournament)
