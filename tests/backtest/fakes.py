"""Small synthetic markets for the backtest tests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from finpod.data.market import MarketData


def make_market(
    num_bars: int = 300,
    num_stocks: int = 6,
    seed: int = 0,
    split: str = "backtest",
    start: str = "2023-01-03",
    bar: str = "1d",
    late_listing: bool = True,
) -> MarketData:
    """Geometric random-walk prices with an index level; one ticker lists mid-split."""
    rng = np.random.default_rng(seed)
    ts = pd.bdate_range(start, periods=num_bars, tz="America/New_York")
    rets = rng.normal(0.0004, 0.015, (num_bars, num_stocks))
    close = 50.0 * np.exp(np.cumsum(rets, axis=0)) * rng.uniform(0.5, 4.0, num_stocks)
    open_ = close * np.exp(rng.normal(0, 0.003, close.shape))
    tradable = np.ones_like(close, dtype=bool)
    if late_listing:
        tradable[: num_bars // 3, -1] = False
        close[: num_bars // 3, -1] = 0.0
        open_[: num_bars // 3, -1] = 0.0
    feats = np.stack([np.tanh(rets * 50), np.tanh(np.roll(rets, 1, 0) * 50)], axis=-1)
    feats[~tradable] = 0.0
    bench = pd.Series(10_000 * np.exp(np.cumsum(rets.mean(1))), index=ts, name="^NDX")
    return MarketData(
        timestamps=ts,
        tickers=[f"T{i}" for i in range(num_stocks)],
        open=torch.tensor(open_, dtype=torch.float32),
        close=torch.tensor(close, dtype=torch.float32),
        features=torch.tensor(feats, dtype=torch.float32),
        feature_names=["ret_scaled", "ret_lag_scaled"],
        tradable=torch.tensor(tradable),
        bar=bar,
        split=split,
        benchmark=bench,
    )


def make_run_dir(
    root,
    market: MarketData,
    num_entries: int = 3,
    candidates: int = 12,
    dataset_path: str = "dataset",
    dataset_hash: str = "abc123",
    env: dict | None = None,
):
    """A run directory as ``finpod train`` writes it, with untrained PPO checkpoints."""
    import json
    from pathlib import Path

    from finpod.agents import make_agent, save_checkpoint
    from finpod.env.tables import ObsLayout

    run = Path(root) / "run-test"
    (run / "checkpoints").mkdir(parents=True)
    env = env if env is not None else {"cost_rate": 0.001, "action_mode": "weights"}
    if hasattr(ObsLayout, "for_env"):  # the observation's width depends on the env settings
        from finpod.env import EnvConfig

        obs_dim = ObsLayout.for_env(market, EnvConfig.from_dict(dict(env))).obs_dim
    else:
        obs_dim = ObsLayout(market.num_stocks, market.num_features).obs_dim
    entries, rows = [], []
    rng = np.random.default_rng(0)
    for i in range(num_entries):
        pod = f"pod{i:03d}"
        agent = make_agent("ppo", None, obs_dim, market.num_stocks, "cpu", seed=i)
        save_checkpoint(agent, run / "checkpoints" / f"{pod}.safetensors")
        score = 2.0 - 0.5 * i
        entries.append(
            {
                "pod_id": pod,
                "algorithm": "ppo",
                "hparams": {},
                "score": score,
                "checkpoint": f"checkpoints/{pod}.safetensors",
                "lineage": [],
                "history": [{"env_steps": 1000, "score": score}],
            }
        )
    for j in range(candidates):
        for steps in (500, 1000):
            for split in ("train", "validation"):
                rows.append(
                    {
                        "pod_id": f"pod{j:03d}",
                        "env_steps": steps,
                        "wall_s": steps / 100,
                        "split": split,
                        "metric": "sharpe",
                        "value": float(rng.normal(0.5, 1.0)),
                    }
                )
    run_meta = {
        "run_id": "run-test",
        "created": "2026-01-01T00:00:00Z",
        "strategy": {"agent": {"algorithm": "ppo"}, "env": env},
        "dataset": {"path": dataset_path, "hash": dataset_hash},
        "seed": 0,
        "versions": {},
    }
    board = {"score_name": "sharpe", "candidates_evaluated": candidates, "entries": entries}
    (run / "run.json").write_text(json.dumps(run_meta))
    (run / "leaderboard.json").write_text(json.dumps(board))
    pd.DataFrame(rows).to_csv(run / "metrics.csv", index=False)
    return run


class FakeDataset:
    """Stands in for ``finpod.data.load_split``/``load_manifest``; records what was loaded."""

    def __init__(
        self,
        splits: dict[str, MarketData],
        content_hash: str = "abc123",
        manifest: dict | None = None,
    ):
        self.splits = splits
        self.hash = content_hash
        self.manifest = dict(manifest or {})
        self.loaded: list[str] = []

    def load_split(self, dataset_dir, split, device="cpu"):
        self.loaded.append(split)
        return self.splits[split].to(device)

    def load_manifest(self, dataset_dir):
        return {"hash": self.hash, "bar": "1d", **self.manifest}

    def install(self, monkeypatch):
        """Stand in for the dataset readers wherever finpod's modules imported them."""
        from rebinding import patch_everywhere

        import finpod.data

        patch_everywhere(monkeypatch, finpod.data, "load_split", self.load_split)
        patch_everywhere(monkeypatch, finpod.data, "load_manifest", self.load_manifest)
        return self
