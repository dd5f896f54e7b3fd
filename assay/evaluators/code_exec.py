"""``code_execution``: run the generated Python code in a local sandbox and score whether it ran,
and — when the record carries tests — whether they pass (openevals' E2B execution evaluator,
without E2B).

Nothing is ever executed unless a run file (or code) builds this evaluator. The code is
extracted as for the code checks (``code_extraction`` / ``code_extractor``), then run by
:func:`assay.evaluators.sandbox.run_python`: ``python -I -B`` in new mount, PID, network (and,
when assay is not root, user) namespaces — a read-only view of the system directories and the
run's own directory, no other process visible, no network, no capabilities — a scrubbed
environment, CPU/memory/file-size/process limits, killed at the wall-clock ``timeout``, output
capped. Where those namespaces cannot be built the evaluator refuses to build (ConfigError).

Tests come from the record field named by ``tests_field`` (default ``tests``; in the library face
``evaluator(outputs=code, tests=...)``): a string of Python run after the code in the same
namespace — top-level asserts, or ``test_*`` functions, each called with no arguments (pytest
style; fixtures and parametrize are not supported) — or a list of snippets, one test case each.

>>> ev = CodeExecution(timeout=5)
>>> ev.evaluate(outputs="print(1 + 1)").score  # doctest: +SKIP
1.0
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from assay.evaluators.base import AsyncEvaluator
from assay.evaluators.code import CodeExtractionParams, build_extractor, code_check_limiter, extract_code
from assay.evaluators.judge_render import lookup
from assay.evaluators.sandbox import Limits, RunOutcome, run_python, sandbox_unavailable
from assay.exceptions import ConfigError
from assay.records import Result
from assay.traces.model import Trace

_COMMENT_TAIL = 2000


class CodeExecutionParams(CodeExtractionParams):
    timeout: float = Field(10.0, gt=0)
    """Wall-clock seconds for one run (code and tests); the process group is killed after that
    and the result is a fail with ``metadata.timed_out``. The CPU limit is ``timeout + 2`` s."""
    memory_mb: int = Field(512, ge=32)
    """Address-space limit of the child (``RLIMIT_AS``), in MiB."""
    max_file_mb: int = Field(16, ge=0)
    """Largest file the child may write (``RLIMIT_FSIZE``), in MiB."""
    max_output_bytes: int = Field(64 * 1024, ge=1024)
    """Bytes of stdout and of stderr kept (the tail); the rest is read and dropped."""
    tests_field: str | None = "tests"
    """The record field holding the tests (a string, or a list of snippets); None = never run tests."""
    test_scoring: Literal["all", "fraction"] = "all"
    """With tests: 1.0 only when every test passes (``all``), or the fraction passed."""
    network: Literal["auto", "namespace"] = "namespace"
    """Always an empty network namespace (``auto`` is accepted from older run files); the audit
    hook alone (``hook``) is no longer offered."""
    allow_subprocess: bool = False
    """Let the code start processes (the audit hook refuses it by default)."""
    max_processes: int = Field(32, ge=1)
    """Processes (and threads) the code may have at once (``RLIMIT_NPROC``): bounds a fork bomb."""
    environment_variables: dict[str, str] = Field(default_factory=dict)
    """Variables given to the child (openevals' name); nothing else of the parent's environment
    is passed."""
    python: str | None = None
    """The interpreter (default: the one running assay, so its installed packages are importable)."""


class CodeExecution(AsyncEvaluator[CodeExecutionParams]):
    """Run the extracted code in a sandboxed subprocess; pass when it exits cleanly (and its tests pass)."""

    name: ClassVar[str] = "code_execution"
    description: ClassVar[str] = "Run generated Python code in a local sandbox (limits, no network); optional tests."
    example: ClassVar[dict[str, Any]] = {"code_extraction": "markdown_code_blocks", "timeout": 10}
    Params = CodeExecutionParams

    def default_key(self) -> str:
        return "execution_succeeded"

    def setup(self) -> None:
        p = self.params
        self._extractor = build_extractor(self.name, p.code_extraction, p.code_extractor)
        why = sandbox_unavailable(p.python)
        if why is not None:
            raise ConfigError(
                f"evaluator {self.name!r}: the code sandbox cannot be built here, so no generated code is run: {why}. "
                "It needs Linux with util-linux's unshare and mount/PID/network namespaces (and user namespaces "
                "when assay is not root); run assay on such a machine or VM"
            )

    def extract(self, value: Any) -> str | None:
        return extract_code(value, self.params.code_extraction, self._extractor)

    async def ascore(self, trace: Trace) -> Result:
        code = self.extract(trace.final_output)
        if code is None:
            return Result(self.key, 0.0, False, "no code found in the output", {"code_extraction_failed": True})
        tests = self._tests(trace)
        if isinstance(tests, Result):
            return tests
        p = self.params
        limits = Limits(p.timeout, p.memory_mb, p.max_file_mb, p.max_output_bytes, p.allow_subprocess, p.max_processes)
        async with code_check_limiter():
            try:
                outcome = await run_python(
                    code,
                    tests=tests,
                    limits=limits,
                    env=dict(p.environment_variables),
                    python=p.python,
                )
            except OSError as exc:
                return Result.from_error(self.key, f"cannot run the sandbox: {exc}")
        return self._result(outcome, tests is not None)

    def _tests(self, trace: Trace) -> str | list[str] | Result | None:
        if self.params.tests_field is None:
            return None
        tests = lookup(trace, self.params.tests_field)
        if tests is None or tests == "" or tests == []:
            return None
        if isinstance(tests, str):
            return tests
        if isinstance(tests, list) and all(isinstance(t, str) for t in tests):
            return list(tests)
        return Result.from_error(self.key, f"{self.params.tests_field!r} must be a string or a list of strings")

    def _result(self, o: RunOutcome, with_tests: bool) -> Result:
        meta: dict[str, Any] = {
            "returncode": o.returncode,
            "timed_out": o.timed_out,
            "network": o.network,
            "stdout": o.stdout[-_COMMENT_TAIL:],
            "stderr": o.stderr[-_COMMENT_TAIL:],
        }
        if o.output_truncated:
            meta["output_truncated"] = True
        if o.timed_out:
            meta["ran"] = False
            return Result(self.key, 0.0, False, f"timed out after {self.params.timeout:g}s (killed)", meta)
        report = o.report or {}
        if report.get("unenforced_limits"):
            meta["unenforced_limits"] = report["unenforced_limits"]
        ran = o.returncode in (0, 2) and report.get("ran", o.returncode == 0) is True
        meta["ran"] = ran
        if not ran:
            tail = o.stderr.strip()[-_COMMENT_TAIL:] or str(report.get("error") or "")
            return Result(self.key, 0.0, False, f"Command exited with code {o.returncode} and error:\n{tail}", meta)
        if not with_tests:
            return Result(self.key, 1.0, True, "ran without error", meta)
        cases = report.get("tests")
        if not isinstance(cases, list) or not cases:
            meta["tests_total"] = 0
            return Result(self.key, 0.0, False, "the tests did not run to completion", meta)
        passed = sum(1 for c in cases if c.get("passed") is True)
        failures = [f"{c.get('name')}: {c.get('error')}" for c in cases if c.get("passed") is not True]
        meta.update(tests_total=len(cases), tests_passed=passed, failures=failures)
        ok = passed == len(cases)
        score = (1.0 if ok else 0.0) if self.params.test_scoring == "all" else passed / len(cases)
        comment = f"{passed}/{len(cases)} tests passed"
        if failures:
            comment += "; failed: " + "; ".join(failures)[:_COMMENT_TAIL]
        return Result(self.key, score, ok, comment, meta)


__all__ = ["CodeExecution", "CodeExecutionParams"]
