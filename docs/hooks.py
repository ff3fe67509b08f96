"""MkDocs hooks (registered in mkdocs.yml): the site's changelog page is the repository's
CHANGELOG.md, read at build time so that it exists in one place."""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File, Files

CHANGELOG = Path(__file__).resolve().parents[1] / "CHANGELOG.md"


def on_files(files: Files, config) -> Files:
    files.append(File.generated(config, "changelog.md", abs_src_path=str(CHANGELOG)))
    return files
