"""The sandbox's system call rules (worker/runtimes/syscalls.py): one list, rendered for libseccomp
(the local sandbox) and as a Docker profile, covering every family Docker's default profile
refuses; and, in a real local sandbox (real TVM), the rules beyond the named families bind: the
flags of personality(), AF_VSOCK sockets, ptrace, and no other ABI around the filter.
tests/docker/test_docker_limits.py runs the same probes in containers."""

from __future__ import annotations

import errno
import json

import pytest

from tests.conftest import NEW_ENV
from tests.fixtures.hostile_scripts import FAMILIES, FAMILIES_REFUSED, FOREIGN_ABI, x86_64_only
from tests.worker.sandboxes import needs_bubblewrap, run_script
from tvmrepro.environments import Environment
from worker.runtimes.local import LocalRuntime
from worker.runtimes.syscalls import DENIED_SYSCALLS, docker_profile, sandbox_rules

# What Docker's default profile (moby profiles/seccomp/default.json) refuses a container with
# no capabilities on x86_64, by name: every system call of the architecture that none of its
# ALLOW rules names unconditionally (read against its list, and against the engine 20.10's,
# which also allows io_uring). Each must be refused here too.
DOCKER_DEFAULT_REFUSES = (
    "acct", "add_key", "afs_syscall", "bpf", "chroot", "clock_settime", "create_module",
    "delete_module", "fanotify_init", "finit_module", "fsconfig", "fsmount", "fsopen",
    "fspick", "get_kernel_syms", "get_mempolicy", "getpmsg", "init_module", "ioperm", "iopl",
    "kcmp", "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mbind",
    "migrate_pages", "mount", "mount_setattr", "move_mount", "move_pages", "nfsservctl",
    "open_by_handle_at", "open_tree", "perf_event_open", "pidfd_getfd", "pivot_root",
    "process_madvise", "putpmsg", "query_module", "quotactl", "quotactl_fd", "reboot",
    "request_key", "security", "set_mempolicy", "set_mempolicy_home_node", "setdomainname",
    "sethostname", "setns", "settimeofday", "swapoff", "swapon", "_sysctl", "sysfs", "syslog",
    "tuxcall", "umount2", "unshare", "uselib", "userfaultfd", "ustat", "vhangup", "vserver",
)
# Its argument rules: clone() making a namespace, personality() but its five values,
# socket(AF_VSOCK); and clone3, which it answers ENOSYS.
CONDITIONAL = {"clone", "personality", "socket"}


def test_every_refusal_of_dockers_default_profile_is_a_rule() -> None:
    unconditional = {rule.name for rule in sandbox_rules() if rule.arg0_mask is None}
    assert set(DOCKER_DEFAULT_REFUSES) - unconditional == set()
    assert {"io_uring_setup", "io_uring_enter", "io_uring_register"} <= unconditional
    assert {rule.name for rule in sandbox_rules() if rule.arg0_mask is not None} == CONDITIONAL
    assert [rule.errno_value for rule in sandbox_rules() if rule.name == "clone3"] == [errno.ENOSYS]


def test_the_docker_profile_is_the_same_rules() -> None:
    profile = json.loads(docker_profile())
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    assert "architectures" not in profile and "archMap" not in profile  # the native ABI only
    rendered = [(entry["names"], entry["action"], entry["errnoRet"],
                 [(a["index"], a["value"], a["valueTwo"], a["op"]) for a in entry.get("args", [])])
                for entry in profile["syscalls"]]
    expected = [([rule.name], "SCMP_ACT_ERRNO", rule.errno_value,
                 [] if rule.arg0_mask is None
                 else [(0, rule.arg0_mask, rule.arg0_value, "SCMP_CMP_MASKED_EQ")])
                for rule in sandbox_rules()]
    assert rendered == expected
    assert set(DENIED_SYSCALLS) <= {names[0] for names, *_ in rendered}


@x86_64_only
@pytest.mark.tvm
def test_argument_rules_bind_in_the_local_sandbox(warm_runtime: LocalRuntime,
                                                  tvm_envs: dict[str, Environment]) -> None:
    needs_bubblewrap(warm_runtime)
    result = run_script(warm_runtime, tvm_envs[NEW_ENV], FAMILIES)
    assert result.status == "ok", result.log.stderr[-2000:]
    assert result.log.stdout.splitlines() == FAMILIES_REFUSED


@x86_64_only
@pytest.mark.tvm
def test_a_foreign_abi_is_no_way_around_the_local_filter(warm_runtime: LocalRuntime,
                                                         tvm_envs: dict[str, Environment]
                                                         ) -> None:
    needs_bubblewrap(warm_runtime)
    result = run_script(warm_runtime, tvm_envs[NEW_ENV], FOREIGN_ABI)
    assert (result.status, result.signal) == ("crash", "SIGSYS"), result.log.stdout
