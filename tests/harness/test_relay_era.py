"""Relay-era scripts (Relay was removed in TVM 0.20.0): `incompatible`, never `error`, with a
message naming what is missing and the release that removed it. First the classification (no
TVM), then real scripts through the local sandbox on a release without Relay."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from images import IMAGES_DIR
from tests.conftest import NEW_ENV, case_path
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.results import Result
from tvmrepro.settings import Settings

sys.path.insert(0, str(IMAGES_DIR))
from harness.classify import classify  # noqa: E402
from harness.relay_era import RelayRemoved, removed_message  # noqa: E402

if TYPE_CHECKING:
    from worker.runtimes.local import LocalRuntime

RELAY = ("Relay (tvm.relay) was removed in TVM 0.20.0 (TVM pull request #17656); this "
         "Relay-era script needs it")


def test_the_import_of_a_removed_module_is_incompatible_and_says_why() -> None:
    outcome = classify(RelayRemoved("tvm.relay"))
    assert (outcome.status, outcome.error_type, outcome.message) == \
        ("incompatible", "RelayRemoved", RELAY)
    # A script's `except ImportError` (and `except ModuleNotFoundError`) still catches it.
    assert isinstance(RelayRemoved("tvm.relay"), ModuleNotFoundError)
    assert removed_message("tvm.relay.frontend") == RELAY.replace("(tvm.relay)",
                                                                  "(tvm.relay.frontend)")
    assert removed_message("tvm.autotvm") == (
        "AutoTVM (tvm.autotvm) was removed in TVM 0.20.0 with Relay (TVM pull request #17656); "
        "this Relay-era script needs it")


def _raised(exc: BaseException, then: BaseException | None = None) -> BaseException:
    """`exc` as raised (with its traceback), or `then` raised while handling it."""
    try:
        try:
            raise exc
        except BaseException:
            if then is None:
                raise
            raise then  # noqa: B904  (a handler that raises another, as a script's does)
    except BaseException as caught:
        return caught


def test_relay_read_off_the_tvm_module_is_incompatible_too() -> None:
    tvm = types.ModuleType("tvm")
    missing = _raised(AttributeError("module 'tvm' has no attribute 'relay'", name="relay",
                                     obj=tvm))
    assert (classify(missing).status, classify(missing).message) == ("incompatible", RELAY)
    # Another module's missing attribute is what it was before.
    other = _raised(AttributeError("module 'tvm' has no attribute 'nd'", name="nd", obj=tvm))
    assert classify(other).message == "module 'tvm' has no attribute 'nd'"


def test_a_script_that_exits_on_the_import_error_is_incompatible_but_a_clean_exit_is_ok() -> None:
    failed = _raised(RelayRemoved("tvm.relay"), SystemExit(1))
    assert (classify(failed).status, classify(failed).message) == ("incompatible", RELAY)
    assert classify(_raised(RelayRemoved("tvm.relay"), SystemExit(0))).status == "ok"
    # An error raised after the script handled the ImportError is the script's own.
    assert classify(_raised(ValueError("bad"))).status == "error"


# Real scripts on a release without Relay --------------------------------------------------

@pytest.fixture(scope="module")
def new_env(settings: Settings) -> Environment:
    """The newest founding environment, provisioned (real TVM, no Relay)."""
    from worker.environments.provision import provision

    env = default_catalog().get(NEW_ENV)
    provision(settings, env)
    return env


@pytest.fixture(scope="module")
def runtime(settings: Settings, new_env: Environment) -> Iterator[LocalRuntime]:
    """A local runtime with one warm sandbox of the environment."""
    from worker.runtimes.local import LocalRuntime

    local = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 1}))
    local.prewarm([new_env])
    yield local
    local.close()


def run_script(script: str, env: Environment, runtime: LocalRuntime) -> Result:
    from worker.runner import run_variant

    return run_variant(parse_case({"script": script}), "script", env, runtime)


@pytest.mark.tvm
def test_the_relay_era_report_is_incompatible_on_the_newest_release(
        new_env: Environment, runtime: LocalRuntime) -> None:
    """apache/tvm#10398 (tests/cases/tvm-10398): plain TVM 0.27 says only "cannot import name
    'relay' from 'tvm'"; the run says why and is not an error."""
    result = run_script(case_path("tvm-10398/report.py").read_text(), new_env, runtime)
    assert (result.status, result.error_type, result.message) == \
        ("incompatible", "RelayRemoved", RELAY), result.log.stderr[-2000:]
    assert RELAY in result.log.stderr  # the traceback in the log says it too


# How Relay-era scripts reach for what is gone, and what each run must say.
SCRIPTS = {
    "import-as": ("import tvm.relay as relay\n", "incompatible", "(tvm.relay)"),
    # (Relay's from_onnx is carried over onto Relax: relay_carry.py, test_relay_carry_over.py.)
    "from-submodule": ("from tvm.relay.frontend import from_pytorch\n", "incompatible",
                       "(tvm.relay)"),
    "attribute": ("import tvm\nmod, params = tvm.relay.frontend.from_onnx(None, {})\n",
                  "incompatible", "(tvm.relay)"),
    "graph-executor": ("import tvm\nfrom tvm.contrib import graph_executor\n", "incompatible",
                       "Relay's graph executor (tvm.contrib.graph_executor)"),
    "exits-on-import-error": ("import sys\ntry:\n    from tvm import relay\nexcept ImportError:\n"
                              "    print('needs relay')\n    sys.exit(1)\n", "incompatible",
                              "(tvm.relay)"),
    # A script that does without Relay where it is gone is the script's own business.
    "optional-relay": ("try:\n    from tvm import relay\nexcept ImportError:\n    relay = None\n"
                       "import tvm\nprint(relay, tvm.runtime.tensor([1, 2]).numpy())\n", "ok", None),
    "optional-then-fails": ("try:\n    from tvm import relay\nexcept ImportError:\n"
                            "    relay = None\nraise ValueError('bad')\n", "error", None),
}


@pytest.mark.tvm
@pytest.mark.parametrize("name", SCRIPTS)
def test_each_way_to_reach_relay(name: str, new_env: Environment, runtime: LocalRuntime) -> None:
    script, status, named = SCRIPTS[name]
    result = run_script(script, new_env, runtime)
    assert result.status == status, (result.message, result.log.stderr[-2000:])
    if named is None:
        assert "Relay-era" not in (result.message or "")
    else:
        assert named in (result.message or "") and "removed in TVM 0.20.0" in (result.message or "")
