"""``assay merge RESULTS``: the shards of a ``--shard i/N`` run become one run.

Each shard writes its own summary, ``_SUMMARY.shard-{i}-of-{N}.json`` (:func:`shard_summary_name`),
into the results directory and no ``_SUCCESS``. The merge step (the final task of an Airflow
mapping, or a command after the last cron shard):

* reads every shard summary of one N (``shards=N``, or the only N present);
* sums counts, evaluator aggregates (so means and pass rates are weighted by scored records) and
  judge statistics (latency percentiles cannot be merged: the largest shard value is kept);
* applies the gates and dead-letter limits **once**, to the totals. The gates come from the run
  file when one is passed (``--run-file``: the current file wins, as for ``assay run``), else from
  the ``gates``/``limits`` each shard stored in its summary (they must agree). Stored gates make the
  merge self-contained, so it is the robust default; passing the run file lets a gate change apply
  to already-scored shards;
* writes ``_SUMMARY.json`` and, only when every shard 0..N-1 has a summary whose status says its
  output is whole, ``_SUCCESS`` (any earlier ``_SUCCESS`` is removed first).

Exit codes as ``assay run``: 0 ok; 1 a shard summary is missing or a shard failed; 2 bad usage;
3 a gate failed; 4 dead letters above the limit; 5 a shard stopped on its budget; 130 a shard
was interrupted.

The results directory is reached through :class:`ResultsFS` (local directories now; an S3 prefix
plugs in with the same four methods).
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson

from assay.config import GateConfig, RunConfig
from assay.exceptions import ConfigError
from assay.pipeline.run import (
    EXIT_BUDGET,
    EXIT_DEAD_LETTERS,
    EXIT_GATE,
    EXIT_INFRA,
    EXIT_INTERRUPTED,
    EXIT_OK,
    merge_summaries,
)
from assay.pipeline.summary import RunStats

SUMMARY = "_SUMMARY.json"
SUCCESS = "_SUCCESS"
_SHARD_RE = re.compile(r"^_SUMMARY\.shard-(\d+)-of-(\d+)\.json$")
#: Shard statuses whose output is whole (the shard read its whole share and flushed it).
WHOLE_STATUSES = frozenset({"ok", "gate_failed", "dead_letters"})
_STATUS_EXIT = {"budget": EXIT_BUDGET, "interrupted": EXIT_INTERRUPTED}


def shard_summary_name(index: int, count: int) -> str:
    """The file name shard ``index`` of ``count`` writes its summary under."""
    return f"_SUMMARY.shard-{index}-of-{count}.json"


class ResultsFS(Protocol):
    """Where a run's results live: names are relative to the results root."""

    def list(self) -> list[str]:
        """Names of the files directly under the root."""
        ...

    def read_bytes(self, name: str) -> bytes: ...

    def write_bytes(self, name: str, data: bytes) -> None:
        """Write atomically (readers never see a partial file)."""
        ...

    def remove(self, name: str) -> None:
        """Remove if present."""
        ...


@dataclass
class LocalFS:
    """A local results directory."""

    root: Path

    def list(self) -> list[str]:
        try:
            return sorted(p.name for p in self.root.iterdir() if p.is_file())
        except FileNotFoundError:
            return []

    def read_bytes(self, name: str) -> bytes:
        return (self.root / name).read_bytes()

    def write_bytes(self, name: str, data: bytes) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{name}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.root / name)

    def remove(self, name: str) -> None:
        (self.root / name).unlink(missing_ok=True)


def open_results(location: str | os.PathLike[str]) -> ResultsFS:
    """The :class:`ResultsFS` of a results location (a local directory, or its ``_SUMMARY.json``)."""
    text = os.fspath(location)
    if "://" in text:
        raise ConfigError(f"assay merge {text}: only local results directories are supported so far")
    p = Path(text)
    return LocalFS(p.parent if p.name == SUMMARY else p)


@dataclass
class Gates:
    """The gates and dead-letter limits applied to the merged totals."""

    gates: dict[str, GateConfig] = field(default_factory=dict)
    max_dead_letters: int | None = None
    max_dead_letter_ratio: float | None = None
    origin: str = "none"

    @classmethod
    def from_config(cls, config: RunConfig, origin: str = "run file") -> Gates:
        """The gates and dead-letter limits of a run file."""
        lim = config.limits
        return cls(dict(config.gates), lim.max_dead_letters, lim.max_dead_letter_ratio, origin)

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any]) -> Gates | None:
        """The gates a shard stored in its summary (``gate_config``: key → {min_mean,
        min_pass_rate}; ``limits``: {max_dead_letters, max_dead_letter_ratio}); None if none."""
        if "gate_config" not in summary:
            return None
        raw = summary.get("gate_config") or {}
        gates = {key: GateConfig.model_validate(g) for key, g in raw.items() if isinstance(g, dict)}
        limits = summary.get("limits") or {}
        return cls(gates, limits.get("max_dead_letters"), limits.get("max_dead_letter_ratio"), "shard summaries")

    def same_as(self, other: Gates) -> bool:
        return (self.gates, self.max_dead_letters, self.max_dead_letter_ratio) == (
            other.gates,
            other.max_dead_letters,
            other.max_dead_letter_ratio,
        )

    def to_dict(self) -> dict[str, Any]:
        """``gate_config`` and ``limits``, as stored in a shard summary."""
        return {
            "gate_config": {k: g.model_dump(exclude_none=True) for k, g in sorted(self.gates.items())},
            "limits": {"max_dead_letters": self.max_dead_letters, "max_dead_letter_ratio": self.max_dead_letter_ratio},
        }

    def check(self, stats: RunStats) -> tuple[int, list[str], list[dict[str, Any]]]:
        """Exit code (0, 3 or 4), messages and structured gate results for the totals."""
        code, messages = EXIT_OK, []
        dl, ratio = stats.counts.get("dead_letters", 0), stats.dead_letter_ratio()
        if self.max_dead_letters is not None and dl > self.max_dead_letters:
            code = EXIT_DEAD_LETTERS
            messages.append(f"{dl} dead letters > max_dead_letters {self.max_dead_letters}")
        elif self.max_dead_letter_ratio is not None and ratio > self.max_dead_letter_ratio:
            code = EXIT_DEAD_LETTERS
            messages.append(f"dead-letter ratio {ratio:.4f} > max_dead_letter_ratio {self.max_dead_letter_ratio}")
        results: list[dict[str, Any]] = []
        for key, gate in sorted(self.gates.items()):
            ks = stats.keys.get(key)
            for metric, bound in (("mean", gate.min_mean), ("pass_rate", gate.min_pass_rate)):
                if bound is None:
                    continue
                value = None if ks is None else (ks.mean if metric == "mean" else ks.pass_rate)
                passed = value is not None and value >= bound
                results.append({"key": key, "metric": metric, "min": bound, "value": value, "passed": passed})
                if not passed:
                    why = "no results with this key" if ks is None else f"{metric} {value} < min_{metric} {bound}"
                    messages.append(f"gate {key}: {why}")
                    if code == EXIT_OK:
                        code = EXIT_GATE
        return code, messages, results


@dataclass
class MergeReport:
    """What ``assay merge`` decided."""

    exit_code: int
    summary: dict[str, Any]
    messages: list[str]
    success: bool


def find_shards(fs: ResultsFS, shards: int | None = None) -> tuple[int, dict[int, dict[str, Any]]]:
    """N and the shard summaries present (index → summary). ``shards`` picks N when summaries of
    several N are present (a rerun with another N left old ones behind)."""
    found: dict[int, dict[int, str]] = {}
    for name in fs.list():
        m = _SHARD_RE.match(name)
        if m:
            found.setdefault(int(m.group(2)), {})[int(m.group(1))] = name
    if shards is None:
        if not found:
            raise ConfigError("assay merge: no shard summaries (_SUMMARY.shard-I-of-N.json) in the results")
        if len(found) > 1:
            raise ConfigError(f"assay merge: shard summaries of several shard counts {sorted(found)}; pass --shards N")
        shards = next(iter(found))
    summaries = {}
    for i, name in sorted(found.get(shards, {}).items()):
        try:
            data = orjson.loads(fs.read_bytes(name))
        except (OSError, orjson.JSONDecodeError) as exc:
            raise ConfigError(f"assay merge: cannot read {name}: {exc}") from exc
        summaries[i] = data
    return shards, summaries


def merge_judges(parts: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per-judge statistics of several shards: numbers summed; latencies, rates and in-flight
    gauges cannot be summed meaningfully, so the largest shard value is kept."""
    keep_max = {"latency_p50_s", "latency_p99_s", "rate_rpm", "configured_rpm", "paused_s", "in_flight"}
    out: dict[str, dict[str, Any]] = {}
    for judges in parts:
        for name, j in judges.items():
            acc = out.setdefault(name, {})
            for k, v in j.items():
                if isinstance(v, bool) or not isinstance(v, int | float):
                    acc.setdefault(k, v)
                elif k in keep_max:
                    acc[k] = v if acc.get(k) is None else max(acc[k], v)
                else:
                    acc[k] = acc.get(k, 0) + v
    return out


def _totals(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in parts:
        for k, v in (p.get("totals") or {}).items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                out[k] = out.get(k, 0) + v
    if "cost_usd" in out:
        out["cost_usd"] = round(out["cost_usd"], 8)
    return out


def merge(
    location: str | os.PathLike[str] | ResultsFS,
    *,
    gates: Gates | None = None,
    shards: int | None = None,
    write: bool = True,
) -> MergeReport:
    """Merge the shard summaries at ``location`` (see the module docstring); ``gates`` from the
    run file, else those stored in the shard summaries."""
    fs = location if not isinstance(location, str | os.PathLike) else open_results(location)
    n, parts = find_shards(fs, shards)
    messages: list[str] = []
    missing = [i for i in range(n) if i not in parts]
    if missing:
        messages.append(f"shards without a summary: {', '.join(f'{i}/{n}' for i in missing)}")
    statuses = {i: str(p.get("status")) for i, p in parts.items()}
    unfinished = {i: s for i, s in statuses.items() if s not in WHOLE_STATUSES}
    messages.extend(f"shard {i}/{n} status {s}" for i, s in sorted(unfinished.items()))
    whole = not missing and not unfinished
    applied = gates or _stored_gates(parts)
    stats = merge_summaries(list(parts.values()))
    code, gate_messages, gate_results = applied.check(stats)
    if not whole:
        codes = {_STATUS_EXIT.get(s, EXIT_INFRA) for s in unfinished.values()} | ({EXIT_INFRA} if missing else set())
        # the most actionable first: a failed or missing shard, then budget (resumable), then interrupted
        code = next(c for c in (EXIT_INFRA, EXIT_BUDGET, EXIT_INTERRUPTED) if c in codes)
        status = "incomplete"
    else:
        messages.extend(gate_messages)
        status = {EXIT_OK: "ok", EXIT_GATE: "gate_failed", EXIT_DEAD_LETTERS: "dead_letters"}[code]
    summary = _merged_summary(parts, stats, n, status, code, messages, applied, gate_results if whole else [])
    if write:
        fs.remove(SUCCESS)
        fs.write_bytes(SUMMARY, orjson.dumps(summary, option=orjson.OPT_INDENT_2, default=str))
        if whole:
            fs.write_bytes(SUCCESS, b"")
    return MergeReport(code, summary, messages, whole)


def _stored_gates(parts: Mapping[int, Mapping[str, Any]]) -> Gates:
    stored = [(i, g) for i, p in sorted(parts.items()) if (g := Gates.from_summary(p)) is not None]
    if not stored:
        return Gates(origin="none (the shard summaries store no gates; pass --run-file to apply the run file's)")
    first_i, first = stored[0]
    for i, g in stored[1:]:
        if not g.same_as(first):
            raise ConfigError(
                f"assay merge: shards {first_i} and {i} stored different gates; pass --run-file to choose"
            )
    return first


def _merged_summary(
    parts: Mapping[int, Mapping[str, Any]],
    stats: RunStats,
    n: int,
    status: str,
    code: int,
    messages: list[str],
    gates: Gates,
    gate_results: list[dict[str, Any]],
) -> dict[str, Any]:
    ordered = [parts[i] for i in sorted(parts)]
    data = stats.to_dict()
    started = [p["started_at"] for p in ordered if p.get("started_at")]
    finished = [p["finished_at"] for p in ordered if p.get("finished_at")]
    walls = [float(p["wall_time_s"]) for p in ordered if isinstance(p.get("wall_time_s"), int | float)]
    run_ids = sorted({str(p.get("run_id")) for p in ordered if p.get("run_id")})
    return {
        "run_id": ",".join(run_ids),
        "status": status,
        "exit_code": code,
        "messages": messages,
        "merged_at": dt.datetime.now(dt.UTC).isoformat(),
        "started_at": min(started) if started else None,
        "finished_at": max(finished) if finished else None,
        "wall_time_s": max(walls) if walls else None,
        "records_per_s": round(stats.counts["read"] / max(walls), 1) if walls and max(walls) > 0 else None,
        "counts": data["counts"],
        "evaluators": data["evaluators"],
        "judges": merge_judges([p.get("judges") or {} for p in ordered]),
        "totals": _totals(ordered),
        "gates": gate_results,
        "gates_from": gates.origin,
        **gates.to_dict(),
        "shards": {
            "count": n,
            "present": sorted(parts),
            "run_ids": [parts[i].get("run_id") for i in sorted(parts)],
            "status": {str(i): parts[i].get("status") for i in sorted(parts)},
        },
        "outputs": ordered[0].get("outputs") if ordered else None,
    }
