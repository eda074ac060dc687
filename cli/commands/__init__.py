"""The click commands, a module per group of them; cli/cli.py adds each to the `tvmrepro` group."""
