"""One verdict for every command that ends a run: ``assay run`` (one process or ``--workers N``),
each ``--shard i/N`` and ``assay merge``.

What decides the status and the exit code of an output, in this order::

    an error stopped it                      failed           the error's exit code (1, 2, …)
    it stopped before the end                failed/incomplete 1, budget 5, interrupted 130, pending 75
    an evaluator's error share > max_error_rate  failed       1
    ── the output is whole: only a final verdict (a run, a merge; never one shard) goes on ──
    dead letters above max_dead_letters / max_dead_letter_ratio   dead_letters   4
    a gate broken (min/max mean, min/max pass rate)               gate_failed    3

A shard's output is one slice of the run: its gate values are recorded (the same records as a
merge writes) but decide nothing; ``assay merge`` applies the gates and the dead-letter limits once,
to the totals. The error rate is judged on every part (a judge that was down is an infrastructure
failure of that part, retryable) and again on the totals.

>>> from assay.pipeline.summary import RunStats
>>> from assay.records import Result
>>> stats = RunStats()
>>> for score in (1.0, 0.0, 0.0, 0.0):
...     stats.add_results({"escalation": Result("escalation", score)})
>>> policy = Policy.from_mapping({"escalation": {"max_pass_rate": 0.15}})
>>> v = decide(policy, stats)
>>> v.status, v.exit_code, v.messages
('gate_failed', 3, ['gate escalation: pass rate 0.25, expected at most 0.15 (max_pass_rate): FAILED'])
>>> decide(policy, stats, final=False).exit_code  # one shard of the run: recorded, not applied
0
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from assay.config import GateConfig, RunConfig
from assay.exceptions import (
    EXIT_BUDGET,
    EXIT_DEAD_LETTERS,
    EXIT_GATE,
    EXIT_INFRA,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PENDING,
    AssayError,
)
from assay.pipeline.gates import GateResult, evaluate_gates
from assay.pipeline.summary import RunStats

WHOLE_STATUSES = frozenset({"ok", "gate_failed", "dead_letters"})
"""Statuses of an output that holds every row (the verdict may still be a failed gate)."""

STOPPED: dict[str, tuple[int, str]] = {
    "failed": (EXIT_INFRA, ""),
    "incomplete": (EXIT_INFRA, ""),
    "budget": (
        EXIT_BUDGET,
        "budget reached: the run stopped cleanly; raise limits.budget_usd and run the same command again to resume",
    ),
    "interrupted": (EXIT_INTERRUPTED, "interrupted: written rows are durable; run the same command again to resume"),
    "pending": (EXIT_PENDING, "pending: the work is submitted; run the same command again later to collect it"),
}
"""Statuses of an output that stopped before the end, most actionable first: their exit code and
what to do."""


def combine_statuses(statuses: Iterable[str]) -> str:
    """The status of several parts of one output (writers, shards): the most actionable stopped
    status (:data:`STOPPED` order) of any part, else ``ok`` (whole parts' own verdicts, such as an
    old shard's ``gate_failed``, count as ``ok``: the totals are judged again)."""
    present = set(statuses)
    return next((s for s in STOPPED if s in present), "ok")


@dataclass(frozen=True)
class Policy:
    """What judges a whole output: the gates and the limits on dead letters and error results."""

    gates: Mapping[str, GateConfig] = field(default_factory=dict)
    max_dead_letters: int | None = None
    max_dead_letter_ratio: float | None = None
    max_error_rate: float | None = None
    origin: str = "none"
    """Where the policy comes from (``run file``, ``shard summaries``), recorded as ``gates_from``."""

    @classmethod
    def from_config(cls, config: RunConfig, origin: str = "run file") -> Policy:
        lim = config.limits
        return cls(dict(config.gates), lim.max_dead_letters, lim.max_dead_letter_ratio, lim.max_error_rate, origin)

    @classmethod
    def from_mapping(cls, gates: Mapping[str, Any], origin: str = "none", **limits: Any) -> Policy:
        """A policy from plain data (``{key: {min_mean: …}}`` and limit keywords)."""
        return cls({k: GateConfig.model_validate(g) for k, g in gates.items()}, origin=origin, **limits)

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any]) -> Policy | None:
        """The policy a summary recorded (``gate_config``, ``limits``); None if it recorded none."""
        if "gate_config" not in summary:
            return None
        raw = summary.get("gate_config") or {}
        limits = summary.get("limits") or {}
        return cls(
            {key: GateConfig.model_validate(g) for key, g in raw.items() if isinstance(g, dict)},
            limits.get("max_dead_letters"),
            limits.get("max_dead_letter_ratio"),
            limits.get("max_error_rate"),
            "shard summaries",
        )

    def same_as(self, other: Policy) -> bool:
        return self.to_dict() == other.to_dict()

    def to_dict(self) -> dict[str, Any]:
        """``gate_config`` and ``limits`` as every summary records them."""
        return {
            "gate_config": {k: g.model_dump(exclude_none=True) for k, g in sorted(self.gates.items())},
            "limits": {
                "max_dead_letters": self.max_dead_letters,
                "max_dead_letter_ratio": self.max_dead_letter_ratio,
                "max_error_rate": self.max_error_rate,
            },
        }


@dataclass
class Verdict:
    """The status and exit code of an output, why, and its gate records."""

    status: str
    exit_code: int
    messages: list[str]
    gates: list[GateResult]
    final: bool
    """False for one shard: its gates are recorded, not applied."""
    policy: Policy
    error: AssayError | None = None

    @property
    def whole(self) -> bool:
        """Whether the output holds every row (``_SUCCESS`` may be written beside it)."""
        return self.status in WHOLE_STATUSES

    def record(self, summary: dict[str, Any]) -> dict[str, Any]:
        """Write the verdict into ``summary`` (the same keys for a run, a shard and a merge)."""
        summary["status"] = self.status
        summary["exit_code"] = self.exit_code
        summary["messages"] = list(self.messages)
        summary["gates"] = [g.to_dict() for g in self.gates]
        summary["gates_applied"] = self.final
        summary["gates_from"] = self.policy.origin
        summary.update(self.policy.to_dict())
        if self.error is not None:
            summary["error"] = {"type": type(self.error).__name__, "message": str(self.error)}
        return summary


@dataclass
class RunReport:
    """What a command that ran (a part of) a run ended with: exit code, summary, status, messages."""

    exit_code: int
    summary: dict[str, Any]
    status: str
    messages: list[str] = field(default_factory=list)
    error: AssayError | None = None


def error_rate_failures(limit: float | None, stats: RunStats) -> list[str]:
    """Evaluators whose share of error results is above ``limit`` (``limits.max_error_rate``)."""
    if limit is None:
        return []
    out = []
    for key, ks in sorted(stats.keys.items()):
        if ks.count and ks.errors / ks.count > limit:
            out.append(
                f"evaluator {key}: {ks.errors} of {ks.count} results are errors"
                f" ({ks.errors / ks.count:.1%} > max_error_rate {limit:.0%})"
            )
    return out


def dead_letter_failures(policy: Policy, stats: RunStats) -> list[str]:
    """The dead-letter limit the output breaks (at most one message), with what the records
    lacked: the most common dead-letter reason and its count, and when no record was scored,
    that the input is probably not in a format the run reads.

    >>> from assay.records import Failure, Position
    >>> stats = RunStats()
    >>> stats.counts["read"] = 2
    >>> for line in (1, 2):
    ...     stats.add_dead_letter(Failure(b"", Position("in.jsonl", line), "normalize", "NormalizationError",
    ...                                   f"in.jsonl:{line}: record has no outputs or trajectory (keys: id)"))
    >>> print(dead_letter_failures(Policy(max_dead_letter_ratio=0.5), stats)[0])
    dead-letter ratio 1.0000 > max_dead_letter_ratio 0.5: every record read (2) is a dead letter, none \
was scored: is the input in a format the run reads (source format, normalize.format)?; most common \
reason (2 of 2): record has no outputs or trajectory (keys: id)
    """
    dl = stats.counts.get("dead_letters", 0)
    ratio, ratio_limit = stats.dead_letter_ratio(), policy.max_dead_letter_ratio
    if policy.max_dead_letters is not None and dl > policy.max_dead_letters:
        broken = f"{dl} dead letters > max_dead_letters {policy.max_dead_letters}"
    elif ratio_limit is not None and ratio > ratio_limit:
        broken = f"dead-letter ratio {ratio:.4f} > max_dead_letter_ratio {ratio_limit}"
    else:
        return []
    read, scored = stats.records_seen(), stats.counts.get("scored", 0)
    if read and not scored and dl >= read:
        what = (
            f"every record read ({read:,}) is a dead letter, none was scored: is the input in a format the run "
            "reads (source format, normalize.format)?"
        )
    else:
        what = f"{dl:,} of {read:,} records read are dead letters"
    top = stats.top_dead_letter_reason()
    if top is not None:
        what += f"; most common reason ({top[1]:,} of {dl:,}): {top[0]}"
    return [f"{broken}: {what}"]


def budget_message(limit_usd: float | None, spent_usd: float, spent_now_usd: float) -> str:
    """What a budget stop says: what was spent of which limit, and how to go on (a rerun under the
    same ``limits.budget_usd`` stops again at once: the run's spending is counted across attempts).

    >>> budget_message(1.0, 0.9981, 0.0)  # doctest: +NORMALIZE_WHITESPACE
    'budget reached: limits.budget_usd of $1.00 was already spent ($0.9981 so far, nothing more this time);
    raise it (e.g. --set limits.budget_usd=2, or limits.budget_usd in the run file) and run the same command
    again to continue'
    """
    if limit_usd is None:
        return STOPPED["budget"][1]
    raised = f"{limit_usd * 2:.6g}"
    how = f"(e.g. --set limits.budget_usd={raised}, or limits.budget_usd in the run file) and run the same command"
    if spent_now_usd <= 0.0:
        return (
            f"budget reached: limits.budget_usd of ${limit_usd:.2f} was already spent (${spent_usd:.4f} so far, "
            f"nothing more this time); raise it {how} again to continue"
        )
    return (
        f"budget reached: ${spent_usd:.4f} spent of limits.budget_usd ${limit_usd:.2f}; the run stopped cleanly "
        f"(written rows are kept); raise limits.budget_usd {how} again to resume"
    )


def decide(
    policy: Policy,
    stats: RunStats,
    *,
    status: str = "ok",
    error: AssayError | None = None,
    final: bool = True,
    budget_note: str | None = None,
) -> Verdict:
    """The verdict of an output from its totals (see the module docstring).

    ``status``: how the output ended (``ok``, or a :data:`STOPPED` status; see
    :func:`combine_statuses` for several parts); ``final``: False for one shard of a run;
    ``budget_note``: what a budget stop says (:func:`budget_message`) instead of the generic line."""
    if error is not None:
        return Verdict("failed", error.exit_code, [], [], final, policy, error)
    if status in STOPPED:
        code, message = STOPPED[status]
        if status == "budget" and budget_note:
            message = budget_note
        return Verdict(status, code, [message] if message else [], [], final, policy)
    gates = evaluate_gates(policy.gates, stats)
    errors = error_rate_failures(policy.max_error_rate, stats)
    if errors:
        return Verdict("failed", EXIT_INFRA, errors, gates, final, policy)
    if not final:
        return Verdict("ok", EXIT_OK, [], gates, final, policy)
    dead = dead_letter_failures(policy, stats)
    failed_gates = [g.message for g in gates if not g.passed]
    if dead:
        return Verdict("dead_letters", EXIT_DEAD_LETTERS, dead + failed_gates, gates, final, policy)
    if failed_gates:
        return Verdict("gate_failed", EXIT_GATE, failed_gates, gates, final, policy)
    return Verdict("ok", EXIT_OK, [], gates, final, policy)


__all__ = [
    "STOPPED",
    "WHOLE_STATUSES",
    "Policy",
    "RunReport",
    "Verdict",
    "budget_message",
    "combine_statuses",
    "dead_letter_failures",
    "decide",
    "error_rate_failures",
]
