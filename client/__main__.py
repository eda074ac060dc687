"""`python -m client`: the same as the `tvmrepro` command."""

from client.cli import main

main()
