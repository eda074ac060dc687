"""A crash's signature names the native TVM function it crashed in, read from the backtrace TVM
printed: two segfaults in different functions are not one bug."""

from __future__ import annotations

from tests.conftest import NEW_ENV
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment
from worker.crashes import crash_frames
from worker.runner import run_variant
from worker.runtimes.local import LocalRuntime

# tvm.ir.save_json crashes (SIGSEGV in ToJSONGraph) on 0.26 and 0.27 for any module
# (tests/cases/tvm-20195/NOTES.md).
SAVE_JSON_SEGFAULTS = """
import tvm
from tvm.script import ir as I, relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        return x

tvm.ir.save_json(Module)
"""
# A crash in code TVM generated: the backtrace has addresses, C library frames and the thread
# pool's trampoline, and no TVM function that crashed.
GENERATED_CODE_LOG = """!!!!!!! Segfault encountered !!!!!!!
  File "./signal/../sysdeps/unix/sysv/linux/x86_64/libc_sigaction.c", line 0, in 0x00007f17
  File "<unknown>", line 0, in std::thread::_State_impl<std::thread::_Invoker<std::tuple<\
tvm::runtime::threading::ThreadGroup::Impl::Impl(int, std::function<void (int)>, bool)::\
{lambda()#1}> > >::_M_run()
  File "./nptl/pthread_create.c", line 442, in start_thread
  File "<unknown>", line 0, in 0xffffffffffffffff
"""


def test_a_segfault_is_signed_by_its_native_frame(warm_runtime: LocalRuntime,
                                                  tvm_envs: dict[str, Environment]) -> None:
    result = run_variant(parse_case({"script": SAVE_JSON_SEGFAULTS}), "script",
                         tvm_envs[NEW_ENV], warm_runtime)
    assert (result.status, result.signal) == ("crash", "SIGSEGV"), result.log.stderr[-2000:]
    assert result.signature == "crash: SIGSEGV at ToJSONGraph"
    assert result.signature_frame == "ToJSONGraph"
    assert result.native_frames and result.native_frames[0] == "ToJSONGraph"
    assert "in ToJSONGraph" in (result.message or "")


def test_a_crash_in_generated_code_has_no_frame() -> None:
    assert crash_frames(GENERATED_CODE_LOG) == []
    assert crash_frames("no banner here\n  File \"<unknown>\", line 0, in tvm::A::B()\n") == []
