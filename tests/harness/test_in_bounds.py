"""Reduction's gate refuses a module that reads out of bounds: a reduction that shrinks the
buffers to (1,) but keeps a 16-step loop crashes with the same signal and is another bug."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import NEW_ENV, REPO
from tvmrepro.environments import Environment
from tvmrepro.settings import Settings
from worker.environments.provision import env_python

CHECK = '''
import tvm
from tvm.script import ir as I, relax as R, tirx as T
from harness.scriptsrc import well_formed

@I.ir_module
class Shrunk:
    @T.prim_func
    def copy(A: T.Buffer((1,), "float32"), B: T.Buffer((1,), "float32")):
        for i in range(16):
            B[i] = A[i]

@I.ir_module
class Kept:
    @T.prim_func
    def copy(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        for i in range(16):
            B[i] = A[i]

print(well_formed(tvm, Shrunk), well_formed(tvm, Kept))
'''


@pytest.mark.tvm
def test_an_out_of_bounds_module_is_not_well_formed(tmp_path: Path, settings: Settings,
                                                    tvm_envs: dict[str, Environment]) -> None:
    script = tmp_path / "check.py"  # a file: TVMScript reads its source
    script.write_text(CHECK)
    proc = subprocess.run([str(env_python(settings, tvm_envs[NEW_ENV])), str(script)],
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "images")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["False", "True"]
