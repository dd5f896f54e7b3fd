"""assay's pytest plugin: score inside tests, gate CI on the scores, keep them as an assay output.

Installed with assay (entry point ``pytest11``), inert until a test uses it::

    import pytest
    from assay.evaluators import TrajectoryMatch

    @pytest.mark.assay
    def test_refund_flow(assay_eval):
        outputs = my_agent("refund order 7")
        assay_eval.log_inputs("refund order 7")
        result = assay_eval.score(TrajectoryMatch(mode="superset"), outputs=outputs, reference_outputs=gold)
        assert result.passed
        assay_eval.log_feedback("helpfulness", 0.8)

``assay_eval.score`` takes an assay evaluator, an ``assay.compat`` evaluator function (openevals /
agentevals style) or a registered evaluator name; it returns the Result (a list for multi-key
evaluators) and records it. Every test that uses the fixture or the ``assay`` marker is one
*case* (one output row, ``trace_id`` = the test's node id) with a ``test_passed`` result.

Options:

* ``--assay-results DIR`` writes the cases as an assay output: ``part-00000-00000.jsonl`` (one row per
  case), ``_SUMMARY.json`` (the engine's statistics and verdict) and ``_SUCCESS`` — what
  ``assay report DIR`` and ``assay compare BEFORE AFTER`` read, like a nightly run's output.
* ``--assay-gate KEY:RULE=VALUE`` (repeatable; rules as in a run file's ``gates:``, e.g.
  ``trajectory_superset_match:min_pass_rate=0.9`` or ``helpfulness:min_mean=0.7``) fails the
  session (exit status 1) when a gate fails; the gates are judged by the engine's verdict (the
  summary says ``gate_failed``; as for a run, ``_SUCCESS`` still marks the output as whole).
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from assay.connectors.layout import RESULTS_PREFIX, SUCCESS, SUMMARY, part_name, write_atomic
from assay.evaluators.base import BaseEvaluator
from assay.evaluators.identity import evaluator_identity
from assay.exceptions import ConfigError
from assay.pipeline.summary import RunStats
from assay.pipeline.verdict import Policy, Verdict, decide
from assay.records import Position, Result, TraceResult

TEST_PASSED = "test_passed"
_CASES = pytest.StashKey[dict[str, "EvalCase"]]()
_STARTED = pytest.StashKey[tuple[dt.datetime, float]]()
_VERDICT = pytest.StashKey[tuple[RunStats, Verdict]]()


class EvalCase:
    """What one test logged: its inputs/outputs (kept in the row's metadata) and its results."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid
        self.results: dict[str, Result] = {}
        self.identity: dict[str, str] = {}
        self.logged: dict[str, Any] = {}

    def log_inputs(self, inputs: Any) -> None:
        self.logged["inputs"] = inputs

    def log_outputs(self, outputs: Any) -> None:
        self.logged["outputs"] = outputs

    def log_reference_outputs(self, reference_outputs: Any) -> None:
        self.logged["reference_outputs"] = reference_outputs

    def log_feedback(self, key: str, score: float | bool | None, comment: str | None = None) -> Result:
        """Record a score of your own under ``key`` (a bool is 1.0/0.0)."""
        value = score
        number = None if score is None else float(score)
        result = Result(key, number, value, comment)
        self.results[key] = result
        return result

    def score(
        self,
        evaluator: BaseEvaluator[Any] | Callable[..., Any] | str,
        *,
        outputs: Any = None,
        reference_outputs: Any = None,
        inputs: Any = None,
        **kwargs: Any,
    ) -> Any:
        """Score with an assay evaluator (or compat function, or registry name) and record it."""
        ev = _evaluator(evaluator)
        if outputs is None:
            outputs = self.logged.get("outputs")
        if reference_outputs is None:
            reference_outputs = self.logged.get("reference_outputs")
        if inputs is None:
            inputs = self.logged.get("inputs")
        results = ev.evaluate_all(outputs=outputs, reference_outputs=reference_outputs, inputs=inputs, **kwargs)
        identity = evaluator_identity(ev)  # what produced it, as a run's rows say (assay compare reads it)
        for r in results:
            self.results[r.key] = r
            self.identity[r.key] = identity
        return results[0] if len(results) == 1 else results

    def row(self, run_id: str, passed: bool) -> TraceResult:
        results = dict(self.results)
        results[TEST_PASSED] = Result(TEST_PASSED, 1.0 if passed else 0.0, passed, None)
        return TraceResult(self.nodeid, run_id, Position(self.nodeid.partition("::")[0]), results)


def _evaluator(spec: Any) -> BaseEvaluator[Any]:
    if isinstance(spec, BaseEvaluator):
        return spec
    inner = getattr(spec, "evaluator", None)  # an assay.compat evaluator function
    if isinstance(inner, BaseEvaluator):
        return inner
    if isinstance(spec, str):
        from assay.registry import build_evaluator

        return build_evaluator(spec)
    raise ConfigError(
        f"assay_eval.score: expected an assay evaluator, an assay.compat evaluator or a name, got {type(spec).__name__}"
    )


# -- pytest hooks ----------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("assay", "assay: scores inside tests")
    group.addoption("--assay-results", metavar="DIR", default=None, help="write the scored cases as an assay output")
    group.addoption(
        "--assay-gate",
        metavar="KEY:RULE=VALUE",
        action="append",
        default=[],
        help="a gate on the cases' scores (e.g. helpfulness:min_mean=0.8); a failed gate fails the session",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "assay: the test is an assay eval case (one output row)")
    config.stash[_CASES] = {}
    config.stash[_STARTED] = (dt.datetime.now(dt.UTC), time.monotonic())


@pytest.fixture
def assay_eval(request: pytest.FixtureRequest) -> EvalCase:
    """This test's eval case: ``score(...)``, ``log_feedback(key, score)``, ``log_inputs/outputs``."""
    cases = request.config.stash[_CASES]
    return cases.setdefault(request.node.nodeid, EvalCase(request.node.nodeid))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    cases = item.config.stash[_CASES]
    if item.get_closest_marker("assay") is not None:
        cases.setdefault(item.nodeid, EvalCase(item.nodeid))
    case = cases.get(item.nodeid)
    if case is not None and (report.when == "call" or (report.when == "setup" and not report.passed)):
        case.logged["_outcome"] = report.outcome
    return report


def gates_from_options(values: list[str]) -> dict[str, dict[str, float]]:
    """``["k:min_mean=0.8", "k:min_pass_rate=0.9"]`` → ``{"k": {"min_mean": 0.8, "min_pass_rate": 0.9}}``."""
    gates: dict[str, dict[str, float]] = {}
    for value in values:
        key, sep, rule = value.rpartition(":")
        name, eq, number = rule.partition("=")
        try:
            if not (sep and eq and key):
                raise ValueError
            gates.setdefault(key, {})[name] = float(number)
        except ValueError:
            raise pytest.UsageError(
                f"--assay-gate {value!r}: expected KEY:RULE=VALUE, e.g. score:min_mean=0.8"
            ) from None
    return gates


def session_verdict(config: pytest.Config, run_id: str) -> tuple[list[TraceResult], RunStats, Verdict]:
    """The cases as rows, their statistics and the engine's verdict on them."""
    rows = [
        case.row(run_id, case.logged.get("_outcome") == "passed") for _, case in sorted(config.stash[_CASES].items())
    ]
    stats = RunStats()
    for row in rows:
        stats.counts["read"] += 1
        stats.counts["scored"] += 1
        stats.add_results(row.results)
    try:
        policy = Policy.from_mapping(gates_from_options(config.getoption("assay_gate")), origin="pytest options")
    except Exception as exc:
        raise pytest.UsageError(f"--assay-gate: {exc}") from exc
    return rows, stats, decide(policy, stats)


def _row_dict(row: TraceResult, identities: dict[str, dict[str, str]]) -> dict[str, Any]:
    d = row.to_dict()
    identity = identities.get(row.trace_id)
    if identity:
        d["identity"] = identity
    return d


def write_output(
    directory: Path,
    rows: list[TraceResult],
    stats: RunStats,
    verdict: Verdict,
    identities: dict[str, dict[str, str]] | None = None,
    **info: Any,
) -> None:
    """The rows (with each result's ``identity``), ``_SUMMARY.json`` and (when whole) ``_SUCCESS``,
    each written atomically; ``_SUCCESS`` of an earlier session is removed first."""
    identities = identities or {}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / SUCCESS).unlink(missing_ok=True)
    for stale in directory.glob(f"{RESULTS_PREFIX}-*.jsonl"):
        stale.unlink()
    rows_part = directory / part_name(RESULTS_PREFIX, 0, 0, ".jsonl")
    write_atomic(rows_part, b"".join(orjson.dumps(_row_dict(r, identities)) + b"\n" for r in rows))
    summary = {**info, **stats.to_dict(), "judges": {}, "outputs": {"results": str(directory)}, "source": "pytest"}
    write_atomic(directory / SUMMARY, orjson.dumps(verdict.record(summary), option=orjson.OPT_INDENT_2))
    if verdict.whole:
        write_atomic(directory / SUCCESS, b"")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if not config.stash.get(_CASES, None):
        return
    run_id = f"pytest-{uuid.uuid4().hex[:12]}"
    rows, stats, verdict = session_verdict(config, run_id)
    directory = config.getoption("assay_results")
    if directory:
        started, t0 = config.stash[_STARTED]
        write_output(
            Path(directory),
            rows,
            stats,
            verdict,
            {nodeid: case.identity for nodeid, case in config.stash[_CASES].items()},
            run_id=run_id,
            started_at=started.isoformat(),
            finished_at=dt.datetime.now(dt.UTC).isoformat(),
            wall_time_s=round(time.monotonic() - t0, 3),
        )
    if verdict.exit_code != 0 and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    config.stash[_VERDICT] = (stats, verdict)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    found = config.stash.get(_VERDICT, None)
    if found is None:
        return
    stats, verdict = found
    tr = terminalreporter
    tr.section("assay")
    for key, ks in sorted(stats.keys.items()):
        mean = ks.mean
        rate = ks.pass_rate
        tr.write_line(
            f"{key}: n={ks.count} mean={'-' if mean is None else f'{mean:.3f}'}"
            f" pass_rate={'-' if rate is None else f'{rate:.3f}'}"
        )
    for gate in verdict.gates:
        tr.write_line(("PASSED " if gate.passed else "GATE FAILED ") + gate.message)
    if config.getoption("assay_results"):
        tr.write_line(f"results: {config.getoption('assay_results')} (status {verdict.status})")
