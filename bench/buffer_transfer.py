#!/usr/bin/env python3
"""Replay-buffer inheritance cost: export → ``ray.put`` → ``ray.get`` → import, timed.

A SAC agent's buffer is filled with ``--rows`` random transitions of ``--obs-dim``
observation floats (the 95-ticker sample's observation is ~1,150 floats), then moved the
way a child pod inherits it from its parent. One JSON line per size on stdout with the
bytes moved and the seconds of each stage (host copy out, object-store put, get, copy
into the child's buffer).

    RAY_AUTH_MODE=disabled python bench/buffer_transfer.py --rows 10000 50000 --obs-dim 1150
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000])
    parser.add_argument("--obs-dim", type=int, default=1150)
    parser.add_argument("--action-dim", type=int, default=95)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    import ray

    from finpod.agents import make_agent

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="rbt") as tmp:
        ray.init(
            address="local",
            num_cpus=1,
            include_dashboard=False,
            log_to_driver=False,
            _temp_dir=tmp,
            object_store_memory=2 * 2**30,
        )
        try:
            for rows in args.rows:
                hp = {"buffer_size": rows, "actor_hidden": [8], "critic_hidden": [8]}
                parent = make_agent("sac", hp, args.obs_dim, args.action_dim, args.device, 0)
                child = make_agent("sac", hp, args.obs_dim, args.action_dim, args.device, 1)
                parent._ensure_buffer(1)
                buf = parent.buffer
                g = torch.Generator(device=buf.device).manual_seed(0)
                batch = 1000
                for start in range(0, rows, batch):
                    b = min(batch, rows - start)
                    obs = torch.randn(b, args.obs_dim, generator=g, device=buf.device)
                    act = torch.rand(b, args.action_dim, generator=g, device=buf.device)
                    rew = torch.randn(b, generator=g, device=buf.device)
                    buf.add(obs, act, rew, obs, torch.zeros(b, dtype=torch.bool))
                t0 = time.perf_counter()
                data = parent.export_buffer()
                t1 = time.perf_counter()
                ref = ray.put(data)
                t2 = time.perf_counter()
                got = ray.get(ref)
                t3 = time.perf_counter()
                child.import_buffer(got)
                t4 = time.perf_counter()
                nbytes = sum(v.nbytes for v in data.values())
                print(
                    json.dumps(
                        {
                            "bench": "buffer_transfer",
                            "device": args.device,
                            "rows": rows,
                            "obs_dim": args.obs_dim,
                            "bytes": nbytes,
                            "buffer_nbytes": parent.buffer_nbytes(),
                            "export_s": round(t1 - t0, 4),
                            "put_s": round(t2 - t1, 4),
                            "get_s": round(t3 - t2, 4),
                            "import_s": round(t4 - t3, 4),
                            "total_s": round(t4 - t0, 4),
                            "gb_per_s": round(nbytes / (t4 - t0) / 1e9, 3),
                        }
                    ),
                    flush=True,
                )
                del data, got, ref, parent, child
        finally:
            ray.shutdown()


if __name__ == "__main__":
    main()
