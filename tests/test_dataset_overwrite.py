"""``finpod download --overwrite`` replaces only what a build wrote (``manifest.json`` and
the files it lists) and never a user's file; an ``--out`` that is a link keeps pointing at
the new dataset and nothing temporary is left beside it."""

from __future__ import annotations

import json
from pathlib import Path

from cli_runner import one_error_line

SYNTH = ("download", "--source", "synthetic", "--n-tickers", "2", "--years", "0.2")


def _hash(folder: Path) -> str:
    return json.loads((folder / "manifest.json").read_text())["hash"]


def test_overwrite_refuses_a_dataset_folder_holding_a_users_file(tmp_path, finpod_cli):
    out = tmp_path / "ds"
    assert finpod_cli(*SYNTH, "--out", str(out)).returncode == 0
    before = _hash(out)
    (out / "notes.txt").write_text("my notes")
    (out / "plots").mkdir()
    again = finpod_cli(*SYNTH, "--seed", "5", "--out", str(out), "--overwrite")
    one_error_line(again, "--overwrite would delete notes.txt, plots", "did not write")
    assert (out / "notes.txt").read_text() == "my notes" and (out / "plots").is_dir()
    assert _hash(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # no temporary folder left


def test_a_manifest_listing_no_files_protects_everything_but_the_built_files(tmp_path, finpod_cli):
    out = tmp_path / "ds"
    assert finpod_cli(*SYNTH, "--out", str(out)).returncode == 0
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest["files"]  # a dataset written before manifests listed their files
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "universe.csv").write_text("tic\nAAA\n")
    refused = finpod_cli(*SYNTH, "--out", str(out), "--overwrite")
    one_error_line(refused, "--overwrite would delete universe.csv")
    (out / "universe.csv").unlink()
    done = finpod_cli(*SYNTH, "--seed", "5", "--out", str(out), "--overwrite")
    assert done.returncode == 0, done.stderr
    assert "files" in json.loads((out / "manifest.json").read_text())


def test_overwrite_through_a_linked_out_replaces_the_linked_folder_and_leaves_no_link(
    tmp_path, finpod_cli
):
    real = tmp_path / "store" / "ds"
    assert finpod_cli(*SYNTH, "--out", str(real)).returncode == 0
    before = _hash(real)
    link = tmp_path / "ds"
    link.symlink_to(real, target_is_directory=True)
    done = finpod_cli(*SYNTH, "--seed", "5", "--out", str(link), "--overwrite")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{link}\n"
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert _hash(real) != before and _hash(link) == _hash(real)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "store"]
    assert sorted(p.name for p in real.parent.iterdir()) == ["ds"]  # no temporary left


def test_a_build_into_a_link_to_a_new_folder_writes_the_folder(tmp_path, finpod_cli):
    real = tmp_path / "store" / "ds"
    real.parent.mkdir()
    link = tmp_path / "ds"
    link.symlink_to(real, target_is_directory=True)  # dangling until the build
    done = finpod_cli(*SYNTH, "--out", str(link))
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and (real / "manifest.json").is_file()
    assert sorted(p.name for p in real.parent.iterdir()) == ["ds"]
