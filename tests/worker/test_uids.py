"""Sandbox uids: a live sandbox's uid is no other live sandbox's, in this process or another."""

from __future__ import annotations

import contextlib
import subprocess
import sys

import pytest

from worker.runtimes import uids


@pytest.fixture
def two_uids(monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """A range of two uids, so that draws collide at once."""
    low = uids.SANDBOX_UID_RANGE[1] - 2
    monkeypatch.setattr(uids, "SANDBOX_UID_RANGE", (low, low + 2))
    return low, low + 1


def test_claimed_uids_differ_until_released(two_uids: tuple[int, int]) -> None:
    with contextlib.ExitStack() as first, contextlib.ExitStack() as second:
        one, other = uids.claim_uid(first), uids.claim_uid(second)
        assert {one, other} == set(two_uids)
        with pytest.raises(OSError, match="no free sandbox uid"), contextlib.ExitStack() as third:
            uids.claim_uid(third)
        assert (uids.uid_locks_dir() / str(other)).exists()
        second.close()  # released: its file is gone, and it is the one uid left to draw
        assert not (uids.uid_locks_dir() / str(other)).exists()
        with contextlib.ExitStack() as again:
            assert uids.claim_uid(again) == other


def test_a_uid_claimed_by_another_process_is_not_drawn(two_uids: tuple[int, int]) -> None:
    # Another worker holds the first uid (as its sandbox lives); this one can only draw the second.
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import contextlib, sys\n"
         "from worker.runtimes import uids\n"
         f"uids.SANDBOX_UID_RANGE = ({two_uids[0]}, {two_uids[0] + 1})\n"
         "with contextlib.ExitStack() as hold:\n"
         "    print(uids.claim_uid(hold), flush=True)\n"
         "    sys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    with holder:
        try:
            assert holder.stdout is not None
            assert int(holder.stdout.readline()) == two_uids[0]
            for _ in range(20):
                with contextlib.ExitStack() as hold:
                    assert uids.claim_uid(hold) == two_uids[1]
        finally:
            holder.kill()
    # It died without releasing: the kernel let its lock go, and its uid is drawable again.
    seen = set()
    for _ in range(40):
        with contextlib.ExitStack() as hold:
            seen.add(uids.claim_uid(hold))
    assert seen == set(two_uids)
