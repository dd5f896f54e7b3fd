"""Quality gates: per result key, bounds on the run's mean score and pass rate.

``gates: {escalation: {max_pass_rate: 0.15}, trajectory_strict_match: {min_mean: 0.9}}`` — a run
whose statistics break a gate fails (exit code 3 in the CLI). Minimums and maximums both exist:
"escalation rate above 15 %" is a maximum.

>>> class KS:  # the per-key statistics of a run (RunStats.keys[key])
...     mean, pass_rate = 0.8, 0.2
>>> class Stats:
...     keys = {"escalation": KS()}
>>> [g.passed for g in evaluate_gates({"escalation": {"max_pass_rate": 0.15, "min_mean": 0.5}}, Stats())]
[True, False]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: check name -> (statistic, comparison): the gate passes when ``actual <op> threshold``.
CHECKS: dict[str, tuple[str, str]] = {
    "min_mean": ("mean", ">="),
    "max_mean": ("mean", "<="),
    "min_pass_rate": ("pass_rate", ">="),
    "max_pass_rate": ("pass_rate", "<="),
}


@dataclass(frozen=True, slots=True)
class GateResult:
    """One checked bound of one gate."""

    key: str
    check: str
    threshold: float
    actual: float | None
    passed: bool
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "check": self.check,
            "threshold": self.threshold,
            "actual": self.actual,
            "passed": self.passed,
            "message": self.message,
        }


def _bounds(gate: Any) -> dict[str, float]:
    """The bounds set on a gate: a mapping or a config model (``GateConfig``) with these fields."""

    def get(name: str) -> Any:
        return gate.get(name) if isinstance(gate, Mapping) else getattr(gate, name, None)

    return {check: float(v) for check in CHECKS if (v := get(check)) is not None}


def evaluate_gates(gates: Mapping[str, Any], stats: Any) -> list[GateResult]:
    """Check every bound of every gate against ``stats.keys[key].mean`` / ``.pass_rate``.

    A key with no results, or a statistic that is None (nothing scored), fails the gate.
    """
    out: list[GateResult] = []
    for key, gate in gates.items():
        ks = stats.keys.get(key)
        for check, threshold in _bounds(gate).items():
            stat, op = CHECKS[check]
            actual = None if ks is None else getattr(ks, stat, None)
            if ks is None:
                out.append(GateResult(key, check, threshold, None, False, f"gate {key}: no results with this key"))
                continue
            if actual is None:
                out.append(GateResult(key, check, threshold, None, False, f"gate {key}: no scored results ({stat})"))
                continue
            ok = actual >= threshold if op == ">=" else actual <= threshold
            verdict = "ok" if ok else "FAILED"
            msg = f"gate {key}: {stat.replace('_', ' ')} {actual:.4g} {op} {check} {threshold:g}: {verdict}"
            out.append(GateResult(key, check, threshold, float(actual), ok, msg))
    return out


def gate_failures(results: Iterable[GateResult]) -> list[str]:
    """The messages of the failed gate checks."""
    return [r.message for r in results if not r.passed]


def gate_keys_problems(gates: Mapping[str, Any], evaluator_keys: Iterable[str]) -> list[str]:
    """For ``assay validate``: gates naming a key no evaluator produces, and gates with no bound.

    ``evaluator_keys`` are the evaluators' ``result_keys()``; a key ending in ``:`` is a prefix
    (dynamic keys such as ``json_match:…``), and ``key:sub`` keys match their ``key`` base too.
    """
    keys = list(evaluator_keys)
    problems = []
    for name, gate in gates.items():
        known = any(name == k or (k.endswith(":") and name.startswith(k)) or name.startswith(k + ":") for k in keys)
        if not known:
            problems.append(f"gates.{name}: no evaluator produces the key {name!r} (keys: {', '.join(sorted(keys))})")
        if not _bounds(gate):
            problems.append(f"gates.{name}: no bound set (use {', '.join(CHECKS)})")
    return problems


__all__ = ["CHECKS", "GateResult", "evaluate_gates", "gate_failures", "gate_keys_problems"]
