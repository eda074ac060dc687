"""The local sandbox shows only what a run needs (real TVM, a warm bubblewrap sandbox).

Nested user namespaces fail, the capability bounding set is empty, a seccomp filter refuses the
dangerous syscall families with EPERM, /dev/shm is writable (multiprocessing works), PID 1's
command line carries no host path, and the root holds only the system's programs and libraries.
"""

from __future__ import annotations

import platform
from collections.abc import Iterator

import pytest

from tests.conftest import NEW_ENV, REPO
from tests.worker.sandboxes import needs_bubblewrap, run_warm
from tvmrepro.environments import Environment
from tvmrepro.results import Result
from tvmrepro.settings import Settings
from worker.runtimes.local import LocalRuntime

pytestmark = pytest.mark.tvm

ADD_KEY = {"x86_64": 248, "aarch64": 217}


@pytest.fixture(scope="module")
def runtime(tvm_envs: dict[str, Environment], settings: Settings) -> Iterator[LocalRuntime]:
    """One local runtime keeping a sandbox of NEW_ENV warm."""
    local = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 1}))
    needs_bubblewrap(local)
    local.prewarm([tvm_envs[NEW_ENV]])
    yield local
    local.close()


def run(script: str, runtime: LocalRuntime, tvm_envs: dict[str, Environment]) -> Result:
    """Run a script case in a warm sandbox; it must end ok."""
    result = run_warm(runtime, tvm_envs[NEW_ENV], script)
    assert result.status == "ok", (result.message, result.log.stderr[-2000:])
    return result


def test_nested_user_namespace_fails(runtime: LocalRuntime,
                                     tvm_envs: dict[str, Environment]) -> None:
    # Only a user namespace (-U): the unshare(2) it asks for is what the seccomp filter refuses
    # with EPERM; a missing tool, a bad option or a failure past the call says something else.
    script = ("import subprocess\n"
              "p = subprocess.run(['unshare', '-U', 'true'], capture_output=True, text=True)\n"
              "print(p.returncode, repr(p.stderr))\n")
    result = run(script, runtime, tvm_envs)
    assert result.log.stdout == "1 'unshare: unshare failed: Operation not permitted\\n'\n"


def test_capability_bounding_set_is_empty(runtime: LocalRuntime,
                                          tvm_envs: dict[str, Environment]) -> None:
    script = ("for line in open('/proc/self/status'):\n"
              "    if line.startswith(('CapBnd', 'CapPrm', 'CapEff', 'CapAmb')):\n"
              "        print(line.split()[1])\n")
    result = run(script, runtime, tvm_envs)
    assert result.log.stdout.split() == ["0000000000000000"] * 4


@pytest.mark.skipif(platform.machine() not in ADD_KEY, reason="add_key's number is per arch")
def test_denied_syscalls_return_eperm(runtime: LocalRuntime,
                                      tvm_envs: dict[str, Environment]) -> None:
    # Both succeed for an unprivileged user without a filter: only the filter makes them EPERM.
    script = ("import ctypes\n"
              "libc = ctypes.CDLL(None, use_errno=True)\n"
              "print(libc.unshare(0x10000000), ctypes.get_errno())\n"  # CLONE_NEWUSER
              f"print(libc.syscall({ADD_KEY[platform.machine()]}, b'user', b'k', b'v', 1, -2),"
              " ctypes.get_errno())\n")  # add_key to the process keyring
    result = run(script, runtime, tvm_envs)
    assert result.log.stdout.splitlines() == ["-1 1", "-1 1"]


def test_multiprocessing_pool_and_lock_work(runtime: LocalRuntime,
                                            tvm_envs: dict[str, Environment]) -> None:
    script = ("import multiprocessing as mp\n"
              "lock = mp.Lock()\n"
              "with lock, mp.Pool(2) as pool:\n"
              "    print(sum(pool.map(abs, [-1, -2, -3])))\n")
    result = run(script, runtime, tvm_envs)
    assert result.log.stdout == "6\n"


def test_pid_1_command_line_has_no_host_path(runtime: LocalRuntime, settings: Settings,
                                             tvm_envs: dict[str, Environment]) -> None:
    script = "print(open('/proc/1/cmdline').read().replace(chr(0), ' '))\n"
    cmdline = run(script, runtime, tvm_envs).log.stdout
    assert cmdline.strip()
    for host in (str(settings.home), str(REPO), str(settings.work_dir), "--ro-bind", "/root"):
        assert host not in cmdline, cmdline


def test_root_holds_no_host_users_or_files(runtime: LocalRuntime,
                                           tvm_envs: dict[str, Environment]) -> None:
    script = ("import os\n"
              "print(sorted(line.split(':')[0] for line in open('/etc/passwd')))\n"
              "print([p for p in ('/var/log', '/opt', '/srv', '/etc/shadow', '/etc/hostname')"
              " if os.path.exists(p)])\n")
    users, present = run(script, runtime, tvm_envs).log.stdout.splitlines()
    assert users == "['root', 'sandbox']"
    assert present == "[]"
