"""sweep: the change rules (no TVM), then the store's cases run on the two founding
environments: #20200 fixed in the newer one, #20191's segfault the same on both (its newer
run read from the store, not run again)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from cli.commands.sweep import sweep
from tests.conftest import NEW_ENV, OLD_ENV
from tests.tracker.conftest import CORPUS, segfault_case
from tests.tracker.stored_jobs import stored_job
from tvmrepro.environments import default_catalog
from tvmrepro.jobs.tracker.importing import import_file
from tvmrepro.jobs.tracker.sweep import Change, Outcome, change_of, previous_environment, stored_cases
from tvmrepro.results import Result
from tvmrepro.store import open_store
from tvmrepro.store.rows import JobRow

if TYPE_CHECKING:
    from tvmrepro.environments import Environment
    from worker.runtimes.local import LocalRuntime


@pytest.mark.parametrize("old, new, change", [
    (("error", "a"), ("ok", None), Change.FIXED),
    (("ok", None), ("crash", "b"), Change.REGRESSED),
    (("error", "a"), ("error", "b"), Change.NEW_SIGNATURE),
    (("error", "a"), ("timeout", "a"), Change.NEW_SIGNATURE),
    (("error", "a"), ("error", "a"), Change.SAME),
    (("ok", None), ("ok", None), Change.SAME),
    (("incompatible", None), ("error", "a"), Change.NOT_MEASURED),
])
def test_what_changed(old: tuple[str, str | None], new: tuple[str, str | None],
                      change: Change) -> None:
    assert change_of(Outcome(status=old[0], signature=old[1]),
                     Outcome(status=new[0], signature=new[1])) == change


def test_a_case_run_twice_is_swept_once() -> None:
    jobs = [JobRow(id=f"j{i}", kind="run", title=title, case={"title": title, "script": "x"},
                   environments=[], variants=["script"], created_at=i)
            for i, title in enumerate(["first", "again", "first"])]
    other = JobRow(id="j9", kind="run", title="t", case={"script": "y"}, environments=[],
                   variants=["script"], created_at=0.5)
    assert [(c.job, c.variant) for c in stored_cases([*jobs, other])] == [
        ("j0", "script"), ("j9", "script")]


def test_the_previous_release_by_default() -> None:
    catalog = default_catalog()
    assert previous_environment(catalog, catalog.get(NEW_ENV), "--since").id == "tvm-0.26.0-cpu"


@pytest.mark.tvm
def test_a_sweep_of_the_stored_cases(tmp_path: Path, tvm_envs: dict[str, Environment],
                                     warm_runtime: LocalRuntime,
                                     new_failures: dict[str, Result],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'store.sqlite'}", pooled=False)
    stored_job(store, segfault_case(), [new_failures["crash"]])
    fixed = next(r for r in import_file(CORPUS / "issues.json") if r.number == 20200).case()
    stored_job(store, fixed, [])  # a job whose runs never finished: its case is still stored
    answer = sweep(store, tvm_envs[OLD_ENV], tvm_envs[NEW_ENV], warm_runtime)
    store.dispose()
    assert [(line.title, line.old.status, line.new.status, line.change.value)
            for line in answer.cases] == [("#20191", "crash", "crash", "same"),
                                          ("#20200", "error", "ok", "fixed")]
    assert answer.cases[0].new.signature == "crash: SIGSEGV at StorageObj::AllocTensor at run"
    assert answer.changed == {"fixed": 1, "same": 1}
    ran = capsys.readouterr().err
    assert f"#20191 (script) on {OLD_ENV}" in ran
    assert f"#20191 (script) on {NEW_ENV}" not in ran  # the store's result
