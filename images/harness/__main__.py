"""Entry point: `python -m harness --events fd:3 --workdir DIR` (the request comes on stdin).

The process is the sandbox's supervisor (supervisor.py): it imports TVM, waits
for one request (a case and a variant), and runs it in a child, which reports
events (stages, passes, the result) to it; the supervisor signs and relays
them with the child's exit status. Everything the case prints goes to the
ordinary stdout and stderr, which the runtime caps.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import faulthandler
import importlib
import inspect
import os
import runpy
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from . import frontends, references, relay_carry
from .attachments import write_files
from .captured import emit_captured
from .classify import Outcome, classify
from .events import EventSink
from .modes import run_module_case, run_script_case
from .onnx_graph import emit_model
from .porting import detect, port
from .relay_era import install as install_removed_module_finder
from .tracing import Tracer, import_dialects, index_references, pass_path_of, stage_of


def _parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="harness", description=__doc__)
    parser.add_argument("--events", help="fd:N or a file path for the events")
    parser.add_argument("--workdir", type=Path, default=Path.cwd(), help="writable scratch dir")
    parser.add_argument("--zygote", action="store_true",
                        help="fork sandboxes on request (zygote.py) instead of running one case")
    parser.add_argument("--control", help="the zygote's control socket, fd:N")
    parser.add_argument("--seccomp", help="the zygote's sandboxes' seccomp filter (BPF), fd:N")
    args = parser.parse_args(argv)
    if not (args.control and args.seccomp if args.zygote else args.events):
        parser.error("--events, or --zygote with --control and --seccomp, is required")
    return args


def _tvm_facts(tvm: Any) -> dict[str, Any]:
    libinfo = {str(k): str(v) for k, v in tvm.support.libinfo().items()}
    return {"version": tvm.__version__, "libinfo": libinfo}


def _import_tvm() -> Any:
    import tvm
    import tvm.relax  # noqa: F401  (the Relax VM and passes)
    import tvm.script  # noqa: F401  (the TVMScript parsers)

    return tvm


def _harness_mode(case: dict[str, Any]) -> str | None:
    """extract, check or candidate (reduction) when the worker asks for more than a run."""
    return (case.get("harness") or {}).get("mode")


HARNESS_DIR = os.path.dirname(os.path.abspath(__file__))


def _is_harness_frame(filename: str) -> bool:
    """The harness's own code, or runpy's that runs a script for it."""
    return filename.startswith(HARNESS_DIR) or filename in (runpy.__file__, "<frozen runpy>")


def _print_traceback(exc: BaseException) -> None:
    """The traceback to the log, wherever stderr is now: the case may have closed or replaced it.

    It starts at the case's own code (or TVM's): the harness frames that called it say nothing
    to the report's reader and pushed the user's line out of sight."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and \
            _is_harness_frame(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except Exception:  # closed, detached or replaced by something that raises: try the descriptor
        with contextlib.suppress(OSError):
            os.write(2, text.encode(errors="replace"))


def run(case: dict[str, Any], variant_name: str, sink: EventSink, workdir: Path,
        parsed: tuple[str, Any] | None = None) -> dict[str, Any]:
    """Run the case and return the result fields the harness knows (`parsed`: its module's
    text and namespace, parsed already; see run_module_case)."""
    script_mode = case.get("script") is not None
    tracer = Tracer(sink, idle_stage="script" if script_mode else None)
    tracer.enter("import")
    fields: dict[str, Any] = {"rewrites": [], "outputs": None}
    recorder = None
    watched: references.References | None = None
    try:
        tvm = _import_tvm()
        if frontends.wanted():  # before the hooks: they trace the importers loaded now
            frontends.import_frontends()
        fields["tvm"] = _tvm_facts(tvm)
        sink.emit("start", tvm=fields["tvm"])
        tracer.install(tvm)
        if script_mode:  # the framework's own answer for an imported model (references.py)
            watched = references.install(tvm, case.get("timeout_s") or 120)
            if _harness_mode(case) == "onnx_capture":  # the model, for a graph's reduction
                watched.on_call.append(lambda kind, model: emit_model(sink, kind, model))
        # A layer verdict's path; extract mode lists the pipelines too (a path of its own
        # captures the inputs of a script that never reached its VM).
        if script_mode and (case.get("layer") or _harness_mode(case) in ("layer", "extract")):
            from .layers import install as cut_passes  # a layer verdict's path (layers.py)

            cut_passes(tvm, sink, case.get("harness") or {})
        if _harness_mode(case) == "extract":  # record each step's module (extract.py)
            from .extract import record_steps

            recorder = record_steps(tvm, tracer, sink, workdir, watched)
        tracer.enter("parse")
        features = detect(tvm)
        install_removed_module_finder()  # Relay-era imports end incompatible (relay_era.py)
        text, fields["rewrites"] = port(case["script"] if script_mode else case["source"], features)
        if script_mode and relay_carry.wanted(text):  # Relay-era ONNX reports (relay_carry.py)
            relay_carry.install()
            fields["rewrites"].append(relay_carry.NOTE)
        sink.emit("rewrites", rewrites=fields["rewrites"])
        if script_mode:  # the ported script is its own standalone reproducer
            sink.emit("reproducer", text=text)
        if script_mode:
            tracer.start_script()
            fields.update(run_script_case(text, workdir))
        else:
            variant = next(v for v in case["variants"] if v["name"] == variant_name)
            fields.update(run_module_case(tvm, case, variant, tracer, workdir, text, features,
                                          parsed))
        outcome = Outcome("ok")
        stage = tracer.final_stage()
    except BaseException as exc:  # the case's failure is the result, whatever it is
        outcome = classify(exc)
        stage = stage_of(exc) or tracer.final_stage()
        fields["pass_path"] = pass_path_of(exc)
        if tracer.stage == "import" and outcome.status == "error":
            outcome = dataclasses.replace(outcome, status="infra_error")
        if stage == frontends.MODEL_STAGE and outcome.status == "error":
            message = frontends.framework_refused(outcome.message or "", outcome.error_type or "")
            outcome = dataclasses.replace(outcome, status="incompatible", message=message)
        _print_traceback(exc)
    if recorder is not None:  # the recorded modules' parse-back, once the script is over
        with contextlib.suppress(Exception):
            recorder.finish()
    fields.update(stage=stage, **dataclasses.asdict(outcome))
    if watched is not None:  # once the script is over, whatever its status
        fields.update(watched.fields())
        if recorder is not None or (case.get("harness") or {}).get("capture"):
            emit_captured(sink, watched)  # the entry's inputs, for an extracted case
    return fields


def warm_up() -> None:
    """What every run needs, imported before a case exists (the child inherits it)."""
    _import_tvm()
    from . import extract, reduce_module  # noqa: F401  (the extract and check modes)

    if frontends.wanted():  # torch, onnx and TVM's importers, with torch.export's set-up
        frontends.warm_up()

    # TVMScript's dialects (the tracer imports them before any case runs) and the VM's ops
    # (every Relax build imports them): imported once here, not by each run (17 modules).
    import_dialects()
    with contextlib.suppress(ImportError):  # in every release here; a run imports it anyway
        importlib.import_module("tvm.relax.op.vm")

    # TVMScript's parser calls inspect.stack(), whose first call maps every loaded module to its
    # file (over a thousand with TVM: 0.1-0.2 s of a run's first parse); made here once, the child
    # inherits the map. It is the standard library's cache: what the case sees is the same.
    inspect.stack()
    index_references()  # where TVM's modules hold what the tracer hooks (tracing.py)


def run_request(request: dict[str, Any], events: str, workdir: str) -> None:
    """In the child: run the request's case, report the result event, and leave (never returns).

    User atexit handlers do not run: the process ends with os._exit.
    """
    sink = EventSink(events)
    faulthandler.enable()  # a segfault still leaves a Python traceback in stderr
    started = time.perf_counter()
    case, path = request["case"], Path(workdir)
    os.chdir(path)
    write_files(case, path)  # the case's files, read-only, before any of its code runs
    sys.argv = [str(path / "repro.py")]
    if _harness_mode(case) == "check":  # reduction's candidate check (reduce_module.py)
        from .reduce_module import check_sources

        check_sources(case, sink, path)
        os._exit(0)
    if _harness_mode(case) == "onnx_candidates":  # a graph's edits, imported (onnx_graph.py)
        from .onnx_graph import judge_candidates

        judge_candidates(case, sink)
        os._exit(0)
    parsed = None
    if _harness_mode(case) == "candidate":  # a reduction's candidate: checked, then maybe run
        from .reduce_module import check_candidate

        to_run = check_candidate(case, sink, path)
        if to_run is None:
            os._exit(0)
        case, parsed = to_run
    fields = run(case, request.get("variant", "script"), sink, path, parsed)
    fields["harness_seconds"] = round(time.perf_counter() - started, 6)
    sink.emit("result", **fields)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # the case may have closed or replaced them
            stream.flush()
    os._exit(0)


def main(argv: list[str] | None = None) -> None:
    """Supervise one request: warm up, wait for it on stdin, run it in a child, report; or, as
    a zygote, warm up once and fork such supervisors on request."""
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    if args.zygote:
        from .zygote import serve_forks

        serve_forks(args.control, args.seccomp, warm_up, run_request)
        return
    from .supervisor import serve

    serve(args.events, str(args.workdir), warm_up, run_request)


if __name__ == "__main__":
    main()
