"""`python -m cli`: the same as the `tvmrepro` command."""

from cli.cli import entry

entry()
