"""The documentation: the README is a front page, every relative link of the pages
resolves, the CLI reference is the one the command line gives, and the MkDocs site
builds in strict mode, where a broken link, a broken anchor or a missing page fails."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from finpod.cli import app

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
#: The README is a front page: what finpod is, the quick start, the workflow, links.
README_MAX_LINES = 250
#: The line CI runs (.ci/run): the README's test command, byte for byte.
TEST_COMMAND = (
    "python3 -m venv .venv && .venv/bin/pip install -c constraints.txt -e '.[dev]' "
    "&& .venv/bin/python -m pytest -q"
)

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)[^)]*\)")


def _pages() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.glob("*.md"))]


def _relative_links(markdown: str) -> list[str]:
    """Link targets of ``markdown`` outside code that name a file (not a URL, not ``#…``)."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    targets = _LINK.findall(text)
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t) and t[0] != "#"]


def _broken_links(page: Path) -> list[str]:
    links = _relative_links(page.read_text(encoding="utf-8"))
    return [t for t in links if not (page.parent / t.split("#", 1)[0]).exists()]


def _gen_cli():
    spec = importlib.util.spec_from_file_location("gen_cli", DOCS / "gen_cli.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mkdocs_build(root: Path, site: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=600)


def test_readme_is_a_front_page_of_at_most_250_lines():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES


def test_readme_keeps_the_test_command_ci_runs_in_a_bash_block():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
    assert any(TEST_COMMAND in block.splitlines() for block in blocks)


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_points_to_an_existing_file(page):
    assert _broken_links(page) == []


def test_the_link_check_finds_a_link_to_a_missing_file(tmp_path):
    (tmp_path / "there.md").write_text("x", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md#a) [gone](gone.md) [web](https://x.org) [top](#t) `[not](code.md)`\n"
        "```bash\n[not](block.md)\n```\n",
        encoding="utf-8",
    )
    assert _broken_links(page) == ["gone.md"]


def test_the_cli_reference_page_is_what_the_command_line_says():
    committed = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert committed == _gen_cli().render(), "docs/cli.md is stale: run python docs/gen_cli.py"


def test_the_cli_reference_lists_every_command_and_option():
    page = _gen_cli().render()
    root = typer.main.get_command(app)
    for name, command in root.commands.items():
        assert f"## finpod {name}\n" in page
        section = page.split(f"## finpod {name}\n", 1)[1].split("\n## ", 1)[0]
        # A hidden option (there is none) would be left out of the reference.
        for param in (p for p in command.params if not getattr(p, "hidden", False)):
            for opt in param.opts if param.param_type_name == "option" else []:
                assert f"`{opt}`" in section, (name, opt)


def test_the_site_builds_in_strict_mode(tmp_path):
    site = tmp_path / "site"
    built = _mkdocs_build(REPO, site)
    assert built.returncode == 0, built.stderr
    for page in ("installation", "workflow", "cli", "api", "changelog", "style"):
        assert (site / page / "index.html").is_file(), page
    assert 'id="finpod.pipeline.run_all"' in (site / "api" / "index.html").read_text()
    assert "Removed: old module paths" in (site / "changelog" / "index.html").read_text()


def _site_copy(root: Path) -> Path:
    """The site's sources under ``root``, its API page left empty (it reads finpod's code)."""
    root.mkdir()
    shutil.copy(REPO / "mkdocs.yml", root)
    shutil.copy(REPO / "CHANGELOG.md", root)
    shutil.copytree(DOCS, root / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "docs" / "api.md").write_text("# API reference\n", encoding="utf-8")
    return root


def test_a_copy_of_the_site_builds_in_strict_mode(tmp_path):
    copy = _site_copy(tmp_path / "repo")
    built = _mkdocs_build(copy, tmp_path / "site")
    assert built.returncode == 0, built.stderr


@pytest.mark.parametrize(
    "page, text",
    [
        ("docs/index.md", "[gone](no-such-page.md)\n"),
        ("docs/index.md", "[gone](workflow.md#no-such-heading)\n"),
        ("mkdocs.yml", "  - Gone: no-such-page.md\n"),
    ],
    ids=["link to a missing page", "link to a missing heading", "nav names a missing page"],
)
def test_the_strict_build_fails_on_a_broken_reference(tmp_path, page, text):
    copy = _site_copy(tmp_path / "repo")
    with (copy / page).open("a", encoding="utf-8") as handle:
        handle.write(text)
    built = _mkdocs_build(copy, tmp_path / "site")
    assert built.returncode != 0
