"""TensorBoard event files of a run directory: a mirror of ``metrics.csv``.

``metrics.csv`` is the record; every row added to it is also written as a scalar to the
event files of its pod, one folder per pod (a population's members included)::

    runs/<run-id>/tensorboard/<pod_id>/events.out.tfevents.*

so ``tensorboard --logdir runs/`` shows every pod of every run as a run named
``<run-id>/tensorboard/<pod_id>``, on one set of comparable curves. The x axis is the
pod's env steps; the wall time is the run's start plus the row's ``wall_s``.

Tags (one scheme for single agents and tournaments; :func:`tag`):

- ``charts/episodic_return``, ``charts/episodes``: mean return of the training episodes
  finished in the segment, and how many finished;
- ``charts/SPS``: env steps per second of training (validation scoring not counted; for
  a member of a population, its own env steps);
- ``charts/learning_rate`` (PPO, A2C), ``charts/actor_lr``, ``charts/critic_lr``,
  ``charts/alpha_lr`` (SAC, TD3, DDPG): the optimizers' step sizes;
- ``train/<name>``: what the algorithm reports, e.g. ``train/policy_loss``,
  ``train/value_loss``, ``train/entropy``, ``train/approx_kl``, ``train/clip_frac``,
  ``train/explained_variance`` (PPO, A2C), ``train/q_loss``, ``train/actor_loss`` (SAC,
  TD3, DDPG);
- ``validation/<name>``: the selection score (``validation/sharpe`` by default),
  ``validation/return`` (annualized), ``validation/turnover`` (annual, a multiple of the
  account) and ``validation/costs`` (costs paid over the split / initial capital).

Hyperparameters go in as the HParams dashboard's session of the pod (floats rounded to
6 significant digits, ``None`` left out) and as a ``hparams`` text table.

One :class:`EventMirror` per writing process (the tournament's driver, or a single
agent's training loop); it opens one ``SummaryWriter`` per pod on first use and keeps at
most :data:`MAX_OPEN` open (the least recently used one is closed first). A writer that
is opened again, for example by a resumed run, starts a new event file beside the old
ones: files are never rewritten, so a killed run leaves every file readable (at most the
events not yet flushed are missing).
"""

from __future__ import annotations

import math
import re
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: Folder of a run directory that holds the event files, one sub-folder per pod.
TENSORBOARD_DIR = "tensorboard"
#: Writers kept open at once (each holds a file and a writer thread).
MAX_OPEN = 32
#: Seconds between background flushes of an open writer.
FLUSH_SECS = 120
#: Train metrics drawn under ``charts/`` (everything else of training under ``train/``).
CHART_TAGS = {
    "episode_return": "charts/episodic_return",
    "episodes": "charts/episodes",
    "sps": "charts/SPS",
    "updates_per_env_step": "charts/updates_per_env_step",
    "learning_rate": "charts/learning_rate",
    "actor_lr": "charts/actor_lr",
    "critic_lr": "charts/critic_lr",
    "alpha_lr": "charts/alpha_lr",
}
#: Significant digits of a float hyperparameter.
HPARAM_DIGITS = 6


def tag(split: str, metric: str) -> str:
    """The TensorBoard tag of a ``metrics.csv`` row (see the module doc)."""
    if split == "train" and metric in CHART_TAGS:
        return CHART_TAGS[metric]
    return f"{split}/{metric}"


def pod_folder(pod_id: str) -> str:
    """Folder name of ``pod_id``'s event files (characters a path cannot hold become ``_``)."""
    name = re.sub(r"[^A-Za-z0-9._@=-]", "_", str(pod_id)).strip(".")
    return name or "_"


def clean_hparams(hparams: Mapping[str, Any]) -> dict[str, int | float | str | bool]:
    """``hparams`` as TensorBoard takes them: nested mappings flattened to ``a.b`` keys,
    ``None`` left out, floats rounded to :data:`HPARAM_DIGITS` significant digits,
    sequences written ``64x64``, anything else as text."""
    out: dict[str, int | float | str | bool] = {}
    for key, value in hparams.items():
        if value is None:
            continue
        if isinstance(value, Mapping):
            for sub, v in clean_hparams(value).items():
                out[f"{key}.{sub}"] = v
        elif isinstance(value, bool | int | str):
            out[str(key)] = value
        elif isinstance(value, float):
            out[str(key)] = float(f"{value:.{HPARAM_DIGITS}g}") if math.isfinite(value) else value
        elif isinstance(value, list | tuple):
            out[str(key)] = "x".join(str(v) for v in value) if value else "none"
        else:
            out[str(key)] = str(value)
    return dict(sorted(out.items()))


def hparams_markdown(hparams: Mapping[str, Any]) -> str:
    """A two-column markdown table of :func:`clean_hparams` (the ``hparams`` text)."""
    lines = ["| hyperparameter | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in clean_hparams(hparams).items()]
    return "\n".join(lines)


class EventMirror:
    """Writes ``metrics.csv`` rows as TensorBoard scalars under ``root/<pod_id>/``.

    Args:
        root: the run's ``tensorboard`` folder (created on the first write).
        wall_origin: Unix seconds at which the rows' ``wall_s`` is 0 (the run's start).
        max_open: writers kept open at once.
    """

    def __init__(self, root: Path, wall_origin: float | None = None, max_open: int = MAX_OPEN):
        self.root = Path(root)
        self.wall_origin = time.time() if wall_origin is None else float(wall_origin)
        self.max_open = max(1, int(max_open))
        self._writers: OrderedDict[str, Any] = OrderedDict()
        self._purge: dict[str, int] = {}
        # Import the writer now, at the start of a run, not in the middle of its first
        # training segment: a first import of tensorboard takes seconds on a cold install.
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401

    def purge_after(self, pod_id: str, env_steps: int) -> None:
        """Hide ``pod_id``'s events past ``env_steps`` written by an earlier session (a run
        resumed from a checkpoint at ``env_steps`` trains those steps again)."""
        self._purge[str(pod_id)] = int(env_steps) + 1

    def writer(self, pod_id: str) -> Any:
        """The open ``SummaryWriter`` of ``pod_id`` (opened on first use)."""
        pod_id = str(pod_id)
        w = self._writers.get(pod_id)
        if w is not None:
            self._writers.move_to_end(pod_id)
            return w
        # lazy: TensorBoard loads only to write or read events (tests/test_boundaries.py)
        from torch.utils.tensorboard import SummaryWriter

        while len(self._writers) >= self.max_open:
            _, oldest = self._writers.popitem(last=False)
            oldest.close()
        w = SummaryWriter(
            log_dir=str(self.root / pod_folder(pod_id)),
            purge_step=self._purge.pop(pod_id, None),
            flush_secs=FLUSH_SECS,
            max_queue=1000,
        )
        self._writers[pod_id] = w
        return w

    def write_rows(self, rows: Iterable[Sequence]) -> None:
        """Write ``(pod_id, env_steps, wall_s, split, metric, value)`` rows as scalars."""
        for pod, steps, wall, split, metric, value in rows:
            self.writer(pod).add_scalar(
                tag(split, metric),
                float(value),
                global_step=int(steps),
                walltime=self.wall_origin + float(wall),
            )

    def write_hparams(self, pod_id: str, hparams: Mapping[str, Any], env_steps: int = 0) -> None:
        """Record ``pod_id``'s hyperparameters: its HParams session and a text table."""
        # lazy: TensorBoard loads only to write or read events (tests/test_boundaries.py)
        from torch.utils.tensorboard.summary import hparams as hparams_summaries

        clean = clean_hparams(hparams)
        if not clean:
            return
        w = self.writer(pod_id)
        # Only the session's start: the HParams dashboard builds the experiment from
        # every run's session, so PPO and SAC pods of one tournament show side by side.
        _, start, _ = hparams_summaries(clean, {})
        w.file_writer.add_summary(start, int(env_steps), self.wall_origin)
        w.add_text("hparams", hparams_markdown(clean), int(env_steps), self.wall_origin)

    def flush(self) -> None:
        """Write every pending event to disk."""
        for w in self._writers.values():
            w.flush()

    def close(self) -> None:
        """Flush and close every writer (a later write opens a new event file)."""
        while self._writers:
            _, w = self._writers.popitem(last=False)
            w.close()


def read_events(pod_dir: Path) -> dict[str, list[tuple[int, float, float]]]:
    """Scalars of one pod's event folder: tag → ``[(step, wall_time, value)]`` in step order,
    read with TensorBoard's own loader (events purged by a resumed run left out)."""
    # lazy: TensorBoard loads only to write or read events (tests/test_boundaries.py)
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(str(pod_dir), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
    acc.Reload()
    out: dict[str, list[tuple[int, float, float]]] = {}
    for name in acc.Tags().get("scalars", []):
        out[name] = [(e.step, e.wall_time, e.value) for e in acc.Scalars(name)]
    return out


def read_hparams(pod_dir: Path) -> dict[str, Any]:
    """The hyperparameters recorded in one pod's event folder (the last session's)."""
    # lazy: TensorBoard loads only to write or read events (tests/test_boundaries.py)
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.plugins.hparams import metadata

    acc = ea.EventAccumulator(str(pod_dir), size_guidance={ea.TENSORS: 0})
    acc.Reload()
    content = acc.PluginTagToContent(metadata.PLUGIN_NAME).get(metadata.SESSION_START_INFO_TAG)
    if content is None:
        return {}
    info = metadata.parse_session_start_info_plugin_data(content)
    out: dict[str, Any] = {}
    for key, value in info.hparams.items():
        kind = value.WhichOneof("kind")
        out[key] = getattr(value, kind) if kind else None
    return out
