"""Environment health: what a pinned wheel can do, decided by plain TVM, not by a list.

A release's wheel can be broken for everyone: on one release candidate every Relax VM creation
of a module with C source fails (`AssertionError: Cannot find the source directory given
ffi_dir`, from export_library), whatever the report. Each environment runs a canary when its
fingerprint is taken (at provisioning, and again where a fingerprint comes from an older
canary): a tiny Relax module parsed, built, loaded in the VM and run, for LLVM and for C
source, each capability recorded with the wheel's own error where it fails. A run that fails
at the stage its environment's canary fails at, with the same error, is the environment's
defect, never the report's: bisection skips it and names it.
"""

from __future__ import annotations

import hashlib
from typing import Any

from images.harness.signature import normalize

# Run in the environment's interpreter after `import tvm` (provision.TVM_FACTS_PROBE): sets
# `health` to {capability: None (works) | "ErrorType: first line" | "not reached"}.
CANARY = r'''
def _canary(target):
    import numpy as np
    import tvm.script

    steps, found, state = ("parse", "build", "vm_init", "run"), {}, {}

    def parse():  # from text: a `python -c` probe has no source file for the decorators
        state["mod"] = tvm.script.from_source(
            "@I.ir_module\n"
            "class Canary:\n"
            "    @R.function\n"
            "    def main(x: R.Tensor((2,), 'float32')) -> R.Tensor((2,), 'float32'):\n"
            "        y = R.add(x, x)\n"
            "        return y\n")

    def build():
        state["ex"] = tvm.relax.build(state["mod"], target=target)

    def vm_init():
        state["vm"] = tvm.relax.VirtualMachine(state["ex"], tvm.cpu())

    def run():
        tensor = getattr(tvm.runtime, "tensor", None) or tvm.nd.array
        out = state["vm"]["main"](tensor(np.ones(2, "float32")))
        assert out.numpy().tolist() == [2.0, 2.0], out.numpy().tolist()

    for name, step in zip(steps, (parse, build, vm_init, run)):
        key = name if target == "llvm" else f"{name} (target {target})"
        if any(found.values()):
            found[key] = "not reached"
            continue
        try:
            step()
            found[key] = None
        except Exception as exc:
            lines = [l.strip() for l in str(exc).splitlines() if l.strip()]
            found[key] = f"{type(exc).__name__}: {lines[0] if lines else ''}"[:500]
    return found

# LLVM's code, and C source (a module with C in it is compiled with TVM's headers at VM
# creation: a wheel that lacks them fails there).
health = {**_canary("llvm"), **_canary("c")}
'''
NOT_REACHED = "not reached"
# Which canary a fingerprint's health comes from: a fingerprint of another is taken again.
CANARY_DIGEST = hashlib.sha256(CANARY.encode()).hexdigest()[:16]


def broken(health: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(stage, error) of each capability the environment's wheel fails (its first failing step
    of each target)."""
    return [(key.split(" ")[0], str(error)) for key, error in (health or {}).items()
            if error and error != NOT_REACHED]


def defect(health: dict[str, Any] | None, status: str, stage: str | None, error_type: str | None,
           message: str | None) -> str | None:
    """Why a failed run is its environment's defect (it fails as the canary does), else None.
    Compared as signatures compare (paths, addresses and line numbers dropped): the canary ran
    where the environment lives, the run where the sandbox mounts it."""
    if status != "error":
        return None
    said = normalize(f"{error_type}: {message}")
    for failed_stage, error in broken(health):
        if failed_stage == stage and normalize(error) == said:
            return (f"the environment's wheel fails its canary at {stage} ({error}): every run "
                    f"that reaches it this way fails so here, whatever the report")
    return None
