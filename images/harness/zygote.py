"""The zygote: imports TVM once, then forks every sandbox of its environment from itself.

`python -m harness --zygote --control fd:N --seccomp fd:M` starts here, inside
bubblewrap (the sandbox's read-only root, environment and harness, no network)
as root with only the capabilities needed to make namespaces and give them up.
It never runs a case. It imports TVM and the harness (supervisor.warm_frozen),
says `ready` on its control socket, then serves requests there: each is the
new sandbox's limits and uid, with its descriptors (stdin, stdout, stderr,
events, and a reply socket) passed along.

For each request it forks a keeper, which unshares mount, PID, network, IPC
and UTS namespaces and forks the sandbox: PID 1 of its own PID namespace (when
it ends, everything it started ends), an init that forks the supervisor and
waits for it, as bubblewrap's does. The sandbox mounts its own /proc, /tmp,
/dev/shm and work directory (size- and inode-capped tmpfs), names its uid in
/etc/passwd, brings its own loopback up, takes the rlimits, becomes the fresh
uid, drops every capability (bounding set too), sets no_new_privs and loads
the seccomp filter, and only then becomes the supervisor waiting for its case
(supervisor.serve_warm): the same isolation a sandbox started by bubblewrap
has, and nothing of another run (each has its own namespaces, its own memory
copied from the zygote, which no case touched). The keeper sends the runtime
a pidfd of the sandbox, waits for it and sends its wait status.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import resource
import signal
import socket
import struct
import sys
import traceback
from collections.abc import Callable
from typing import Any

from .supervisor import Channel, Runner, serve_warm, warm_frozen

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, PR_SET_DUMPABLE = 24, 38, 22, 4
SECCOMP_MODE_FILTER = 2
CAPABILITY_VERSION_3 = 0x20080522
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
LAST_CAP = 63  # every capability number the kernel may know (unknown ones answer EINVAL)
PROC_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC
REQUEST_FDS = 5  # stdin, stdout, stderr, events, reply

_libc = ctypes.CDLL(None, use_errno=True)


class SockFprog(ctypes.Structure):
    """struct sock_fprog: a BPF program for PR_SET_SECCOMP."""

    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int,
           options: str | None = None) -> None:
    _check(_libc.mount(source and source.encode(), target.encode(), fstype and fstype.encode(),
                       ctypes.c_ulong(flags), options and options.encode()),
           f"mount {target}")


def _prctl(option: int, *args: Any) -> int:
    padded = [*args, *[ctypes.c_ulong(0)] * (4 - len(args))]
    return int(_libc.prctl(option, *padded))


def _read_fd(target: str) -> bytes:
    with os.fdopen(int(target.removeprefix("fd:")), "rb") as stream:
        return stream.read()


def serve_forks(control: str, seccomp: str, warm: Callable[[], None], runner: Runner) -> None:
    """Warm up once, then fork a sandbox for each request on the control socket until it closes."""
    sock = socket.socket(fileno=int(control.removeprefix("fd:")))
    bpf = _read_fd(seccomp)
    warm_frozen(warm)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # keepers are reaped by the kernel
    sock.send(b"ready")
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(sock, 1 << 16, REQUEST_FDS)
        except OSError:
            return
        if not message:  # the runtime closed its end: the zygote's work is over
            return
        if len(fds) != REQUEST_FDS:
            for fd in fds:
                os.close(fd)
            continue
        if os.fork() == 0:
            try:
                sock.close()
                _keep(json.loads(message), fds, bpf, runner)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(70)
        for fd in fds:
            os.close(fd)


def _keep(request: dict[str, Any], fds: list[int], bpf: bytes, runner: Runner) -> None:
    """In the keeper: new namespaces, the sandbox forked into them, its pidfd and status sent."""
    stdin, stdout, stderr, events, reply_fd = fds
    reply = socket.socket(fileno=reply_fd)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the keeper and the supervisor wait for children
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS),
           "unshare")
    pid = os.fork()
    if pid == 0:
        try:
            reply.close()
            channel = _become_sandbox(request, stdin, stdout, stderr, events, bpf)
            _init(channel, request["workdir"], runner)
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
        finally:
            os._exit(71)
    for fd in (stdin, stdout, stderr, events):
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    socket.send_fds(reply, [b"started"], [pidfd])
    os.close(pidfd)
    _, status = os.waitpid(pid, 0)
    reply.send(b"%d" % status)


def _init(channel: Channel, workdir: str, runner: Runner) -> None:
    """PID 1 of the sandbox: the supervisor in a child, waited for as bubblewrap's init does.

    The case may kill its supervisor (it is its parent, same uid) but not the namespace's init:
    the init ends with the supervisor's status (a signal N as 128+N), and everything left in
    the namespace ends with it.
    """
    supervisor = os.fork()
    if supervisor == 0:
        serve_warm(channel, workdir, runner)
    os.closerange(0, 65536)  # the init holds nothing of the run open
    while True:
        pid, status = os.wait()
        if pid == supervisor:
            break
    os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status)
             else os.waitstatus_to_exitcode(status))


def _become_sandbox(request: dict[str, Any], stdin: int, stdout: int, stderr: int, events: int,
                    bpf: bytes) -> Channel:
    """In the sandbox (PID 1 of its namespace): its mounts, identity, limits, then no privilege."""
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.setsid()
    uid, workdir = int(request["uid"]), request["workdir"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here reaches the zygote
    _mount("proc", "/proc", "proc", PROC_FLAGS)  # this namespace's processes only
    _name_identity(uid, workdir)
    tmpfs = f"size={int(request['tmpfs_mb'])}m"
    inodes = int(request.get("tmpfs_inodes", request["inodes"]))
    for shared in ("/tmp", "/dev/shm"):
        _mount("tmpfs", shared, "tmpfs", MS_NOSUID | MS_NODEV,
               f"{tmpfs},nr_inodes={inodes},mode=1777")
    # Its own pseudo-terminals, at most `ptys` of them (the zygote's /dev/ptmx links into it).
    _mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
           f"newinstance,ptmxmode=0666,mode=620,max={int(request.get('ptys', 64))}")
    _mount("tmpfs", workdir, "tmpfs", MS_NOSUID | MS_NODEV,
           f"{tmpfs},nr_inodes={int(request['inodes'])},mode=0700,uid={uid},gid={uid}")
    _loopback_up()
    for name, value in request["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    channel = Channel(f"fd:{events}")  # moved out of the case's reach; the rest is closed
    os.closerange(3, channel.fd)
    os.closerange(channel.fd + 1, 65536)
    _drop_privileges(uid, bpf)
    os.chdir(workdir)  # its own (0700): entered as its uid
    return channel


def _name_identity(uid: int, scratch: str) -> None:
    """/etc/passwd and /etc/group naming root and this sandbox's uid, read-only."""
    _mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
    files = {"passwd": f"root:x:0:0:root:/:/usr/sbin/nologin\n"
                       f"sandbox:x:{uid}:{uid}:sandbox:/tmp:/usr/sbin/nologin\n",
             "group": f"root:x:0:\nsandbox:x:{uid}:\n"}
    for name, text in files.items():
        path = f"{scratch}/{name}"
        with open(path, "w") as out:
            out.write(text)
        os.chmod(path, 0o644)
        _mount(path, f"/etc/{name}", None, MS_BIND)
        _mount(None, f"/etc/{name}", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    _check(_libc.umount2(scratch.encode(), MNT_DETACH), f"umount {scratch}")


def _loopback_up() -> None:
    """The new network namespace's loopback, up (as bubblewrap leaves it): nothing else exists."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def _drop_privileges(uid: int, bpf: bytes) -> None:
    """Become `uid` with no capability left to gain, and load the seccomp filter."""
    for cap in range(LAST_CAP + 1):
        if _prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap)) != 0 and ctypes.get_errno() != errno.EINVAL:
            raise OSError(ctypes.get_errno(), f"cannot drop capability {cap}")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # the permitted, effective and ambient sets are emptied
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    _check(_libc.capset(header, (ctypes.c_uint32 * 6)()), "capset")  # and the inheritable set
    with contextlib.suppress(OSError):
        _prctl(PR_SET_DUMPABLE, ctypes.c_ulong(0))  # no ptrace, no /proc/<pid>/mem for the case
    _check(_prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1)), "no_new_privs")
    program = ctypes.create_string_buffer(bpf, len(bpf))
    fprog = SockFprog(len(bpf) // 8, ctypes.addressof(program))
    _check(_prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog)),
           "seccomp")
