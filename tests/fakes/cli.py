"""`python -m tests.fakes.cli ARGS`: the tvmrepro command, with the fake runtime among its runtimes.

The tests' launcher for processes of a stack of fake runs (tests/service/stack.py starts
them so when TVMREPRO_RUNTIME=fake): it adds FakeRuntime to the product's runtime table,
then runs the product's own entry point unchanged. The pool processes a worker forks keep
the table. The product itself has no "fake" runtime: `python -m cli worker` refuses it.
"""

from __future__ import annotations

from cli.cli import entry
from tests.fakes.runtime import FakeRuntime
from worker.runtimes import RUNTIMES

RUNTIMES["fake"] = FakeRuntime

if __name__ == "__main__":
    entry()
