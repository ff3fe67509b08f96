"""``python -m finpod`` runs the CLI."""

from finpod.cli import main

main()
