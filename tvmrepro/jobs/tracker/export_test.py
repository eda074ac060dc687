"""A known-bug test for TVM's own suite: a job's failing case as a pytest file that is a strict
xfail on the failure's signature, so that the change fixing the bug sees it flip (XPASS is a
failure under strict) and turns it into a regular test, as Rust keeps its crash tests.

The file needs TVM and pytest only: the case is the plain-Python reproducer of its release
(tvmrepro/reproducer.py), written out and run by the test. An error is raised in the test's
own process (`raises=` names its class in that TVM); a crash runs in a child process, whose
death by the same signal is the bug. Run as `python FILE`, it exits 0 while the bug
reproduces and 1 once it is fixed (a `git bisect run` script).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tvmrepro.api.views import JobView
from tvmrepro.environments import Catalog
from tvmrepro.errors import BadInput
from tvmrepro.escaping import visible_line
from tvmrepro.reproducer import reproducer

# `Type at Frame (names)` or `Type: message` (images/harness/signature.py); a crash: `crash: SIGSEGV`.
_SIGNATURE = re.compile(r"^(?P<type>[\w.]+)(?: at [^(]+(?:\((?P<names>[^)]*)\))?|: .*)$", re.DOTALL)
_LOOSE = re.compile(r"0x[0-9a-fA-F]+|(?:/[\w.+\-@]+)+")  # addresses and paths vary per run


@dataclass(frozen=True)
class KnownFailure:
    """What the test expects: an error of a type whose message holds `names` (else matches
    `message`), or death by `signal`."""

    signature: str
    error_type: str | None = None
    names: tuple[str, ...] = ()
    message: str | None = None
    signal: str | None = None


def known_failure(signature: str, message: str | None, signal: str | None) -> KnownFailure:
    """The failure a signature (and the run's message or signal) stands for."""
    if signal or signature.startswith("crash"):
        found = signal or signature.split(":", 1)[-1].split()[0]
        return KnownFailure(signature=signature, signal=found)
    match = _SIGNATURE.match(signature)
    if match is None:
        raise BadInput("job", f"cannot test for the signature {signature!r}")
    names = tuple(n.strip() for n in (match["names"] or "").split(",") if n.strip())
    # The program's names survive rewordings between releases; without them, the message.
    lines = (message or "").strip().splitlines()
    return KnownFailure(signature=signature, error_type=match["type"], names=names,
                        message=None if names or not lines else lines[0])


def message_pattern(message: str) -> str:
    """A regular expression matching `message` with its addresses and paths loosened and its
    spacing collapsed."""
    parts, position = [], 0
    for match in _LOOSE.finditer(message):
        parts.append(re.escape(message[position:match.start()]))
        parts.append(r"0x[0-9a-fA-F]+" if match[0].startswith("0x") else r"\S+")
        position = match.end()
    parts.append(re.escape(message[position:]))
    return re.sub(r"(\\ )+", r"\\s+", "".join(parts).strip())


def _doc_line(text: Any) -> str:
    """`text` on one line of the file's docstring (its quotes and backslashes escaped)."""
    return visible_line(text).replace("\\", "\\\\").replace('"', '\\"')


def _script_literal(script: str) -> str:
    """The script as a Python string literal, readable where it can be (a raw triple-quoted
    string holds any text without ''' that does not end with a backslash)."""
    if "'''" not in script and not script.rstrip("\n").endswith("\\"):
        return "r'''" + script + "'''"
    return repr(script)


_TEMPLATE_HEAD = '''"""Known bug: {title}.

Found by tvm-repro (job {job}):
on apache-tvm {release}, {what}.
Signature: {signature}

A strict xfail: while the bug is there the test xfails; the change that fixes it makes the test
pass, which strict xfail reports as a failure (XPASS). Then drop the mark: the test keeps the
bug fixed. `python {{this file}}` exits 0 while the bug reproduces, 1 once fixed.
"""

import re
import runpy
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

SCRIPT = {script}
ERROR_TYPE = {error_type!r}
NAMES = {names!r}  # program names the error's message holds
MESSAGE = {message!r}  # else a pattern of its first line
SIGNAL = {signal!r}  # a crash: the signal the script dies of


class Crashed(Exception):
    """The script's process died of SIGNAL."""


def error_class(name):
    """The exception class `name` of this TVM (tvm.error, tvm_ffi) or of Python."""
    import builtins

    import tvm

    for place in (builtins, getattr(tvm, "error", None), sys.modules.get("tvm_ffi")):
        found = getattr(place, name, None) if place is not None else None
        if isinstance(found, type) and issubclass(found, BaseException):
            return found
    return Exception


EXPECTED = Crashed if SIGNAL else error_class(ERROR_TYPE)
'''

_TEMPLATE_BODY = '''

def check_message(exc):
    """A failure of another kind is no xfail: the bug changed, or this is another one."""
    text = " ".join(str(exc).split())
    missing = [name for name in NAMES if name not in text]
    if missing or (MESSAGE and not re.search(MESSAGE, text)):
        pytest.fail(f"{{type(exc).__name__}} with another message: {{text[:500]}}")


def reproduce(directory):
    """Run the reproducer; raise EXPECTED where the bug shows (its message checked)."""
    script = Path(directory) / "repro.py"
    script.write_text(SCRIPT)
    if SIGNAL:
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
        if done.returncode == -getattr(signal, SIGNAL):
            raise Crashed(f"the script died of {{SIGNAL}}")
        if done.returncode != 0:
            pytest.fail(f"the script failed otherwise: {{done.stderr[-2000:]}}")
        return
    try:
        runpy.run_path(str(script), run_name="__main__")
    except EXPECTED as exc:
        check_message(exc)
        raise


@pytest.mark.xfail(strict=True, raises=EXPECTED, reason={reason!r})
def {test_name}(tmp_path):
    reproduce(tmp_path)


if __name__ == "__main__":
    try:
        reproduce(tempfile.mkdtemp())
    except EXPECTED:
        sys.exit(0)  # the bug reproduces
    sys.exit(1)
'''


def known_bug_test(case: dict[str, Any], variant: str, release: str, target: str,
                   rewrites: list[str] | None, failure: KnownFailure, job_id: str) -> str:
    """The pytest file for `variant` of `case` failing as `failure` on apache-tvm `release`."""
    title = _doc_line(case.get("title") or "a tvm-repro case")
    what = (f"the script dies of {failure.signal}" if failure.signal
            else f"it raises {failure.error_type}")
    # ASCII only: \w admits letters (x²) that are no part of a Python name.
    slug = re.sub(r"[^0-9A-Za-z]+", "_", str(case.get("title") or job_id)).strip("_").lower()
    test_name = f"test_known_bug_{slug[:40]}" if slug else "test_known_bug"
    head = _TEMPLATE_HEAD.format(
        title=title, job=_doc_line(job_id), release=_doc_line(release), what=what,
        signature=_doc_line(failure.signature), script=_script_literal(
            reproducer(case, variant, release, target, rewrites)),
        error_type=failure.error_type, names=list(failure.names),
        message=message_pattern(failure.message) if failure.message else None,
        signal=failure.signal)
    return head + _TEMPLATE_BODY.format(reason=f"known bug: {failure.signature}",
                                        test_name=test_name.rstrip("_"))


@dataclass(frozen=True)
class Chosen:
    """What of a job the test is made of."""

    case: dict[str, Any]
    variant: str
    environment: str
    result: dict[str, Any]  # the failing run's result (empty: none of the job's runs)
    signature: str


def _newest_failure(job: JobView) -> Chosen:
    """The first bug's group (an error or a crash: not the service's own failure to run it)
    and its cell on the newest environment, with its run's result."""
    group = next((g for g in job.matrix.groups if g.status in ("error", "crash")), None)
    if group is None:
        raise BadInput("job", f"job {job.id} has no failure to test for")
    order = {env_id: i for i, env_id in enumerate(job.environments)}
    cell = max(group.cells, key=lambda c: order.get(c.environment, -1))
    run = next(r for r in job.runs if (r.variant, r.environment) == (cell.variant, cell.environment))
    return Chosen(job.case, cell.variant, cell.environment, run.result or {}, group.signature)


def chosen_case(job: JobView) -> Chosen:
    """The case to test: a reduce job's reduced case, an extract job's module-mode case, else
    the job's own case, each on the environment where it failed."""
    narrowed = job.reduce or job.extract
    if narrowed is None:
        return _newest_failure(job)
    if narrowed.case is None or narrowed.signature is None:
        raise BadInput("job", f"the {job.kind} job {job.id} has no case yet")
    variants = narrowed.case.variants or []
    variant = (job.reduce.variant if job.reduce is not None
               else variants[0].name if variants else "")
    result = next((r.result for r in job.runs if r.result
                   and r.result.get("signature") == narrowed.signature), None)
    return Chosen(narrowed.case.model_dump(mode="json"), variant, narrowed.environment,
                  result or {}, narrowed.signature)


def export_test(job: JobView, catalog: Catalog) -> str:
    """The known-bug pytest file of a job."""
    chosen = chosen_case(job)
    status = chosen.result.get("status")
    if status in ("timeout", "oom"):
        raise BadInput("job", f"a {status} is no test to keep: only an error or a crash")
    failure = known_failure(chosen.signature, chosen.result.get("message"),
                            chosen.result.get("signal") if status == "crash" else None)
    env = catalog.get(chosen.environment, "job")
    return known_bug_test(chosen.case, chosen.variant, env.release, env.target,
                          chosen.result.get("rewrites"), failure, job.id)
