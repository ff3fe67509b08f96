"""finpod deletes only what it made: a user's folder beside a dataset, and an input file
inside the dataset folder, survive ``finpod download --overwrite``."""

from __future__ import annotations

from pathlib import Path

from tests.data.conftest import make_daily
from tests.data.test_bad_input import _download, _one_line

_SYNTH = ("--source", "synthetic", "--n-tickers", "2", "--years", "0.2")


def _synthetic(tmp_path: Path, capsys, out: Path, *extra: str) -> tuple[int, str]:
    from finpod.cli import main

    try:
        main(["download", *_SYNTH, "--out", str(out), *extra])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def test_overwrite_keeps_a_users_backup_folder_named_like_a_temporary_one(tmp_path, capsys):
    out = tmp_path / "ds"
    assert _synthetic(tmp_path, capsys, out)[0] == 0
    backup = tmp_path / ".ds.20240101"  # digits read like a dead build's pid
    backup.mkdir()
    (backup / "manifest.json").write_text("{}")
    old_swap = tmp_path / ".ds.old-999999"  # a user's copy named like a swap folder
    old_swap.mkdir()
    code, err = _synthetic(tmp_path, capsys, out, "--overwrite")
    assert code == 0, err
    assert (backup / "manifest.json").read_text() == "{}"
    assert old_swap.is_dir()


def test_a_finished_dataset_carries_no_temporary_marker(tmp_path, capsys):
    """A copy of a dataset renamed like a temporary folder must not look like finpod's."""
    from finpod.data.outdir import TEMP_MARKER

    out = tmp_path / "ds"
    assert _synthetic(tmp_path, capsys, out)[0] == 0
    assert not (out / TEMP_MARKER).exists()


def test_overwrite_refuses_when_the_input_file_lies_inside_the_dataset(tmp_path, capsys):
    out = tmp_path / "ds"
    df = make_daily(n=60)
    # a first dataset, then the user's raw file saved inside its folder
    src = tmp_path / "raw.csv"
    df.to_csv(src, index=False)
    code, err = _download(tmp_path, capsys, "--path", str(src))
    assert code == 0, err
    raw = out / "raw.csv"
    df.to_csv(raw, index=False)
    _one_line(
        *_download(tmp_path, capsys, "--path", str(raw), "--overwrite"),
        "--overwrite would delete",
        "raw.csv",
        "move the input",
    )
    assert raw.exists() and (out / "manifest.json").exists()
