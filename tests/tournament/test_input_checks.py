"""A tournament checks what its pods will read on the driver, before it creates a run
directory or starts an actor: a bad input is one line and no run directory. A pod that
fails anyway prints no traceback on the console; the full text goes to ``train.log``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_runner import one_error_line

from finpod.errors import FinpodError
from tests.tournament.conftest import write_strategy


def _strategy_with_reference(path: Path, reference: Path) -> Path:
    write_strategy(path, pod_steps=128, epochs=1)
    text = path.read_text(encoding="utf-8").replace(
        "[env]\n", f'[env]\naction_mode = "active"\nreference = "{reference}"\n', 1
    )
    path.write_text(text, encoding="utf-8")
    return path


def _equal_weights(path: Path, dataset: Path, tickers: list[str] | None = None) -> Path:
    from finpod.data import Manifest

    manifest = Manifest.load(dataset)
    names = tickers or list(manifest.tickers)
    weights = ",".join(f"{1 / len(names):.6f}" for _ in names)
    path.write_text(f"date,{','.join(names)}\n2000-01-03,{weights}\n", encoding="utf-8")
    return path


def test_a_missing_reference_file_is_one_line_and_no_run_directory(
    tmp_path, tiny_dataset, finpod_cli
):
    missing = tmp_path / "weights.csv"
    strategy = _strategy_with_reference(tmp_path / "s.toml", missing)
    runs = tmp_path / "runs"
    out = finpod_cli(
        "train", "--strategy", str(strategy), "--data", str(tiny_dataset),
        "--runs", str(runs), "--budget", "2 pods",
    )  # fmt: skip
    one_error_line(out, str(missing), "not found")
    assert not runs.exists() or not any(runs.iterdir())


def test_a_reference_file_naming_unknown_tickers_is_refused_before_the_run_directory(
    tmp_path, tiny_dataset
):
    from finpod.tournament import run_tournament

    weights = _equal_weights(tmp_path / "w.csv", tiny_dataset, ["NOPE", "ALSO_NOPE"])
    strategy = _strategy_with_reference(tmp_path / "s.toml", weights)
    runs = tmp_path / "runs"
    with pytest.raises(FinpodError, match="NOPE"):
        run_tournament(strategy, tiny_dataset, budget="2 pods", runs=runs)
    assert not runs.exists()


def test_a_pod_failure_is_one_console_line_and_its_full_text_goes_to_the_log(
    tmp_path, tiny_dataset, local_ray, capfd
):
    import gc
    import io

    from rich.console import Console

    from finpod.cli.tournament_cmd import TournamentView
    from finpod.tournament import run_tournament

    weights = _equal_weights(tmp_path / "w.csv", tiny_dataset)
    strategy = _strategy_with_reference(tmp_path / "s.toml", weights)
    shown = io.StringIO()
    view = TournamentView(Console(file=shown, width=300))
    run_dirs: list[Path] = []

    def on_event(kind: str, payload: dict) -> None:
        if kind == "run":  # the driver has checked the file: the pods will not find it
            run_dirs.append(Path(payload["run_dir"]))
            weights.unlink()
        view.on_event(kind, payload)

    with pytest.raises(FinpodError, match="failed"):
        run_tournament(
            strategy, tiny_dataset, budget="4 pods", runs=tmp_path / "runs", on_event=on_event
        )
    gc.collect()  # drop every reference the run held: Ray prints unfetched errors then
    err = capfd.readouterr().err
    assert "Traceback" not in err and 'File "' not in err, err
    # Piped output wraps a statement past 120 columns: read the statements, not the lines.
    text = " ".join(shown.getvalue().split())
    failed = re.findall(r"pod p\d+ failed: .*?(?= pod p\d+ failed: |$)", text)
    assert failed and 'File "' not in shown.getvalue()
    assert all("not found" in one and "train.log" in one for one in failed), failed
    log = (run_dirs[0] / "train.log").read_text(encoding="utf-8")
    assert 'File "' in log and "not found" in log


def test_a_lying_dataset_manifest_is_refused_before_the_run_directory(tmp_path, tiny_dataset):
    import json
    import shutil

    from finpod.tournament import run_tournament

    data = tmp_path / "ds"
    shutil.copytree(tiny_dataset, data)
    manifest = json.loads((data / "manifest.json").read_text(encoding="utf-8"))
    manifest["bars"] -= 40
    (data / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    strategy = write_strategy(tmp_path / "s.toml", pod_steps=128, epochs=1)
    runs = tmp_path / "runs"
    with pytest.raises(FinpodError, match="disagrees with bars.parquet"):
        run_tournament(strategy, data, budget="2 pods", runs=runs)
    assert not runs.exists()
