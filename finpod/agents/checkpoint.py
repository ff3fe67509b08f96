"""Agent checkpoints as safetensors files with a checksum.

The file holds the agent's flat :meth:`~finpod.agents.base.Agent.state_dict` plus string
metadata: ``algorithm``, ``hparams`` (JSON), ``obs_dim``, ``action_dim``, ``seed``,
``format`` and ``sha256`` — the hash of the other metadata and of the tensors' bytes in
key order, so a corrupt or edited file is detected before anything is loaded. Nothing is ever unpickled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_bytes
from safetensors.torch import save as safetensors_bytes
from safetensors.torch import save_file

from finpod.agents.registry import make_agent
from finpod.atomic import atomic_write
from finpod.env.config import EnvConfig
from finpod.errors import FinpodError

#: Version of the checkpoint layout; bumped when the metadata or key scheme changes.
CHECKPOINT_FORMAT = "finpod-agent-1"


def tensors_sha256(sd: dict[str, torch.Tensor], meta: dict[str, str] | None = None) -> str:
    """sha256 over the metadata items (but ``sha256``) and (key, dtype, shape, bytes) of
    every tensor, keys sorted."""
    h = hashlib.sha256()
    for key in sorted(meta or {}):
        if key != "sha256":
            h.update(f"{key}={meta[key]}\n".encode())
    for key in sorted(sd):
        t = sd[key].detach().to("cpu").contiguous()
        h.update(key.encode())
        h.update(str(t.dtype).encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


#: Key prefix of the replay-buffer tensors an off-policy checkpoint may carry.
BUFFER_PREFIX = "buffer."
BUFFER_FIELDS = ("obs", "action", "reward", "next_obs", "terminated")


def _payload(
    agent: Any, include_buffer: bool, env: EnvConfig | None
) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The tensors and metadata (checksum included) of ``agent``'s checkpoint."""
    sd = {k: v.detach().to("cpu").contiguous() for k, v in agent.state_dict().items()}
    ring = agent.buffer_state() if include_buffer and hasattr(agent, "buffer_state") else None
    if ring is not None:
        for name, value in ring.items():
            sd[BUFFER_PREFIX + name] = value.detach().to("cpu").contiguous()
    meta = {
        "format": CHECKPOINT_FORMAT,
        "algorithm": agent.algorithm,
        "hparams": json.dumps(dataclasses.asdict(agent.hparams), sort_keys=True),
        "obs_dim": str(agent.obs_dim),
        "action_dim": str(agent.action_dim),
        "seed": str(agent.seed),
    }
    if env is not None:
        meta["env"] = json.dumps(env.to_dict(), sort_keys=True)
    meta["sha256"] = tensors_sha256(sd, meta)
    return sd, meta


def save_checkpoint(
    agent: Any,
    path: str | Path,
    *,
    include_buffer: bool = False,
    env: EnvConfig | None = None,
) -> Path:
    """Write ``agent`` to ``path`` (safetensors, atomically); returns the path.

    ``env``: the ``EnvConfig`` (execution controls included) the
    agent was trained and scored with, stored in the metadata as JSON (covered by the
    checksum) so a backtest replays them (:func:`checkpoint_env`).

    ``include_buffer`` also stores an off-policy agent's replay buffer (its filled rows
    and write position), so that training resumed from the file continues exactly; such
    files can be large (buffer rows × 2 × obs_dim × 4 bytes).
    """
    sd, meta = _payload(agent, include_buffer, env)
    return atomic_write(path, lambda p: save_file(sd, str(p), metadata=meta))


def checkpoint_to_bytes(agent: Any, *, env: EnvConfig | None = None) -> bytes:
    """The bytes of ``agent``'s checkpoint file (what :func:`save_checkpoint` writes),
    made in memory: what a pod or a walk-forward job sends back."""
    sd, meta = _payload(agent, False, env)
    return safetensors_bytes(sd, metadata=meta)


def read_checkpoint(
    path: str | Path, *, include_buffer: bool = False
) -> tuple[dict[str, str], dict[str, torch.Tensor]]:
    """Metadata and verified tensors of a checkpoint (FinpodError if missing or corrupt).

    The tensors are the agent's state dict; replay-buffer tensors (``buffer.*``) are
    dropped unless ``include_buffer``.
    """
    path = Path(path)
    if not path.is_file():
        raise FinpodError(
            f"checkpoint {path} does not exist", "check the path or the run directory"
        )
    try:
        data = path.read_bytes()
    except OSError as err:
        raise FinpodError(f"cannot read checkpoint {path}: {err}", "check the file") from err
    return read_checkpoint_bytes(data, where=str(path), include_buffer=include_buffer)


def read_checkpoint_bytes(
    data: bytes, *, where: str = "in memory", include_buffer: bool = False
) -> tuple[dict[str, str], dict[str, torch.Tensor]]:
    """:func:`read_checkpoint` of a checkpoint file's bytes (checksum checked)."""
    try:
        (size,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + size])
        meta = dict(header.get("__metadata__") or {})
        sd = load_bytes(data)
    except (SafetensorError, OSError, ValueError, RuntimeError, struct.error) as err:
        raise FinpodError(
            f"checkpoint {where} is corrupt or not a safetensors file", "re-create it"
        ) from err
    needed = ("format", "algorithm", "hparams", "obs_dim", "action_dim", "sha256")
    absent = [k for k in needed if k not in meta]
    if absent or meta.get("format") != CHECKPOINT_FORMAT:
        raise FinpodError(
            f"checkpoint {where} is not a finpod agent checkpoint (metadata {absent[0] if absent else 'format'!r})",
            "use a file written by finpod's save_checkpoint",
        )
    if tensors_sha256(sd, meta) != meta["sha256"]:
        raise FinpodError(
            f"checkpoint {where} failed its checksum (corrupt or modified)",
            "re-create it from the run",
        )
    if not include_buffer:
        sd = {k: v for k, v in sd.items() if not k.startswith(BUFFER_PREFIX)}
    return meta, sd


def checkpoint_env(meta: dict[str, str], path: str | Path) -> EnvConfig | None:
    """The ``EnvConfig`` recorded in a checkpoint's metadata (:func:`read_checkpoint`), or
    None when the file recorded none."""
    if not meta.get("env"):
        return None
    try:
        return EnvConfig.from_dict(json.loads(meta["env"]))
    except ValueError as err:
        raise FinpodError(
            f"checkpoint {path} has unreadable env settings: {err}", "re-run train"
        ) from err


def load_checkpoint(path: str | Path, device: torch.device | str = "cpu") -> Any:
    """Rebuild the agent saved at ``path`` on ``device``: networks, optimizers, counters, RNG."""
    meta, sd = read_checkpoint(path, include_buffer=True)
    return _agent_from(meta, sd, device, str(path))


def load_checkpoint_bytes(data: bytes, device: torch.device | str = "cpu") -> Any:
    """:func:`load_checkpoint` of a checkpoint file's bytes (nothing is written to disk)."""
    meta, sd = read_checkpoint_bytes(data, include_buffer=True)
    return _agent_from(meta, sd, device, "in memory")


def _agent_from(
    meta: dict[str, str], sd: dict[str, torch.Tensor], device: torch.device | str, where: str
) -> Any:
    try:
        hparams = json.loads(meta["hparams"])
        obs_dim, action_dim = int(meta["obs_dim"]), int(meta["action_dim"])
    except (ValueError, json.JSONDecodeError) as err:
        raise FinpodError(f"checkpoint {where} has unreadable metadata", "re-create it") from err
    agent = make_agent(
        meta["algorithm"],
        hparams,
        obs_dim,
        action_dim,
        device=device,
        seed=int(meta.get("seed", 0)),
    )
    buffer = {k[len(BUFFER_PREFIX) :]: sd.pop(k) for k in list(sd) if k.startswith(BUFFER_PREFIX)}
    agent.load_state_dict(sd)
    if buffer:
        agent.load_buffer_state(buffer)
    return agent
