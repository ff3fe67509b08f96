"""The commands the README, the documentation pages (docs/), deploy/README and the KubeRay
manifests tell users to run are commands the CLI accepts: a renamed flag or verb fails
here, not in a user's shell."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer.main
import yaml

from finpod import __version__
from finpod.cli import app

REPO = Path(__file__).resolve().parents[1]


def _shell_commands(markdown: str) -> list[str]:
    """``finpod …`` lines of the fenced bash blocks, continuations joined, comments cut."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", markdown, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            for part in line.split("#", 1)[0].split("&&"):
                # `finpod …` or `.venv/bin/finpod …`
                match = re.match(r"^\s*(?:\S*/)?(finpod\s.*)$", part)
                if match:
                    commands.append(match.group(1).strip())
    return commands


def _parse(command: str) -> None:
    """Parse ``command`` with finpod's own CLI, without running it (raises on bad usage)."""
    args = shlex.split(command.replace("<run-id>", "RUN").replace("[", "").replace("]", ""))[1:]
    root = typer.main.get_command(app)
    verb, rest = args[0], args[1:]
    sub = root.commands.get(verb)
    if sub is None:
        raise ValueError(f"unknown verb {verb!r} in {command!r}")
    sub.make_context(verb, rest)


def _documented() -> list[str]:
    found = []
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    pages += [REPO / "deploy/README.md", REPO / "notebooks/README.md"]
    for path in pages:
        if path.is_file():
            found += _shell_commands(path.read_text(encoding="utf-8"))
    for manifest in sorted((REPO / "deploy").rglob("*.yaml")):
        for item in yaml.safe_load_all(manifest.read_text(encoding="utf-8")):
            entry = (item or {}).get("spec", {}).get("entrypoint")
            if entry:
                found.append(" ".join(entry.split()))
    return found


def test_documents_name_some_commands():
    verbs = {c.split()[1] for c in _documented()}
    assert {
        "download",
        "info",
        "train",
        "backtest",
        "report",
        "run",
        "walkforward",
        "paper",
    } <= verbs


@pytest.mark.parametrize("command", _documented())
def test_documented_command_parses(command):
    _parse(command)


def test_a_misspelled_flag_is_caught_by_the_parser():
    with pytest.raises(Exception, match="No such option: --stratgy"):
        _parse("finpod train --stratgy strategies/ppo.toml --data d")
    with pytest.raises(ValueError, match="unknown verb"):
        _parse("finpod trian --strategy strategies/ppo.toml")


def test_manifests_parse_and_use_this_version_of_the_image():
    manifests = sorted((REPO / "deploy").rglob("*.yaml"))
    assert manifests
    for manifest in manifests:
        text = manifest.read_text(encoding="utf-8")
        kinds = {item["kind"] for item in yaml.safe_load_all(text) if item}
        assert kinds & {"RayCluster", "RayJob"}, manifest
        for tag in re.findall(r"image: \S*finpod:(\S+)", text):
            assert tag.split("-")[0] == __version__, (manifest, tag)
