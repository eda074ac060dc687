"""The system calls a sandbox refuses: one rule list, rendered for both runtimes.

The local runtime compiles it with libseccomp for bubblewrap (`libseccomp_filter`); the
Docker runtime hands the engine the same rules as a seccomp profile (`docker_profile`), in
place of the engine's default one. Both filters allow everything else and filter the
machine's native system call ABI only: a call through another ABI (int 0x80 on x86_64)
does not match the filter's architecture and kills the thread (libseccomp's and runc's
default for a foreign architecture).

Docker's default profile is an allow-list; these rules are a deny-list that covers every
family that profile refuses a container without capabilities (tests/worker/
test_syscalls.py compares the two), plus io_uring, which its older versions allow. What
that profile refuses only because its list predates them (cachestat, fchmodat2, futex_wait,
futex_wake, futex_requeue, map_shadow_stack: ordinary file, futex and memory calls) is
allowed here, as is any system call newer than this list: a deny-list's known limit.
"""

from __future__ import annotations

import errno
import json
from dataclasses import dataclass

# The families Docker's default seccomp profile refuses a container without extra capabilities:
# filesystems and namespaces, tracing, kernel modules and kexec, BPF and perf, the kernel keyring,
# userfaultfd, handles, the clock, swap, accounting, quotas, raw I/O ports, reboot.
DENIED_SYSCALLS = (
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "ptrace",
    "process_vm_readv", "process_vm_writev", "kexec_load", "kexec_file_load", "init_module",
    "finit_module", "delete_module", "bpf", "perf_event_open", "add_key", "keyctl",
    "request_key", "userfaultfd", "open_by_handle_at", "name_to_handle_at", "reboot", "swapon",
    "swapoff", "clock_settime", "clock_adjtime", "settimeofday", "adjtimex", "acct", "quotactl",
    "lookup_dcookie", "iopl", "ioperm", "syslog", "fsopen", "fsmount", "fsconfig", "fspick",
    "open_tree", "move_mount", "mount_setattr", "nfsservctl", "vhangup", "sethostname",
    "setdomainname",
    # io_uring (Docker's default profile refuses it since 2023: its own path around the filter),
    # the process and memory-policy calls that need CAP_SYS_PTRACE or CAP_SYS_NICE there, and
    # the obsolete ones.
    "io_uring_setup", "io_uring_enter", "io_uring_register", "kcmp", "pidfd_getfd",
    "process_madvise", "fanotify_init", "mbind", "set_mempolicy", "get_mempolicy",
    "set_mempolicy_home_node", "migrate_pages", "move_pages", "quotactl_fd", "uselib", "ustat",
    "sysfs", "_sysctl", "vm86", "vm86old", "get_kernel_syms", "query_module", "create_module",
    "umount", "stime",
    # Numbers Linux reserves and does not implement; refused as Docker's profile refuses them,
    # so that a kernel that someday gives one a meaning does not open it here unseen.
    "afs_syscall", "getpmsg", "putpmsg", "security", "tuxcall", "vserver",
)
# clone() making any namespace is refused as unshare() is (Docker allows it only with
# CAP_SYS_ADMIN); clone3 passes its flags in memory a filter cannot read, so it answers ENOSYS
# and the C library falls back to clone(), as under Docker.
CLONE_NAMESPACES = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
                    0x40000000, 0x00000080)  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID,
                                             # NEWNET, NEWTIME
# socket(AF_VSOCK): virtual machine sockets are not namespaced, so a network namespace does not
# cut them off from the host or its hypervisor (Docker's profile refuses this family alone).
AF_VSOCK = 40
# personality(): Docker's profile allows only PER_LINUX, PER_LINUX32, UNAME26 and their union
# (0, 0x8, 0x20000, 0x20008) and the query 0xffffffff; every other flag (ADDR_NO_RANDOMIZE,
# READ_IMPLIES_EXEC, MMAP_PAGE_ZERO...) weakens the process's own hardening. A deny-list cannot
# say "none of these values", so each other bit of the 32-bit persona is refused on its own;
# the query, which sets them all, is refused with them.
PERSONALITY_ALLOWED_BITS = 0x00020008
PERSONALITY_REFUSED_BITS = tuple(1 << bit for bit in range(32)
                                 if not (1 << bit) & PERSONALITY_ALLOWED_BITS)


@dataclass(frozen=True)
class SyscallRule:
    """Refuse `name` with `errno_value`: always, or only when its first argument, masked with
    `arg0_mask`, equals `arg0_value`."""

    name: str
    errno_value: int = errno.EPERM
    arg0_mask: int | None = None
    arg0_value: int = 0


def sandbox_rules() -> tuple[SyscallRule, ...]:
    """Every rule of the sandbox's filter, in one list."""
    return (*(SyscallRule(name) for name in DENIED_SYSCALLS),
            *(SyscallRule("clone", arg0_mask=flag, arg0_value=flag) for flag in CLONE_NAMESPACES),
            SyscallRule("clone3", errno.ENOSYS),
            SyscallRule("socket", arg0_mask=0xFFFFFFFF, arg0_value=AF_VSOCK),
            *(SyscallRule("personality", arg0_mask=bit, arg0_value=bit)
              for bit in PERSONALITY_REFUSED_BITS))


def docker_profile() -> str:
    """The rules as a Docker seccomp profile (JSON, for `security_opt` "seccomp=..."): allow
    by default, refuse what the rules refuse. Names unknown on the engine's architecture are
    skipped by runc, as libseccomp's filter skips them."""
    entries = []
    for rule in sandbox_rules():
        entry: dict[str, object] = {"names": [rule.name], "action": "SCMP_ACT_ERRNO",
                                    "errnoRet": rule.errno_value}
        if rule.arg0_mask is not None:
            # runc's MASKED_EQ: `value` is the mask, `valueTwo` what the masked argument equals.
            entry["args"] = [{"index": 0, "value": rule.arg0_mask, "valueTwo": rule.arg0_value,
                              "op": "SCMP_CMP_MASKED_EQ"}]
        entries.append(entry)
    return json.dumps({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": entries},
                      separators=(",", ":"))
