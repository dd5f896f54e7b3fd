"""Quality gates: per result key, bounds on the run's mean score and pass rate.

``gates: {escalation: {max_pass_rate: 0.15}, trajectory_strict_match: {min_mean: 0.9}}`` — a run
whose statistics break a gate fails (exit code 3 in the CLI). Minimums and maximums both exist:
"escalation rate above 15 %" is a maximum. ``min_kappa`` measures a judge against the human labels
of ``calibration.labels``: a judge that drifted fails its gate.

A bound is a number, compared with the point value, or ``{value: 0.9, on: lower_bound}``, compared
with an end of the key's confidence interval (``mean_ci`` / ``pass_rate_ci``): a gate on the lower
bound passes only when the run is confidently above the threshold, not by luck of the sample.

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
    "min_kappa": ("kappa", ">="),
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
    on: str = "point"
    """What was compared: ``point`` (the estimate), ``lower_bound`` or ``upper_bound`` (of its interval)."""

    def to_dict(self) -> dict[str, Any]:
        d = {
            "key": self.key,
            "check": self.check,
            "threshold": self.threshold,
            "actual": self.actual,
            "passed": self.passed,
            "message": self.message,
        }
        if self.on != "point":
            d["on"] = self.on
        return d


def gate_bound(v: Any) -> tuple[float, str]:
    """A bound as (threshold, what it is compared with): a number, ``{value, on}`` or a ``GateBound``."""
    if isinstance(v, Mapping):
        return float(v["value"]), str(v.get("on", "point"))
    if hasattr(v, "value"):
        return float(v.value), str(getattr(v, "on", "point"))
    return float(v), "point"


def _bounds(gate: Any) -> dict[str, tuple[float, str]]:
    """The bounds set on a gate: a mapping or a config model (``GateConfig``) with these fields."""

    def get(name: str) -> Any:
        return gate.get(name) if isinstance(gate, Mapping) else getattr(gate, name, None)

    return {check: gate_bound(v) for check in CHECKS if (v := get(check)) is not None}


def gate_statistic(ks: Any, stat: str, on: str) -> float | None:
    """The value a bound is compared with: ``ks.<stat>``, or an end of ``ks.<stat>_ci``."""
    if on == "point":
        value = getattr(ks, stat, None)
        return None if value is None else float(value)
    ci = getattr(ks, f"{stat}_ci", None)
    if ci is None:
        return None
    return float(ci[0] if on == "lower_bound" else ci[1])


def evaluate_gates(gates: Mapping[str, Any], stats: Any) -> list[GateResult]:
    """Check every bound of every gate against ``stats.keys[key].mean`` / ``.pass_rate`` (or an
    end of ``.mean_ci`` / ``.pass_rate_ci`` for a bound ``on`` it).

    A key with no results, or a statistic that is None (nothing scored; an interval of fewer than
    two results), fails the gate.
    """
    out: list[GateResult] = []
    for key, gate in gates.items():
        ks = stats.keys.get(key)
        for check, (threshold, on) in _bounds(gate).items():
            stat, op = CHECKS[check]
            what = stat.replace("_", " ") + ("" if on == "point" else " " + on.replace("_", " "))
            if ks is None:
                msg = f"gate {key}: no results with this key"
                out.append(GateResult(key, check, threshold, None, False, msg, on))
                continue
            actual = gate_statistic(ks, stat, on)
            if actual is None:
                msg = f"gate {key}: no scored results ({what})"
                out.append(GateResult(key, check, threshold, None, False, msg, on))
                continue
            ok = actual >= threshold if op == ">=" else actual <= threshold
            verdict = "ok" if ok else "FAILED"
            expected = "at least" if op == ">=" else "at most"
            bound = check if on == "point" else f"{check} on {on}"
            msg = f"gate {key}: {what} {actual:.4g}, expected {expected} {threshold:g} ({bound}): {verdict}"
            out.append(GateResult(key, check, threshold, actual, ok, msg, on))
    return out


def gate_failures(results: Iterable[GateResult]) -> list[str]:
    """The messages of the failed gate checks."""
    return [r.message for r in results if not r.passed]


def gate_keys_problems(
    gates: Mapping[str, Any], evaluator_keys: Iterable[str], *, labels: str | None = None
) -> list[str]:
    """For ``assay validate``: gates naming a key no evaluator produces, gates with no bound, and
    ``min_kappa`` gates without human labels (``labels``: the run's ``calibration.labels``).

    ``evaluator_keys`` are the evaluators' ``result_keys()``; a key ending in ``:`` is a prefix
    (dynamic keys such as ``json_match:…``), and ``key:sub`` keys match their ``key`` base too.
    """
    keys = list(evaluator_keys)
    problems = []
    for name, gate in gates.items():
        known = any(name == k or (k.endswith(":") and name.startswith(k)) or name.startswith(k + ":") for k in keys)
        if not known:
            problems.append(f"gates.{name}: no evaluator produces the key {name!r} (keys: {', '.join(sorted(keys))})")
        bounds = _bounds(gate)
        if not bounds:
            problems.append(f"gates.{name}: no bound set (use {', '.join(CHECKS)})")
        if "min_kappa" in bounds and labels is None:
            problems.append(f"gates.{name}.min_kappa: needs human labels (calibration: {{labels: PATH}})")
    return problems


__all__ = [
    "CHECKS",
    "GateResult",
    "evaluate_gates",
    "gate_bound",
    "gate_failures",
    "gate_keys_problems",
    "gate_statistic",
]
