"""The hostile cases: every case of README "Resource limits" and of the sandbox's hardening.

Each is a case (script mode unless it needs IR) with a small time limit and
the one status it must end with, plus what else its result must show.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from typing import Any

from tests.fixtures.hostile_scripts import FOREIGN_ABI, FORGE, HOSTILE
from worker.runtimes.base import PTYS_MAX, TMPFS_INODES

HANG_S = 5  # the time limit of a case that hangs: each costs this much
ENDS_S = 30  # the time limit of one that ends by itself (it takes far less on an idle machine)
MEMORY_MB = 1024
HUGE_IR_OPS = 2000  # each pass prints the whole function: thousands of IR lines per pass
HUGE_IR_PASSES = 6


@dataclass(frozen=True)
class Hostile:
    """One case and what its single run's result must say."""

    name: str
    case: dict[str, Any]
    status: str
    expect: dict[str, Any] = field(default_factory=dict)  # result field -> value
    truncated: bool = False


def script(name: str, text: str, status: str, truncated: bool = False,
           **expect: Any) -> Hostile:
    """A script-mode hostile case under the suite's limits."""
    case = {"title": f"hostile {name}", "script": text, "memory_mb": MEMORY_MB,
            "timeout_s": HANG_S if status == "timeout" else ENDS_S}
    return Hostile(name, case, status, expect, truncated)


def huge_ir() -> Hostile:
    """A Relax function of HUGE_IR_OPS adds through HUGE_IR_PASSES passes: megabytes of IR."""
    lines = ["from tvm.script import ir as I", "from tvm.script import relax as R", "",
             "@I.ir_module", "class Module:", "    @R.function",
             '    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):',
             "        with R.dataflow():", "            v0 = R.add(x, x)"]
    lines += [f"            v{i} = R.add(v{i - 1}, x)" for i in range(1, HUGE_IR_OPS)]
    lines += [f"            R.output(v{HUGE_IR_OPS - 1})", f"        return v{HUGE_IR_OPS - 1}"]
    passes = ["Normalize", "CanonicalizeBindings"] * (HUGE_IR_PASSES // 2)
    case = {"title": "hostile huge IR", "source": "\n".join(lines) + "\n", "module": "Module",
            "variants": [{"name": "many", "passes": passes}], "target": "llvm",
            "entry": None, "timeout_s": 60, "memory_mb": 2048}
    return Hostile("huge_ir", case, "ok")


FLOOD = "import sys\nfor _ in range(100):\n    sys.{}.write('x' * (1 << 20))\n"
# The harness shares the case's process: a script may lift its message cap, and its run's
# message is then the worker's cap, 64 KiB, made to make a pattern backtrack (cubic for the
# suspects' check, quadratic for signatures: tvmrepro.jobs.bounded bounds every reader).
FORGED_MESSAGE = """
import sys
for name, module in list(sys.modules.items()):
    if name.endswith("classify") and hasattr(module, "MESSAGE_CAP"):
        module.MESSAGE_CAP = 1 << 17
if {when}:
    raise RuntimeError("Check failed: ( vs. " * 4000)
"""
# Each of the three ends in the refusal it provokes (an OSError of its errno) only when the
# sandbox's own cap refused it; anything else (io_uring set up, a cap passed, another refusal)
# ends otherwise.
IO_URING = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
if libc.syscall(425, 4, ctypes.create_string_buffer(120)) >= 0:  # io_uring_setup
    raise SystemExit('io_uring set up')
raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
"""
PTY_FLOOD = f"""
import errno, os
opened = []
try:
    while True:
        opened.append(os.openpty())
except OSError as exc:
    if exc.errno != errno.ENOSPC or len(opened) > {PTYS_MAX}:
        raise RuntimeError(f'{{len(opened)}} ptys opened, then {{exc}}') from None
    raise
"""
INODE_FLOOD = f"""
import errno
for top in ('/tmp', '/dev/shm'):
    made = 0
    try:
        while True:
            open(f'{{top}}/inode{{made}}', 'w').close()
            made += 1
    except OSError as exc:
        if exc.errno != errno.ENOSPC or made >= {TMPFS_INODES}:
            raise RuntimeError(f'{{top}}: {{made}} files made, then {{exc}}') from None
        full = exc
raise full
"""
CASES: list[Hostile] = [
    script("segfault", HOSTILE["segfault"][0], "crash", signal="SIGSEGV"),
    script("abort", "import os\nos.abort()\n", "crash", signal="SIGABRT"),
    script("busy_loop", HOSTILE["busy_loop"][0], "timeout"),
    script("sleep", HOSTILE["sleep_forever"][0], "timeout"),
    # Refused by the address-space limit with nothing allocated: the MemoryError is the case's
    # own error, not an `oom` (that needs evidence: README, "Resource limits").
    script("alloc_64_gib", HOSTILE["alloc_64_gib"][0], "error", error_type="MemoryError"),
    script("memory_growth", "x = []\nwhile True:\n    x.append(bytearray(64 << 20))\n", "oom"),
    script("fork_bomb", HOSTILE["fork_bomb"][0], "timeout"),
    script("stdout_flood", FLOOD.format("stdout"), "ok", truncated=True),
    script("stderr_flood", FLOOD.format("stderr"), "ok", truncated=True),
    # Past the 1 MiB cap, small enough for the Docker engine's log driver (which handles each
    # line on its own: 16 MiB of two-byte lines took longer than the time limit there).
    script("binary_flood", "import os\nfor _ in range(4):\n    os.write(1, os.urandom(1 << 20))\n",
           "ok", truncated=True),
    script("line_flood", "import sys\nfor _ in range(40_000):\n    print('y' * 99)\n", "ok",
           truncated=True),
    script("connect_loopback", HOSTILE["connect_loopback"][0], "error"),
    script("connect_outside",
           "import socket\nsocket.create_connection(('192.0.2.1', 80), timeout=2)\n", "error"),
    script("write_etc", HOSTILE["write_etc"][0], "error"),
    script("write_usr", "open('/usr/tvmrepro-was-here', 'w').write('x')\n", "error"),
    script("fill_tmp", "chunk = b'x' * (1 << 20)\nwith open('/tmp/big', 'wb') as f:\n"
           "    while True:\n        f.write(chunk)\n", "error", error_type="OSError"),
    script("detached_child", "import os, time\nif os.fork() == 0:\n    os.setsid()\n"
           "    time.sleep(3600)\nprint('parent done')\n", "ok"),
    script("forged_result_abort", FORGE + "os.abort()\n", "crash", signal="SIGABRT",
           outputs=None),
    script("forged_result_exit", FORGE + "raise SystemExit(3)\n", "error", outputs=None),
    script("nul_bytes", "import sys\nsys.stdout.buffer.write(b'a\\x00b\\xff\\n')\n"
           "raise ValueError('bad \\x00 \\ud800')\n", "error", error_type="ValueError"),
    script("self_sigkill", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", "crash",
           signal="SIGKILL"),
    huge_ir(),
    script("forged_message", FORGED_MESSAGE.format(when="True"), "error",
           error_type="RuntimeError"),
    script("io_uring", IO_URING, "error", error_type="PermissionError"),
    script("pty_flood", PTY_FLOOD, "error", error_type="OSError"),
    script("tmpfs_inode_flood", INODE_FLOOD, "error", error_type="OSError"),
]
if platform.machine() == "x86_64":  # the i386 ABI's int 0x80 (test_syscalls.FOREIGN_ABI)
    CASES.append(script("i386_syscall", FOREIGN_ABI, "crash", signal="SIGSYS"))
NORMAL = {"title": "hostile follow-up", "script": "print('still fine')\n"}
