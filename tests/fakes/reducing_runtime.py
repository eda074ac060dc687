"""A fake runtime for the reducer's tests (no TVM): a module that fails while it binds
`R.nn.softmax` and its passes include FuseOps, and the case of that module."""

from __future__ import annotations

from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment
from worker.runtimes.base import Execution, SandboxJob

FAKE_MODULE = '''from tvm.script import ir as I
from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def unrelated(x: R.Tensor((8, 8), dtype="float32")) -> R.Tensor((8, 8), dtype="float32"):
        return x

    @R.function
    def main(x: R.Tensor((8, 8), dtype="float32")) -> R.Tensor((8, 8), dtype="float32"):
        a: R.Tensor((8, 8), dtype="float32") = R.add(x, x)
        b: R.Tensor((8, 8), dtype="float32") = R.multiply(a, a)
        bug: R.Tensor((8, 8), dtype="float32") = R.nn.softmax(x)
        return bug
'''


class FakeReducingRuntime:
    """Checks accept any module that still returns what it binds; a run fails with the bug's
    signature while `R.nn.softmax` is bound and the passes include FuseOps."""

    name = "fake"

    def __init__(self) -> None:
        self.jobs: list[SandboxJob] = []

    def reserve(self, env: Environment, timeout_s: int, memory_mb: int, count: int = 1) -> None:
        """Nothing to start ahead: a fake run starts at once."""

    def prewarm(self, envs: list[Environment], processes: int = 1) -> None:
        """Nothing to warm."""

    def start_zygotes(self, envs: list[Environment]) -> None:
        """No TVM to import."""

    def close(self) -> None:
        """Nothing held."""

    def execute(self, job: SandboxJob) -> Execution:
        self.jobs.append(job)
        events: list[dict] = [{"event": "start", "tvm": {"version": "fake"}}]
        harness = job.case.get("harness")
        if harness and harness["mode"] == "check":
            events += [self.checked(index, source) for index, source in enumerate(harness["sources"])]
            return Execution(events=events, returncode=0)
        source = job.case["source"]
        if harness:  # candidate mode: checked, then run unless not ok or the current module
            events.append(self.checked(0, harness["source"]))
            if not events[-1]["ok"] or harness["source"] == harness["current"]:
                return Execution(events=events, returncode=0)
            source = harness["source"]
        passes = [p["name"] for p in job.case["variants"][0]["passes"]]
        failing = "R.nn.softmax" in source and "FuseOps" in passes
        events.append({"event": "result", "status": "error" if failing else "ok",
                       "stage": "build" if failing else "run",
                       "error_type": "E" if failing else None,
                       "signature": "E: bug" if failing else None})
        return Execution(events=events, returncode=0)

    def fingerprint(self, env: object) -> dict:
        return {}

    @staticmethod
    def checked(index: int, source: str) -> dict:
        """The check's verdict: a module that still returns what it binds parses."""
        ok = "return bug" not in source or "bug:" in source
        return {"event": "checked", "index": index, "ok": ok, "source": source,
                **({} if ok else {"reason": "not well formed"})}


def fake_case() -> object:
    """FAKE_MODULE as a case of one variant whose passes include FuseOps."""
    return parse_case({"source": FAKE_MODULE, "variants": [
        {"name": "v", "passes": ["Normalize", "FuseOps", "FoldConstant", "LegalizeOps"]}]})
