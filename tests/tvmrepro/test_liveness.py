"""Liveness tokens: a live process, a dead one, a zombie, a reused pid, another host."""

from __future__ import annotations

import os
import socket
import subprocess

import psutil
import pytest

from tvmrepro.liveness import claimer_gone, host_lost, pid_alive, process_token, token_alive

NO_SUCH_PID = 2 ** 22 + 1  # above the kernel's pid_max


def test_tokens_of_live_and_dead_processes() -> None:
    host = socket.gethostname()
    parent = process_token(os.getppid())
    assert parent.startswith(f"{host}:{os.getppid()}:") and token_alive(parent) is True
    assert not claimer_gone(parent)
    assert token_alive(f"{host}:{NO_SUCH_PID}:123.00") is False
    assert claimer_gone(f"{host}:{NO_SUCH_PID}:123.00")
    assert token_alive(f"elsewhere:{NO_SUCH_PID}:1.00") is None  # another host: cannot know
    assert not claimer_gone(f"elsewhere:{NO_SUCH_PID}:1.00")
    assert claimer_gone(process_token())  # this very process: an earlier attempt of ours


def test_another_host_is_lost_once_it_has_no_live_worker() -> None:
    other = f"elsewhere:{NO_SUCH_PID}:1.00"
    assert host_lost(other, set()) and claimer_gone(other, live_hosts=set())
    assert not host_lost(other, {"elsewhere"}) and not claimer_gone(other, live_hosts={"elsewhere"})
    assert not host_lost(process_token(os.getppid()), set())  # this host: its pids decide
    assert not claimer_gone(process_token(os.getppid()), live_hosts=set())
    assert not host_lost("", set())  # no claimer at all


def test_a_reused_pid_is_not_the_same_process() -> None:
    host, pid = socket.gethostname(), os.getppid()
    assert token_alive(f"{host}:{pid}:1.00") is False  # that pid now names a younger process
    assert token_alive(f"{host}:{pid}") is True  # an old-style token: the pid alone decides


def test_a_zombie_counts_as_gone() -> None:
    zombie = subprocess.Popen(["true"])
    try:
        token = f"{socket.gethostname()}:{zombie.pid}"
        while pid_alive(zombie.pid):  # it exits, and nobody has reaped it yet
            os.sched_yield()
        assert claimer_gone(token)
    finally:
        zombie.wait()


def test_a_token_outlives_a_moved_boot_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel's btime moves by a second when the clock is adjusted: a live process whose
    # token was made before must still read as alive after.
    token = process_token(os.getppid())
    before = psutil.Process(os.getppid()).create_time()
    booted = psutil.boot_time()
    monkeypatch.setattr(psutil._pslinux, "boot_time", lambda: booted + 1.0)
    assert psutil.Process(os.getppid()).create_time() == pytest.approx(before + 1)
    assert token_alive(token) is True


def test_an_older_release_s_token_of_a_live_process_reads_alive() -> None:
    # Written before an upgrade with psutil's wall-clock create time: its worker still runs.
    host, pid = socket.gethostname(), os.getppid()
    created = psutil.Process(pid).create_time()
    assert token_alive(f"{host}:{pid}:{created:.2f}") is True
    assert token_alive(f"{host}:{pid}:{created + 1.0:.2f}") is True  # btime moved by a second
    assert token_alive(f"{host}:{pid}:{created - 60:.2f}") is False  # another process's pid
