"""Reports that build a model with PyTorch or ONNX and import it with TVM's Relax frontends.

In an environment's frontend flavour (the worker sets FRONTENDS_VARIABLE), the harness imports
TVM's frontends before the case, as a zygote does once for all of its runs (with one tiny
torch.export, whose first call in a process pays torch's lazy set-up), and traces two stages:
- `frontend`: TVM's importers (from_onnx, from_exported_program, from_fx);
- `model`: the framework making the model (torch.export, torch.onnx.export, onnx's checker,
  onnxruntime's session). A failure there is the pinned framework's, before TVM is reached
  (torch 2.13's torch.export refuses what older torch only warned about; onnxruntime 1.31
  refuses the IR version onnx 1.23 writes): the run is `incompatible`, never the report's bug.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
from typing import Any

FRONTENDS_VARIABLE = "TVMREPRO_FRONTENDS"
# TVM's importers, by module: a failure inside one is the `frontend` stage.
IMPORTERS = {"tvm.relax.frontend.onnx": ("from_onnx",),
             "tvm.relax.frontend.torch": ("from_exported_program", "from_fx")}
# What makes the model in its framework: (module, owner attribute or "", callable).
MODEL_MAKERS = (("torch.export", "", "export"), ("torch.onnx", "", "export"),
                ("onnx.checker", "", "check_model"), ("onnxruntime", "InferenceSession", "__init__"))
MODEL_STAGE, FRONTEND_STAGE = "model", "frontend"


def wanted() -> bool:
    """Whether this sandbox is a frontend flavour's."""
    return os.environ.get(FRONTENDS_VARIABLE) == "1"


def import_frontends() -> None:
    """TVM's frontends and the frameworks (whatever of them this environment has)."""
    for name in (*IMPORTERS, "onnxruntime"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def warm_up() -> None:
    """What a zygote does once: import the frontends and export one tiny model, so that each
    forked run's first torch.export does not pay torch's set-up (1.4-2.2 s, 0.1-0.6 s after)."""
    import_frontends()
    with contextlib.suppress(Exception):  # a warm-up: a run that needs torch imports it anyway
        import torch
        from tvm.relax.frontend.torch import from_exported_program

        class Tiny(torch.nn.Module):
            def forward(self, x: Any) -> Any:
                return torch.relu(x) + 1

        from_exported_program(torch.export.export(Tiny(), (torch.ones(2, 2),)))


def framework_versions() -> dict[str, str]:
    """The versions of the frameworks loaded in this process (a result's `frontends`)."""
    found = {}
    for name in ("torch", "onnx", "onnxruntime"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__version__", None):
            found[name] = str(module.__version__)
    return found


def install(tracer: Any) -> None:
    """Trace the importers (`frontend`) and the model makers (`model`) loaded now."""
    for module_name, names in IMPORTERS.items():
        module = sys.modules.get(module_name)
        for name in names:
            if module is not None:
                tracer.wrap_everywhere(getattr(module, name, None), FRONTEND_STAGE)
    for module_name, owner_name, name in MODEL_MAKERS:
        module = sys.modules.get(module_name)
        owner = getattr(module, owner_name, None) if owner_name else module
        original = getattr(owner, name, None) if owner is not None else None
        if callable(original):
            setattr(owner, name, _model_stage(tracer, original))


def _model_stage(tracer: Any, original: Any) -> Any:
    """`original` in the `model` stage when the script calls it itself; inside a TVM stage (an
    importer that checks its model) it is part of that stage."""
    staged = tracer.staged(original, MODEL_STAGE)

    @functools.wraps(original)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if tracer.stage != tracer.idle_stage:
            return original(*args, **kwargs)
        return staged(*args, **kwargs)

    return wrapped


def framework_refused(message: str, error_type: str) -> str:
    """The message of a run whose model its framework refused: whose refusal it is."""
    versions = ", ".join(f"{name} {version}" for name, version in framework_versions().items())
    return (f"the model does not build with the pinned {versions or 'frameworks'} "
            f"({error_type}: {message})")
