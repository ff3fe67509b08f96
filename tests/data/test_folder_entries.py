"""Every entry of a ``--path`` folder is read, skipped with a note, or refused in one
line; and a CSV that is no comma-separated table is named for what it is."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from tests.data.conftest import make_daily
from tests.data.test_bad_input import _download, _nothing_left, _one_line


def _two_files(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    df = make_daily(("AAA", "BBB"), n=60)
    for tic in ("AAA", "BBB"):
        df[df.tic == tic].drop(columns="tic").to_csv(folder / f"{tic}.csv", index=False)
    return folder


def test_junk_files_are_skipped_and_named_in_a_note(tmp_path, capsys):
    folder = _two_files(tmp_path)
    (folder / "README.txt").write_text("Bars from our vendor, 2019.\n")
    (folder / "._AAA.csv").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        ")
    (folder / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    code, err = _download(tmp_path, capsys, "--path", str(folder))
    assert code == 0, err
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    assert manifest["tickers"] == ["AAA", "BBB"]
    (note,) = [n for n in manifest["notes"] if n.startswith("skipped")]
    for name in ("README.txt", "._AAA.csv", ".DS_Store"):
        assert name in note, note


@pytest.mark.parametrize("name", ["CCC.tsv", "CCC.csv.zip"])
def test_a_table_in_a_format_finpod_does_not_read_is_refused(tmp_path, capsys, name):
    folder = _two_files(tmp_path)
    ccc = make_daily(("CCC",), n=60).drop(columns="tic")
    if name.endswith(".zip"):
        with zipfile.ZipFile(folder / name, "w") as z:
            z.writestr("CCC.csv", ccc.to_csv(index=False))
    else:
        ccc.to_csv(folder / name, index=False, sep="\t")
    _one_line(*_download(tmp_path, capsys, "--path", str(folder)), name, "may hold bars")
    _nothing_left(tmp_path)


def test_a_symlink_loop_named_like_a_bar_file_is_refused(tmp_path, capsys):
    folder = _two_files(tmp_path)
    os.symlink(folder / "CCC.csv", folder / "CCC.csv")
    _one_line(*_download(tmp_path, capsys, "--path", str(folder)), "CCC.csv", "link loop")
    _nothing_left(tmp_path)


def test_a_tab_separated_csv_is_named_as_such(tmp_path, capsys):
    folder = _two_files(tmp_path)
    ccc = make_daily(("CCC",), n=60).drop(columns="tic")
    ccc.to_csv(folder / "CCC.csv", index=False, sep="\t")
    line = _one_line(
        *_download(tmp_path, capsys, "--path", str(folder)), "CCC.csv", "tab-separated"
    )
    assert "would vanish" not in line


def test_a_spreadsheet_preamble_is_named_as_such(tmp_path, capsys):
    folder = _two_files(tmp_path)
    ccc = make_daily(("CCC",), n=60).drop(columns="tic")
    text = "Daily bars export\nGenerated 2019-07-01 by Vendor\n\n" + ccc.to_csv(index=False)
    (folder / "CCC.csv").write_text(text)
    line = _one_line(
        *_download(tmp_path, capsys, "--path", str(folder)),
        "CCC.csv",
        "3 lines above its header",
        "preamble",
    )
    assert "would vanish" not in line
